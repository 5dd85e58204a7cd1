#!/bin/sh
# Runs in the arm64 lab (lab/run --arch arm64 --iommu smmuv3): arm64.sh IOMMUTOP OUT MODE, both
# paths relative to the project root the guest starts in. Writes what iommutop and the workloads
# say into OUT and prints key=value lines for the test (cli/tests/lab/arm64.rs).
#   strict  the probes (text and JSON) and the verifier's verdict on every program; a recording of 2,000 direct
#           4 KiB reads by dd with the block layer's own count; `diagnose`; then TCP_RR
#           (rr-strict.json)
#   lazy    TCP_RR alone (rr-lazy.json), booted with iommu.strict=0
set -u
iommutop=$1 out=$2 mode=$3
if [ "$mode" = strict ]; then
	"$iommutop" probes >"$out/probes.txt" 2>&1
	echo "probes_rc=$?"
	"$iommutop" probes --json >"$out/probes.json" 2>"$out/probes.err"
	"$iommutop" probes --verify >"$out/verify.txt" 2>&1
	echo "verify_rc=$?"
	before=$(awk '{ print $1 }' /sys/block/nvme0n1/stat)
	"$iommutop" record --json "$out/dd.json" -- \
		dd if=/dev/nvme0n1 of=/dev/null bs=4k count=2000 iflag=direct >"$out/dd.out" 2>&1
	echo "record_rc=$?"
	echo "block_reads=$(($(awk '{ print $1 }' /sys/block/nvme0n1/stat) - before))"
	"$iommutop" diagnose >"$out/diagnose.txt" 2>&1
	echo "diagnose_rc=$?"
fi
"$iommutop" run tcp-rr-1k --duration 5 --json "$out/rr-$mode.json" >"$out/rr-$mode.out" 2>&1
echo "rr_rc=$?"
