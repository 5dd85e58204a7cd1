//! Block completions the probes did not see: each request-based disk's completed requests as the
//! block layer counts them, against the completions the probes counted on that disk over a
//! window the block layer's lies inside.
//!
//! The kernel may not run a program for a tracepoint hit and count no miss for it (seen on 6.18
//! while other BPF programs were being loaded and attached: the tracepoint fired for every one of
//! dd's reads, the program ran for 2–44 fewer). The block layer's counters are the independent
//! measure that says so. Each request it counts fires the completion tracepoint at least once, so
//! when the probes counted fewer than the block layer, that many were missed at least, less the
//! requests whose accounting straddled the probes' first sample.
//!
//! The straddle: a request's tracepoint fires before the block layer accounts it (its bios are
//! ended in between), so a request that completed as the first sample was read can be in the
//! block layer's window and not in the probes'. The block layer is read on both sides of the first
//! sample, and the requests it accounted in between are not charged to the probes.

use crate::sample::{Op, RawSample, RawSource, SourceKind};
use std::collections::BTreeMap;

/// One disk whose completions the probes undercounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnseenCompletions {
    pub disk: String,
    /// Requests the block layer completed inside the probes' window.
    pub block_layer: u64,
    /// Completions the probes counted on the disk over their window.
    pub probes: u64,
    /// Requests the block layer accounted while the probes' first sample was read.
    pub straddling: u64,
}

impl UnseenCompletions {
    /// How many completions the probes missed, at least.
    pub fn unseen(&self) -> u64 {
        self.block_layer
            .saturating_sub(self.probes)
            .saturating_sub(self.straddling)
    }

    /// The report's warning.
    pub fn warning(&self) -> String {
        format!(
            "{disk}: the block layer completed {block} requests inside this window (/sys/block/\
             {disk}/stat; {straddling} more as it began) and the probes counted {probes} \
             completions; the kernel did not run the completion probe for at least {unseen} of \
             them, so {disk}'s completions and its figures per I/O are low by at least that many",
            disk = self.disk,
            block = self.block_layer,
            straddling = self.straddling,
            probes = self.probes,
            unseen = self.unseen()
        )
    }
}

/// The block layer's completed requests per disk at the edges of the probes' window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockLayerWindow {
    /// Read just before the probes' first sample.
    pub before_first: BTreeMap<String, u64>,
    /// Read just after it: the start of the block layer's window.
    pub after_first: BTreeMap<String, u64>,
    /// Read just before the probes' last sample: the end of the window.
    pub before_last: BTreeMap<String, u64>,
}

/// The disks the probes undercounted, beyond the requests that straddled the first sample. Only
/// disks the probes saw complete a request are judged: a disk they never saw may
/// complete no requests at all (bio-based), and its name is not known to them.
pub fn unseen_completions(
    block: &BlockLayerWindow,
    first: &RawSample,
    last: &RawSample,
) -> Vec<UnseenCompletions> {
    let count = |counts: &BTreeMap<String, u64>, disk: &str| counts.get(disk).copied();
    probe_completions_by_disk(first, last)
        .into_iter()
        .filter_map(|(disk, probes)| {
            let start = count(&block.after_first, &disk)?;
            let block_layer = count(&block.before_last, &disk)?.checked_sub(start)?;
            let straddling =
                start.saturating_sub(count(&block.before_first, &disk).unwrap_or(start));
            let judged = UnseenCompletions {
                disk,
                block_layer,
                probes,
                straddling,
            };
            (judged.unseen() > 0).then_some(judged)
        })
        .collect()
}

