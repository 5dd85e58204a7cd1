//! The pointer chase: a buffer backed by 4 KiB or 2 MiB pages, a random cycle of pointers through
//! the working set, and the time per dependent load.

use std::io;
use std::time::{Duration, Instant};

const LINE: usize = 64;
const PAGE_4K: usize = 4096;
pub const PAGE_2M: usize = 2 << 20;

/// What backs a buffer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Backing {
    /// 4 KiB pages (transparent huge pages refused with MADV_NOHUGEPAGE).
    Small,
    /// hugetlbfs 2 MiB pages (MAP_HUGETLB).
    HugeTlb,
    /// Transparent huge pages, asked for with MADV_HUGEPAGE: `huge_fraction` of the buffer got them.
    Thp { huge_fraction: f64 },
}

impl Backing {
    pub fn name(self) -> &'static str {
        match self {
            Backing::Small => "4k",
            Backing::HugeTlb => "hugetlb",
            Backing::Thp { .. } => "thp",
        }
    }
}

/// An anonymous private mapping, unmapped on drop.
pub struct Buffer {
    map: *mut libc::c_void,
    map_len: usize,
    /// Start of the usable part (2 MiB aligned for THP).
    base: *mut u8,
    len: usize,
    pub backing: Backing,
}

// SAFETY: the mapping is owned by this value alone (nothing else holds its address), so moving
// it to another thread moves sole ownership of the memory.
unsafe impl Send for Buffer {}

fn mmap(len: usize, flags: libc::c_int) -> io::Result<*mut libc::c_void> {
    // SAFETY: an anonymous private mapping at an address the kernel chooses aliases nothing.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(ptr)
    }
}

impl Buffer {
    /// `len` bytes on 4 KiB pages, populated.
    pub fn small(len: usize) -> io::Result<Buffer> {
        let map = mmap(len, 0)?;
        // SAFETY: the range is the mapping just made. Failure only means THP may apply.
        unsafe { libc::madvise(map, len, libc::MADV_NOHUGEPAGE) };
        let mut buffer = Buffer {
            map,
            map_len: len,
            base: map.cast(),
            len,
            backing: Backing::Small,
        };
        buffer.touch();
        Ok(buffer)
    }

    /// `len` bytes (rounded up to 2 MiB) on hugetlb pages; fails (ENOMEM) when too few are free.
    pub fn hugetlb(len: usize) -> io::Result<Buffer> {
        let len = len.div_ceil(PAGE_2M) * PAGE_2M;
        let map = mmap(
            len,
            libc::MAP_HUGETLB | libc::MAP_HUGE_2MB | libc::MAP_POPULATE,
        )?;
        Ok(Buffer {
            map,
            map_len: len,
            base: map.cast(),
            len,
            backing: Backing::HugeTlb,
        })
    }

