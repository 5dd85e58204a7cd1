//! `iommutop probes --verify`: every program of the object loaded (not attached) against every
//! target it serves, so that the verifier judges all of them, not only the winners of a tier.

use super::attach::{load_once, WAITING_EVENT, WAITING_PROGRAM};
use super::cross_check;
use crate::calibration::role::Role;
use crate::links::multi;
use crate::links::multi_shapes::Family;
use crate::object::bpf_syscalls::{
    BPF_TRACE_FENTRY, BPF_TRACE_FENTRY_MULTI, BPF_TRACE_FEXIT, BPF_TRACE_FEXIT_MULTI,
};
use crate::object::load::{load_btf, load_for_verification, program, LoadError, TaskStacks};
use crate::object::object_copy::ObjectCopy;
use crate::points::hook_error::HookError;
use crate::points::status::HookOutcome;
use crate::points::table::{Tier, POINTS};
use crate::settings::ProbeSettings;
use crate::timing::log_verified_size;
use aya::programs::{BtfTracePoint, FEntry, FExit, Program, ProgramError};
use aya::{Btf, Ebpf};
use aya_obj::btf::BtfKind;

/// The verifier's verdict on one embedded program, for `iommutop probes --verify`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramVerdict {
    pub program: String,
    /// The function or tracepoint it was loaded against.
    pub target: String,
    pub tier: Tier,
    /// None: loaded (the verifier accepted it).
    pub error: Option<String>,
    /// The target does not exist in this kernel, so the program could not be tried.
    pub absent: bool,
}

/// Loads (without attaching) every program of the object against every target it serves that
/// this kernel has, so that the verifier judges all of them, not only the winners of a tier.
pub fn verify_all_programs(settings: &ProbeSettings) -> Result<Vec<ProgramVerdict>, LoadError> {
    let btf = load_btf(settings)?;
    let mut ebpf = load_for_verification(&btf, settings)?;
    let mut verdicts = Vec::new();
    let mut record = |program: &str, target: String, tier: Tier, result: Result<(), HookError>| {
        let outcome = HookOutcome::new(target.clone(), result);
        verdicts.push(ProgramVerdict {
            program: program.to_string(),
            target,
            tier,
            absent: outcome.absent,
            error: outcome.error,
        });
    };
    for point in POINTS {
        for hook in point.functions {
            if let Some(programs) = hook.fentry {
                if let Some(entry) = programs.entry {
                    let result =
                        loaded(&mut ebpf, entry, |p: &mut FEntry| p.load(hook.symbol, &btf));
                    record(entry, hook.symbol.to_string(), Tier::Fentry, result);
                }
                let exit = programs.exit;
                let result = loaded(&mut ebpf, exit, |p: &mut FExit| p.load(hook.symbol, &btf));
                record(exit, hook.symbol.to_string(), Tier::Fentry, result);
            }
            for name in hook.kprobe.names() {
                let result = loaded(&mut ebpf, name, load_once);
                record(name, hook.symbol.to_string(), Tier::Kprobe, result);
            }
        }
        for hook in point.tracepoints {
            let result = loaded(&mut ebpf, hook.program, |p: &mut BtfTracePoint| {
                if p.fd().is_ok() {
                    return Ok(()); // already judged against the other event of its shape
                }
                p.load(hook.name, &btf)
            });
            record(
                hook.program,
                format!("{}:{}", hook.category, hook.name),
                Tier::Tracepoint,
                result,
            );
        }
    }
    let waiting = loaded(&mut ebpf, WAITING_PROGRAM, |p: &mut BtfTracePoint| {
        p.load(WAITING_EVENT, &btf)
    });
    record(
        WAITING_PROGRAM,
        format!("sched:{WAITING_EVENT}"),
        Tier::Tracepoint,
        waiting,
    );
    for (program, result) in verify_multi(&ebpf, &btf) {
        record(
            &program,
            "functions of its family (a multi-function link)".into(),
            Tier::Fentry,
            result,
        );
    }
    for (program, function, result) in verify_understudies(&ebpf, &btf) {
        record(&program, function.into(), Tier::Fentry, result);
    }
    for hook in cross_check::HOOKS {
        let event = hook.events.iter().find(|event| {
            btf.id_by_type_name_kind(&format!("btf_trace_{event}"), BtfKind::Typedef)
                .is_ok()
        });
        let (target, result) = match event {
            Some(event) => (
                format!("{}:{event}", hook.system),
                loaded(&mut ebpf, hook.program, |p: &mut BtfTracePoint| {
                    p.load(event, &btf)
                }),
            ),
            None => (
                format!("{}:{}", hook.system, hook.events.join("|")),
                Err(HookError::Absent(
                    "not in this kernel (the dma: events came with 6.12)".into(),
                )),
            ),
        };
        record(hook.program, target, Tier::Tracepoint, result);
    }
    let orphans: Vec<String> = ebpf
        .programs()
        .map(|(name, _)| name.to_string())
        .filter(|name| !verdicts.iter().any(|v| &v.program == name))
        .collect();
    for name in orphans {
        verdicts.push(ProgramVerdict {
            program: name,
            target: "-".into(),
            tier: Tier::Tracepoint,
            error: Some("not referenced by the probe table (loader/src/points/table.rs)".into()),
            absent: false,
        });
    }
    Ok(verdicts)
}

