//! Attaching a probe point: each of its hooks on the cheapest tier that takes it (fentry, kprobe,
//! tracepoint), with what the running kernel offers learnt on the way, and the scheduler's switch.

use super::hook_error::HookError;
use super::kallsyms::KernelFunctions;
use super::load::program;
use super::status::{HookOutcome, PointStatus, Refusal};
use super::table::{symbols_asked_about, FunctionHook, Point, Programs, Tier, TracepointHook};
use super::timing::timed;
use super::verifier_log::describe;
use super::verify_ahead::{verify_ahead, Bound};
use super::LOADER_LOG;
use aya::programs::{BtfTracePoint, FEntry, FExit, KProbe, ProgramError};
use aya::{Btf, Ebpf};
use std::collections::HashMap;
use std::time::Instant;

/// Attaches a point hook by hook: each kernel function on the cheapest tier that takes it (fentry,
/// else kprobe: a function in a module has no vmlinux BTF for fentry but takes a kprobe), and the
/// tracepoints only when no function could be hooked (they see the same calls: both would count
/// them twice). The point's tier is the costliest its hooks got.
pub(super) fn attach_point(
    ebpf: &mut Ebpf,
    btf: &Btf,
    kernel: &mut KernelSupport,
    point: &'static Point,
) -> PointStatus {
    let mut hooks = Vec::new();
    let mut fentry_refused = Vec::new();
    let mut kprobe_refused = Vec::new();
    for function in point.functions {
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
        let fentry = kernel.attach_fentry(ebpf, btf, function);
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
        .map(|t| attach_tracepoint(ebpf, btf, t))
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

/// What the running kernel offers, learnt while attaching: which functions exist, and whether an
/// fexit program can read a return value (bpf_get_func_ret, 5.17+), found out by the first fexit
/// the verifier refuses for it, so that no later one is tried.
pub(super) struct KernelSupport {
    functions: Option<KernelFunctions>,
    fexit_reads_no_return: bool,
    /// Programs verified ahead ([`super::verify_ahead`]) that the kernel refused, by name.
    refused_ahead: HashMap<&'static str, HookError>,
}

impl KernelSupport {
    /// From the text of /proc/kallsyms, if it could be read.
    pub(super) fn probe(kallsyms: Option<&str>) -> KernelSupport {
        KernelSupport {
            functions: kallsyms.map(|text| KernelFunctions::parse(text, &symbols_asked_about())),
            fexit_reads_no_return: false,
            refused_ahead: HashMap::new(),
        }
    }

    /// The fentry and fexit programs `points` will try on this kernel: each hook of its era
    /// that the kernel has.
    pub(super) fn fentry_programs<'p>(
        &self,
        points: impl IntoIterator<Item = &'p Point>,
    ) -> Vec<Bound> {
        points
            .into_iter()
            .flat_map(|point| point.functions)
            .filter(|hook| self.is_era_of(hook) && self.absence(hook.symbol).is_none())
            .flat_map(|hook| {
                let programs = hook.fentry.iter();
                programs
                    .flat_map(|p| p.entry.into_iter().chain([p.exit]))
                    .map(|program| Bound {
                        program,
                        function: hook.symbol,
                    })
            })
            .collect()
    }

    /// Verifies `points`' fentry and fexit programs on `threads` threads before attaching
    /// ([`super::verify_ahead`]); with one thread, each is verified as its hook is attached.
    pub(super) fn verify_ahead<'p>(
        &mut self,
        ebpf: &mut Ebpf,
        btf: &Btf,
        points: impl IntoIterator<Item = &'p Point>,
        threads: usize,
    ) {
        if threads <= 1 {
            return;
        }
        let wanted = self.fentry_programs(points);
        let started = Instant::now();
        self.refused_ahead = verify_ahead(ebpf, btf, &wanted, threads);
        log::debug!(
            target: LOADER_LOG,
            "{} fentry and fexit programs verified on {threads} threads in {} ms ({} refused)",
            wanted.len(),
            started.elapsed().as_millis(),
            self.refused_ahead.len()
        );
    }

    /// Whether the hook belongs on this kernel (see [`FunctionHook::only_with`] and
    /// [`FunctionHook::unless`]). Without kallsyms, era hooks are left out and wrappers kept.
    fn is_era_of(&self, hook: &FunctionHook) -> bool {
        let has = |name: &str| self.functions.as_ref().map(|f| f.contains(name));
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
            .filter(|c| functions.contains(c.era_marker))
            .filter(|c| c.on_tier.is_none_or(|only| only == tier))
            .map(|c| c.says)
            .collect()
    }

    /// The outcome of a function this kernel does not have, said plainly, without trying it.
    fn absence(&self, symbol: &str) -> Option<HookOutcome> {
        let functions = self.functions.as_ref()?;
        (!functions.contains(symbol)).then(|| {
            HookOutcome::new(
                symbol,
                Err(HookError::Absent(
                    "not in this kernel (renamed, inlined, another vendor's or a module not loaded)"
                        .into(),
                )),
            )
        })
    }

    fn attach_fentry(&mut self, ebpf: &mut Ebpf, btf: &Btf, hook: &FunctionHook) -> HookOutcome {
        let Some(programs) = hook.fentry else {
            return HookOutcome::new(hook.symbol, Err(HookError::NoFentryProgram(hook.symbol)));
        };
        if self.fexit_reads_no_return {
            return HookOutcome::new(hook.symbol, Err(HookError::NoFuncRet));
        }
        let refused_ahead = [Some(programs.exit), programs.entry]
            .into_iter()
            .flatten()
            .find_map(|program| self.refused_ahead.get(program).cloned());
        let result = match refused_ahead {
            Some(error) => Err(error),
            None => attach_fentry(ebpf, btf, hook.symbol, programs),
        };
        self.fexit_reads_no_return = result == Err(HookError::NoFuncRet);
        HookOutcome::new(hook.symbol, result)
    }
}

