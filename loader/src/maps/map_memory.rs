//! What the probes' BPF maps hold in kernel memory, for any number of CPUs: from each map's type,
//! key and value size and entries as the kernel created them (so with the sizes the loader set
//! before load, `IOMMUTOP_STATS_ROWS` among them), by the arithmetic of the kernel's own count
//! of a map's memory (each map type's `map_mem_usage`, kernel/bpf/arraymap.c, hashtab.c,
//! queue_stack_maps.c, stackmap.c).
//!
//! A per-CPU map holds a copy of every value for each possible CPU, its size rounded up to 8
//! bytes; a preallocated hash holds every element from the start, each with the kernel's element
//! header, plus its buckets. Left out: each map's own struct (a few hundred bytes), the hash
//! maps' per-CPU lock counters and LRU lists, the perf callchain buffers a stack map shares with
//! perf, and the slab and per-CPU allocators' rounding: this is an estimate of the data.

/// Map types as the kernel numbers them (`enum bpf_map_type`), those the probes create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapKind {
    Hash,
    Array,
    PerCpuHash,
    PerCpuArray,
    StackTrace,
    LruHash,
    LruPerCpuHash,
    Queue,
    /// Another type, by the kernel's number: counted as an array of its values.
    Other(u32),
}

impl MapKind {
    pub fn from_kernel(map_type: u32) -> MapKind {
        match map_type {
            1 => MapKind::Hash,
            2 => MapKind::Array,
            5 => MapKind::PerCpuHash,
            6 => MapKind::PerCpuArray,
            7 => MapKind::StackTrace,
            9 => MapKind::LruHash,
            10 => MapKind::LruPerCpuHash,
            22 => MapKind::Queue,
            other => MapKind::Other(other),
        }
    }

    /// The kernel's name without `BPF_MAP_TYPE_`, lower case (`percpu_array`).
    pub fn name(self) -> String {
        match self {
            MapKind::Hash => "hash".into(),
            MapKind::Array => "array".into(),
            MapKind::PerCpuHash => "percpu_hash".into(),
            MapKind::PerCpuArray => "percpu_array".into(),
            MapKind::StackTrace => "stack_trace".into(),
            MapKind::LruHash => "lru_hash".into(),
            MapKind::LruPerCpuHash => "lru_percpu_hash".into(),
            MapKind::Queue => "queue".into(),
            MapKind::Other(number) => format!("type {number}"),
        }
    }

    /// Whether each possible CPU has its own copy of every value.
    pub fn per_cpu(self) -> bool {
        matches!(
            self,
            MapKind::PerCpuArray | MapKind::PerCpuHash | MapKind::LruPerCpuHash
        )
    }

    fn hash(self) -> bool {
        matches!(
            self,
            MapKind::Hash | MapKind::PerCpuHash | MapKind::LruHash | MapKind::LruPerCpuHash
        )
    }

    fn lru(self) -> bool {
        matches!(self, MapKind::LruHash | MapKind::LruPerCpuHash)
    }
}

/// `BPF_F_NO_PREALLOC`: a hash whose elements are allocated as they are added.
const NO_PREALLOC: u32 = 1 << 0;
/// `BPF_F_MMAPABLE`: an array whose values are whole pages.
const MMAPABLE: u32 = 1 << 10;
const PAGE_SIZE: u64 = 4096;
/// `sizeof(struct htab_elem)` before its key: the bucket's list node, the LRU node or the
/// per-CPU pointer's slot, the hash.
const HTAB_ELEM_HEADER: u64 = 48;
/// `sizeof(struct bucket)`: a list head and its lock.
const HTAB_BUCKET: u64 = 16;
/// `sizeof(struct stack_map_bucket)` before its frames.
const STACK_BUCKET_HEADER: u64 = 16;
const POINTER: u64 = 8;

/// One map as the kernel created it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapShape {
    /// The object's name for it (`iommutop_stats`, `.rodata`).
    pub name: String,
    pub kind: MapKind,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
    /// What the kernel says the map takes (`memlock` in its fdinfo): its own count, for this
    /// machine's CPUs, of what [`MapShape::bytes`] estimates (since 6.4; before, a rougher
    /// figure without per-CPU copies). `None` where unreadable.
    pub kernel_bytes: Option<u64>,
}

