/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The kernel <-> user space contract of iommutop. Only fixed-width types, explicit padding, no
 * bitfields, pointers or bool, so that the Rust side (generated from this header) and the BPF
 * side agree byte for byte. Sizes are asserted at the bottom and again in Rust.
 */
#ifndef IOMMUTOP_ABI_H
#define IOMMUTOP_ABI_H

#ifdef __BPF__
/* vmlinux.h provides __u8/__u32/__u64 for BPF objects. */
#else
#include <linux/types.h>
#endif

/* Log-linear histogram of nanoseconds: each power of two is split into 2^IOMMUTOP_HIST_SUB_BITS
 * equal slots. Slot v counts v for v < 4; above, v with 2^e <= v < 2^(e+1) is counted in slot
 * 4(e-1) + ((v >> (e-2)) & 3), at most a quarter of its lower bound wide; the last slot takes
 * everything from 7 * 2^30 up (iommutop_hist_slot, iommutop_model::hist). */
#define IOMMUTOP_HIST_SUB_BITS 2
#define IOMMUTOP_HIST_SLOTS 128 /* a power of two: BPF code masks indices with it */

/* Longest device or disk/netdev name copied from the kernel, NUL included. */
#define IOMMUTOP_NAME_LEN 32

/* Most devices tracked at once; a full map drops new devices and counts the drop. */
#define IOMMUTOP_MAX_DEVICES 256

/* Depth of a task's stack of calls in flight (map inside an interrupt inside a map...). */
#define IOMMUTOP_MAX_NESTING 8

/* Tasks whose calls in flight are tracked at once where every task's are hashed by thread id
 * (5.10; least recently used ones are forgotten). Elsewhere only tasks whose slot (below) another
 * task holds are hashed, at most IOMMUTOP_TASK_SLOTS of them. */
#define IOMMUTOP_MAX_TASKS 8192

/* Slots of calls in flight indexed by thread id, tried before the hash by thread id (a power of
 * two: the index is the thread id masked with it). Two tasks of one index inside probed calls at
 * the same time are what sends the second to the hash. */
#define IOMMUTOP_TASK_SLOTS 1024

/* Hints of which statistics row is a key's (ebpf/lib/maps.bpf.h): 2^IOMMUTOP_ROW_HINT_BITS of
 * them, 4 KiB, for at most IOMMUTOP_MAX_DEVICES rows, so that two busy keys rarely share one. */
#define IOMMUTOP_ROW_HINT_BITS 10

/* What a counter measures. The order is ABI: append only. */
enum iommutop_op {
	IOMMUTOP_OP_DMA_MAP =
	    0, /* DMA API map: dma_map_page_attrs, dma_map_phys, dma_map_sg_attrs */
	IOMMUTOP_OP_DMA_UNMAP = 1,   /* DMA API unmap */
	IOMMUTOP_OP_IOMMU_MAP = 2,   /* IOMMU page-table map: iommu_map / iommu:map */
	IOMMUTOP_OP_IOMMU_UNMAP = 3, /* IOMMU page-table unmap: iommu_unmap / iommu:unmap */
	IOMMUTOP_OP_IOVA_ALLOC = 4,  /* IOVA allocation: alloc_iova_fast */
	IOMMUTOP_OP_IOVA_FREE = 5,   /* IOVA release: free_iova_fast */
	IOMMUTOP_OP_IOTLB_SYNC = 6,  /* IOTLB sync after map: intel_iommu_iotlb_sync_map, ... */
	IOMMUTOP_OP_IOTLB_FLUSH =
	    7, /* IOTLB invalidation: qi_submit_sync, cache_tag_flush_range, amd flush */
	IOMMUTOP_OP_FQ_FLUSH = 8, /* deferred flush-queue timer: fq_flush_timeout */
	IOMMUTOP_OP_COMPLETION =
	    9, /* completed I/O: block request (bytes), NAPI poll (count = packets) */
	IOMMUTOP_OP_IOVA_ALLOC_SLOW = 10, /* IOVA allocation through the rbtree: alloc_iova */
	IOMMUTOP_OP_IOTLB_FLUSH_FULL =
	    11, /* of the IOTLB invalidations, those of a whole domain (count only, no bytes) */
	IOMMUTOP_OP_DMA_ALLOC =
	    12,			   /* coherent DMA buffers: dma_alloc_attrs, dma_alloc_pages, ... */
	IOMMUTOP_OP_DMA_FREE = 13, /* their release: dma_free_attrs, dma_free_pages, ... */
	IOMMUTOP_OP_TX_PACKETS =
	    14, /* packets a NIC's driver accepted for transmit: net:net_dev_xmit, count only */
	IOMMUTOP_OP_REQUEUE = 15, /* block requests requeued (block:block_rq_requeue): each is
				     mapped again when issued again, for one completion */
	IOMMUTOP_OP_COUNT = 16,
};

