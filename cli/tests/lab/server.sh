#!/bin/sh
# Runs inside the server machine (lab/run --machine server, docs/lab.md): server.sh OUT MODE.
#   facts  what the machine is, as key=value lines on stdout (server.rs reads them): CPUs online,
#          each NVMe controller with its PCI address and blk-mq queues, each PCI network
#          function with its driver and IOMMU group, the igb PF's VFs
#   load   the workloads alone, without iommutop, to size the cells that run them under it:
#          fio 4 KiB random reads at QD32 x 4 jobs on each NVMe controller, and netperf TCP_RR
#          (1024/1024 bytes) between the igb's first two VFs, each in a network namespace of its
#          own, at once for SECONDS (default 5). fio's JSON goes to OUT/fio.json, netperf's
#          output to OUT/netperf.out; a summary as key=value lines on stdout
set -u
out=$1
mode=$2
mkdir -p "$out"

# group_of PCI-ADDRESS: the device's IOMMU group number, or "none".
group_of() {
	if [ -e "/sys/bus/pci/devices/$1/iommu_group" ]; then
		basename "$(readlink -f "/sys/bus/pci/devices/$1/iommu_group")"
	else
		echo none
	fi
}

# netdev_of PCI-ADDRESS: the network interface of a PCI function.
netdev_of() {
	ls "/sys/bus/pci/devices/$1/net" 2>/dev/null
}

now() {
	cut -d' ' -f1 /proc/uptime
}

facts() {
	echo "cpus_online=$(grep -c ^processor /proc/cpuinfo)"
	for c in /sys/class/nvme/nvme*; do
		[ -e "$c" ] || continue
		name=${c##*/}
		address=$(basename "$(readlink -f "$c/device")")
		queues=0
		for q in /sys/block/"$name"n*/mq/*; do [ -e "$q" ] && queues=$((queues + 1)); done
		echo "nvme=$name $address $queues $(group_of "$address")"
	done
	for n in /sys/class/net/*; do
		[ -e "$n/device" ] || continue
		address=$(basename "$(readlink -f "$n/device")")
		driver=$(basename "$(readlink -f "$n/device/driver")")
		echo "nic=$address $driver ${n##*/} $(cat "$n/operstate") $(group_of "$address")"
	done
	for pf in /sys/bus/pci/drivers/igb/0000:*; do
		[ -e "$pf/sriov_numvfs" ] || continue
		echo "igb_pf=${pf##*/} $(cat "$pf/sriov_numvfs") $(cat "$pf/sriov_totalvfs")"
		for vf in "$pf"/virtfn*; do
			[ -e "$vf" ] && echo "igb_vf=${vf##*/} $(basename "$(readlink -f "$vf")")"
		done
	done
}

load() {
	seconds=${1:-5}
	pf=$(basename "$(readlink -f /sys/bus/pci/drivers/igb/0000:*)")
	vf0=$(basename "$(readlink -f "/sys/bus/pci/devices/$pf/virtfn0")")
	vf1=$(basename "$(readlink -f "/sys/bus/pci/devices/$pf/virtfn1")")
	a=$(netdev_of "$vf0") b=$(netdev_of "$vf1")
	if [ -z "$a" ] || [ -z "$b" ]; then
		echo "load: needs two igb VFs with a network interface (--vfs 2 or more)" >&2
		exit 1
	fi
	ip netns add lab-vf0 || exit 1
	ip netns add lab-vf1 || exit 1
	ip link set "$a" netns lab-vf0 || exit 1
	ip link set "$b" netns lab-vf1 || exit 1
	ip -n lab-vf0 addr add 10.79.0.1/24 dev "$a"
	ip -n lab-vf1 addr add 10.79.0.2/24 dev "$b"
	for ns in lab-vf0 lab-vf1; do ip -n $ns link set lo up; done
	ip -n lab-vf0 link set "$a" up
	ip -n lab-vf1 link set "$b" up
	ip netns exec lab-vf1 netserver -4 -L 10.79.0.2 -p 12870 -D >"$out/netserver.out" 2>&1 &
	server=$!
	# The VFs' links come up a few seconds after they are set up, and netserver needs a moment.
	i=0
	until ip netns exec lab-vf0 netperf -H 10.79.0.2 -L 10.79.0.1 -p 12870 -t TCP_RR -l 1 \
		>/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 30 ] || {
			echo "load: VF $vf0 cannot reach VF $vf1 after 30 tries" >&2
			kill $server
			exit 1
		}
		sleep 1
	done
	started=$(now)
	ip netns exec lab-vf0 netperf -H 10.79.0.2 -L 10.79.0.1 -p 12870 -t TCP_RR -l "$seconds" \
		-- -r 1024,1024 >"$out/netperf.out" 2>&1 &
	netperf=$!
	fio --output-format=json --output="$out/fio.json" --direct=1 --ioengine=libaio --rw=randread \
		--bs=4k --iodepth=32 --numjobs=4 --time_based=1 --runtime="$seconds" --group_reporting=1 \
		--name=nvme0 --filename=/dev/nvme0n1 --name=nvme1 --new_group --filename=/dev/nvme1n1 \
		>"$out/fio.out" 2>&1
	echo "fio_rc=$?"
	wait $netperf
	echo "netperf_rc=$?"
	ended=$(now)
	kill $server 2>/dev/null
	echo "wall_s=$(awk -v s="$started" -v e="$ended" 'BEGIN { printf "%.1f", e - s }')"
	python3 - "$out/fio.json" <<'PY'
import json, sys
for job in json.load(open(sys.argv[1]))["jobs"]:
    read = job["read"]
    print(f"fio_{job['jobname']}_reads={read['total_ios']} fio_{job['jobname']}_iops={read['iops']:.0f}")
PY
	echo "tcp_rr_per_s=$(awk 'NF == 6 && $1 ~ /^[0-9]+$/ { print $6 }' "$out/netperf.out")"
}

case $mode in
facts) facts ;;
load) load "${3:-5}" ;;
*)
	echo "server.sh: unknown mode '$mode'" >&2
	exit 2
	;;
esac