impl MapShape {
    /// The map's data with `cpus` possible CPUs, in bytes.
    pub fn bytes(&self, cpus: u64) -> u64 {
        let key = round8(self.key_size);
        let value = round8(self.value_size);
        let entries = u64::from(self.max_entries);
        match self.kind {
            MapKind::Array | MapKind::Other(_) if self.flags & MMAPABLE != 0 => {
                (entries * value).next_multiple_of(PAGE_SIZE)
            }
            MapKind::Array | MapKind::Other(_) => entries * value,
            MapKind::PerCpuArray => entries * POINTER + entries * value * cpus,
            kind if kind.hash() => {
                let buckets = entries.next_power_of_two() * HTAB_BUCKET;
                let element = HTAB_ELEM_HEADER + key + if kind.per_cpu() { POINTER } else { value };
                if self.flags & NO_PREALLOC != 0 {
                    // Elements come as keys are added: at load, none.
                    return buckets;
                }
                // A plain hash keeps one spare element per CPU for updates of a full map.
                let spares = !kind.per_cpu() && !kind.lru();
                let elements = entries + if spares { cpus } else { 0 };
                let per_cpu_values = if kind.per_cpu() {
                    value * cpus * elements
                } else if spares {
                    POINTER * cpus
                } else {
                    0
                };
                buckets + element * elements + per_cpu_values
            }
            MapKind::StackTrace => {
                entries.next_power_of_two() * POINTER
                    + entries * (STACK_BUCKET_HEADER + u64::from(self.value_size))
            }
            MapKind::Queue => (entries + 1) * u64::from(self.value_size),
            // Every kind is one of the arms above; `hash()` covers the four hash kinds.
            _ => entries * value,
        }
    }
}

fn round8(size: u32) -> u64 {
    u64::from(size).next_multiple_of(8)
}

/// The CPU count the probes' maps are also sized for, beside this machine's: a large server's.
pub const LARGE_MACHINE_CPUS: u64 = 256;

/// Above this at [`LARGE_MACHINE_CPUS`], `probes` says which setting reduces it.
pub const LARGE_MACHINE_BUDGET: u64 = 64 << 20;

/// The probes' maps and this machine's possible CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapMemory {
    /// Possible CPUs here (`/sys/devices/system/cpu/possible`): per-CPU maps hold a copy for
    /// each, online or not.
    pub cpus: u64,
    /// Largest first at [`LARGE_MACHINE_CPUS`].
    pub maps: Vec<MapShape>,
}

impl MapMemory {
    pub fn new(cpus: u64, mut maps: Vec<MapShape>) -> MapMemory {
        maps.sort_by(|a, b| {
            b.bytes(LARGE_MACHINE_CPUS)
                .cmp(&a.bytes(LARGE_MACHINE_CPUS))
                .then_with(|| a.name.cmp(&b.name))
        });
        MapMemory { cpus, maps }
    }

    /// Every map's data with `cpus` CPUs.
    pub fn bytes(&self, cpus: u64) -> u64 {
        self.maps.iter().map(|map| map.bytes(cpus)).sum()
    }

    /// What the kernel says the maps take here, when it says it of every one.
    pub fn kernel_bytes(&self) -> Option<u64> {
        self.maps.iter().map(|map| map.kernel_bytes).sum()
    }

    /// The statistics rows (`iommutop_stats`), which `IOMMUTOP_STATS_ROWS` sizes.
    pub fn stats(&self) -> Option<&MapShape> {
        self.maps.iter().find(|map| map.name == STATS_MAP)
    }

    /// The most statistics rows that keep every map within [`LARGE_MACHINE_BUDGET`] at
    /// [`LARGE_MACHINE_CPUS`]; `None` when they are within it already (or there are none).
    pub fn rows_within_budget(&self) -> Option<u32> {
        let cpus = LARGE_MACHINE_CPUS;
        if self.bytes(cpus) <= LARGE_MACHINE_BUDGET {
            return None;
        }
        let stats = self.stats()?;
        let others = self.bytes(cpus) - stats.bytes(cpus);
        let row = MapShape {
            max_entries: 1,
            ..stats.clone()
        }
        .bytes(cpus);
        let rows = LARGE_MACHINE_BUDGET.saturating_sub(others) / row.max(1);
        Some(u32::try_from(rows).unwrap_or(u32::MAX).max(1))
    }
}

/// The map of per-CPU statistics rows (ebpf/lib/maps.bpf.h).
pub const STATS_MAP: &str = "iommutop_stats";

#[cfg(test)]
mod tests {
    use super::*;

