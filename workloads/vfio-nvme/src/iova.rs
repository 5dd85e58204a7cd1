//! Our own IOVA allocator. The device sees buffers at IOVAs we choose, inside the ranges the
//! IOMMU reports as valid (VFIO_IOMMU_GET_INFO's IOVA-range capability, or iommufd's
//! IOMMU_IOAS_IOVA_RANGES): the emulated VT-d has a 39-bit address width, so a process's virtual
//! addresses (47 bits) would not fit, and the MSI window at 0xfee00000 is excluded.
//!
//! Mappings are made once at set-up and live for the whole run, so a bump allocator is enough.

pub use iommutop_vfio_nvme_results::IovaRange;

/// The lowest IOVA handed out: page 0 stays unmapped so that a zero PRP faults instead of
/// hitting a buffer.
pub const MIN_IOVA: u64 = 0x1_0000;

/// Used when the kernel reports no ranges: the low 4 GiB below the x86 MSI window, which every
/// IOMMU translates.
pub const FALLBACK_RANGES: [IovaRange; 1] = [IovaRange {
    start: 0,
    last: 0xfedf_ffff,
}];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IovaError {
    #[error("IOVA allocation of {size} bytes aligned to {align}: the size must be non-zero and the alignment a power of two")]
    BadRequest { size: u64, align: u64 },
    #[error("no room for {size} bytes aligned to {align:#x} in the IOMMU's IOVA ranges ({ranges}): ask for fewer --pages or a smaller page size")]
    Exhausted {
        size: u64,
        align: u64,
        ranges: String,
    },
    #[error("the IOMMU reports no usable IOVA range")]
    NoRanges,
}

#[derive(Debug, Clone)]
pub struct IovaAllocator {
    ranges: Vec<IovaRange>,
    /// The next free IOVA.
    next: u64,
}

impl IovaAllocator {
    /// An allocator over `ranges` (any order; empty or inverted ranges are dropped).
    pub fn new(ranges: &[IovaRange]) -> Result<IovaAllocator, IovaError> {
        let mut ranges: Vec<IovaRange> = ranges
            .iter()
            .copied()
            .filter(|r| r.start <= r.last && r.last >= MIN_IOVA)
            .collect();
        ranges.sort_by_key(|r| r.start);
        if ranges.is_empty() {
            return Err(IovaError::NoRanges);
        }
        Ok(IovaAllocator {
            ranges,
            next: MIN_IOVA,
        })
    }

    /// The highest valid IOVA, e.g. 2^39 − 1 for the emulated VT-d.
    pub fn highest(&self) -> u64 {
        self.ranges.iter().map(|r| r.last).max().unwrap_or(0)
    }

    /// `size` bytes at an IOVA aligned to `align`, wholly inside one valid range.
    pub fn alloc(&mut self, size: u64, align: u64) -> Result<u64, IovaError> {
        if size == 0 || !align.is_power_of_two() {
            return Err(IovaError::BadRequest { size, align });
        }
        for r in &self.ranges {
            if r.last < self.next {
                continue;
            }
            let Some(start) = align_up(self.next.max(r.start), align) else {
                break;
            };
            let Some(end) = start.checked_add(size - 1) else {
                break;
            };
            if end <= r.last {
                self.next = end.saturating_add(1);
                return Ok(start);
            }
        }
        Err(IovaError::Exhausted {
            size,
            align,
            ranges: self
                .ranges
                .iter()
                .map(|r| format!("{:#x}-{:#x}", r.start, r.last))
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

fn align_up(v: u64, align: u64) -> Option<u64> {
    Some(v.checked_add(align - 1)? & !(align - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the emulated VT-d (39 bits) reports through VFIO: all but the MSI window.
    fn vtd39() -> Vec<IovaRange> {
        vec![
            IovaRange {
                start: 0,
                last: 0xfedf_ffff,
            },
            IovaRange {
                start: 0xfef0_0000,
                last: (1 << 39) - 1,
            },
        ]
    }

    #[test]
    fn allocations_are_aligned_disjoint_and_inside_the_width() {
        let mut a = IovaAllocator::new(&vtd39()).unwrap();
        let mut got = Vec::new();
        for (size, align) in [
            (4096, 4096),
            (8192, 4096),
            (2 << 20, 2 << 20),
            (4096, 4096),
            (1 << 30, 1 << 30),
        ] {
            let iova = a.alloc(size, align).unwrap();
            assert_eq!(iova % align, 0);
            assert!(iova >= MIN_IOVA);
            assert!(iova + size - 1 < 1 << 39);
            got.push((iova, size));
        }
        got.sort();
        for w in got.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "overlap {w:?}");
        }
        assert_eq!(a.highest(), (1 << 39) - 1);
    }

    #[test]
    fn the_msi_window_is_skipped() {
        let mut a = IovaAllocator::new(&vtd39()).unwrap();
        // Fill up to just below the window, then ask for more than is left there.
        let first = a.alloc(0xfed0_0000, 4096).unwrap();
        assert_eq!(first, MIN_IOVA);
        let next = a.alloc(2 << 20, 2 << 20).unwrap();
        assert!(next >= 0xfef0_0000, "{next:#x} overlaps the MSI window");
    }

    #[test]
    fn exhaustion_names_the_ranges_and_the_fix() {
        let mut a = IovaAllocator::new(&[IovaRange {
            start: 0,
            last: (1 << 20) - 1,
        }])
        .unwrap();
        let e = a.alloc(2 << 20, 4096).unwrap_err().to_string();
        assert!(e.contains("0x0-0xfffff") && e.contains("--pages"), "{e}");
        // A request that would overflow u64 fails instead of wrapping.
        let mut a = IovaAllocator::new(&[IovaRange {
            start: 0,
            last: u64::MAX,
        }])
        .unwrap();
        assert!(a.alloc(u64::MAX, 4096).is_err());
    }

    #[test]
    fn bad_requests_and_empty_ranges() {
        assert_eq!(IovaAllocator::new(&[]).unwrap_err(), IovaError::NoRanges);
        assert_eq!(
            IovaAllocator::new(&[IovaRange {
                start: 0,
                last: 0xfff
            }])
            .unwrap_err(),
            IovaError::NoRanges
        );
        let mut a = IovaAllocator::new(&FALLBACK_RANGES).unwrap();
        assert!(a.alloc(0, 4096).is_err());
        assert!(a.alloc(4096, 3000).is_err());
    }
}
