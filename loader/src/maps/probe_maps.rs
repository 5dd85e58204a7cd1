//! Typed handles on the object's maps, taken by name at load, and reading them into samples: the
//! statistics rows with their keys' names, the health counters, the programs' own counts and the
//! sampled call paths. One write: a device's owner process, whose work it is charged.

use super::convert::{name_from_kernel, source_kind, sum_directions, sum_per_cpu};
use super::fdinfo;
use super::rows::{GivenBack, RowBook, SourceId};
use crate::abi::{
    iommutop_dev_key, iommutop_dev_name, iommutop_dev_stats, iommutop_frame, iommutop_inflight,
    iommutop_key_kind, iommutop_op_health, iommutop_row_key, iommutop_stack_key,
    iommutop_stack_value, iommutop_task_slot, IOMMUTOP_FRAME_DUPLICATE, IOMMUTOP_FRAME_FILTERED,
};
use crate::kernel::kallsyms::Kallsyms;
use crate::links::entry_groups::entry_groups;
use crate::links::multi::MultiAttached;
use crate::object::load::{take_map, LoadError};
use aya::maps::{
    Array, HashMap as BpfHashMap, MapData, PerCpuArray, PerCpuHashMap, PerCpuValues, Queue,
    StackTraceMap,
};
use aya::Ebpf;
use iommutop_model::report::StackSample;
use iommutop_model::sample::{Health, Op, OpHealth, OpenCalls, RawSample, RawSource, SourceKind};
use iommutop_model::snapshot::RowKey;
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
#[error("reading BPF map `{map}`: {reason}")]
pub struct SampleError {
    map: &'static str,
    reason: String,
}

impl SampleError {
    /// Reading `map` failed for `reason`.
    pub(crate) fn of(map: &'static str, reason: impl std::fmt::Display) -> SampleError {
        sample_error(map, reason)
    }
}

/// The object's maps, each under its type.
pub struct ProbeMaps {
    /// Rows of per-CPU statistics; `rows` says which key each row is (ebpf/lib/maps.bpf.h),
    /// `names` what each row's key was named when the row was taken.
    stats: PerCpuArray<MapData, iommutop_dev_stats>,
    rows: BpfHashMap<MapData, iommutop_dev_key, u32>,
    names: Array<MapData, iommutop_dev_name>,
    /// Rows given back: their keys, and where the kernel takes them again from.
    row_keys: Array<MapData, iommutop_row_key>,
    free_rows: Queue<MapData, u32>,
    /// Processes with an unattributed row of their own.
    processes: BpfHashMap<MapData, u32, u32>,
    /// The rows being given back, and the names of keys user space made (a device's owner).
    book: RowBook,
    owners: BpfHashMap<MapData, u32, iommutop_dev_key>,
    health: PerCpuArray<MapData, u64>,
    op_health: PerCpuArray<MapData, iommutop_op_health>,
    /// Where contexts keep their calls in flight: interrupts' per CPU, tasks' in slots (absent
    /// where every task's is in the hash) or in the hash by thread id.
    irq_stacks: PerCpuArray<MapData, iommutop_inflight>,
    task_slots: Option<Array<MapData, iommutop_task_slot>>,
    hashed_stacks: BpfHashMap<MapData, u32, iommutop_inflight>,
    stacks: StackTraceMap<MapData>,
    stack_samples: PerCpuHashMap<MapData, iommutop_stack_key, iommutop_stack_value>,
}

