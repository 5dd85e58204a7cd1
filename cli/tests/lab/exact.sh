#!/bin/sh
# Runs inside a lab guest: work whose size an independent count knows, under iommutop.
# Each step leaves iommutop's report and the workload's own numbers in OUT.
#   exact.sh IOMMUTOP OUT concurrent   fio 4 KiB random reads on the NVMe (2 jobs, iodepth 16) and
#                                      netperf TCP_RR between the NICs at once, one recording
#   exact.sh IOMMUTOP OUT concurrent-one-slot
#                                      the same with one thread-id slot for every task
#                                      (IOMMUTOP_TASK_SLOTS=1): all but its holder keep their calls
#                                      in flight in the hash by thread id
#   exact.sh IOMMUTOP OUT load         the load cell: fio 4 KiB random reads at QD32 x 4
#                                      jobs (libaio, direct) on the NVMe and TCP_RR between the
#                                      NICs at once, one recording, with --cross-check
#   exact.sh IOMMUTOP OUT profile      the load cell under perf's sampling profile of every CPU
#                                      (a second opinion on the times), folded into
#                                      OUT/profile.perf.folded, with fio at QD1 x 8 jobs (below)
#   exact.sh IOMMUTOP OUT profile-dma  the same with only the DMA API's points attached
#   exact.sh IOMMUTOP OUT rr           TCP_RR alone
#   exact.sh IOMMUTOP OUT multiseg     the fio-read-128k-qd128 profile; fio random reads of 4k-256k
#   exact.sh IOMMUTOP OUT dd           2000 direct 4 KiB reads by dd; then the same with only the
#                                      dma_map and dma_unmap points attached (--points)
# Every mode also writes the IOMMU groups' devices and domain types to OUT/groups.txt.
set -u
iommutop=$1
out=$2
mode=$3
# The workloads, in a file the recorded shell sources too.
cat >"$out/workloads.sh" <<FUNCTIONS
fio_reads() { # NAME SECONDS FIO-ARGS...: fio's JSON goes to $out/NAME.fio.json
	name=\$1 seconds=\$2
	shift 2
	fio --name="\$name" --filename=/dev/nvme0n1 --direct=1 --ioengine=libaio --time_based=1 \\
		--runtime="\$seconds" --output-format=json --output="$out/\$name.fio.json" "\$@" \\
		>"$out/\$name.fio.out" 2>&1
}
netperf_rr() { # NAME SECONDS: netperf's numbers go to $out/NAME.netperf.json
	"$iommutop" workload netperf duration_s="\$2" nics=eth0,eth1 --json "$out/\$1.netperf.json" \\
		>"$out/\$1.netperf.out" 2>&1
}
FUNCTIONS
# record NAME SHELL-COMMANDS: iommutop's report of them goes to OUT/NAME.json, the block layer's
# own count of the NVMe's completed reads over the recording to OUT/NAME.block-reads, and the
# NICs' own packet counters before and after to OUT/NAME.nic-packets-{before,after}.
# The kernel's own packet counters of each NIC, as "PCI-ADDRESS PACKETS SENT RECEIVED" lines
# (PACKETS = SENT + RECEIVED).
nic_packets() {
	for n in /sys/class/net/eth*; do
		tx=$(cat "$n/statistics/tx_packets") rx=$(cat "$n/statistics/rx_packets")
		echo "$(basename "$(readlink -f "$n/device")") $((tx + rx)) $tx $rx"
	done
}
# RECORD_ARGS: more arguments for `iommutop record`.
record() {
	before=$(awk '{ print $1 }' /sys/block/nvme0n1/stat)
	nic_packets >"$out/$1.nic-packets-before"
	# shellcheck disable=SC2086 # RECORD_ARGS is a list of arguments
	"$iommutop" record ${RECORD_ARGS:-} --json "$out/$1.json" -- sh -c ". $out/workloads.sh; $2" \
		>"$out/$1.out" 2>"$out/$1.err"
	echo $? >"$out/$1.rc"
	echo $(($(awk '{ print $1 }' /sys/block/nvme0n1/stat) - before)) >"$out/$1.block-reads"
	nic_packets >"$out/$1.nic-packets-after"
}
for group in /sys/kernel/iommu_groups/*; do
	echo "$(ls "$group/devices") $(cat "$group/type" 2>/dev/null)"
done >"$out/groups.txt"
case $mode in
concurrent | concurrent-one-slot)
	[ "$mode" = concurrent ] || export IOMMUTOP_TASK_SLOTS=1
	record concurrent "netperf_rr concurrent 6 & fio_reads concurrent 6 --rw=randread --bs=4k --iodepth=16 --numjobs=2; wait"
	;;
load)
	# With the kernel's own events beside the probes: the NICs' maps' independent truth.
	RECORD_ARGS="--cross-check" \
		record load "netperf_rr load 6 & fio_reads load 6 --rw=randread --bs=4k --iodepth=32 --numjobs=4; wait"
	;;
profile | profile-dma)
	# The load cell under a sampling profile (a second opinion on the times): perf
	# samples every CPU's call path at a fixed rate while the workloads run, and its samples are
	# folded here, where the guest's symbols are. profile-dma attaches only the DMA API's points,
	# so that a call's time holds no other probe's work to take out.
	[ "$mode" = profile ] || RECORD_ARGS="--points dma_map,dma_unmap"
	# fio keeps 8 reads in flight as 8 jobs at QD1, not 4 jobs at QD32: these cells run on the
	# instruction clock, where QEMU's TCG has one thread, and there QEMU 7.2's NVMe behind its
	# VT-d loses reads submitted several to a doorbell (QD4 x 1 already; QD1 x 8 never, in 6
	# runs): the guest's timeout aborts them after 30 s (docs/lab.md, "Timing by instructions").
	# perf writes its data in the guest's own file system: on 7.3 its writes to the project's
	# 9p share fail (EFAULT: "failed to write perf data, error: Bad address").
	perf_data=$(mktemp /tmp/profile.perf.data.XXXXXX)
	record profile "perf record -e cpu-clock -F 1999 -a -g -o $perf_data -- \
sh -c '. $out/workloads.sh; netperf_rr profile 6 & fio_reads profile 6 --rw=randread --bs=4k \
--iodepth=1 --numjobs=8; wait' >$out/profile.perf.out 2>&1"
	perf script -i "$perf_data" -F cpu,time,period,ip,sym 2>"$out/profile.perf.err" |
		python3 "$(dirname "$0")/../../../scripts/lib/profile_fold.py" >"$out/profile.perf.folded"
	rm -f "$perf_data"
	;;
rr)
	record rr "netperf_rr rr 6"
	;;
multiseg)
	# A request is linked segment by segment only where fio's buffer is not physically
	# contiguous. Debian's kernels back anonymous memory with 2 MiB pages (THP "always"), and a
	# read of at most 256 KiB inside one is a single segment, mapped with dma_map_page: CI's
	# 6.18 mixed cell once ran 20,416 reads with no multi-segment request at all. 4 KiB pages
	# leave fio's buffers scattered, as on a machine whose memory has been in use for a while.
	echo never >/sys/kernel/mm/transparent_hugepage/enabled
	"$iommutop" run fio-read-128k-qd128 --duration 4 --set filename=/dev/nvme0n1 \
		--json "$out/read-128k.json" >"$out/read-128k.out" 2>"$out/read-128k.err"
	echo $? >"$out/read-128k.rc"
	record mixed "fio_reads mixed 4 --rw=randread --bsrange=4k-256k --iodepth=32"
	;;
dd)
	record dd "dd if=/dev/nvme0n1 of=/dev/null bs=4k count=2000 iflag=direct"
	RECORD_ARGS="--points dma_map,dma_unmap" \
		record dd-points "dd if=/dev/nvme0n1 of=/dev/null bs=4k count=2000 iflag=direct"
	;;
*)
	echo "exact.sh: unknown mode '$mode'" >&2
	exit 2
	;;
esac
