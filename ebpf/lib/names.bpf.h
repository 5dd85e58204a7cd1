/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Floor 1, maps and counters: the name of a row's key, written when the row is taken. */
#ifndef IOMMUTOP_NAMES_BPF_H
#define IOMMUTOP_NAMES_BPF_H

#include <bpf/bpf_core_read.h>
#include "maps.bpf.h"

/*
 * Records the name of a row's key when the row is taken. The object is what the key's id points
 * to: a struct device (its dev_name, a PCI address for PCI devices, and its driver's name: the
 * binding the key's generation is), a struct gendisk or a struct net_device. User space resolves
 * everything else (group, domain) from sysfs. A row given back and taken again is named anew.
 */
static __always_inline void iommutop_record_name(int row, const struct iommutop_dev_key *key,
						 const void *object)
{
	struct iommutop_dev_name *name;
	const char *source = NULL;
	__u32 index = (__u32)row;

	name = bpf_map_lookup_elem(&iommutop_names, &index);
	if (!name)
		return;
	name->name[0] = 0;
	name->driver[0] = 0;
	switch (key->kind) {
	case IOMMUTOP_KEY_DEVICE:
		if (object)
			source = BPF_CORE_READ((const struct device *)object, kobj.name);
		if (source)
			bpf_probe_read_kernel_str(name->name, sizeof(name->name), source);
		/* The driver of the key's generation only: a key remembered from before a rebind
		 * (an IOMMU domain's last device) may take its row after it. */
		if (object && (__u32)(__u64)BPF_CORE_READ((const struct device *)object, driver) ==
				  key->generation)
			source = BPF_CORE_READ((const struct device *)object, driver, name);
		else
			source = NULL;
		if (source)
			bpf_probe_read_kernel_str(name->driver, sizeof(name->driver), source);
		break;
	case IOMMUTOP_KEY_DISK:
		if (object)
			BPF_CORE_READ_STR_INTO(&name->name, (const struct gendisk *)object,
					       disk_name);
		break;
	case IOMMUTOP_KEY_NETDEV:
		if (object)
			BPF_CORE_READ_STR_INTO(&name->name, (const struct net_device *)object,
					       name);
		break;
	case IOMMUTOP_KEY_UNATTRIBUTED:
		/* A process's row, created in its own task context: its name (the group leader's
		 * comm, not a thread's). The tgid-0 row is named by its kind. */
		if (key->id && key->id == bpf_get_current_pid_tgid() >> 32) {
			struct task_struct *task = (struct task_struct *)bpf_get_current_task();

			BPF_CORE_READ_STR_INTO(&name->name, task, group_leader, comm);
		}
		break;
	default:
		break; /* deferred work is named by its kind */
	}
}

/* The kernel object a key's id points to, for naming it: a device, disk or netdev key's. */
static __always_inline const void *iommutop_key_object(const struct iommutop_dev_key *key)
{
	switch (key->kind) {
	case IOMMUTOP_KEY_DEVICE:
	case IOMMUTOP_KEY_DISK:
	case IOMMUTOP_KEY_NETDEV:
		return (const void *)key->id;
	default:
		return NULL;
	}
}

/* iommutop_record_name of the key's own object, as a global function (IOMMUTOP_GLOBAL_FUNCTIONS,
 * maps.bpf.h): a row is named once, on the rare event that takes it, and the verifier checks the
 * naming once per program rather than at every place that counts. Numbers only (global functions
 * before 5.12): the key's kind and generation share one. */
int iommutop_name_row(int row, __u64 key_id, __u64 key_kind_generation);

#ifdef IOMMUTOP_GLOBAL_FUNCTIONS
__noinline int iommutop_name_row(int row, __u64 key_id, __u64 key_kind_generation)
{
	struct iommutop_dev_key key = {
	    .id = key_id,
	    .kind = (__u32)key_kind_generation,
	    .generation = (__u32)(key_kind_generation >> 32),
	};

	iommutop_record_name(row, &key, iommutop_key_object(&key));
	return 0;
}
#endif

#endif
