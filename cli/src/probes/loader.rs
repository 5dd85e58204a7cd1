//! The only module that speaks aya: loads the embedded BPF object, picks an attach tier per probe
//! point by really loading and attaching (cheapest first), and reads the maps.

use super::abi::{
    iommutop_dev_key, iommutop_dev_name, iommutop_dev_stats, iommutop_key_kind, iommutop_stack_key,
    iommutop_stack_value, IOMMUTOP_NAME_LEN, IOMMUTOP_ROW_HINT_BITS, IOMMUTOP_TASK_SLOTS,
};
use super::arity::function_arities;
use super::capacity::{rows_setting, stats_capacity};
use super::convert::{name_from_kernel, source_kind, sum_per_cpu};
use super::dispatch;
use super::kallsyms::{Kallsyms, KernelFunctions, PreemptCount};
use super::selection::PointSelection;
use super::status::{HookOutcome, PointStatus, Refusal};
use super::table::{
    symbols_asked_about, FunctionHook, Point, Programs, Tier, TracepointHook, POINTS,
};
use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuArray, PerCpuHashMap, StackTraceMap};
use aya::programs::{BtfTracePoint, FEntry, FExit, KProbe, Program};
use aya::{Btf, Ebpf, EbpfLoader, Pod};
use iommutop_model::report::StackSample;
use iommutop_model::sample::{Op, RawSample, RawSource, SourceKind};
use iommutop_model::TaskFilter;
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Instant;

// SAFETY: the key is bindgen's view of `struct iommutop_dev_key`: integers only, explicit padding,
// no invalid bit patterns (checked by bindgen's layout tests and the size asserts in convert.rs).
unsafe impl Pod for iommutop_dev_key {}
// SAFETY: as above, `struct iommutop_dev_stats` is integers and arrays of integers only.
unsafe impl Pod for iommutop_dev_stats {}
// SAFETY: as above, `struct iommutop_dev_name` is a char array.
unsafe impl Pod for iommutop_dev_name {}
// SAFETY: as above, `struct iommutop_stack_key` is integers with explicit padding.
unsafe impl Pod for iommutop_stack_key {}
// SAFETY: as above, `struct iommutop_stack_value` is two u64.
unsafe impl Pod for iommutop_stack_value {}

/// Each CPU samples the kernel call path of at most one DMA API call per this many ms, unless
/// `IOMMUTOP_STACK_INTERVAL_MS` says otherwise (0 turns sampling off).
pub const DEFAULT_STACK_INTERVAL_MS: u64 = 20;

/// The environment variable `name` as `parse` reads it, `None` when it is unset; a value `parse`
/// refuses is a usage error (its message names the variable and what it takes).
fn setting<T>(
    name: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<Option<T>, LoadError> {
    std::env::var(name)
        .ok()
        .map(|value| parse(&value).map_err(LoadError::BadSetting))
        .transpose()
}

fn stack_interval_ns() -> Result<u64, LoadError> {
    Ok(
        setting("IOMMUTOP_STACK_INTERVAL_MS", stack_interval_setting)?
            .unwrap_or(DEFAULT_STACK_INTERVAL_MS * 1_000_000),
    )
}

fn stack_interval_setting(value: &str) -> Result<u64, String> {
    value
        .parse::<u64>()
        .ok()
        .and_then(|ms| ms.checked_mul(1_000_000))
        .ok_or_else(|| {
            format!(
                "IOMMUTOP_STACK_INTERVAL_MS={value}: give milliseconds between call-path samples per CPU (0 turns them off), or unset it"
            )
        })
}

/// How many thread-id slots the probes keep calls in flight in before the hash by thread id
/// (`IOMMUTOP_TASK_SLOTS`, a power of two up to `IOMMUTOP_TASK_SLOTS`; tests set 1, which sends
/// every task but the slot's holder to the hash), as the mask of a thread id.
fn task_slot_mask() -> Result<u32, LoadError> {
    Ok(setting("IOMMUTOP_TASK_SLOTS", task_slots_setting)?.unwrap_or(IOMMUTOP_TASK_SLOTS - 1))
}

fn task_slots_setting(value: &str) -> Result<u32, String> {
    match value.parse::<u32>() {
        Ok(slots) if slots.is_power_of_two() && slots <= IOMMUTOP_TASK_SLOTS => Ok(slots - 1),
        _ => Err(format!(
            "IOMMUTOP_TASK_SLOTS={value}: give a power of two from 1 to {IOMMUTOP_TASK_SLOTS}, or unset it"
        )),
    }
}

/// How many of the hints of which statistics row is a key's the probes keep
/// (`IOMMUTOP_ROW_HINTS`, 1 to `1 << IOMMUTOP_ROW_HINT_BITS`): a key whose hint index is beyond
/// them finds its row the slow way at every lookup, as tests make nearly every key do with 1.
fn row_hints() -> Result<u32, LoadError> {
    Ok(setting("IOMMUTOP_ROW_HINTS", row_hints_setting)?.unwrap_or(1 << IOMMUTOP_ROW_HINT_BITS))
}

/// The rows of statistics: what `IOMMUTOP_STATS_ROWS` says, else sized for this machine.
fn stats_rows() -> Result<u32, LoadError> {
    Ok(setting("IOMMUTOP_STATS_ROWS", rows_setting)?.unwrap_or_else(stats_capacity))
}

fn row_hints_setting(value: &str) -> Result<u32, String> {
    let most = 1u32 << IOMMUTOP_ROW_HINT_BITS;
    match value.parse::<u32>() {
        Ok(hints) if (1..=most).contains(&hints) => Ok(hints),
        _ => Err(format!(
            "IOMMUTOP_ROW_HINTS={value}: give a number of hints from 1 to {most}, or unset it"
        )),
    }
}

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

    fn object(self) -> &'static [u8] {
        match self {
            TaskStacks::SlotsByThread => OBJECT,
            TaskStacks::HashedByThread => HASHED_OBJECT,
        }
    }

    fn describe(self) -> &'static str {
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

