/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Attribution and timing of calls in flight.
 *
 * A context keeps a small stack of the probed calls it is inside of. A DMA API call pushes a frame
 * keyed by its own struct device; every probed call nested in it (IOVA allocation, iommu_map,
 * IOTLB sync, invalidation waits) pushes a frame that inherits that key, so its work is charged to
 * the device whose mapping it serves. The start time lives in the frame.
 *
 * Which stack: a task's own for calls made in task context: in the slot of its thread id, which a
 * task holds from its first call in flight to its last return, or, while another task of the same
 * index holds the slot, in its task-local storage (where kprobes may use it: freed with the task,
 * found by a pointer the task already holds, at about ten times a slot's cost); built with
 * IOMMUTOP_TASK_STACKS_HASHED (kernels whose kprobes cannot use task storage, 5.10), in an LRU
 * hash keyed by its thread id. A task preempted or migrated inside a DMA call finds its frame
 * wherever it resumes, and no other task's work can land in it. Interrupt context (hard interrupts,
 * and softirqs run on the interrupt stack) uses a per-CPU stack: it cannot be preempted or migrate,
 * and its calls nest last-in first-out over whatever the CPU was doing. The two are told apart by
 * where the program's own context lies: on the current task's kernel stack, or not.
 *
 * A frame knows its call by the call's identity, which the entry and the exit programs of one call
 * both see: where the call sits on its context's stack (the trampoline's argument block for
 * fentry/fexit, the stack pointer at the function's first instruction for kprobes), or, for a map
 * of the IOVA API that spans several functions, its struct dma_iova_state. An exit closes only the
 * frame of its own call. Stacks grow down and a call in flight lies above every call made inside
 * it, so a frame at or below the position of a call now entering (on the same stack) belongs to a
 * call that has returned: the kernel skipped its exit program (a trampoline program preempted or
 * interrupted is not run again on that CPU until it finishes: the program's recursion_misses; a
 * kprobe program while any other runs there). Such a frame, and everything above it, is dropped
 * when the next call enters, and so is what lies above a frame an exit closes; a full stack is
 * emptied. Every dropped frame is counted as IOMMUTOP_HEALTH_ABANDONED_FRAMES, and its call is
 * counted, untimed. An exit that finds no frame of its call (its entry was skipped) counts the
 * call untimed and leaves the stack alone. A frame whose start is 0 is still being written (or
 * was given back): it is never closed nor dropped by an interrupt that lands meanwhile.
 *
 * Self time. A call's frame opens when its entry program ends and closes when its exit program
 * starts, so the call's own probes are outside the time it is charged. The programs of calls
 * nested in it run inside that time: each adds what it ran (its first to its last timestamp) to
 * the frame it is nested in (probe_ns), and a nested frame hands its own probe_ns up when it
 * closes. A call's time is then what was measured less its probe_ns (total_ns, the histogram),
 * and the measured time is kept as raw_total_ns. What a program cannot time is the kernel's
 * dispatch around it (the trampoline entering and leaving each program): the loader measures it
 * on functions that do nothing (ebpf/selftest/dispatch.bpf.c) and passes the gap between an entry
 * program's end and an exit program's start as iommutop_dispatch_ns, which a call's own time
 * holds once (its entry's tail, its exit's head), and what a probed call costs the call around it
 * beyond its programs' runs as iommutop_nested_dispatch_ns (the trampoline's frame and argument
 * saving, both programs' entering and leaving, their heads and tails), added per nested call.
 * Not taken out: the cost of count-only programs, and a kprobe's dispatch beyond a trampoline's.
 *
 * --pid and --cgroup (iommutop_filter_tgid, iommutop_filter_cgroup) are decided where a context's
 * outermost frame opens: in task context, by the task's process or cgroup; interrupt context has
 * no task of its own and is left out. A left-out frame is pushed all the same, marked
 * IOMMUTOP_FRAME_FILTERED, and the frames nested in it inherit the mark: their work is dropped
 * with it, not charged elsewhere. Without a filter the checks are dead code the verifier removes.
 */
#ifndef IOMMUTOP_TRACK_BPF_H
#define IOMMUTOP_TRACK_BPF_H

#include "maps.bpf.h"
#include "hist.bpf.h"
#include "names.bpf.h"

/* Frame indices are masked with this so that the verifier sees them bounded whatever clang does
 * with the range checks before them. */
#define IOMMUTOP_FRAME_MASK (IOMMUTOP_MAX_NESTING - 1)
_Static_assert((IOMMUTOP_MAX_NESTING & IOMMUTOP_FRAME_MASK) == 0, "nesting must be a power of two");

/* How far apart two calls on one stack can be: a kernel stack's size (x86-64's THREAD_SIZE and
 * IRQ_STACK_SIZE without KASAN). A frame further from a call entering lies on another stack (an
 * NMI's, say): where it lies says nothing of whether it returned. */
#define IOMMUTOP_STACK_SPAN (16ULL * 1024)

/* A call's identity: where it sits (at), and, where both its programs see its arguments, a tag
 * made of one that changes from call to call (a DMA address, a physical address). Two calls made
 * one after the other from the same place sit at the same position; if the kernel skipped the
 * exit program of the first and the entry program of the second, the tag keeps the second's exit
 * from closing the first's frame (one count for two calls, and the time between them). */
struct iommutop_call {
	__u64 at;
	__u64 tag;
	/* The IOMMU-side object the call works on (its iommu_domain, IOVA domain or VT-d domain),
	 * which names the device the call serves when no DMA API call of it was seen around it. */
	__u64 owner;
};

/* The identity of a call as the programs of each kind see it. A kretprobe runs after the function
 * returned, its stack pointer one word above where the kprobe saw it (checked in the lab on 5.10
 * and 7.3); it has no arguments, so kprobes give no tag. */
#define IOMMUTOP_FENTRY_CALL(ctx) ((struct iommutop_call){.at = (__u64)(ctx)})
#define IOMMUTOP_FENTRY_CALL_TAGGED(ctx, tag_value)                                                \
	((struct iommutop_call){.at = (__u64)(ctx), .tag = (__u64)(tag_value)})
#define IOMMUTOP_KPROBE_CALL(ctx)                                                                  \
	((struct iommutop_call){.at = PT_REGS_SP((struct pt_regs *)(ctx))})
#define IOMMUTOP_KRETPROBE_CALL(ctx)                                                               \
	((struct iommutop_call){.at = PT_REGS_SP((struct pt_regs *)(ctx)) - 8})
