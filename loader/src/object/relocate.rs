//! The object relocated against this kernel with every knob set. What the knobs need (which
//! functions the kernel has and where its preempt count is, the fexit programs' return slots, the
//! dispatch calibration) is read on threads at once, as are the two things made of the kernel's
//! BTF once a boot and kept: the index of the names the programs hook, which they are loaded
//! against ([`crate::btf::btf_index`]), and the part of the BTF the object's relocations read, which
//! it is relocated against ([`crate::btf::core_target`]). Under emulation aya's parse of the whole
//! BTF, each program's search of it and its CO-RE search of it stood before the relocation, which
//! nothing can start before (docs/measurements.md, "What the loader no longer does").

use super::bare_loader;
use super::load::{
    fentry_functions, load_btf, load_probes, return_slots, Knobs, LoadError, TaskStacks,
};
use super::object_copy::{CopyError, ObjectCopy};
use crate::btf::btf_index::BtfIndex;
use crate::btf::core_target;
use crate::btf::kernel_btf_cache::{self, KernelBtfError};
use crate::calibration::dispatch::CalibrationError;
use crate::calibration::preemption::Preemption;
use crate::calibration::{dispatch, dispatch_cache};
use crate::kernel::kallsyms::{KallsymsFacts, PreemptCount};
use crate::kernel::kallsyms_cache;
use crate::kernel::vendors::MachineVendors;
use crate::links::multi;
use crate::links::multi_cast;
use crate::links::multi_shapes::Family;
use crate::points::table::symbols_asked_about;
use crate::points::table::POINTS;
use crate::probes::attach::KernelSupport;
use crate::probes::attach::WAITING_EVENT;
use crate::settings::{ProbeSettings, Understudies};
use crate::timing::timed;
use crate::LOADER_LOG;
use aya::{Btf, Ebpf};
use iommutop_model::TaskFilter;
use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::path::Path;

/// The relocated object, its maps created, no program loaded yet.
pub(crate) struct Relocated {
    /// What fentry, fexit and BTF tracepoint programs are loaded against: the hooked functions'
    /// and tracepoints' ids in the kernel's BTF ([`crate::btf::btf_index`]), or, where that BTF could
    /// not be walked, the whole of it as aya parses it.
    pub btf: Btf,
    pub ebpf: Ebpf,
    pub symbols: KernelSymbols,
    /// The kernel's BPF run-time statistics, on for as long as this lives (`enable_stats`).
    pub stats_fd: Option<OwnedFd>,
    pub dispatch: Result<dispatch::Dispatch, CalibrationError>,
    /// What our own loader loads from ([`super::object_copy`]): the multi-function programs,
    /// where the kernel links one program to many functions ([`crate::links::multi`]), and the timed
    /// programs' understudies' copies ([`crate::calibration::understudy`]); or why not.
    pub copy: Result<ObjectCopy, CopyError>,
    /// Whether multi-function families are tried, or why not.
    pub multi: Result<(), MultiLinksOff>,
    /// Whether the timed programs get understudies, and why.
    pub understudies: UnderstudyChoice,
}

/// Whether the timed programs get understudies ([`crate::calibration::understudy`]), and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnderstudyChoice {
    pub on: bool,
    pub why: String,
}

impl UnderstudyChoice {
    /// As `setting` says, or, left to auto, where the running kernel preempts tasks inside BPF
    /// programs ([`Preemption`]) or does not say whether it does.
    fn for_this_kernel(setting: Understudies) -> UnderstudyChoice {
        let choice = |on: bool, why: String| UnderstudyChoice { on, why };
        match setting {
            Understudies::On => choice(true, "IOMMUTOP_UNDERSTUDIES=on".into()),
            Understudies::Off => choice(false, "IOMMUTOP_UNDERSTUDIES=off".into()),
            Understudies::Auto => {
                let (config, cmdline) = crate::sysinfo::kernel_config_and_cmdline(Path::new("/"));
                let model = config.and_then(|config| Preemption::of_kernel(&config, &cmdline));
                match model {
                    Some(model) if model.inside_programs() => choice(
                        true,
                        format!(
                            "the kernel's preemption is {}: a task can be switched out inside a probe program",
                            model.name()
                        ),
                    ),
                    Some(model) => choice(
                        false,
                        format!(
                            "the kernel's preemption is {}: no task is switched out inside a probe program",
                            model.name()
                        ),
                    ),
                    None => choice(
                        true,
                        "the kernel's preemption model is not in a config it can read".into(),
                    ),
                }
            }
        }
    }
}

