/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Floor 2, stacks and frames.
 *
 * Where each context keeps its calls in flight: a task's in the slot of its thread id or, while
 * another task holds that slot, in a hash by thread id (every task's in the hash on 5.10), an
 * interrupt's per CPU; and how long a task with calls in flight was switched out
 * (docs/tracker.md).
 */
#ifndef IOMMUTOP_STACKS_BPF_H
#define IOMMUTOP_STACKS_BPF_H

#include "context.bpf.h"
#include "state.bpf.h"

/* Thread ids are below 2^22 (PID_MAX_LIMIT): the stacks of idle CPUs are keyed above them. */
#define IOMMUTOP_IDLE_CONTEXT 0x80000000U

/*
 * Calls in flight per task (or per idle CPU) keyed by thread id, in an LRU hash (preallocated:
 * it never fails for want of memory or because another program holds a lock on this CPU):
 * every task's in the hashed build (5.10), else only those whose slot another task holds. Least
 * recently used tasks are forgotten, so no entry outlives its use for long.
 */
#ifdef IOMMUTOP_TASK_STACKS_HASHED
#define IOMMUTOP_HASHED_TASKS IOMMUTOP_MAX_TASKS
#else
#define IOMMUTOP_HASHED_TASKS IOMMUTOP_TASK_SLOTS
#endif
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, IOMMUTOP_HASHED_TASKS);
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

#ifndef IOMMUTOP_TASK_STACKS_HASHED
/*
 * Calls in flight per task: in the slot of its thread id (IOMMUTOP_TASK_SLOTS, indexed by the id
 * masked), found with a few loads, which the first task of that index to enter a probed call
 * claims and gives back when its last call returns. A task whose slot another task holds keeps
 * its calls in iommutop_inflight instead (a hash lookup, many more instructions than the slot's
 * few loads), until they have all returned; in_hash counts such tasks per index, so that
 * the others look in the hash only when one may have put calls there.
 *
 * Task-local storage held these before: on PREEMPT_RT a program that creates a task's storage is
 * refused while another task holding the storage's per-CPU lock is preempted on that CPU (6.12),
 * and the calls were lost (task_map_full) where the hash, preallocated, takes them.
 */
/* struct iommutop_task_slot: abi.h. */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IOMMUTOP_TASK_SLOTS);
	__type(key, __u32);
	__type(value, struct iommutop_task_slot);
} iommutop_task_slots SEC(".maps") __weak;

/* Thread ids are masked with this to index the slots. Set by user space before load: tests set
 * 0, which gives every task one slot, so that all but one at a time use the hash. */
const volatile __u32 iommutop_task_slot_mask __weak = IOMMUTOP_TASK_SLOTS - 1;
#endif

/* A task's calls in flight in iommutop_inflight (NULL while it has none there), created when
 * create is set. Idle tasks (thread id 0, one a CPU) are keyed by their CPU. */
