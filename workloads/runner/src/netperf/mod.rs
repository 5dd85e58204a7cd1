//! netperf request/response (TCP_RR by default): the kernel-comparison case, where
//! `netperf -t TCP_RR -- -r 1024,1024` was 3% slower on a kernel that turned the IOMMU on.
//!
//! Three modes:
//! - `local`: two NICs of this host (cabled to each other) go into two network namespaces this
//!   workload creates, one running netserver, the other netperf; the NICs and their state come
//!   back when it ends. Per NIC it reports DMA maps (and the rest of the probe counts) per
//!   transaction.
//! - `remote`: netperf against a netserver the user runs on `host`.
//! - `loopback`: both ends on 127.0.0.1 (no NIC involved: a baseline and a self-test).

pub mod parse;

use crate::control::RunControl;
use crate::error::WorkloadError;
use crate::netns::{self, Namespaces, Placement};
use crate::params::{DefaultValue, Kind, ParamSpec, ParamValues};
use crate::process::{require_tool, run_quiet, Launched};
use crate::window::{per_unit, PerUnit, ProbeWindow};
use crate::{Workload, WorkloadOutput};
use iommutop_model::workload::{Headline, WorkUnit};
use parse::{parse_line, parse_rr, Line, RrResult, SELECTORS};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::{Duration, Instant};

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

const INSTALL: &str = "install netperf (Debian/Ubuntu: apt-get install netperf, from the non-free \
                       component; Fedora: dnf install netperf)";

#[derive(Debug, Clone, PartialEq)]
enum Mode {
    Local { client: String, server: String },
    Remote { host: String },
    Loopback,
}

impl Mode {
    fn name(&self) -> &'static str {
        match self {
            Mode::Local { .. } => "local",
            Mode::Remote { .. } => "remote",
            Mode::Loopback => "loopback",
        }
    }
}

/// One NIC taking part, for the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Nic {
    role: String,
    name: String,
    pci_address: Option<String>,
    namespace: Option<String>,
    address: Option<String>,
}

pub struct Netperf {
    params: ParamValues,
    mode: Mode,
    test: String,
    request_size: u64,
    response_size: u64,
    duration_s: f64,
    port: u16,
    cpu: bool,
    client_addr: String,
    server_addr: String,
    // Set up by prepare(); dropped in this order: the server first, then the namespaces.
    netserver: Option<Launched>,
    namespaces: Option<Namespaces>,
    client_namespace: Option<String>,
    server_ip: Option<IpAddr>,
    client_ip: Option<IpAddr>,
    nics: Vec<Nic>,
    warnings: Vec<String>,
}

/// The address part of `10.77.0.1/24`.
fn ip_of(key: &str, cidr: &str) -> Result<IpAddr, WorkloadError> {
    let (ip, prefix) = cidr.split_once('/').unwrap_or((cidr, ""));
    let prefix_ok = prefix.is_empty() || prefix.parse::<u8>().is_ok_and(|p| p <= 128);
    match ip.parse() {
        Ok(ip) if prefix_ok => Ok(ip),
        _ => Err(WorkloadError::param(
            key,
            format!("`{cidr}` is not an address with a prefix (10.77.0.1/24)"),
        )),
    }
}

