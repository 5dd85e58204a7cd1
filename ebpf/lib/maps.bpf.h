/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Floor 1, maps and counters (docs/tracker.md, "The library's floors").
 *
 * The maps every probe family shares. Each family is compiled on its own and the objects are
 * linked into one (bpftool gen object); the maps are __weak so that the linker keeps one copy,
 * which is what lets work nested in a DMA map be charged to the device of that map.
 */
#ifndef IOMMUTOP_MAPS_BPF_H
#define IOMMUTOP_MAPS_BPF_H

#include <bpf/bpf_helpers.h>
#include "iommutop/abi.h"

/*
 * Cumulative counters and histograms per key, per CPU, in rows of a per-CPU array: a program finds
 * its key's row with a few array loads, where a per-CPU hash keyed by the key would hash the key
 * and compare it on every call (more instructions than the rest of a DMA exit's work).
 *
 * iommutop_rows says which row is a key's: written when the key is first seen, and what user
 * space reads. iommutop_row_hints, indexed by a hash of the key, holds the row of a key looked up
 * there before; iommutop_row_keys (row -> key) confirms it, so a hint that another key overwrote
 * sends the lookup to iommutop_rows, never to the wrong row. A key includes its generation (abi.h):
 * a rebound device, or a new object at a freed one's address, takes a row of its own.
 *
 * Rows are given back by user space (loader/src/maps/rows.rs) once their key can count no more (its
 * device gone or bound elsewhere, its process exited) and its last counts were read: it removes
 * the key from iommutop_rows and iommutop_row_keys, zeroes the row a scrape later and puts it in
 * iommutop_free_rows, which a new key takes from before it takes a row never used.
 * User space sizes iommutop_stats for the machine (capacity.rs); a key beyond it is counted as
 * IOMMUTOP_HEALTH_DEVICE_MAP_FULL.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, IOMMUTOP_MAX_DEVICES);
	__type(key, __u32);
	__type(value, struct iommutop_dev_stats);
} iommutop_stats SEC(".maps") __weak;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOMMUTOP_MAX_DEVICES);
	__type(key, struct iommutop_dev_key);
	__type(value, __u32);
} iommutop_rows SEC(".maps") __weak;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IOMMUTOP_MAX_DEVICES);
	__type(key, __u32);
	__type(value, struct iommutop_row_key);
} iommutop_row_keys SEC(".maps") __weak;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << IOMMUTOP_ROW_HINT_BITS);
	__type(key, __u32);
	__type(value, __u32);
} iommutop_row_hints SEC(".maps") __weak;

/* Rows given back by user space, taken again before any never used. */
struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, IOMMUTOP_MAX_DEVICES);
	__type(value, __u32);
} iommutop_free_rows SEC(".maps") __weak;

/* How many rows were taken (the next to take; in the hashed build, only a hint of it). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} iommutop_row_count SEC(".maps") __weak;

#ifdef IOMMUTOP_TASK_STACKS_HASHED
/* Rows taken (row -> row), for kernels without BPF atomics that return a value (before 5.12):
 * inserting a row that is there already fails, so two CPUs never take the same one. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOMMUTOP_MAX_DEVICES);
	__type(key, __u32);
	__type(value, __u32);
} iommutop_row_claims SEC(".maps") __weak;
#endif

/* Name of each row's key (and a device's driver), written when the row is taken. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, IOMMUTOP_MAX_DEVICES);
	__type(key, __u32);
	__type(value, struct iommutop_dev_name);
} iommutop_names SEC(".maps") __weak;

/* tgid -> the key its (or its children's) IOMMU work outside the DMA API is charged to. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOMMUTOP_MAX_OWNERS);
	__type(key, __u32);
	__type(value, struct iommutop_dev_key);
} iommutop_owners SEC(".maps") __weak;

/* Processes that have an unattributed row of their own (tgid -> unused). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOMMUTOP_MAX_PROCESSES);
	__type(key, __u32);
	__type(value, __u32);
} iommutop_processes SEC(".maps") __weak;

/* Counters of the probes' own trouble, indexed by enum iommutop_health. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, IOMMUTOP_HEALTH_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} iommutop_health SEC(".maps") __weak;

/* Per operation, the calls the tracker did not see whole (abi.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, IOMMUTOP_OP_COUNT);
	__type(key, __u32);
	__type(value, struct iommutop_op_health);
} iommutop_op_health SEC(".maps") __weak;

/* Call paths of sampled DMA API calls (see IOMMUTOP_STACK_DEPTH in abi.h). */
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, IOMMUTOP_MAX_STACKS);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, IOMMUTOP_STACK_DEPTH * sizeof(__u64));
} iommutop_stacks SEC(".maps") __weak;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, IOMMUTOP_MAX_STACKS);
	__type(key, struct iommutop_stack_key);
	__type(value, struct iommutop_stack_value);
} iommutop_stack_samples SEC(".maps") __weak;

