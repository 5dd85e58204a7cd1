//! Verifying and attaching the fentry/fexit hooks a kernel will get on as many threads as there
//! are CPUs for (issue 30): the kernel does not serialise root's `BPF_PROG_LOAD`, and while one
//! thread's link waits for the kernel's text-patching lock, another's program is being verified.
//! A job is one function: its exit program verified and attached, then its entry program (an
//! exit without its entry is harmless, the reverse leaves frames that are never popped). The
//! BTF tracepoint programs known to be needed are verified on the same threads once the functions
//! are all taken, filling the time a thread would otherwise wait for the last function; they are
//! attached later, in the points' walk (attaching one is quick: no text patching).

use super::hook_error::HookError;
use super::timing::{log_verified_size, timed};
use super::LOADER_LOG;
use aya::programs::{FEntry, Program};
use aya::{Btf, Ebpf};
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// A kernel function and its fentry/fexit programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FunctionJob {
    pub function: &'static str,
    pub exit: &'static str,
    pub entry: Option<&'static str>,
}

/// A BTF tracepoint program to verify against its event, attached later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct TracepointJob {
    pub program: &'static str,
    pub event: &'static str,
}

/// How each job fared: by function, and by tracepoint program (verified, not yet attached).
#[derive(Debug, Default)]
pub(super) struct Outcomes {
    pub functions: HashMap<&'static str, Result<(), HookError>>,
    pub tracepoints: HashMap<TracepointJob, Result<(), HookError>>,
}

/// Threads to verify and attach on: the CPUs this process may run on, at most 8.
pub(super) fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .min(8)
}

/// Verifies and attaches every function job's programs, then verifies every tracepoint job's, on
/// `threads` threads, jobs taken in order. Once an fexit program is refused for want of
/// `bpf_get_func_ret`, the function jobs not yet started are not tried: every other fexit would
/// be refused for it too.
pub(super) fn attach_all(
    ebpf: &mut Ebpf,
    btf: &Btf,
    functions: &[FunctionJob],
    tracepoints: &[TracepointJob],
    threads: usize,
) -> Outcomes {
    let mut programs: HashMap<&str, &mut Program> = ebpf.programs_mut().collect();
    let mut outcomes = Outcomes::default();
    let mut ready = Vec::new();
    for job in functions {
        let exit = programs.remove(job.exit);
        let entry = job.entry.map(|name| programs.remove(name));
        match (exit, entry) {
            (Some(exit), None) => ready.push(Job::Function(*job, exit, None)),
            (Some(exit), Some(Some(entry))) => ready.push(Job::Function(*job, exit, Some(entry))),
            (exit, _) => {
                let absent = if exit.is_none() {
                    job.exit
                } else {
                    job.entry.unwrap_or(job.exit)
                };
                outcomes
                    .functions
                    .insert(job.function, Err(missing_program(absent)));
            }
        }
    }
    for job in tracepoints {
        match programs.remove(job.program) {
            Some(program) => ready.push(Job::Tracepoint(*job, program)),
            None => {
                outcomes
                    .tracepoints
                    .insert(*job, Err(missing_program(job.program)));
            }
        }
    }
    let queue = Mutex::new(ready.into_iter());
    let no_func_ret = AtomicBool::new(false);
    let finished = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| scope.spawn(|| work_through(&queue, btf, &no_func_ret)))
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
            .collect::<Vec<_>>()
    });
    for done in finished {
        match done {
            Done::Function(function, outcome) => outcomes.functions.insert(function, outcome),
            Done::Tracepoint(job, outcome) => outcomes.tracepoints.insert(job, outcome),
        };
    }
    outcomes
}

enum Job<'p> {
    Function(FunctionJob, &'p mut Program, Option<&'p mut Program>),
    Tracepoint(TracepointJob, &'p mut Program),
}

enum Done {
    Function(&'static str, Result<(), HookError>),
    Tracepoint(TracepointJob, Result<(), HookError>),
}

fn work_through<'p>(
    queue: &Mutex<impl Iterator<Item = Job<'p>>>,
    btf: &Btf,
    no_func_ret: &AtomicBool,
) -> Vec<Done> {
    let mut done = Vec::new();
    loop {
        let next = queue.lock().map(|mut jobs| jobs.next());
        match next {
            Ok(Some(Job::Function(job, exit, entry))) => {
                let outcome = if no_func_ret.load(Ordering::Relaxed) {
                    Err(HookError::NoFuncRet)
                } else {
                    attach_function(btf, job, exit, entry)
                };
                if outcome == Err(HookError::NoFuncRet) {
                    no_func_ret.store(true, Ordering::Relaxed);
                }
                done.push(Done::Function(job.function, outcome));
            }
            Ok(Some(Job::Tracepoint(job, program))) => {
                done.push(Done::Tracepoint(job, verify_tracepoint(btf, job, program)));
            }
            Ok(None) | Err(_) => return done,
        }
    }
}

fn attach_function(
    btf: &Btf,
    job: FunctionJob,
    exit: &mut Program,
    entry: Option<&mut Program>,
) -> Result<(), HookError> {
    let Program::FExit(fexit) = exit else {
        return Err(wrong_type(job.exit, "an fentry/fexit"));
    };
    timed(job.exit, "verified", || fexit.load(job.function, btf))?;
    log_verified_size(job.exit, || fexit.info());
    let exit_link = timed(job.exit, "attached", || fexit.attach())?;
    let (Some(entry_name), Some(entry)) = (job.entry, entry) else {
        return Ok(());
    };
    let entry_result = match entry {
        Program::FEntry(fentry) => attach_entry(btf, job.function, entry_name, fentry),
        _ => Err(wrong_type(entry_name, "an fentry/fexit")),
    };
    if entry_result.is_err() {
        if let Err(e) = fexit.detach(exit_link) {
            log::debug!(target: LOADER_LOG, "{}: detaching after its entry failed: {e}", job.exit);
        }
    }
    entry_result
}

fn attach_entry(
    btf: &Btf,
    function: &str,
    name: &str,
    fentry: &mut FEntry,
) -> Result<(), HookError> {
    timed(name, "verified", || fentry.load(function, btf))?;
    log_verified_size(name, || fentry.info());
    timed(name, "attached", || fentry.attach())?;
    Ok(())
}

fn verify_tracepoint(
    btf: &Btf,
    job: TracepointJob,
    program: &mut Program,
) -> Result<(), HookError> {
    let Program::BtfTracePoint(tracepoint) = program else {
        return Err(wrong_type(job.program, "a BTF tracepoint"));
    };
    timed(job.program, "verified", || tracepoint.load(job.event, btf))?;
    log_verified_size(job.program, || tracepoint.info());
    Ok(())
}

fn missing_program(name: &str) -> HookError {
    HookError::Object(format!(
        "the BPF object has no program `{name}`, or two hooks share it (rebuild)"
    ))
}

fn wrong_type(program: &str, kind: &str) -> HookError {
    HookError::Object(format!(
        "program `{program}` is not {kind} program (rebuild)"
    ))
}