/* A call on an IOMMU-side object, its first argument (see iommutop_key_of_owner). */
#define IOMMUTOP_OWNED_CALL(ctx)                                                                   \
	((struct iommutop_call){.at = (__u64)(ctx), .owner = ((__u64 *)(ctx))[0]})
#define IOMMUTOP_OWNED_KPROBE_CALL(ctx)                                                            \
	((struct iommutop_call){.at = PT_REGS_SP((struct pt_regs *)(ctx)),                         \
				.owner = PT_REGS_PARM1((struct pt_regs *)(ctx))})
/* A call that spans several functions (IOMMUTOP_ENTER_SESSION), known by its session object. */
#define IOMMUTOP_SESSION_CALL(session) ((struct iommutop_call){.at = (__u64)(session)})

/* Thread ids are below 2^22 (PID_MAX_LIMIT): the stacks of idle CPUs are keyed above them. */
#define IOMMUTOP_IDLE_CONTEXT 0x80000000U

/* frame flags */
#define IOMMUTOP_FRAME_DUPLICATE 1 /* a twin called by its wrapper (IOMMUTOP_ENTER_TWIN) */
#define IOMMUTOP_FRAME_FULL 2	   /* an IOTLB invalidation of a whole domain */
#define IOMMUTOP_FRAME_FILTERED 4  /* left out by --pid/--cgroup, with all it nests */
#define IOMMUTOP_FRAME_SESSION 8   /* known by a session object, not by where it sits */

/* --pid: the tgid whose work is counted; --cgroup: the cgroup v2 id. 0: no filter. Set by user
 * space before load. Weak: every family sees the same knobs. */
const volatile __u32 iommutop_filter_tgid __weak = 0;
const volatile __u64 iommutop_filter_cgroup __weak = 0;

/* Where each CPU's preempt count is, from /proc/kallsyms (0: not found): the address of
 * __per_cpu_offset[] and the per-CPU symbol that holds the count, __preempt_count, or pcpu_hot
 * (6.2-6.14), a struct whose field it is. */
const volatile __u64 iommutop_per_cpu_offsets __weak = 0;
const volatile __u64 iommutop_preempt_count_at __weak = 0;
const volatile __u32 iommutop_preempt_count_in_pcpu_hot __weak = 0;

struct pcpu_hot___iommutop {
	int preempt_count;
} __attribute__((preserve_access_index));

/* include/linux/preempt.h: what in_task() excludes (NMI_MASK | HARDIRQ_MASK | SOFTIRQ_OFFSET). */
#define IOMMUTOP_NOT_IN_TASK (0x00f00000 | 0x000f0000 | 0x00000100)

struct iommutop_frame {
	__u64 call; /* the call's identity (see above): its position or session */
	__u64 tag;
	__u64 start_ns;
	__u64 probe_ns; /* run time of probe programs nested in the call so far (self time) */
	__u64 offcpu_at_start; /* the stack's offcpu_ns when the call began */
	__u64 bytes;
	struct iommutop_dev_key key;
	__u32 op;
	__u32 flags;
	__s32 stack_id; /* sampled call path, or negative */
	__u32 pad;
};

struct iommutop_inflight {
	__u32 depth;
	__u32 pad;
	/* Waiting (see iommutop_switched): how long the stack's task was switched out while it had
	 * calls in flight, in all, and since when it is (0: it runs). */
	__u64 offcpu_ns;
	__u64 switched_out_at;
	struct iommutop_frame frames[IOMMUTOP_MAX_NESTING];
};

#ifdef IOMMUTOP_TASK_STACKS_HASHED
/* Calls in flight per task (or per idle CPU); least recently used tasks are forgotten. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, IOMMUTOP_MAX_TASKS);
	__type(key, __u32);
	__type(value, struct iommutop_inflight);
} iommutop_inflight SEC(".maps") __weak;

/* A zeroed stack to create a task's from: too large for the BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iommutop_inflight);
} iommutop_zero SEC(".maps") __weak;
#else
/*
 * Calls in flight per task: in the slot of its thread id (IOMMUTOP_TASK_SLOTS, indexed by the id
 * masked), found with a few loads, which the first task of that index to enter a probed call
 * claims and gives back when its last call returns. A task whose slot another task holds keeps
 * its calls in its own storage instead (a lookup through the task, about a hundred instructions
 * where the slot takes ten), until they have all returned; in_storage counts such tasks per
 * index, so that the others look in their storage only when one may have put calls there.
 */
struct iommutop_task_slot {
	__u32 owner; /* the thread whose calls these are; 0: free (the idle tasks never own one) */
	__u32 in_storage; /* tasks of this index whose calls in flight are in their task storage */
	struct iommutop_inflight stack;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IOMMUTOP_TASK_SLOTS);
	__type(key, __u32);
	__type(value, struct iommutop_task_slot);
} iommutop_task_slots SEC(".maps") __weak;

/* Thread ids are masked with this to index the slots. Set by user space before load: tests set
 * 0, which gives every task one slot, so that all but one at a time use their storage. */
const volatile __u32 iommutop_task_slot_mask __weak = IOMMUTOP_TASK_SLOTS - 1;

/* Calls in flight of tasks whose slot another task holds, in their own storage: created at their
 * first such call, freed with the task. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct iommutop_inflight);
} iommutop_inflight SEC(".maps") __weak;
#endif

/* Where a context's calls in flight are. */
enum iommutop_stack_home {
	IOMMUTOP_STACK_OF_CPU,	/* interrupt context: the CPU's */
	IOMMUTOP_STACK_OF_SLOT, /* task context: the slot of the task's thread id */
	IOMMUTOP_STACK_OF_TASK, /* task context: the task's storage, or its hashed entry (5.10) */
};

struct iommutop_stack_ref {
	int task_context;
	enum iommutop_stack_home home;
#ifndef IOMMUTOP_TASK_STACKS_HASHED
	struct iommutop_task_slot *slot; /* the task's slot, where home is a task's */
#endif
};

/* Calls in flight in interrupt context, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iommutop_inflight);
} iommutop_irq_inflight SEC(".maps") __weak;

/* When each CPU last sampled a call path (the sampling rate is bounded per CPU), and the last
 * clock tick at which it asked. */
struct iommutop_stack_clock {
	__u64 sampled_ns;
	__u64 asked_at_jiffies;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iommutop_stack_clock);
} iommutop_stack_clock SEC(".maps") __weak;

/* arch/x86/include/asm/page_64_types.h: THREAD_SIZE without KASAN (Debian's kernels). */
#define IOMMUTOP_THREAD_SIZE (16UL * 1024)

