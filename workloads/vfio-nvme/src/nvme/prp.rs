//! PRP entries and PRP lists (NVMe Base Specification 1.4c §4.3), as pure functions.
//!
//! A transfer of `len` bytes at IOVA `iova` is described in controller memory pages (4 KiB,
//! CC.MPS = 0): PRP1 points at the first byte (any dword-aligned offset into its page); the
//! remaining pages are page-aligned. If they are one page, PRP2 points at it; if more, PRP2
//! points at a PRP list, an array of page addresses in a page of its own. A list page holds 512
//! entries; when more remain, its last entry points at the next list page instead.

/// Where a transfer's pages are described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prps {
    pub prp1: u64,
    /// 0 (unused), the second page, or the first list page.
    pub prp2: u64,
    /// The list pages' contents, one `Vec` per list page (the IOVAs passed in, in order).
    pub lists: Vec<Vec<u64>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrpError {
    #[error("PRP: a transfer of {len} bytes at IOVA {iova:#x}: {reason}")]
    Invalid {
        iova: u64,
        len: u64,
        reason: &'static str,
    },
    #[error("PRP: a transfer of {len} bytes needs {needed} list pages, {given} were set aside")]
    ListPages {
        len: u64,
        needed: usize,
        given: usize,
    },
}

/// Entries per list page.
pub fn entries_per_list(page: u64) -> usize {
    (page / 8) as usize
}

/// Pages the transfer touches, counting the partial first and last pages.
pub fn pages_spanned(iova: u64, len: u64, page: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    let first = iova / page;
    let last = (iova + len - 1) / page;
    last - first + 1
}

/// List pages needed for a transfer (0 if PRP2 can hold the second page directly).
pub fn list_pages_needed(iova: u64, len: u64, page: u64) -> usize {
    let pages = pages_spanned(iova, len, page);
    if pages <= 2 {
        return 0;
    }
    let mut entries = (pages - 1) as usize;
    let per = entries_per_list(page);
    let mut lists = 1;
    while entries > per {
        // This list page holds per - 1 entries and the pointer to the next.
        entries -= per - 1;
        lists += 1;
    }
    lists
}

