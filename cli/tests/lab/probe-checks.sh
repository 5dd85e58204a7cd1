#!/bin/sh
# Runs inside a lab guest: the first things a user checks, and recordings of real workloads.
# Usage: probe-checks.sh IOMMUTOP OUTDIR [amd]
# Writes JSON and text files into OUTDIR (under the project root, which the lab shares writable);
# the host-side test asserts on them.
set -u
iommutop=$1
out=$2
mode=${3:-full}
mkdir -p "$out"

nvme_pci=$(basename "$(readlink -f /sys/class/nvme/nvme0/device)")
echo "$nvme_pci" >"$out/nvme-pci"
for g in /sys/kernel/iommu_groups/*; do
	printf '%s %s %s\n' "${g##*/}" "$(cat "$g/type" 2>/dev/null)" "$(ls "$g/devices" | tr '\n' ' ')"
done >"$out/groups"
readlink -f /sys/bus/pci/devices/"$nvme_pci"/driver >"$out/nvme-driver"
for n in /sys/class/net/eth*; do
	printf '%s %s %s\n' "${n##*/}" "$(basename "$(readlink -f "$n/device/driver")")" \
		"$(basename "$(readlink -f "$n/device")")"
done >"$out/netdevs"

"$iommutop" probes --json >"$out/probes.json" 2>"$out/probes.err"
echo $? >"$out/probes.rc"

# 2000 direct 4 KiB reads of the NVMe through the kernel driver.
"$iommutop" record --json "$out/dd.json" -- \
	dd if=/dev/nvme0n1 of=/dev/null bs=4k count=2000 iflag=direct 2>"$out/dd.err"
echo $? >"$out/dd.rc"
[ "$mode" = amd ] && exit 0

"$iommutop" probes --verify --json >"$out/verify.json" 2>"$out/verify.err"
echo $? >"$out/verify.rc"

# netperf TCP_RR between the two e1000e, each in its own network namespace.
ip netns add lab-a && ip netns add lab-b
ip link set eth0 netns lab-a && ip link set eth1 netns lab-b
ip -n lab-a addr add 10.77.0.1/24 dev eth0 && ip -n lab-a link set eth0 up && ip -n lab-a link set lo up
ip -n lab-b addr add 10.77.0.2/24 dev eth1 && ip -n lab-b link set eth1 up && ip -n lab-b link set lo up
ip netns exec lab-b netserver -D -4 -L 10.77.0.2 >"$out/netserver.log" 2>&1 &
netserver_pid=$!
sleep 3
"$iommutop" diagnose --json "$out/rr.json" --folded "$out/rr.folded" --flamegraph "$out/rr.svg" -- \
	ip netns exec lab-a \
	netperf -H 10.77.0.2 -L 10.77.0.1 -t TCP_RR -l 3 -P 0 -- -r 1024,1024 -o THROUGHPUT \
	>"$out/rr.out" 2>"$out/rr.err"
echo $? >"$out/rr.rc"
kill "$netserver_pid" 2>/dev/null
ip netns del lab-a
ip netns del lab-b

# The NVMe's group switched to identity: DMA API calls go on, page-table and IOTLB work stops.
group=$(basename "$(readlink -f /sys/bus/pci/devices/"$nvme_pci"/iommu_group)")
original=$(cat /sys/kernel/iommu_groups/"$group"/type)
echo "$nvme_pci" >/sys/bus/pci/drivers/nvme/unbind
echo identity >/sys/kernel/iommu_groups/"$group"/type
echo "$nvme_pci" >/sys/bus/pci/drivers/nvme/bind
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/nvme0n1 ] && break; sleep 0.5; done
cat /sys/kernel/iommu_groups/"$group"/type >"$out/identity-type"
"$iommutop" record --json "$out/identity.json" -- \
	dd if=/dev/nvme0n1 of=/dev/null bs=4k count=500 iflag=direct 2>"$out/identity.err"
echo $? >"$out/identity.rc"
echo "$nvme_pci" >/sys/bus/pci/drivers/nvme/unbind
echo "$original" >/sys/kernel/iommu_groups/"$group"/type
echo "$nvme_pci" >/sys/bus/pci/drivers/nvme/bind
cat /sys/kernel/iommu_groups/"$group"/type >"$out/restored-type"
exit 0
