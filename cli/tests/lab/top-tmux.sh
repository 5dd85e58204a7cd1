#!/bin/sh
# Runs inside a lab guest: `iommutop top` in a detached tmux pane (120x40) while dd reads the
# NVMe with O_DIRECT; captures the pane once the NVMe row shows a non-zero map rate (or after
# 90 s), sends q, and records how the view ended.
# Usage: top-tmux.sh IOMMUTOP OUTDIR
# Writes into OUTDIR: nvme-pci, pane-attached.txt, pane.txt, quit-ms, rc, stty, alternate,
# top.json, top.err; the host-side test (cli/tests/lab/tui.rs) asserts on them.
set -u
iommutop=$1
out=$2
mkdir -p "$out"
steps=$out/steps
# Waits bounded by the clock, not by counted turns: a loaded guest's turn can take seconds.
. "$(dirname "$0")/guest-lib.sh"
export LANG=C.UTF-8 TERM="${TERM:-xterm-256color}"
tm() { tmux -u -L iommutop-lab -f /dev/null "$@"; }

nvme_pci=$(basename "$(readlink -f /sys/class/nvme/nvme0/device)")
echo "$nvme_pci" >"$out/nvme-pci"

tm new-session -d -x 120 -y 40 \
	"$iommutop top --json $out/top.json 2>$out/top.err; echo \$? >$out/rc; stty -a >$out/stty; sleep 600"

# Probes take several seconds to attach under TCG: wait for the first frame (at most 120 s).
deadline=$(deadline_in 120)
until tm capture-pane -p >"$out/pane-attached.txt" && grep -q "sort MAPS/s" "$out/pane-attached.txt"; do
	past "$deadline" && break
	sleep 1
done
grep -q "sort MAPS/s" "$out/pane-attached.txt" && say "first frame" || say "no first frame after 120 s"

dd if=/dev/nvme0n1 of=/dev/null bs=4k iflag=direct 2>"$out/dd.err" &
dd_pid=$!

# The NVMe's row with a map rate other than 0 (5th column: DEVICE DRIVER NAMES DOMAIN MAPS/s).
nvme_mapping() {
	grep "^│$nvme_pci " "$out/pane.txt" | awk '$5 != "0" { found = 1 } END { exit !found }'
}
deadline=$(deadline_in 90)
until past "$deadline"; do
	sleep 1
	tm capture-pane -p >"$out/pane.txt"
	nvme_mapping && break
done
nvme_mapping && say "the NVMe's row maps" || say "no map rate in the NVMe's row after 90 s"
# One more interval, so the capture holds a full interval of dd.
sleep 2
tm capture-pane -p >"$out/pane.txt"

tm send-keys q
# How long q takes to give the terminal back (the alternate screen left), in ms.
start=$(date +%s%N)
deadline=$(deadline_in 15)
while [ "$(tm display -p '#{alternate_on}')" = 1 ] && ! past "$deadline"; do
	sleep 0.05
done
echo $((($(date +%s%N) - start) / 1000000)) >"$out/quit-ms"
deadline=$(deadline_in 60)
until [ -s "$out/rc" ] || past "$deadline"; do
	sleep 0.5
done
say "top exited: $(cat "$out/rc" 2>/dev/null || echo 'no status after 60 s')"
sleep 1
tm display -p '#{alternate_on}' >"$out/alternate"
kill "$dd_pid" 2>/dev/null
wait "$dd_pid" 2>/dev/null
tm kill-server
exit 0
