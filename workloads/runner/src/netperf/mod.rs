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

mod argv;
pub mod parse;
mod reach;
mod results;
mod specs;

use crate::control::RunControl;
use crate::error::WorkloadError;
use crate::netns::{self, Namespaces, Placement};
use crate::params::ParamValues;
use crate::process::{require_tool, Launched};
use crate::window::PerUnit;
use crate::{Workload, WorkloadOutput};
use iommutop_model::workload::{Headline, WorkUnit};
use parse::{parse_line, parse_rr, Line};
use reach::{connect_from, free_port, ip_of, resolve_host, route_device};
pub use results::{summarize, NetperfResults, Nic, NicPerTransaction};
use serde_json::json;
pub use specs::SPECS;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

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

    fn start_netserver(
        &mut self,
        namespace: Option<&str>,
        ip: IpAddr,
    ) -> Result<(), WorkloadError> {
        let argv = argv::netserver_argv(namespace, ip, self.port);
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
}

impl Workload for Netperf {
    fn name(&self) -> &'static str {
        "netperf"
    }

    fn params(&self) -> crate::params::WorkloadParams {
        let mut map = self.params.to_params();
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
                failure = WorkloadError::tool("netperf", said.to_string());
            }
            return Err(failure);
        }
        let result = parse_rr(&output).map_err(|m| WorkloadError::Output {
            tool: "netperf".into(),
            message: m.to_string(),
        })?;
        let mut results = results::results_of(&result);
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
                    let rows = self
                        .nics
                        .iter()
                        .filter_map(|nic| table.get(&nic.pci_address?).map(|row| op(&row.counts)));
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
        let results = iommutop_model::results::WorkloadResults::from(results);
        Ok(WorkloadOutput::new(results, work, warnings))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::WorkloadKind;

    fn netperf(given: serde_json::Value) -> Result<Netperf, WorkloadError> {
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
}
