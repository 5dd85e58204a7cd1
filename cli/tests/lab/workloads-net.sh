#!/bin/sh
# Runs inside a lab guest: the tcp-rr-1k profile under the probes between the two
# e1000e (moved into two network namespaces and back), then the TLB sweep with 2 MiB pages
# reserved for the run and given back. Each step leaves its report, output and exit status in
# OUT. Usage: workloads-net.sh IOMMUTOP OUT
set -u
iommutop=$1
out=$2
step() {
	name=$1
	shift
	"$iommutop" "$@" >"$out/$name.out" 2>"$out/$name.err"
	echo $? >"$out/$name.rc"
}
ip -j addr show >"$out/links-before.json"
step tcp-rr run tcp-rr-1k --duration 5 --json "$out/tcp-rr.json"
ip -j addr show >"$out/links-after.json"
ip netns list >"$out/netns-after.txt"
cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages >"$out/hugepages-before"
step tlb workload tlb max_size=32m sizes_per_octave=1 time_per_size_ms=50 \
	reserve_hugepages=true --json "$out/tlb.json"
cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages >"$out/hugepages-after"
