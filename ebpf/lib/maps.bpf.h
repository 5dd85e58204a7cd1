/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The maps every probe family shares. Each family is compiled on its own and the objects are
 * linked into one (bpftool gen object); the maps are __weak so that the linker keeps one copy,
 * which is what lets work nested in a DMA map be charged to the device of that map.
 */
#ifndef IOMMUTOP_MAPS_BPF_H
#define IOMMUTOP_MAPS_BPF_H

#include <bpf/bpf_helpers.h>
#include "iommutop/abi.h"

/* Cumulative counters and histograms per key, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, IOMMUTOP_MAX_DEVICES);
	__type(key, struct iommutop_dev_key);
	__type(value, struct iommutop_dev_stats);
} iommutop_stats SEC(".maps") __weak;

/* Name of each key, written once when the key is first seen. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOMMUTOP_MAX_DEVICES);
	__type(key, struct iommutop_dev_key);
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

/* A zeroed value to initialise new keys (of this map and of the in-flight stacks) from: too
 * large for the BPF stack. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct iommutop_dev_stats);
} iommutop_zero SEC(".maps") __weak;

/* Counters of the probes' own trouble, indexed by enum iommutop_health. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, IOMMUTOP_HEALTH_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} iommutop_health SEC(".maps") __weak;

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

static __always_inline void iommutop_health_add(__u32 what, __u64 count)
{
	__u64 *n = bpf_map_lookup_elem(&iommutop_health, &what);

	if (n)
		*n += count;
}

static __always_inline void iommutop_health_inc(__u32 what)
{
	iommutop_health_add(what, 1);
}

/* The stats of a key, created (zeroed) on first use; *created tells the caller to record a name. */
static __always_inline struct iommutop_dev_stats *
iommutop_stats_lookup_or_init(const struct iommutop_dev_key *key, int *created)
{
	struct iommutop_dev_stats *stats;
	__u32 zero_index = 0;
	void *zero;
	long err;

	*created = 0;
	stats = bpf_map_lookup_elem(&iommutop_stats, key);
	if (stats)
		return stats;
	zero = bpf_map_lookup_elem(&iommutop_zero, &zero_index);
	if (!zero)
		return NULL;
	err = bpf_map_update_elem(&iommutop_stats, key, zero, BPF_NOEXIST);
	if (err && err != -17 /* EEXIST: another CPU won the race */) {
		iommutop_health_inc(IOMMUTOP_HEALTH_DEVICE_MAP_FULL);
		return NULL;
	}
	*created = !err;
	return bpf_map_lookup_elem(&iommutop_stats, key);
}

#endif
