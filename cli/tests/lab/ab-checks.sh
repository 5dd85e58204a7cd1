#!/bin/sh
# Runs inside a lab guest: `iommutop diagnose --ab` of TCP_RR on one NIC, whole and interrupted
# by SIGINT while the group is switched, and what the group and binding are afterwards.
# Usage: ab-checks.sh IOMMUTOP OUTDIR
set -u
iommutop=$1
out=$2
nic=0000:00:05.0
group=$(basename "$(readlink -f /sys/bus/pci/devices/$nic/iommu_group)")
state() { # state SUFFIX: the group's type and the NIC's driver now
	cat /sys/kernel/iommu_groups/"$group"/type >"$out/type-$1"
	basename "$(readlink -f /sys/bus/pci/devices/$nic/driver)" >"$out/driver-$1"
}
state before
"$iommutop" diagnose --ab --device "$nic" --profile tcp-rr-1k --duration 5 --json "$out/ab.json" \
	>"$out/ab.txt" 2>"$out/ab.err"
echo $? >"$out/ab.rc"
state after

# Interrupted during the identity run: the group and binding come back all the same. Two
# SIGINTs, the second while it restores, must not cut the restore short.
"$iommutop" diagnose --ab --device "$nic" --profile tcp-rr-1k --duration 30 \
	>"$out/int.txt" 2>"$out/int.err" &
pid=$!
for _ in $(seq 300); do grep -q "is now identity" "$out/int.err" && break; sleep 0.2; done
sleep 12
kill -INT "$pid"
sleep 0.3
kill -INT "$pid" 2>/dev/null
wait "$pid"
echo $? >"$out/int.rc"
state after-int
ls /run/iommutop >"$out/records-after" 2>/dev/null
exit 0
