#!/bin/sh
# Runs inside the server machine (lab/run --machine server, docs/lab.md): server.sh IOMMUTOP OUT MODE.
#   facts  what the machine is, as key=value lines in OUT/facts (server.rs reads them): the
#          machine, CPUs online, each NVMe controller with its PCI address, blk-mq queues and
#          IOMMU group, each PCI network function with its driver, name, state and IOMMU group,
#          the igb PF's VFs
#   load   the server's load cell: at once, fio 4 KiB random reads at QD32 x 4 jobs
#          (libaio, direct) on each NVMe controller, netperf TCP_RR between the e1000e pair and
#          TCP_RR between the igb's first two VFs (each pair in two network namespaces), one
#          recording with --cross-check. Leaves in OUT: load.json (the report), per NVMe disk D
#          load.D.fio.json, load.D.fio.rc and load.D.block-reads (the block layer's completed reads
#          over the recording), load.W.netperf.json and load.W.netperf.rc for W = e1000e and vf,
#          load.nic-packets-{before,after} (each PCI NIC's packets sent and received, the VFs'
#          read in their namespaces), load.interrupts-{before,after} (/proc/interrupts),
#          queues.txt (each NVMe hardware queue's CPUs), groups.txt
#   packets  each PCI NIC of the network namespace it runs in, with its packets sent and received
#          (load runs it in the VFs' namespaces)
#   views  the views of a server with every PCI function doing DMA (light_traffic):
#          `top --batch` with COLUMNS=80 and 200 (OUT/views.batch-W.txt), the live view in a
#          tmux pane of 200x50 and then of 80x40 (views.top-200x50.txt, views.top-80x40.txt,
#          views.top.rc), and the view's report (views.json)
set -u
iommutop=$1
out=$2
mode=$3
mkdir -p "$out"
steps=$out/$mode.steps
. "$(dirname "$0")/guest-lib.sh"

# How long each workload runs, in seconds (prepare sets them). fio runs longer than netperf so
# that it covers the netperf workloads' own setup (links up) before their transactions start.
rr_seconds=5 fio_seconds=8

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

# igb_vf N: the PCI address of the igb PF's VF N.
igb_vf() {
	for pf in /sys/bus/pci/drivers/igb/0000:*; do
		[ -e "$pf/virtfn$1" ] && basename "$(readlink -f "$pf/virtfn$1")"
	done
}

# igb_pf: the PCI address of the igb PF with VFs.
igb_pf() {
	for pf in /sys/bus/pci/drivers/igb/0000:*; do
		[ -e "$pf/virtfn0" ] && basename "$pf"
	done
}

