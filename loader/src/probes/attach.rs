//! Attaching a probe point: each of its hooks on the cheapest tier that takes it (fentry, kprobe,
//! tracepoint), with what the running kernel offers learnt on the way, and the scheduler's switch.

use crate::kernel::kallsyms::KallsymsFacts;
use crate::kernel::vendors::MachineVendors;
use crate::links::fentry_jobs::OwnLoader;
use crate::links::fentry_jobs::{self, FunctionJob, TracepointJob};
use crate::links::multi::MultiAttached;
use crate::object::load::program;
use crate::object::verifier_log::describe;
use crate::points::hook_error::HookError;
use crate::points::status::{HookOutcome, PointStatus, Refusal};
use crate::points::table::{FunctionHook, Point, Programs, Tier, TracepointHook};
use crate::LOADER_LOG;
use aya::programs::{BtfTracePoint, KProbe, ProgramError};
use aya::{Btf, Ebpf};
use std::collections::HashMap;
use std::time::Instant;

/// Attaches a point hook by hook: each kernel function on the cheapest tier that takes it (fentry,
/// else kprobe: a function in a module has no vmlinux BTF for fentry but takes a kprobe), and the
/// tracepoints only when no function could be hooked (they see the same calls: both would count
/// them twice). The point's tier is the costliest its hooks got.
pub(crate) fn attach_point(
    ebpf: &mut Ebpf,
    btf: &Btf,
    kernel: &mut KernelSupport,
    point: &'static Point,
) -> PointStatus {
    let (mut hooks, fentry_refused, kprobe_refused) = attach_functions(ebpf, kernel, point);
    let mut refused = Vec::new();
    let tier = hooks.iter().filter_map(|h| h.tier).max();
    if point.functions.is_empty() {
        refused.push(Refusal {
            tier: Tier::Fentry,
            reason: "no fentry or kprobe hook exists for this point".into(),
        });
    } else if tier != Some(Tier::Fentry) && !fentry_refused.is_empty() {
        refused.push(Refusal {
            tier: Tier::Fentry,
            reason: HookOutcome::summarize_failures(&fentry_refused),
        });
    }
    if tier.is_some() {
        // The functions that failed on both tiers stay listed: absent ones say so.
        hooks.extend(kprobe_refused);
        return PointStatus {
            point: point.name,
            op: point.op,
            tier,
            hooks,
            refused,
            caveats: tier.map_or_else(Vec::new, |tier| kernel.caveats_of(point, tier)),
        };
    }
    if !kprobe_refused.is_empty() {
        refused.push(Refusal {
            tier: Tier::Kprobe,
            reason: HookOutcome::summarize_failures(&kprobe_refused),
        });
    }
    let outcomes: Vec<HookOutcome> = point
        .tracepoints
        .iter()
        .map(|t| attach_tracepoint(ebpf, btf, t, kernel.verified_ahead(t.program, t.name)))
        .collect();
    if outcomes.is_empty() {
        refused.push(Refusal {
            tier: Tier::Tracepoint,
            reason: "no tracepoint exists for this point".into(),
        });
    } else if outcomes.iter().any(HookOutcome::is_attached) {
        return PointStatus {
            point: point.name,
            op: point.op,
            tier: Some(Tier::Tracepoint),
            hooks: outcomes
                .into_iter()
                .map(|o| o.at(Tier::Tracepoint))
                .collect(),
            refused,
            caveats: kernel.caveats_of(point, Tier::Tracepoint),
        };
    } else {
        refused.push(Refusal {
            tier: Tier::Tracepoint,
            reason: HookOutcome::summarize_failures(&outcomes),
        });
    }
    PointStatus {
        point: point.name,
        op: point.op,
        tier: None,
        hooks: Vec::new(),
        refused,
        caveats: Vec::new(),
    }
}