impl ProbeMaps {
    /// Takes every map out of the loaded object: a renamed or retyped map fails here, at start.
    pub fn take(ebpf: &mut Ebpf) -> Result<ProbeMaps, LoadError> {
        let stats = take_map(ebpf, "iommutop_stats", PerCpuArray::try_from)?;
        let rows = take_map(ebpf, "iommutop_rows", BpfHashMap::try_from)?;
        let stacks = take_map(ebpf, "iommutop_stacks", StackTraceMap::try_from)?;
        let stack_samples = take_map(ebpf, "iommutop_stack_samples", PerCpuHashMap::try_from)?;
        let names = take_map(ebpf, "iommutop_names", Array::try_from)?;
        let row_keys = take_map(ebpf, "iommutop_row_keys", Array::try_from)?;
        let free_rows = take_map(ebpf, "iommutop_free_rows", Queue::try_from)?;
        let processes = take_map(ebpf, "iommutop_processes", BpfHashMap::try_from)?;
        let owners = take_map(ebpf, "iommutop_owners", BpfHashMap::try_from)?;
        let health = take_map(ebpf, "iommutop_health", PerCpuArray::try_from)?;
        let op_health = take_map(ebpf, "iommutop_op_health", PerCpuArray::try_from)?;
        let irq_stacks = take_map(ebpf, "iommutop_irq_inflight", PerCpuArray::try_from)?;
        let task_slots = match ebpf.map("iommutop_task_slots") {
            Some(_) => Some(take_map(ebpf, "iommutop_task_slots", Array::try_from)?),
            None => None,
        };
        let hashed_stacks = take_map(ebpf, "iommutop_inflight", BpfHashMap::try_from)?;
        Ok(ProbeMaps {
            stats,
            rows,
            names,
            row_keys,
            free_rows,
            processes,
            book: RowBook::default(),
            owners,
            health,
            op_health,
            irq_stacks,
            task_slots,
            hashed_stacks,
            stacks,
            stack_samples,
        })
    }

    /// Charges IOMMU work done outside any DMA API call by process `tgid` or its children (a
    /// userspace driver's VFIO mappings) to the PCI device `pci_address`, under that device's
    /// row, instead of to `unattributed`.
    pub fn charge_to_device(&mut self, tgid: u32, pci_address: &str) -> Result<(), SampleError> {
        let key = iommutop_dev_key {
            id: owned_device_id(pci_address),
            kind: iommutop_key_kind::IOMMUTOP_KEY_DEVICE,
            generation: 0,
        };
        self.book.name_owned(key.id, pci_address);
        self.owners
            .insert(tgid, key, 0)
            .map_err(|e| sample_error("iommutop_owners", e))
    }

    /// What the kernel named a row's key when it took the row: (name, driver).
    fn row_name(
        &self,
        key: &iommutop_dev_key,
        row: u32,
    ) -> Result<(String, Option<String>), SampleError> {
        let recorded = self
            .names
            .get(&row, 0)
            .map_err(|e| sample_error("iommutop_names", e))?;
        let mut name = name_from_kernel(&recorded.name);
        if name.is_empty() && key.kind == iommutop_key_kind::IOMMUTOP_KEY_DEVICE {
            name = self.book.owned_name(key.id).unwrap_or_default();
        }
        let driver = Some(name_from_kernel(&recorded.driver)).filter(|d| !d.is_empty());
        Ok((name, driver))
    }

    /// Each key's row, the rows being given back included (their last counts are read once).
    fn keyed_rows(&self) -> Result<Vec<(iommutop_dev_key, u32)>, SampleError> {
        let mut live = Vec::new();
        for entry in self.rows.iter() {
            live.push(entry.map_err(|e| sample_error("iommutop_rows", e))?);
        }
        Ok(self.book.rows_to_read(live))
    }