impl Netperf {
    pub fn new(params: ParamValues) -> Result<Netperf, WorkloadError> {
        let host = params.opt_str("host")?.map(str::to_string);
        let nics = if params.has("nics") {
            Some(params.strs("nics")?)
        } else {
            None
        };
        let mode_name = match params.opt_str("mode")? {
            Some(m) => m.to_string(),
            None if host.is_some() => "remote".into(),
            None => "local".into(),
        };
        let mode = match (mode_name.as_str(), host, nics) {
            ("remote", Some(host), _) => Mode::Remote { host },
            ("remote", None, _) => {
                return Err(WorkloadError::param(
                    "host",
                    "remote mode needs the host running netserver: host=ADDRESS",
                ))
            }
            ("local", None, Some(nics)) => {
                let [client, server] = <[String; 2]>::try_from(nics)
                    .map_err(|_| WorkloadError::param("nics", "give two NICs: [client, server]"))?;
                if client == server {
                    return Err(WorkloadError::param(
                        "nics",
                        format!("the two NICs must differ (both are {client})"),
                    ));
                }
                Mode::Local { client, server }
            }
            ("local", Some(_), _) => {
                return Err(WorkloadError::param(
                    "host",
                    "local mode runs both ends here: drop `host`, or use mode=remote",
                ))
            }
            ("local", None, None) => {
                return Err(WorkloadError::param(
                    "nics",
                    "local mode needs two NICs cabled to each other (nics=eth0,eth1), or give \
                     host=ADDRESS for a remote netserver, or mode=loopback",
                ))
            }
            _ => Mode::Loopback,
        };
        let client_addr = params.str("client_addr")?.to_string();
        let server_addr = params.str("server_addr")?.to_string();
        ip_of("client_addr", &client_addr)?;
        ip_of("server_addr", &server_addr)?;
        Ok(Netperf {
            test: params.str("test")?.to_string(),
            request_size: params.u64("request_size")?,
            response_size: params.u64("response_size")?,
            duration_s: params.f64("duration_s")?,
            port: u16::try_from(params.u64("port")?)
                .map_err(|_| WorkloadError::param("port", "out of range"))?,
            cpu: params.bool("cpu")?,
            client_addr,
            server_addr,
            mode,
            params,
            netserver: None,
            namespaces: None,
            client_namespace: None,
            server_ip: None,
            client_ip: None,
            nics: Vec::new(),
            warnings: Vec::new(),
        })
    }

    fn namespace_name(&self, role: &str) -> String {
        format!("iommutop-{}-{role}", std::process::id())
    }

    /// The netperf command line for the prepared set-up.
    fn netperf_argv(&self) -> Vec<String> {
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

    fn start_netserver(
        &mut self,
        namespace: Option<&str>,
        ip: IpAddr,
    ) -> Result<(), WorkloadError> {
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
            self.port.to_string(),
        ]);
        let mut server = Launched::spawn(&argv, false)?;
        let reachable = connect_from(
            self.client_namespace.as_deref(),
            SocketAddr::new(ip, self.port),
            Duration::from_secs(20),
        );
        if let Err(why) = reachable {
            let said = server.stop(libc::SIGTERM, Duration::from_secs(1));
            return Err(WorkloadError::tool(
                "netserver",
                format!(
                    "not reachable at {ip} port {} after 20 s ({why}){}",
                    self.port,
                    if said.trim().is_empty() {
                        String::new()
                    } else {
                        format!(": {}", said.trim().replace('\n', " / "))
                    }
                ),
            ));
        }
        self.netserver = Some(server);
        Ok(())
    }

    /// Each NIC's probe counts per transaction over the window, by PCI address.
    fn per_transaction(
        &self,
        window: &ProbeWindow,
        result: &RrResult,
    ) -> BTreeMap<String, NicPerTransaction> {
        let transactions = result.transactions();
        self.nics
            .iter()
            .filter_map(|nic| {
                let pci = nic.pci_address.as_ref()?;
                let counts = per_unit(window, pci, transactions)?;
                let row = NicPerTransaction {
                    counts,
                    name: nic.name.clone(),
                    role: nic.role.clone(),
                };
                Some((pci.clone(), row))
            })
            .collect()
    }
}

