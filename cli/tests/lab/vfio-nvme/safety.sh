#!/bin/sh
# Guest side of the restore and refusal lab test: usage safety.sh IOMMUTOP OUTDIR.
# The worker is interrupted and killed mid-run, the parent is interrupted and killed; the
# controller must end up on nvme with its namespace readable every time. Then a partitioned
# and a mounted namespace must be refused without any change.
. "$(dirname "$0")/common.sh"
echo "controller $PCI"

# start NAME ARGS...: the workload in the background; sets $parent and $worker.
start() {
	_run=$1
	shift
	# Not the vfio function: $! must be iommutop itself, not a subshell running it.
	"$IOMMUTOP" workload vfio-nvme "$@" --json "$OUT/$_run.json" >"$OUT/$_run.out" 2>"$OUT/$_run.err" &
	parent=$!
	worker=$(worker_pid)
	# Let the I/O start: set-up takes well under a second under TCG.
	sleep 4
}

finish() {
	wait "$parent"
	echo $? >"$OUT/$1.rc"
}

long="--device $PCI --bind --reserve-hugepages --duration 60 --qd 4 --page-size 2m"

start int-worker $long
if [ -n "$worker" ]; then ok "int-worker: worker found"; else notok "int-worker: worker found" "no worker process"; fi
kill -INT "$worker"
finish int-worker
expect_rc int-worker 1
expect_out int-worker "(interrupted)"
expect_err int-worker "interrupted (the results cover the run up to then)"
restored int-worker

start kill-worker $long
kill -KILL "$worker"
finish kill-worker
expect_rc kill-worker 1
expect_err kill-worker "killed by SIGKILL"
expect_err kill-worker "back on nvme"
restored kill-worker

# Ctrl-C reaches the parent: it stops the worker, reports what ran, restores.
start int-parent $long
kill -INT "$parent"
finish int-parent
expect_rc int-parent 1
expect_out int-parent "(interrupted)"
restored int-parent

# The parent itself killed: the worker follows it (parent-death signal) and the device stays
# on vfio-pci; the record in /run/iommutop lets the next run put it back first.
start kill-parent $long
kill -KILL "$parent"
wait "$parent" 2>/dev/null
# 30 s only bound the wait: the worker follows its parent at once or not at all.
i=0
while pgrep -f -- --iommutop-vfio-nvme-worker >/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
if pgrep -f -- --iommutop-vfio-nvme-worker >/dev/null; then notok "kill-parent: worker followed" "still running"; else ok "kill-parent: worker followed"; fi
if grep -qs "$PCI" /run/iommutop/*.json; then ok "kill-parent: record kept"; else notok "kill-parent: record kept" "missing"; fi
run restore --device "$PCI" --bind --ios 10
expect_rc restore 0
expect_err restore "restored what a killed run"
restored kill-parent

# A partitioned namespace: an MBR with one Linux partition, written by hand.
dd if=/dev/zero of=$NS bs=512 count=1 conv=notrunc 2>/dev/null
printf '\000\000\000\000\203\000\000\000\000\010\000\000\000\000\001\000' | dd of=$NS bs=1 seek=446 conv=notrunc 2>/dev/null
printf '\125\252' | dd of=$NS bs=1 seek=510 conv=notrunc 2>/dev/null
blockdev --rereadpt $NS
sleep 1
run partitioned --device "$PCI" --bind --ios 10
expect_rc partitioned 2
expect_err partitioned "refusing $PCI: nvme0n1 has partitions (nvme0n1p1)"
if [ "$(wc -l <"$OUT/partitioned.err")" = 1 ]; then ok "partitioned: one line"; else notok "partitioned: one line" "$(cat "$OUT/partitioned.err")"; fi
restored partitioned
wipefs -q -a $NS
blockdev --rereadpt $NS

# A mounted namespace.
mkfs.ext4 -q -F $NS
mkdir -p /mnt/scratch
modprobe ext4 2>/dev/null
if mount $NS /mnt/scratch; then ok "mounted: set up"; else notok "mounted: set up" "cannot mount ext4 on $NS"; fi
run mounted --device "$PCI" --bind --ios 10
expect_rc mounted 2
expect_err mounted "nvme0n1 (259:0) is mounted at /mnt/scratch"
restored mounted
umount /mnt/scratch

# Not asked to bind: refused, nothing changed.
run no-bind --device "$PCI" --ios 10
expect_rc no-bind 2
expect_err no-bind "pass --bind"
restored no-bind

# Writes need --allow-write and a named device.
run no-allow --bind --pattern randwrite --ios 10
expect_rc no-allow 2
expect_err no-allow "add --allow-write"
run no-device --bind --pattern randwrite --allow-write --ios 10
expect_rc no-device 2
expect_err no-device "add --device"

# Devices that are not NVMe controllers, or not there at all: one line each, nothing changed.
nic=$(for d in /sys/bus/pci/devices/*; do [ "$(cat "$d/class")" = 0x020000 ] && basename "$d"; done | head -n 1)
run not-nvme --device "$nic" --bind --ios 10
expect_rc not-nvme 2
expect_err not-nvme "$nic"
if [ "$(wc -l <"$OUT/not-nvme.err")" = 1 ]; then ok "not-nvme: one line"; else notok "not-nvme: one line" "$(cat "$OUT/not-nvme.err")"; fi
if [ "$(basename "$(readlink "/sys/bus/pci/devices/$nic/driver")")" = e1000e ]; then ok "not-nvme: $nic still on e1000e"; else notok "not-nvme: $nic still on e1000e" "$(readlink "/sys/bus/pci/devices/$nic/driver")"; fi
run no-such --device 0000:ff:1f.7 --bind --ios 10
expect_rc no-such 2
expect_err no-such "0000:ff:1f.7"
if [ "$(wc -l <"$OUT/no-such.err")" = 1 ]; then ok "no-such: one line"; else notok "no-such: one line" "$(cat "$OUT/no-such.err")"; fi
echo done
