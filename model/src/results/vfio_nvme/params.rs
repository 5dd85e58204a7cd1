//! What the driver was asked to do, as its results repeat it: a run's parameters or a sweep's.

use serde::{Deserialize, Serialize};

/// The host page size that backs the DMA buffers.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr, strum::Display,
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

    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// The access pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::Display)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Pattern {
    RandRead,
    RandWrite,
    Read,
    Write,
}

/// Which VFIO interface was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Auto,
    Legacy,
    Iommufd,
}

/// When a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// After this many seconds.
    Duration(f64),
    /// After this many I/Os in total, split evenly over the threads.
    Ios(u64),
}

/// The device and what the tool might change on the host to use it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// PCI address, controller or namespace as given; `None`: the only NVMe controller.
    pub device: Option<String>,
    pub bind: bool,
    pub reserve_hugepages: bool,
    pub backend: Backend,
    pub nsid: u32,
}

/// One run of I/O.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunParams {
    pub target: Target,
    pub pattern: Pattern,
    pub block_size: u32,
    pub queue_depth: u16,
    pub threads: u16,
    pub stop: Stop,
    /// Distinct buffer pages each thread cycles through (`None`: as few as the queue depth needs).
    pub pages: Option<u64>,
    pub page_size: PageSize,
    pub allow_write: bool,
    pub verify: bool,
    pub seed: u64,
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
}

/// Distinct buffer pages of `page_bytes` per thread: `pages` if given, or the fewest that hold
/// `queue_depth` buffer slots of `block_size` (each rounded up to 4 KiB, so slots stay page
/// aligned).
pub fn buffer_pages(pages: Option<u64>, block_size: u32, queue_depth: u16, page_bytes: u64) -> u64 {
    pages.unwrap_or_else(|| {
        let slot = u64::from(block_size).div_ceil(4096) * 4096;
        (slot * u64::from(queue_depth)).div_ceil(page_bytes).max(1)
    })
}

/// The IOTLB sweep: QD1 reads over 1, 2, 4 … N distinct pages, per page size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepParams {
    pub target: Target,
    pub page_sizes: Vec<PageSize>,
    pub max_pages: Option<u64>,
    pub max_pages_per_size: Vec<(PageSize, u64)>,
    pub ios_per_step: u64,
    pub block_size: u32,
    pub seed: u64,
}