    /// Reads every map once and sums the per-CPU values.
    pub fn sample(&self, ebpf: &Ebpf, multi: &MultiAttached) -> Result<RawSample, SampleError> {
        let monotonic_ns = monotonic_ns();
        let mut sources = Vec::new();
        for (key, row) in self.keyed_rows()? {
            let Some(kind) = source_kind(key.kind) else {
                continue;
            };
            let per_cpu = self
                .stats
                .get(&row, 0)
                .map_err(|e| sample_error("iommutop_stats", e))?;
            let (name, driver) = self.row_name(&key, row)?;
            sources.push(RawSource {
                kind,
                id: key.id,
                name,
                generation: key.generation,
                driver,
                row: self.book.life_of(row),
                ops: sum_per_cpu(per_cpu.iter()),
                map_directions: sum_directions(per_cpu.iter()),
            });
        }
        self.book.sampled();
        sources.sort_by(|a, b| {
            (a.kind, &a.name, a.id, a.generation).cmp(&(b.kind, &b.name, b.id, b.generation))
        });
        let mut health = BTreeMap::new();
        for (index, counter) in Health::KERNEL.into_iter().enumerate() {
            let per_cpu = self
                .health
                .get(&(index as u32), 0)
                .map_err(|e| sample_error("iommutop_health", e))?;
            health.insert(counter, per_cpu.iter().sum());
        }
        let infos = program_fdinfos(ebpf, multi);
        let misses = misses_by_program(&infos);
        health.insert(
            Health::RecursionMisses,
            misses.values().fold(0u64, |sum, n| sum.saturating_add(*n)),
        );
        let loaded: BTreeSet<&str> = infos.iter().map(|(name, _)| name.as_str()).collect();
        let entry_groups = entry_groups(&loaded, &multi.stand_ins(), &misses);
        Ok(RawSample {
            monotonic_ns,
            sources,
            health,
            program_stats: program_stats(&infos),
            program_misses: misses,
            op_health: self.op_health()?,
            entry_groups,
            open_calls: Vec::new(),
            kernel_events: Vec::new(),
        })
    }

    /// The calls whose frames are open now and began between `since_ns` and `before_ns` (the
    /// kernel's monotonic clock): read at a recording's end, the calls whose exits were never
    /// seen, counted nowhere. A frame that began less than a sampling interval ago may belong to
    /// a call still running: the caller gives `before_ns` that much before now.
    pub fn open_calls(&self, since_ns: u64, before_ns: u64) -> Result<Vec<OpenCalls>, SampleError> {
        let mut open: BTreeMap<(SourceKind, u64, u32, Op), u64> = BTreeMap::new();
        let mut count = |stack: &iommutop_inflight| {
            for frame in open_frames(stack, since_ns, before_ns) {
                let (Some(kind), Some(&op)) =
                    (source_kind(frame.key.kind), Op::ALL.get(frame.op as usize))
                else {
                    continue;
                };
                *open
                    .entry((kind, frame.key.id, frame.key.generation, op))
                    .or_insert(0) += 1;
            }
        };
        let per_cpu = self
            .irq_stacks
            .get(&0, 0)
            .map_err(|e| sample_error("iommutop_irq_inflight", e))?;
        per_cpu.iter().for_each(&mut count);
        if let Some(slots) = &self.task_slots {
            for slot in slots.iter() {
                let slot = slot.map_err(|e| sample_error("iommutop_task_slots", e))?;
                if slot.owner != 0 {
                    count(&slot.stack);
                }
            }
        }
        for entry in self.hashed_stacks.iter() {
            let (_, stack) = entry.map_err(|e| sample_error("iommutop_inflight", e))?;
            count(&stack);
        }
        Ok(open
            .into_iter()
            .map(|((kind, id, generation, op), calls)| OpenCalls {
                kind,
                id,
                generation,
                op,
                calls,
            })
            .collect())
    }

    /// Per operation, the tracker's figures of calls it did not see whole, summed over CPUs.
    fn op_health(&self) -> Result<BTreeMap<Op, OpHealth>, SampleError> {
        let mut figures = BTreeMap::new();
        for op in Op::ALL {
            let per_cpu = self
                .op_health
                .get(&(op as u32), 0)
                .map_err(|e| sample_error("iommutop_op_health", e))?;
            let sum = per_cpu
                .iter()
                .fold(OpHealth::default(), |sum, cpu| OpHealth {
                    unseen_entries: sum.unseen_entries + cpu.unseen_entries,
                    unseen_exits: sum.unseen_exits + cpu.unseen_exits,
                    understudy_entries: sum.understudy_entries + cpu.understudy_entries,
                    understudy_exits: sum.understudy_exits + cpu.understudy_exits,
                    unpushed: sum.unpushed + cpu.unpushed,
                });
            if sum != OpHealth::default() {
                figures.insert(op, sum);
            }
        }
        Ok(figures)
    }

