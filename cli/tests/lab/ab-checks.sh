#!/bin/sh
# Runs inside a lab guest: `diagnose --ab` on one NIC, whole and interrupted, and what the group
# and binding look like afterwards. Usage: ab-checks.sh IOMMUTOP OUTDIR
set -u
iommutop=$1
out=$2
nic=0000:00:05.0
group=$(basename "$(readlink -f /sys/bus/pci/devices/$nic/iommu_group)")
"$iommutop" diagnose --ab --device "$nic" -- sh cli/tests/lab/tcp-rr-once.sh >"$out/ab.txt" 2>&1
echo $? >"$out/ab.rc"
cat /sys/kernel/iommu_groups/"$group"/type >"$out/type-after"
basename "$(readlink -f /sys/bus/pci/devices/$nic/driver)" >"$out/driver-after"
# Interrupted during the identity run: the group and binding still come back.
"$iommutop" diagnose --ab --device "$nic" -- sh cli/tests/lab/tcp-rr-once.sh >"$out/ab-int.txt" 2>&1 &
pid=$!
for _ in $(seq 120); do grep -q "group is now identity" "$out/ab-int.txt" && break; sleep 1; done
sleep 3
kill -INT "$pid"
wait "$pid"
echo $? >"$out/ab-int.rc"
cat /sys/kernel/iommu_groups/"$group"/type >"$out/type-after-int"
basename "$(readlink -f /sys/bus/pci/devices/$nic/driver)" >"$out/driver-after-int"
