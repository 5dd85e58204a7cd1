//! The tracker as a state machine, without the lab (issue 27): each scenario loads
//! `ebpf/selftest/tracker.bpf.c` afresh, runs its steps with `BPF_PROG_TEST_RUN` (a call entering,
//! a call exiting, an entry stopped before its frame was complete), and checks what the tracker
//! counted, timed and named in its health counters. Needs root and a kernel with BTF, as the
//! other host tests. Each step runs as an interrupt (the CPU's stack of calls in flight) or as
//! the task of one of two threads the harness keeps (the slot of its thread id, or the hash by
//! thread id while the other thread holds the slot): the object is built so that a step says
//! which (a test run's context lies on no stack).

use super::abi::{
    iommutop_dev_key, iommutop_dev_stats, iommutop_key_kind, iommutop_op, IOMMUTOP_MAX_NESTING,
};
use super::convert::sum_per_cpu;
use super::load::program;
use super::maps::HEALTH_NAMES;
use super::verifier_log::describe;
use aya::maps::{Array, HashMap as BpfHashMap, MapData, PerCpuArray};
use aya::programs::{RawTracePoint, RawTracePointRunOptions, TestRun};
use aya::{Ebpf, EbpfLoader};
use iommutop_model::sample::{Op, OpCounters};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracker.bpf.o"));

/// The device every scenario's calls are made for.
const DEVICE: u64 = 0xd3_71ce;

#[derive(Clone, Copy, Debug)]
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
    /// An entry that an interrupt stopped after it took its slot, before it wrote its start
    /// (interrupt context only).
    PushPartial { op: u32, at: u64, tag: u64 },
    /// That entry's end.
    Finish,
    /// The scheduler switches the task out (the first half of the sched_switch program).
    SwitchOut,
    /// And back in (its second half).
    SwitchIn,
    /// The harness waits this long before the next step: a task switched out stays out.
    Wait(Duration),
}

/// Which context a step runs as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Context {
    Interrupt,
    /// The task of the harness's first thread.
    TaskA,
    /// The task of its second thread.
    TaskB,
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

/// Bytes of a context's stack of calls in flight (`struct iommutop_inflight`): depth, pad,
/// offcpu_ns, switched_out_at, then the frames of 80 bytes.
const INFLIGHT_BYTES: usize = 24 + 80 * IOMMUTOP_MAX_NESTING as usize;
/// A slot (`struct iommutop_task_slot`): owner, in_hash, then the stack.
const SLOT_BYTES: usize = 8 + INFLIGHT_BYTES;

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

/// What a scenario left: the device's counters per op, the health counters, where the tasks'
/// calls were kept.
struct Outcome {
    ops: BTreeMap<Op, OpCounters>,
    health: BTreeMap<&'static str, u64>,
    /// The first slot's holder (0: free) and how many tasks of its index had calls in the hash.
    first_slot: (u32, u32),
    /// The threads with an entry in the hash by thread id, and its depth.
    hashed: BTreeMap<u32, u32>,
    /// The thread id of each task context the steps ran as.
    threads: BTreeMap<Context, u32>,
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

/// The program's arguments for a step (see ebpf/selftest/tracker.bpf.c); None for a wait.
fn arguments(step: Step, context: Context) -> Option<[u64; 6]> {
    let in_task = u64::from(context != Context::Interrupt);
    let [what, op, at, tag, key] = match step {
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
        Step::Finish => [4, DMA_MAP.into(), 0, 0, 0],
        Step::SwitchOut => [5, DMA_MAP.into(), 0, 0, 0],
        Step::SwitchIn => [6, DMA_MAP.into(), 0, 0, 0],
        Step::Wait(_) => return None,
    };
    Some([what, op, at, tag, key, in_task])
}

fn test_run(program: &RawTracePoint, arguments: [u64; 6]) -> Result<u32, String> {
    let mut options = RawTracePointRunOptions::new();
    options.args[..6].copy_from_slice(&arguments);
    program
        .test_run(options)
        .map(|result| result.return_value)
        .map_err(|e| describe(&e))
}

/// Every step as an interrupt, with every thread-id slot.
fn run(steps: &[Step]) -> Outcome {
    let steps: Vec<(Context, Step)> = steps.iter().map(|s| (Context::Interrupt, *s)).collect();
    run_as(&steps, None)
}

/// The steps, each in its context; `task_slot_mask` as user space would set it (`Some(0)`: one
/// slot for every thread).
fn run_as(steps: &[(Context, Step)], task_slot_mask: Option<u32>) -> Outcome {
    let mut loader = EbpfLoader::new();
    // A few rows are enough, and each is ~16 KiB per CPU.
    loader.map_max_entries("iommutop_stats", 4);
    if let Some(mask) = &task_slot_mask {
        loader.override_global("iommutop_task_slot_mask", mask, true);
    }
    let mut ebpf: Ebpf = loader.load(OBJECT).unwrap_or_else(|e| {
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
    let step_program: &RawTracePoint = step_program;
    let mut threads = BTreeMap::new();
    std::thread::scope(|scope| {
        // Each task thread runs the steps it is sent, in order, and answers each.
        let task_thread = |context: Context| {
            let (send_step, steps) = mpsc::channel::<[u64; 6]>();
            let (send_result, results) = mpsc::channel();
            let thread = scope.spawn(move || {
                for arguments in steps {
                    let result = test_run(step_program, arguments);
                    if send_result.send((result, thread_id())).is_err() {
                        break;
                    }
                }
            });
            (context, send_step, results, thread)
        };
        let tasks = [task_thread(Context::TaskA), task_thread(Context::TaskB)];
        for (index, (context, step)) in steps.iter().enumerate() {
            let Some(arguments) = arguments(*step, *context) else {
                if let Step::Wait(how_long) = step {
                    std::thread::sleep(*how_long);
                }
                continue;
            };
            let returned = match tasks.iter().find(|task| task.0 == *context) {
                None => test_run(step_program, arguments),
                Some((_, send_step, results, _)) => {
                    send_step.send(arguments).expect("the task thread runs");
                    let (result, thread) = results.recv().expect("the task thread answers");
                    threads.insert(*context, thread);
                    result
                }
            };
            let returned =
                returned.unwrap_or_else(|e| panic!("BPF_PROG_TEST_RUN of step {index}: {e}"));
            assert_eq!(returned, 0, "step {index} failed in the program");
        }
    });
    let mut outcome = outcome(&ebpf);
    outcome.threads = threads;
    outcome
}

/// The calling thread's id, as the kernel's task knows it (its pid).
fn thread_id() -> u32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::gettid() as u32 }
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
    let slots: Array<&MapData, [u8; SLOT_BYTES]> = Array::try_from(
        ebpf.map("iommutop_task_slots")
            .expect("iommutop_task_slots"),
    )
    .expect("an array of slots");
    let first = slots.get(&0, 0).expect("reads the first slot");
    let inflight: BpfHashMap<&MapData, u32, [u8; INFLIGHT_BYTES]> =
        BpfHashMap::try_from(ebpf.map("iommutop_inflight").expect("iommutop_inflight"))
            .expect("a hash of stacks");
    let hashed = inflight
        .iter()
        .map(|entry| {
            let (thread, stack) = entry.expect("reads a hashed stack");
            (thread, u32_at(&stack, 0))
        })
        .collect();
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
    Outcome {
        ops,
        health,
        first_slot: (u32_at(&first, 0), u32_at(&first, 4)),
        hashed,
        threads: BTreeMap::new(),
    }
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