    fn map(name: &str, kind: MapKind, key: u32, value: u32, entries: u32) -> MapShape {
        MapShape {
            name: name.into(),
            kind,
            key_size: key,
            value_size: value,
            max_entries: entries,
            flags: 0,
            kernel_bytes: None,
        }
    }

    #[test]
    fn per_cpu_maps_grow_with_cpus_and_round_values_to_8_bytes() {
        let stats = map(STATS_MAP, MapKind::PerCpuArray, 4, 12, 100);
        // 12 rounds to 16: 100 pointers plus 100 values on each CPU.
        assert_eq!(stats.bytes(1), 800 + 1_600);
        assert_eq!(stats.bytes(256), 800 + 1_600 * 256);
        let array = map("names", MapKind::Array, 4, 12, 100);
        assert_eq!(array.bytes(1), 1_600);
        assert_eq!(array.bytes(256), 1_600, "one copy whatever the CPUs");
    }

    #[test]
    fn hash_elements_carry_the_kernels_header_and_spares() {
        // 48-byte header + 16-byte key + 8-byte value = 72 a element; 256 buckets of 16 bytes.
        let rows = map("rows", MapKind::Hash, 16, 4, 256);
        assert_eq!(rows.bytes(2), 256 * 16 + (256 + 2) * 72 + 2 * 8);
        assert_eq!(rows.bytes(256), 256 * 16 + (256 + 256) * 72 + 256 * 8);
        // 100 entries take 128 buckets. A per-CPU hash stores a pointer, its values on each CPU.
        let samples = map("samples", MapKind::PerCpuHash, 24, 16, 100);
        assert_eq!(
            samples.bytes(4),
            128 * 16 + 100 * (48 + 24 + 8) + 16 * 4 * 100
        );
        // An LRU hash has no spares.
        let tasks = map("tasks", MapKind::LruHash, 4, 728, 8192);
        assert_eq!(tasks.bytes(256), 8192 * 16 + 8192 * (48 + 8 + 728));
        let lazy = MapShape {
            flags: NO_PREALLOC,
            ..rows
        };
        assert_eq!(lazy.bytes(256), 256 * 16, "no element until one is added");
    }

    #[test]
    fn queues_stacks_and_mmapable_arrays() {
        assert_eq!(map("free", MapKind::Queue, 0, 4, 256).bytes(8), 257 * 4);
        let stacks = map("stacks", MapKind::StackTrace, 4, 127 * 8, 2048);
        assert_eq!(stacks.bytes(8), 2048 * 8 + 2048 * (16 + 1016));
        let bss = MapShape {
            flags: MMAPABLE,
            ..map(".bss", MapKind::Array, 4, 100, 1)
        };
        assert_eq!(bss.bytes(1), 4096);
        assert_eq!(MapKind::from_kernel(6), MapKind::PerCpuArray);
        assert_eq!(MapKind::from_kernel(27).name(), "type 27");
    }

    #[test]
    fn rows_within_budget_leave_room_for_the_other_maps() {
        let row = 16 * 1024;
        let memory = MapMemory::new(
            2,
            vec![
                map("names", MapKind::Array, 4, 1 << 20, 4),
                map(STATS_MAP, MapKind::PerCpuArray, 4, row, 100),
            ],
        );
        assert_eq!(memory.maps[0].name, STATS_MAP, "largest first");
        assert_eq!(memory.bytes(2), (4 << 20) + 800 + 2 * 100 * u64::from(row));
        let rows = memory
            .rows_within_budget()
            .expect("over 64 MiB at 256 CPUs");
        // 60 MiB left after the 4 MiB array, 4 MiB + 8 bytes a row at 256 CPUs: 14 rows.
        assert_eq!(rows, 14);
        let fitted = MapMemory::new(
            2,
            vec![
                map("names", MapKind::Array, 4, 1 << 20, 4),
                map(STATS_MAP, MapKind::PerCpuArray, 4, row, rows),
            ],
        );
        assert!(fitted.bytes(LARGE_MACHINE_CPUS) <= LARGE_MACHINE_BUDGET);
        assert_eq!(fitted.rows_within_budget(), None);
        let one_more = MapMemory::new(
            2,
            vec![
                map("names", MapKind::Array, 4, 1 << 20, 4),
                map(STATS_MAP, MapKind::PerCpuArray, 4, row, rows + 1),
            ],
        );
        assert!(one_more.bytes(LARGE_MACHINE_CPUS) > LARGE_MACHINE_BUDGET);
    }
}
