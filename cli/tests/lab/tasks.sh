#!/bin/sh
# Runs inside a lab guest: whose work is counted. Usage: tasks.sh IOMMUTOP OUT DRIVER,
# DRIVER being the iommutop binary under another name (a hard link named vfio-nvme).
# Two recordings at once, started before any work: `record --pid` of dd B (pid.json), and
# `record --cgroup` of a cgroup v2 that holds dd A and, later, a userspace VFIO NVMe driver
# (cgroup.json). A and B read the NVMe at the same time, different block counts; then the
# driver, which iommutop did not launch (iommutop's vfio-nvme workload started as DRIVER, so
# that its processes are named vfio-nvme), maps its queues and buffers.
# OUT gets the reports, dd's own output (A.err, B.err), the pids (A.pid, B.pid, vfio-worker.pid)
# and the driver's own report (vfio.json). Each step says so on stderr, and each wait has a
# deadline that, when it runs out, shows what every process was doing (guest-lib.sh).
set -u
iommutop=$1
out=$2
driver_bin=$3
steps=$out/steps
. "$(dirname "$0")/guest-lib.sh"
PCI=$(for d in /sys/bus/pci/devices/*; do [ "$(cat "$d/class")" = 0x010802 ] && basename "$d"; done | head -n 1)

# Without an I/O scheduler the block layer issues a request from the task that submits it
# (5.10 runs mq-deadline's dispatch from kblockd: those maps are kblockd's, not dd's).
echo none >/sys/block/nvme0n1/queue/scheduler || fail "cannot set the NVMe's scheduler"

# A process waits for OUT/go before it execs dd: its pid is known before the recordings
# start, and it does no I/O until they are attached.
dd_after_go() { # NAME BLOCKS SKIP
	sh -c "while [ ! -e $out/go ]; do sleep 0.05; done; \
exec dd if=/dev/nvme0n1 of=/dev/null bs=4k count=$2 skip=$3 iflag=direct 2>$out/$1.err" &
	echo $! >"$out/$1.pid"
}
dd_after_go A 1500 0
dd_after_go B 2500 2000

# dd A in a cgroup v2 of its own.
cgroot=/sys/fs/cgroup
if ! grep -q "^cgroup2 $cgroot " /proc/mounts; then
	mount -t cgroup2 none $cgroot || fail "cannot mount cgroup2 on $cgroot"
fi
cg=$cgroot/iommutop-tasks
mkdir -p $cg
cat "$out/A.pid" >$cg/cgroup.procs || fail "cannot move A ($(cat "$out/A.pid")) into $cg"

# record NAME ARGS...: in the background until SIGINT; its pid in OUT/NAME.rec. Only the points
# that see this work (and the DMA API points they bring): fewer programs to load under TCG.
record() {
	name=$1
	shift
	"$iommutop" record --points iommu_map,block_complete \
		--json "$out/$name.json" "$@" >"$out/$name.out" 2>"$out/$name.err" &
	echo $! >"$out/$name.rec"
}
record pid --pid "$(cat "$out/B.pid")"
record cgroup --cgroup $cg
say "two recordings started"
for name in pid cgroup; do
	until_seen "$out/$name.err" "probes attached" 420 "record $name" "$(cat "$out/$name.rec")"
done

say "both attached: dd A and B read"
touch "$out/go"
await "$(cat "$out/A.pid")" 240 "dd A"
await "$(cat "$out/B.pid")" 240 "dd B"

# The controller goes to vfio-pci from here, outside the cgroup: nvme's own work of letting it go
# (and of taking it back after) is this shell's, not the driver's.
bind() { # DRIVER-OVERRIDE
	echo "$PCI" >"/sys/bus/pci/devices/$PCI/driver/unbind" &&
		echo "$1" >"/sys/bus/pci/devices/$PCI/driver_override" &&
		echo "$PCI" >/sys/bus/pci/drivers_probe
}
say "dd A and B done: the NVMe goes to vfio-pci"
bind vfio-pci || fail "cannot bind $PCI to vfio-pci"
# The userspace driver, started in the cgroup: its worker (which does the VFIO maps) too.
sh -c "echo \$\$ >$cg/cgroup.procs && exec $driver_bin workload vfio-nvme --device $PCI \
--reserve-hugepages --page-size 2m --ios 500 --json $out/vfio.json" \
	>"$out/vfio.out" 2>"$out/vfio.err" &
driver=$!
say "the VFIO driver runs"
await $driver 300 "vfio-nvme" || fail "vfio-nvme failed: $(cat "$out/vfio.err")"
# Its worker's pid from its own report: the worker can start and end between two looks at the
# process list (a loaded guest's pgrep missed one that lived 2.5 s, and waited on).
python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["results"]["worker_pid"])' \
	"$out/vfio.json" >"$out/vfio-worker.pid" || fail "no worker_pid in $out/vfio.json"
bind "" || fail "cannot give $PCI back to nvme"

say "the driver (worker $(cat "$out/vfio-worker.pid")) is done, the NVMe back with nvme: both recordings stop"
for name in pid cgroup; do
	kill -INT "$(cat "$out/$name.rec")"
done
for name in pid cgroup; do
	await "$(cat "$out/$name.rec")" 120 "record $name after SIGINT"
	echo $? >"$out/$name.rc"
done

# One row of statistics for every key: the first key seen takes it, every other is counted as
# device_map_full, never charged to the row of another.
say "one row of statistics"
IOMMUTOP_STATS_ROWS=1 "$iommutop" record --points iommu_map,block_complete --json "$out/one-row.json" \
	-- dd if=/dev/nvme0n1 of=/dev/null bs=4k count=300 iflag=direct \
	>"$out/one-row.out" 2>"$out/one-row.err" &
await $! 240 "record with one row"
echo $? >"$out/one-row.rc"

# One hint of which row is a key's kept of 1024: the NVMe's and the disk's keys find their rows
# in the hash of keys to rows at every lookup.
say "one hint of rows"
IOMMUTOP_ROW_HINTS=1 "$iommutop" record --points iommu_map,block_complete --json "$out/one-hint.json" \
	-- dd if=/dev/nvme0n1 of=/dev/null bs=4k count=300 iflag=direct \
	>"$out/one-hint.out" 2>"$out/one-hint.err" &
await $! 240 "record with one hint"
echo $? >"$out/one-hint.rc"
echo done