/// Names of `enum iommutop_health`, in order.
pub(super) const HEALTH_NAMES: [&str; 8] = [
    "device_map_full",
    "nesting_overflow",
    "exit_without_entry",
    "stack_lost",
    "abandoned_frames",
    "task_map_full",
    "process_map_full",
    "row_busy",
];
const _: () =
    assert!(HEALTH_NAMES.len() == super::abi::iommutop_health::IOMMUTOP_HEALTH_COUNT as usize);

/// The health counter of program runs the kernel skipped (see [`recursion_misses`]).
pub const RECURSION_MISSES: &str = "recursion_misses";

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
    BadSetting(String),
}

#[derive(Debug, thiserror::Error)]
#[error("reading BPF map `{map}`: {reason}")]
pub struct SampleError {
    map: &'static str,
    reason: String,
}

/// Attached probes and typed handles on their maps. Dropping it detaches everything.
pub struct Probes {
    /// `None` only while being dropped (detaching is timed, see [`Drop`]).
    ebpf: Option<Ebpf>,
    /// Rows of per-CPU statistics; `rows` says which key each row is (ebpf/lib/maps.bpf.h).
    stats: PerCpuArray<MapData, iommutop_dev_stats>,
    rows: BpfHashMap<MapData, iommutop_dev_key, u32>,
    names: BpfHashMap<MapData, iommutop_dev_key, iommutop_dev_name>,
    owners: BpfHashMap<MapData, u32, iommutop_dev_key>,
    health: PerCpuArray<MapData, u64>,
    stacks: StackTraceMap<MapData>,
    stack_samples: PerCpuHashMap<MapData, iommutop_stack_key, iommutop_stack_value>,
    statuses: Vec<PointStatus>,
    stats_fd: Option<OwnedFd>,
    /// The kernel's dispatch around probe programs, taken out of self times; why not.
    dispatch: Result<dispatch::Dispatch, String>,
    /// Whether the programs can tell an interrupt from its task's work (the preempt count).
    tells_interrupts: bool,
    /// Whether the time a task spends switched out inside a call is measured (the scheduler's
    /// switch hooked), or why not.
    waiting: Result<(), String>,
}

/// Where the kernel's BTF is read from; tests point it elsewhere to exercise the no-BTF path.
pub fn kernel_btf_path() -> String {
    std::env::var("IOMMUTOP_KERNEL_BTF").unwrap_or_else(|_| "/sys/kernel/btf/vmlinux".into())
}

fn load_btf() -> Result<Btf, LoadError> {
    let path = kernel_btf_path();
    Btf::parse_file(Path::new(&path), aya::Endianness::default()).map_err(|e| LoadError::NoBtf {
        path,
        reason: e.to_string(),
    })
}

