# Shared by the guest scripts: the controller, iommutop, result checks.
# Each check prints "ok NAME" or "not ok NAME: why"; the Rust test reads them.
IOMMUTOP=$1
OUT=$2
mkdir -p "$OUT"
PCI=$(for d in /sys/bus/pci/devices/*; do [ "$(cat "$d/class")" = 0x010802 ] && basename "$d"; done | head -n 1)
NS=/dev/nvme0n1

ok() { echo "ok $1"; }
notok() { echo "not ok $1: $2"; }

# vfio ARGS...: iommutop's vfio-nvme workload.
vfio() { "$IOMMUTOP" workload vfio-nvme "$@"; }

# run NAME ARGS...: the workload's stdout, stderr and status land in $OUT/NAME.{out,err,rc}.
run() {
	_run=$1
	shift
	vfio "$@" --json "$OUT/$_run.json" >"$OUT/$_run.out" 2>"$OUT/$_run.err"
	echo $? >"$OUT/$_run.rc"
}

rc() { cat "$OUT/$1.rc"; }

expect_rc() {
	if [ "$(rc "$1")" = "$2" ]; then ok "$1 exits $2"; else notok "$1 exits $2" "got $(rc "$1"): $(cat "$OUT/$1.err")"; fi
}

expect_err() {
	if grep -q -- "$2" "$OUT/$1.err"; then ok "$1 says $2"; else notok "$1 says $2" "$(cat "$OUT/$1.err")"; fi
}

expect_out() {
	if grep -q -- "$2" "$OUT/$1.out"; then ok "$1 prints $2"; else notok "$1 prints $2" "$(cat "$OUT/$1.out" "$OUT/$1.err")"; fi
}

# restored NAME: the controller is on nvme again, its namespace reads, huge pages are back.
restored() {
	driver=$(basename "$(readlink "/sys/bus/pci/devices/$PCI/driver")")
	if [ "$driver" = nvme ]; then ok "$1: $PCI bound to nvme"; else notok "$1: $PCI bound to nvme" "driver is $driver"; fi
	override=$(cat "/sys/bus/pci/devices/$PCI/driver_override")
	if [ "$override" = "(null)" ]; then ok "$1: driver_override cleared"; else notok "$1: driver_override cleared" "$override"; fi
	if dd if=$NS of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null; then ok "$1: $NS reads"; else notok "$1: $NS reads" "dd failed"; fi
	huge=$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)
	if [ "$huge" = 0 ]; then ok "$1: nr_hugepages back to 0"; else notok "$1: nr_hugepages back to 0" "$huge"; fi
	if ! grep -qs "$PCI" /run/iommutop/*.json; then ok "$1: no record left"; else notok "$1: no record left" "$(grep -ls "$PCI" /run/iommutop/*.json)"; fi
}

# The worker's pid once it runs (empty after 30 s without one: a bound on the wait, not a speed).
worker_pid() {
	i=0
	while [ $i -lt 300 ]; do
		p=$(pgrep -f -- --iommutop-vfio-nvme-worker | head -n 1)
		[ -n "$p" ] && { echo "$p"; return; }
		sleep 0.1
		i=$((i + 1))
	done
}
