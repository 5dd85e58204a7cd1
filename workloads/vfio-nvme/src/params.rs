//! What a run does: the typed parameters of a run and of the IOTLB sweep, their checks, and the
//! names they are given by (`"4k"`, `"randread"`), with errors that name the input and the fix.
//! Read from checked values by [`crate::options`].

use crate::error::ParamError;
use iommutop_vfio_nvme_results::params::RunParams;
pub use iommutop_vfio_nvme_results::params::{
    default_sweep_pages, Backend, PageSize, Pattern, SweepParams, Target, MAX_PAGES,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The largest queue depth per thread (the I/O queue then has `qd + 1` entries).
pub const MAX_QUEUE_DEPTH: u16 = 1024;
/// The most threads (one I/O queue pair each).
pub const MAX_THREADS: u16 = 64;
/// The largest `--bs`.
pub const MAX_BLOCK_SIZE: u32 = 2 << 20;

/// When a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// After this long (seconds in JSON).
    Duration(#[serde(with = "secs_f64")] Duration),
    /// After this many I/Os in total, split evenly over the threads.
    Ios(u64),
}

mod secs_f64 {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Duration::try_from_secs_f64(secs).map_err(serde::de::Error::custom)
    }
}

/// One run of I/O.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Params {
    pub target: Target,
    pub pattern: Pattern,
    /// Bytes per I/O: a multiple of the namespace's LBA size.
    pub block_size: u32,
    /// Commands in flight per thread.
    pub queue_depth: u16,
    /// Threads, each with its own I/O queue pair.
    pub threads: u16,
    pub stop: Stop,
    /// Distinct buffer pages each thread cycles through (`None`: as few as the queue depth needs).
    pub pages: Option<u64>,
    pub page_size: PageSize,
    /// Writes overwrite the device: they need this and a device named in `target.device`.
    pub allow_write: bool,
    /// Writes fill each block with a pattern derived from its LBA and `seed`; reads check it.
    pub verify: bool,
    /// Seeds the random LBAs and the verify pattern (same seed, same LBAs).
    pub seed: u64,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            target: Target::default(),
            pattern: Pattern::RandRead,
            block_size: 4096,
            queue_depth: 1,
            threads: 1,
            stop: Stop::Duration(Duration::from_secs(10)),
            pages: None,
            page_size: PageSize::Size4K,
            allow_write: false,
            verify: false,
            seed: 1,
        }
    }
}

/// Bytes a buffer slot takes: the block size rounded up to 4 KiB, so slots stay page aligned.
pub fn slot_bytes(block_size: u32) -> u64 {
    u64::from(block_size).div_ceil(4096) * 4096
}

impl Params {
    /// Distinct buffer pages each thread uses: as given, or the fewest that hold `qd` buffers.
    pub fn pages_per_thread(&self) -> u64 {
        iommutop_vfio_nvme_results::params::buffer_pages(
            self.pages,
            self.block_size,
            self.queue_depth,
            self.page_size.bytes(),
        )
    }

    /// The parameters as the run's results repeat them (the stop's duration in seconds).
    pub fn reported(&self) -> RunParams {
        RunParams {
            target: self.target.clone(),
            pattern: self.pattern,
            block_size: self.block_size,
            queue_depth: self.queue_depth,
            threads: self.threads,
            stop: match self.stop {
                Stop::Duration(duration) => {
                    iommutop_vfio_nvme_results::params::Stop::Duration(duration.as_secs_f64())
                }
                Stop::Ios(ios) => iommutop_vfio_nvme_results::params::Stop::Ios(ios),
            },
            pages: self.pages,
            page_size: self.page_size,
            allow_write: self.allow_write,
            verify: self.verify,
            seed: self.seed,
        }
    }

    /// Bytes of data buffer per thread.
    pub fn buffer_bytes_per_thread(&self) -> u64 {
        self.pages_per_thread() * self.page_size.bytes()
    }