impl Probes {
    /// Loads the object and attaches every selected point it can, each on the cheapest tier that
    /// works.
    /// `enable_stats` turns on the kernel's BPF run-time statistics for as long as this lives.
    /// With `tasks` (`--pid`/`--cgroup`), only the selected tasks' task-context work is counted:
    /// the knobs are set before load, so that without a filter the verifier drops the checks.
    pub fn attach(
        enable_stats: bool,
        selection: &PointSelection,
        tasks: Option<&TaskFilter>,
    ) -> Result<Probes, LoadError> {
        log::debug!("reading the kernel's BTF");
        let btf = load_btf()?;
        let stack_interval = stack_interval_ns()?;
        // Statistics first: they add to the dispatch being calibrated, as to every probe's.
        let stats_enabled = if enable_stats {
            aya::sys::enable_stats(aya::sys::Stats::RunTime).ok()
        } else {
            None
        };
        let dispatch = timed("the dispatch calibration", "ran", || {
            dispatch::calibrate(&btf)
        });
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
        let dispatch_ns = dispatch.as_ref().map_or(0, |d| d.gap_ns);
        let nested_dispatch_ns = dispatch
            .as_ref()
            .map_or(0, |d| *d.nested_ns.as_ref().unwrap_or(&(2 * d.gap_ns)));
        let filter_tgid: u32 = tasks.and_then(|t| t.pid).unwrap_or(0);
        let filter_cgroup: u64 = tasks.and_then(|t| t.cgroup_id).unwrap_or(0);
        // Read once: under emulation each read and parse of the kernel's symbols costs seconds.
        let kallsyms = std::fs::read_to_string("/proc/kallsyms")
            .inspect_err(|e| {
                log::info!("/proc/kallsyms: {e}: era hooks left out, no preempt count")
            })
            .ok();
        log::debug!(
            "read /proc/kallsyms: {} bytes",
            kallsyms.as_ref().map_or(0, String::len)
        );
        let preempt = kallsyms.as_deref().and_then(PreemptCount::parse);
        log::debug!("preempt count: {preempt:?}");
        let per_cpu_offsets: u64 = preempt.map_or(0, |p| p.per_cpu_offsets);
        let preempt_count_at: u64 = preempt.map_or(0, |p| p.symbol);
        let in_pcpu_hot = u32::from(preempt.is_some_and(|p| p.in_pcpu_hot));
        let task_stacks = TaskStacks::for_this_kernel();
        let task_slot_mask = task_slot_mask()?;
        let stats_rows = stats_rows()?;
        let row_hints = row_hints()?;
        log::info!("calls in flight per task: in {}", task_stacks.describe());
        log::debug!("relocating the BPF object and creating its maps");
        let return_slots = fexit_return_slots();
        let mut loader = EbpfLoader::new();
        for (knob, slot) in &return_slots {
            loader.override_global(knob, slot, true);
        }
        let mut ebpf = loader
            .btf(Some(&btf))
            .override_global("iommutop_stack_interval_ns", &stack_interval, true)
            .override_global("iommutop_dispatch_ns", &dispatch_ns, true)
            .override_global("iommutop_nested_dispatch_ns", &nested_dispatch_ns, true)
            .override_global(
                "iommutop_task_slot_mask",
                &task_slot_mask,
                task_stacks == TaskStacks::SlotsByThread,
            )
            .map_max_entries("iommutop_stats", stats_rows)
            .map_max_entries("iommutop_row_hints", row_hints)
            .override_global("iommutop_filter_tgid", &filter_tgid, true)
            .override_global("iommutop_filter_cgroup", &filter_cgroup, true)
            .override_global("iommutop_per_cpu_offsets", &per_cpu_offsets, true)
            .override_global("iommutop_preempt_count_at", &preempt_count_at, true)
            .override_global("iommutop_preempt_count_in_pcpu_hot", &in_pcpu_hot, true)
            .load(task_stacks.object())
            .map_err(|e| LoadError::Object(describe(&e)))?;
        let stats = take_map(&mut ebpf, "iommutop_stats", PerCpuArray::try_from)?;
        let rows = take_map(&mut ebpf, "iommutop_rows", BpfHashMap::try_from)?;
        let stacks = take_map(&mut ebpf, "iommutop_stacks", StackTraceMap::try_from)?;
        let stack_samples = take_map(&mut ebpf, "iommutop_stack_samples", PerCpuHashMap::try_from)?;
        let names = take_map(&mut ebpf, "iommutop_names", BpfHashMap::try_from)?;
        let owners = take_map(&mut ebpf, "iommutop_owners", BpfHashMap::try_from)?;
        let health = take_map(&mut ebpf, "iommutop_health", PerCpuArray::try_from)?;
        let mut kernel = KernelSupport::probe(kallsyms.as_deref());
        drop(kallsyms);
        log::debug!("attaching");
        let statuses: Vec<PointStatus> = POINTS
            .iter()
            .filter(|point| selection.includes(point))
            .map(|point| attach_point(&mut ebpf, &btf, &mut kernel, point))
            .inspect(|status| match status.tier {
                Some(tier) => log::info!(
                    "{}: {} ({})",
                    status.point,
                    tier.name(),
                    status.attached_hook_labels().join(", ")
                ),
                None => log::info!("{}: unavailable", status.point),
            })
            .collect();
        let timed = statuses
            .iter()
            .any(|status| matches!(status.tier, Some(Tier::Fentry | Tier::Kprobe)));
        let waiting = if timed {
            attach_waiting(&mut ebpf, &btf)
        } else {
            Ok(())
        };
        if let Err(why) = &waiting {
            log::info!("time switched out inside calls not measured: {why}");
        }
        if statuses.iter().all(|s| s.tier.is_none()) {
            let reasons = statuses
                .iter()
                .flat_map(|s| s.refused.first())
                .map(|r| format!("{}: {}", r.tier.name(), r.reason))
                .next()
                .unwrap_or_default();
            return Err(LoadError::NothingAttached(reasons));
        }
        Ok(Probes {
            ebpf: Some(ebpf),
            stats,
            rows,
            names,
            owners,
            health,
            stacks,
            stack_samples,
            statuses,
            stats_fd: stats_enabled,
            dispatch,
            tells_interrupts: preempt.is_some(),
            waiting,
        })
    }

    /// Charges IOMMU work done outside any DMA API call by process `tgid` or its children (a
    /// userspace driver's VFIO mappings) to the PCI device `pci_address`, under that device's
    /// row, instead of to `unattributed`.
    pub fn charge_to_device(&mut self, tgid: u32, pci_address: &str) -> Result<(), SampleError> {
        let key = iommutop_dev_key {
            id: owned_device_id(pci_address),
            kind: iommutop_key_kind::IOMMUTOP_KEY_DEVICE,
            pad: 0,
        };
        let mut name = iommutop_dev_name {
            name: [0; IOMMUTOP_NAME_LEN as usize],
        };
        for (slot, byte) in name.name.iter_mut().zip(pci_address.bytes()) {
            *slot = byte as _;
        }
        self.names
            .insert(key, name, 0)
            .map_err(|e| sample_error("iommutop_names", e))?;
        self.owners
            .insert(tgid, key, 0)
            .map_err(|e| sample_error("iommutop_owners", e))
    }

    /// The calibrated dispatch the probes take out of a call's self time, in ns.
    pub fn dispatch_ns(&self) -> Option<u64> {
        self.dispatch.as_ref().ok().map(|d| d.gap_ns)
    }

    /// The calibrated cost of a probed call to the call it is nested in, beyond its programs'
    /// runs, in ns.
    pub fn nested_dispatch_ns(&self) -> Option<u64> {
        let dispatch = self.dispatch.as_ref().ok()?;
        dispatch.nested_ns.as_ref().ok().copied()
    }

    /// What the probes' times hold that is not the calls' work, when waiting is not measured.
    pub fn waiting_caveat(&self) -> Option<String> {
        self.waiting.as_ref().err().map(|why| {
            format!("times include any time a task spent switched out inside a call (preempted, or asleep on a lock): the scheduler's switch could not be hooked ({why})")
        })
    }

    /// What the probes' self times could not take out, when the dispatch calibration failed.
    pub fn self_time_caveat(&self) -> Option<String> {
        let timed = self
            .statuses
            .iter()
            .any(|status| matches!(status.tier, Some(Tier::Fentry | Tier::Kprobe)));
        if !timed {
            return None;
        }
        match &self.dispatch {
            Err(why) => Some(format!(
                "self times still hold the kernel's dispatch around each nested probe (not calibrated: {why})"
            )),
            Ok(dispatch) => dispatch.nested_ns.as_ref().err().map(|why| {
                format!(
                    "self times may keep part of the trampoline's work around each nested probe (counted as two gaps: {why})"
                )
            }),
        }
    }