facts() {
	echo "machine=${IOMMUTOP_LAB_MACHINE:-}"
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

# The kernel's own packet counters of each PCI NIC of this network namespace (sent +
# received), as "PCI-ADDRESS PACKETS" lines (support::exact::nic_packets reads them).
packets_here() {
	for n in /sys/class/net/*; do
		[ -e "$n/device" ] || continue
		echo "$(basename "$(readlink -f "$n/device")") \
$(($(cat "$n/statistics/tx_packets") + $(cat "$n/statistics/rx_packets")))"
	done
}

# The same for this namespace and the VFs' (ip netns exec mounts a /sys of the namespace's own).
nic_packets() {
	packets_here
	for ns in lab-vf0 lab-vf1; do
		ip netns exec "$ns" sh "$0" "$iommutop" "$out" packets
	done
}

# vf_namespace NAMESPACE NIC ADDRESS: NIC in a network namespace of its own, with ADDRESS, up,
# until its link is (30 s at most). IPv6 is off there: it would have the VF talk on its own
# (router solicitations, multicast listener reports) between the interface counters' snapshots
# and the recording.
vf_namespace() {
	ip netns add "$1" || exit 1
	ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
		net.ipv6.conf.default.disable_ipv6=1 || exit 1
	ip link set "$2" netns "$1" || exit 1
	ip -n "$1" link set lo up
	ip -n "$1" addr add "$3" dev "$2" || exit 1
	ip -n "$1" link set "$2" up || exit 1
	i=0
	until [ "$(ip netns exec "$1" cat "/sys/class/net/$2/carrier" 2>/dev/null)" = 1 ]; do
		i=$((i + 1))
		[ $i -le 300 ] || {
			echo "server.sh load: $2 has no link in $1 after 30 s" >&2
			exit 1
		}
		sleep 0.1
	done
}

# reads DISK: the block layer's completed reads of DISK so far.
reads() {
	awk '{ print $1 }' "/sys/block/$1/stat"
}

# prepare SECONDS: the VFs in their namespaces with a netserver, and $out/workloads.sh, whose
# functions run each workload for SECONDS (fio 3 s longer, see rr_seconds).
prepare() {
	rr_seconds=$1 fio_seconds=$(($1 + 3))
	vf0=$(igb_vf 0) vf1=$(igb_vf 1)
	a=$(netdev_of "$vf0") b=$(netdev_of "$vf1")
	if [ -z "$a" ] || [ -z "$b" ]; then
		echo "server.sh load: needs two igb VFs with a network interface (--vfs 2 or more)" >&2
		exit 1
	fi
	e0=$(netdev_of 0000:00:05.0) e1=$(netdev_of 0000:00:06.0)
	# The VFs go into their namespaces here, before the recording and before the disks are
	# busy: an igbvf whose link comes up waits 1 s at most for each of the PF's answers, and
	# with the 8 vCPUs busy on a loaded 2-core host it missed one (docs/lab.md) and had no link
	# within the netperf workload's wait. The e1000e pair goes in inside the recording, by the
	# netperf workload.
	vf_namespace lab-vf0 "$a" 10.79.0.1/24
	vf_namespace lab-vf1 "$b" 10.79.0.2/24
	ip netns exec lab-vf1 netserver -4 -L 10.79.0.2 -D >"$out/netserver.out" 2>&1 &
	netserver=$!
	i=0
	until ip netns exec lab-vf0 netperf -H 10.79.0.2 -L 10.79.0.1 -t TCP_RR -l 1 >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 30 ] || {
			echo "server.sh load: VF $vf0 ($a) cannot reach VF $vf1 ($b) after 30 tries" >&2
			exit 1
		}
		sleep 1
	done
	for q in /sys/block/nvme*n1/mq/*; do
		echo "${q#/sys/block/} $(cat "$q/cpu_list")"
	done >"$out/queues.txt"
	for group in /sys/kernel/iommu_groups/*; do
		echo "$(ls "$group/devices") $(cat "$group/type" 2>/dev/null)"
	done >"$out/groups.txt"
	# The workloads, in a file the recorded shell sources. Each controller's four jobs run one
	# on each of four CPUs, nvme0n1's on the even ones, nvme1n1's on the odd: with a hardware
	# queue per CPU (queues.txt) a read completes on the CPU that issued it, so the two
	# controllers' completions are spread over every CPU, not kept apart from their jobs.
	cat >"$out/workloads.sh" <<FUNCTIONS
fio_reads() { # DISK CPUS: fio's JSON goes to $out/load.DISK.fio.json
	fio --name="\$1" --filename="/dev/\$1" --direct=1 --ioengine=libaio --rw=randread --bs=4k \\
		--iodepth=32 --numjobs=4 --cpus_allowed="\$2" --cpus_allowed_policy=split \\
		--time_based=1 --runtime=$fio_seconds --output-format=json \\
		--output="$out/load.\$1.fio.json" >"$out/load.\$1.fio.out" 2>&1
	echo \$? >"$out/load.\$1.fio.rc"
}
netperf_rr() { # NAME CLIENT-NIC SERVER-NIC: netperf's numbers go to $out/load.NAME.netperf.json
	"$iommutop" workload netperf duration_s=$rr_seconds nics="\$2,\$3" \\
		--json "$out/load.\$1.netperf.json" >"$out/load.\$1.netperf.out" 2>&1
	echo \$? >"$out/load.\$1.netperf.rc"
}
netperf_vf() { # from lab-vf0 to the netserver in lab-vf1: $out/load.vf.netperf.json
	ip netns exec lab-vf0 "$iommutop" workload netperf host=10.79.0.2 duration_s=$rr_seconds \\
		--json "$out/load.vf.netperf.json" >"$out/load.vf.netperf.out" 2>&1
	echo \$? >"$out/load.vf.netperf.rc"
}
all_workloads() { # every device busy at once, until the last workload ends
	netperf_rr e1000e $e0 $e1 & netperf_vf &
	fio_reads nvme0n1 0,2,4,6 & fio_reads nvme1n1 1,3,5,7 &
	wait
}
FUNCTIONS
	# The igb PF and the VFs not in use are up in this namespace, and IPv6 would have them talk
	# on their own, copied by the NIC's switch to every VF (the VFs' own namespaces: above).
	sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
}

load() {
	prepare 5
	before0=$(reads nvme0n1) before1=$(reads nvme1n1)
	nic_packets >"$out/load.nic-packets-before"
	cat /proc/interrupts >"$out/load.interrupts-before"
	"$iommutop" record --cross-check --json "$out/load.json" -- \
		sh -c ". $out/workloads.sh && all_workloads" >"$out/load.out" 2>"$out/load.err"
	echo $? >"$out/load.rc"
	echo $(($(reads nvme0n1) - before0)) >"$out/load.nvme0n1.block-reads"
	echo $(($(reads nvme1n1) - before1)) >"$out/load.nvme1n1.block-reads"
	nic_packets >"$out/load.nic-packets-after"
	cat /proc/interrupts >"$out/load.interrupts-after"
	kill "$netserver" 2>/dev/null
}

# pane_shows_rows TEXT-FILE: whether a captured pane holds the device table with 12 rows or more.
pane_shows_rows() {
	[ "$(grep -o 'Devices [0-9]*' "$1" | head -n1 | cut -d' ' -f2)" -ge 12 ] 2>/dev/null
}

# light_traffic: every PCI function does a little DMA until stopped, and the guest's CPUs stay
# mostly idle, so that three iommutop attach in tens of seconds, not minutes (on a loaded host
# they took over 600 s with the load cell's workloads keeping all 8 vCPUs busy): fio reads 4 KiB
# at 100 IOPS from each NVMe disk, and each PCI NIC sends a UDP broadcast five times a second,
# a map where it is sent and a refill where the other NICs receive it (the guest has no ping).
# Leaves the workloads' processes in $traffic.
light_traffic() {
	sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
	traffic=
	for disk in nvme0n1 nvme1n1; do
		fio --name="$disk" --filename="/dev/$disk" --direct=1 --ioengine=psync --rw=randread \
			--bs=4k --rate_iops=100 --time_based=1 --runtime=1200 \
			>"$out/views.$disk.fio.out" 2>&1 &
		traffic="$traffic $!"
	done
	nics='' i=10
	for n in /sys/class/net/*; do
		[ -e "$n/device" ] || continue
		ip addr add "10.80.0.$i/24" dev "${n##*/}"
		ip link set "${n##*/}" up
		nics="$nics ${n##*/}"
		i=$((i + 1))
	done
	# shellcheck disable=SC2086 # one word a NIC
	python3 -c '
import socket, sys, time
senders = []
for nic in sys.argv[1:]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, nic.encode())
    senders.append(s)
