//! Counts per unit against what the runs' probes may have missed of them: the report's `losses`,
//! or the health's bound in reports written before them.

use super::*;
use crate::sample::{Health, Op};

/// A run whose probes lost as many maps as B added (the kernel skipped every program that could
/// have seen those calls) does not make a finding of a difference no larger than that: the
/// report's `losses` say how many calls of each operation no program saw.
#[test]
fn a_count_difference_the_probes_may_have_missed_makes_no_finding() {
    let more = Run1 {
        maps: 4,
        ..translated_612()
    };
    let (a, mut b) = (report(&translated_612()), report(&more));
    let transactions = (b.run.duration_s * 769.2) as u64;
    // As many calls as the one per transaction B added, on both NICs together.
    let lost = |b: &mut Report, calls: u64| {
        let losses = b
            .losses
            .as_mut()
            .expect("a report of this build has losses");
        for op in [Op::DmaMap, Op::IommuMap, Op::IotlbSync] {
            losses.ops.entry(op).or_default().lost = Some(calls);
        }
    };
    lost(&mut b, 2 * transactions);
    let c = compare(&a, &b);
    assert!(
        !kinds(&c).contains(&FindingKind::Counts),
        "a difference within what B's probes lost: {:?}",
        c.findings
    );
    lost(&mut b, transactions / 10);
    let c = compare(&a, &b);
    assert!(
        kinds(&c).contains(&FindingKind::Counts),
        "a difference ten times what B lost is one: {:?}",
        c.findings
    );
}

/// Reports written before `losses` bounded the calls no program saw in their health
/// (`missed_calls.<op>`): compare still reads that bound from them.
#[test]
fn a_report_without_losses_is_read_for_its_missed_calls() {
    let more = Run1 {
        maps: 4,
        ..translated_612()
    };
    let (mut a, mut b) = (report(&translated_612()), report(&more));
    a.losses = None;
    b.losses = None;
    let transactions = (b.run.duration_s * 769.2) as u64;
    let missed = |b: &mut Report, calls: u64| {
        for op in [Op::DmaMap, Op::IommuMap, Op::IotlbSync] {
            b.health.insert(Health::MissedCalls(op), calls);
        }
    };
    missed(&mut b, 2 * transactions);
    let c = compare(&a, &b);
    assert!(
        !kinds(&c).contains(&FindingKind::Counts),
        "a difference within what B's probes may have missed: {:?}",
        c.findings
    );
    assert_eq!(
        uncounted(&b, Op::DmaMap, Some(&"0000:00:05.0".into())),
        2 * transactions
    );
    missed(&mut b, transactions / 10);
    let c = compare(&a, &b);
    assert!(
        kinds(&c).contains(&FindingKind::Counts),
        "a difference ten times what B may have missed is one: {:?}",
        c.findings
    );
}

/// A device's calls still open at the end are counted nowhere: its count may lack them, and
/// another device's does not.
#[test]
fn calls_open_at_the_end_are_the_devices_own_slack() {
    let mut b = report(&translated_612());
    let losses = b.losses.as_mut().expect("losses");
    let dma_map = losses.ops.entry(Op::DmaMap).or_default();
    dma_map.lost = Some(3);
    dma_map.devices.insert(
        "0000:00:05.0".into(),
        crate::losses::DeviceLosses {
            untimed: Some(0),
            open_at_end: 2,
        },
    );
    assert_eq!(uncounted(&b, Op::DmaMap, Some(&"0000:00:05.0".into())), 5);
    assert_eq!(uncounted(&b, Op::DmaMap, Some(&"0000:00:06.0".into())), 3);
    assert_eq!(
        uncounted(&b, Op::IotlbFlush, Some(&"0000:00:06.0".into())),
        0
    );
}