    /// Whether the programs find each CPU's preempt count: without it an interrupt that arrives
    /// while a task runs in user mode is taken for that task's work (`--pid`, process rows).
    pub fn tells_interrupts(&self) -> bool {
        self.tells_interrupts
    }

    /// What each point got: its tier, hooks, and why better tiers were refused.
    pub fn statuses(&self) -> &[PointStatus] {
        &self.statuses
    }

    /// Whether the kernel's BPF statistics are on (ours or someone else's).
    pub fn stats_enabled_by_us(&self) -> bool {
        self.stats_fd.is_some()
    }

    /// Reads every map once and sums the per-CPU values.
    pub fn sample(&self) -> Result<RawSample, SampleError> {
        let monotonic_ns = monotonic_ns();
        let mut names = BTreeMap::new();
        for entry in self.names.iter() {
            let (key, name) = entry.map_err(|e| sample_error("iommutop_names", e))?;
            names.insert((key.kind, key.id), name_from_kernel(&name.name));
        }
        let mut sources = Vec::new();
        for entry in self.rows.iter() {
            let (key, row) = entry.map_err(|e| sample_error("iommutop_rows", e))?;
            let Some(kind) = source_kind(key.kind) else {
                continue;
            };
            let per_cpu = self
                .stats
                .get(&row, 0)
                .map_err(|e| sample_error("iommutop_stats", e))?;
            sources.push(RawSource {
                kind,
                id: key.id,
                name: names.get(&(key.kind, key.id)).cloned().unwrap_or_default(),
                ops: sum_per_cpu(per_cpu.iter()),
            });
        }
        sources.sort_by(|a, b| (a.kind, &a.name, a.id).cmp(&(b.kind, &b.name, b.id)));
        let mut health = BTreeMap::new();
        for (index, name) in HEALTH_NAMES.iter().enumerate() {
            let per_cpu = self
                .health
                .get(&(index as u32), 0)
                .map_err(|e| sample_error("iommutop_health", e))?;
            health.insert((*name).to_string(), per_cpu.iter().sum());
        }
        let misses = self.misses_by_program();
        health.insert(
            RECURSION_MISSES.to_string(),
            misses.values().fold(0u64, |sum, n| sum.saturating_add(*n)),
        );
        for (op, calls) in possibly_missed_calls(&misses) {
            health.insert(format!("{MISSED_CALLS_PREFIX}{op}"), calls);
        }
        Ok(RawSample {
            monotonic_ns,
            sources,
            health,
            program_stats: self.program_stats(),
        })
    }

    /// The sampled call paths so far, symbolized, heaviest (by summed latency) first.
    pub fn stack_samples(&self) -> Result<Vec<StackSample>, SampleError> {
        if self.stack_samples.keys().next().is_none() {
            return Ok(Vec::new()); // nothing to name: spare reading the kernel's symbols
        }
        let kallsyms = Kallsyms::load(Path::new("/proc/kallsyms"))
            .map_err(|e| sample_error("iommutop_stacks", format!("/proc/kallsyms: {e}")))?;
        let mut names = BTreeMap::new();
        for entry in self.names.iter() {
            let (key, name) = entry.map_err(|e| sample_error("iommutop_names", e))?;
            names.insert((key.kind, key.id), name_from_kernel(&name.name));
        }
        let mut samples = Vec::new();
        for entry in self.stack_samples.iter() {
            let (key, per_cpu) = entry.map_err(|e| sample_error("iommutop_stack_samples", e))?;
            let (count, total_ns) = per_cpu
                .iter()
                .fold((0, 0), |(c, t), v| (c + v.samples, t + v.total_ns));
            let Ok(stack_id) = u32::try_from(key.stack_id) else {
                continue;
            };
            let Ok(trace) = self.stacks.get(&stack_id, 0) else {
                continue;
            };
            let frames = trace
                .frames()
                .iter()
                .map(|f| kallsyms.name_of(f.ip))
                .skip_while(|name| is_probe_machinery(name))
                .collect();
            let device = match source_kind(key.kind) {
                Some(SourceKind::Deferred) => "deferred".to_string(),
                _ => names
                    .get(&(key.kind, key.dev_id))
                    .cloned()
                    .unwrap_or_default(),
            };
            let op = Op::ALL
                .get(key.op as usize)
                .map_or("unknown", |op| op.name());
            samples.push(StackSample {
                device,
                op: op.to_string(),
                samples: count,
                total_ns,
                frames,
            });
        }
        samples.sort_by_key(|s| std::cmp::Reverse(s.total_ns));
        Ok(samples)
    }

    /// Runs of each of our programs that the kernel skipped because the same program was already
    /// running on that CPU (preempted, or interrupted by what it probes): each is an entry, an
    /// exit or an event never seen. The kernel counts them per program (5.12+; a kprobe's skips only
    /// on recent kernels) and shows them in the program's fdinfo.
    fn misses_by_program(&self) -> BTreeMap<String, u64> {
        self.ebpf()
            .programs()
            .filter_map(|(name, program)| {
                use std::os::fd::{AsFd, AsRawFd};
                let raw = program.fd().ok()?.as_fd().as_raw_fd();
                let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{raw}")).ok()?;
                Some((name.to_string(), fdinfo_field(&info, "recursion_misses")?))
            })
            .collect()
    }

    fn program_stats(&self) -> BTreeMap<String, (u64, u64)> {
        self.ebpf()
            .programs()
            .filter_map(|(name, program)| {
                let info = program.info().ok()?;
                Some((
                    name.to_string(),
                    (info.run_count(), info.run_time().as_nanos() as u64),
                ))
            })
            .collect()
    }
}

impl Probes {
    fn ebpf(&self) -> &Ebpf {
        self.ebpf
            .as_ref()
            .expect("the object lives until Probes is dropped")
    }
}