/// Each of the point's kernel functions this kernel has, on fentry else kprobe: the hooks that
/// attached, and those refused on fentry and on kprobe (absent ones with the latter).
fn attach_functions(
    ebpf: &mut Ebpf,
    kernel: &mut KernelSupport,
    point: &'static Point,
) -> (Vec<HookOutcome>, Vec<HookOutcome>, Vec<HookOutcome>) {
    let mut hooks = Vec::new();
    let mut fentry_refused = Vec::new();
    let mut kprobe_refused = Vec::new();
    for function in point.functions {
        if let Some(vendors) = kernel.vendor_elsewhere(function) {
            log::debug!(
                target: LOADER_LOG,
                "{}: {} left out here: {vendors}",
                point.name,
                function.symbol
            );
            continue;
        }
        if !kernel.is_era_of(function) {
            log::debug!(
                target: LOADER_LOG,
                "{}: {} left out here: another era's code path, or a wrapper of a hooked function",
                point.name,
                function.symbol
            );
            continue;
        }
        if let Some(absent) = kernel.absence(function.symbol) {
            log::debug!(target: LOADER_LOG, "{}: {} is not in this kernel", point.name, function.symbol);
            kprobe_refused.push(absent);
            continue;
        }
        let fentry = kernel.fentry_outcome(function);
        if fentry.is_attached() {
            log::debug!(target: LOADER_LOG, "{}: {} attached on fentry", point.name, function.symbol);
            hooks.push(fentry.at(Tier::Fentry));
            continue;
        }
        let kprobe = attach_kprobe(ebpf, function);
        log::debug!(
                target: LOADER_LOG,
            "{}: {} refused on fentry ({}); kprobe: {}",
            point.name,
            function.symbol,
            fentry.error.as_deref().unwrap_or(""),
            kprobe.error.as_deref().unwrap_or("attached")
        );
        fentry_refused.push(fentry);
        if kprobe.is_attached() {
            hooks.push(kprobe.at(Tier::Kprobe));
        } else {
            kprobe_refused.push(kprobe);
        }
    }
    (hooks, fentry_refused, kprobe_refused)
}

/// What the running kernel offers: which functions exist, which IOMMU drivers run, and how each
/// function's fentry and fexit programs fared ([`crate::links::fentry_jobs`]).
pub(crate) struct KernelSupport {
    functions: Option<KallsymsFacts>,
    iommu_vendors: MachineVendors,
    /// Each function's fentry/fexit outcome, attached ahead of the points' walk, by symbol.
    fentry_outcomes: HashMap<&'static str, Result<(), HookError>>,
    /// Each BTF tracepoint program verified ahead of the points' walk, by name and event: until
    /// attached.
    tracepoints_verified: HashMap<TracepointJob, Result<(), HookError>>,
}

impl KernelSupport {
    /// From what /proc/kallsyms told, if it could be read, and the machine's IOMMU units.
    pub(crate) fn probe(
        kallsyms: Option<KallsymsFacts>,
        iommu_vendors: MachineVendors,
    ) -> KernelSupport {
        KernelSupport {
            functions: kallsyms,
            iommu_vendors,
            fentry_outcomes: HashMap::new(),
            tracepoints_verified: HashMap::new(),
        }
    }

    /// Whether the kernel has the function `name` (false where kallsyms could not be read).
    pub(crate) fn has_function(&self, name: &str) -> bool {
        self.functions
            .as_ref()
            .is_some_and(|f| f.has_function(name))
    }

    /// Whether the kernel links one tracing program to many functions ([`crate::links::multi`]).
    pub(crate) fn has_multi_links(&self) -> bool {
        self.functions
            .as_ref()
            .is_some_and(|f| f.has_function(crate::links::multi::KERNEL_MARKER))
    }