/// Relocates the object with every knob set and creates its maps. `enable_stats` turns the
/// kernel's BPF run-time statistics on first: they add to the dispatch, as to every probe's.
/// With `tasks`, only their task-context work is counted (knobs: without a filter the verifier
/// drops the checks).
pub(crate) fn relocate(
    settings: &ProbeSettings,
    enable_stats: bool,
    tasks: Option<&TaskFilter>,
) -> Result<Relocated, LoadError> {
    std::thread::scope(|scope| {
        let index = scope.spawn(|| {
            log::debug!("reading the kernel's BTF");
            kernel_btf_index(settings)
        });
        let symbols = scope.spawn(KernelSymbols::read);
        let task_stacks = TaskStacks::for_this_kernel();
        let core_target = scope.spawn(move || relocation_target(settings, task_stacks));
        // Made without aya's parse of the kernel's BTF: it is given what to relocate against.
        let loader = scope.spawn(bare_loader::loader_without_btf);
        let symbols = symbols
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        let index = index
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        let (return_slots, attach_targets) = match index {
            Ok(index) => {
                let slots = return_slots(&index.arities());
                let targets = scope.spawn(move || {
                    timed("the programs' attach targets", "made", || {
                        index.attach_targets()
                    })
                });
                (slots, Some(targets))
            }
            Err(e) => {
                log::info!(target: LOADER_LOG, "{}: {e}: fexit programs read return values with bpf_get_func_ret, and programs are loaded against the whole BTF", settings.kernel_btf);
                (Vec::new(), None)
            }
        };
        let stats_fd = if enable_stats {
            aya::sys::enable_stats(aya::sys::Stats::RunTime).ok()
        } else {
            None
        };
        let bpf_stats = stats_fd.is_some() || bpf_stats_sysctl_on();
        let understudies = UnderstudyChoice::for_this_kernel(settings.understudies);
        let dispatch = calibrated_dispatch(bpf_stats, understudies.on, || {
            load_btf(settings).map_err(|e| CalibrationError::Btf(e.to_string()))
        });
        let dispatch_ns = dispatch.as_ref().map_or(0, |d| d.gap_ns);
        let nested_dispatch_ns = dispatch
            .as_ref()
            .map_or(0, |d| *d.nested_ns.as_ref().unwrap_or(&(2 * d.gap_ns)));
        log::info!("calls in flight per task: in {}", task_stacks.describe());
        log::info!(
            "understudies {}: {}",
            if understudies.on { "on" } else { "off" },
            understudies.why
        );
        let knobs = Knobs {
            understudies: understudies.on,
            dispatch_ns,
            nested_dispatch_ns,
            filter_tgid: tasks.and_then(|t| t.pid).unwrap_or(0),
            filter_cgroup: tasks.and_then(|t| t.cgroup_id).unwrap_or(0),
            preempt: symbols.preempt,
            task_stacks,
            kernel_stack_size: symbols.kernel_stack_size,
            return_slots,
        };
        log::debug!("relocating the BPF object and creating its maps");
        let core_target = core_target
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
            .inspect_err(
                |e| log::info!(target: LOADER_LOG, "relocated against the whole BTF: its cut: {e}"),
            );
        let loader = loader
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        let multi = multi_links(settings, &symbols);
        let wanted = copied_programs(multi.is_ok(), understudies.on, &symbols);
        let (ebpf, copy) = match core_target {
            Ok(target) => {
                let ebpf = load_probes(loader, &target, settings, &knobs)?;
                let copy = object_copy(&wanted, &ebpf, &target, &knobs);
                (ebpf, copy)
            }
            Err(_) => {
                let btf = load_btf(settings)?;
                let ebpf = load_probes(loader, &btf, settings, &knobs)?;
                let copy = object_copy(&wanted, &ebpf, &btf, &knobs);
                (ebpf, copy)
            }
        };
        let targets = attach_targets.map(|making| {
            making
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        });
        let btf = match targets {
            Some(Ok(targets)) => targets,
            Some(Err(e)) => {
                log::info!(target: LOADER_LOG, "the programs' attach targets: {e}: loaded against the whole BTF");
                load_btf(settings)?
            }
            None => load_btf(settings)?,
        };
        Ok(Relocated {
            btf,
            ebpf,
            symbols,
            stats_fd,
            dispatch,
            copy,
            multi,
            understudies,
        })
    })
}