impl Drop for Probes {
    /// Detaches every program and closes the maps, timed (-vv).
    fn drop(&mut self) {
        if let Some(ebpf) = self.ebpf.take() {
            timed("every program", "detached", || drop(ebpf));
        }
    }
}

/// The health counters of calls the probes may not have seen at all, per op:
/// `missed_calls.<op>`.
pub const MISSED_CALLS_PREFIX: &str = "missed_calls.";

/// Per op, how many calls (or events) the probes may have missed entirely, from the runs the
/// kernel skipped (`misses`, per program). A timed call is counted by whichever of its two
/// programs ran, so it is lost only when both were skipped: at most the smaller of its entry's and
/// its exit's misses, per hooked function (kprobe programs serve several functions: per point).
/// A function hooked at its exit alone, and every count-only program, loses what it skipped.
fn possibly_missed_calls(misses: &BTreeMap<String, u64>) -> BTreeMap<&'static str, u64> {
    let of = |name: &str| misses.get(name).copied().unwrap_or(0);
    let mut missed = BTreeMap::new();
    for point in POINTS {
        let mut calls = 0u64;
        let (mut kprobe_entries, mut kprobe_exits) = (BTreeMap::new(), BTreeMap::new());
        for hook in point.functions {
            if let Some(programs) = hook.fentry {
                calls += match programs.entry {
                    Some(entry) => of(entry).min(of(programs.exit)),
                    None => of(programs.exit),
                };
            }
            if let Some(entry) = hook.kprobe.entry {
                kprobe_entries.insert(entry, of(entry));
            }
            kprobe_exits.insert(hook.kprobe.exit, of(hook.kprobe.exit));
        }
        let (entries, exits): (u64, u64) =
            (kprobe_entries.values().sum(), kprobe_exits.values().sum());
        calls += entries.min(exits);
        calls += point.tracepoints.iter().map(|t| of(t.program)).sum::<u64>();
        if calls > 0 {
            *missed.entry(point.op.name()).or_insert(0) += calls;
        }
    }
    missed
}

/// A numeric `name:\tvalue` line of a /proc fdinfo file.
fn fdinfo_field(info: &str, name: &str) -> Option<u64> {
    info.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == name).then(|| value.trim().parse().ok())?
    })
}

/// Frames of our own program and the trampoline or kprobe that ran it, above the probed call.
fn is_probe_machinery(name: &str) -> bool {
    [
        "bpf_prog_",
        "bpf_trampoline_",
        "kprobe_",
        "ftrace_",
        "arch_ftrace_",
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
}

/// A key id for work charged to a device by its owner: the PCI address packed into the low bits
/// (domain, bus, device, function), where no kernel pointer (the ids of DMA API keys) can be.
fn owned_device_id(pci_address: &str) -> u64 {
    pci_address
        .bytes()
        .filter(u8::is_ascii_hexdigit)
        .fold(0u64, |id, digit| {
            (id << 4) | u64::from((digit as char).to_digit(16).unwrap_or(0))
        })
}

fn take_map<T, E: std::fmt::Display>(
    ebpf: &mut Ebpf,
    name: &'static str,
    convert: impl FnOnce(aya::maps::Map) -> Result<T, E>,
) -> Result<T, LoadError> {
    let map = ebpf.take_map(name).ok_or(LoadError::MissingMap(name))?;
    convert(map).map_err(|e| LoadError::Object(format!("map `{name}`: {e}")))
}

fn sample_error(map: &'static str, e: impl std::fmt::Display) -> SampleError {
    SampleError {
        map,
        reason: e.to_string(),
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

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
pub fn verify_all_programs() -> Result<Vec<ProgramVerdict>, LoadError> {
    let btf = load_btf()?;
    // Every optional path live (the verifier skips what a knob left at 0 turns off): call-path
    // sampling as shipped, --pid and --cgroup, the preempt count read (the addresses are never
    // read: these programs are judged, not attached).
    let (stack_interval, any_pid, any_cgroup, any_address) =
        (DEFAULT_STACK_INTERVAL_MS * 1_000_000, 1u32, 1u64, 1u64);
    let stats_rows = stats_rows()?;
    let return_slots = fexit_return_slots();
    let mut loader = EbpfLoader::new();
    for (knob, slot) in &return_slots {
        loader.override_global(knob, slot, true);
    }
    let mut ebpf = loader
        .btf(Some(&btf))
        .allow_unsupported_maps()
        .override_global("iommutop_stack_interval_ns", &stack_interval, true)
        .override_global("iommutop_filter_tgid", &any_pid, true)
        .override_global("iommutop_filter_cgroup", &any_cgroup, true)
        .override_global("iommutop_per_cpu_offsets", &any_address, true)
        .override_global("iommutop_preempt_count_at", &any_address, true)
        .map_max_entries("iommutop_stats", stats_rows)
        .load(TaskStacks::for_this_kernel().object())
        .map_err(|e| LoadError::Object(describe(&e)))?;
    let mut verdicts = Vec::new();
    let mut record = |program: &str, target: String, tier: Tier, result: Result<(), String>| {
        let outcome = HookOutcome::new(&target, result);
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
                    let result = program::<FEntry>(&mut ebpf, entry)
                        .and_then(|p| p.load(hook.symbol, &btf).map_err(|e| describe(&e)));
                    record(entry, hook.symbol.to_string(), Tier::Fentry, result);
                }
                let exit = programs.exit;
                let result = program::<FExit>(&mut ebpf, exit)
                    .and_then(|p| p.load(hook.symbol, &btf).map_err(|e| describe(&e)))
                    .map_err(|e| missing_func_ret(&e).map_or(e, str::to_string));
                record(exit, hook.symbol.to_string(), Tier::Fentry, result);
            }
            for name in hook.kprobe.names() {
                let result = program::<KProbe>(&mut ebpf, name).and_then(load_once);
                record(name, hook.symbol.to_string(), Tier::Kprobe, result);
            }
        }
        for hook in point.tracepoints {
            let result = program::<BtfTracePoint>(&mut ebpf, hook.program).and_then(|p| {
                if p.fd().is_ok() {
                    return Ok(()); // already judged against the other event of its shape
                }
                p.load(hook.name, &btf).map_err(|e| describe(&e))
            });
            record(
                hook.program,
                format!("{}:{}", hook.category, hook.name),
                Tier::Tracepoint,
                result,
            );
        }
    }
    let waiting = program::<BtfTracePoint>(&mut ebpf, WAITING_PROGRAM)
        .and_then(|p| p.load(WAITING_EVENT, &btf).map_err(|e| describe(&e)));
    record(
        WAITING_PROGRAM,
        format!("sched:{WAITING_EVENT}"),
        Tier::Tracepoint,
        waiting,
    );
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
            error: Some("not referenced by the probe table (cli/src/probes/table.rs)".into()),
            absent: false,
        });
    }
    Ok(verdicts)
}