/* One operation's aggregate on one CPU. Cumulative: user space diffs successive reads. */
struct iommutop_op_stats {
	__u64 count; /* calls (or events) seen */
	__u64 bytes; /* bytes mapped, unmapped or allocated (0 where the hook has no size) */
	__u64
	    failures; /* calls that returned an error (map to DMA_MAPPING_ERROR, NULL IOVA, ...) */
	__u64 timed;  /* calls whose latency was measured (entry and exit both seen) */
	__u64 total_ns; /* sum of measured latencies, the probes' own cost inside each call taken
			   out */
	__u64 raw_total_ns; /* the same as measured between entry and exit, that cost included */
	__u64 offcpu_ns;    /* of raw_total_ns, time the calling task spent switched out (preempted,
			       asleep on a lock): waiting, not in total_ns */
	__u64 waited;	    /* timed calls that spent any time switched out */
	__u64 hist[IOMMUTOP_HIST_SLOTS]; /* of the latencies in total_ns */
};

/* The DMA data directions (the kernel's enum dma_data_direction), which index the DMA maps'
 * split below. DMA_NONE (3) is never a map's: its slot stays 0. */
#define IOMMUTOP_DIRECTION_BIDIRECTIONAL 0
#define IOMMUTOP_DIRECTION_TO_DEVICE 1
#define IOMMUTOP_DIRECTION_FROM_DEVICE 2
#define IOMMUTOP_DIRECTIONS 4

/* Of a row's DMA maps (ops[IOMMUTOP_OP_DMA_MAP]), those whose direction their probe read, by
 * direction: count and bytes only, counted where the map is counted. A map whose direction was
 * not read (a count-only tracepoint, a kretprobe whose kprobe was skipped, the IOVA API, whose
 * first step takes no direction) is in no slot: user space takes the map count less the slots'
 * sum as "not known". */
struct iommutop_map_directions {
	__u64 count[IOMMUTOP_DIRECTIONS];
	__u64 bytes[IOMMUTOP_DIRECTIONS];
};

/* Everything iommutop knows about one device on one CPU. */
struct iommutop_dev_stats {
	struct iommutop_op_stats ops[IOMMUTOP_OP_COUNT];
	struct iommutop_map_directions map_directions;
};

/* Key of the per-device maps: the kernel's struct device pointer, or a completion source. */
enum iommutop_key_kind {
	IOMMUTOP_KEY_DEVICE = 0,   /* id is a struct device * (DMA work is charged to it) */
	IOMMUTOP_KEY_DEFERRED = 1, /* flush-queue timer work and what nests in it */
	IOMMUTOP_KEY_DISK = 2,	   /* completions of a block disk; name says which */
	IOMMUTOP_KEY_NETDEV = 3,   /* NAPI completions of a netdev; id is its struct net_device * */
	/* IOMMU work outside any DMA API call (VFIO map, ...): id is the tgid of the process that
	 * did it in task context, named by its comm; 0 for interrupt context and processes beyond
	 * IOMMUTOP_MAX_PROCESSES. */
	IOMMUTOP_KEY_UNATTRIBUTED = 4,
};

/* Which life of its id a key is: what tells apart the bindings of one struct device, or two
 * objects the kernel allocated at one address. A device's is the low half of the address of its
 * driver (0: unbound), so that a rebound device counts on a new row from its first event; a
 * netdev's its ifindex; a disk's the low half of its diskseq (5.15+; 0 before). Driver structures
 * are static, in the kernel image or a module, and those all lie within less than 4 GiB of each
 * other (x86-64: the top 2 GiB; arm64: the image and its 2 GiB module area): two drivers never
 * share a low half. 0 for every other kind. */
struct iommutop_dev_key {
	__u64 id;
	__u32 kind;
	__u32 generation;
};