/* Errors iommutop_insert returns. */
#define IOMMUTOP_EBUSY (-16)  /* the map's bucket lock is held on this CPU */
#define IOMMUTOP_EEXIST (-17) /* the key is there already */

/*
 * Inserts key with value unless the key is there: 0, or a negative error. An int: before 6.4 the
 * kernel's map operations returned int, and the verifier has a program call them directly, so
 * the upper half of the 64-bit value the helper returns is zero there and -17 reads as
 * 4294967279. Compared as a long, a lost race for a new key's row (EEXIST) was taken for a
 * failure on 5.10 and 6.1, and the event was dropped as device_map_full.
 */
static __always_inline int iommutop_insert(void *map, const void *key, const void *value)
{
	return (int)bpf_map_update_elem(map, key, value, BPF_NOEXIST);
}

/*
 * Adds to a counter that programs nested on one CPU share (a per-CPU map's value): one instruction
 * that an interrupt cannot split. A load, an add and a store can be: an interrupt that lands
 * between the load and the store, and counts on the same counter, has its count overwritten. The
 * value is hidden from the compiler, which turns an atomic add of a known 0 into an atomic or, an
 * instruction kernels before 5.12 refuse.
 */
#define IOMMUTOP_ADD(counter, value)                                                               \
	({                                                                                         \
		__u64 iommutop_added = (value);                                                    \
		barrier_var(iommutop_added);                                                       \
		__sync_fetch_and_add(&(counter), iommutop_added);                                  \
	})

static __always_inline void iommutop_health_add(__u32 what, __u64 count)
{
	__u64 *n = bpf_map_lookup_elem(&iommutop_health, &what);

	if (n)
		IOMMUTOP_ADD(*n, count);
}

/* Which of an operation's figures in iommutop_op_health (its field's offset in 8-byte words). */
enum iommutop_op_health_field {
	IOMMUTOP_UNSEEN_ENTRY = 0,
	IOMMUTOP_UNSEEN_EXIT = 1,
	IOMMUTOP_UNDERSTUDY_ENTRY = 2,
	IOMMUTOP_UNDERSTUDY_EXIT = 3,
	IOMMUTOP_UNPUSHED = 4,
};

static __always_inline void iommutop_op_health_add(__u32 op, enum iommutop_op_health_field field,
						   __u64 count)
{
	__u64 *figures = bpf_map_lookup_elem(&iommutop_op_health, &op);

	if (figures && field <= IOMMUTOP_UNPUSHED)
		IOMMUTOP_ADD(figures[field], count);
}

static __always_inline void iommutop_health_inc(__u32 what)
{
	iommutop_health_add(what, 1);
}

/* A key whose id the program may compute with. The verifier refuses arithmetic on a BTF-typed
 * pointer (an fentry or tp_btf argument: a struct device, a gendisk, a net_device); a helper that
 * copies the id returns a number, as what a program reads back from a map is (a frame's key
 * already is). A per-CPU scratch value did this before, and an interrupt landing between its
 * write and its read put its own key there: the event went to another device's row. */
static __always_inline struct iommutop_dev_key
iommutop_key_numbers(const struct iommutop_dev_key *key)
{
	struct iommutop_dev_key numbers = {.kind = key->kind, .generation = key->generation};

	bpf_probe_read_kernel(&numbers.id, sizeof(numbers.id), &key->id);
	return numbers;
}

/* Takes a row for a key seen for the first time: the key's row, or -1 when the rows (or
 * iommutop_stats, sized for the machine) are all taken. Two CPUs that take rows for the same key at
 * once both get the one iommutop_rows kept. A global function (see IOMMUTOP_GLOBAL_FUNCTIONS,
 * below): the verifier checks this rare path once per program, not at every place that counts.
 * Global functions take only numbers before 5.12: the key's kind and generation share one. */
int iommutop_take_row(__u64 key_id, __u64 key_kind_generation);

/* A key's kind and generation as one number, for the global functions. */
static __always_inline __u64 iommutop_kind_generation(const struct iommutop_dev_key *key)
{
	return (__u64)key->generation << 32 | key->kind;
}

/* What iommutop_take_row returns when the key's row could not be written now: the map's bucket
 * busy on this CPU (an interrupt that landed while this CPU updated it). */
#define IOMMUTOP_ROW_BUSY (-2)

/* Which bucket of iommutop_row_hints a key's row is remembered in (Fibonacci hashing). */
static __always_inline __u32 iommutop_row_hint_of(const struct iommutop_dev_key *key)
{
	return (__u32)(((key->id ^ iommutop_kind_generation(key)) * 0x9e3779b97f4a7c15ULL) >>
		       (64 - IOMMUTOP_ROW_HINT_BITS));
}

/* The stats of a key, created (zeroed) on first use; *new_row, the row taken then (else -1), tells
 * the caller to record the key's name there. The key's id must be a number: a frame's key, or one
 * passed through iommutop_key_numbers. */