/// How many instructions the verifier walked for a program (5.16+; -vv): verification time
/// follows it, and unlike the time it does not vary with the machine's load. Asks the kernel
/// only when the line would be logged.
pub(super) fn log_verified_size<E>(
    program: &str,
    info: impl FnOnce() -> Result<aya::programs::ProgramInfo, E>,
) {
    if !log::log_enabled!(target: LOADER_LOG, log::Level::Debug) {
        return;
    }
    if let Some(count) = info().ok().and_then(|i| i.verified_instruction_count()) {
        log::debug!(target: LOADER_LOG, "{program}: the verifier walked {count} instructions");
    }
}

fn attach_fentry(
    ebpf: &mut Ebpf,
    btf: &Btf,
    symbol: &str,
    programs: Programs,
) -> Result<(), HookError> {
    // The exit is attached first: an exit without its entry is harmless, the reverse leaves
    // frames that are never popped.
    let exit = programs.exit;
    let fexit: &mut FExit = program(ebpf, exit).map_err(HookError::Object)?;
    if fexit.fd().is_err() {
        timed(exit, "verified", || fexit.load(symbol, btf))?;
    }
    log_verified_size(exit, || fexit.info());
    let exit_link = timed(exit, "attached", || fexit.attach())?;
    let Some(entry) = programs.entry else {
        return Ok(());
    };
    let fentry: &mut FEntry = program(ebpf, entry).map_err(HookError::Object)?;
    let loaded = if fentry.fd().is_ok() {
        Ok(())
    } else {
        timed(entry, "verified", || fentry.load(symbol, btf))
    };
    let entry_result = loaded.and_then(|()| {
        log_verified_size(entry, || fentry.info());
        timed(entry, "attached", || fentry.attach()).map(|_| ())
    });
    if let Err(e) = entry_result {
        let fexit: &mut FExit = program(ebpf, exit).map_err(HookError::Object)?;
        let _ = fexit.detach(exit_link);
        return Err(e.into());
    }
    Ok(())
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
    let kretprobe: &mut KProbe = program(ebpf, exit).map_err(HookError::Object)?;
    load_once(kretprobe)?;
    let exit_link = kretprobe.attach(symbol, 0)?;
    let Some(entry) = entry else {
        return Ok(());
    };
    let kprobe: &mut KProbe = program(ebpf, entry).map_err(HookError::Object)?;
    let entry_result = load_once(kprobe).and_then(|()| kprobe.attach(symbol, 0).map(|_| ()));
    if let Err(e) = entry_result {
        let kretprobe: &mut KProbe = program(ebpf, exit).map_err(HookError::Object)?;
        let _ = kretprobe.detach(exit_link);
        return Err(e.into());
    }
    Ok(())
}

fn attach_tracepoint(ebpf: &mut Ebpf, btf: &Btf, hook: &TracepointHook) -> HookOutcome {
    let label = format!("{}:{}", hook.category, hook.name);
    HookOutcome::new(label, attach_tracepoint_program(ebpf, btf, hook))
}

fn attach_tracepoint_program(
    ebpf: &mut Ebpf,
    btf: &Btf,
    hook: &TracepointHook,
) -> Result<(), HookError> {
    let tracepoint: &mut BtfTracePoint = program(ebpf, hook.program).map_err(HookError::Object)?;
    if tracepoint.fd().is_ok() {
        return Err(HookError::ProgramTaken(hook.program));
    }
    tracepoint.load(hook.name, btf)?;
    tracepoint.attach()?;
    Ok(())
}

/// The program that keeps how long tasks with calls in flight are switched out, and its event.
pub(super) const WAITING_PROGRAM: &str = "track__sched_switch__tp";
pub(super) const WAITING_EVENT: &str = "sched_switch";

/// Hooks the scheduler's switch (sched_switch, a BTF tracepoint), which keeps how long a task
/// with calls in flight is switched out, so that waiting is taken out of the calls' time.
pub(super) fn attach_waiting(ebpf: &mut Ebpf, btf: &Btf) -> Result<(), String> {
    let program: &mut BtfTracePoint = program(ebpf, WAITING_PROGRAM)?;
    program.load(WAITING_EVENT, btf).map_err(|e| describe(&e))?;
    program.attach().map(|_| ()).map_err(|e| describe(&e))
}

/// kprobe programs may serve several functions: load them the first time only.
pub(super) fn load_once(program: &mut KProbe) -> Result<(), ProgramError> {
    if program.fd().is_ok() {
        return Ok(());
    }
    program.load()
}