    /// Gives back the rows of `ended` (sources that can count no more: their device gone or
    /// bound elsewhere, their process exited), in two steps a sample apart: now each leaves the
    /// kernel's lookups (a new event of its key would take a fresh row) and is read once more by
    /// the next sample; at the call after that sample, it is zeroed and freed for a new key.
    /// Call at most once per sample, after it. Returns what this call freed and retired.
    pub fn give_back(&mut self, ended: &[SourceId]) -> Result<GivenBack, SampleError> {
        let mut given = GivenBack::default();
        for (key, row) in self.book.take_read() {
            self.free_row(row)?;
            self.book.freed(row);
            given.freed.push(SourceId::of_key(&key));
        }
        for id in ended {
            let key = id.key();
            let row = match self.rows.get(&key, 0) {
                Ok(row) => row,
                Err(aya::maps::MapError::KeyNotFound) => continue,
                Err(e) => return Err(sample_error("iommutop_rows", e)),
            };
            self.rows
                .remove(&key)
                .map_err(|e| sample_error("iommutop_rows", e))?;
            self.row_keys
                .set(row, zeroed_row_key(), 0)
                .map_err(|e| sample_error("iommutop_row_keys", e))?;
            if key.kind == iommutop_key_kind::IOMMUTOP_KEY_UNATTRIBUTED && key.id != 0 {
                // Its process exited: the kernel's list of processes with a row has room again.
                let _ = self.processes.remove(&(key.id as u32));
            }
            self.book.retire(key, row);
            given.retired.push(*id);
        }
        Ok(given)
    }

    /// A row read since it was retired: zeroed on every CPU, unnamed, and queued for a new key.
    fn free_row(&mut self, row: u32) -> Result<(), SampleError> {
        let cpus = aya::util::nr_cpus().map_err(|(_, e)| sample_error("iommutop_stats", e))?;
        let zeros = PerCpuValues::try_from(vec![zeroed_stats(); cpus])
            .map_err(|e| sample_error("iommutop_stats", e))?;
        self.stats
            .set(row, zeros, 0)
            .map_err(|e| sample_error("iommutop_stats", e))?;
        self.names
            .set(row, zeroed_name(), 0)
            .map_err(|e| sample_error("iommutop_names", e))?;
        self.free_rows
            .push(row, 0)
            .map_err(|e| sample_error("iommutop_free_rows", e))
    }

    /// The sampled call paths so far, symbolized, heaviest (by summed latency) first.
    pub fn stack_samples(&self) -> Result<Vec<StackSample>, SampleError> {
        if self.stack_samples.keys().next().is_none() {
            return Ok(Vec::new()); // nothing to name: spare reading the kernel's symbols
        }
        let kallsyms = Kallsyms::load(Path::new("/proc/kallsyms"))
            .map_err(|e| sample_error("iommutop_stacks", format!("/proc/kallsyms: {e}")))?;
        let mut names = BTreeMap::new();
        for (key, row) in self.keyed_rows()? {
            names.insert((key.kind, key.id), self.row_name(&key, row)?.0);
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
                Some(SourceKind::Deferred) => RowKey::Deferred { bucket: None },
                _ => RowKey::parse(
                    names
                        .get(&(key.kind, key.dev_id))
                        .map_or("", String::as_str),
                ),
            };
            // The BPF side writes an `Op` there: anything else is not a sample of ours.
            let Some(&op) = Op::ALL.get(key.op as usize) else {
                continue;
            };
            samples.push(StackSample {
                device,
                op,
                samples: count,
                total_ns,
                frames,
            });
        }
        samples.sort_by_key(|s| std::cmp::Reverse(s.total_ns));
        Ok(samples)
    }
}