/// Where each fexit program finds its function's return value in this kernel: the knob
/// `<program>__ret_at` (ebpf/lib/common.bpf.h) and the function's parameter count in the kernel's
/// BTF. Empty when the BTF cannot be read as such: the programs then call bpf_get_func_ret (5.17+).
fn fexit_return_slots() -> Vec<(String, u32)> {
    let hooks: Vec<(&str, &str)> = POINTS
        .iter()
        .flat_map(|point| point.functions)
        .filter_map(|hook| hook.fentry.map(|programs| (hook.symbol, programs.exit)))
        .collect();
    let wanted = hooks.iter().map(|(symbol, _)| *symbol).collect();
    let path = kernel_btf_path();
    let arities = match std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|btf| function_arities(&btf, &wanted).map_err(|e| e.to_string()))
    {
        Ok(arities) => arities,
        Err(e) => {
            log::info!("{path}: {e}: fexit programs read return values with bpf_get_func_ret");
            return Vec::new();
        }
    };
    let slots: BTreeMap<String, u32> = hooks
        .into_iter()
        .filter_map(|(symbol, exit)| {
            let arity = arities.get(symbol)?;
            let slot = if arity.returns_value {
                arity.params
            } else {
                super::abi::IOMMUTOP_RET_VOID
            };
            Some((format!("{exit}__ret_at"), slot))
        })
        .collect();
    log::debug!("fexit return values at: {slots:?}");
    slots.into_iter().collect()
}

/// Attaches a point hook by hook: each kernel function on the cheapest tier that takes it (fentry,
/// else kprobe: a function in a module has no vmlinux BTF for fentry but takes a kprobe), and the
/// tracepoints only when no function could be hooked (they see the same calls: both would count
/// them twice). The point's tier is the costliest its hooks got.
fn attach_point(
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
                "{}: {} left out here: another era's code path, or a wrapper of a hooked function",
                point.name,
                function.symbol
            );
            continue;
        }
        if let Some(absent) = kernel.absence(function.symbol) {
            log::debug!("{}: {} is not in this kernel", point.name, function.symbol);
            kprobe_refused.push(absent);
            continue;
        }
        let fentry = kernel.attach_fentry(ebpf, btf, function);
        if fentry.is_attached() {
            log::debug!("{}: {} attached on fentry", point.name, function.symbol);
            hooks.push(fentry.at(Tier::Fentry));
            continue;
        }
        let kprobe = attach_kprobe(ebpf, function);
        log::debug!(
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
struct KernelSupport {
    functions: Option<KernelFunctions>,
    fexit_refusal: Option<String>,
}

impl KernelSupport {
    /// From the text of /proc/kallsyms, if it could be read.
    fn probe(kallsyms: Option<&str>) -> KernelSupport {
        KernelSupport {
            functions: kallsyms.map(|text| KernelFunctions::parse(text, &symbols_asked_about())),
            fexit_refusal: None,
        }
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
            HookOutcome::absent(
                symbol,
                "not in this kernel (renamed, inlined, another vendor's or a module not loaded)",
            )
        })
    }

    fn attach_fentry(&mut self, ebpf: &mut Ebpf, btf: &Btf, hook: &FunctionHook) -> HookOutcome {
        let Some(programs) = hook.fentry else {
            return HookOutcome::new(
                hook.symbol,
                Err(format!(
                    "no fentry program: {} is only in kernels whose fexit cannot read a return value",
                    hook.symbol
                )),
            );
        };
        if let Some(refusal) = &self.fexit_refusal {
            return HookOutcome::new(hook.symbol, Err(refusal.clone()));
        }
        let outcome = attach_fentry(ebpf, btf, hook.symbol, programs);
        if let Some(refusal) = outcome.error.as_deref().and_then(missing_func_ret) {
            self.fexit_refusal = Some(refusal.to_string());
            return HookOutcome::new(hook.symbol, Err(refusal.to_string()));
        }
        outcome
    }
}

/// BPF_FUNC_get_func_ret's number, which a verifier that does not know the helper prints.
const GET_FUNC_RET_HELPER: &str = "unknown#184";

/// Plain words for a verifier that refused an fexit program for want of bpf_get_func_ret.
fn missing_func_ret(error: &str) -> Option<&'static str> {
    (error.contains(GET_FUNC_RET_HELPER) || error.contains("bpf_get_func_ret")).then_some(
        "this kernel's fexit programs cannot read a return value (bpf_get_func_ret is Linux 5.17+): kprobes instead",
    )
}

/// Runs one loader step, logging how long it took (-vv): where attach time goes.
fn timed<T>(program: &str, step: &str, run: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let result = run();
    log::debug!("{program}: {step} in {} ms", start.elapsed().as_millis());
    result
}