/// Why each function gets programs of its own rather than the multi-function programs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MultiLinksOff {
    #[error(
        "this kernel links a tracing program to one function only (multi-function links are 7.x's)"
    )]
    KernelLinksOne,
    #[error("IOMMUTOP_LINKS=per-function")]
    Setting,
}

/// Whether the multi-function programs serve their families here, or why each function gets
/// programs of its own.
fn multi_links(settings: &ProbeSettings, symbols: &KernelSymbols) -> Result<(), MultiLinksOff> {
    let multi = match (settings.multi_links, symbols.support.has_multi_links()) {
        (true, true) => Ok(()),
        (true, false) => Err(MultiLinksOff::KernelLinksOne),
        (false, _) => Err(MultiLinksOff::Setting),
    };
    if let Err(why) = &multi {
        log::debug!(target: LOADER_LOG, "one program per function: {why}");
    }
    multi
}

/// The programs our own loader will load: the multi-function families' (`multi`), and with
/// `understudies` every timed program of a function this kernel has, and the families'.
fn copied_programs(
    multi: bool,
    understudies: bool,
    symbols: &KernelSymbols,
) -> BTreeSet<&'static str> {
    let mut wanted = BTreeSet::new();
    if multi {
        wanted.extend(Family::every_program());
    }
    if understudies {
        let jobs = symbols.support.fentry_jobs(POINTS);
        wanted.extend(
            jobs.iter()
                .flat_map(|job| job.entry.into_iter().chain([job.exit])),
        );
    }
    wanted
}

/// The programs `wanted` relocated as the object was, for our own loader; none wanted, none.
fn object_copy(
    wanted: &BTreeSet<&'static str>,
    ebpf: &Ebpf,
    target: &Btf,
    knobs: &Knobs,
) -> Result<ObjectCopy, CopyError> {
    if wanted.is_empty() {
        return Err(CopyError::NothingWanted);
    }
    timed("the programs our own loader loads", "relocated", || {
        ObjectCopy::prepare(knobs.task_stacks.object(), ebpf, target, wanted)
    })
    .inspect_err(|e| log::info!(target: LOADER_LOG, "our own loader's programs: {e}: one program per function, no understudies"))
}

/// The kernel's dispatch around probe programs, as this boot's first run measured it, or
/// measured now (timed, -vv) and kept; logged, or why not.
fn calibrated_dispatch(
    bpf_stats: bool,
    understudies: bool,
    btf: impl FnOnce() -> Result<Btf, CalibrationError>,
) -> Result<dispatch::Dispatch, CalibrationError> {
    let conditions = dispatch_cache::Conditions::now(bpf_stats, understudies);
    let dispatch = dispatch_cache::kept_or_calibrated(
        std::path::Path::new(crate::RUN_DIR),
        conditions.as_ref(),
        || {
            let btf = btf()?;
            timed("the dispatch calibration", "ran", || {
                dispatch::calibrate(&btf, understudies)
            })
        },
    );
    match &dispatch {
        Ok(d) => {
            log::info!("probe dispatch calibrated: {} ns between an entry program's end and an exit program's start", d.gap_ns);
            match &d.nested_ns {
                Ok(ns) => log::info!("nested probe dispatch calibrated: {ns} ns a nested call costs the call around it beyond its programs' runs"),
                Err(e) => log::info!("nested probe dispatch not calibrated, two gaps a nested call instead: {e}"),
            }
        }
        Err(e) => log::info!("probe dispatch not calibrated: {e}"),
    }
    dispatch
}

/// Whether the kernel's BPF statistics are on by its sysctl (someone else's, or `sysctl
/// kernel.bpf_stats_enabled=1`): they add to the dispatch as ours do.
fn bpf_stats_sysctl_on() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").is_ok_and(|v| v.trim() == "1")
}

