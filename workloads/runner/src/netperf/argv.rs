//! The command lines: netperf's for the prepared set-up, and netserver's.

use super::parse::SELECTORS;
use super::Netperf;
use std::net::IpAddr;

impl Netperf {
    /// The netperf command line for the prepared set-up.
    pub(super) fn netperf_argv(&self) -> Vec<String> {
        let mut argv: Vec<String> = Vec::new();
        if let Some(ns) = &self.client_namespace {
            argv.extend(["ip", "netns", "exec", ns].map(String::from));
        }
        argv.push("netperf".into());
        if let Some(ip) = self.server_ip {
            argv.extend(["-H".into(), ip.to_string()]);
        }
        if let Some(ip) = self.client_ip {
            argv.extend(["-L".into(), ip.to_string()]);
        }
        argv.extend([
            "-p".into(),
            self.port.to_string(),
            "-t".into(),
            self.test.clone(),
            "-l".into(),
            format!("{}", self.duration_s.round().max(1.0)),
            "-P".into(),
            "0".into(),
            "-D".into(),
            "1".into(),
        ]);
        if self.cpu {
            argv.extend(["-c".into(), "-C".into()]);
        }
        argv.extend([
            "--".into(),
            "-r".into(),
            format!("{},{}", self.request_size, self.response_size),
            "-k".into(),
            SELECTORS.join(","),
        ]);
        argv
    }
}

/// netserver in the foreground (`-D`), listening on `ip` and `port`, in `namespace` if given.
pub(super) fn netserver_argv(namespace: Option<&str>, ip: IpAddr, port: u16) -> Vec<String> {
    let mut argv: Vec<String> = Vec::new();
    if let Some(ns) = namespace {
        argv.extend(["ip", "netns", "exec", ns].map(String::from));
    }
    argv.extend([
        "netserver".into(),
        "-D".into(),
        if ip.is_ipv4() { "-4" } else { "-6" }.into(),
        "-L".into(),
        ip.to_string(),
        "-p".into(),
        port.to_string(),
    ]);
    argv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::WorkloadKind;
    use serde_json::json;

    #[test]
    fn the_command_line_asks_for_the_selectors_and_interim_results() {
        let given = json!({"nics": ["eth0", "eth1"], "duration_s": 5});
        let params = WorkloadKind::Netperf
            .params(given.as_object().cloned().unwrap())
            .unwrap();
        let mut n = Netperf::new(params).unwrap();
        n.client_namespace = Some("iommutop-1-client".into());
        n.server_ip = Some([10, 77, 0, 2].into());
        n.client_ip = Some([10, 77, 0, 1].into());
        let argv = n.netperf_argv().join(" ");
        assert!(
            argv.starts_with(
                "ip netns exec iommutop-1-client netperf -H 10.77.0.2 -L 10.77.0.1 -p 12865 \
                 -t TCP_RR -l 5 -P 0 -D 1 -c -C -- -r 1024,1024 -k THROUGHPUT,"
            ),
            "{argv}"
        );
        assert!(argv.contains("P99_LATENCY"), "{argv}");
    }
}