/* The key a statistics row was taken for (the map iommutop_row_keys); a row not taken is all
 * zero. User space zeroes a row's when it gives the row back. */
struct iommutop_row_key {
	__u64 id;
	__u32 kind;
	__u32 generation;
	__u32 taken;
	__u32 pad;
};

/* IOMMU work outside any DMA API call (a userspace driver's VFIO maps) done by a process, or by
 * a child of a process, listed here is charged to the key given, not to "unattributed". Keys are
 * tgids; user space adds itself while it runs such a driver for a device. */
#define IOMMUTOP_MAX_OWNERS 16

/* Processes whose IOMMU work outside the DMA API gets a row of its own (IOMMUTOP_KEY_UNATTRIBUTED
 * keyed by tgid); later ones share the tgid-0 row. Keeps the device map's room for devices. */
#define IOMMUTOP_MAX_PROCESSES 64

/* Name of a statistics row's key, written when the row is taken: dev_name() of a device, disk
 * name, netdev name; for a device, also the name of the driver it was bound to then (empty:
 * none). */
struct iommutop_dev_name {
	char name[IOMMUTOP_NAME_LEN];
	char driver[IOMMUTOP_NAME_LEN];
};

/* The `<program>__ret_at` of an fexit program whose function returns nothing
 * (ebpf/lib/common.bpf.h). */
#define IOMMUTOP_RET_VOID 0xffffffffU

/* Map-level counters of the probes themselves, for honest reporting. */
enum iommutop_health {
	IOMMUTOP_HEALTH_DEVICE_MAP_FULL = 0,  /* a new device could not be tracked */
	IOMMUTOP_HEALTH_NESTING_OVERFLOW = 1, /* deeper nesting than IOMMUTOP_MAX_NESTING */
	IOMMUTOP_HEALTH_EXIT_WITHOUT_ENTRY = 2,
	IOMMUTOP_HEALTH_STACK_LOST = 3, /* a sampled call path could not be recorded */
	IOMMUTOP_HEALTH_ABANDONED_FRAMES =
	    4, /* calls whose exit was never seen (frames dropped as stale): not counted */
	IOMMUTOP_HEALTH_TASK_MAP_FULL = 5, /* a task's in-flight calls could not be tracked */
	IOMMUTOP_HEALTH_PROCESS_MAP_FULL =
	    6, /* unattributed work of a process beyond IOMMUTOP_MAX_PROCESSES: on the tgid-0 row */
	IOMMUTOP_HEALTH_ROW_BUSY = 7, /* a new key's row could not be written at its first event
					 (the map busy on this CPU: an interrupt landed in an
					 update); the next event takes it */
	IOMMUTOP_HEALTH_CLOCK_BEHIND_ENTRY = 8, /* a call's exit read an earlier time than its
						   entry (the fast clock stepped back): counted
						   untimed */
	IOMMUTOP_HEALTH_DRIVER_REQUESTS = 9, /* block requests of no disk completed: a driver's own
						commands (NVMe admin), whose maps are of no I/O */
	IOMMUTOP_HEALTH_COUNT = 10,
};

/*
 * What the tracker saw of each operation's calls that it did not see whole, per CPU, indexed by
 * enum iommutop_op (the map iommutop_op_health). Cumulative. With the kernel's count of each
 * program's skipped runs (its recursion_misses), these make the report's loss figures: the calls
 * whose entry no program saw are the entry programs' skipped runs less the understudies'
 * entries; of those, the exits that found no frame counted the call; the rest were lost.
 */
struct iommutop_op_health {
	__u64 unseen_entries;	  /* exits that found no frame of their call: counted, untimed */
	__u64 unseen_exits;	  /* frames dropped because their call's exit was never seen:
				     counted, untimed */
	__u64 understudy_entries; /* entries an understudy made in place of its skipped lead */
	__u64 understudy_exits;	  /* exits an understudy made in place of its skipped lead */
	__u64 unpushed; /* entries seen whose frame could not be pushed (the stack full, or no
			   stack): their exits count them as unseen entries */
};

