//! The tracker as a state machine, without the lab (issue 27): each scenario loads
//! `ebpf/selftest/tracker.bpf.c` afresh, runs its steps with `BPF_PROG_TEST_RUN` (a call entering,
//! a call exiting, an entry stopped before its frame was complete), and checks what the tracker
//! counted, timed and named in its health counters. Needs root and a kernel with BTF, as the
//! other host tests. Each step runs as an interrupt (the CPU's stack of calls in flight) or as
//! the task of one of two threads the harness keeps (the slot of its thread id, or the hash by
//! thread id while the other thread holds the slot): the object is built so that a step says
//! which (a test run's context lies on no stack).

use super::abi::{
    iommutop_dev_key, iommutop_dev_stats, iommutop_key_kind, iommutop_op, iommutop_op_health,
    IOMMUTOP_MAX_NESTING,
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

/// A call as a probe program sees it.
#[derive(Clone, Copy, Debug)]
struct Call {
    op: u32,
    /// Its position.
    at: u64,
    tag: u64,
    /// A DMA API call's programs know its device and charge it; any other call inherits the key
    /// of the call below.
    own_key: bool,
    /// The function called (0: the kernel cannot say).
    func: u64,
    /// The step's flags (`STEP_*` in ebpf/selftest/tracker.bpf.c).
    flags: u64,
}

/// `STEP_*` flags of ebpf/selftest/tracker.bpf.c.
const STEP_TWIN: u64 = 1;
const STEP_UNDERSTUDY: u64 = 2;
const STEP_IN_INTERRUPT: u64 = 4;
const STEP_SWITCHED_INSIDE: u64 = 8;

#[derive(Clone, Copy, Debug)]
enum Step {
    /// A probe's entry program.
    Enter(Call),
    /// A probe's exit program.
    Exit(Call),
    /// An entry that an interrupt stopped after it took its slot, before it wrote its start
    /// (interrupt context only).
    PushPartial { op: u32, at: u64, tag: u64 },
    /// That entry's end.
    Finish,
    /// An entry stopped right after it took its slot, before it wrote any field of its frame
    /// (interrupt context only).
    TakeSlot,
    /// The scheduler switches the task out (the first half of the sched_switch program).
    SwitchOut,
    /// And back in (its second half).
    SwitchIn,
    /// The harness waits this long before the next step: a task switched out stays out.
    Wait(Duration),
}

impl Step {
    fn with_flag(self, flag: u64) -> Step {
        match self {
            Step::Enter(call) => Step::Enter(Call {
                flags: call.flags | flag,
                ..call
            }),
            Step::Exit(call) => Step::Exit(Call {
                flags: call.flags | flag,
                ..call
            }),
            other => panic!("{other:?} takes no flags"),
        }
    }

    /// The same program's understudy copy (abi.h, IOMMUTOP_ROLE_UNDERSTUDY).
    fn understudy(self) -> Step {
        self.with_flag(STEP_UNDERSTUDY)
    }

    /// An entry of a function that may be its wrapper's twin (IOMMUTOP_ENTER_TWIN).
    fn twin(self) -> Step {
        self.with_flag(STEP_TWIN)
    }

    /// Run while the preempt count says an interrupt runs.
    fn in_interrupt(self) -> Step {
        self.with_flag(STEP_IN_INTERRUPT)
    }

    /// An entry whose task is switched out in the middle of the program's run.
    fn switched_inside(self) -> Step {
        self.with_flag(STEP_SWITCHED_INSIDE)
    }

    /// A call of function `func`.
    fn of(self, func: u64) -> Step {
        match self {
            Step::Enter(call) => Step::Enter(Call { func, ..call }),
            Step::Exit(call) => Step::Exit(Call { func, ..call }),
            other => panic!("{other:?} is no call"),
        }
    }
}

/// Which context a step runs as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Context {
    Interrupt,
    /// The task of the harness's first thread.
    TaskA,
    /// The task of its second thread.
    TaskB,
    /// An interrupt that landed in the first thread's task (on its thread, on the CPU's stack).
    InterruptInA,
}

impl Context {
    /// Whether a step in this context runs on a task's stack.
    fn on_task_stack(self) -> bool {
        matches!(self, Context::TaskA | Context::TaskB)
    }

