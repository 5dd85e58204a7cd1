//! The block layer's own count of completed requests per disk (`/sys/block/DISK/stat`): the
//! independent measure that block completions counted by the probes are checked against.

use crate::root::HostRoot;
use crate::sysfs::{entry_names, read_or_empty};
use std::collections::BTreeMap;

/// Fields of `/sys/block/DISK/stat` (Documentation/block/stat.rst) that count completed I/O
/// requests: reads, writes and (since 4.18) discards. Flushes are left out: the flush machinery's
/// own requests are accounted apart from the tracepoint's view of them.
const COMPLETED_REQUEST_FIELDS: [usize; 3] = [0, 4, 11];

/// Requests completed so far by each request-based (blk-mq) disk, by name. Bio-based disks (dm,
/// md, zram) complete no requests, so the block tracepoints never see them, and are left out.
pub fn completed_requests(root: &HostRoot) -> BTreeMap<String, u64> {
    entry_names(&root.sys("block"))
        .into_iter()
        .filter(|disk| root.sys(&format!("block/{disk}/mq")).is_dir())
        .filter_map(|disk| {
            let stat = read_or_empty(&root.sys(&format!("block/{disk}/stat")));
            completed_in_stat(&stat).map(|count| (disk, count))
        })
        .collect()
}

/// The completed requests a `stat` line counts; `None` when it is not one.
fn completed_in_stat(stat: &str) -> Option<u64> {
    let fields: Vec<u64> = stat
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    if fields.len() < 11 {
        return None;
    }
    Some(
        COMPLETED_REQUEST_FIELDS
            .iter()
            .filter_map(|&i| fields.get(i))
            .sum(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_writes_and_discards_are_summed_and_flushes_left_out() {
        // 6.18's 17 fields: reads 1000, writes 237, discards 41, flushes 40.
        let stat = "1000 0 8000 10 237 3 1896 20 0 30 40 41 0 328 5 40 7";
        assert_eq!(completed_in_stat(stat), Some(1000 + 237 + 41));
    }

    #[test]
    fn a_kernel_before_discard_fields_counts_reads_and_writes() {
        assert_eq!(completed_in_stat("  5 0 40 1 7 0 56 2 0 3 3\n"), Some(12));
    }

    #[test]
    fn what_is_not_a_stat_line_counts_nothing() {
        assert_eq!(completed_in_stat(""), None);
        assert_eq!(completed_in_stat("1 2 3"), None);
        assert_eq!(completed_in_stat("a b c d e f g h i j k"), None);
    }

    #[test]
    fn only_request_based_disks_are_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = HostRoot::at(dir.path());
        for (disk, request_based) in [("vda", true), ("zram0", false)] {
            let path = root.sys(&format!("block/{disk}"));
            std::fs::create_dir_all(&path).expect("disk dir");
            std::fs::write(path.join("stat"), "3 0 0 0 4 0 0 0 0 0 0 5 0 0 0 0 0").expect("stat");
            if request_based {
                std::fs::create_dir(path.join("mq")).expect("mq");
            }
        }
        let counts = completed_requests(&root);
        assert_eq!(counts, BTreeMap::from([("vda".to_string(), 12)]));
    }
}
