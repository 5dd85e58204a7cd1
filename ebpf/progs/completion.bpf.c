// SPDX-License-Identifier: GPL-2.0
/*
 * Completed I/O, the denominator of "translation cost per I/O".
 *   block:block_rq_complete (struct request *, blk_status_t, unsigned int nr_bytes): per disk
 *     (rq->q->disk); user space folds the disk into its controller's PCI device. Used for NVMe
 *     rather than nvme:nvme_complete_rq, whose BTF lives in a module.
 *   napi:napi_poll (struct napi_struct *, int work, int budget): count is the packets the poll
 *     processed, charged to the NIC's parent struct device (the key of its DMA maps), or to the
 *     netdev when it has no parent (virtual devices).
 */
#include "common.bpf.h"

SEC("tp_btf")
int BPF_PROG(completion__block_rq__tp, struct request *rq, blk_status_t error,
	     unsigned int nr_bytes)
{
	struct gendisk *disk = BPF_CORE_READ(rq, q, disk);
	struct iommutop_dev_key key = {.id = (__u64)disk, .kind = IOMMUTOP_KEY_DISK};

	if (!disk)
		return 0;
	iommutop_count(&key, IOMMUTOP_OP_COMPLETION, 1, nr_bytes, error != 0, disk);
	return 0;
}

SEC("tp_btf")
int BPF_PROG(completion__napi_poll__tp, struct napi_struct *napi, int work, int budget)
{
	struct net_device *netdev = BPF_CORE_READ(napi, dev);
	struct device *parent = BPF_CORE_READ(netdev, dev.parent);
	struct iommutop_dev_key key = {.id = (__u64)parent, .kind = IOMMUTOP_KEY_DEVICE};

	if (!netdev || work <= 0)
		return 0;
	/* The NIC's own struct device is the key its DMA maps use: charge the packets there, so
	 * that the NIC's row has its I/O whatever network namespace the netdev was moved into. */
	if (parent) {
		iommutop_count(&key, IOMMUTOP_OP_COMPLETION, work, 0, 0, parent);
		return 0;
	}
	key.id = (__u64)netdev;
	key.kind = IOMMUTOP_KEY_NETDEV;
	iommutop_count(&key, IOMMUTOP_OP_COMPLETION, work, 0, 0, netdev);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
