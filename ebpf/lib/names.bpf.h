/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
#ifndef IOMMUTOP_NAMES_BPF_H
#define IOMMUTOP_NAMES_BPF_H

#include <bpf/bpf_core_read.h>
#include "maps.bpf.h"

/*
 * Records the name of a key the first time it is seen. The object is what the key's id points
 * to: a struct device (its dev_name, a PCI address for PCI devices), a struct gendisk or a
 * struct net_device. User space resolves everything else (driver, group, domain) from sysfs.
 */
static __always_inline void iommutop_record_name(const struct iommutop_dev_key *key,
						 const void *object)
{
	struct iommutop_dev_name name = {};
	const char *source = NULL;

	switch (key->kind) {
	case IOMMUTOP_KEY_DEVICE:
		if (object)
			source = BPF_CORE_READ((const struct device *)object, kobj.name);
		if (source)
			bpf_probe_read_kernel_str(name.name, sizeof(name.name), source);
		break;
	case IOMMUTOP_KEY_DISK:
		if (object)
			BPF_CORE_READ_STR_INTO(&name.name, (const struct gendisk *)object,
					       disk_name);
		break;
	case IOMMUTOP_KEY_NETDEV:
		if (object)
			BPF_CORE_READ_STR_INTO(&name.name, (const struct net_device *)object, name);
		break;
	case IOMMUTOP_KEY_UNATTRIBUTED:
		/* A process's row, created in its own task context: its name (the group leader's
		 * comm, not a thread's). The tgid-0 row is named by its kind. */
		if (key->id && key->id == bpf_get_current_pid_tgid() >> 32) {
			struct task_struct *task = (struct task_struct *)bpf_get_current_task();

			BPF_CORE_READ_STR_INTO(&name.name, task, group_leader, comm);
		}
		break;
	default:
		return; /* deferred work is named by its kind */
	}
	if (name.name[0])
		bpf_map_update_elem(&iommutop_names, key, &name, BPF_NOEXIST);
}

#endif
