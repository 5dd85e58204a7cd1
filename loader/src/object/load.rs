//! Turns the embedded BPF object into a loaded one: which object (where calls in flight are
//! kept), the knobs set before load, the maps' sizes, and typed handles by name.

use super::bare_loader::loader_without_btf;
use super::verifier_log::describe;
use crate::btf::btf_index::{Arity, BtfIndex};
use crate::kernel::kallsyms::PreemptCount;
use crate::points::table::POINTS;
use crate::settings::{BadSetting, ProbeSettings, DEFAULT_STACK_INTERVAL_MS};
use crate::LOADER_LOG;
use aya::programs::Program;
use aya::{Btf, Ebpf, EbpfLoader};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The BPF object built from `ebpf/progs/*.bpf.c` by build.rs: each task's calls in flight in the
/// slot of its thread id.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/iommutop.bpf.o"));

/// The same, with each task's calls in flight in a hash keyed by its thread id.
static HASHED_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/iommutop-hashed.bpf.o"));

/// Where the probes keep a task's calls in flight (ebpf/lib/stacks.bpf.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStacks {
    /// In a slot indexed by its thread id (a few loads), or, while another task holds that slot,
    /// in an LRU hash keyed by thread id (a hash lookup).
    SlotsByThread,
    /// Every task's in the LRU hash keyed by thread id: kernels without BTF task pointers and
    /// BPF atomics that return a value, which the slots need (5.10).
    HashedByThread,
}

impl TaskStacks {
    /// The slots where this kernel gives kprobe programs too a BTF task pointer (5.11; the probes
    /// fall back to kprobes per hook, and every program of the object must load); the hash
    /// otherwise. (The slots' atomics came in 5.12: no Debian kernel is 5.11.)
    pub fn for_this_kernel() -> TaskStacks {
        let task_pointers = aya::sys::is_helper_supported(
            aya::programs::ProgramType::KProbe,
            aya::sys::BpfHelper::BPF_FUNC_get_current_task_btf,
        )
        .unwrap_or(false);
        if task_pointers {
            TaskStacks::SlotsByThread
        } else {
            TaskStacks::HashedByThread
        }
    }

