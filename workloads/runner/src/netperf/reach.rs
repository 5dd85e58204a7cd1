//! Reaching the other end: addresses, names, routes and a netserver that answers, from this
//! network namespace or from one the workload made.

use crate::error::WorkloadError;
use crate::process::run_quiet;
use serde_json::Value;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The address part of `10.77.0.1/24`.
pub(super) fn ip_of(key: &str, cidr: &str) -> Result<IpAddr, WorkloadError> {
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

/// Why the other end did not answer.
#[derive(Debug, thiserror::Error)]
pub(super) enum Unreachable {
    /// No connection before the deadline: the last attempt's error.
    #[error("{0}")]
    Connect(std::io::Error),
    #[error("{}: {source}", path.display())]
    OpenNamespace {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("entering namespace {name}: {source}")]
    EnterNamespace {
        name: String,
        source: std::io::Error,
    },
    #[error("the connecting thread panicked")]
    Panicked,
}

/// Connects to `addr` from `namespace` (a named network namespace, or this one) until it
/// answers or `timeout` passes: the server is up and the path to it works.
pub(super) fn connect_from(
    namespace: Option<&str>,
    addr: SocketAddr,
    timeout: Duration,
) -> Result<(), Unreachable> {
    let attempt = || -> Result<(), Unreachable> {
        if let Some(ns) = namespace {
            enter_namespace(ns)?;
        }
        let deadline = Instant::now() + timeout;
        loop {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() >= deadline => return Err(Unreachable::Connect(e)),
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    };
    // A thread of its own: entering a namespace changes only the calling thread, and this one
    // ends right after.
    std::thread::scope(|s| {
        s.spawn(attempt)
            .join()
            .unwrap_or(Err(Unreachable::Panicked))
    })
}

fn enter_namespace(name: &str) -> Result<(), Unreachable> {
    use std::os::fd::AsRawFd;
    let path = Path::new("/run/netns").join(name);
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(source) => return Err(Unreachable::OpenNamespace { path, source }),
    };
    // SAFETY: setns() with a descriptor of a network namespace file moves only the calling
    // thread into that namespace; the descriptor is valid for the duration of the call.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(Unreachable::EnterNamespace {
            name: name.to_string(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// A free TCP port on 127.0.0.1 (for a loopback netserver).
pub(super) fn free_port() -> Result<u16, WorkloadError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| WorkloadError::io("finding a free port on 127.0.0.1", e))
}

/// The NIC the route to `host` leaves by (`ip -j route get`), if any.
pub(super) fn route_device(host: IpAddr) -> Option<String> {
    let json = run_quiet(&["ip", "-j", "route", "get", &host.to_string()]).ok()?;
    let routes: Vec<Value> = serde_json::from_str(&json).ok()?;
    routes.first()?["dev"].as_str().map(str::to_string)
}

pub(super) fn resolve_host(host: &str) -> Result<IpAddr, WorkloadError> {
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
