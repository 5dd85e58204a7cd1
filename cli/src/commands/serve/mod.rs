//! `iommutop serve [--listen ADDR:PORT] [--points LIST] [--device DEV]`: a Prometheus exporter. The probes are
//! attached once and stay attached; `GET /metrics` reads the maps once and answers with every
//! series, `GET /healthz` says whether the collector still runs. SIGINT and SIGTERM stop the
//! server, the collector ends and the probes detach; the exit status is then 0.
//!
//! The order of the checks is the order of what can go wrong cheapest first: the address, the
//! port (bound before anything is attached), the privileges, then the probes.

mod collector;
mod encode;
mod http;
mod listen;
mod names;
mod totals;
mod uevents;

use crate::cli::ServeArgs;
use crate::exit::{Failure, Outcome};
use crate::privileges::require_bpf_privileges;
use anyhow::Context;
use std::process::ExitCode;

pub fn run(args: &ServeArgs) -> Outcome<ExitCode> {
    let address = listen::parse_listen_address(&args.listen)?;
    let device_filter = crate::device_filter::resolve(args.device.as_deref())?;
    let task_filter = crate::task_filter::resolve(&args.tasks)?;
    let listener = listen::bind(address)?;
    require_bpf_privileges()?;
    eprintln!("iommutop: attaching probes…");
    let (requests, collector, attached) = collector::start(
        args.points.clone().unwrap_or_default(),
        device_filter,
        task_filter,
        args.netdev,
    )?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    eprintln!(
        "iommutop: {} probe points attached; serving http://{address}/metrics until SIGINT or \
         SIGTERM",
        attached.points
    );
    for caveat in &attached.caveats {
        eprintln!("iommutop: warning: {caveat}");
    }
    let served = runtime.block_on(http::serve(listener, requests));
    // The server and with it every request sender is gone: the collector ends, the probes detach.
    if collector.join().is_err() {
        return Err(Failure::from(anyhow::anyhow!(
            "the collector thread panicked"
        )));
    }
    served?;
    eprintln!("iommutop: probes detached");
    Ok(ExitCode::SUCCESS)
}