    /// The functions `points` will try on fentry here, with their programs: each hook of its
    /// era and of this machine's IOMMU vendors that the kernel has.
    pub(crate) fn fentry_jobs<'p>(
        &self,
        points: impl IntoIterator<Item = &'p Point>,
    ) -> Vec<FunctionJob> {
        points
            .into_iter()
            .flat_map(|point| point.functions)
            .filter(|hook| {
                self.vendor_elsewhere(hook).is_none()
                    && self.is_era_of(hook)
                    && self.absence(hook.symbol).is_none()
            })
            .filter_map(|hook| {
                hook.fentry.map(|programs| FunctionJob {
                    function: hook.symbol,
                    exit: programs.exit,
                    entry: programs.entry,
                })
            })
            .collect()
    }

    /// Verifies and attaches `points`' fentry and fexit programs, and verifies the BTF tracepoint
    /// programs they will need whatever those get, on `threads` threads
    /// ([`crate::links::fentry_jobs`]), before the points are walked in order.
    pub(crate) fn attach_ahead<'p>(
        &mut self,
        ebpf: &mut Ebpf,
        btf: &Btf,
        own: Option<OwnLoader>,
        points: impl IntoIterator<Item = &'p Point> + Clone,
        threads: usize,
    ) -> MultiAttached {
        let functions = self.fentry_jobs(points.clone());
        let tracepoints = tracepoint_jobs(points);
        let started = Instant::now();
        let outcomes = fentry_jobs::attach_all(ebpf, btf, own, &functions, &tracepoints, threads);
        let multi = MultiAttached {
            links: outcomes.multi,
            served: outcomes.served_by_multi,
            understudies: outcomes.understudies,
        };
        if !multi.served.is_empty() {
            log::info!(
                "{} of {} functions on multi-function links ({} programs): a call made on a CPU where the same program runs (an interrupt, a preempting task) skips it: counted by its other end, said in health",
                multi.served.len(),
                functions.len(),
                2 * multi.links.len()
            );
        }
        self.fentry_outcomes = outcomes.functions;
        self.tracepoints_verified = outcomes.tracepoints;
        log::debug!(
            target: LOADER_LOG,
            "{} functions' fentry and fexit programs verified and attached, {} tracepoint programs verified, on {threads} threads in {} ms ({} refused)",
            functions.len(),
            tracepoints.len(),
            started.elapsed().as_millis(),
            self.fentry_outcomes
                .values()
                .chain(self.tracepoints_verified.values())
                .filter(|o| o.is_err())
                .count()
        );
        multi
    }

    /// How `program` fared when verified ahead against `event`, if it was; taken, so that a second
    /// hook sharing the program finds it loaded for the first one's event.
    pub(crate) fn verified_ahead(
        &mut self,
        program: &'static str,
        event: &'static str,
    ) -> Option<Result<(), HookError>> {
        self.tracepoints_verified
            .remove(&TracepointJob { program, event })
    }

    /// Why `hook` is left out on this machine, when it is another IOMMU vendor's driver's.
    fn vendor_elsewhere(&self, hook: &FunctionHook) -> Option<String> {
        let vendor = hook.vendor?;
        self.iommu_vendors.lacks(vendor)
    }

    /// Whether the hook belongs on this kernel (see [`FunctionHook::only_with`] and
    /// [`FunctionHook::unless`]). Without kallsyms, era hooks are left out and wrappers kept.
    fn is_era_of(&self, hook: &FunctionHook) -> bool {
        let has = |name: &str| self.functions.as_ref().map(|f| f.has_function(name));
        let era = hook
            .only_with
            .is_none_or(|marker| has(marker) == Some(true));
        let wrapper_of_hooked = hook.unless.is_some_and(|inner| has(inner) == Some(true));
        era && !wrapper_of_hooked
    }

    /// The point's known gaps on this kernel.
    fn caveats_of(&self, point: &Point, tier: Tier) -> Vec<&'static str> {
        let Some(functions) = &self.functions else {
            return Vec::new();
        };
        point
            .caveats
            .iter()
            .filter(|c| functions.has_function(c.era_marker))
            .filter(|c| c.on_tier.is_none_or(|only| only == tier))
            .map(|c| c.says)
            .collect()
    }

    /// The outcome of a function this kernel does not have, said plainly, without trying it.
    fn absence(&self, symbol: &str) -> Option<HookOutcome> {
        let functions = self.functions.as_ref()?;
        (!functions.has_function(symbol)).then(|| {
            HookOutcome::new(
                symbol,
                Err(HookError::Absent(
                    "not in this kernel (renamed, inlined, another vendor's or a module not loaded)"
                        .into(),
                )),
            )
        })
    }

    /// How `hook` fared on fentry ([`KernelSupport::attach_ahead`]).
    fn fentry_outcome(&mut self, hook: &FunctionHook) -> HookOutcome {
        let result = match hook.fentry {
            None => Err(HookError::NoFentryProgram(hook.symbol)),
            Some(_) => self.fentry_outcomes.remove(hook.symbol).unwrap_or_else(|| {
                Err(HookError::Object(format!(
                    "{}: not among the functions attached ahead (a loader bug)",
                    hook.symbol
                )))
            }),
        };
        HookOutcome::new(hook.symbol, result)
    }
}

