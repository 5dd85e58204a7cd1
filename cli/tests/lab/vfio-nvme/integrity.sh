#!/bin/sh
# Guest side of the data-integrity lab test: usage integrity.sh IOMMUTOP OUTDIR.
# A pattern is written over 3,000 random 4 KiB blocks and read back and verified, at QD1 and
# QD32 x 2 threads, with 4 KiB and 2 MiB pages; the controller is back on nvme after each run.
. "$(dirname "$0")/common.sh"
echo "controller $PCI"

# Nothing was written yet: a verified read must fail, or verification proves nothing.
run fresh-read --device "$PCI" --bind --pattern randread --verify --ios 200 --seed 1
expect_rc fresh-read 1
expect_err fresh-read "data verification failed"
restored fresh-read

seed=10
for combo in "qd1-4k 1 1 4k" "qd1-2m 1 1 2m" "qd32x2-4k 32 2 4k" "qd32x2-2m 32 2 2m"; do
	set -- $combo
	c=$1 qd=$2 threads=$3 page=$4
	seed=$((seed + 1))
	common="--device $PCI --bind --reserve-hugepages --verify --ios 3000 --qd $qd --threads $threads --page-size $page --seed $seed"
	run "$c-write" $common --pattern randwrite --allow-write
	expect_rc "$c-write" 0
	restored "$c-write"
	run "$c-read" $common --pattern randread --ccdf-csv "$OUT/$c-read.csv"
	expect_rc "$c-read" 0
	expect_out "$c-read" "0 mismatched"
	restored "$c-read"
done

# A read with another seed than the write finds every block different.
run wrong-seed --device "$PCI" --bind --pattern randread --verify --ios 100 --seed 999
expect_rc wrong-seed 1
expect_err wrong-seed "blocks differ"
if grep -q "\([0-9]*\) of \1 blocks differ" "$OUT/wrong-seed.err"; then ok "wrong-seed: every block differs"; else notok "wrong-seed: every block differs" "$(cat "$OUT/wrong-seed.err")"; fi
restored wrong-seed

# Controller errors come back with the specification's status names.
run bad-nsid --device "$PCI" --bind --nsid 4000 --ios 10
expect_rc bad-nsid 1
expect_err bad-nsid "Invalid Namespace or Format"
restored bad-nsid

# 1 GiB pages cannot be had at run time here: the error says how to get them.
run no-1g --device "$PCI" --bind --page-size 1g --ios 10
expect_rc no-1g 3
expect_err no-1g "hugepagesz=1G hugepages=1"
restored no-1g

# With --reserve-hugepages the tool tries to reserve one at run time: either the run works on
# 1 GiB pages or it fails with the same advice; either way the reservation is put back.
run try-1g --device "$PCI" --bind --reserve-hugepages --page-size 1g --ios 100
if [ "$(rc try-1g)" = 0 ]; then
	ok "try-1g: ran on 1 GiB pages"
elif grep -q "hugepagesz=1G" "$OUT/try-1g.err"; then
	ok "try-1g: refused with the kernel command line advice"
else
	notok "try-1g" "$(cat "$OUT/try-1g.err")"
fi
g=$(cat /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages)
if [ "$g" = 0 ]; then ok "try-1g: 1 GiB nr_hugepages back to 0"; else notok "try-1g: 1 GiB nr_hugepages back to 0" "$g"; fi
restored try-1g

# A vfio-nvme profile under the probes: the driver's numbers and its set-up mappings in one report.
"$IOMMUTOP" run vfio-nvme-qd1 --duration 2 --set "device=$PCI" --json "$OUT/profile-qd1.json" \
	>"$OUT/profile-qd1.out" 2>"$OUT/profile-qd1.err"
echo $? >"$OUT/profile-qd1.rc"
expect_rc profile-qd1 0
restored profile-qd1

# The IOTLB sweep over both page sizes, with its plot.
run sweep --device "$PCI" --bind --reserve-hugepages --mode iotlb-sweep --page-size 4k,2m --pages 4k=1024,2m=16 --ios 300 --svg "$OUT/sweep.svg"
expect_rc sweep 0
expect_out sweep "page size 2m"
restored sweep
echo done