/// Runs of each of our programs that the kernel skipped because the same program was already
/// running on that CPU (preempted, or interrupted by what it probes): each is an entry, an
/// exit or an event never seen. The kernel counts them per program (5.12+; a kprobe's skips only
/// on recent kernels) and shows them in the program's fdinfo.
fn misses_by_program(infos: &[(String, String)]) -> BTreeMap<String, u64> {
    infos
        .iter()
        .filter_map(|(name, info)| Some((name.clone(), fdinfo::field(info, "recursion_misses")?)))
        .collect()
}

/// Each program's runs and the time they took (the kernel counts them while its BPF statistics
/// are on).
fn program_stats(infos: &[(String, String)]) -> BTreeMap<String, (u64, u64)> {
    infos
        .iter()
        .filter_map(|(name, info)| {
            Some((
                name.clone(),
                (
                    fdinfo::field(info, "run_cnt")?,
                    fdinfo::field(info, "run_time_ns")?,
                ),
            ))
        })
        .collect()
}

/// Each program's fdinfo text, read once a sample for both of the above, by name.
fn program_fdinfos(ebpf: &Ebpf, multi: &MultiAttached) -> Vec<(String, String)> {
    program_fds(ebpf, multi)
        .filter_map(|(name, fd)| Some((name.to_string(), fdinfo::read(fd)?)))
        .collect()
}

/// Every program loaded, aya's and the multi-function ones ([`crate::links::multi`]), by name.
fn program_fds<'a>(
    ebpf: &'a Ebpf,
    multi: &'a MultiAttached,
) -> impl Iterator<Item = (&'a str, BorrowedFd<'a>)> {
    ebpf.programs()
        .filter_map(|(name, program)| Some((name, program.fd().ok()?.as_fd())))
        .chain(
            multi
                .programs()
                .map(|(name, fd)| -> (&'a str, BorrowedFd<'a>) { (name, fd) }),
        )
}

/// The frames of a stack that are in use and began between `since_ns` and `before_ns`, leaving
/// out twins and calls --pid/--cgroup left out (counted nowhere by design).
fn open_frames(
    stack: &iommutop_inflight,
    since_ns: u64,
    before_ns: u64,
) -> impl Iterator<Item = &iommutop_frame> {
    let depth = (stack.depth as usize).min(stack.frames.len());
    stack.frames[..depth].iter().filter(move |frame| {
        frame.start_ns != 0
            && (since_ns..before_ns).contains(&frame.start_ns)
            && frame.flags & (IOMMUTOP_FRAME_DUPLICATE | IOMMUTOP_FRAME_FILTERED) == 0
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

fn zeroed_stats() -> iommutop_dev_stats {
    // SAFETY: integers and arrays of integers only (bindgen from abi.h): all zero is valid.
    unsafe { std::mem::zeroed() }
}

fn zeroed_name() -> iommutop_dev_name {
    // SAFETY: two char arrays: all zero is two empty names.
    unsafe { std::mem::zeroed() }
}

fn zeroed_row_key() -> iommutop_row_key {
    // SAFETY: integers only: all zero is a row not taken.
    unsafe { std::mem::zeroed() }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_device_ids_pack_the_pci_address_below_any_kernel_pointer() {
        assert_eq!(owned_device_id("0000:00:04.0"), 0x40); // domain 0000, bus 00, device 04, function 0
        assert_eq!(owned_device_id("10de:81:1f.7"), 0x0001_0de8_11f7);
        assert!(owned_device_id("ffff:ff:ff.f") < 0xffff_8000_0000_0000);
    }
}