/* Whether the program runs on the kernel stack at stack (the current task's: task context,
 * softirqs run by local_bh_enable included) rather than on an interrupt stack. ctx, built by the
 * trampoline, kprobe or tracepoint that runs the program, lies on the stack of the context it
 * runs in. */
static __always_inline int iommutop_ctx_on_stack(const void *ctx, unsigned long stack)
{
	unsigned long end = stack + IOMMUTOP_THREAD_SIZE, where = (unsigned long)ctx;

	/* The verifier refuses arithmetic on a context pointer but lets a program loaded with
	 * CAP_PERFMON compare it with numbers: two comparisons, kept apart from clang's habit of
	 * folding a range check into one subtraction. */
	barrier_var(stack);
	barrier_var(end);
	if (where < stack)
		return 0;
	return where < end;
}

#ifdef IOMMUTOP_TASK_STACKS_HASHED
/* iommutop_ctx_on_stack of the current task's stack. */
static __always_inline int iommutop_in_task_context(const void *ctx)
{
	struct task_struct *task;

	/* A BTF task pointer (5.11+) reads its stack with a plain load; before, with a helper. The
	 * verifier never looks at the branch this kernel does not take. */
	if (bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_get_current_task_btf)) {
		task = bpf_get_current_task_btf();
		return iommutop_ctx_on_stack(ctx, (unsigned long)task->stack);
	}
	task = (struct task_struct *)bpf_get_current_task();
	return iommutop_ctx_on_stack(ctx, (unsigned long)BPF_CORE_READ(task, stack));
}
#endif

/* Whether the CPU runs an interrupt (hard, soft or NMI) by its preempt count, as in_task() does.
 * The stack test above cannot see one that arrived in user mode: it runs on the interrupted
 * task's kernel stack (empty then, so the tracking is not misled). Whose work it is can be:
 * the filter and a process's own row ask this too. 0 when the count was not found. */
static __always_inline int iommutop_in_interrupt(void)
{
	__u64 at = iommutop_preempt_count_at, offset = 0;
	__u32 cpu = bpf_get_smp_processor_id(), field;
	int count = 0;

	if (!iommutop_per_cpu_offsets || !at)
		return 0;
	if (iommutop_preempt_count_in_pcpu_hot) {
		/* Only relocated (and only reachable) where pcpu_hot exists. */
		field = bpf_core_field_offset(struct pcpu_hot___iommutop, preempt_count);
		barrier_var(field);
		at += field;
	}
	if (bpf_probe_read_kernel(
		&offset, sizeof(offset),
		(const void *)(iommutop_per_cpu_offsets + (__u64)cpu * sizeof(__u64))))
		return 0;
	if (bpf_probe_read_kernel(&count, sizeof(count), (const void *)(at + offset)))
		return 0;
	return (count & IOMMUTOP_NOT_IN_TASK) != 0;
}

/* The current task's stack (NULL while it has none), created when create is set; ref says where.
 * task is the current task (the slots' build; the hashed one finds it by its thread id). */