/// Connects to `addr` from `namespace` (a named network namespace, or this one) until it
/// answers or `timeout` passes: the server is up and the path to it works.
fn connect_from(
    namespace: Option<&str>,
    addr: SocketAddr,
    timeout: Duration,
) -> Result<(), String> {
    let attempt = || -> Result<(), String> {
        if let Some(ns) = namespace {
            enter_namespace(ns)?;
        }
        let deadline = Instant::now() + timeout;
        loop {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() >= deadline => return Err(e.to_string()),
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    };
    // A thread of its own: entering a namespace changes only the calling thread, and this one
    // ends right after.
    std::thread::scope(|s| {
        s.spawn(attempt)
            .join()
            .unwrap_or_else(|_| Err("the connecting thread panicked".into()))
    })
}

fn enter_namespace(name: &str) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let path = Path::new("/run/netns").join(name);
    let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: setns() with a descriptor of a network namespace file moves only the calling
    // thread into that namespace; the descriptor is valid for the duration of the call.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(format!(
            "entering namespace {name}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// A free TCP port on 127.0.0.1 (for a loopback netserver).
fn free_port() -> Result<u16, WorkloadError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| WorkloadError::io("finding a free port on 127.0.0.1", e))
}

/// The NIC the route to `host` leaves by (`ip -j route get`), if any.
fn route_device(host: IpAddr) -> Option<String> {
    let json = run_quiet(&["ip", "-j", "route", "get", &host.to_string()]).ok()?;
    let routes: Vec<Value> = serde_json::from_str(&json).ok()?;
    routes.first()?["dev"].as_str().map(str::to_string)
}