    pub(crate) fn object(self) -> &'static [u8] {
        match self {
            TaskStacks::SlotsByThread => OBJECT,
            TaskStacks::HashedByThread => HASHED_OBJECT,
        }
    }

    /// The object's fingerprint, made when it was built (build.rs).
    pub(crate) fn object_fingerprint(self) -> &'static str {
        match self {
            TaskStacks::SlotsByThread => env!("IOMMUTOP_FINGERPRINT_IOMMUTOP_BPF_O"),
            TaskStacks::HashedByThread => env!("IOMMUTOP_FINGERPRINT_IOMMUTOP_HASHED_BPF_O"),
        }
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            TaskStacks::SlotsByThread => {
                "slots indexed by thread id, or a hash keyed by thread id where another task holds the slot"
            }
            TaskStacks::HashedByThread => {
                "a hash keyed by thread id (this kernel's kprobes have no BTF task pointers)"
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("kernel BTF not readable at {path}: {reason}; iommutop needs a kernel built with CONFIG_DEBUG_INFO_BTF")]
    NoBtf { path: String, reason: String },
    #[error("loading the BPF object failed: {0} (needs root, or CAP_BPF and CAP_PERFMON)")]
    Object(String),
    #[error("the BPF object has no map `{0}`: the binary and ebpf/ are out of step, rebuild")]
    MissingMap(&'static str),
    #[error("no probe point could be attached on this kernel: {0}")]
    NothingAttached(String),
    #[error("{0}")]
    BadSetting(#[from] BadSetting),
}

/// What the probe programs are told before load beyond the settings (`const volatile` knobs,
/// ebpf/lib/common.bpf.h): what start-up found out, and the task filter.
pub struct Knobs {
    /// The kernel's dispatch around probe programs, taken out of self times, in ns.
    pub dispatch_ns: u64,
    /// What a probed call nested in another costs that call beyond its programs' runs, in ns.
    pub nested_dispatch_ns: u64,
    /// Only this process's task-context work is counted (`--pid`; 0: every process's).
    pub filter_tgid: u32,
    /// Only this cgroup's task-context work is counted (`--cgroup`; 0: every cgroup's).
    pub filter_cgroup: u64,
    /// Where each CPU's preempt count is; without it, interrupts are not told from tasks' work.
    pub preempt: Option<PreemptCount>,
    pub task_stacks: TaskStacks,
    /// The kernel's stack size (THREAD_SIZE), in bytes.
    pub kernel_stack_size: u64,
    /// Where each fexit program finds its return value ([`fexit_return_slots`]).
    pub return_slots: Vec<(String, u32)>,
    /// The timed programs get understudies: leads mark the frames they push for them.
    pub understudies: bool,
}

/// The kernel's BTF, from where the settings say.
pub fn load_btf(settings: &ProbeSettings) -> Result<Btf, LoadError> {
    let path = &settings.kernel_btf;
    Btf::parse_file(Path::new(path), aya::Endianness::default()).map_err(|e| LoadError::NoBtf {
        path: path.clone(),
        reason: e.to_string(),
    })
}

/// Relocates the object against `btf` (the kernel's, or the part of it the relocations read) with
/// every knob set and creates its maps, sized as the settings say, with `loader` (a fresh one:
/// [`super::bare_loader`]).
pub fn load_probes<'a>(
    loader: EbpfLoader<'a>,
    btf: &'a Btf,
    settings: &'a ProbeSettings,
    knobs: &'a Knobs,
) -> Result<Ebpf, LoadError> {
    let per_cpu_offsets: u64 = knobs.preempt.map_or(0, |p| p.per_cpu_offsets);
    let preempt_count_at: u64 = knobs.preempt.map_or(0, |p| p.symbol);
    let in_pcpu_hot = u32::from(knobs.preempt.is_some_and(|p| p.in_pcpu_hot));
    let virtual_netdevs = u32::from(settings.virtual_netdevs);
    let understudies = u32::from(knobs.understudies);
    with_target(loader, btf, &knobs.return_slots)
        .override_global("iommutop_understudies", &understudies, true)
        .override_global("iommutop_virtual_netdevs", &virtual_netdevs, true)
        .override_global(
            "iommutop_stack_interval_ns",
            &settings.stack_interval_ns,
            true,
        )
        .override_global("iommutop_dispatch_ns", &knobs.dispatch_ns, true)
        .override_global(
            "iommutop_nested_dispatch_ns",
            &knobs.nested_dispatch_ns,
            true,
        )
        .override_global(
            "iommutop_task_slot_mask",
            &settings.task_slot_mask,
            knobs.task_stacks == TaskStacks::SlotsByThread,
        )
        .map_max_entries("iommutop_stats", settings.stats_rows)
        .map_max_entries("iommutop_row_hints", settings.row_hints)
        .override_global("iommutop_filter_tgid", &knobs.filter_tgid, true)
        .override_global("iommutop_filter_cgroup", &knobs.filter_cgroup, true)
        .override_global("iommutop_per_cpu_offsets", &per_cpu_offsets, true)
        .override_global("iommutop_preempt_count_at", &preempt_count_at, true)
        .override_global("iommutop_preempt_count_in_pcpu_hot", &in_pcpu_hot, true)
        .override_global("iommutop_kernel_stack_size", &knobs.kernel_stack_size, true)
        .load(knobs.task_stacks.object())
        .map_err(|e| LoadError::Object(describe(&e)))
}

/// Relocates the object, without attaching, with every optional path live (the verifier skips
/// what a knob left at 0 turns off): call-path sampling as shipped, --pid and --cgroup, the
/// preempt count read (the addresses are never read: these programs are judged, not attached).
pub fn load_for_verification(btf: &Btf, settings: &ProbeSettings) -> Result<Ebpf, LoadError> {
    let (stack_interval, any_pid, any_cgroup, any_address, every_netdev) = (
        DEFAULT_STACK_INTERVAL_MS * 1_000_000,
        1u32,
        1u64,
        1u64,
        1u32,
    );
    let return_slots = fexit_return_slots(&settings.kernel_btf);
    with_target(loader_without_btf(), btf, &return_slots)
        .override_global("iommutop_virtual_netdevs", &every_netdev, true)
        .override_global("iommutop_stack_interval_ns", &stack_interval, true)
        .override_global("iommutop_filter_tgid", &any_pid, true)
        .override_global("iommutop_filter_cgroup", &any_cgroup, true)
        .override_global("iommutop_per_cpu_offsets", &any_address, true)
        .override_global("iommutop_preempt_count_at", &any_address, true)
        .map_max_entries("iommutop_stats", settings.stats_rows)
        .load(TaskStacks::for_this_kernel().object())
        .map_err(|e| LoadError::Object(describe(&e)))
}

