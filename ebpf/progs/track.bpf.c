// SPDX-License-Identifier: GPL-2.0
/*
 * The compilation unit that holds the library's global functions (IOMMUTOP_GLOBAL_FUNCTIONS,
 * ebpf/lib/maps.bpf.h): the tracker's rare paths and the end of every exit, which the verifier
 * checks once per program instead of once per place, loop turn and stack map an inlined copy
 * would sit in. And the scheduler's switch, which keeps how long a task with calls in flight
 * waited.
 */
#define IOMMUTOP_GLOBAL_FUNCTIONS
#include "common.bpf.h"

/* sched_switch (bool preempt, struct task_struct *prev, struct task_struct *next, ...): see
 * iommutop_switched. */
IOMMUTOP_SEC("tp_btf", track__sched_switch__tp)
int BPF_PROG(track__sched_switch__tp, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	iommutop_switched(prev, next);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