/*
 * The role a copy of a timed program plays: every fentry and fexit program is built as a lead (its
 * role read from an instruction that loads IOMMUTOP_ROLE_LEAD, ebpf/lib/role.bpf.h); where a task
 * can be preempted inside a program (PREEMPT_RT, full or lazy preemption), the loader also attaches
 * a copy whose marked instruction it patches to IOMMUTOP_ROLE_UNDERSTUDY, run after the lead on the
 * same function. The kernel skips a program that is already running on the CPU (a task preempted
 * inside it, an interrupt landing in it), not its copy: the understudy acts only where the lead
 * evidently did not.
 */
#define IOMMUTOP_ROLE_LEAD 0x7e1e0000
#define IOMMUTOP_ROLE_UNDERSTUDY 0x7e1e0001

/*
 * A call in flight and the stack of them a context keeps (ebpf/lib/frame.bpf.h, stacks.bpf.h): the
 * tracker's own, and user space's to read the frames still open when a recording ends (their
 * calls' exits were never seen). A frame whose start is 0 is free or still being written.
 */
/* A frame's flags. */
#define IOMMUTOP_FRAME_DUPLICATE 1 /* a twin called by its wrapper (IOMMUTOP_ENTER_TWIN) */
#define IOMMUTOP_FRAME_FULL 2	   /* an IOTLB invalidation of a whole domain */
#define IOMMUTOP_FRAME_FILTERED 4  /* left out by --pid/--cgroup, with all it nests */
#define IOMMUTOP_FRAME_SPANNING 8  /* known by an object both ends are passed, not where it sits */
/* Pushed by a lead program whose understudy (abi.h, IOMMUTOP_ROLE_UNDERSTUDY) has yet to see it:
 * the understudy takes the mark off and leaves the frame to the lead. */
#define IOMMUTOP_FRAME_LEAD 16
/* A DMA map's direction plus one (0: not read), in these bits of a frame's flags (and of the
 * flags its entry is given: IOMMUTOP_ENTER_DIRECTION). */
#define IOMMUTOP_FRAME_DIRECTION_SHIFT 8
#define IOMMUTOP_FRAME_DIRECTION_MASK (3U << IOMMUTOP_FRAME_DIRECTION_SHIFT)