    /// The harness thread a step in this context runs on (None: the harness's own).
    fn thread(self) -> Option<Context> {
        match self {
            Context::Interrupt => None,
            Context::TaskA | Context::InterruptInA => Some(Context::TaskA),
            Context::TaskB => Some(Context::TaskB),
        }
    }
}

const DMA_MAP: u32 = iommutop_op::IOMMUTOP_OP_DMA_MAP;
const DMA_UNMAP: u32 = iommutop_op::IOMMUTOP_OP_DMA_UNMAP;
const IOMMU_MAP: u32 = iommutop_op::IOMMUTOP_OP_IOMMU_MAP;
const IOVA_ALLOC: u32 = iommutop_op::IOMMUTOP_OP_IOVA_ALLOC;

fn enter(op: u32, at: u64, tag: u64) -> Step {
    Step::Enter(Call {
        op,
        at,
        tag,
        own_key: true,
        func: 0,
        flags: 0,
    })
}

fn nested(op: u32, at: u64) -> Step {
    Step::Enter(Call {
        op,
        at,
        tag: 0,
        own_key: false,
        func: 0,
        flags: 0,
    })
}

fn exit(op: u32, at: u64, tag: u64) -> Step {
    Step::Exit(Call {
        op,
        at,
        tag,
        own_key: op == DMA_MAP || op == DMA_UNMAP,
        func: 0,
        flags: 0,
    })
}

/// Bytes of a frame (`struct iommutop_frame`), and where its start (`start_ns`) lies in it.
const FRAME_BYTES: usize = 88;
const FRAME_START: usize = 16;
/// Bytes of a context's stack of calls in flight (`struct iommutop_inflight`): depth, pad,
/// offcpu_ns, switched_out_at, then the frames.
const INFLIGHT_BYTES: usize = 24 + FRAME_BYTES * IOMMUTOP_MAX_NESTING as usize;
/// A slot (`struct iommutop_task_slot`): owner, in_hash, then the stack.
const SLOT_BYTES: usize = 8 + INFLIGHT_BYTES;

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(bytes[at..at + 8].try_into().expect("eight bytes"))
}

/// How many of a stack's slots above its depth still read as a frame (a start that is not 0): a
/// slot given back must read free, or an interrupt landing while an entry fills it could take
/// the half-written frame for a live one.
fn live_slots_above_depth(stack: &[u8]) -> usize {
    let depth = u32_at(stack, 0) as usize;
    (depth..IOMMUTOP_MAX_NESTING as usize)
        .filter(|slot| u64_at(stack, 24 + slot * FRAME_BYTES + FRAME_START) != 0)
        .count()
}

/// What a scenario left: the device's counters per op, the health counters, where the tasks'
/// calls were kept.
struct Outcome {
    ops: BTreeMap<Op, OpCounters>,
    /// Work charged to another key than the device the steps name: (kind, count) of each op.
    elsewhere: BTreeMap<(u32, Op), u64>,
    health: BTreeMap<&'static str, u64>,
    /// Per op, what the tracker saw of its calls that it did not see whole.
    op_health: BTreeMap<Op, iommutop_op_health>,
    /// Slots above a stack's depth that still read as frames, over every stack.
    live_above_depth: usize,
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

    /// `op`'s figures of calls seen at one end only.
    fn op_health(&self, op: Op) -> iommutop_op_health {
        self.op_health.get(&op).copied().unwrap_or(NO_HEALTH)
    }

    /// Every health counter but those named is 0; no slot above a stack's depth reads as a
    /// frame; no work went to another key than the steps' device.
    fn assert_no_other_trouble(&self, expected: &[&str]) {
        for (counter, value) in &self.health {
            if !expected.contains(counter) {
                assert_eq!(*value, 0, "{counter} is {value}: {:?}", self.health);
            }
        }
        assert_eq!(
            self.live_above_depth, 0,
            "slots given back still read as frames"
        );
        assert!(
            self.elsewhere.is_empty(),
            "work charged to another key: {:?}",
            self.elsewhere
        );
    }
}

/// An op's figures of calls seen at one end only, none.
const NO_HEALTH: iommutop_op_health = iommutop_op_health {
    unseen_entries: 0,
    unseen_exits: 0,
    understudy_entries: 0,
    understudy_exits: 0,
    unpushed: 0,
};

/// How many arguments a step's program takes.
const ARGUMENTS: usize = 8;