/// Loads every multi-function program ([`crate::links::multi`]), and its understudy, where the kernel
/// has such links; absent where it has not.
fn verify_multi(ebpf: &Ebpf, btf: &Btf) -> Vec<(String, Result<(), HookError>)> {
    let programs: Vec<(&'static str, u32)> = Family::ALL
        .iter()
        .flat_map(|family| {
            let (entry, exit) = family.programs();
            [
                (entry, BPF_TRACE_FENTRY_MULTI),
                (exit, BPF_TRACE_FEXIT_MULTI),
            ]
        })
        .collect();
    let roles = [Role::Lead, Role::Understudy];
    let every = programs
        .iter()
        .flat_map(|&program| roles.map(|role| (program, role)));
    if btf
        .id_by_type_name_kind(multi::KERNEL_MARKER, BtfKind::Func)
        .is_err()
    {
        let absent = "this kernel links a tracing program to one function only (multi-function links are 7.x's)";
        return every
            .map(|((name, _), role)| {
                (
                    role.program_name(name),
                    Err(HookError::Absent(absent.into())),
                )
            })
            .collect();
    }
    let wanted = programs.iter().map(|(name, _)| *name).collect();
    let copy = ObjectCopy::prepare(TaskStacks::for_this_kernel().object(), ebpf, btf, &wanted);
    every
        .map(|((name, attach_type), role)| {
            let result = match &copy {
                Ok(copy) => copy.verify(btf, name, role, attach_type, 0),
                Err(e) => Err(e.clone()),
            };
            (role.program_name(name), result.map_err(HookError::Copy))
        })
        .collect()
}

/// Loads the understudy of every fentry and fexit program ([`crate::calibration::understudy`]) for each
/// function of its hook this kernel has: its role's other branches judged too.
fn verify_understudies(
    ebpf: &Ebpf,
    btf: &Btf,
) -> Vec<(String, &'static str, Result<(), HookError>)> {
    let timed: Vec<(&'static str, &'static str, u32, u32)> = POINTS
        .iter()
        .flat_map(|point| point.functions)
        .filter_map(|hook| {
            let id = btf.id_by_type_name_kind(hook.symbol, BtfKind::Func).ok()?;
            Some((hook, id))
        })
        .flat_map(|(hook, id)| {
            let programs = hook.fentry.into_iter();
            programs.flat_map(move |p| {
                let entry = p
                    .entry
                    .map(|entry| (entry, hook.symbol, BPF_TRACE_FENTRY, id));
                entry
                    .into_iter()
                    .chain([(p.exit, hook.symbol, BPF_TRACE_FEXIT, id)])
            })
        })
        .collect();
    let wanted = timed.iter().map(|(name, ..)| *name).collect();
    let copy = ObjectCopy::prepare(TaskStacks::for_this_kernel().object(), ebpf, btf, &wanted);
    timed
        .into_iter()
        .map(|(name, function, attach_type, id)| {
            let result = match &copy {
                Ok(copy) => copy.verify(btf, name, Role::Understudy, attach_type, id),
                Err(e) => Err(e.clone()),
            };
            (
                Role::Understudy.program_name(name),
                function,
                result.map_err(HookError::Copy),
            )
        })
        .collect()
}

/// Loads the program `name` of the object as `load` says; -vv says how many instructions the
/// verifier walked for it.
fn loaded<T>(
    ebpf: &mut Ebpf,
    name: &str,
    load: impl FnOnce(&mut T) -> Result<(), ProgramError>,
) -> Result<(), HookError>
where
    for<'p> &'p mut T: TryFrom<&'p mut Program>,
{
    load(program(ebpf, name).map_err(HookError::Program)?)?;
    if let Some(loaded) = ebpf.program(name) {
        log_verified_size(name, || loaded.info());
    }
    Ok(())
}
