//! Verifying and attaching the fentry/fexit hooks a kernel will get on as many threads as there are
//! CPUs for: the kernel does not serialise root's `BPF_PROG_LOAD`, and while one thread's link
//! waits for the kernel's text-patching lock, another's program is being verified. A job is one
//! function: its exit program verified and attached, then its entry program (an exit without its
//! entry is harmless, the reverse leaves frames that are never popped). The BTF tracepoint programs
//! known to be needed are verified on the same threads once the functions are all taken, filling
//! the time a thread would otherwise wait for the last function; they are attached later, in the
//! points' walk (attaching one is quick: no text patching). With multi-function programs
//! ([`super::multi`]), each family is a job of its own, taken first; a family the kernel refuses
//! queues its functions' own jobs behind the rest.

use super::multi::{attach_family, MultiLinks, Served};
use super::multi_shapes::{shape_of, Family};
use crate::calibration::understudy::{self, Understudy};
use crate::object::bpf_syscalls::{BPF_TRACE_FENTRY, BPF_TRACE_FEXIT};
use crate::object::object_copy::ObjectCopy;
use crate::points::hook_error::HookError;
use crate::timing::{log_verified_size, timed};
use crate::LOADER_LOG;
use aya::programs::{FEntry, Program};
use aya::{Btf, Ebpf};
use aya_obj::btf::BtfKind;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// A kernel function and its fentry/fexit programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FunctionJob {
    pub function: &'static str,
    pub exit: &'static str,
    pub entry: Option<&'static str>,
}

/// A BTF tracepoint program to verify against its event, attached later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TracepointJob {
    pub program: &'static str,
    pub event: &'static str,
}

/// How each job fared: by function, and by tracepoint program (verified, not yet attached); the
/// multi-function programs' links, and the functions they serve; the per-function programs'
/// understudies.
#[derive(Default)]
pub(crate) struct Outcomes {
    pub functions: HashMap<&'static str, Result<(), HookError>>,
    pub tracepoints: HashMap<TracepointJob, Result<(), HookError>>,
    pub multi: Vec<MultiLinks>,
    /// Each function a multi-function program serves.
    pub served_by_multi: Vec<Served>,
    pub understudies: Vec<Understudy>,
}

/// What our own loader loads from ([`crate::object::object_copy`]), and whether each timed program gets
/// an understudy ([`crate::calibration::understudy`]).
#[derive(Clone, Copy)]
pub(crate) struct OwnLoader<'a> {
    pub copy: &'a ObjectCopy,
    /// Multi-function families are tried (the kernel links one program to many functions).
    pub multi: bool,
    pub understudies: bool,
}

/// Threads to verify and attach on: the CPUs this process may run on, at most 8.
pub(crate) fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .min(8)
}

/// Verifies and attaches every function job's programs, then verifies every tracepoint job's, on
/// `threads` threads, jobs taken in order. Once an fexit program is refused for want of
/// `bpf_get_func_ret`, the function jobs not yet started are not tried: every other fexit would
/// be refused for it too.
pub(crate) fn attach_all(
    ebpf: &mut Ebpf,
    btf: &Btf,
    own: Option<OwnLoader>,
    functions: &[FunctionJob],
    tracepoints: &[TracepointJob],
    threads: usize,
) -> Outcomes {
    let multi = own.filter(|own| own.multi);
    let understudies = own.filter(|own| own.understudies).map(|own| own.copy);
    let mut programs: HashMap<&str, &mut Program> = ebpf.programs_mut().collect();
    let mut outcomes = Outcomes::default();
    let mut ready = VecDeque::new();
    let mut families: BTreeMap<Family, Vec<Member>> = BTreeMap::new();
    for job in functions {
        let exit = programs.remove(job.exit);
        let entry = job.entry.map(|name| programs.remove(name));
        match (exit, entry) {
            (Some(exit), None) => ready.push_back(Job::Function(*job, exit, None)),
            (Some(exit), Some(Some(entry))) => match multi.and_then(|_| served_as(btf, job)) {
                Some((family, id, cookie)) => families.entry(family).or_default().push(Member {
                    job: *job,
                    id,
                    cookie,
                    exit,
                    entry,
                }),
                None => ready.push_back(Job::Function(*job, exit, Some(entry))),
            },
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
            Some(program) => ready.push_back(Job::Tracepoint(*job, program)),
            None => {
                outcomes
                    .tracepoints
                    .insert(*job, Err(missing_program(job.program)));
            }
        }
    }
    // The families first: each is the most a thread can verify at once, and a family the kernel
    // refuses falls back to its functions' own programs, queued behind.
    if let Some(own) = multi {
        for (family, members) in families.into_iter().rev() {
            ready.push_front(Job::Multi(own, family, members));
        }
    }
    let queue = Mutex::new(ready);
    let no_func_ret = AtomicBool::new(false);
    let finished = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| scope.spawn(|| work_through(&queue, btf, understudies, &no_func_ret)))
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
            Done::Function(function, outcome, understudies) => {
                outcomes.functions.insert(function, outcome);
                outcomes.understudies.extend(understudies);
            }
            Done::Tracepoint(job, outcome) => {
                outcomes.tracepoints.insert(job, outcome);
            }
            Done::Multi(family, jobs, links) => {
                for job in jobs {
                    outcomes.functions.insert(job.function, Ok(()));
                    outcomes.served_by_multi.push(Served {
                        own_entry: job.entry,
                        own_exit: job.exit,
                        family,
                    });
                }
                outcomes.multi.push(links);
            }
        }
    }
    outcomes
}