/// The program's arguments for a step (see ebpf/selftest/tracker.bpf.c); None for a wait.
fn arguments(step: Step, context: Context) -> Option<[u64; ARGUMENTS]> {
    let in_task = u64::from(context.on_task_stack());
    let key = |own_key: bool| if own_key { DEVICE } else { 0 };
    let call = |what: u64, call: Call| {
        [
            what,
            call.op.into(),
            call.at,
            call.tag,
            key(call.own_key),
            in_task,
            call.func,
            call.flags,
        ]
    };
    let plain = |what: u64| [what, DMA_MAP.into(), 0, 0, 0, in_task, 0, 0];
    Some(match step {
        Step::Enter(c) => call(1, c),
        Step::Exit(c) => call(2, c),
        Step::PushPartial { op, at, tag } => [3, op.into(), at, tag, DEVICE, in_task, 0, 0],
        Step::Finish => plain(4),
        Step::SwitchOut => plain(5),
        Step::SwitchIn => plain(6),
        Step::TakeSlot => plain(7),
        Step::Wait(_) => return None,
    })
}

fn test_run(program: &RawTracePoint, arguments: [u64; ARGUMENTS]) -> Result<u32, String> {
    let mut options = RawTracePointRunOptions::new();
    options.args[..ARGUMENTS].copy_from_slice(&arguments);
    program
        .test_run(options)
        .map(|result| result.return_value)
        .map_err(|e| describe(&e))
}

/// Every step as an interrupt, with every thread-id slot.
fn run(steps: &[Step]) -> Outcome {
    let steps: Vec<(Context, Step)> = steps.iter().map(|s| (Context::Interrupt, *s)).collect();
    run_with(&steps, Setup::default())
}

/// The steps, each in its context; `task_slot_mask` as user space would set it (`Some(0)`: one
/// slot for every thread).
fn run_as(steps: &[(Context, Step)], task_slot_mask: Option<u32>) -> Outcome {
    run_with(
        steps,
        Setup {
            task_slot_mask,
            ..Setup::default()
        },
    )
}

/// The knobs user space sets before load that a scenario needs.
#[derive(Clone, Copy, Debug, Default)]
struct Setup {
    /// `iommutop_task_slot_mask` (`Some(0)`: one slot for every thread).
    task_slot_mask: Option<u32>,
    /// `iommutop_understudies`: leads mark their frames for their understudies.
    understudies: bool,
    /// `--pid` of this test's own process.
    filter_own_process: bool,
}

