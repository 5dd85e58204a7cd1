#!/bin/sh
# Runs inside a lab guest: what one kernel of an era shows.
#   eras.sh IOMMUTOP OUT counts          probes --json, and 2000 direct 4 KiB reads of the NVMe
#   eras.sh IOMMUTOP OUT rr NAME         TCP_RR (profile tcp-rr-1k) between the NICs: OUT/NAME.json
#   eras.sh IOMMUTOP OUT baseline OLD    diagnose --baseline OUT/OLD.json: OUT/diagnose.{txt,json}
# Each command's status goes to OUT/STEP.rc and its stderr to OUT/STEP.err.
set -u
iommutop=$1
out=$2
mode=$3
mkdir -p "$out"
uname -r >"$out/release"
case $mode in
counts)
	"$iommutop" probes --json >"$out/probes.json" 2>"$out/probes.err"
	echo $? >"$out/probes.rc"
	"$iommutop" record --json "$out/dd.json" -- \
		dd if=/dev/nvme0n1 of=/dev/null bs=4k count=2000 iflag=direct 2>"$out/dd.err"
	echo $? >"$out/dd.rc"
	;;
rr)
	"$iommutop" run tcp-rr-1k --duration 3 --json "$out/$4.json" >"$out/$4.out" 2>"$out/$4.err"
	echo $? >"$out/$4.rc"
	;;
baseline)
	"$iommutop" diagnose --baseline "$out/$4.json" --json "$out/diagnose.json" \
		>"$out/diagnose.txt" 2>"$out/diagnose.err"
	echo $? >"$out/diagnose.rc"
	;;
*)
	echo "eras.sh: unknown mode $mode" >&2
	exit 2
	;;
esac