/// `loader` against `btf`, with each fexit program told where its return value is.
fn with_target<'a>(
    mut loader: EbpfLoader<'a>,
    btf: &'a Btf,
    return_slots: &'a [(String, u32)],
) -> EbpfLoader<'a> {
    for (knob, slot) in return_slots {
        loader.override_global(knob, slot, true);
    }
    loader.btf(Some(btf));
    loader
}

/// Where each fexit program finds its function's return value in this kernel: the knob
/// `<program>__ret_at` (ebpf/lib/common.bpf.h) and the function's parameter count in the kernel's
/// BTF. Empty when the BTF cannot be read as such: the programs then call bpf_get_func_ret (5.17+).
pub(crate) fn fexit_return_slots(path: &str) -> Vec<(String, u32)> {
    let wanted = fentry_functions();
    match std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|btf| {
            BtfIndex::walk(&btf, &wanted, &BTreeSet::new(), &BTreeSet::new())
                .map_err(|e| e.to_string())
        }) {
        Ok(index) => return_slots(&index.arities()),
        Err(e) => {
            log::info!(target: LOADER_LOG, "{path}: {e}: fexit programs read return values with bpf_get_func_ret");
            Vec::new()
        }
    }
}

/// The kernel functions that fentry and fexit programs hook.
pub(crate) fn fentry_functions() -> BTreeSet<&'static str> {
    fentry_hooks().map(|(symbol, _)| symbol).collect()
}

/// Each fentry-hooked function and its fexit program.
fn fentry_hooks() -> impl Iterator<Item = (&'static str, &'static str)> {
    POINTS
        .iter()
        .flat_map(|point| point.functions)
        .filter_map(|hook| hook.fentry.map(|programs| (hook.symbol, programs.exit)))
}

/// The return-slot knob of each fexit program whose function's prototype `arities` has.
pub(crate) fn return_slots(arities: &BTreeMap<String, Arity>) -> Vec<(String, u32)> {
    let slots: BTreeMap<String, u32> = fentry_hooks()
        .filter_map(|(symbol, exit)| {
            let arity = arities.get(symbol)?;
            let slot = if arity.returns_value {
                arity.params
            } else {
                crate::abi::IOMMUTOP_RET_VOID
            };
            Some((format!("{exit}__ret_at"), slot))
        })
        .collect();
    log::debug!(target: LOADER_LOG, "fexit return values at: {slots:?}");
    slots.into_iter().collect()
}

pub(crate) fn take_map<T, E: std::fmt::Display>(
    ebpf: &mut Ebpf,
    name: &'static str,
    convert: impl FnOnce(aya::maps::Map) -> Result<T, E>,
) -> Result<T, LoadError> {
    let map = ebpf.take_map(name).ok_or(LoadError::MissingMap(name))?;
    convert(map).map_err(|e| LoadError::Object(format!("map `{name}`: {e}")))
}

/// A program taken by name that the object does not have as its code expects: the binary and
/// ebpf/ are out of step.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProgramLookup {
    #[error("the BPF object has no program `{0}` (rebuild)")]
    Missing(String),
    #[error("program `{0}` is not of the expected type")]
    WrongType(String),
}

pub(crate) fn program<'a, T>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut T, ProgramLookup>
where
    &'a mut T: TryFrom<&'a mut Program>,
{
    let program = ebpf
        .program_mut(name)
        .ok_or_else(|| ProgramLookup::Missing(name.to_string()))?;
    program
        .try_into()
        .map_err(|_| ProgramLookup::WrongType(name.to_string()))
}
