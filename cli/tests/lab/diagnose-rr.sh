#!/bin/sh
# Runs inside a lab guest: `iommutop diagnose` with no workload named, which picks TCP_RR between
# the two e1000e (the tcp-rr-1k profile, which moves them into two network namespaces and back);
# then, if asked, `diagnose --device nvme0n1` (which picks fio random reads) and the record of a
# few direct NVMe reads with the NVMe's group switched to identity.
# Usage: diagnose-rr.sh IOMMUTOP OUTDIR NAME [record-domain]
# Writes OUTDIR/NAME.json (the report), NAME.txt (stdout), NAME.err, NAME.rc.
set -u
iommutop=$1
out=$2
name=$3
# No workload named: diagnose picks TCP_RR (the tcp-rr-1k profile) for the two free NICs.
"$iommutop" diagnose --duration 5 --json "$out/$name.json" \
	>"$out/$name.txt" 2>"$out/$name.err"
echo $? >"$out/$name.rc"
[ "${4:-}" = record-domain ] || exit 0

# Asked about the NVMe: fio random reads of its namespace (the fio-randread-4k-qd32x4 profile).
"$iommutop" diagnose --device nvme0n1 --duration 2 --json "$out/nvme-pick.json" \
	>"$out/nvme-pick.txt" 2>"$out/nvme-pick.err"
echo $? >"$out/nvme-pick.rc"

nvme=$(basename "$(readlink -f /sys/class/nvme/nvme0/device)")
group=$(basename "$(readlink -f "/sys/bus/pci/devices/$nvme/iommu_group")")
cat "/sys/kernel/iommu_groups/$group/type" >"$out/domain-before"
"$iommutop" record --domain identity --device nvme0n1 --json "$out/domain.json" -- \
	dd if=/dev/nvme0n1 of=/dev/null bs=4k count=300 iflag=direct >"$out/domain.err" 2>&1
echo $? >"$out/domain.rc"
cat "/sys/kernel/iommu_groups/$group/type" >"$out/domain-after"
basename "$(readlink -f "/sys/bus/pci/devices/$nvme/driver")" >"$out/domain-driver-after"
[ -b /dev/nvme0n1 ] && echo yes >"$out/domain-disk-after"
exit 0
