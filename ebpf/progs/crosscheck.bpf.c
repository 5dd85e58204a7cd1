// SPDX-License-Identifier: GPL-2.0
/*
 * A second opinion from the kernel (record --cross-check, diagnose): its own DMA and IOMMU trace
 * events, counted per device where they name one (abi.h, enum iommutop_kernel_event), by
 * programs that share nothing with the tracker: no stack of calls in flight, no statistics rows,
 * one per-CPU counter added per event. Where the probes and these counts agree, the probes' counts
 * hold on that machine; the report says where they do not, and what the kernel lacks (the dma:
 * events are 6.12's; 5.10 and 6.1 have none).
 *   dma:dma_map_page (6.12-6.17) and dma:dma_map_phys (6.18+): (struct device *, phys_addr_t,
 *     dma_addr_t, size_t, ...), and their unmaps (struct device *, dma_addr_t, size_t, ...)
 *   dma:dma_map_sg, dma:dma_map_sg_err, dma:dma_unmap_sg: (struct device *, ...); every
 *     scatter-gather map, dma_map_sgtable's too
 *   dma:dma_map_resource, dma:dma_unmap_resource (6.12-6.17): (struct device *, ...)
 *   iommu:map (iova, paddr, size), iommu:unmap (iova, size, unmapped_size): no device
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "iommutop/abi.h"

/* Per key (a struct device, or 0 for the events that name none), each event's count. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, IOMMUTOP_MAX_EVENT_DEVICES);
	__type(key, __u64);
	__type(value, struct iommutop_kernel_events);
} iommutop_kernel_events SEC(".maps");

/* The name of each device counted, written at its first event (dev_name(): a PCI address). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IOMMUTOP_MAX_EVENT_DEVICES);
	__type(key, __u64);
	__type(value, struct iommutop_dev_name);
} iommutop_kernel_event_names SEC(".maps");

/* Where a device beyond the map's room is counted: user space says it. */
#define CROSSCHECK_OVERFLOW (~0ULL)

static __always_inline struct iommutop_kernel_events *counts_of(__u64 key)
{
	struct iommutop_kernel_events *counts = bpf_map_lookup_elem(&iommutop_kernel_events, &key);
	struct iommutop_kernel_events zero = {};

	if (counts)
		return counts;
	if (bpf_map_update_elem(&iommutop_kernel_events, &key, &zero, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&iommutop_kernel_events, &key)) {
		key = CROSSCHECK_OVERFLOW;
		bpf_map_update_elem(&iommutop_kernel_events, &key, &zero, BPF_NOEXIST);
	}
	return bpf_map_lookup_elem(&iommutop_kernel_events, &key);
}

static __always_inline void count(__u64 key, __u32 event)
{
	struct iommutop_kernel_events *counts = counts_of(key);

	if (counts && event < IOMMUTOP_EVENT_COUNT)
		__sync_fetch_and_add(&counts->counts[event], 1);
}

/* A device's event: counted under the device, named at its first. */
static __always_inline void count_device(const struct device *dev, __u32 event)
{
	__u64 key = 0;
	struct iommutop_dev_name name = {};
	const char *source;

	bpf_probe_read_kernel(&key, sizeof(key), &dev);
	if (!bpf_map_lookup_elem(&iommutop_kernel_event_names, &key)) {
		source = BPF_CORE_READ(dev, kobj.name);
		if (source)
			bpf_probe_read_kernel_str(name.name, sizeof(name.name), source);
		bpf_map_update_elem(&iommutop_kernel_event_names, &key, &name, BPF_NOEXIST);
	}
	count(key, event);
}

#define DEVICE_EVENT(prog, event)                                                                  \
	SEC("tp_btf/" #prog)                                                                       \
	int BPF_PROG(prog, struct device *dev)                                                     \
	{                                                                                          \
		count_device(dev, event);                                                          \
		return 0;                                                                          \
	}

DEVICE_EVENT(crosscheck__dma_map__tp, IOMMUTOP_EVENT_DMA_MAP)
DEVICE_EVENT(crosscheck__dma_unmap__tp, IOMMUTOP_EVENT_DMA_UNMAP)
DEVICE_EVENT(crosscheck__dma_map_sg__tp, IOMMUTOP_EVENT_DMA_MAP_SG)
DEVICE_EVENT(crosscheck__dma_map_sg_err__tp, IOMMUTOP_EVENT_DMA_MAP_SG)
DEVICE_EVENT(crosscheck__dma_unmap_sg__tp, IOMMUTOP_EVENT_DMA_UNMAP_SG)
DEVICE_EVENT(crosscheck__dma_map_resource__tp, IOMMUTOP_EVENT_DMA_MAP_RESOURCE)
DEVICE_EVENT(crosscheck__dma_unmap_resource__tp, IOMMUTOP_EVENT_DMA_UNMAP_RESOURCE)

SEC("tp_btf/crosscheck__iommu_map__tp")
int BPF_PROG(crosscheck__iommu_map__tp)
{
	count(0, IOMMUTOP_EVENT_IOMMU_MAP);
	return 0;
}

SEC("tp_btf/crosscheck__iommu_unmap__tp")
int BPF_PROG(crosscheck__iommu_unmap__tp)
{
	count(0, IOMMUTOP_EVENT_IOMMU_UNMAP);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