fn resolve_host(host: &str) -> Result<IpAddr, WorkloadError> {
    if let Ok(ip) = host.parse() {
        return Ok(ip);
    }
    (host, 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .map(|a| a.ip())
        .ok_or_else(|| WorkloadError::param("host", format!("cannot resolve `{host}`")))
}

impl Workload for Netperf {
    fn name(&self) -> &'static str {
        "netperf"
    }

    fn params(&self) -> Map<String, Value> {
        let mut map = self.params.to_map();
        map.insert("mode".into(), self.mode.name().into());
        map
    }

    fn check(&self) -> Result<(), WorkloadError> {
        require_tool("netperf", INSTALL)?;
        match &self.mode {
            Mode::Local { client, server } => {
                require_tool("netserver", INSTALL)?;
                // SAFETY: geteuid has no preconditions.
                if unsafe { libc::geteuid() } != 0 {
                    return Err(WorkloadError::Environment(
                        "netperf local mode moves NICs into network namespaces: run as root \
                         (or use host=ADDRESS, or mode=loopback)"
                            .into(),
                    ));
                }
                netns::check_ip_netns()?;
                netns::check_movable(client)?;
                netns::check_movable(server)?;
                let (c, s) = (
                    ip_of("client_addr", &self.client_addr)?,
                    ip_of("server_addr", &self.server_addr)?,
                );
                if c == s {
                    return Err(WorkloadError::param(
                        "server_addr",
                        "client_addr and server_addr must differ",
                    ));
                }
            }
            Mode::Remote { host } => {
                resolve_host(host)?;
            }
            Mode::Loopback => {
                require_tool("netserver", INSTALL)?;
            }
        }
        Ok(())
    }

    fn prepare(&mut self) -> Result<(), WorkloadError> {
        match self.mode.clone() {
            Mode::Local { client, server } => {
                self.warnings
                    .extend(iommutop_host::sweep(&iommutop_host::HostRoot::system()));
                let client_ns = self.namespace_name("client");
                let server_ns = self.namespace_name("server");
                for (role, name, namespace, address) in [
                    ("client", &client, &client_ns, &self.client_addr),
                    ("server", &server, &server_ns, &self.server_addr),
                ] {
                    let pci_address = netns::nic_pci_address(name);
                    if pci_address.is_none() {
                        self.warnings.push(format!(
                            "{name} is not a PCI function: no per-NIC probe numbers for it"
                        ));
                    }
                    self.nics.push(Nic {
                        role: role.to_string(),
                        name: name.clone(),
                        pci_address,
                        namespace: Some(namespace.clone()),
                        address: Some(address.clone()),
                    });
                }
                let placements = [
                    Placement {
                        nic: client,
                        namespace: client_ns.clone(),
                        address: self.client_addr.clone(),
                    },
                    Placement {
                        nic: server,
                        namespace: server_ns.clone(),
                        address: self.server_addr.clone(),
                    },
                ];
                self.namespaces = Some(Namespaces::set_up(&placements, Duration::from_secs(20))?);
                self.client_namespace = Some(client_ns);
                let server_ip = ip_of("server_addr", &self.server_addr)?;
                self.server_ip = Some(server_ip);
                self.client_ip = Some(ip_of("client_addr", &self.client_addr)?);
                self.start_netserver(Some(&server_ns), server_ip)?;
            }
            Mode::Remote { host } => {
                let ip = resolve_host(&host)?;
                self.server_ip = Some(ip);
                if let Some(dev) = route_device(ip) {
                    self.nics.push(Nic {
                        role: "client".into(),
                        pci_address: netns::nic_pci_address(&dev),
                        name: dev,
                        namespace: None,
                        address: None,
                    });
                }
                connect_from(None, SocketAddr::new(ip, self.port), Duration::from_secs(5))
                    .map_err(|e| {
                        WorkloadError::Environment(format!(
                            "no netserver answers at {host} port {} ({e}): start `netserver` there",
                            self.port
                        ))
                    })?;
            }
            Mode::Loopback => {
                self.port = free_port()?;
                let ip: IpAddr = [127, 0, 0, 1].into();
                self.server_ip = Some(ip);
                self.start_netserver(None, ip)?;
            }
        }
        Ok(())
    }

    fn run(&mut self, ctl: &mut dyn RunControl) -> Result<WorkloadOutput, WorkloadError> {
        let argv = self.netperf_argv();
        ctl.note(&format!(
            "netperf {} {}/{} for {} s ({})",
            self.test,
            self.request_size,
            self.response_size,
            self.duration_s.round(),
            match &self.mode {
                Mode::Local { client, server } => format!("{client} → {server}"),
                Mode::Remote { host } => format!("to {host}"),
                Mode::Loopback => "loopback".into(),
            }
        ));
        ctl.checkpoint("netperf start");
        let mut launched = Launched::spawn(&argv, true)?;
        let mut output = String::new();
        let finished = launched.wait(ctl, libc::SIGINT, Duration::from_secs(3), |line, ctl| {
            if let Line::Interim { value, .. } = parse_line(line) {
                ctl.live(json!({ "transactions_per_s": value }));
            }
            output.push_str(line);
            output.push('\n');
        })?;
        let window = ctl.checkpoint("netperf");
        if finished.cancelled {
            return Err(WorkloadError::Cancelled);
        }
        if !finished.status.success() {
            let mut failure = finished.failure("netperf");
            if let Err(said) = parse_rr(&output) {
                failure = WorkloadError::tool("netperf", said);
            }
            return Err(failure);
        }
        let result = parse_rr(&output).map_err(|m| WorkloadError::Output {
            tool: "netperf".into(),
            message: m,
        })?;
        let mut results = NetperfResults::of(&result);
        results.test = self.test.clone();
        results.mode = self.mode.name().into();
        results.nics = self.nics.clone();
        let mut warnings = std::mem::take(&mut self.warnings);
        if let Some(window) = &window {
            let table = self.per_transaction(window, &result);
            if table.is_empty() && !self.nics.is_empty() {
                warnings.push(
                    "the probes saw no DMA work on the NICs: no per-transaction counts".into(),
                );
            }
            if !table.is_empty() {
                // Summed in the NICs' order (client first), as reports always were.
                let total = |op: fn(&PerUnit) -> f64| {
                    let rows = self.nics.iter().filter_map(|nic| {
                        table
                            .get(nic.pci_address.as_ref()?)
                            .map(|row| op(&row.counts))
                    });
                    rows.sum()
                };
                results.dma_maps_per_transaction = Some(total(|c| c.dma_map));
                results.iommu_maps_per_transaction = Some(total(|c| c.iommu_map));
            }
            results.per_transaction = Some(table);
            results.probe_window_s = Some(window.duration_s);
        }
        results.command = argv;
        let work = Headline::counted(
            WorkUnit::Transaction,
            result.transactions() as f64,
            "transactions_per_s",
            result.transactions_per_s,
        );
        WorkloadOutput::typed(&results, work, warnings)
    }

    fn restore(&mut self) -> Vec<String> {
        if let Some(mut server) = self.netserver.take() {
            server.stop(libc::SIGTERM, Duration::from_secs(2));
        }
        self.namespaces
            .take()
            .map(|mut ns| ns.restore())
            .unwrap_or_default()
    }
}

