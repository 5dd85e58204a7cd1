#!/bin/sh
# Runs inside a lab guest: `iommutop serve` scraped every 2 s by Debian's Prometheus
# on loopback while dd does 2000 direct 4 KiB reads of the NVMe. Leaves in OUT:
#   maps.json        the Prometheus HTTP API's answer for iommutop_dma_maps_total of the NVMe,
#                    once a scrape has stored the reads (or after 60 s)
#   up.json          the last scrape's outcome; scrape-duration.json the slowest of the minute
#                    (printed by the test, not judged: a scrape's latency is bench/serve-soak's)
#   scrape.txt       one scrape of /metrics; promtool.out and promtool.rc: `promtool check metrics`
#   serve.rc         serve's exit status after SIGINT; serve.err its stderr
#   progs-left.txt   iommutop's BPF programs still loaded after serve exited (should be empty);
#                    bpftool.rc and bpftool.err: bpftool's exit status and stderr (no answer is
#                    not zero programs)
#   ready.rc         0 when serve and Prometheus both came up
#   rebind-*.rc, driver-vfio.txt, scrape-rebound.txt, scrape-after.txt, stat-rebound,
#   stat-after, dd-rebound.*, *-b2b*: the NVMe rebound to vfio-pci and back (below); each
#   scrape-*.txt.all the whole scrape it was cut from
set -u
iommutop=$1
out=$2
steps=$out/steps
# Waits bounded by the clock, not by counted turns: a loaded guest's turn can take seconds.
. "$(dirname "$0")/guest-lib.sh"
listen=127.0.0.1:9464
nvme=$(basename "$(readlink -f /sys/class/nvme/nvme0/device)")

# Our programs are named <family>__<hook>__<tier>; bpftool shows the first 15 characters.
# Writes them to OUT/progs-left.txt and bpftool's own exit status to OUT/bpftool.rc.
our_programs() {
	bpftool prog show >"$out/progs-all.txt" 2>"$out/bpftool.err"
	echo $? >"$out/bpftool.rc"
	# grep's exit 1 (no line matched) is the answer hoped for; the test reads the file.
	grep -E ' name (dma|iommu|iova|iotlb|completion|track|multi)__' "$out/progs-all.txt" >"$out/progs-left.txt"
}

# wait_for URL SECONDS: 0 once URL answers 200; 1, said, when SECONDS have passed first.
wait_for() {
	deadline=$(deadline_in "$2")
	until curl -sf -o /dev/null "$1"; do
		if past "$deadline"; then
			say "no answer from $1 after $2 s"
			return 1
		fi
		sleep 0.5
	done
	say "$1 answers"
}

# query PROMQL FILE: Prometheus's answer to PROMQL, in FILE.
query() {
	curl -sf "http://127.0.0.1:9090/api/v1/query" --data-urlencode "query=$1" >"$2"
}

# stored PROMQL SECONDS [FILE]: 0 once Prometheus answers PROMQL with a series (the answer in
# FILE); 1, said, when SECONDS have passed first. A scrape that Prometheus gave up on (2 s) only
# delays the next one's data: the bound is a guard against a hang, not a speed.
stored() {
	deadline=$(deadline_in "$2")
	answer=${3:-$out/stored.json}
	until query "$1" "$answer" && grep -q '"result":\[{' "$answer"; do
		if past "$deadline"; then
			say "no series for $1 after $2 s"
			return 1
		fi
		sleep 0.5
	done
	say "stored: $1"
}

"$iommutop" serve --listen "$listen" >"$out/serve.out" 2>"$out/serve.err" &
serve=$!

cat >"$out/prometheus.yml" <<CONFIG
global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
scrape_configs:
  - job_name: iommutop
    static_configs:
      - targets: ['$listen']
CONFIG
# Prometheus mmaps its files, which the 9p share under OUT refuses (EINVAL): its storage is a
# tmpfs mounted at OUT/tsdb, inside the guest only.
mkdir -p "$out/tsdb" && mount -t tmpfs -o size=256m prometheus-tsdb "$out/tsdb"
prometheus --config.file="$out/prometheus.yml" --storage.tsdb.path="$out/tsdb" \
	--web.listen-address=127.0.0.1:9090 >"$out/prometheus.log" 2>&1 &
prometheus=$!

# Loading the probes takes 6-8 s under emulation: start the reads only once serve answers.
wait_for "http://$listen/healthz" 120 && wait_for "http://127.0.0.1:9090/-/ready" 60
echo $? >"$out/ready.rc"
# One scrape before the reads, so the query sees the counter grow (the NVMe's series appears
# with its first map).
stored 'up{job="iommutop"} == 1' 60