while True:
    for s in senders:
        s.sendto(b"iommutop views", ("10.80.0.255", 9))
    time.sleep(0.2)
' $nics >"$out/views.broadcast.out" 2>&1 &
	traffic="$traffic $!"
}

views() {
	light_traffic
	# Three iommutop at once, each with its own probes: one after another each would also wait
	# for the last one's detaching.
	tm() { tmux -u -L iommutop-views -f /dev/null "$@"; }
	export LANG=C.UTF-8 TERM="${TERM:-xterm-256color}"
	tm new-session -d -x 200 -y 50 "$iommutop top --interval 2 --json $out/views.json \
		2>$out/views.top.err; echo \$? >$out/views.top.rc; sleep 600"
	batches=
	for width in 200 80; do
		COLUMNS=$width "$iommutop" top --batch -n 3 --interval 2 \
			>"$out/views.batch-$width.txt" 2>"$out/views.batch-$width.err" &
		batches="$batches $!"
	done
	# shellcheck disable=SC2086 # one word a process
	wait $batches
	say "top --batch at 200 and 80 columns done"
	pane=$out/views.top-200x50.txt
	deadline=$(deadline_in 240)
	until tm capture-pane -p >"$pane" && pane_shows_rows "$pane" || past "$deadline"; do
		sleep 1
	done
	# Two more intervals, so that every rate is of an interval with every function busy.
	sleep 5
	tm capture-pane -p >"$pane"
	tm resize-window -x 80 -y 40
	sleep 5
	tm capture-pane -p >"$out/views.top-80x40.txt"
	tm send-keys q
	deadline=$(deadline_in 120)
	until [ -s "$out/views.top.rc" ] || past "$deadline"; do
		sleep 0.5
	done
	tm kill-server
	say "top: $(cat "$out/views.top.rc" 2>/dev/null || echo 'no status after 120 s')"
	# shellcheck disable=SC2086 # one word a process
	kill $traffic
	wait
	say "views done"
}

case $mode in
facts) facts >"$out/facts" ;;
load) load ;;
views) views ;;
packets) packets_here ;;
*)
	echo "server.sh: unknown mode '$mode'" >&2
	exit 2
	;;
esac
