//! The worker process and the parent that supervises it.
//!
//! The I/O runs in a child: this same executable started again with [`WORKER_ARG`]. The parent
//! keeps the restore duty: it binds the controller (and reserves huge pages) before starting the
//! child and undoes both after the child has exited, however it exited — normally, with an
//! error, on SIGINT/SIGTERM (it then stops I/O and reports what it measured), or killed by
//! SIGKILL. The kernel closes a dead process's VFIO files, which stops the device's DMA and
//! releases its mappings, so the parent can rebind it.
//!
//! The program embedding this library must let the worker start: call [`maybe_run`] first
//! thing in `main`.

use crate::changes::HostChanges;
use crate::engine;
use crate::error::Error;
use crate::host::{HostGuard, NvmeHost};
use crate::located::Located;
use crate::params::{PageSize, Params, SweepParams, Target};
use crate::report::VfioNvmeRun;
use crate::sweep::VfioNvmeSweep;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The hidden first argument that makes the executable a worker.
pub const WORKER_ARG: &str = "--iommutop-vfio-nvme-worker";

/// How long a worker may take to stop after SIGTERM before it gets SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(20);

#[derive(Debug, Serialize, Deserialize)]
enum Job {
    Run(Params),
    Sweep(SweepParams),
}

#[derive(Debug, Serialize, Deserialize)]
struct Request {
    parent_pid: u32,
    located: Located,
    job: Job,
}

#[derive(Debug, Serialize, Deserialize)]
enum Reply {
    Run(Box<VfioNvmeRun>),
    Sweep(Box<VfioNvmeSweep>),
    Failed(String),
}

/// Why the worker could not read the job its parent sent.
#[derive(Debug, thiserror::Error)]
enum BadRequest {
    #[error("{0}")]
    Read(std::io::Error),
    #[error("bad request from the parent: {0}")]
    Parse(serde_json::Error),
}

/// If this process was started as a worker, runs it and returns its exit code; otherwise
/// returns `None` at once. Call it first thing in `main`:
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     if let Some(code) = iommutop_vfio_nvme::worker::maybe_run() {
///         return code;
///     }
///     // ... the program proper
///     std::process::ExitCode::SUCCESS
/// }
/// ```
pub fn maybe_run() -> Option<ExitCode> {
    let mut args = std::env::args_os();
    args.next();
    if args.next()? != WORKER_ARG {
        return None;
    }
    Some(worker_main())
}

fn worker_main() -> ExitCode {
    let stop = Arc::new(AtomicBool::new(false));
    let mut reply = None;
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        if let Err(e) = signal_hook::flag::register(signal, Arc::clone(&stop)) {
            reply = Some(Reply::Failed(format!(
                "worker: cannot handle signal {signal}: {e}"
            )));
        }
    }
    // If the parent dies, stop too (it cannot restore then; the next run will).
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number and changes only this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    let mut input = String::new();
    let request = std::io::stdin()
        .read_to_string(&mut input)
        .map_err(BadRequest::Read)
        .and_then(|_| serde_json::from_str::<Request>(&input).map_err(BadRequest::Parse));
    let reply = reply.unwrap_or_else(|| match request {
        Err(e) => Reply::Failed(e.to_string()),
        Ok(req) => {
            // SAFETY: getppid has no preconditions.
            if unsafe { libc::getppid() } as u32 != req.parent_pid {
                Reply::Failed("the parent exited before the worker started".into())
            } else {
                match req.job {
                    Job::Run(p) => engine::run_io(&req.located, &p, &stop)
                        .map(|r| Reply::Run(Box::new(r)))
                        .unwrap_or_else(|e| Reply::Failed(e.to_string())),
                    Job::Sweep(p) => engine::run_sweep(&req.located, &p, &stop)
                        .map(|r| Reply::Sweep(Box::new(r)))
                        .unwrap_or_else(|e| Reply::Failed(e.to_string())),
                }
            }
        }
    });
    let failed = matches!(reply, Reply::Failed(_));
    let mut out = std::io::stdout().lock();
    let written = serde_json::to_writer(&mut out, &reply)
        .map_err(std::io::Error::from)
        .and_then(|_| out.write_all(b"\n"))
        .and_then(|_| out.flush());
    if failed || written.is_err() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        _ => return format!("signal {sig}"),
    };
    format!("{name} (signal {sig})")
}