    /// `len` bytes (rounded up to 2 MiB) at a 2 MiB boundary with MADV_HUGEPAGE, touched so that
    /// the kernel faults huge pages in where it can; `backing` says how much it got.
    pub fn thp(len: usize) -> io::Result<Buffer> {
        let len = len.div_ceil(PAGE_2M) * PAGE_2M;
        let map_len = len + PAGE_2M;
        let map = mmap(map_len, 0)?;
        let offset = (PAGE_2M - (map as usize) % PAGE_2M) % PAGE_2M;
        // SAFETY: offset < 2 MiB and offset + len <= map_len: the pointer stays in the mapping.
        let base = unsafe { map.cast::<u8>().add(offset) };
        // SAFETY: the range lies in the mapping just made.
        let rc = unsafe { libc::madvise(base.cast(), len, libc::MADV_HUGEPAGE) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: unmapping the mapping just made, which nothing else refers to.
            unsafe { libc::munmap(map, map_len) };
            return Err(e);
        }
        let mut buffer = Buffer {
            map,
            map_len,
            base,
            len,
            backing: Backing::Thp { huge_fraction: 0.0 },
        };
        buffer.touch();
        let huge = anon_huge_bytes(base as usize, len).unwrap_or(0);
        buffer.backing = Backing::Thp {
            huge_fraction: huge as f64 / len as f64,
        };
        Ok(buffer)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes one byte per 4 KiB so every page is faulted in before timing.
    fn touch(&mut self) {
        for offset in (0..self.len).step_by(PAGE_4K) {
            // SAFETY: offset < len: inside the mapping, which is writable.
            unsafe { self.base.add(offset).write_volatile(0) };
        }
    }

    /// Links a random cycle through the first `working_set` bytes: every cache line (`lines`), or
    /// one line per 4 KiB page at a varying offset (`pages`). Returns the start and the number
    /// of slots in the cycle.
    pub fn link(
        &mut self,
        working_set: usize,
        pages_pattern: bool,
        seed: u64,
    ) -> (*const usize, usize) {
        let working_set = working_set.min(self.len).max(PAGE_4K);
        let mut rng = XorShift(seed | 1);
        let offsets: Vec<usize> = if pages_pattern {
            (0..working_set / PAGE_4K)
                .map(|i| i * PAGE_4K + (rng.next() as usize % (PAGE_4K / LINE)) * LINE)
                .collect()
        } else {
            (0..working_set / LINE).map(|i| i * LINE).collect()
        };
        let mut order: Vec<u32> = (0..offsets.len() as u32).collect();
        for i in (1..order.len()).rev() {
            let j = (rng.next() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        let addr = |slot: u32| self.base as usize + offsets[slot as usize];
        for k in 0..order.len() {
            let from = addr(order[k]);
            let to = addr(order[(k + 1) % order.len()]);
            // SAFETY: `from` is a 64-byte aligned offset below working_set <= len, inside the
            // writable mapping, so an aligned usize fits there.
            unsafe { (from as *mut usize).write(to) };
        }
        (addr(order[0]) as *const usize, order.len())
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping this value owns; no reference into it outlives it
        // (chase pointers are only used while the buffer is borrowed).
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

/// Bytes of AnonHugePages in the mapping that holds `start` (from /proc/self/smaps).
fn anon_huge_bytes(start: usize, len: usize) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    let mut total = 0u64;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ') {
            if let Some((a, b)) = range.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = a < start + len && start < b;
                    continue;
                }
            }
        }
        if inside {
            if let Some(kb) = line.strip_prefix("AnonHugePages:") {
                total += kb
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()?
                    * 1024;
            }
        }
    }
    Some(total)
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// Follows the cycle from `start` for `steps` loads (a multiple of 8); returns where it ended.
/// On x86-64 the loop is written in assembly (eight dependent loads, a decrement, a branch), so
/// that what is timed is the same in debug and release builds.
///
/// # Safety
/// `start` must be a slot of a cycle built by [`Buffer::link`] in a buffer that is still mapped
/// and not relinked meanwhile.
#[inline(never)]
pub unsafe fn chase(start: *const usize, steps: u64) -> *const usize {
    let mut p = start;
    let rounds = steps / 8;
    if rounds == 0 {
        return p;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: every slot of the cycle holds the address of the next slot, inside the mapping and
    // aligned for a 64-bit load (caller's contract); the loop only reads memory and writes the
    // two registers it declares.
    unsafe {
        core::arch::asm!(
            "2:",
            "mov {p}, qword ptr [{p}]",
            "mov {p}, qword ptr [{p}]",
            "mov {p}, qword ptr [{p}]",
            "mov {p}, qword ptr [{p}]",
            "mov {p}, qword ptr [{p}]",
            "mov {p}, qword ptr [{p}]",
            "mov {p}, qword ptr [{p}]",
            "mov {p}, qword ptr [{p}]",
            "sub {n}, 1",
            "jnz 2b",
            p = inout(reg) p,
            n = inout(reg) rounds => _,
            options(nostack, readonly),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    for _ in 0..rounds {
        for _ in 0..8 {
            // SAFETY: every slot of the cycle holds the address of the next slot, inside the
            // mapping, aligned for usize (caller's contract).
            p = unsafe { p.read_volatile() } as *const usize;
        }
    }
    p
}

/// Reads the time-stamp counter, where it counts at a constant rate.
pub struct Tsc {
    usable: bool,
}

impl Tsc {
    /// Usable when the CPU says its TSC is constant and does not stop (`constant_tsc` and
    /// `nonstop_tsc` in /proc/cpuinfo), on x86-64.
    pub fn detect() -> Tsc {
        let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let line = flags.lines().find(|l| l.starts_with("flags")).unwrap_or("");
        let has = |flag: &str| line.split_whitespace().any(|f| f == flag);
        Tsc {
            usable: cfg!(target_arch = "x86_64") && has("constant_tsc") && has("nonstop_tsc"),
        }
    }

    pub fn usable(&self) -> bool {
        self.usable
    }

    pub fn read(&self) -> Option<u64> {
        if !self.usable {
            return None;
        }
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: RDTSC exists on every x86-64 CPU and only reads a counter.
            Some(unsafe { core::arch::x86_64::_rdtsc() })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    }
}

/// One working set's cost per access.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    pub ns_per_access: f64,
    /// TSC ticks per access, when the TSC is usable.
    pub ticks_per_access: Option<f64>,
    /// TSC ticks per ns over the measurement.
    pub ticks_per_ns: Option<f64>,
    pub accesses: u64,
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(values[values.len() / 2])
}

/// Times the cycle: one warm-up pass, then batches (at least one pass each, at least 3) until
/// `budget` is spent; the median batch.
///
/// # Safety
/// As for [`chase`].
pub unsafe fn measure(
    start: *const usize,
    slots: usize,
    budget: Duration,
    tsc: &Tsc,
) -> Measurement {
    let batch = (slots.max(50_000) as u64).div_ceil(8) * 8;
    // SAFETY: the caller's contract.
    let mut p = unsafe { chase(start, (slots.max(10_000) as u64).div_ceil(8) * 8) };
    let mut ns = Vec::new();
    let mut ticks = Vec::new();
    let mut rates = Vec::new();
    let started = Instant::now();
    while ns.len() < 3 || (started.elapsed() < budget && ns.len() < 1000) {
        let t0 = tsc.read();
        let i0 = Instant::now();
        // SAFETY: the caller's contract; `p` is a slot of the same cycle.
        p = unsafe { chase(p, batch) };
        let elapsed = i0.elapsed().as_nanos() as f64;
        let t1 = tsc.read();
        ns.push(elapsed / batch as f64);
        if let (Some(t0), Some(t1)) = (t0, t1) {
            let d = t1.wrapping_sub(t0) as f64;
            ticks.push(d / batch as f64);
            if elapsed > 0.0 {
                rates.push(d / elapsed);
            }
        }
    }
    std::hint::black_box(p);
    let accesses = batch * ns.len() as u64;
    Measurement {
        ns_per_access: median(&mut ns).unwrap_or(0.0),
        ticks_per_access: median(&mut ticks),
        ticks_per_ns: median(&mut rates),
        accesses,
    }
}

/// The working sets from `min` to `max`: `per_octave` sizes per doubling, each a multiple of
/// 4 KiB, `max` included.
pub fn working_sets(min: u64, max: u64, per_octave: u32) -> Vec<u64> {
    let mut sizes = Vec::new();
    let min = min.max(PAGE_4K as u64);
    let mut j = 0u32;
    loop {
        let exact = min as f64 * 2f64.powf(f64::from(j) / f64::from(per_octave.max(1)));
        let size = ((exact / PAGE_4K as f64).round() as u64).max(1) * PAGE_4K as u64;
        if size >= max {
            break;
        }
        if sizes.last() != Some(&size) {
            sizes.push(size);
        }
        j += 1;
    }
    sizes.push(max.max(min));
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_sets_double_and_end_at_the_maximum() {
        assert_eq!(
            working_sets(4096, 64 << 10, 1),
            [4096, 8192, 16384, 32768, 65536]
        );
        let two = working_sets(4096, 256 << 20, 2);
        // 4 KiB × √2 rounds to 4 KiB again (sizes are whole pages): 32 sizes, not 33.
        assert_eq!(two.len(), 32);
        assert_eq!(&two[..4], [4096, 8192, 12288, 16384]);
        assert_eq!(*two.last().unwrap(), 256 << 20);
        assert_eq!(working_sets(4096, 256 << 20, 1).len(), 17);
    }

    #[test]
    fn the_cycle_visits_every_slot_once() {
        let mut buffer = Buffer::small(1 << 20).unwrap();
        for pages in [false, true] {
            let (start, slots) = buffer.link(256 << 10, pages, 7);
            assert_eq!(slots, if pages { 64 } else { 4096 });
            let mut seen = std::collections::HashSet::new();
            let mut p = start;
            for _ in 0..slots {
                assert!(seen.insert(p as usize), "a slot came back early");
                // SAFETY: the cycle was just linked in a live buffer.
                p = unsafe { p.read() } as *const usize;
            }
            assert_eq!(p, start, "the cycle closes");
        }
    }

    #[test]
    fn a_small_working_set_is_measured() {
        let mut buffer = Buffer::small(64 << 10).unwrap();
        let (start, slots) = buffer.link(16 << 10, false, 1);
        // SAFETY: the cycle was just linked in a live buffer.
        let m = unsafe { measure(start, slots, Duration::from_millis(5), &Tsc::detect()) };
        // A unit check (nanoseconds, not ticks or picoseconds), not a speed target.
        assert!(m.ns_per_access > 0.0 && m.ns_per_access < 1000.0, "{m:?}");
        assert!(m.accesses >= 3 * 50_000);
    }
}
