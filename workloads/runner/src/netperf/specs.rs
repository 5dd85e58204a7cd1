//! netperf's parameters, as profiles and `--param` give them.

use crate::params::{DefaultValue, Kind, ParamSpec};

pub const SPECS: &[ParamSpec] = &[
    ParamSpec {
        key: "test",
        kind: Kind::Choice(&["TCP_RR", "TCP_CRR", "UDP_RR"]),
        default: DefaultValue::Str("TCP_RR"),
        help: "netperf test (`-t`)",
    },
    ParamSpec {
        key: "request_size",
        kind: Kind::Size {
            min: 1,
            max: 64 << 20,
        },
        default: DefaultValue::Int(1024),
        help: "request bytes (`-r REQ,RSP`)",
    },
    ParamSpec {
        key: "response_size",
        kind: Kind::Size {
            min: 1,
            max: 64 << 20,
        },
        default: DefaultValue::Int(1024),
        help: "response bytes",
    },
    ParamSpec {
        key: "duration_s",
        kind: Kind::Float {
            min: 1.0,
            max: 86_400.0,
        },
        default: DefaultValue::Float(10.0),
        help: "test length in seconds (`-l`)",
    },
    ParamSpec {
        key: "mode",
        kind: Kind::Choice(&["local", "remote", "loopback"]),
        default: DefaultValue::Unset,
        help: "`local` (two NICs in two namespaces), `remote` (netserver on `host`), `loopback`; default: remote if `host` is given, else local",
    },
    ParamSpec {
        key: "nics",
        kind: Kind::StrList {
            min_len: 2,
            max_len: 2,
        },
        default: DefaultValue::Unset,
        help: "local mode: [client NIC, server NIC], cabled to each other; moved into namespaces and back",
    },
    ParamSpec {
        key: "host",
        kind: Kind::Str,
        default: DefaultValue::Unset,
        help: "remote mode: the host running netserver",
    },
    ParamSpec {
        key: "port",
        kind: Kind::Int { min: 1, max: 65535 },
        default: DefaultValue::Int(12865),
        help: "netserver's control port (`-p`); loopback mode picks a free one",
    },
    ParamSpec {
        key: "client_addr",
        kind: Kind::Str,
        default: DefaultValue::Str("10.77.0.1/24"),
        help: "local mode: the client NIC's address in its namespace",
    },
    ParamSpec {
        key: "server_addr",
        kind: Kind::Str,
        default: DefaultValue::Str("10.77.0.2/24"),
        help: "local mode: the server NIC's address in its namespace",
    },
    ParamSpec {
        key: "cpu",
        kind: Kind::Bool,
        default: DefaultValue::Bool(true),
        help: "measure CPU utilisation on both ends (`-c -C`)",
    },
];