fn send(child: &Child, sig: i32) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: signalling our own child by pid; it is not reaped yet (we only reap in
        // try_wait), so the pid cannot have been reused.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Starts the worker, hands it the job, waits for it while watching `cancel`, and returns its
/// reply.
fn supervise(request: &Request, cancel: &AtomicBool) -> Result<Reply, Error> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::Worker(format!("cannot find our own executable: {e}")))?;
    let mut child = Command::new(&exe)
        .arg(WORKER_ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Worker(format!("cannot start {}: {e}", exe.display())))?;
    let pid = child.id();
    let text =
        serde_json::to_string(request).map_err(|e| Error::Worker(format!("request: {e}")))?;
    let fed = child
        .stdin
        .take()
        .map(|mut stdin| stdin.write_all(text.as_bytes()));
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out_reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        if let Some(s) = stdout {
            lines.extend(BufReader::new(s).lines().map_while(Result::ok));
        }
        lines
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut s) = stderr {
            let _ = s.read_to_string(&mut text);
        }
        text
    });
    let mut term_sent: Option<Instant> = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                return Err(Error::Worker(format!(
                    "waiting for the worker (pid {pid}): {e}"
                )))
            }
        }
        if cancel.load(Ordering::Relaxed) && term_sent.is_none() {
            send(&child, libc::SIGTERM);
            term_sent = Some(Instant::now());
        }
        if term_sent.is_some_and(|t| t.elapsed() > STOP_GRACE) {
            send(&child, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let lines = out_reader.join().unwrap_or_default();
    let stderr_text = err_reader.join().unwrap_or_default();
    let tail = {
        let t = stderr_text.trim();
        let start = t.len().saturating_sub(2000);
        let start = (start..=t.len())
            .find(|&i| t.is_char_boundary(i))
            .unwrap_or(t.len());
        if t.is_empty() {
            String::new()
        } else {
            format!("; its stderr: {}", &t[start..])
        }
    };
    if let Some(sig) = status.signal() {
        return Err(Error::Worker(format!(
            "the worker (pid {pid}) was killed by {}{tail}",
            signal_name(sig)
        )));
    }
    let reply = lines
        .iter()
        .rev()
        .find_map(|l| serde_json::from_str::<Reply>(l).ok());
    match reply {
        Some(r) => Ok(r),
        None => {
            let fed = match fed {
                Some(Err(e)) => format!(" (the request could not be written: {e})"),
                _ => String::new(),
            };
            Err(Error::Worker(format!(
                "the worker (pid {pid}) exited with {status} and no result{fed}: a program using this library must call iommutop_vfio_nvme::worker::maybe_run() first thing in main{tail}"
            )))
        }
    }
}

/// Runs `job` in a worker between preparing the host and restoring it.
fn with_host<T>(
    target: &Target,
    huge: &[(PageSize, u64)],
    cancel: &AtomicBool,
    job: Job,
    take: impl FnOnce(Reply) -> Result<T, Error>,
) -> Result<(T, HostChanges), Error> {
    let host = NvmeHost::system();
    let (guard, located) = HostGuard::prepare(&host, target, huge)?;
    let request = Request {
        parent_pid: std::process::id(),
        located,
        job,
    };
    let outcome = supervise(&request, cancel).and_then(take);
    match (outcome, guard.restore()) {
        (Ok(value), Ok(changes)) => Ok((value, changes)),
        (Err(e), Ok(changes)) if changes.is_empty() => Err(e),
        (Err(e), Ok(changes)) => Err(Error::Restored {
            source: Box::new(e),
            restored: changes.notes().join("; "),
        }),
        (outcome, Err(restore)) => Err(Error::Restore {
            reason: restore.to_string(),
            run_error: outcome.err().map(Box::new),
        }),
    }
}

/// Runs I/O as `params` say, in a worker process; see the crate docs.
pub fn run(params: &Params, cancel: &AtomicBool) -> Result<VfioNvmeRun, Error> {
    params.validate()?;
    let huge: Vec<(PageSize, u64)> = if params.page_size.is_huge() {
        vec![(
            params.page_size,
            params.pages_per_thread() * u64::from(params.threads),
        )]
    } else {
        Vec::new()
    };
    let (mut result, changes) = with_host(
        &params.target,
        &huge,
        cancel,
        Job::Run(params.clone()),
        |reply| match reply {
            Reply::Run(r) => Ok(*r),
            Reply::Failed(e) => Err(Error::Worker(e)),
            Reply::Sweep(_) => Err(Error::Worker(
                "the worker answered a run with a sweep".into(),
            )),
        },
    )?;
    result.host = changes;
    Ok(result)
}

/// Runs the IOTLB sweep, in a worker process; see the crate docs.
pub fn iotlb_sweep(params: &SweepParams, cancel: &AtomicBool) -> Result<VfioNvmeSweep, Error> {
    params.validate()?;
    // Buffers are mapped one page size at a time: each size needs its own largest buffer.
    let huge: Vec<(PageSize, u64)> = params
        .page_sizes
        .iter()
        .filter(|p| p.is_huge())
        .map(|&p| (p, params.max_pages_for(p)))
        .collect();
    let (mut result, changes) = with_host(
        &params.target,
        &huge,
        cancel,
        Job::Sweep(params.clone()),
        |reply| match reply {
            Reply::Sweep(r) => Ok(*r),
            Reply::Failed(e) => Err(Error::Worker(e)),
            Reply::Run(_) => Err(Error::Worker(
                "the worker answered a sweep with a run".into(),
            )),
        },
    )?;
    result.host = changes;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_named() {
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL (signal 9)");
        assert_eq!(signal_name(64), "signal 64");
    }

    #[test]
    fn replies_round_trip() {
        let r = Reply::Failed("NVMe read: LBA Out of Range".into());
        let text = serde_json::to_string(&r).unwrap();
        assert!(
            matches!(serde_json::from_str::<Reply>(&text).unwrap(), Reply::Failed(m) if m.contains("LBA"))
        );
    }
}