/// What the probes learn from /proc/kallsyms: which functions this kernel has, where its preempt
/// count is and how large its stacks are.
pub(crate) struct KernelSymbols {
    pub support: KernelSupport,
    pub preempt: Option<PreemptCount>,
    pub kernel_stack_size: u64,
}

impl KernelSymbols {
    /// Read once a boot and module set ([`crate::kernel::kallsyms_cache`]): under emulation each read
    /// and walk of the kernel's symbols costs seconds.
    fn read() -> KernelSymbols {
        let mut asked = symbols_asked_about();
        asked.insert(multi::KERNEL_MARKER);
        let conditions = kallsyms_cache::Conditions::now(&asked.iter().copied().collect());
        let facts =
            kallsyms_cache::kept_or_scanned(Path::new(crate::RUN_DIR), conditions.as_ref(), || {
                let text = read_kallsyms()?;
                Some(KallsymsFacts::scan(&text, &asked))
            });
        let preempt = facts.as_ref().and_then(|f| f.preempt);
        log::debug!("preempt count: {preempt:?}");
        let kernel_stack_size = KallsymsFacts::kernel_stack_size(facts.as_ref(), page_size());
        log::debug!("kernel stack size: {kernel_stack_size} bytes");
        KernelSymbols {
            support: KernelSupport::probe(facts, MachineVendors::of_machine(Path::new("/"))),
            preempt,
            kernel_stack_size,
        }
    }
}

/// The text of /proc/kallsyms, if it can be read: the functions this kernel has and where its
/// preempt count is.
fn read_kallsyms() -> Option<String> {
    let kallsyms = std::fs::read_to_string("/proc/kallsyms")
        .inspect_err(|e| log::info!("/proc/kallsyms: {e}: era hooks left out, no preempt count"))
        .ok();
    log::debug!(
        "read /proc/kallsyms: {} bytes",
        kallsyms.as_ref().map_or(0, String::len)
    );
    kallsyms
}

/// The kernel's page size, in bytes.
fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).unwrap_or(4096)
}

/// What the loader needs of the kernel's BTF ([`crate::btf::btf_index`]): this boot's first walk of
/// it, kept ([`kernel_btf_cache`]).
fn kernel_btf_index(settings: &ProbeSettings) -> Result<BtfIndex, KernelBtfError> {
    let mut functions = fentry_functions();
    functions.insert(multi_cast::RDONLY_CAST);
    let structs = std::collections::BTreeSet::from(multi_cast::CAST_TYPES);
    let tracepoints = POINTS
        .iter()
        .flat_map(|point| point.tracepoints)
        .map(|hook| hook.name)
        .chain([WAITING_EVENT])
        .chain(crate::probes::cross_check::event_names())
        .collect();
    let path = &settings.kernel_btf;
    let asked = kernel_btf_cache::names_asked(&functions, &tracepoints, &structs);
    let conditions = kernel_btf_cache::Conditions::now(path, asked);
    kernel_btf_cache::kept_or_walked(Path::new(crate::RUN_DIR), conditions.as_ref(), || {
        let bytes = std::fs::read(path).map_err(KernelBtfError::Read)?;
        timed("the kernel's BTF", "walked", || {
            BtfIndex::walk(&bytes, &functions, &tracepoints, &structs).map_err(KernelBtfError::from)
        })
    })
}

/// What the object is relocated against ([`core_target`]): the part of the kernel's BTF its
/// relocations can read, this boot's first cut of it kept ([`kernel_btf_cache`]).
fn relocation_target(settings: &ProbeSettings, stacks: TaskStacks) -> Result<Btf, KernelBtfError> {
    let path = &settings.kernel_btf;
    let conditions = kernel_btf_cache::Conditions::now(path, stacks.object_fingerprint().into());
    let cut = kernel_btf_cache::kept_or_made_core_target(
        Path::new(crate::RUN_DIR),
        conditions.as_ref(),
        || {
            let kernel = std::fs::read(path).map_err(|source| KernelBtfError::ReadAt {
                path: path.clone(),
                source,
            })?;
            timed("the relocation target", "cut", || {
                let names = core_target::object_type_names(stacks.object())?;
                core_target::cut(&kernel, &names)
            })
            .map_err(KernelBtfError::from)
        },
    )?;
    Btf::parse(&cut, aya::Endianness::Little).map_err(|e| KernelBtfError::Parse(e.to_string()))
}