/// PRP1, PRP2 and the list pages for `len` bytes at `iova`, with list pages at `list_iovas`
/// (page-aligned, as many as [`list_pages_needed`] says).
pub fn build(iova: u64, len: u64, page: u64, list_iovas: &[u64]) -> Result<Prps, PrpError> {
    let invalid = |reason| PrpError::Invalid { iova, len, reason };
    if !page.is_power_of_two() || page < 4096 {
        return Err(invalid(
            "the controller page size must be a power of two of at least 4 KiB",
        ));
    }
    if len == 0 {
        return Err(invalid("the length must be non-zero"));
    }
    if !iova.is_multiple_of(4) {
        return Err(invalid("PRP1 must be dword aligned"));
    }
    if iova.checked_add(len).is_none() {
        return Err(invalid("the transfer wraps the address space"));
    }
    let pages = pages_spanned(iova, len, page);
    let first_page = iova & !(page - 1);
    let rest = (1..pages).map(|i| first_page + i * page);
    match pages {
        1 => Ok(Prps {
            prp1: iova,
            prp2: 0,
            lists: Vec::new(),
        }),
        2 => Ok(Prps {
            prp1: iova,
            prp2: first_page + page,
            lists: Vec::new(),
        }),
        _ => {
            let needed = list_pages_needed(iova, len, page);
            if list_iovas.len() < needed {
                return Err(PrpError::ListPages {
                    len,
                    needed,
                    given: list_iovas.len(),
                });
            }
            if list_iovas.iter().any(|l| l % page != 0) {
                return Err(invalid("PRP list pages must be page aligned"));
            }
            let per = entries_per_list(page);
            let mut entries: Vec<u64> = rest.collect();
            let mut lists = Vec::with_capacity(needed);
            for (i, _) in list_iovas.iter().take(needed).enumerate() {
                if i + 1 < needed {
                    let mut list: Vec<u64> = entries.drain(..per - 1).collect();
                    list.push(list_iovas[i + 1]);
                    lists.push(list);
                } else {
                    lists.push(std::mem::take(&mut entries));
                }
            }
            Ok(Prps {
                prp1: iova,
                prp2: list_iovas[0],
                lists,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;

    #[test]
    fn one_page_uses_prp1_only() {
        let p = build(0x10000, 4096, P, &[]).unwrap();
        assert_eq!((p.prp1, p.prp2), (0x10000, 0));
        let p = build(0x10200, 512, P, &[]).unwrap();
        assert_eq!((p.prp1, p.prp2), (0x10200, 0), "an offset inside one page");
    }

    #[test]
    fn two_pages_put_the_second_in_prp2() {
        let p = build(0x10000, 8192, P, &[]).unwrap();
        assert_eq!((p.prp1, p.prp2), (0x10000, 0x11000));
        // 4 KiB starting mid-page crosses into a second page.
        let p = build(0x10800, 4096, P, &[]).unwrap();
        assert_eq!((p.prp1, p.prp2), (0x10800, 0x11000));
        assert!(p.lists.is_empty());
    }

    #[test]
    fn three_pages_need_a_list() {
        assert_eq!(list_pages_needed(0x10000, 12288, P), 1);
        let p = build(0x10000, 12288, P, &[0x90000]).unwrap();
        assert_eq!(p.prp1, 0x10000);
        assert_eq!(p.prp2, 0x90000);
        assert_eq!(p.lists, vec![vec![0x11000, 0x12000]]);
        // An offset first page: 128 KiB at +0x200 spans 33 pages, 32 list entries.
        let p = build(0x10200, 128 << 10, P, &[0x90000]).unwrap();
        assert_eq!(p.lists[0].len(), 32);
        assert_eq!(p.lists[0][0], 0x11000);
        assert_eq!(*p.lists[0].last().unwrap(), 0x10000 + 32 * P);
    }

    #[test]
    fn long_lists_chain_through_their_last_entry() {
        // 2 MiB + 4 KiB aligned: 513 pages, 512 list entries: fits one list page exactly.
        assert_eq!(list_pages_needed(0x200000, (2 << 20) + 4096, P), 1);
        // 4 MiB: 1024 pages, 1023 entries: 511 + pointer, then 512.
        let len = 4 << 20;
        assert_eq!(list_pages_needed(0x400000, len, P), 2);
        let p = build(0x400000, len, P, &[0xa0000, 0xb0000]).unwrap();
        assert_eq!(p.lists.len(), 2);
        assert_eq!(p.lists[0].len(), 512);
        assert_eq!(p.lists[0][511], 0xb0000, "chain pointer");
        assert_eq!(p.lists[0][510], 0x400000 + 511 * P);
        assert_eq!(p.lists[1].len(), 512);
        assert_eq!(p.lists[1][0], 0x400000 + 512 * P);
        assert_eq!(*p.lists[1].last().unwrap(), 0x400000 + 1023 * P);
    }

    #[test]
    fn every_page_appears_once_in_order() {
        for (iova, len) in [(0x10000u64, 9 * P), (0x10004, 9 * P), (0x10000, 3000 * P)] {
            let lists: Vec<u64> = (0..8).map(|i| 0x1000_0000 + i * P).collect();
            let p = build(iova, len, P, &lists).unwrap();
            let mut pages = vec![p.prp1 & !(P - 1)];
            for (i, l) in p.lists.iter().enumerate() {
                let data = if i + 1 < p.lists.len() {
                    &l[..l.len() - 1]
                } else {
                    &l[..]
                };
                pages.extend_from_slice(data);
            }
            assert_eq!(pages.len() as u64, pages_spanned(iova, len, P));
            for w in pages.windows(2) {
                assert_eq!(w[1], w[0] + P);
            }
        }
    }

    #[test]
    fn invalid_transfers_are_refused() {
        assert!(build(0x10002, 512, P, &[]).is_err(), "not dword aligned");
        assert!(build(0x10000, 0, P, &[]).is_err());
        assert_eq!(
            build(0x10000, 5 * P, P, &[]).unwrap_err(),
            PrpError::ListPages {
                len: 5 * P,
                needed: 1,
                given: 0
            }
        );
        assert!(
            build(0x10000, 5 * P, P, &[0x123]).is_err(),
            "unaligned list page"
        );
        assert!(build(u64::MAX - 3, 8, P, &[]).is_err());
    }
}