static __always_inline struct iommutop_inflight *iommutop_hashed_stack(__u32 thread, int create)
{
	__u32 key = thread ? thread : IOMMUTOP_IDLE_CONTEXT | bpf_get_smp_processor_id();
	__u32 zero_index = 0;
	struct iommutop_inflight *inflight = bpf_map_lookup_elem(&iommutop_inflight, &key);
	void *zero;
	int err;

	if (inflight || !create)
		return inflight;
	zero = bpf_map_lookup_elem(&iommutop_zero, &zero_index);
	if (!zero)
		return NULL;
	err = iommutop_insert(&iommutop_inflight, &key, zero);
	if (err && err != IOMMUTOP_EEXIST /* an interrupt created it first */) {
		iommutop_health_inc(IOMMUTOP_HEALTH_TASK_MAP_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(&iommutop_inflight, &key);
}

/* Where a context's calls in flight are. */
enum iommutop_stack_home {
	IOMMUTOP_STACK_OF_CPU,	/* interrupt context: the CPU's */
	IOMMUTOP_STACK_OF_SLOT, /* task context: the slot of the task's thread id */
	IOMMUTOP_STACK_OF_HASH, /* task context: the task's entry in iommutop_inflight */
};

struct iommutop_stack_ref {
	int task_context;
	enum iommutop_stack_home home;
	__u32 thread; /* a task's thread id, where home is a task's */
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

/* The current task's stack (NULL while it has none), created when create is set; ref says where.
 * task is the current task (the slots' build; the hashed one finds it by its thread id). */
static __always_inline struct iommutop_inflight *
iommutop_task_stack(int create, struct iommutop_stack_ref *ref, struct task_struct *task)
{
#ifdef IOMMUTOP_TASK_STACKS_HASHED
	ref->home = IOMMUTOP_STACK_OF_HASH;
	ref->thread = (__u32)bpf_get_current_pid_tgid();
	return iommutop_hashed_stack(ref->thread, create);
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
	struct iommutop_inflight *hashed;

	if (!slot)
		return NULL; /* never: the index is masked */
	ref->slot = slot;
	ref->thread = thread;
	ref->home = IOMMUTOP_STACK_OF_SLOT;
	if (thread && slot->owner == thread)
		return &slot->stack;
	ref->home = IOMMUTOP_STACK_OF_HASH;
	/* Calls already in the hash stay there until they have all returned. */
	if (slot->in_hash) {
		hashed = iommutop_hashed_stack(thread, 0);
		if (hashed && hashed->depth)
			return hashed;
	}
	if (!create)
		return NULL;
	if (thread && !slot->owner && !__sync_val_compare_and_swap(&slot->owner, 0, thread)) {
		ref->home = IOMMUTOP_STACK_OF_SLOT;
		return &slot->stack;
	}
	return iommutop_hashed_stack(thread, 1);
#endif
}

/* The calls in flight of a task that need not be the current one (NULL when it has none), where
 * the scheduler's switch can find them without locking. */
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
	if (slot->owner == thread)
		return &slot->stack;
	return slot->in_hash ? bpf_map_lookup_elem(&iommutop_inflight, &thread) : NULL;
#endif
}

/*
 * Waiting is not cost. A task switched out while it has calls in flight (preempted, asleep on a
 * lock PREEMPT_RT turns into a mutex, waiting for an invalidation queue) is waiting: from the
 * scheduler's switch, the stack keeps how long in all (offcpu_ns), and each frame what it was
 * when its call began, so that an exit takes the difference out of its call's time and reports
 * it apart (the op's offcpu_ns and waited). Interrupt context never switches out.
 */
static __always_inline void iommutop_switched_out(struct task_struct *prev, __u64 now)
{
	struct iommutop_inflight *stack = iommutop_stack_of_task(prev);

	if (stack && stack->depth)
		stack->switched_out_at = now;
}

static __always_inline void iommutop_switched_in(struct task_struct *next, __u64 now)
{
	struct iommutop_inflight *stack = iommutop_stack_of_task(next);

	if (!stack || !stack->switched_out_at)
		return;
	if (stack->depth)
		stack->offcpu_ns += now - stack->switched_out_at;
	stack->switched_out_at = 0;
}

#ifdef IOMMUTOP_SELFTEST
/* A test run's step says whether the task is switched out inside the entry program it runs
 * (ebpf/selftest/tracker.bpf.c): out for as long as a spin of the program's own takes, in the
 * middle of the program's run. */
__u32 iommutop_selftest_switched_inside SEC(".bss");

static long iommutop_selftest_spin(__u64 index, void *ctx)
{
	return 0;
}

static __always_inline void iommutop_selftest_switch_inside(void)
{
	struct task_struct *task;

	if (!iommutop_selftest_switched_inside)
		return;
	task = bpf_get_current_task_btf();
	iommutop_switched_out(task, bpf_ktime_get_ns());
	bpf_loop(1 << 22, iommutop_selftest_spin, NULL, 0);
	iommutop_switched_in(task, bpf_ktime_get_ns());
}
#endif

/* The calls in flight of the task the CPU runs now (NULL when it has none). */
static __always_inline struct iommutop_inflight *iommutop_current_task_stack(void)
{
#ifdef IOMMUTOP_TASK_STACKS_HASHED
	__u32 thread = (__u32)bpf_get_current_pid_tgid();

	return thread ? bpf_map_lookup_elem(&iommutop_inflight, &thread) : NULL;
#else
	return iommutop_stack_of_task(bpf_get_current_task_btf());
#endif
}

/*
 * An interrupt's outermost probed call ended after ns: an interrupt runs in the task it landed
 * in, and its probed work is counted as the interrupt's own calls; inside a task's call in flight,
 * that time is no part of the task call's work, and is taken out of its own time as probes' is.
 * What of the interrupt no probe saw (its entry, its handler around the probed calls) stays in the
 * task call's time.
 */
static __always_inline void iommutop_interrupt_ended(__u64 ns)
{
	struct iommutop_inflight *stack = iommutop_current_task_stack();
	struct iommutop_frame *top;
	__u32 depth;

	if (!stack)
		return;
	depth = stack->depth;
	if (depth == 0 || depth > IOMMUTOP_MAX_NESTING)
		return;
	top = &stack->frames[(depth - 1) & IOMMUTOP_FRAME_MASK];
	if (iommutop_frame_open(top))
		top->probe_ns += ns;
}

static __always_inline void iommutop_switched(struct task_struct *prev, struct task_struct *next)
{
	__u64 now = bpf_ktime_get_ns();

	iommutop_switched_out(prev, now);
	iommutop_switched_in(next, now);
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

#ifdef IOMMUTOP_SELFTEST
/* Which context a step of ebpf/selftest/tracker.bpf.c runs as, which it sets before each: a test
 * run's context is a copy on the heap, on no stack. */
__u32 iommutop_selftest_task_context SEC(".bss");
#define IOMMUTOP_TASK_CONTEXT(ctx, task) (iommutop_selftest_task_context != 0)
#else
#define IOMMUTOP_TASK_CONTEXT(ctx, task) iommutop_ctx_on_stack(ctx, (unsigned long)(task)->stack)
#endif

/* The stack of the context the program runs in, a task's created when create is set; NULL when
 * it has none. ref says which kind of context it is and where the stack lives.
 *
 * An interrupt that arrives in user mode runs on the interrupted task's kernel stack (x86-64
 * switches to the interrupt stack only from kernel mode), and so do the softirqs it runs on its
 * way out: by where it runs it would be the task's, and a frame of its left there (its exit
 * skipped) would sit under every later call of the task, lending them its device and its
 * filter's decision. Its calls are the CPU's, as every interrupt's: a task whose stack holds no
 * call in flight is asked whether it runs an interrupt (the preempt count). A task that has calls
 * in flight is in kernel mode, where interrupts run on their own stack. */
static __always_inline struct iommutop_inflight *iommutop_stack_here(const void *ctx, int create,
								     struct iommutop_stack_ref *ref)
{
	struct iommutop_inflight *stack;
	__u32 zero_index = 0;
#ifdef IOMMUTOP_TASK_STACKS_HASHED
	struct task_struct *task = NULL;

	ref->task_context = iommutop_in_task_context(ctx);
#else
	struct task_struct *task = bpf_get_current_task_btf();

	ref->task_context = IOMMUTOP_TASK_CONTEXT(ctx, task);
	ref->slot = NULL;
#endif
	ref->home = IOMMUTOP_STACK_OF_CPU;
	ref->thread = 0;
	if (!ref->task_context)
		return bpf_map_lookup_elem(&iommutop_irq_inflight, &zero_index);
	stack = iommutop_task_stack(0, ref, task);
	if (stack && stack->depth)
		return stack;
	if (iommutop_in_interrupt()) {
		ref->task_context = 0;
		ref->home = IOMMUTOP_STACK_OF_CPU;
		ref->thread = 0;
#ifndef IOMMUTOP_TASK_STACKS_HASHED
		ref->slot = NULL;
#endif
		return bpf_map_lookup_elem(&iommutop_irq_inflight, &zero_index);
	}
	if (stack || !create)
		return stack;
	return iommutop_task_stack(1, ref, task);
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

/* Where a stack is, as one number (global functions take no pointers before 5.12): its kind of
 * context, its home and, a task's, its thread id. */
static __always_inline __u64 iommutop_stack_place(const struct iommutop_stack_ref *ref)
{
	return (__u64)ref->thread << 32 | (__u64)ref->home << 1 | (ref->task_context != 0);
}

/* The stack at a place iommutop_stack_place gave (NULL when it is gone), and its ref. */
static __always_inline struct iommutop_inflight *iommutop_stack_at(__u64 place,
								   struct iommutop_stack_ref *ref)
{
	__u32 zero_index = 0;

	ref->task_context = place & 1;
	ref->home = (place >> 1) & 3;
	ref->thread = place >> 32;
#ifndef IOMMUTOP_TASK_STACKS_HASHED
	ref->slot = NULL;
#endif
	if (ref->home == IOMMUTOP_STACK_OF_CPU)
		return bpf_map_lookup_elem(&iommutop_irq_inflight, &zero_index);
#ifndef IOMMUTOP_TASK_STACKS_HASHED
	{
		__u32 index = ref->thread & iommutop_task_slot_mask;

		ref->slot = bpf_map_lookup_elem(&iommutop_task_slots, &index);
		if (!ref->slot)
			return NULL; /* never: the index is masked */
		if (ref->home == IOMMUTOP_STACK_OF_SLOT)
			return &ref->slot->stack;
	}
#endif
	return iommutop_hashed_stack(ref->thread, 0);
}

/* A call was pushed on a stack that was empty before this program: a task's hashed entry now
 * holds calls, which the other tasks of its slot's index must know to look for. */
static __always_inline void iommutop_stack_began(const struct iommutop_stack_ref *ref)
{
#ifndef IOMMUTOP_TASK_STACKS_HASHED
	if (ref->home == IOMMUTOP_STACK_OF_HASH && ref->slot)
		__sync_fetch_and_add(&ref->slot->in_hash, 1);
#endif
}

/* The last call of a stack returned: a slot goes back to the index's other tasks, a hashed entry
 * no longer needs looking for. The program touches the stack no more after this. */
static __always_inline void iommutop_stack_emptied(const struct iommutop_stack_ref *ref)
{
#ifndef IOMMUTOP_TASK_STACKS_HASHED
	if (!ref->slot)
		return;
	if (ref->home == IOMMUTOP_STACK_OF_SLOT)
		__sync_lock_test_and_set(&ref->slot->owner, 0);
	else if (ref->home == IOMMUTOP_STACK_OF_HASH)
		__sync_fetch_and_sub(&ref->slot->in_hash, 1);
#endif
}

#endif