    /// Checks everything that can be checked without the device.
    pub fn validate(&self) -> Result<(), ParamError> {
        self.target.validate()?;
        let bs = self.block_size;
        if !(512..=MAX_BLOCK_SIZE).contains(&bs) || !bs.is_multiple_of(512) {
            return Err(ParamError::new(
                "--bs",
                bs.to_string(),
                format!(
                    "give a multiple of 512 bytes up to {} KiB (4k, 64k)",
                    MAX_BLOCK_SIZE >> 10
                ),
            ));
        }
        if self.queue_depth == 0 || self.queue_depth > MAX_QUEUE_DEPTH {
            return Err(ParamError::new(
                "--qd",
                self.queue_depth.to_string(),
                format!("give 1 to {MAX_QUEUE_DEPTH}"),
            ));
        }
        if self.threads == 0 || self.threads > MAX_THREADS {
            return Err(ParamError::new(
                "--threads",
                self.threads.to_string(),
                format!("give 1 to {MAX_THREADS}"),
            ));
        }
        match self.stop {
            Stop::Duration(d) if d.is_zero() => {
                return Err(ParamError::new(
                    "--duration",
                    "0",
                    "give a positive time (10s, 500ms)",
                ))
            }
            Stop::Ios(0) => return Err(ParamError::new("--ios", "0", "give at least 1")),
            Stop::Ios(n) if n < u64::from(self.threads) => {
                return Err(ParamError::new(
                    "--ios",
                    n.to_string(),
                    format!("give at least one I/O per thread ({})", self.threads),
                ))
            }
            _ => {}
        }
        let pages = self.pages_per_thread();
        if pages == 0 || pages > MAX_PAGES {
            return Err(ParamError::new(
                "--pages",
                pages.to_string(),
                format!("give 1 to {MAX_PAGES}"),
            ));
        }
        let slots = buffer_slot_count(pages, self.page_size.bytes(), slot_bytes(bs));
        if slots < u64::from(self.queue_depth) {
            return Err(ParamError::new(
                "--pages",
                pages.to_string(),
                format!(
                    "{pages} x {} pages hold {slots} buffers of {bs} bytes, fewer than --qd {}: give --pages {} or more",
                    self.page_size,
                    self.queue_depth,
                    min_pages_for(self.queue_depth, self.page_size.bytes(), slot_bytes(bs))
                ),
            ));
        }
        if self.pattern.is_write() {
            check_write_allowed(self.pattern.name(), self.allow_write, &self.target)?;
        }
        Ok(())
    }
}

/// The page counts of a sweep: powers of two up to `max`, and `max` itself.
pub fn sweep_steps(max: u64) -> Vec<u64> {
    let mut steps = Vec::new();
    let mut n = 1u64;
    while n < max {
        steps.push(n);
        n = n.saturating_mul(2);
    }
    steps.push(max.max(1));
    steps
}

fn check_write_allowed(
    pattern: &str,
    allow_write: bool,
    target: &Target,
) -> Result<(), ParamError> {
    if !allow_write {
        return Err(ParamError::new(
            "--pattern",
            pattern,
            "writes overwrite the device's data: add --allow-write to mean it",
        ));
    }
    if target.device.is_none() {
        return Err(ParamError::new(
            "--pattern",
            pattern,
            "writes go only to a device named explicitly: add --device (0000:01:00.0, nvme0 or /dev/nvme0n1)",
        ));
    }
    Ok(())
}

/// How many buffer slots of `slot` bytes fit in `pages` pages of `page` bytes (see
/// [`buffer_slots`]).
pub fn buffer_slot_count(pages: u64, page: u64, slot: u64) -> u64 {
    if slot == 0 || page == 0 {
        return 0;
    }
    if slot <= page {
        pages * (page / slot)
    } else {
        (pages * page) / slot
    }
}

fn min_pages_for(qd: u16, page: u64, slot: u64) -> u64 {
    (1..=MAX_PAGES)
        .find(|&p| buffer_slot_count(p, page, slot) >= u64::from(qd))
        .unwrap_or(MAX_PAGES)
}

