// SPDX-License-Identifier: GPL-2.0
/*
 * Completed I/O, the denominator of "translation cost per I/O".
 *   block:block_rq_complete (struct request *, blk_status_t, unsigned int nr_bytes): per disk
 *     (rq->q->disk; rq->rq_disk before 5.16); user space folds the disk into its controller's PCI
 *     device. Used for NVMe rather than nvme:nvme_complete_rq, whose BTF lives in a module.
 *   napi:napi_poll (struct napi_struct *, int work, int budget): count is the packets the poll
 *     processed, charged to the NIC's parent struct device (the key of its DMA maps), or to the
 *     netdev when it has no parent (virtual devices): the packets a NIC received.
 *   net:net_dev_xmit (struct sk_buff *, int rc, struct net_device *, unsigned int len): a packet
 *     the driver accepted for transmit (rc 0), charged the same way: the packets a NIC sent.
 *   block:block_rq_requeue (struct request *): a request the block layer will issue again, per
 *     disk: its data is mapped again then, for one completion.
 * Under --pid or --cgroup none is counted: completions are interrupt work, no task's. Netdevs
 * without a parent (veth, tun, lo, bridges) are counted only under --netdev all: they do no DMA,
 * and a container host makes and destroys them by the thousand.
 */
#include "common.bpf.h"

/* --netdev all: count the packets of netdevs without a parent device too. Set before load. */
const volatile __u32 iommutop_virtual_netdevs = 0;

/* Before 5.15 a disk has no sequence number. */
struct gendisk___diskseq {
	__u64 diskseq;
} __attribute__((preserve_access_index));

/* The generation of a disk's key (abi.h): its diskseq, which no other disk of this boot had. */
static __always_inline __u32 disk_generation(struct gendisk *disk)
{
	struct gendisk___diskseq *numbered = (void *)disk;

	if (bpf_core_field_exists(numbered->diskseq))
		return (__u32)BPF_CORE_READ(numbered, diskseq);
	return 0;
}

/* Before 5.16 a request names its disk itself (rq->rq_disk); since, through its queue. */
struct request___rq_disk {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

static __always_inline struct gendisk *request_disk(struct request *rq)
{
	struct request___rq_disk *old = (void *)rq;

	if (bpf_core_field_exists(old->rq_disk))
		return BPF_CORE_READ(old, rq_disk);
	return BPF_CORE_READ(rq, q, disk);
}

IOMMUTOP_SEC("tp_btf", completion__block_rq__tp)
int BPF_PROG(completion__block_rq__tp, struct request *rq, blk_status_t error,
	     unsigned int nr_bytes)
{
	struct gendisk *disk = request_disk(rq);
	struct iommutop_dev_key key = {.id = (__u64)disk, .kind = IOMMUTOP_KEY_DISK};

	if (iommutop_filtering())
		return 0;
	/* A request of no disk is a driver's own command (NVMe admin: Identify, Set Features),
	 * whose data the driver maps as it maps reads': said, since those maps are of no I/O. */
	if (!disk) {
		iommutop_health_inc(IOMMUTOP_HEALTH_DRIVER_REQUESTS);
		return 0;
	}
	key.generation = disk_generation(disk);
	iommutop_count(&key, IOMMUTOP_OP_COMPLETION, 1, nr_bytes, error != 0);
	return 0;
}

/* block:block_rq_requeue (struct request *): a request sent back to be issued again (its driver
 * could not take it, or a controller reset cancelled it in flight). It is mapped again when issued
 * again, for its one completion: each requeue is a DMA map of no completed I/O. */
IOMMUTOP_SEC("tp_btf", completion__block_requeue__tp)
int BPF_PROG(completion__block_requeue__tp, struct request *rq)
{
	struct gendisk *disk = request_disk(rq);
	struct iommutop_dev_key key = {.id = (__u64)disk, .kind = IOMMUTOP_KEY_DISK};

	if (!disk || iommutop_filtering())
		return 0;
	key.generation = disk_generation(disk);
	iommutop_count(&key, IOMMUTOP_OP_REQUEUE, 1, 0, 0);
	return 0;
}

/* Packets of a netdev are charged to the NIC's own struct device, the key its DMA maps use, so
 * that the NIC's row has its I/O whatever network namespace the netdev was moved into; to the
 * netdev itself, in the generation of its ifindex, when it has no parent (virtual devices) and
 * --netdev all asked for them. */
static __always_inline void count_packets(struct net_device *netdev, __u32 op, __u64 packets,
					  __u64 bytes)
{
	struct device *parent = BPF_CORE_READ(netdev, dev.parent);
	struct iommutop_dev_key key;

	if (parent) {
		key = iommutop_device_key(parent);
		iommutop_count(&key, op, packets, bytes, 0);
		return;
	}
	if (!iommutop_virtual_netdevs)
		return;
	key.id = (__u64)netdev;
	key.kind = IOMMUTOP_KEY_NETDEV;
	key.generation = (__u32)BPF_CORE_READ(netdev, ifindex);
	iommutop_count(&key, op, packets, bytes, 0);
}

IOMMUTOP_SEC("tp_btf", completion__napi_poll__tp)
int BPF_PROG(completion__napi_poll__tp, struct napi_struct *napi, int work, int budget)
{
	struct net_device *netdev = BPF_CORE_READ(napi, dev);

	if (!netdev || work <= 0 || iommutop_filtering())
		return 0;
	count_packets(netdev, IOMMUTOP_OP_COMPLETION, work, 0);
	return 0;
}

IOMMUTOP_SEC("tp_btf", completion__net_dev_xmit__tp)
int BPF_PROG(completion__net_dev_xmit__tp, struct sk_buff *skb, int rc, struct net_device *netdev,
	     unsigned int len)
{
	if (!netdev || rc != 0 /* NETDEV_TX_OK */ || iommutop_filtering())
		return 0;
	count_packets(netdev, IOMMUTOP_OP_TX_PACKETS, 1, len);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