/// How many instructions the verifier walked for a program (5.16+; -vv): verification time
/// follows it, and unlike the time it does not vary with the machine's load. Asks the kernel
/// only when the line would be logged.
fn log_verified_size<E>(
    program: &str,
    info: impl FnOnce() -> Result<aya::programs::ProgramInfo, E>,
) {
    if !log::log_enabled!(log::Level::Debug) {
        return;
    }
    if let Some(count) = info().ok().and_then(|i| i.verified_instruction_count()) {
        log::debug!("{program}: the verifier walked {count} instructions");
    }
}

fn attach_fentry(ebpf: &mut Ebpf, btf: &Btf, symbol: &str, programs: Programs) -> HookOutcome {
    let result = (|| -> Result<(), String> {
        // The exit is attached first: an exit without its entry is harmless, the reverse leaves
        // frames that are never popped.
        let exit = programs.exit;
        let fexit: &mut FExit = program(ebpf, exit)?;
        timed(exit, "verified", || fexit.load(symbol, btf)).map_err(|e| describe(&e))?;
        log_verified_size(exit, || fexit.info());
        let exit_link = timed(exit, "attached", || fexit.attach()).map_err(|e| describe(&e))?;
        let Some(entry) = programs.entry else {
            return Ok(());
        };
        let fentry: &mut FEntry = program(ebpf, entry)?;
        let entry_result = timed(entry, "verified", || fentry.load(symbol, btf))
            .map_err(|e| describe(&e))
            .and_then(|()| {
                log_verified_size(entry, || fentry.info());
                timed(entry, "attached", || fentry.attach())
                    .map(|_| ())
                    .map_err(|e| describe(&e))
            });
        if let Err(e) = entry_result {
            let fexit: &mut FExit = program(ebpf, exit)?;
            let _ = fexit.detach(exit_link);
            return Err(e);
        }
        Ok(())
    })();
    HookOutcome::new(symbol, result)
}

fn attach_kprobe(ebpf: &mut Ebpf, hook: &FunctionHook) -> HookOutcome {
    let Programs { entry, exit } = hook.kprobe;
    let result = (|| -> Result<(), String> {
        let kretprobe: &mut KProbe = program(ebpf, exit)?;
        load_once(kretprobe)?;
        let exit_link = kretprobe.attach(hook.symbol, 0).map_err(|e| describe(&e))?;
        let Some(entry) = entry else {
            return Ok(());
        };
        let kprobe: &mut KProbe = program(ebpf, entry)?;
        let entry_result = load_once(kprobe).and_then(|()| {
            kprobe
                .attach(hook.symbol, 0)
                .map(|_| ())
                .map_err(|e| describe(&e))
        });
        if let Err(e) = entry_result {
            let kretprobe: &mut KProbe = program(ebpf, exit)?;
            let _ = kretprobe.detach(exit_link);
            return Err(e);
        }
        Ok(())
    })();
    HookOutcome::new(hook.symbol, result)
}

fn attach_tracepoint(ebpf: &mut Ebpf, btf: &Btf, hook: &TracepointHook) -> HookOutcome {
    let label = format!("{}:{}", hook.category, hook.name);
    let result = (|| -> Result<(), String> {
        let tracepoint: &mut BtfTracePoint = program(ebpf, hook.program)?;
        if tracepoint.fd().is_ok() {
            return Err(format!(
                "program {} already serves another tracepoint",
                hook.program
            ));
        }
        tracepoint.load(hook.name, btf).map_err(|e| describe(&e))?;
        tracepoint.attach().map_err(|e| describe(&e))?;
        Ok(())
    })();
    HookOutcome::new_tracepoint(label, result)
}

/// The program that keeps how long tasks with calls in flight are switched out, and its event.
const WAITING_PROGRAM: &str = "track__sched_switch__tp";
const WAITING_EVENT: &str = "sched_switch";

/// Hooks the scheduler's switch (sched_switch, a BTF tracepoint), which keeps how long a task
/// with calls in flight is switched out, so that waiting is taken out of the calls' time.
fn attach_waiting(ebpf: &mut Ebpf, btf: &Btf) -> Result<(), String> {
    let program: &mut BtfTracePoint = program(ebpf, WAITING_PROGRAM)?;
    program.load(WAITING_EVENT, btf).map_err(|e| describe(&e))?;
    program.attach().map(|_| ()).map_err(|e| describe(&e))
}

/// kprobe programs may serve several functions: load them the first time only.
fn load_once(program: &mut KProbe) -> Result<(), String> {
    if program.fd().is_ok() {
        return Ok(());
    }
    program.load().map_err(|e| describe(&e))
}

pub(super) fn program<'a, T>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut T, String>
where
    &'a mut T: TryFrom<&'a mut Program>,
{
    let program = ebpf
        .program_mut(name)
        .ok_or_else(|| format!("the BPF object has no program `{name}` (rebuild)"))?;
    program
        .try_into()
        .map_err(|_| format!("program `{name}` is not of the expected type"))
}

/// One line for an aya error and its causes: the syscall's answer, and the verifier's last word
/// when it said one (the whole log is printed with IOMMUTOP_DEBUG_VERIFIER=1).
pub(super) fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    if std::env::var_os("IOMMUTOP_DEBUG_VERIFIER").is_some() {
        eprintln!("{text}");
    }
    one_line(&text)
}

fn one_line(text: &str) -> String {
    let line = plain_words(&raw_line(text));
    const LIMIT: usize = 240;
    if line.len() <= LIMIT {
        return line;
    }
    let mut cut = LIMIT;
    while !line.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &line[..cut])
}

/// What the kernel's terse answers mean, where it is known.
fn plain_words(line: &str) -> String {
    if line.contains("/sys/bus/event_source/devices/kprobe/type") {
        return "this kernel has no kprobe PMU (kprobe events not built in, or hidden by a \
                sandbox): No such file or directory"
            .into();
    }
    if line.contains("Operation not permitted") && line.contains("(empty verifier log)") {
        return format!("{line}: refused before verification (lockdown, an LSM or a sandbox)");
    }
    line.to_string()
}