/// Byte offsets of the buffer slots in `pages` pages of `page` bytes, in the order they are
/// handed out: page-major (one slot in every page, then the second slot in every page, …), so
/// that consecutive I/Os touch different pages and the pages touched cycle through all of them.
/// A slot larger than a page spans consecutive pages. At most `limit` slots are returned.
pub fn buffer_slots(pages: u64, page: u64, slot: u64, limit: usize) -> Vec<u64> {
    let mut offsets = Vec::new();
    if slot == 0 || page == 0 || pages == 0 {
        return offsets;
    }
    if slot <= page {
        let per_page = page / slot;
        'outer: for s in 0..per_page {
            for p in 0..pages {
                if offsets.len() >= limit {
                    break 'outer;
                }
                offsets.push(p * page + s * slot);
            }
        }
    } else {
        let count = (pages * page) / slot;
        offsets.extend((0..count).take(limit).map(|i| i * slot));
    }
    offsets
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::VariantArray;

    #[test]
    fn page_sizes_parse_and_name_the_fix() {
        assert_eq!("4k".parse::<PageSize>(), Ok(PageSize::Size4K));
        assert_eq!("2M".parse::<PageSize>(), Ok(PageSize::Size2M));
        assert_eq!("1GiB".parse::<PageSize>(), Ok(PageSize::Size1G));
        let e = "8k".parse::<PageSize>().unwrap_err();
        assert_eq!(e.to_string(), "--page-size `8k`: use 4k, 2m or 1g");
    }

    /// The names are the ones users type, reports carry (serde) and screens show (Display).
    #[test]
    fn names_are_what_serde_writes_and_parse_back() {
        for &p in PageSize::VARIANTS {
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
            assert_eq!(p.to_string(), p.name());
            assert_eq!(p.name().parse::<PageSize>(), Ok(p));
        }
        for &p in Pattern::VARIANTS {
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
            assert_eq!(p.to_string(), p.name());
            assert_eq!(p.name().parse::<Pattern>(), Ok(p));
        }
        assert_eq!(PageSize::Size2M.name(), "2m");
        assert_eq!(Pattern::RandWrite.name(), "randwrite");
        assert_eq!(PageSize::of_kib(1 << 20), Some(PageSize::Size1G));
    }

    #[test]
    fn patterns_parse() {
        assert_eq!("randread".parse::<Pattern>(), Ok(Pattern::RandRead));
        assert_eq!("WRITE".parse::<Pattern>(), Ok(Pattern::Write));
        let e = "randrw".parse::<Pattern>().unwrap_err().to_string();
        assert!(
            e.contains("`randrw`") && e.contains("randread, randwrite, read or write"),
            "{e}"
        );
    }

    #[test]
    fn too_few_pages_for_the_queue_depth_says_how_many() {
        let p = Params {
            queue_depth: 32,
            pages: Some(4),
            ..Params::default()
        };
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("--pages 32 or more"), "{e}");
        let p = Params {
            queue_depth: 32,
            ..Params::default()
        };
        assert_eq!(p.pages_per_thread(), 32);
        p.validate().unwrap();
    }

    #[test]
    fn slots_are_page_major() {
        // Two 8 KiB pages with 4 KiB slots: page 0, page 1, then the second slot of each.
        assert_eq!(
            buffer_slots(2, 8192, 4096, usize::MAX),
            vec![0, 8192, 4096, 12288]
        );
        // 2 MiB pages: the first N slots touch N different pages.
        let s = buffer_slots(4, 2 << 20, 4096, 4);
        assert_eq!(s, vec![0, 2 << 20, 4 << 20, 6 << 20]);
        // A slot bigger than a page spans pages.
        assert_eq!(buffer_slots(4, 4096, 8192, usize::MAX), vec![0, 8192]);
        assert_eq!(buffer_slot_count(4, 4096, 8192), 2);
        assert_eq!(buffer_slot_count(3, 2 << 20, 4096), 3 * 512);
        assert_eq!(slot_bytes(512), 4096);
        assert_eq!(slot_bytes(12288), 12288);
    }

    #[test]
    fn sweep_steps_double_up_to_max() {
        assert_eq!(sweep_steps(1), vec![1]);
        assert_eq!(sweep_steps(8), vec![1, 2, 4, 8]);
        assert_eq!(sweep_steps(12), vec![1, 2, 4, 8, 12]);
    }

    #[test]
    fn params_round_trip_through_json() {
        let p = Params {
            stop: Stop::Duration(Duration::from_millis(1500)),
            ..Params::default()
        };
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains("\"duration\":1.5"), "{json}");
        assert!(json.contains("\"page_size\":\"4k\""), "{json}");
        assert_eq!(serde_json::from_str::<Params>(&json).unwrap(), p);
    }
}
