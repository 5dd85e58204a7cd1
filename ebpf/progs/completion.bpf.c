// SPDX-License-Identifier: GPL-2.0
/*
 * Completed I/O, the denominator of "translation cost per I/O".
 *   block:block_rq_complete (struct request *, blk_status_t, unsigned int nr_bytes): per disk
 *     (rq->q->disk); user space folds the disk into its controller's PCI device. Used for NVMe
 *     rather than nvme:nvme_complete_rq, whose BTF lives in a module.
 *   napi:napi_poll (struct napi_struct *, int work, int budget): per netdev; count is the
 *     packets the poll processed.
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
	struct iommutop_dev_key key = {.id = (__u64)netdev, .kind = IOMMUTOP_KEY_NETDEV};

	if (!netdev || work <= 0)
		return 0;
	iommutop_count(&key, IOMMUTOP_OP_COMPLETION, work, 0, 0, netdev);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