fn raw_line(text: &str) -> String {
    match text.split_once("Verifier output:") {
        Some((syscall, log)) => {
            let syscall = syscall.trim().trim_end_matches('.');
            match verifier_verdict(log) {
                Some(verdict) => format!("{syscall}; verifier: {verdict}"),
                None => format!("{syscall} (empty verifier log)"),
            }
        }
        None => text.lines().next().unwrap_or("").to_string(),
    }
}

/// The verifier's reason: the last log line that is not a statistic.
fn verifier_verdict(log: &str) -> Option<&str> {
    log.lines().map(str::trim).rev().find(|l| {
        !l.is_empty()
            && !l.starts_with("verification time")
            && !l.starts_with("processed ")
            && !l.starts_with("stack depth")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_device_ids_pack_the_pci_address_below_any_kernel_pointer() {
        assert_eq!(owned_device_id("0000:00:04.0"), 0x40); // domain 0000, bus 00, device 04, function 0
        assert_eq!(owned_device_id("10de:81:1f.7"), 0x0001_0de8_11f7);
        assert!(owned_device_id("ffff:ff:ff.f") < 0xffff_8000_0000_0000);
    }

    #[test]
    fn task_slots_take_powers_of_two_up_to_the_map_as_a_mask() {
        assert_eq!(task_slots_setting("1"), Ok(0));
        assert_eq!(task_slots_setting("64"), Ok(63));
        assert_eq!(
            task_slots_setting(&IOMMUTOP_TASK_SLOTS.to_string()),
            Ok(IOMMUTOP_TASK_SLOTS - 1)
        );
        for bad in ["0", "3", "2048", "-1", "all", ""] {
            let error = task_slots_setting(bad).expect_err(bad);
            assert!(error.starts_with(&format!("IOMMUTOP_TASK_SLOTS={bad}: ")));
            assert!(!error.contains('\n'), "one line: {error}");
        }
    }

    #[test]
    fn row_hints_take_1_to_the_table_s_size() {
        let most = 1u32 << IOMMUTOP_ROW_HINT_BITS;
        assert_eq!(row_hints_setting("1"), Ok(1));
        assert_eq!(row_hints_setting(&most.to_string()), Ok(most));
        for bad in ["0", "1025", "-1", "lots", ""] {
            let error = row_hints_setting(bad).expect_err(bad);
            assert!(error.starts_with(&format!("IOMMUTOP_ROW_HINTS={bad}: ")));
            assert!(!error.contains('\n'), "one line: {error}");
        }
    }

    #[test]
    fn stack_interval_is_whole_milliseconds_in_ns() {
        assert_eq!(stack_interval_setting("0"), Ok(0));
        assert_eq!(stack_interval_setting("20"), Ok(20_000_000));
        for bad in ["-1", "2.5", "20ms", "", "18446744073709551615"] {
            let error = stack_interval_setting(bad).expect_err(bad);
            assert!(error.starts_with(&format!("IOMMUTOP_STACK_INTERVAL_MS={bad}: ")));
            assert!(!error.contains('\n'), "one line: {error}");
        }
    }

    #[test]
    fn a_call_is_missed_only_when_both_its_programs_were_skipped() {
        let misses = BTreeMap::from([
            ("dma__map_phys__fentry".to_string(), 160),
            ("dma__map_phys__fexit".to_string(), 166),
            ("dma__unmap_phys__fentry".to_string(), 4),
            ("dma__unmap_phys__fexit".to_string(), 0),
            ("completion__block_rq__tp".to_string(), 7),
        ]);
        let missed = possibly_missed_calls(&misses);
        assert_eq!(missed.get("dma_map"), Some(&160));
        assert_eq!(
            missed.get("dma_unmap"),
            None,
            "an exit seen counts the call"
        );
        assert_eq!(
            missed.get("completion"),
            Some(&7),
            "a count-only run skipped is an event lost"
        );
    }

    #[test]
    fn fdinfo_fields_are_read_by_name() {
        let info = "prog_type:\t26\nrun_time_ns:\t120\nrun_cnt:\t3\nrecursion_misses:\t7\n";
        assert_eq!(fdinfo_field(info, "recursion_misses"), Some(7));
        assert_eq!(fdinfo_field(info, "run_cnt"), Some(3));
        assert_eq!(fdinfo_field(info, "verified_insns"), None);
    }

    #[test]
    fn empty_verifier_log_is_said_in_words() {
        let text = "the BPF_PROG_LOAD syscall returned Operation not permitted (os error 1). Verifier output: ";
        let line = one_line(text);
        assert!(
            line.starts_with(
                "the BPF_PROG_LOAD syscall returned Operation not permitted (os error 1) (empty verifier log): refused before verification"
            ),
            "{line}"
        );
        assert!(line.contains("lockdown"), "{line}");
    }

    #[test]
    fn a_missing_kprobe_pmu_is_named() {
        let text =
            "`/sys/bus/event_source/devices/kprobe/type`: No such file or directory (os error 2)";
        let line = one_line(text);
        assert!(line.starts_with("this kernel has no kprobe PMU"), "{line}");
        assert!(super::super::status::HookOutcome::new("f", Err(line)).absent);
    }

    #[test]
    fn verifier_rejection_keeps_the_reason_line() {
        let text = "the BPF_PROG_LOAD syscall returned Permission denied (os error 13). Verifier output: 0: R1=ctx()\n25: (79) r1 = *(u64 *)(r0 +32)\nR0 unbounded memory access\nverification time 389 usec\nstack depth 24\n";
        assert_eq!(
            one_line(text),
            "the BPF_PROG_LOAD syscall returned Permission denied (os error 13); verifier: R0 unbounded memory access"
        );
    }
}
