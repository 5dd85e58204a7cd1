//! The tracker as a state machine, without the lab (issue 27): each scenario loads
//! `ebpf/selftest/tracker.bpf.c` afresh, runs its steps with `BPF_PROG_TEST_RUN` (a call entering,
//! a call exiting, an entry stopped before its frame was complete), and checks what the tracker
//! counted, timed and named in its health counters. Needs root and a kernel with BTF, as the
//! other host tests; the frames live on the CPU's stack (a test run's context is not on a task's
//! stack), whose rules are a task stack's: where the stacks themselves live (slots, task
//! storage) is the lab's to test.

use super::abi::{iommutop_dev_key, iommutop_dev_stats, iommutop_key_kind, iommutop_op};
use super::convert::sum_per_cpu;
use super::loader::{describe, program, HEALTH_NAMES};
use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuArray};
use aya::programs::{RawTracePoint, RawTracePointRunOptions, TestRun};
use aya::{Ebpf, EbpfLoader};
use iommutop_model::sample::{Op, OpCounters};
use std::collections::BTreeMap;

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracker.bpf.o"));

/// The device every scenario's calls are made for.
const DEVICE: u64 = 0xd3_71ce;

#[derive(Clone, Copy)]
enum Step {
    /// A probe's entry program: the call at `at` (its position), tagged `tag`; a DMA API call
    /// (`own_key`) charges its own device, any other inherits the call below's.
    Enter {
        op: u32,
        at: u64,
        tag: u64,
        own_key: bool,
    },
    /// A probe's exit program for the call at `at`, tagged `tag`; a DMA API call's knows its
    /// device (`own_key`), as its entry's does.
    Exit {
        op: u32,
        at: u64,
        tag: u64,
        own_key: bool,
    },
    /// An entry that an interrupt stopped after it took its slot, before it wrote its start.
    PushPartial { op: u32, at: u64, tag: u64 },
    /// That entry's end.
    Finish,
}

const DMA_MAP: u32 = iommutop_op::IOMMUTOP_OP_DMA_MAP;
const DMA_UNMAP: u32 = iommutop_op::IOMMUTOP_OP_DMA_UNMAP;
const IOMMU_MAP: u32 = iommutop_op::IOMMUTOP_OP_IOMMU_MAP;

fn enter(op: u32, at: u64, tag: u64) -> Step {
    Step::Enter {
        op,
        at,
        tag,
        own_key: true,
    }
}

fn nested(op: u32, at: u64) -> Step {
    Step::Enter {
        op,
        at,
        tag: 0,
        own_key: false,
    }
}

fn exit(op: u32, at: u64, tag: u64) -> Step {
    Step::Exit {
        op,
        at,
        tag,
        own_key: op == DMA_MAP || op == DMA_UNMAP,
    }
}

/// What a scenario left: the device's counters per op, and the health counters.
struct Outcome {
    ops: BTreeMap<Op, OpCounters>,
    health: BTreeMap<&'static str, u64>,
}

impl Outcome {
    /// (calls counted, calls timed) of `op`.
    fn calls(&self, op: Op) -> (u64, u64) {
        self.ops.get(&op).map_or((0, 0), |c| (c.count, c.timed))
    }

    fn health(&self, counter: &str) -> u64 {
        self.health[counter]
    }

    /// Every health counter but those named is 0.
    fn assert_no_other_trouble(&self, expected: &[&str]) {
        for (counter, value) in &self.health {
            if !expected.contains(counter) {
                assert_eq!(*value, 0, "{counter} is {value}: {:?}", self.health);
            }
        }
    }
}

fn run(steps: &[Step]) -> Outcome {
    let mut ebpf: Ebpf = EbpfLoader::new()
        // A few rows are enough, and each is ~16 KiB per CPU.
        .map_max_entries("iommutop_stats", 4)
        .load(OBJECT)
        .unwrap_or_else(|e| {
            panic!(
                "loading the tracker's test object (needs root): {}",
                describe(&e)
            )
        });
    let step_program: &mut RawTracePoint =
        program(&mut ebpf, "selftest__tracker_step").unwrap_or_else(|e| panic!("{e}"));
    step_program
        .load()
        .unwrap_or_else(|e| panic!("loading selftest__tracker_step: {}", describe(&e)));
    for (index, step) in steps.iter().enumerate() {
        let mut options = RawTracePointRunOptions::new();
        options.args[..5].copy_from_slice(&match *step {
            Step::Enter {
                op,
                at,
                tag,
                own_key,
            } => [1, op.into(), at, tag, if own_key { DEVICE } else { 0 }],
            Step::Exit {
                op,
                at,
                tag,
                own_key,
            } => [2, op.into(), at, tag, if own_key { DEVICE } else { 0 }],
            Step::PushPartial { op, at, tag } => [3, op.into(), at, tag, DEVICE],
            Step::Finish => [4, 0, 0, 0, 0],
        });
        let returned = step_program
            .test_run(options)
            .unwrap_or_else(|e| panic!("BPF_PROG_TEST_RUN of step {index}: {}", describe(&e)))
            .return_value;
        assert_eq!(returned, 0, "step {index} failed in the program");
    }
    outcome(&ebpf)
}

fn outcome(ebpf: &Ebpf) -> Outcome {
    let rows: BpfHashMap<&MapData, iommutop_dev_key, u32> =
        BpfHashMap::try_from(ebpf.map("iommutop_rows").expect("iommutop_rows")).expect("a hash");
    let stats: PerCpuArray<&MapData, iommutop_dev_stats> =
        PerCpuArray::try_from(ebpf.map("iommutop_stats").expect("iommutop_stats"))
            .expect("a per-CPU array");
    let health: PerCpuArray<&MapData, u64> =
        PerCpuArray::try_from(ebpf.map("iommutop_health").expect("iommutop_health"))
            .expect("a per-CPU array");
    let mut ops = BTreeMap::new();
    for entry in rows.iter() {
        let (key, row) = entry.expect("reads a row");
        assert_eq!(
            (key.id, key.kind),
            (DEVICE, iommutop_key_kind::IOMMUTOP_KEY_DEVICE),
            "work charged to a key no step named"
        );
        ops = sum_per_cpu(
            stats
                .get(&row, 0)
                .expect("reads the row's statistics")
                .iter(),
        );
    }
    let health = HEALTH_NAMES
        .iter()
        .enumerate()
        .map(|(index, name)| {
            let per_cpu = health
                .get(&(index as u32), 0)
                .expect("reads a health counter");
            (*name, per_cpu.iter().sum())
        })
        .collect();
    Outcome { ops, health }
}

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
