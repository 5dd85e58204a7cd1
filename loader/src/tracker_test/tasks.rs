//! Tasks: one slot for two threads, the other's calls kept in the hash by thread id, and the time
//! a task is switched out inside its call taken out as waiting.

use super::*;

/// One slot for both threads (`IOMMUTOP_TASK_SLOTS=1`). The first to enter a call holds the slot;
/// the second keeps its call in the hash by thread id. When the holder's call returns the slot is
/// free, but the second's work nested in its call still goes to the hash, under its DMA call
/// (charged to its device, which the outcome checks of every key); once its last call returns the
/// second takes the free slot for its next call. Nothing lost, nothing left behind.
#[test]
fn a_task_whose_slot_another_holds_keeps_its_calls_in_the_hash_until_they_return() {
    use Context::{TaskA, TaskB};
    let outcome = run_as(
        &[
            (TaskA, enter(DMA_MAP, 10_000, 1)),
            (TaskB, enter(DMA_MAP, 10_000, 2)),
            (TaskA, exit(DMA_MAP, 10_000, 1)),
            (TaskB, nested(IOMMU_MAP, 9_000)),
            (TaskB, exit(IOMMU_MAP, 9_000, 0)),
            (TaskB, exit(DMA_MAP, 10_000, 2)),
            (TaskB, enter(DMA_MAP, 10_000, 3)),
            (TaskA, enter(DMA_UNMAP, 10_000, 4)),
            (TaskA, exit(DMA_UNMAP, 10_000, 4)),
            (TaskB, exit(DMA_MAP, 10_000, 3)),
        ],
        Some(0),
    );
    assert_eq!(outcome.calls(Op::DmaMap), (3, 3));
    assert_eq!(outcome.calls(Op::IommuMap), (1, 1));
    assert_eq!(outcome.calls(Op::DmaUnmap), (1, 1));
    outcome.assert_no_other_trouble(&[]);
    let (a, b) = (outcome.threads[&TaskA], outcome.threads[&TaskB]);
    assert_ne!(a, b, "two threads");
    // B's first call went to the hash, and A's unmap too (B held the slot then); both returned.
    assert_eq!(outcome.hashed, BTreeMap::from([(a, 0), (b, 0)]));
    assert_eq!(
        outcome.first_slot,
        (0, 0),
        "the slot is free, no task in the hash"
    );
}

/// A task switched out inside a call is waiting: the time out is taken out of the call's time and
/// reported apart, for a task in the slot and for one in the hash alike (the scheduler's switch
/// finds both).
#[test]
fn a_task_switched_out_inside_its_call_waits_in_the_slot_and_in_the_hash() {
    use Context::{TaskA, TaskB};
    let out = Duration::from_millis(30);
    let outcome = run_as(
        &[
            (TaskA, enter(DMA_MAP, 10_000, 1)),
            (TaskB, enter(DMA_MAP, 10_000, 2)),
            (TaskA, Step::SwitchOut),
            (TaskB, Step::SwitchOut),
            (TaskA, Step::Wait(out)),
            (TaskA, Step::SwitchIn),
            (TaskB, Step::SwitchIn),
            (TaskA, exit(DMA_MAP, 10_000, 1)),
            (TaskB, exit(DMA_MAP, 10_000, 2)),
        ],
        Some(0),
    );
    assert_eq!(outcome.calls(Op::DmaMap), (2, 2));
    outcome.assert_no_other_trouble(&[]);
    let map = &outcome.ops[&Op::DmaMap];
    assert_eq!(map.waited, 2, "both calls waited: {map:?}");
    let out_ns = out.as_nanos() as u64;
    assert!(
        map.offcpu_ns >= 2 * out_ns,
        "waited {} ns in all, switched out {out_ns} ns each",
        map.offcpu_ns
    );
    assert!(
        map.total_ns < out_ns,
        "the calls' own time {} ns holds the waiting",
        map.total_ns
    );
    assert_eq!(
        outcome.hashed.keys().copied().collect::<Vec<_>>(),
        vec![outcome.threads[&TaskB]],
        "B's call was in the hash"
    );
}

/// A task switched out inside a probe program nested in its call: that time is waiting, taken out
/// of the call's time once (the stack's offcpu_ns), not also as the nested program's run.
#[test]
fn time_switched_out_inside_a_probe_program_is_taken_out_once() {
    use Context::TaskA;
    let own = Duration::from_millis(20);
    let outcome = run_as(
        &[
            (TaskA, enter(DMA_MAP, 20_000, 1)),
            (TaskA, Step::Wait(own)),
            (TaskA, nested(IOMMU_MAP, 19_000).switched_inside()),
            (TaskA, exit(IOMMU_MAP, 19_000, 0)),
            (TaskA, exit(DMA_MAP, 20_000, 1)),
        ],
        None,
    );
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    let map = &outcome.ops[&Op::DmaMap];
    assert_eq!(map.waited, 1, "{map:?}");
    assert!(
        map.offcpu_ns >= 1_000_000,
        "the spin that stands for being switched out took {} ns: too short to tell",
        map.offcpu_ns
    );
    // raw = own + out + the programs' runs; self = raw - runs - out: within half the time out
    // of raw - out. Taken out twice, self would be short of that by the whole time out.
    assert!(
        map.total_ns + map.offcpu_ns + map.offcpu_ns / 2 >= map.raw_total_ns,
        "self {} ns, switched out {} ns, measured {} ns: the time out was taken out twice",
        map.total_ns,
        map.offcpu_ns,
        map.raw_total_ns
    );
    assert!(map.total_ns >= own.as_nanos() as u64 * 9 / 10, "{map:?}");
    outcome.assert_no_other_trouble(&[]);
}