/// The steps, each in its context, with the knobs `setup` sets.
fn run_with(steps: &[(Context, Step)], setup: Setup) -> Outcome {
    let mut loader = EbpfLoader::new();
    // A few rows are enough, and each is ~16 KiB per CPU.
    loader.map_max_entries("iommutop_stats", 4);
    if let Some(mask) = &setup.task_slot_mask {
        loader.override_global("iommutop_task_slot_mask", mask, true);
    }
    let understudies = u32::from(setup.understudies);
    loader.override_global("iommutop_understudies", &understudies, true);
    let own_process = if setup.filter_own_process {
        std::process::id()
    } else {
        0
    };
    loader.override_global("iommutop_filter_tgid", &own_process, true);
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
    // Per-CPU state (an interrupt's frames) must not change CPU between one step and the next:
    // a real interrupt runs on one CPU throughout.
    let cpu = pin_to_current_cpu();
    std::thread::scope(|scope| {
        // Each task thread runs the steps it is sent, in order, and answers each.
        let task_thread = |context: Context| {
            let (send_step, steps) = mpsc::channel::<[u64; ARGUMENTS]>();
            let (send_result, results) = mpsc::channel();
            let thread = scope.spawn(move || {
                pin_to_cpu(cpu);
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
            let thread = context.thread();
            let returned = match tasks.iter().find(|task| Some(task.0) == thread) {
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

/// Pins the calling thread to the CPU it runs on, and returns that CPU.
fn pin_to_current_cpu() -> usize {
    // SAFETY: sched_getcpu takes no arguments.
    let cpu = usize::try_from(unsafe { libc::sched_getcpu() }).expect("sched_getcpu succeeds");
    pin_to_cpu(cpu);
    cpu
}

/// Pins the calling thread to `cpu`.
fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET and sched_setaffinity (of the calling
    // thread, pid 0) only read and write the set they are given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let pinned = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        assert_eq!(pinned, 0, "pinning a test thread to CPU {cpu}");
    }
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
    let op_health: PerCpuArray<&MapData, iommutop_op_health> =
        PerCpuArray::try_from(ebpf.map("iommutop_op_health").expect("iommutop_op_health"))
            .expect("a per-CPU array");
    let slots: Array<&MapData, [u8; SLOT_BYTES]> = Array::try_from(
        ebpf.map("iommutop_task_slots")
            .expect("iommutop_task_slots"),
    )
    .expect("an array of slots");
    let irq_stacks: PerCpuArray<&MapData, [u8; INFLIGHT_BYTES]> = PerCpuArray::try_from(
        ebpf.map("iommutop_irq_inflight")
            .expect("iommutop_irq_inflight"),
    )
    .expect("a per-CPU array of stacks");
    let first = slots.get(&0, 0).expect("reads the first slot");
    let inflight: BpfHashMap<&MapData, u32, [u8; INFLIGHT_BYTES]> =
        BpfHashMap::try_from(ebpf.map("iommutop_inflight").expect("iommutop_inflight"))
            .expect("a hash of stacks");
    let mut live_above_depth = 0;
    let hashed = inflight
        .iter()
        .map(|entry| {
            let (thread, stack) = entry.expect("reads a hashed stack");
            live_above_depth += live_slots_above_depth(&stack);
            (thread, u32_at(&stack, 0))
        })
        .collect();
    for slot in slots.iter() {
        live_above_depth += live_slots_above_depth(&slot.expect("reads a slot")[8..]);
    }
    for stack in irq_stacks
        .get(&0, 0)
        .expect("reads the interrupt stacks")
        .iter()
    {
        live_above_depth += live_slots_above_depth(stack);
    }
    let mut ops = BTreeMap::new();
    let mut elsewhere = BTreeMap::new();
    for entry in rows.iter() {
        let (key, row) = entry.expect("reads a row");
        let counters = sum_per_cpu(
            stats
                .get(&row, 0)
                .expect("reads the row's statistics")
                .iter(),
        );
        if (key.id, key.kind) == (DEVICE, iommutop_key_kind::IOMMUTOP_KEY_DEVICE) {
            ops = counters;
        } else {
            for (op, c) in counters {
                if c.count > 0 {
                    elsewhere.insert((key.kind, op), c.count);
                }
            }
        }
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
    let op_health = Op::ALL
        .into_iter()
        .map(|op| {
            let per_cpu = op_health
                .get(&(op as u32), 0)
                .expect("reads an op's health");
            let sum = per_cpu.iter().fold(NO_HEALTH, |a, b| iommutop_op_health {
                unseen_entries: a.unseen_entries + b.unseen_entries,
                unseen_exits: a.unseen_exits + b.unseen_exits,
                understudy_entries: a.understudy_entries + b.understudy_entries,
                understudy_exits: a.understudy_exits + b.understudy_exits,
                unpushed: a.unpushed + b.unpushed,
            });
            (op, sum)
        })
        .collect();
    Outcome {
        ops,
        elsewhere,
        health,
        op_health,
        live_above_depth,
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

/// A twin is a call its wrapper makes right away, of another function. A stale frame (a plug
/// flush's map whose exits were skipped) a few hundred bytes above a new call of the same function
/// made it the stale call's twin, never counted, with nothing to name the loss.
#[test]
fn a_call_of_the_function_of_a_stale_frame_above_it_is_no_twin() {
    const MAP_SG: u64 = 0xffff_ffff_8100_1000;
    let outcome = run(&[
        enter(DMA_MAP, 20_000, 1).of(MAP_SG),
        enter(DMA_MAP, 19_700, 2).of(MAP_SG).twin(),
        exit(DMA_MAP, 19_700, 2).of(MAP_SG),
        enter(DMA_MAP, 20_000, 3).of(MAP_SG),
        exit(DMA_MAP, 20_000, 3).of(MAP_SG),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (3, 2));
    assert_eq!(outcome.health("abandoned_frames"), 1);
    outcome.assert_no_other_trouble(&["abandoned_frames"]);
}

/// A function its wrapper calls right away (6.18's dma_map_page_attrs calls dma_map_phys) is the
/// same call: counted once, with the wrapper.
#[test]
fn a_twin_called_by_its_wrapper_is_counted_once() {
    const WRAPPER: u64 = 0xffff_ffff_8100_1000;
    const INNER: u64 = 0xffff_ffff_8100_2000;
    let outcome = run(&[
        enter(DMA_MAP, 20_000, 1).of(WRAPPER),
        enter(DMA_MAP, 19_800, 1).of(INNER).twin(),
        exit(DMA_MAP, 19_800, 1).of(INNER),
        exit(DMA_MAP, 20_000, 1).of(WRAPPER),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
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

fn with_understudies(steps: &[Step]) -> Outcome {
    let steps: Vec<(Context, Step)> = steps.iter().map(|s| (Context::Interrupt, *s)).collect();
    run_with(
        &steps,
        Setup {
            understudies: true,
            ..Setup::default()
        },
    )
}

/// Both copies ran at both ends: the understudies leave the call to the lead, which times it.
#[test]
fn an_understudy_leaves_a_call_its_lead_saw_to_the_lead() {
    let outcome = with_understudies(&[
        enter(DMA_MAP, 20_000, 1),
        enter(DMA_MAP, 20_000, 1).understudy(),
        exit(DMA_MAP, 20_000, 1),
        exit(DMA_MAP, 20_000, 1).understudy(),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    let map = outcome.op_health(Op::DmaMap);
    assert_eq!((map.understudy_entries, map.understudy_exits), (0, 0));
    outcome.assert_no_other_trouble(&[]);
}

/// The kernel skipped the lead's entry (a task preempted inside it on this CPU): the understudy
/// enters the call, the lead's exit times it.
#[test]
fn an_understudy_enters_a_call_whose_lead_entry_was_skipped() {
    let outcome = with_understudies(&[
        enter(DMA_MAP, 20_000, 1).understudy(),
        exit(DMA_MAP, 20_000, 1),
        exit(DMA_MAP, 20_000, 1).understudy(),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    assert_eq!(outcome.op_health(Op::DmaMap).understudy_entries, 1);
    outcome.assert_no_other_trouble(&[]);
}

/// The lead's exit was skipped: the understudy closes the call it finds open.
#[test]
fn an_understudy_closes_a_call_whose_lead_exit_was_skipped() {
    let outcome = with_understudies(&[
        enter(DMA_MAP, 20_000, 1),
        enter(DMA_MAP, 20_000, 1).understudy(),
        exit(DMA_MAP, 20_000, 1).understudy(),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 1));
    assert_eq!(outcome.op_health(Op::DmaMap).understudy_exits, 1);
    outcome.assert_no_other_trouble(&[]);
}

/// Neither copy saw the entry: the lead's exit counts the call, untimed, and says so; the
/// understudy, finding no frame, leaves it to the lead rather than count it again.
#[test]
fn a_call_whose_entries_were_both_skipped_is_counted_once() {
    let outcome = with_understudies(&[
        exit(DMA_MAP, 20_000, 1),
        exit(DMA_MAP, 20_000, 1).understudy(),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (1, 0));
    assert_eq!(outcome.op_health(Op::DmaMap).unseen_entries, 1);
    outcome.assert_no_other_trouble(&["exit_without_entry"]);
}

/// An interrupt lands between a lead's entry and its understudy's, on the same stack: its own
/// call is entered and closed by its own lead; the understudy of the call below then finds its
/// lead's frame on top again, and leaves it.
#[test]
fn an_interrupt_between_a_lead_and_its_understudy_is_a_call_of_its_own() {
    let outcome = with_understudies(&[
        enter(DMA_MAP, 20_000, 1),
        enter(DMA_MAP, 19_000, 2),
        enter(DMA_MAP, 19_000, 2).understudy(),
        exit(DMA_MAP, 19_000, 2),
        exit(DMA_MAP, 19_000, 2).understudy(),
        enter(DMA_MAP, 20_000, 1).understudy(),
        exit(DMA_MAP, 20_000, 1),
        exit(DMA_MAP, 20_000, 1).understudy(),
    ]);
    assert_eq!(outcome.calls(Op::DmaMap), (2, 2));
    let map = outcome.op_health(Op::DmaMap);
    assert_eq!((map.understudy_entries, map.understudy_exits), (0, 0));
    outcome.assert_no_other_trouble(&[]);
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
