#!/bin/sh
# Runs inside a lab guest: `record` gives the shell back once its report is written,
# and the probes detach behind it. Usage: detach.sh IOMMUTOP OUTDIR
# Two recordings of 2000 direct 4 KiB NVMe reads with the default links (on 7.3 multi-function
# links and per-function links, which both detach behind), the second started the moment the
# first returned (its programs still detaching: the second waits for that before attaching, and
# says so at -v). Writes in OUTDIR:
#   first.json, second.json (+ .rc, .err)   the reports
#   first.reads, second.reads               the block layer's reads of nvme0n1 over each
#   first.prompt_s                          seconds from the report file's last write to the
#                                           shell getting the first record's exit status
#   progs-gone-after_s                      seconds after the second record returned until
#                                           bpftool showed none of our programs ("never" if not
#                                           within 60 s; progs-left.txt then lists them)
#   bpftool.rc, bpftool.err                 bpftool's own status (no answer is not none left)
set -u
iommutop=$1
out=$2
mkdir -p "$out"
now() { date +%s.%N; }
reads() { awk '{ print $1 }' /sys/block/nvme0n1/stat; }
# Our programs are named <family>__<hook>__<tier>; bpftool shows their first 15 characters.
ours() {
	bpftool prog show >"$out/progs-all.txt" 2>"$out/bpftool.err"
	echo $? >"$out/bpftool.rc"
	grep -E ' name (dma|iommu|iova|iotlb|completion|track|multi)__' "$out/progs-all.txt"
}

# record NAME: one recording of dd; its block-layer reads, and when the shell had it back. The
# report is written in the guest's own /tmp first: OUTDIR is the host's file system, whose
# times are the host's clock, not the guest's.
record() {
	before=$(reads)
	"$iommutop" -v record --json "/tmp/$1.json" -- \
		dd if=/dev/nvme0n1 of=/dev/null bs=4k count=2000 iflag=direct 2>"$out/$1.err"
	echo $? >"$out/$1.rc"
	returned=$(now)
	echo $(($(reads) - before)) >"$out/$1.reads"
}

record first
echo "$returned - $(stat -c %.9Y /tmp/first.json)" | bc >"$out/first.prompt_s"
record second
second_returned=$returned
cp /tmp/first.json /tmp/second.json "$out/"
# A liveness bound, not the speed target: the attach-and-detach goal is bench/attach's, measured
# with nothing else running (CI boots three guests at once on two cores, and every link's detach
# waits for all of a guest's vCPUs).
deadline=$(echo "$second_returned + 60" | bc)
while ours >"$out/progs-left.txt" && [ "$(echo "$(now) < $deadline" | bc)" = 1 ]; do
	sleep 0.2
done
if [ -s "$out/progs-left.txt" ]; then
	echo never >"$out/progs-gone-after_s"
else
	echo "$(now) - $second_returned" | bc >"$out/progs-gone-after_s"
fi
exit 0
