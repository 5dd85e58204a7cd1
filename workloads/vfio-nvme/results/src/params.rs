//! What the driver was asked to do, as its results repeat it: a run's parameters or a sweep's,
//! and the names its enums are given by (`"4k"`, `"randread"`), with errors that name the input
//! and the fix.

use serde::{Deserialize, Serialize};
use std::str::FromStr;
use std::time::Duration;
use strum::VariantArray;

/// The most distinct buffer pages a thread (or a sweep step) cycles through.
pub const MAX_PAGES: u64 = 1 << 20;
/// The largest queue depth per thread (the I/O queue then has `qd + 1` entries).
pub const MAX_QUEUE_DEPTH: u16 = 1024;
/// The most threads (one I/O queue pair each).
pub const MAX_THREADS: u16 = 64;
/// The largest `--bs`.
pub const MAX_BLOCK_SIZE: u32 = 2 << 20;

/// A bad parameter: the option, the value given, and what to give instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{option} `{input}`: {fix}")]
pub struct ParamError {
    pub option: String,
    pub input: String,
    pub fix: String,
}

impl ParamError {
    pub fn new(option: &str, input: impl Into<String>, fix: impl Into<String>) -> ParamError {
        ParamError {
            option: option.to_string(),
            input: input.into(),
            fix: fix.into(),
        }
    }
}

/// The host page size that backs the DMA buffers.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::VariantArray,
    strum::IntoStaticStr,
    strum::Display,
)]
pub enum PageSize {
    #[serde(rename = "4k")]
    #[strum(serialize = "4k")]
    Size4K,
    #[serde(rename = "2m")]
    #[strum(serialize = "2m")]
    Size2M,
    #[serde(rename = "1g")]
    #[strum(serialize = "1g")]
    Size1G,
}

impl PageSize {
    pub fn bytes(self) -> u64 {
        match self {
            PageSize::Size4K => 4 << 10,
            PageSize::Size2M => 2 << 20,
            PageSize::Size1G => 1 << 30,
        }
    }

    /// The size in KiB, as the kernel names huge page pools (`hugepages-2048kB`).
    pub fn kib(self) -> u64 {
        self.bytes() >> 10
    }

    /// The page size of `kib` KiB, if it is one of ours.
    pub fn of_kib(kib: u64) -> Option<PageSize> {
        PageSize::VARIANTS.iter().copied().find(|p| p.kib() == kib)
    }

    pub fn name(self) -> &'static str {
        self.into()
    }

    pub fn is_huge(self) -> bool {
        self != PageSize::Size4K
    }

    /// The directory under /sys/kernel/mm/hugepages/ for this size (huge sizes only).
    pub fn hugepages_dir(self) -> Option<&'static str> {
        match self {
            PageSize::Size4K => None,
            PageSize::Size2M => Some("hugepages-2048kB"),
            PageSize::Size1G => Some("hugepages-1048576kB"),
        }
    }
}

impl FromStr for PageSize {
    type Err = ParamError;
    fn from_str(s: &str) -> Result<PageSize, ParamError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "4k" | "4kib" | "4096" => Ok(PageSize::Size4K),
            "2m" | "2mib" | "2097152" => Ok(PageSize::Size2M),
            "1g" | "1gib" | "1073741824" => Ok(PageSize::Size1G),
            _ => Err(ParamError::new("--page-size", s, "use 4k, 2m or 1g")),
        }
    }
}

/// The access pattern.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::VariantArray,
    strum::IntoStaticStr,
    strum::Display,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Pattern {
    RandRead,
    RandWrite,
    Read,
    Write,
}

impl Pattern {
    pub fn is_write(self) -> bool {
        matches!(self, Pattern::RandWrite | Pattern::Write)
    }
    pub fn is_random(self) -> bool {
        matches!(self, Pattern::RandRead | Pattern::RandWrite)
    }
    pub fn name(self) -> &'static str {
        self.into()
    }
}

impl FromStr for Pattern {
    type Err = ParamError;
    fn from_str(s: &str) -> Result<Pattern, ParamError> {
        let wanted = s.trim().to_ascii_lowercase();
        Pattern::VARIANTS
            .iter()
            .copied()
            .find(|p| p.name() == wanted)
            .ok_or_else(|| {
                ParamError::new("--pattern", s, "use randread, randwrite, read or write")
            })
    }
}

/// Which VFIO interface to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// iommufd where /dev/iommu and the device's VFIO cdev exist, else the legacy container.
    #[default]
    Auto,
    /// The legacy container/group interface with the type1 IOMMU.
    Legacy,
    /// iommufd with the VFIO device cdev.
    Iommufd,
}

impl FromStr for Backend {
    type Err = ParamError;
    fn from_str(s: &str) -> Result<Backend, ParamError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Backend::Auto),
            "legacy" | "type1" | "container" => Ok(Backend::Legacy),
            "iommufd" => Ok(Backend::Iommufd),
            _ => Err(ParamError::new(
                "--backend",
                s,
                "use auto, legacy or iommufd",
            )),
        }
    }
}