dd if=/dev/nvme0n1 of=/dev/null bs=4k count=2000 iflag=direct >"$out/dd.out" 2>&1
echo $? >"$out/dd.rc"

# A scrape after the reads: what Prometheus stored of them (what it has, if not all of them).
stored "iommutop_dma_maps_total{device=\"$nvme\"} >= 2000" 60 "$out/maps.json" ||
	query "iommutop_dma_maps_total{device=\"$nvme\"}" "$out/maps.json"
echo "$nvme" >"$out/nvme.txt"
curl -sf "http://127.0.0.1:9090/api/v1/query" \
	--data-urlencode 'query=up{job="iommutop"}' >"$out/up.json"
curl -sf "http://127.0.0.1:9090/api/v1/query" \
	--data-urlencode 'query=max_over_time(scrape_duration_seconds{job="iommutop"}[1m])' \
	>"$out/scrape-duration.json"
curl -sf "http://$listen/metrics" >"$out/scrape.txt"
promtool check metrics <"$out/scrape.txt" >"$out/promtool.out" 2>&1
echo $? >"$out/promtool.rc"

# Devices that come and go: the NVMe goes to vfio-pci for longer than serve's periodic re-read of
# the devices (10 s, so that one happens meanwhile) and back to nvme. Then a scrape
# (scrape-rebound.txt), 1000 direct reads, a scrape (scrape-after.txt): each the NVMe's
# iommutop_dma_maps_total series, with the block layer's reads of nvme0n1 at that moment
# (stat-rebound, stat-after).
modprobe vfio-pci 2>/dev/null
rebind() { # DRIVER-OVERRIDE ("" gives the controller back to nvme)
	echo "$nvme" >"/sys/bus/pci/devices/$nvme/driver/unbind" &&
		echo "$1" >"/sys/bus/pci/devices/$nvme/driver_override" &&
		echo "$nvme" >/sys/bus/pci/drivers_probe
}
nvme_back() { # waits up to 20 s for the namespace, then for the kernel's scan of it
	deadline=$(deadline_in 20)
	until [ -b /dev/nvme0n1 ] || past "$deadline"; do
		sleep 0.1
	done
	[ -b /dev/nvme0n1 ] || say "no /dev/nvme0n1 20 s after the rebind to nvme"
	sleep 1
}
nvme_series() { # FILE: the NVMe's series; FILE.all the whole scrape
	curl -sf "http://$listen/metrics" >"$1.all"
	grep "^iommutop_dma_maps_total{device=\"$nvme\"" "$1.all" >"$1"
}
rebind vfio-pci
echo $? >"$out/rebind-vfio.rc"
basename "$(readlink "/sys/bus/pci/devices/$nvme/driver")" >"$out/driver-vfio.txt"
sleep 12
rebind ""
echo $? >"$out/rebind-nvme.rc"
nvme_back # the kernel's scan of the namespace it found again
nvme_series "$out/scrape-rebound.txt"
awk '{ print $1 }' /sys/block/nvme0n1/stat >"$out/stat-rebound"
dd if=/dev/nvme0n1 of=/dev/null bs=4k count=1000 iflag=direct >"$out/dd-rebound.out" 2>&1
echo $? >"$out/dd-rebound.rc"
nvme_series "$out/scrape-after.txt"
awk '{ print $1 }' /sys/block/nvme0n1/stat >"$out/stat-after"

# Back to back: vfio-pci and at once nvme again, faster than any re-read of sysfs; then 1000
# reads (stat-b2b-*, scrape-b2b.txt). The maps of each binding are the kernel's to label.
rebind vfio-pci && rebind ""
echo $? >"$out/rebind-b2b.rc"
nvme_back
awk '{ print $1 }' /sys/block/nvme0n1/stat >"$out/stat-b2b-before"
dd if=/dev/nvme0n1 of=/dev/null bs=4k count=1000 iflag=direct >"$out/dd-b2b.out" 2>&1
echo $? >"$out/dd-b2b.rc"
nvme_series "$out/scrape-b2b.txt"
awk '{ print $1 }' /sys/block/nvme0n1/stat >"$out/stat-b2b-after"

kill "$prometheus"
wait "$prometheus"
kill -INT "$serve"
wait "$serve"
echo $? >"$out/serve.rc"
our_programs
umount "$out/tsdb"
exit 0
