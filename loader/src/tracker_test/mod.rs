//! The tracker as a state machine, without the lab (its rare paths are hard to reach with real
//! work, and a guest costs minutes): each scenario loads `ebpf/selftest/tracker.bpf.c` afresh, runs
//! its steps with `BPF_PROG_TEST_RUN` (a call entering, a call exiting, an entry stopped before its
//! frame was complete), and checks what the tracker counted, timed and named in its health
//! counters. Needs root and a kernel with BTF, as the other host tests. Each step runs as an
//! interrupt (the CPU's stack of calls in flight) or as the task of one of two threads the harness
//! keeps (the slot of its thread id, or the hash by thread id while the other thread holds the
//! slot): the object is built so that a step says which (a test run's context lies on no stack).
//!
//! Here is the harness; the scenarios are in one submodule per family.

mod frames;
mod interrupts;
mod tasks;
mod twins;
mod understudies;

use crate::abi::{
    iommutop_dev_key, iommutop_dev_stats, iommutop_key_kind, iommutop_op, iommutop_op_health,
    IOMMUTOP_MAX_NESTING,
};
use crate::maps::convert::sum_per_cpu;
use crate::object::load::program;
use crate::object::verifier_log::describe;
use aya::maps::{Array, HashMap as BpfHashMap, MapData, PerCpuArray};
use aya::programs::{RawTracePoint, RawTracePointRunOptions, TestRun};
use aya::{Ebpf, EbpfLoader};
use iommutop_model::sample::{Health, Op, OpCounters};
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
    health: BTreeMap<String, u64>,
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
            if !expected.contains(&counter.as_str()) {
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
    let health = Health::KERNEL
        .iter()
        .enumerate()
        .map(|(index, counter)| {
            let per_cpu = health
                .get(&(index as u32), 0)
                .expect("reads a health counter");
            (counter.to_string(), per_cpu.iter().sum())
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