static __always_inline struct iommutop_inflight *
iommutop_task_stack(int create, struct iommutop_stack_ref *ref, struct task_struct *task)
{
#ifdef IOMMUTOP_TASK_STACKS_HASHED
	/* Keyed by thread id; idle tasks (thread id 0) by their CPU. */
	__u32 task_id = (__u32)bpf_get_current_pid_tgid(), zero_index = 0;
	struct iommutop_inflight *inflight;
	void *zero;
	long err;

	ref->home = IOMMUTOP_STACK_OF_TASK;
	if (!task_id)
		task_id = IOMMUTOP_IDLE_CONTEXT | bpf_get_smp_processor_id();
	inflight = bpf_map_lookup_elem(&iommutop_inflight, &task_id);
	if (inflight || !create)
		return inflight;
	zero = bpf_map_lookup_elem(&iommutop_zero, &zero_index);
	if (!zero)
		return NULL;
	err = bpf_map_update_elem(&iommutop_inflight, &task_id, zero, BPF_NOEXIST);
	if (err && err != -17 /* EEXIST: an interrupt created it first */) {
		iommutop_health_inc(IOMMUTOP_HEALTH_TASK_MAP_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(&iommutop_inflight, &task_id);
#elif defined(IOMMUTOP_TASK_STACKS_PER_CPU)
	/* Only for bench/probe-cost --against-per-cpu, which prices per-task stacks against the
	 * tracker before them: every context on the CPU's stack, wrong wherever a task is preempted
	 * or migrates inside a call. */
	__u32 zero_index = 0;

	ref->home = IOMMUTOP_STACK_OF_CPU;
	return bpf_map_lookup_elem(&iommutop_irq_inflight, &zero_index);
#else
	__u32 thread = task->pid, index = thread & iommutop_task_slot_mask;
	struct iommutop_task_slot *slot = bpf_map_lookup_elem(&iommutop_task_slots, &index);
	struct iommutop_inflight *stored;

	if (!slot)
		return NULL; /* never: the index is masked */
	ref->slot = slot;
	ref->home = IOMMUTOP_STACK_OF_SLOT;
	if (thread && slot->owner == thread)
		return &slot->stack;
	ref->home = IOMMUTOP_STACK_OF_TASK;
	/* Calls already in the task's storage stay there until they have all returned. */
	if (slot->in_storage) {
		stored = bpf_task_storage_get(&iommutop_inflight, task, 0, 0);
		if (stored && stored->depth)
			return stored;
	}
	if (!create)
		return NULL;
	if (thread && !slot->owner && !__sync_val_compare_and_swap(&slot->owner, 0, thread)) {
		ref->home = IOMMUTOP_STACK_OF_SLOT;
		return &slot->stack;
	}
	/* NULL on creation: no memory, or the storage busy on this CPU (a program interrupted
	 * inside it). */
	stored = bpf_task_storage_get(&iommutop_inflight, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!stored)
		iommutop_health_inc(IOMMUTOP_HEALTH_TASK_MAP_FULL);
	return stored;
#endif
}

/* The calls in flight of a task that need not be the current one (NULL when it has none), where
 * the scheduler's switch can find them without locking: a task whose calls are in its task
 * storage (another task of its slot's index held the slot) is not followed, its waiting stays in
 * its calls' time (task storage is busy while a preempted task holds it, and the switch must not
 * make it busier). */
static __always_inline struct iommutop_inflight *iommutop_stack_of_task(struct task_struct *task)
{
	__u32 thread = task->pid;
#ifdef IOMMUTOP_TASK_STACKS_HASHED
	if (!thread)
		return NULL; /* an idle task: its calls are keyed by CPU, and it never waits */
	return bpf_map_lookup_elem(&iommutop_inflight, &thread);
#elif defined(IOMMUTOP_TASK_STACKS_PER_CPU)
	return NULL;
#else
	__u32 index = thread & iommutop_task_slot_mask;
	struct iommutop_task_slot *slot = bpf_map_lookup_elem(&iommutop_task_slots, &index);

	if (!slot || !thread)
		return NULL;
	return slot->owner == thread ? &slot->stack : NULL;
#endif
}

/*
 * Waiting is not cost. A task switched out while it has calls in flight (preempted, asleep on a
 * lock PREEMPT_RT turns into a mutex, waiting for an invalidation queue) is waiting: from the
 * scheduler's switch, the stack keeps how long in all (offcpu_ns), and each frame what it was
 * when its call began, so that an exit takes the difference out of its call's time and reports
 * it apart (the op's offcpu_ns and waited). Interrupt context never switches out.
 */
static __always_inline void iommutop_switched(struct task_struct *prev, struct task_struct *next)
{
	struct iommutop_inflight *stack = iommutop_stack_of_task(prev);
	__u64 now = bpf_ktime_get_ns();

	if (stack && stack->depth)
		stack->switched_out_at = now;
	stack = iommutop_stack_of_task(next);
	if (!stack || !stack->switched_out_at)
		return;
	if (stack->depth)
		stack->offcpu_ns += now - stack->switched_out_at;
	stack->switched_out_at = 0;
}

/* The stack of a context of the kind task_context says: the current task's (NULL while it has
 * none), or this CPU's for interrupts. */
static __always_inline struct iommutop_inflight *iommutop_stack_of(int task_context)
{
	struct iommutop_stack_ref ref = {.task_context = task_context};
	__u32 zero_index = 0;

	if (!task_context)
		return bpf_map_lookup_elem(&iommutop_irq_inflight, &zero_index);
#ifdef IOMMUTOP_TASK_STACKS_HASHED
	return iommutop_task_stack(0, &ref, NULL);
#else
	return iommutop_task_stack(0, &ref, bpf_get_current_task_btf());
#endif
}

/* The stack of the context the program runs in, a task's created when create is set; NULL when
 * it has none. ref says which kind of context it is and where the stack lives. */
static __always_inline struct iommutop_inflight *iommutop_stack_here(const void *ctx, int create,
								     struct iommutop_stack_ref *ref)
{
	__u32 zero_index = 0;
#ifdef IOMMUTOP_TASK_STACKS_HASHED
	struct task_struct *task = NULL;

	ref->task_context = iommutop_in_task_context(ctx);
#else
	struct task_struct *task = bpf_get_current_task_btf();

	ref->task_context = iommutop_ctx_on_stack(ctx, (unsigned long)task->stack);
	ref->slot = NULL;
#endif
	ref->home = IOMMUTOP_STACK_OF_CPU;
	if (!ref->task_context)
		return bpf_map_lookup_elem(&iommutop_irq_inflight, &zero_index);
	return iommutop_task_stack(create, ref, task);
}

/* iommutop_stack_here, for programs that only read the stack: *task_context says which kind of
 * context it is. */
static __always_inline struct iommutop_inflight *iommutop_inflight_of(const void *ctx, int create,
								      int *task_context)
{
	struct iommutop_stack_ref ref;
	struct iommutop_inflight *inflight = iommutop_stack_here(ctx, create, &ref);

	*task_context = ref.task_context;
	return inflight;
}

/* A call was pushed on a stack that was empty before this program: a task's storage now holds
 * calls, which the other tasks of its slot's index must know to look for. */
static __always_inline void iommutop_stack_began(const struct iommutop_stack_ref *ref)
{
#ifndef IOMMUTOP_TASK_STACKS_HASHED
	if (ref->home == IOMMUTOP_STACK_OF_TASK && ref->slot)
		__sync_fetch_and_add(&ref->slot->in_storage, 1);
#endif
}

/* The last call of a stack returned: a slot goes back to the index's other tasks, a storage no
 * longer needs looking for. The program touches the stack no more after this. */
static __always_inline void iommutop_stack_emptied(const struct iommutop_stack_ref *ref)
{
#ifndef IOMMUTOP_TASK_STACKS_HASHED
	if (!ref->slot)
		return;
	if (ref->home == IOMMUTOP_STACK_OF_SLOT)
		__sync_lock_test_and_set(&ref->slot->owner, 0);
	else if (ref->home == IOMMUTOP_STACK_OF_TASK)
		__sync_fetch_and_sub(&ref->slot->in_storage, 1);
#endif
}

/* Whether --pid or --cgroup is in force. */
static __always_inline int iommutop_filtering(void)
{
	return iommutop_filter_tgid || iommutop_filter_cgroup;
}

/* Whether the filter leaves out work in this context: what the innermost frame was decided, or
 * outside any frame, whether this is not a selected task's own context. */
static __always_inline int iommutop_left_out(const struct iommutop_inflight *inflight,
					     int task_context)
{
	__u32 depth = inflight ? inflight->depth : 0;

	if (!iommutop_filtering())
		return 0;
	if (depth > 0 && depth <= IOMMUTOP_MAX_NESTING)
		return !!(inflight->frames[(depth - 1) & IOMMUTOP_FRAME_MASK].flags &
			  IOMMUTOP_FRAME_FILTERED);
	if (!task_context || iommutop_in_interrupt())
		return 1;
	if (iommutop_filter_tgid &&
	    (__u32)(bpf_get_current_pid_tgid() >> 32) != iommutop_filter_tgid)
		return 1;
	if (iommutop_filter_cgroup && bpf_get_current_cgroup_id() != iommutop_filter_cgroup)
		return 1;
	return 0;
}

/* Whether the filter leaves out an event with no frame of its own (counts only): its context's. */
static __always_inline int iommutop_left_out_here(const void *ctx)
{
	struct iommutop_inflight *inflight;
	int task_context;

	if (!iommutop_filtering())
		return 0;
	inflight = iommutop_inflight_of(ctx, 0, &task_context);
	return iommutop_left_out(inflight, task_context);
}

static __always_inline struct iommutop_dev_key iommutop_device_key(const struct device *dev)
{
	struct iommutop_dev_key key = {.id = (__u64)dev, .kind = IOMMUTOP_KEY_DEVICE};

	return key;
}

/* Outside any DMA API call, in task context: the owner of the current process or of its parent
 * (a userspace driver's worker), else the process's own "unattributed" row, keyed by its tgid
 * (IOMMUTOP_MAX_PROCESSES of them). In interrupt context, and for processes beyond those, the
 * tgid-0 "unattributed" row: no task there did the work. */
static __always_inline struct iommutop_dev_key iommutop_owner_key(int task_context)
{
	struct iommutop_dev_key key = {.id = 0, .kind = IOMMUTOP_KEY_UNATTRIBUTED};
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct iommutop_dev_key *owner;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, process = tgid, one = 1;
	long err;

	if (!task_context || !tgid || iommutop_in_interrupt())
		return key;
	owner = bpf_map_lookup_elem(&iommutop_owners, &tgid);
	if (!owner) {
		tgid = BPF_CORE_READ(task, real_parent, tgid);
		owner = bpf_map_lookup_elem(&iommutop_owners, &tgid);
	}
	if (owner)
		return *owner;
	if (!bpf_map_lookup_elem(&iommutop_processes, &process)) {
		err = bpf_map_update_elem(&iommutop_processes, &process, &one, BPF_NOEXIST);
		if (err && err != -17 /* EEXIST: another CPU added it first */) {
			iommutop_health_inc(IOMMUTOP_HEALTH_PROCESS_MAP_FULL);
			return key;
		}
	}
	key.id = process;
	return key;
}

/* The key nested work is charged to: the innermost frame's, or the owner's outside any. */
static __always_inline struct iommutop_dev_key
iommutop_current_key(const struct iommutop_inflight *inflight, int task_context)
{
	__u32 depth;

	if (!inflight)
		return iommutop_owner_key(task_context);
	depth = inflight->depth;
	if (depth == 0 || depth > IOMMUTOP_MAX_NESTING)
		return iommutop_owner_key(task_context);
	return inflight->frames[(depth - 1) & IOMMUTOP_FRAME_MASK].key;
}

/* Which device each IOMMU-side object (iommu_domain, IOVA domain, VT-d domain) was last seen
 * serving: written when a call on it runs inside a device's DMA API call, read when a call on it
 * runs inside none (the kernel skipped that DMA call's entry program; an unmap in an interrupt
 * whose DMA call was not probed). A domain shared by several devices (one IOMMU group) names the
 * last one. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOMMUTOP_MAX_DEVICES);
	__type(key, __u64);
	__type(value, struct iommutop_dev_key);
} iommutop_owner_devices SEC(".maps") __weak;

/* The object and device this CPU last wrote there: the common case writes nothing. */
struct iommutop_owner_seen {
	__u64 owner;
	struct iommutop_dev_key key;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iommutop_owner_seen);
} iommutop_owner_seen SEC(".maps") __weak;

/* The key of an IOMMU-side call on `owner` (0: none) that nested work would be charged to, the
 * context's `inflight` calls and kind given: inside a call, that call's key (a device's, which is
 * then remembered for the object; the flush-queue timer's); inside none, the device last
 * remembered for the object, else the owner of the context's work. */
static __always_inline struct iommutop_dev_key
iommutop_key_of_owner(__u64 owner, const struct iommutop_inflight *inflight, int task_context)
{
	struct iommutop_dev_key key = iommutop_current_key(inflight, task_context);
	struct iommutop_owner_seen *seen;
	struct iommutop_dev_key *known;
	__u32 zero = 0;
	__u64 number = 0;

	if (!owner)
		return key;
	if (inflight && inflight->depth > 0) {
		if (key.kind != IOMMUTOP_KEY_DEVICE)
			return key;
		seen = bpf_map_lookup_elem(&iommutop_owner_seen, &zero);
		if (!seen || (seen->owner == owner && seen->key.id == key.id))
			return key;
		/* A number for the map's key: owner may be a typed pointer (an fentry argument). */
		bpf_probe_read_kernel(&number, sizeof(number), &owner);
		bpf_map_update_elem(&iommutop_owner_devices, &number, &key, BPF_ANY);
		seen->owner = number;
		seen->key = key;
		return key;
	}
	if (key.kind == IOMMUTOP_KEY_DEVICE)
		return key; /* the context's owner is a device already (a userspace driver's) */
	bpf_probe_read_kernel(&number, sizeof(number), &owner);
	known = bpf_map_lookup_elem(&iommutop_owner_devices, &number);
	return known ? *known : key;
}

/* For an event with no frame of its own (counts only): the key its context's work goes to, or 0
 * when the filter leaves it out. */
static __always_inline int iommutop_context_key(const void *ctx, struct iommutop_dev_key *key)
{
	int task_context;
	struct iommutop_inflight *inflight = iommutop_inflight_of(ctx, 0, &task_context);

	if (iommutop_left_out(inflight, task_context))
		return 0;
	*key = iommutop_current_key(inflight, task_context);
	return 1;
}

static __always_inline struct iommutop_op_stats *
iommutop_op_stats(const struct iommutop_dev_key *key, __u32 op, const void *named_object)
{
	struct iommutop_dev_key numbers = iommutop_key_numbers(key);
	struct iommutop_dev_stats *stats;
	int created;

	if (op >= IOMMUTOP_OP_COUNT)
		return NULL;
	stats = iommutop_stats_lookup_or_init(&numbers, &created);
	if (!stats)
		return NULL;
	if (created)
		iommutop_record_name(key, named_object);
	return &stats->ops[op];
}

static __always_inline void iommutop_record_stack(const struct iommutop_frame *frame, __u64 ns)
{
	struct iommutop_stack_key key = {
	    .dev_id = frame->key.id,
	    .kind = frame->key.kind,
	    .op = frame->op,
	    .stack_id = frame->stack_id,
	};
	struct iommutop_stack_value *value, fresh = {.samples = 1, .total_ns = ns};

	value = bpf_map_lookup_elem(&iommutop_stack_samples, &key);
	if (value) {
		value->samples += 1;
		value->total_ns += ns;
	} else {
		bpf_map_update_elem(&iommutop_stack_samples, &key, &fresh, BPF_NOEXIST);
	}
}

/* The kernel object a frame's key points to, for naming it: only device keys carry one. */
static __always_inline const void *iommutop_key_object(const struct iommutop_dev_key *key)
{
	return key->kind == IOMMUTOP_KEY_DEVICE ? (const void *)key->id : NULL;
}

/* Counts an event that has no measured duration (tracepoint tier, completions). */
static __always_inline void iommutop_count(const struct iommutop_dev_key *key, __u32 op, __u64 n,
					   __u64 bytes, int failed, const void *named_object)
{
	struct iommutop_op_stats *stats = iommutop_op_stats(key, op, named_object);

	if (!stats)
		return;
	stats->count += n;
	stats->bytes += bytes;
	if (failed)
		stats->failures += 1;
}

/* The kernel's dispatch around probe programs, in ns (see "Self time" above); set by user space
 * before load, 0 when not calibrated (the nested one is two gaps when only it was not). */
const volatile __u64 iommutop_dispatch_ns __weak = 0;
const volatile __u64 iommutop_nested_dispatch_ns __weak = 0;

/* Each CPU records the call path of at most one DMA API call per this many ns (a bounded rate,
 * whatever the event rate: unwinding a stack costs far more than the rest of a probe); 0 turns
 * sampling off. Set by user space before load. Weak: every family sees the same knob. */
const volatile __u64 iommutop_stack_interval_ns __weak = 0;

/*
 * A function that its wrapper, probed as the same operation, calls directly (6.18's
 * dma_map_page_attrs calls dma_map_phys; amd_iommu_iotlb_sync calls amd_iommu_domain_flush_pages):
 * nested right inside the wrapper on the same device, it is the same call and is counted once.
 * Only such twins are checked: the same operation nested for another reason (an interrupt
 * unmapping inside an unmap) is a call of its own.
 */
#define IOMMUTOP_ENTER_TWIN 1
/* An IOTLB invalidation of a whole domain: counted as "full", its size is not bytes. */
#define IOMMUTOP_ENTER_FULL 2
/* A call that spans several functions (a map of the IOVA API, dma_iova_try_alloc to
 * dma_iova_sync): its identity is a session object both ends are passed, not a stack position. A
 * new session drops an open one of the same context (its end was not seen). */
#define IOMMUTOP_ENTER_SESSION 4
/* The identity a session's end passes when it cannot see the session (a kretprobe has no
 * arguments): the innermost open session of its operation. */
#define IOMMUTOP_ANY_SESSION ((struct iommutop_call){.at = 0})

/* Whether this CPU may unwind a call path now (at most one per iommutop_stack_interval_ns). A
 * timestamp costs a DMA API entry about 55 instructions and the clock tick (jiffies, inlined by
 * the JIT) three, so the clock is read only at the first call of each tick on this CPU: a CPU
 * samples at most once a tick (an interval under one, 4 ms at Debian's HZ=250, is a tick). */
static __always_inline int iommutop_stack_due(void)
{
	struct iommutop_stack_clock *clock;
	__u64 now, tick;
	__u32 zero = 0;

	if (!iommutop_stack_interval_ns)
		return 0;
	clock = bpf_map_lookup_elem(&iommutop_stack_clock, &zero);
	if (!clock)
		return 0;
	tick = bpf_jiffies64();
	if (tick == clock->asked_at_jiffies)
		return 0;
	clock->asked_at_jiffies = tick;
	now = bpf_ktime_get_ns();
	if (now - clock->sampled_ns < iommutop_stack_interval_ns)
		return 0;
	clock->sampled_ns = now;
	return 1;
}

/* Counts a call that was seen at only one end (its entry or its exit program was skipped):
 * count and bytes, no latency. Nothing for a twin or a call --pid/--cgroup left out. */
static __always_inline void iommutop_charge_untimed(const struct iommutop_dev_key *key, __u32 op,
						    __u64 bytes, __u32 frame_flags)
{
	struct iommutop_dev_key numbers;
	struct iommutop_dev_stats *stats;
	int created;

	if (frame_flags & (IOMMUTOP_FRAME_DUPLICATE | IOMMUTOP_FRAME_FILTERED))
		return;
	barrier_var(op);
	if (op >= IOMMUTOP_OP_COUNT)
		return;
	numbers = iommutop_key_numbers(key);
	stats = iommutop_stats_lookup_or_init(&numbers, &created);
	if (!stats)
		return;
	if (created)
		iommutop_record_name(key, iommutop_key_object(key));
	stats->ops[op].count += 1;
	stats->ops[op].bytes += bytes;
	if (frame_flags & IOMMUTOP_FRAME_FULL)
		stats->ops[IOMMUTOP_OP_IOTLB_FLUSH_FULL].count += 1;
}

/*
 * Rare paths, in functions of their own (ebpf/progs/track.bpf.c). They are global: the verifier
 * checks a global function once per program, with its arguments unknown, where an inlined copy
 * is checked again at every call site and in every turn of the loops that call it (the frame
 * searches of every entry and exit: with them inlined, each exit program cost the verifier some
 * 90,000 instructions). Global functions take only numbers before 5.12, hence the key's fields.
 */

/* iommutop_charge_untimed of a frame's key. */
int iommutop_count_untimed(__u64 key_id, __u32 key_kind, __u32 op, __u64 bytes, __u32 frame_flags);

/* Drops the frames at and above index of the stack of the context the program runs in
 * (task_context says which): their calls' exits were lost (see the top of this file). Their calls
 * are counted, untimed; the slot of the lowest is marked free (a start of 0). Returns how many. */
int iommutop_abandon_from(int task_context, __u32 index);

/* Whether a frame's call has returned, seen from a call entering at position call on the same
 * stack: the frame lies at or below it (see the top of this file). The comparisons are kept apart
 * (a fentry's position is its context pointer, which the verifier lets a program compare with
 * numbers, not compute with). */
static __always_inline int iommutop_call_returned(const struct iommutop_frame *frame,
						  struct iommutop_call call)
{
	__u64 at = frame->call, span_end = at + IOMMUTOP_STACK_SPAN;

	if (frame->start_ns == 0 || (frame->flags & IOMMUTOP_FRAME_SESSION))
		return 0;
	barrier_var(at);
	barrier_var(span_end);
	if (call.at < at)
		return 0;
	return call.at < span_end;
}

/* How far below its wrapper's position a twin sits at most: the wrapper's own stack frame and a
 * trampoline's. */
#define IOMMUTOP_TWIN_SPAN 1024ULL

/* Whether a call entering at position call is made right by the call of frame, its wrapper: the
 * frame lies just above it. A frame further up may be a call whose exit the kernel skipped, seen
 * from a deeper path: its operation's next call is a call of its own, not a twin. */
static __always_inline int iommutop_called_by(const struct iommutop_frame *frame,
					      struct iommutop_call call)
{
	__u64 at = frame->call, reach = at - IOMMUTOP_TWIN_SPAN;

	if (frame->start_ns == 0 || (frame->flags & IOMMUTOP_FRAME_SESSION))
		return 0;
	barrier_var(at);
	barrier_var(reach);
	if (call.at >= at)
		return 0;
	return call.at >= reach;
}

/* Before a call is pushed: drops the frames of calls that cannot still be in flight (the lowest
 * that returned, and all above it; a session with everything above it when a new one opens), or
 * every frame of a full stack. */
static __always_inline void iommutop_drop_stale(struct iommutop_inflight *inflight,
						struct iommutop_call call, __u32 flags,
						int task_context)
{
	__u32 depth = inflight->depth, i;
	struct iommutop_frame *frame;

	if (depth == 0)
		return;
	if (depth >= IOMMUTOP_MAX_NESTING) {
		iommutop_abandon_from(task_context, 0);
		return;
	}
	for (i = 0; i < IOMMUTOP_MAX_NESTING; i++) {
		if (i >= depth)
			break;
		frame = &inflight->frames[i & IOMMUTOP_FRAME_MASK];
		if (iommutop_call_returned(frame, call) ||
		    ((flags & IOMMUTOP_ENTER_SESSION) && (frame->flags & IOMMUTOP_FRAME_SESSION) &&
		     frame->start_ns != 0)) {
			iommutop_abandon_from(task_context, i);
			return;
		}
	}
}

/* Entry of a timed call. own_key is the call's own device (DMA API), or NULL to inherit. ctx is
 * the program's context, used to sample the call path of the device's own calls. */
static __always_inline void iommutop_enter(void *ctx, struct iommutop_call call, __u32 op,
					   const struct iommutop_dev_key *own_key, __u64 bytes,
					   __u32 flags)
{
	struct iommutop_frame *frame, *below;
	struct iommutop_inflight *inflight;
	struct iommutop_stack_ref ref;
	struct iommutop_dev_key key = {};
	/* A DMA API call's entry is normally the first of its context's stack: it has no call below
	 * to charge its run to and no stale frame to look for, and reads the clock once, at its
	 * end. Any other entry reads it first, so that the call below is charged the whole run. */
	__u64 now = own_key ? 0 : bpf_ktime_get_ns(), end;
	int task_context, left_out;
	__u32 depth, had_calls;

	inflight = iommutop_stack_here(ctx, 1, &ref);
	if (!inflight)
		return;
	task_context = ref.task_context;
	had_calls = inflight->depth != 0;
	/* A DMA API call nested in another (a wrapper's twin, a softirq mapping inside a map): the
	 * call below is charged this program's run from here, short of the stack lookup above. */
	if (had_calls && !now)
		now = bpf_ktime_get_ns();
	iommutop_drop_stale(inflight, call, flags, task_context);
	/* The inherited key and the filter's decision are read before the slot is taken: an
	 * interrupt arriving in between runs to completion and leaves the stack as it found it. A
	 * left-out frame's key is never used: no process row is made for it. */
	left_out = iommutop_left_out(inflight, task_context);
	if (own_key)
		key = *own_key;
	else if (!left_out)
		key = iommutop_key_of_owner(call.owner, inflight, task_context);
	/* Take the slot before filling it: an interrupt that probes a call while this program is
	 * still filling its frame must get the next slot, not this one. No atomic is needed (nor
	 * available before 5.12): the stack is only ever shared with interrupts on the same CPU,
	 * which nest, so one arriving between the load and the store runs its call to the end and
	 * leaves depth as it found it. The barrier keeps the compiler from sinking the store below
	 * the frame's fields. */
	depth = inflight->depth;
	if (depth >= IOMMUTOP_MAX_NESTING) {
		iommutop_health_inc(IOMMUTOP_HEALTH_NESTING_OVERFLOW);
		return;
	}
	inflight->depth = depth + 1;
	asm volatile("" ::: "memory");
	if (!had_calls)
		iommutop_stack_began(&ref);
	frame = &inflight->frames[depth & IOMMUTOP_FRAME_MASK];
	frame->call = call.at;
	frame->tag = call.tag;
	frame->key = key;
	frame->op = op;
	frame->bytes = bytes;
	frame->flags = flags & IOMMUTOP_ENTER_FULL ? IOMMUTOP_FRAME_FULL : 0;
	if (flags & IOMMUTOP_ENTER_SESSION)
		frame->flags |= IOMMUTOP_FRAME_SESSION;
	if (left_out)
		frame->flags |= IOMMUTOP_FRAME_FILTERED;
	if ((flags & IOMMUTOP_ENTER_TWIN) && depth > 0) {
		below = &inflight->frames[(depth - 1) & IOMMUTOP_FRAME_MASK];
		if (below->op == op && below->key.id == key.id && below->key.kind == key.kind &&
		    iommutop_called_by(below, call))
			frame->flags |= IOMMUTOP_FRAME_DUPLICATE;
	}
	frame->stack_id = -1;
	if (own_key && !(frame->flags & (IOMMUTOP_FRAME_DUPLICATE | IOMMUTOP_FRAME_FILTERED)) &&
	    iommutop_stack_due()) {
		frame->stack_id = bpf_get_stackid(ctx, &iommutop_stacks, 0);
		if (frame->stack_id < 0)
			iommutop_health_inc(IOMMUTOP_HEALTH_STACK_LOST);
	}
	frame->probe_ns = 0;
	frame->offcpu_at_start = inflight->offcpu_ns;
	/* The call starts when this program ends: its own run (a stack unwound included) is not the
	 * call's time, but it is inside the time of the call below it. */
	end = bpf_ktime_get_ns();
	if (depth > 0)
		inflight->frames[(depth - 1) & IOMMUTOP_FRAME_MASK].probe_ns += end - now;
	frame->start_ns = end;
}

/* iommutop_exit_sized: the frame's own bytes are kept. */
#define IOMMUTOP_KEEP_BYTES (~0ULL)

/* How an exit treats its call (iommutop_exit_as). */
enum iommutop_exit_mode {
	/* Counted and timed; a missing frame means the kernel skipped the entry program. */
	IOMMUTOP_EXIT_COUNT,
	/* The call did no work worth a count (dma_iova_try_alloc declining): popped, uncounted. */
	IOMMUTOP_EXIT_DISCARD,
	/* Counted and timed; a missing frame is a legitimate shape of the call, not a lost entry:
	 * dma_iova_sync of a range allocated long before (HMM maps page by page into one IOVA
	 * allocation), counted untimed without a health warning. */
	IOMMUTOP_EXIT_COUNT_MAY_BE_UNOPENED,
};

/* Charges a closed call: count, bytes (its frame's unless the exit knows them), failure, raw and
 * self time, a sampled call path. Nothing for a discarded call or a twin (counted by its
 * wrapper) or a call --pid/--cgroup left out. */
static __always_inline void iommutop_count_exit(__u32 op, int failed, __u64 bytes,
						const struct iommutop_frame *done, __u64 raw_ns,
						__u64 self_ns, __u64 offcpu_ns, int discard)
{
	struct iommutop_dev_stats *stats;
	struct iommutop_op_stats *op_stats;
	int created;

	if (discard || done->flags & (IOMMUTOP_FRAME_DUPLICATE | IOMMUTOP_FRAME_FILTERED) ||
	    op >= IOMMUTOP_OP_COUNT)
		return;
	/* The stats are created here, at the one lookup a call pays; a device key's id is the
	 * struct device itself, which names it on first sight. */
	stats = iommutop_stats_lookup_or_init(&done->key, &created);
	if (!stats)
		return;
	if (created)
		iommutop_record_name(&done->key, iommutop_key_object(&done->key));
	op_stats = &stats->ops[op];
	op_stats->count += 1;
	op_stats->bytes += bytes == IOMMUTOP_KEEP_BYTES ? done->bytes : bytes;
	if (failed)
		op_stats->failures += 1;
	iommutop_record_latency(op_stats, raw_ns, self_ns);
	if (offcpu_ns) {
		op_stats->offcpu_ns += offcpu_ns;
		op_stats->waited += 1;
	}
	if (done->flags & IOMMUTOP_FRAME_FULL)
		stats->ops[IOMMUTOP_OP_IOTLB_FLUSH_FULL].count += 1;
	if (done->stack_id >= 0)
		iommutop_record_stack(done, self_ns);
}

/*
 * Exit of a timed call: finds its frame (normally the top one; frames above it belong to calls
 * whose exit was lost, and are dropped), charges count, bytes and latency, pops. bytes replaces
 * what the entry recorded when the size is only known on return (IOMMUTOP_KEEP_BYTES keeps it).
 * A call whose entry was not seen is counted, untimed, on own_key (the device a DMA API exit
 * knows from its arguments), else on the call it is nested in.
 */
static __always_inline void iommutop_exit_as(void *ctx, struct iommutop_call call, __u32 op,
					     int failed, __u64 bytes,
					     const struct iommutop_dev_key *own_key,
					     enum iommutop_exit_mode mode)
{
	__u64 now = bpf_ktime_get_ns();
	struct iommutop_stack_ref ref;
	struct iommutop_inflight *inflight = iommutop_stack_here(ctx, 0, &ref);
	int task_context = ref.task_context;
	struct iommutop_frame *frame, done;
	__u64 raw_ns, self_ns, offcpu_ns;
	__u32 depth, i, index, found;

	if (!inflight)
		goto unseen_entry;
	depth = inflight->depth;
	if (depth > IOMMUTOP_MAX_NESTING)
		depth = IOMMUTOP_MAX_NESTING;
	/* The search only finds the frame; the call is closed after it, in one place for the
	 * verifier to check rather than one per turn of the loop. */
	found = 0;
	for (i = 0; i < IOMMUTOP_MAX_NESTING; i++) {
		if (i >= depth)
			break;
		frame = &inflight->frames[(depth - 1 - i) & IOMMUTOP_FRAME_MASK];
		if (frame->op != op || frame->start_ns == 0)
			continue;
		if (call.at == 0 ? !!(frame->flags & IOMMUTOP_FRAME_SESSION)
				 : frame->call == call.at) {
			found = depth - i;
			break;
		}
	}
	if (!found)
		goto unseen_entry;
	/* The call at this position before ours, whose exit was skipped, as was our entry. */
	if (inflight->frames[(found - 1) & IOMMUTOP_FRAME_MASK].tag != call.tag) {
		iommutop_abandon_from(task_context, found - 1);
		goto unseen_entry;
	}
	if (found < depth)
		iommutop_abandon_from(task_context, found);
	/* The call's frame is the top one now. The depth is read again rather than taken from the
	 * search, so that the verifier follows what comes below once, not once per turn of the
	 * loop that found it. */
	depth = inflight->depth;
	if (depth == 0 || depth > IOMMUTOP_MAX_NESTING)
		goto unseen_entry; /* never, after the search above: said for the verifier */
	index = (depth - 1) & IOMMUTOP_FRAME_MASK;
	frame = &inflight->frames[index];
	/* Copy the frame out before giving its slot back: an interrupt may reuse it. */
	done = *frame;
	frame->start_ns = 0;
	inflight->depth = index;
	raw_ns = now - done.start_ns;
	offcpu_ns = inflight->offcpu_ns - done.offcpu_at_start;
	if (offcpu_ns > raw_ns)
		offcpu_ns = raw_ns;
	self_ns = raw_ns > done.probe_ns + iommutop_dispatch_ns + offcpu_ns
		      ? raw_ns - done.probe_ns - iommutop_dispatch_ns - offcpu_ns
		      : 0;
	iommutop_count_exit(op, failed, bytes, &done, raw_ns, self_ns, offcpu_ns,
			    mode == IOMMUTOP_EXIT_DISCARD);
	/* Last: this program's run, and what ran nested in the call, are inside the time of the
	 * call below it. */
	if (index > 0)
		inflight->frames[(index - 1) & IOMMUTOP_FRAME_MASK].probe_ns +=
		    done.probe_ns + iommutop_nested_dispatch_ns + (bpf_ktime_get_ns() - now);
	else
		iommutop_stack_emptied(&ref);
	return;
unseen_entry:
	if (mode == IOMMUTOP_EXIT_DISCARD || iommutop_left_out(inflight, task_context))
		return;
	if (mode == IOMMUTOP_EXIT_COUNT)
		iommutop_health_inc(IOMMUTOP_HEALTH_EXIT_WITHOUT_ENTRY);
	{
		struct iommutop_dev_key key =
		    own_key ? *own_key : iommutop_key_of_owner(call.owner, inflight, task_context);

		iommutop_charge_untimed(&key, op, bytes == IOMMUTOP_KEEP_BYTES ? 0 : bytes, 0);
	}
}

static __always_inline void iommutop_exit_keyed(void *ctx, struct iommutop_call call, __u32 op,
						int failed, __u64 bytes,
						const struct iommutop_dev_key *own_key)
{
	iommutop_exit_as(ctx, call, op, failed, bytes, own_key, IOMMUTOP_EXIT_COUNT);
}

static __always_inline void iommutop_exit_sized(void *ctx, struct iommutop_call call, __u32 op,
						int failed, __u64 bytes)
{
	iommutop_exit_keyed(ctx, call, op, failed, bytes, NULL);
}

static __always_inline void iommutop_exit(void *ctx, struct iommutop_call call, __u32 op,
					  int failed)
{
	iommutop_exit_keyed(ctx, call, op, failed, IOMMUTOP_KEEP_BYTES, NULL);
}

#endif