impl Drop for Netperf {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

/// One NIC's probe counts per transaction, with the NIC's name and role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NicPerTransaction {
    #[serde(flatten)]
    pub counts: PerUnit,
    pub name: String,
    pub role: String,
}

/// What a netperf run did, as `run.workload.results` holds it: netperf's numbers flat at the top
/// (so that `compare` and `--fail-if workload.KEY` find them), what was run below. A number
/// netperf did not give is absent, not 0.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NetperfResults {
    pub transactions_per_s: f64,
    pub transactions: u64,
    pub elapsed_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_latency_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_latency_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p90_latency_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_latency_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_latency_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_latency_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stddev_latency_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_cpu_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_cpu_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_service_demand_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_service_demand_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmissions: Option<u64>,
    pub test: String,
    pub mode: String,
    pub nics: Vec<Nic>,
    /// The NICs' DMA and IOMMU maps per transaction, summed; absent when the probes saw none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dma_maps_per_transaction: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iommu_maps_per_transaction: Option<f64>,
    /// By PCI address; absent without probes (`iommutop workload`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_transaction: Option<BTreeMap<String, NicPerTransaction>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_window_s: Option<f64>,
    pub command: Vec<String>,
}

impl NetperfResults {
    /// netperf's own numbers; what was run is filled in by the caller.
    pub fn of(r: &RrResult) -> NetperfResults {
        NetperfResults {
            transactions_per_s: r.transactions_per_s,
            transactions: r.transactions(),
            elapsed_s: r.elapsed_s,
            mean_latency_us: r.mean_latency_us,
            p50_latency_us: r.p50_latency_us,
            p90_latency_us: r.p90_latency_us,
            p99_latency_us: r.p99_latency_us,
            min_latency_us: r.min_latency_us,
            max_latency_us: r.max_latency_us,
            stddev_latency_us: r.stddev_latency_us,
            local_cpu_percent: r.local_cpu_percent,
            remote_cpu_percent: r.remote_cpu_percent,
            local_service_demand_us: r.local_service_demand_us,
            remote_service_demand_us: r.remote_service_demand_us,
            request_size: r.request_size,
            response_size: r.response_size,
            retransmissions: r.retransmissions,
            ..NetperfResults::default()
        }
    }
}