/// The device and what the tool may change on the host to use it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// PCI address (`0000:01:00.0`), controller (`nvme0`) or namespace (`/dev/nvme0n1`).
    /// `None`: the only NVMe controller there is (reads only).
    pub device: Option<String>,
    /// Rebind the controller from its driver to vfio-pci for the run, and back after.
    pub bind: bool,
    /// Raise nr_hugepages as needed for the run, and put it back after.
    pub reserve_hugepages: bool,
    pub backend: Backend,
    /// The namespace to do I/O on.
    pub nsid: u32,
}

impl Default for Target {
    fn default() -> Target {
        Target {
            device: None,
            bind: false,
            reserve_hugepages: false,
            backend: Backend::Auto,
            nsid: 1,
        }
    }
}

impl Target {
    /// Checks what can be checked without the device.
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.nsid == 0 || self.nsid == u32::MAX {
            return Err(ParamError::new(
                "--nsid",
                self.nsid.to_string(),
                "give an active namespace ID (1 for most drives)",
            ));
        }
        if let Some(device) = &self.device {
            if device.trim().is_empty() {
                return Err(ParamError::new(
                    "--device",
                    device.clone(),
                    "give a PCI address (0000:01:00.0), nvme0 or /dev/nvme0n1",
                ));
            }
        }
        Ok(())
    }
}

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

/// One run of I/O: what the driver runs, and what its results repeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunParams {
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

impl Default for RunParams {
    fn default() -> RunParams {
        RunParams {
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

impl RunParams {
    /// Distinct buffer pages each thread uses: as given, or the fewest that hold `qd` buffers.
    pub fn pages_per_thread(&self) -> u64 {
        buffer_pages(
            self.pages,
            self.block_size,
            self.queue_depth,
            self.page_size.bytes(),
        )
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

/// Bytes a buffer slot takes: the block size rounded up to 4 KiB, so slots stay page aligned.
pub fn slot_bytes(block_size: u32) -> u64 {
    u64::from(block_size).div_ceil(4096) * 4096
}

/// How many buffer slots of `slot` bytes fit in `pages` pages of `page` bytes (see
/// the driver's `params::buffer_slots`).
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

/// Distinct buffer pages of `page_bytes` per thread: `pages` if given, or the fewest that hold
/// `queue_depth` buffer slots of `block_size` ([`slot_bytes`]: rounded up to 4 KiB, so slots
/// stay page aligned).
pub fn buffer_pages(pages: Option<u64>, block_size: u32, queue_depth: u16, page_bytes: u64) -> u64 {
    pages.unwrap_or_else(|| {
        let slot = slot_bytes(block_size);
        (slot * u64::from(queue_depth)).div_ceil(page_bytes).max(1)
    })
}

/// The IOTLB sweep: QD1 reads over 1, 2, 4 … N distinct pages, per page size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepParams {
    pub target: Target,
    pub page_sizes: Vec<PageSize>,
    /// The largest page count for every page size (`None`: [`default_sweep_pages`]).
    pub max_pages: Option<u64>,
    /// The largest page count for particular page sizes (`--pages 4k=8192,2m=128`), before
    /// `max_pages`.
    pub max_pages_per_size: Vec<(PageSize, u64)>,
    /// Measured I/Os per step (after a warm-up pass over the step's pages).
    pub ios_per_step: u64,
    pub block_size: u32,
    pub seed: u64,
}

impl Default for SweepParams {
    fn default() -> SweepParams {
        SweepParams {
            target: Target::default(),
            page_sizes: vec![PageSize::Size4K],
            max_pages: None,
            max_pages_per_size: Vec::new(),
            ios_per_step: 1000,
            block_size: 4096,
            seed: 1,
        }
    }
}

/// The largest page count swept by default: 4,096 × 4 KiB (16 MiB); 256 × 2 MiB (512 MiB);
/// 2 × 1 GiB.
pub fn default_sweep_pages(size: PageSize) -> u64 {
    match size {
        PageSize::Size4K => 4096,
        PageSize::Size2M => 256,
        PageSize::Size1G => 2,
    }
}

impl SweepParams {
    pub fn max_pages_for(&self, size: PageSize) -> u64 {
        self.max_pages_per_size
            .iter()
            .find(|(s, _)| *s == size)
            .map(|&(_, n)| n)
            .or(self.max_pages)
            .unwrap_or_else(|| default_sweep_pages(size))
    }

    pub fn validate(&self) -> Result<(), ParamError> {
        self.target.validate()?;
        if self.page_sizes.is_empty() {
            return Err(ParamError::new(
                "--page-size",
                "",
                "give at least one of 4k, 2m, 1g",
            ));
        }
        if self.ios_per_step == 0 {
            return Err(ParamError::new(
                "--ios",
                "0",
                "give the I/Os per step, at least 1",
            ));
        }
        let bs = self.block_size;
        if !(512..=4096).contains(&bs) || !bs.is_multiple_of(512) {
            return Err(ParamError::new(
                "--bs",
                bs.to_string(),
                "the sweep does one buffer per page: give 512 to 4096 bytes",
            ));
        }
        let limits = self
            .max_pages
            .into_iter()
            .chain(self.max_pages_per_size.iter().map(|&(_, n)| n));
        for max in limits {
            if max == 0 || max > MAX_PAGES {
                return Err(ParamError::new(
                    "--pages",
                    max.to_string(),
                    format!("give 1 to {MAX_PAGES}"),
                ));
            }
        }
        Ok(())
    }
}