static __always_inline struct iommutop_dev_stats *
iommutop_stats_lookup_or_init(const struct iommutop_dev_key *key, int *new_row)
{
	__u32 hint_index = iommutop_row_hint_of(key), row, *hint, *known;
	struct iommutop_row_key *row_key;
	int taken;

	*new_row = -1;
	/* No hint only where user space made fewer (IOMMUTOP_ROW_HINTS: tests). */
	hint = bpf_map_lookup_elem(&iommutop_row_hints, &hint_index);
	if (hint) {
		row = *hint;
		row_key = bpf_map_lookup_elem(&iommutop_row_keys, &row);
		if (row_key && row_key->taken && row_key->id == key->id &&
		    row_key->kind == key->kind && row_key->generation == key->generation)
			return bpf_map_lookup_elem(&iommutop_stats, &row);
	}
	known = bpf_map_lookup_elem(&iommutop_rows, key);
	if (known) {
		row = *known;
	} else {
		taken = iommutop_take_row(key->id, iommutop_kind_generation(key));
		if (taken == IOMMUTOP_ROW_BUSY) {
			iommutop_health_inc(IOMMUTOP_HEALTH_ROW_BUSY);
			return NULL;
		}
		if (taken < 0) {
			iommutop_health_inc(IOMMUTOP_HEALTH_DEVICE_MAP_FULL);
			return NULL;
		}
		row = (__u32)taken;
		*new_row = taken;
	}
	if (hint)
		*hint = row;
	return bpf_map_lookup_elem(&iommutop_stats, &row);
}

/*
 * The library's global functions are defined in the one compilation unit that defines
 * IOMMUTOP_GLOBAL_FUNCTIONS before it includes the library (ebpf/progs/track.bpf.c); every other
 * family declares them only, and the linker (bpftool gen object) gives it that unit's copy.
 */
#ifdef IOMMUTOP_GLOBAL_FUNCTIONS
/* How many rows the hashed build tries, from the count it read, to take one: every row there
 * can be. The count it read can be far behind: a CPU stalled between reading it and claiming (a
 * vCPU descheduled by its host) while others took rows for a dozen keys, and a fixed number of
 * tries could run out of rows that exist. (The device_map_full drops 5.10 showed were not this
 * but the misread EEXIST that iommutop_insert explains.) */
#define IOMMUTOP_ROW_TRIES IOMMUTOP_MAX_DEVICES

/* Whether row is one of iommutop_stats' (sized for the machine by user space). */
static __always_inline int iommutop_row_exists(__u32 row)
{
	return bpf_map_lookup_elem(&iommutop_stats, &row) != NULL;
}

__noinline int iommutop_take_row(__u64 key_id, __u64 key_kind_generation)
{
	struct iommutop_dev_key key = {
	    .id = key_id,
	    .kind = (__u32)key_kind_generation,
	    .generation = (__u32)(key_kind_generation >> 32),
	};
	struct iommutop_row_key *row_key;
	__u32 zero = 0, row, *count, *kept;
	int err;

	/* A row given back is this key's alone once popped: no count or claim to agree on. */
	if (!bpf_map_pop_elem(&iommutop_free_rows, &row) && iommutop_row_exists(row))
		goto claimed;
	count = bpf_map_lookup_elem(&iommutop_row_count, &zero);
	/* Once every row is taken the count stays put: a key that finds no row counts as
	 * device_map_full at each of its events, and must not push the count round to 0. */
	if (!count || !iommutop_row_exists(*count))
		return -1;
#ifdef IOMMUTOP_TASK_STACKS_HASHED
	{
		__u32 first = *count, i;

		for (i = 0; i < IOMMUTOP_ROW_TRIES; i++) {
			row = first + i;
			if (!iommutop_row_exists(row))
				return -1;
			if (!iommutop_insert(&iommutop_row_claims, &row, &row))
				break;
		}
		if (i == IOMMUTOP_ROW_TRIES)
			return -1;
		/* Never back: another CPU may have counted further meanwhile. */
		if (*count < row + 1)
			*count = row + 1;
	}
#else
	row = __sync_fetch_and_add(count, 1);
	if (!iommutop_row_exists(row))
		return -1; /* another CPU took the last row first */
#endif
claimed:
	row_key = bpf_map_lookup_elem(&iommutop_row_keys, &row);
	if (!row_key)
		return -1;
	row_key->id = key.id;
	row_key->kind = key.kind;
	row_key->generation = key.generation;
	row_key->taken = 1;
	err = iommutop_insert(&iommutop_rows, &key, &row);
	if (!err)
		return (int)row;
	/* Not the key's after all: free for the next new key, not lost for the run. */
	row_key->taken = 0;
	bpf_map_push_elem(&iommutop_free_rows, &row, 0);
	/* Another CPU took a row for the key first. */
	if (err == IOMMUTOP_EEXIST) {
		kept = bpf_map_lookup_elem(&iommutop_rows, &key);
		return kept ? (int)*kept : -1;
	}
	/* Held by what this program interrupted: the key's next event takes a row. */
	if (err == IOMMUTOP_EBUSY)
		return IOMMUTOP_ROW_BUSY;
	return -1;
}
#endif

#endif