fn attach_kprobe(ebpf: &mut Ebpf, hook: &FunctionHook) -> HookOutcome {
    let result = attach_kprobe_programs(ebpf, hook.symbol, hook.kprobe);
    HookOutcome::new(hook.symbol, result)
}

fn attach_kprobe_programs(
    ebpf: &mut Ebpf,
    symbol: &str,
    Programs { entry, exit }: Programs,
) -> Result<(), HookError> {
    let kretprobe: &mut KProbe = program(ebpf, exit).map_err(HookError::Program)?;
    load_once(kretprobe)?;
    let exit_link = kretprobe.attach(symbol, 0)?;
    let Some(entry) = entry else {
        return Ok(());
    };
    let kprobe: &mut KProbe = program(ebpf, entry).map_err(HookError::Program)?;
    let entry_result = load_once(kprobe).and_then(|()| kprobe.attach(symbol, 0).map(|_| ()));
    if let Err(e) = entry_result {
        let kretprobe: &mut KProbe = program(ebpf, exit).map_err(HookError::Program)?;
        let _ = kretprobe.detach(exit_link);
        return Err(e.into());
    }
    Ok(())
}

/// The BTF tracepoint programs `points` need whatever their functions get: the points that have
/// no function to hook, and the scheduler's switch, which any timed hook needs (verified ahead in
/// vain only where no function gets a timed tier).
fn tracepoint_jobs<'p>(points: impl IntoIterator<Item = &'p Point>) -> Vec<TracepointJob> {
    let mut timed = false;
    let mut jobs: Vec<TracepointJob> = Vec::new();
    for point in points {
        timed |= !point.functions.is_empty();
        if point.functions.is_empty() {
            jobs.extend(point.tracepoints.iter().map(|hook| TracepointJob {
                program: hook.program,
                event: hook.name,
            }));
        }
    }
    if timed {
        jobs.push(TracepointJob {
            program: WAITING_PROGRAM,
            event: WAITING_EVENT,
        });
    }
    jobs
}

/// `verified`: how the program fared when verified ahead of the points' walk, if it was.
fn attach_tracepoint(
    ebpf: &mut Ebpf,
    btf: &Btf,
    hook: &TracepointHook,
    verified: Option<Result<(), HookError>>,
) -> HookOutcome {
    let label = format!("{}:{}", hook.category, hook.name);
    HookOutcome::new(label, attach_tracepoint_program(ebpf, btf, hook, verified))
}

fn attach_tracepoint_program(
    ebpf: &mut Ebpf,
    btf: &Btf,
    hook: &TracepointHook,
    verified: Option<Result<(), HookError>>,
) -> Result<(), HookError> {
    let tracepoint: &mut BtfTracePoint = program(ebpf, hook.program).map_err(HookError::Program)?;
    match verified {
        Some(outcome) => outcome?,
        None if tracepoint.fd().is_ok() => return Err(HookError::ProgramTaken(hook.program)),
        None => tracepoint.load(hook.name, btf)?,
    }
    tracepoint.attach()?;
    Ok(())
}

/// The program that keeps how long tasks with calls in flight are switched out, and its event.
pub(crate) const WAITING_PROGRAM: &str = "track__sched_switch__tp";
pub(crate) const WAITING_EVENT: &str = "sched_switch";

/// Hooks the scheduler's switch (sched_switch, a BTF tracepoint), which keeps how long a task
/// with calls in flight is switched out, so that waiting is taken out of the calls' time.
/// `verified`: how its program fared when verified ahead of the points' walk, if it was.
pub(crate) fn attach_waiting(
    ebpf: &mut Ebpf,
    btf: &Btf,
    verified: Option<Result<(), HookError>>,
) -> Result<(), HookError> {
    let program: &mut BtfTracePoint = program(ebpf, WAITING_PROGRAM)?;
    match verified {
        Some(outcome) => outcome?,
        None => program
            .load(WAITING_EVENT, btf)
            .map_err(|e| HookError::Refused(describe(&e)))?,
    }
    program
        .attach()
        .map(|_| ())
        .map_err(|e| HookError::Refused(describe(&e)))
}

/// kprobe programs may serve several functions: load them the first time only.
pub(crate) fn load_once(program: &mut KProbe) -> Result<(), ProgramError> {
    if program.fd().is_ok() {
        return Ok(());
    }
    program.load()
}