struct iommutop_frame {
	__u64 call; /* the call's identity (frame.bpf.h, struct iommutop_call): its position or
		       the object a call that spans functions is known by */
	__u64 tag;
	__u64 start_ns;
	__u64 probe_ns; /* run time of probe programs nested in the call so far (self time) */
	__u64 offcpu_at_start; /* the stack's offcpu_ns when the call began */
	__u64 bytes;
	__u64 func; /* the function called */
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

/* Calls in flight of the task that holds a slot (ebpf/lib/stacks.bpf.h). */
struct iommutop_task_slot {
	__u32 owner; /* the thread whose calls these are; 0: free (the idle tasks never own one) */
	__u32 in_hash; /* tasks of this index whose calls in flight are in iommutop_inflight */
	struct iommutop_inflight stack;
};

/*
 * The kernel's own DMA and IOMMU trace events, counted beside the probes as a second opinion
 * (record --cross-check; ebpf/progs/crosscheck.bpf.c): per device for the dma: events (6.12+),
 * which name one, and in all (key 0) for iommu:map and iommu:unmap, which name none. The order is
 * ABI: append only.
 */
enum iommutop_kernel_event {
	IOMMUTOP_EVENT_DMA_MAP = 0,    /* dma:dma_map_page (6.12-6.17), dma:dma_map_phys (6.18+) */
	IOMMUTOP_EVENT_DMA_UNMAP = 1,  /* dma:dma_unmap_page, dma:dma_unmap_phys */
	IOMMUTOP_EVENT_DMA_MAP_SG = 2, /* dma:dma_map_sg, and dma:dma_map_sg_err (a failed one) */
	IOMMUTOP_EVENT_DMA_UNMAP_SG = 3,     /* dma:dma_unmap_sg */
	IOMMUTOP_EVENT_DMA_MAP_RESOURCE = 4, /* dma:dma_map_resource (6.12-6.17) */
	IOMMUTOP_EVENT_DMA_UNMAP_RESOURCE = 5,
	IOMMUTOP_EVENT_IOMMU_MAP = 6,	/* iommu:map */
	IOMMUTOP_EVENT_IOMMU_UNMAP = 7, /* iommu:unmap */
	IOMMUTOP_EVENT_COUNT = 8,
};

/* One key's counts of each event, per CPU, cumulative. */
struct iommutop_kernel_events {
	__u64 counts[IOMMUTOP_EVENT_COUNT];
};

/* Devices whose dma: events are counted at once; a full map counts the rest on key 0 and says so
 * there (IOMMUTOP_EVENT_COUNT is not a key's: user space reads the overflow from key ~0). */
#define IOMMUTOP_MAX_EVENT_DEVICES 256

/* Kernel call paths of sampled DMA API calls: one stack in IOMMUTOP_STACK_PERIOD calls per CPU
 * is recorded with bpf_get_stackid() and charged its call's latency. */
#define IOMMUTOP_STACK_DEPTH 32
#define IOMMUTOP_MAX_STACKS 2048

struct iommutop_stack_key {
	__u64 dev_id;	/* the device key's id */
	__u32 kind;	/* the device key's kind (enum iommutop_key_kind) */
	__u32 op;	/* enum iommutop_op of the sampled call */
	__s32 stack_id; /* id in the stack trace map */
	__u32 pad;
};

struct iommutop_stack_value {
	__u64 samples;	/* sampled calls with this path */
	__u64 total_ns; /* their summed latency */
};

_Static_assert(sizeof(struct iommutop_stack_key) == 24, "stack_key size");
_Static_assert(sizeof(struct iommutop_stack_value) == 16, "stack_value size");

_Static_assert(sizeof(struct iommutop_op_stats) == 8 * (8 + IOMMUTOP_HIST_SLOTS), "op_stats size");
_Static_assert(sizeof(struct iommutop_map_directions) == 8 * 2 * IOMMUTOP_DIRECTIONS,
	       "map_directions size");
_Static_assert(sizeof(struct iommutop_dev_stats) ==
		   IOMMUTOP_OP_COUNT * sizeof(struct iommutop_op_stats) +
		       sizeof(struct iommutop_map_directions),
	       "dev_stats size");
/*
 * The cookie of a function a multi-function program runs for (ebpf/progs/multi.bpf.c; kernels
 * with BPF_TRACE_FENTRY_MULTI and BPF_TRACE_FEXIT_MULTI): what the function is, set by user space
 * for each function of the link. One byte a field:
 *   byte 0  the operation (enum iommutop_op)
 *   byte 1  how the call is known (enum iommutop_multi_call), and in the high nibble the
 *           argument that tags it (IOMMUTOP_MULTI_CALL_TAGGED)
 *   byte 2  its bytes (enum iommutop_multi_bytes), and in the high nibble the argument they are
 *           read from
 *   byte 3  the entry's flags (IOMMUTOP_MULTI_ENTER_*)
 *   byte 4  when the call failed, from its return value (enum iommutop_multi_failed)
 *   byte 5  a DMA map's direction: IOMMUTOP_MULTI_DIRECTION_ARG, and in the high nibble the
 *           argument it is (enum dma_data_direction); 0: the function takes none
 */
#define IOMMUTOP_MULTI_OP_SHIFT 0
#define IOMMUTOP_MULTI_CALL_SHIFT 8
#define IOMMUTOP_MULTI_BYTES_SHIFT 16
#define IOMMUTOP_MULTI_ENTER_SHIFT 24
#define IOMMUTOP_MULTI_FAILED_SHIFT 32
#define IOMMUTOP_MULTI_DIRECTION_SHIFT 40
/* A field's argument index lies in the high nibble of its byte. */
#define IOMMUTOP_MULTI_ARG_SHIFT 4

enum iommutop_multi_call {
	/* By where it sits on its context's stack only. */
	IOMMUTOP_MULTI_CALL_POSITION = 0,
	/* A DMA API call: its position, tagged with the argument that changes most between calls.
	 */
	IOMMUTOP_MULTI_CALL_TAGGED = 1,
	/* A call on an IOMMU-side object, its first argument (IOMMUTOP_OWNED_CALL). */
	IOMMUTOP_MULTI_CALL_OWNED = 2,
};

enum iommutop_multi_bytes {
	IOMMUTOP_MULTI_BYTES_NONE = 0,
	/* The argument itself. */
	IOMMUTOP_MULTI_BYTES_ARG = 1,
	/* A scatter-gather list (argument 1) of argument 2's entries. */
	IOMMUTOP_MULTI_BYTES_SG = 2,
	/* A struct sg_table (argument 1). */
	IOMMUTOP_MULTI_BYTES_SGTABLE = 3,
	/* The argument's granules of the struct iova_domain that is argument 0. */
	IOMMUTOP_MULTI_BYTES_GRANULES = 4,
	/* The range of the struct iommu_iotlb_gather the argument is. */
	IOMMUTOP_MULTI_BYTES_GATHER = 5,
};

/* Byte 5's low nibble when the function takes a direction. */
#define IOMMUTOP_MULTI_DIRECTION_ARG 1

/* The entry's flags: IOMMUTOP_ENTER_TWIN and IOMMUTOP_ENTER_FULL (track.bpf.h), and: */
#define IOMMUTOP_MULTI_ENTER_TWIN 1
#define IOMMUTOP_MULTI_ENTER_FULL 2
/* An IOTLB invalidation whose range may be beyond any address width: the whole domain. */
#define IOMMUTOP_MULTI_ENTER_RANGE_MAY_BE_FULL 8

enum iommutop_multi_failed {
	IOMMUTOP_MULTI_FAILED_NEVER = 0,
	/* A map returned DMA_MAPPING_ERROR. */
	IOMMUTOP_MULTI_FAILED_MAPPING_ERROR = 1,
	/* It returned 0 (a NULL pointer, no page frame, no byte unmapped). */
	IOMMUTOP_MULTI_FAILED_ZERO = 2,
	/* Its unsigned int return is 0 (dma_map_sg_attrs: no entry mapped). */
	IOMMUTOP_MULTI_FAILED_ZERO_U32 = 3,
	/* Its int return is not 0 (an errno). */
	IOMMUTOP_MULTI_FAILED_NONZERO_INT = 4,
	/* Its return is not 0. */
	IOMMUTOP_MULTI_FAILED_NONZERO = 5,
	/* It returns the bytes it mapped, or an errno (iommu_map_sg): those are the call's bytes.
	 */
	IOMMUTOP_MULTI_FAILED_NOT_POSITIVE_BYTES = 6,
};

/*
 * A multi-function program's typed view of a kernel object: its arguments are plain numbers, so
 * what they point at is cast to its type with the kfunc bpf_rdonly_cast (a typed load after it
 * costs one instruction; bpf_probe_read_kernel costs some 90). aya cannot parse an object that
 * calls a kfunc, so the call is written as a raw instruction (ebpf/lib/cast.bpf.h) that the
 * multi-function loader (loader/src/links/multi_cast.rs) completes with the kernel's BTF ids: the
 * instruction before it, `r2 = IOMMUTOP_CAST_MARK | type`, gets the id of the type, and the call's
 * immediate IOMMUTOP_CAST_CALL_MARK that of bpf_rdonly_cast.
 */
#define IOMMUTOP_CAST_MARK 0x1ca50000
#define IOMMUTOP_CAST_CALL_MARK 0x1ca5ffff

/* The kernel types cast to: each one's struct name is in multi_cast.rs, in this order. */
enum iommutop_cast_type {
	IOMMUTOP_CAST_DEVICE = 0,
	IOMMUTOP_CAST_SCATTERLIST = 1,
	IOMMUTOP_CAST_SG_TABLE = 2,
	IOMMUTOP_CAST_IOVA_DOMAIN = 3,
	IOMMUTOP_CAST_IOTLB_GATHER = 4,
	IOMMUTOP_CAST_TYPES = 5,
};

_Static_assert(sizeof(struct iommutop_op_health) == 5 * 8, "op_health size");
_Static_assert(sizeof(struct iommutop_kernel_events) == 8 * IOMMUTOP_EVENT_COUNT,
	       "kernel_events size");
_Static_assert(sizeof(struct iommutop_dev_key) == 16, "dev_key size");
_Static_assert(sizeof(struct iommutop_frame) == 88, "frame size");
_Static_assert(sizeof(struct iommutop_inflight) == 24 + 88 * IOMMUTOP_MAX_NESTING, "inflight size");
_Static_assert(sizeof(struct iommutop_task_slot) == 8 + sizeof(struct iommutop_inflight),
	       "task_slot size");
_Static_assert(sizeof(struct iommutop_row_key) == 24, "row_key size");
_Static_assert(sizeof(struct iommutop_dev_name) == 2 * IOMMUTOP_NAME_LEN, "dev_name size");

#endif /* IOMMUTOP_ABI_H */
