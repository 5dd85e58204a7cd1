//! Calls and their frames on one stack: a call timed once, frames its skipped programs left
//! dropped where they have evidently returned and kept where they may not have.

use super::*;

#[test]
fn a_call_entered_and_exited_is_counted_and_timed_once() {
    let outcome = run(&[enter(DMA_MAP, 10_000, 1), exit(DMA_MAP, 10_000, 1)]);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    outcome.assert_no_other_trouble(&[]);
}

/// The kernel skipped the first call's exit program: the next call made from the same place sits
/// at the same position, so the first has returned. Its frame is dropped and its call counted
/// untimed; the second is timed on its own, never across both.
#[test]
fn a_skipped_exit_leaves_a_frame_the_next_call_at_that_place_drops() {
    let outcome = run(&[
        enter(DMA_MAP, 10_000, 1),
        enter(DMA_MAP, 10_000, 2),
        exit(DMA_MAP, 10_000, 2),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (2, 1));
    assert_eq!(outcome.health("abandoned_frames"), 1);
    outcome.assert_no_other_trouble(&["abandoned_frames"]);
}

/// An exit whose entry was skipped counts its call untimed and touches no other frame: the call
/// in flight below it is still timed at its own exit.
#[test]
fn an_exit_without_its_entry_touches_no_other_frame() {
    let outcome = run(&[
        enter(DMA_MAP, 20_000, 1),
        exit(DMA_UNMAP, 19_000, 7),
        exit(DMA_MAP, 20_000, 1),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    assert_eq!(outcome.calls(Op::DmaUnmap), (1, 0));
    assert_eq!(outcome.health("exit_without_entry"), 1);
    outcome.assert_no_other_trouble(&["exit_without_entry"]);
}

/// Both programs of the first call at a position were skipped at one end each: its exit and the
/// second call's entry. The second call's exit finds a frame at its position with another tag:
/// not its call. Neither is timed (that would span both calls), both are counted.
#[test]
fn an_exit_at_the_right_place_with_another_tag_closes_nothing() {
    let outcome = run(&[enter(DMA_MAP, 10_000, 1), exit(DMA_MAP, 10_000, 2)]);
    assert_eq!(outcome.calls(Op::DmaMap), (2, 0));
    assert_eq!(outcome.health("abandoned_frames"), 1);
    outcome.assert_no_other_trouble(&["abandoned_frames", "exit_without_entry"]);
}

/// IOMMU-side work nested in a DMA call is charged to the call's device and timed; the DMA call's
/// own time excludes the nested programs' run.
#[test]
fn nested_work_inherits_the_device_and_is_timed_inside_its_call() {
    let outcome = run(&[
        enter(DMA_MAP, 20_000, 1),
        nested(IOMMU_MAP, 19_000),
        exit(IOMMU_MAP, 19_000, 0),
        exit(DMA_MAP, 20_000, 1),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    assert_eq!(outcome.calls(Op::IommuMap), (1, 1));
    let map = &outcome.ops[&Op::DmaMap];
    assert!(
        map.total_ns <= map.raw_total_ns,
        "self time {} above the measured {}",
        map.total_ns,
        map.raw_total_ns
    );
    outcome.assert_no_other_trouble(&[]);
}

/// A nested call's exit was skipped: its frame lies above the DMA call's when that exits, and is
/// dropped, counted untimed; the DMA call is still timed.
#[test]
fn an_exit_drops_the_frames_above_its_own() {
    let outcome = run(&[
        enter(DMA_MAP, 20_000, 1),
        nested(IOMMU_MAP, 19_000),
        exit(DMA_MAP, 20_000, 1),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    assert_eq!(outcome.calls(Op::IommuMap), (1, 0));
    assert_eq!(outcome.health("abandoned_frames"), 1);
    outcome.assert_no_other_trouble(&["abandoned_frames"]);
}

/// An interrupt landed in an entry program after it took its slot and before it wrote its start:
/// the interrupt's own call, entering at a position above it (another stack), must neither close
/// nor drop that frame, which the entry then completes and its exit closes.
#[test]
fn a_frame_still_being_written_is_never_dropped_nor_closed() {
    let outcome = run(&[
        Step::PushPartial {
            op: DMA_MAP,
            at: 30_000,
            tag: 1,
        },
        enter(DMA_UNMAP, 31_000, 9),
        exit(DMA_UNMAP, 31_000, 9),
        Step::Finish,
        exit(DMA_MAP, 30_000, 1),
    ]);
    assert_eq!(outcome.calls(Op::DmaUnmap), (1, 1));
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    outcome.assert_no_other_trouble(&[]);
}

/// A frame further from an entering call than a kernel stack's size lies on another stack (an
/// interrupt's, a task's): where it lies says nothing of whether it returned, so it stays.
#[test]
fn a_frame_on_another_stack_is_not_taken_for_returned() {
    let far = 10_000 + 64 * 1024;
    let outcome = run(&[
        enter(DMA_MAP, 10_000, 1),
        enter(DMA_UNMAP, far, 2),
        exit(DMA_UNMAP, far, 2),
        exit(DMA_MAP, 10_000, 1),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    assert_eq!(outcome.calls(Op::DmaUnmap), (1, 1));
    outcome.assert_no_other_trouble(&[]);
}

/// Eight calls in flight fill a stack, and a ninth enters inside them: the eight are live (each
/// lies above the next), so none is dropped; the ninth is not pushed (nesting_overflow) and its
/// exit counts it, untimed. Before, a full stack was emptied: the eight were counted as abandoned,
/// then again by their exits.
#[test]
fn a_full_stack_of_calls_in_flight_is_never_dropped() {
    let mut steps = vec![enter(DMA_MAP, 20_000, 1)];
    let nested_at = |i: u64| 19_000 - 1_000 * i;
    for i in 0..7 {
        steps.push(nested(IOMMU_MAP, nested_at(i)));
    }
    steps.push(nested(IOVA_ALLOC, 11_000));
    steps.push(exit(IOVA_ALLOC, 11_000, 0));
    for i in (0..7).rev() {
        steps.push(exit(IOMMU_MAP, nested_at(i), 0));
    }
    steps.push(exit(DMA_MAP, 20_000, 1));
    let outcome = run(&steps);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    assert_eq!(outcome.calls(Op::IommuMap), (7, 7));
    assert_eq!(outcome.calls(Op::IovaAlloc), (1, 0));
    assert_eq!(outcome.health("nesting_overflow"), 1);
    let iova = outcome.op_health(Op::IovaAlloc);
    assert_eq!((iova.unpushed, iova.unseen_entries), (1, 1));
    outcome.assert_no_other_trouble(&["nesting_overflow", "exit_without_entry"]);
}

/// Slots dropped together (an exit finding the calls above its own abandoned) all read free: an
/// interrupt landing while the next entry takes one must not find the old frame there, live.
#[test]
fn slots_dropped_together_all_read_free() {
    let outcome = run(&[
        enter(DMA_MAP, 20_000, 1),
        nested(IOMMU_MAP, 19_000),
        nested(IOVA_ALLOC, 18_000),
        exit(DMA_MAP, 20_000, 1),
        enter(DMA_MAP, 20_000, 2),
        nested(IOMMU_MAP, 19_000),
        Step::TakeSlot,
        exit(IOVA_ALLOC, 18_000, 0),
    ]);
    assert_eq!(
        outcome.calls(Op::IovaAlloc),
        (2, 0),
        "the second allocation's exit found no live frame"
    );
    assert_eq!(outcome.health("abandoned_frames"), 2);
}