/// A function a multi-function program can serve: its family, its id in the kernel's BTF and
/// its cookie ([`super::multi_shapes`]).
fn served_as(btf: &Btf, job: &FunctionJob) -> Option<(Family, u32, u64)> {
    let shape = shape_of(job.entry?)?;
    let id = btf.id_by_type_name_kind(job.function, BtfKind::Func).ok()?;
    Some((shape.family, id, shape.cookie))
}

/// A function of a family, with its own programs to fall back to.
struct Member<'p> {
    job: FunctionJob,
    id: u32,
    cookie: u64,
    exit: &'p mut Program,
    entry: &'p mut Program,
}

enum Job<'p> {
    Function(FunctionJob, &'p mut Program, Option<&'p mut Program>),
    Tracepoint(TracepointJob, &'p mut Program),
    Multi(OwnLoader<'p>, Family, Vec<Member<'p>>),
}

enum Done {
    Function(&'static str, Result<(), HookError>, Vec<Understudy>),
    Tracepoint(TracepointJob, Result<(), HookError>),
    Multi(Family, Vec<FunctionJob>, MultiLinks),
}

fn work_through<'p>(
    queue: &Mutex<VecDeque<Job<'p>>>,
    btf: &Btf,
    understudies: Option<&ObjectCopy>,
    no_func_ret: &AtomicBool,
) -> Vec<Done> {
    let mut done = Vec::new();
    loop {
        let next = queue.lock().map(|mut jobs| jobs.pop_front());
        match next {
            Ok(Some(Job::Multi(own, family, members))) => {
                let functions: Vec<(u32, u64)> = members.iter().map(|m| (m.id, m.cookie)).collect();
                let (entry, _) = family.programs();
                match attach_family(own.copy, btf, family, &functions, own.understudies) {
                    Ok(links) => {
                        log::debug!(target: LOADER_LOG, "{entry}: serves {} functions", members.len());
                        done.push(Done::Multi(
                            family,
                            members.iter().map(|m| m.job).collect(),
                            links,
                        ));
                    }
                    Err(e) => {
                        log::info!(target: LOADER_LOG, "{entry}: {e}: each of its {} functions on its own programs", members.len());
                        if let Ok(mut jobs) = queue.lock() {
                            for m in members {
                                jobs.push_back(Job::Function(m.job, m.exit, Some(m.entry)));
                            }
                        }
                    }
                }
            }
            Ok(Some(Job::Function(job, exit, entry))) => {
                let (outcome, understudies) = if no_func_ret.load(Ordering::Relaxed) {
                    (Err(HookError::NoFuncRet), Vec::new())
                } else {
                    attach_function(btf, job, exit, entry, understudies)
                };
                if outcome == Err(HookError::NoFuncRet) {
                    no_func_ret.store(true, Ordering::Relaxed);
                }
                done.push(Done::Function(job.function, outcome, understudies));
            }
            Ok(Some(Job::Tracepoint(job, program))) => {
                done.push(Done::Tracepoint(job, verify_tracepoint(btf, job, program)));
            }
            Ok(None) | Err(_) => return done,
        }
    }
}

/// Attaches a function's exit program, then its entry program (aya's); with `understudies`,
/// each one's understudy is linked just before it ([`crate::calibration::understudy`]), so that it runs after
/// its lead. An understudy that cannot be attached leaves its lead alone, and says why.
fn attach_function(
    btf: &Btf,
    job: FunctionJob,
    exit: &mut Program,
    entry: Option<&mut Program>,
    understudies: Option<&ObjectCopy>,
) -> (Result<(), HookError>, Vec<Understudy>) {
    let mut attached = Vec::new();
    let mut understudy_of = |lead: &'static str, attach_type: u32| {
        let Some(copy) = understudies else {
            return;
        };
        match understudy::attach(copy, btf, lead, job.function, attach_type) {
            Ok(understudy) => attached.push(understudy),
            Err(e) => log::info!(target: LOADER_LOG, "{lead}: no understudy: {e}"),
        }
    };
    let Program::FExit(fexit) = exit else {
        return (Err(wrong_type(job.exit, "an fentry/fexit")), attached);
    };
    if let Err(e) = timed(job.exit, "verified", || fexit.load(job.function, btf)) {
        return (Err(e.into()), attached);
    }
    log_verified_size(job.exit, || fexit.info());
    understudy_of(job.exit, BPF_TRACE_FEXIT);
    let exit_link = match timed(job.exit, "attached", || fexit.attach()) {
        Ok(link) => link,
        Err(e) => return (Err(e.into()), attached),
    };
    let (Some(entry_name), Some(entry)) = (job.entry, entry) else {
        return (Ok(()), attached);
    };
    let entry_result = match entry {
        Program::FEntry(fentry) => attach_entry(btf, job.function, entry_name, fentry, || {
            understudy_of(entry_name, BPF_TRACE_FENTRY)
        }),
        _ => Err(wrong_type(entry_name, "an fentry/fexit")),
    };
    if entry_result.is_err() {
        if let Err(e) = fexit.detach(exit_link) {
            log::debug!(target: LOADER_LOG, "{}: detaching after its entry failed: {e}", job.exit);
        }
    }
    (entry_result, attached)
}

/// Loads and attaches an entry program, its understudy linked (`understudy`) in between.
fn attach_entry(
    btf: &Btf,
    function: &str,
    name: &str,
    fentry: &mut FEntry,
    understudy: impl FnOnce(),
) -> Result<(), HookError> {
    timed(name, "verified", || fentry.load(function, btf))?;
    log_verified_size(name, || fentry.info());
    understudy();
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
