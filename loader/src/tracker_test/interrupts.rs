//! Interrupts: their calls on their own stack, charged to no task's work and taken out of the
//! task call they landed in.

use super::*;

/// An interrupt that arrives in user mode runs on the interrupted task's kernel stack. Its DMA
/// map's exit was skipped; the task's own map, made later in a system call, sits deeper on the
/// same stack, so the interrupt's frame cannot be told returned by where it lies. Under --pid the
/// interrupt's frame is left out (no task of its own); before, the task's call was pushed above it
/// and inherited that decision, uncounted. The interrupt's calls are the CPU's, on its own stack.
#[test]
fn an_interrupt_from_user_mode_leaves_no_frame_under_the_tasks_later_calls() {
    use Context::TaskA;
    let outcome = run_with(
        &[
            (TaskA, enter(DMA_MAP, 14_000, 1).in_interrupt()),
            (TaskA, enter(DMA_MAP, 12_000, 2)),
            (TaskA, exit(DMA_MAP, 12_000, 2)),
        ],
        Setup {
            filter_own_process: true,
            ..Setup::default()
        },
    );
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1), "the task's own map");
    outcome.assert_no_other_trouble(&[]);
}

/// The same interrupt's stale frame, no filter: the task's page-table map outside any DMA call
/// (a userspace driver's VFIO map) is its process's work, not the interrupt's device's.
#[test]
fn work_outside_dma_calls_is_not_charged_to_an_interrupt_from_user_mode() {
    use Context::TaskA;
    let outcome = run_as(
        &[
            (TaskA, enter(DMA_MAP, 14_000, 1).in_interrupt()),
            (TaskA, nested(IOMMU_MAP, 12_000)),
            (TaskA, exit(IOMMU_MAP, 12_000, 0)),
        ],
        None,
    );
    assert_eq!(outcome.calls(Op::IommuMap), (0, 0), "not the device's");
    assert_eq!(
        outcome.elsewhere,
        BTreeMap::from([(iommutop_key_kind::IOMMUTOP_KEY_UNATTRIBUTED, Op::IommuMap)])
            .into_iter()
            .map(|key| (key, 1))
            .collect(),
        "the process's own row"
    );
}

/// An interrupt lands in a task's DMA map and makes a call of its own, which is counted and timed
/// as the interrupt's: the time it took is no part of the task's map, and is taken out of it as
/// probes' time is. Before, it stayed in the map's own time, counted twice.
#[test]
fn an_interrupt_s_probed_call_is_taken_out_of_the_task_call_it_landed_in() {
    use Context::{InterruptInA, TaskA};
    let inside = Duration::from_millis(20);
    let outcome = run_as(
        &[
            (TaskA, enter(DMA_MAP, 20_000, 1)),
            (InterruptInA, enter(DMA_UNMAP, 40_000, 2)),
            (InterruptInA, Step::Wait(inside)),
            (InterruptInA, exit(DMA_UNMAP, 40_000, 2)),
            (TaskA, exit(DMA_MAP, 20_000, 1)),
        ],
        None,
    );
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    assert_eq!(outcome.calls(Op::DmaUnmap), (1, 1));
    let (map, unmap) = (&outcome.ops[&Op::DmaMap], &outcome.ops[&Op::DmaUnmap]);
    assert!(
        unmap.total_ns >= inside.as_nanos() as u64,
        "the interrupt's unmap took its time: {unmap:?}"
    );
    assert!(
        map.raw_total_ns >= unmap.raw_total_ns,
        "the map's measured time holds the interrupt: {map:?}"
    );
    assert!(
        map.total_ns < inside.as_nanos() as u64 / 2,
        "the map's own time {} ns holds the interrupt's {} ns",
        map.total_ns,
        unmap.raw_total_ns
    );
    outcome.assert_no_other_trouble(&[]);
}
