#!/bin/sh
# Runs inside a lab guest: the four fio profiles against the lab's NVMe (the writes
# with the device named, as they require), dma-contention over 1, 2, 4, 8 jobs, and a write to
# the NVMe while it is in use as swap, which must be refused. Usage: workloads-disk.sh IOMMUTOP OUT
set -u
iommutop=$1
out=$2
step() {
	name=$1
	shift
	"$iommutop" "$@" >"$out/$name.out" 2>"$out/$name.err"
	echo $? >"$out/$name.rc"
}
for profile in fio-randread-4k-qd32x4 fio-read-128k-qd128; do
	step "$profile" run "$profile" --duration 2 --json "$out/$profile.json"
done
for profile in fio-randwrite-4k-qd32x4 fio-write-128k-qd128; do
	step "$profile" run "$profile" --duration 2 --set filename=/dev/nvme0n1 \
		--json "$out/$profile.json"
done
step dma-contention run dma-contention --duration 2 --json "$out/dma-contention.json"
mkswap /dev/nvme0n1 >/dev/null 2>&1 && swapon /dev/nvme0n1 && echo on >"$out/swap"
step in-use run fio-randwrite-4k-qd32x4 --duration 1 --set filename=/dev/nvme0n1
swapoff /dev/nvme0n1 2>/dev/null
