//! Verifying and attaching the fentry/fexit hooks a kernel will get on as many threads as there
//! are CPUs for (issue 30): the kernel does not serialise root's `BPF_PROG_LOAD`, and while one
//! thread's link waits for the kernel's text-patching lock, another's program is being verified.
//! A job is one function: its exit program verified and attached, then its entry program (an
//! exit without its entry is harmless, the reverse leaves frames that are never popped).

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

/// Threads to verify and attach on: the CPUs this process may run on, at most 8.
pub(super) fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .min(8)
}

/// Verifies and attaches every job's programs on `threads` threads, jobs taken in order; each
/// function's outcome. Once an fexit program is refused for want of `bpf_get_func_ret`, the jobs
/// not yet started are not tried: every other fexit would be refused for it too.
pub(super) fn attach_all(
    ebpf: &mut Ebpf,
    btf: &Btf,
    jobs: &[FunctionJob],
    threads: usize,
) -> HashMap<&'static str, Result<(), HookError>> {
    let mut programs: HashMap<&str, &mut Program> = ebpf.programs_mut().collect();
    let mut outcomes = HashMap::new();
    let mut ready = Vec::new();
    for job in jobs {
        let exit = programs.remove(job.exit);
        let entry = job.entry.map(|name| programs.remove(name));
        match (exit, entry) {
            (Some(exit), None) => ready.push((*job, exit, None)),
            (Some(exit), Some(Some(entry))) => ready.push((*job, exit, Some(entry))),
            (exit, _) => {
                let absent = if exit.is_none() {
                    job.exit
                } else {
                    job.entry.unwrap_or(job.exit)
                };
                let missing = format!(
                    "the BPF object has no program `{absent}`, or two functions share it (rebuild)"
                );
                outcomes.insert(job.function, Err(HookError::Object(missing)));
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
    outcomes.extend(finished);
    outcomes
}

type Job<'p> = (FunctionJob, &'p mut Program, Option<&'p mut Program>);

fn work_through<'p>(
    queue: &Mutex<impl Iterator<Item = Job<'p>>>,
    btf: &Btf,
    no_func_ret: &AtomicBool,
) -> Vec<(&'static str, Result<(), HookError>)> {
    let mut done = Vec::new();
    loop {
        let next = queue.lock().map(|mut jobs| jobs.next());
        let Ok(Some((job, exit, entry))) = next else {
            return done;
        };
        let outcome = if no_func_ret.load(Ordering::Relaxed) {
            Err(HookError::NoFuncRet)
        } else {
            attach_function(btf, job, exit, entry)
        };
        if outcome == Err(HookError::NoFuncRet) {
            no_func_ret.store(true, Ordering::Relaxed);
        }
        done.push((job.function, outcome));
    }
}

fn attach_function(
    btf: &Btf,
    job: FunctionJob,
    exit: &mut Program,
    entry: Option<&mut Program>,
) -> Result<(), HookError> {
    let Program::FExit(fexit) = exit else {
        return Err(wrong_type(job.exit));
    };
    timed(job.exit, "verified", || fexit.load(job.function, btf))?;
    log_verified_size(job.exit, || fexit.info());
    let exit_link = timed(job.exit, "attached", || fexit.attach())?;
    let (Some(entry_name), Some(entry)) = (job.entry, entry) else {
        return Ok(());
    };
    let entry_result = match entry {
        Program::FEntry(fentry) => attach_entry(btf, job.function, entry_name, fentry),
        _ => Err(wrong_type(entry_name)),
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

fn wrong_type(program: &str) -> HookError {
    HookError::Object(format!(
        "program `{program}` is not an fentry/fexit program (rebuild)"
    ))
}
