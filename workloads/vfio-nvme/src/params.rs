//! What a run does: the typed parameters of a run and of the IOTLB sweep, their checks, and the
//! names they are given by (`"4k"`, `"randread"`), with errors that name the input and the fix.
//! Read from checked values by [`crate::options`].

/// One run of I/O: the results' own type, which they repeat as they were given.
pub use iommutop_vfio_nvme_results::params::RunParams as Params;
pub use iommutop_vfio_nvme_results::params::{
    buffer_slot_count, default_sweep_pages, slot_bytes, Backend, PageSize, Pattern, Stop,
    SweepParams, Target, MAX_BLOCK_SIZE, MAX_PAGES, MAX_QUEUE_DEPTH, MAX_THREADS,
};

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
    use std::time::Duration;
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