/// Completions the probes counted between two samples, per disk name.
fn probe_completions_by_disk(first: &RawSample, last: &RawSample) -> BTreeMap<String, u64> {
    let completions = |source: &RawSource| source.ops.get(&Op::Completion).map_or(0, |c| c.count);
    let mut by_disk = BTreeMap::new();
    for source in last
        .sources
        .iter()
        .filter(|s| s.kind == SourceKind::Disk && !s.name.is_empty())
    {
        let before = first
            .sources
            .iter()
            .find(|s| s.same_as(source))
            .map_or(0, completions);
        *by_disk.entry(source.name.clone()).or_insert(0) +=
            completions(source).saturating_sub(before);
    }
    by_disk
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::OpCounters;

    fn disk(name: &str, id: u64, completions: u64) -> RawSource {
        RawSource {
            kind: SourceKind::Disk,
            id,
            name: name.to_string(),
            generation: 0,
            driver: None,
            row: 0,
            ops: BTreeMap::from([(
                Op::Completion,
                OpCounters {
                    count: completions,
                    ..OpCounters::default()
                },
            )]),
            map_directions: Default::default(),
        }
    }

    fn sample(sources: Vec<RawSource>) -> RawSample {
        RawSample {
            sources,
            ..RawSample::default()
        }
    }

    fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(d, n)| (d.to_string(), *n)).collect()
    }

    /// A window with no request accounted while the first sample was read.
    fn window(start: &[(&str, u64)], end: &[(&str, u64)]) -> BlockLayerWindow {
        BlockLayerWindow {
            before_first: counts(start),
            after_first: counts(start),
            before_last: counts(end),
        }
    }

    #[test]
    fn a_disk_the_probes_counted_short_is_named_with_how_many_they_missed() {
        let first = sample(vec![disk("vda", 1, 50)]);
        let last = sample(vec![disk("vda", 1, 50 + 997)]);
        let unseen = unseen_completions(&window(&[("vda", 7000)], &[("vda", 8000)]), &first, &last);
        assert_eq!(
            unseen,
            vec![UnseenCompletions {
                disk: "vda".into(),
                block_layer: 1000,
                probes: 997,
                straddling: 0,
            }]
        );
        assert_eq!(unseen[0].unseen(), 3);
        assert!(unseen[0].warning().contains("at least 3"));
    }

    #[test]
    fn probes_that_counted_as_many_or_more_are_not_named() {
        // More: partial completions fire the tracepoint once per part, and the probes' window is
        // the wider one.
        let first = sample(vec![]);
        let last = sample(vec![disk("vda", 1, 1000), disk("loop0", 2, 1203)]);
        let end = [("vda", 1000), ("loop0", 1200)];
        assert!(unseen_completions(&window(&[], &end), &first, &last).is_empty());
        let start = [("vda", 0), ("loop0", 0)];
        assert!(unseen_completions(&window(&start, &end), &first, &last).is_empty());
    }

    #[test]
    fn requests_accounted_while_the_first_sample_was_read_are_not_charged_to_the_probes() {
        let last = sample(vec![disk("vda", 1, 997)]);
        let mut block = window(&[("vda", 10)], &[("vda", 1010)]);
        block.before_first = counts(&[("vda", 7)]);
        assert!(unseen_completions(&block, &sample(vec![]), &last).is_empty());
        block.before_first = counts(&[("vda", 9)]);
        assert_eq!(
            unseen_completions(&block, &sample(vec![]), &last)[0].unseen(),
            2
        );
    }

    #[test]
    fn a_disk_first_seen_during_the_window_counts_from_zero() {
        let last = sample(vec![disk("nvme0n1", 9, 10)]);
        let unseen = unseen_completions(
            &window(&[("nvme0n1", 100)], &[("nvme0n1", 112)]),
            &sample(vec![]),
            &last,
        );
        assert_eq!(unseen[0].unseen(), 2);
    }

    #[test]
    fn disks_without_a_name_or_a_block_layer_count_are_not_judged() {
        let last = sample(vec![disk("", 1, 0), disk("sdz", 2, 0)]);
        let block = window(&[("", 0), ("sdz", 0)], &[("", 10), ("vda", 10)]);
        assert!(unseen_completions(&block, &sample(vec![]), &last).is_empty());
    }
}