/// The headline for a person.
pub fn summarize(results: &Map<String, Value>) -> String {
    let n = |key: &str| results.get(key).and_then(Value::as_f64);
    let mut out = format!(
        "netperf {} {}/{} ({}): {:.1} transactions/s, {} transactions in {:.1} s\n",
        results.get("test").and_then(Value::as_str).unwrap_or("?"),
        n("request_size").unwrap_or(0.0),
        n("response_size").unwrap_or(0.0),
        results.get("mode").and_then(Value::as_str).unwrap_or("?"),
        n("transactions_per_s").unwrap_or(0.0),
        n("transactions").unwrap_or(0.0),
        n("elapsed_s").unwrap_or(0.0),
    );
    let lat: Vec<String> = [
        ("mean", "mean_latency_us"),
        ("p50", "p50_latency_us"),
        ("p90", "p90_latency_us"),
        ("p99", "p99_latency_us"),
    ]
    .iter()
    .filter_map(|(label, key)| n(key).map(|v| format!("{label} {v:.1}")))
    .collect();
    if !lat.is_empty() {
        out.push_str(&format!("  latency µs: {}\n", lat.join("  ")));
    }
    if let (Some(l), Some(r)) = (n("local_cpu_percent"), n("remote_cpu_percent")) {
        out.push_str(&format!("  CPU: local {l:.1} %, remote {r:.1} %\n"));
    }
    if let Some(Value::Object(table)) = results.get("per_transaction") {
        for (pci, row) in table {
            let v = |k: &str| row.get(k).and_then(Value::as_f64).unwrap_or(0.0);
            out.push_str(&format!(
                "  {} {pci}: {:.2} DMA maps, {:.2} IOMMU maps, {:.2} IOTLB flushes per transaction\n",
                row.get("name").and_then(Value::as_str).unwrap_or("?"),
                v("dma_map"),
                v("iommu_map"),
                v("iotlb_flush"),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::WorkloadKind;

    fn netperf(given: Value) -> Result<Netperf, WorkloadError> {
        let params =
            WorkloadKind::Netperf.params(given.as_object().cloned().unwrap_or_default())?;
        Netperf::new(params)
    }

    #[test]
    fn the_mode_follows_from_nics_or_host() {
        assert!(matches!(
            netperf(json!({"nics": ["eth0", "eth1"]})).unwrap().mode,
            Mode::Local { .. }
        ));
        assert!(matches!(
            netperf(json!({"host": "192.0.2.9"})).unwrap().mode,
            Mode::Remote { .. }
        ));
        assert_eq!(
            netperf(json!({"mode": "loopback"})).unwrap().mode,
            Mode::Loopback
        );
        let err = netperf(json!({})).err().unwrap().to_string();
        assert!(
            err.starts_with("parameter `nics`: local mode needs two NICs"),
            "{err}"
        );
        let err = netperf(json!({"nics": ["eth0", "eth0"]}))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("must differ"), "{err}");
        let err = netperf(json!({"mode": "remote"}))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("host=ADDRESS"), "{err}");
        let err = netperf(json!({"nics": ["a", "b"], "client_addr": "10.0.0.300/24"}))
            .err()
            .unwrap()
            .to_string();
        assert!(err.starts_with("parameter `client_addr`"), "{err}");
    }

    #[test]
    fn the_command_line_asks_for_the_selectors_and_interim_results() {
        let mut n = netperf(json!({"nics": ["eth0", "eth1"], "duration_s": 5})).unwrap();
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

    #[test]
    fn results_are_flat_numbers_with_latency_in_microseconds() {
        let r = parse_rr(include_str!("../../testdata/netperf-tcp-rr-k.txt")).unwrap();
        let m = crate::results_map(&NetperfResults::of(&r)).expect("encodes");
        assert_eq!(m["transactions_per_s"], json!(40839.93));
        assert_eq!(m["p99_latency_us"], json!(116.0));
        assert_eq!(m["request_size"], json!(1024));
        let text = summarize(&m);
        assert!(text.contains("40839.9 transactions/s"), "{text}");
        assert!(text.contains("p99 116.0"), "{text}");
    }

    /// The typed results write exactly what a report of the map-building code holds: every key,
    /// and every number as it was spelt (a lab report of TCP_RR between the two NICs).
    #[test]
    fn typed_results_write_what_reports_hold() {
        let report: Value = serde_json::from_str(include_str!(
            "../../../../cli/tests/fixtures/tcp-rr-intel-6.12.json"
        ))
        .expect("fixture");
        let held = report["run"]["workload"]["results"].clone();
        let typed: NetperfResults = serde_json::from_value(held.clone()).expect("typed");
        assert!(typed.per_transaction.as_ref().is_some_and(|t| t.len() == 2));
        let written = Value::Object(crate::results_map(&typed).expect("encodes"));
        assert_eq!(written.to_string(), held.to_string());
    }
}
