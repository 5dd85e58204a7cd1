# Sourced by the lab's guest scripts (`. "$(dirname "$0")/guest-lib.sh"`): progress on stderr,
# which lab/run passes on as it comes, so that a guest killed at its timeout still shows how far
# its script got; and waits with deadlines that, when one runs out, say what every process was
# doing (state, wait channel, kernel stack) before the script fails.

guest_script=${0##*/}

uptime_s() {
	cut -d' ' -f1 /proc/uptime
}

# deadline_in SECONDS: the uptime, in whole seconds, SECONDS from now; past DEADLINE: whether
# it has come.
deadline_in() {
	echo $(($(cut -d. -f1 /proc/uptime) + $1))
}
past() {
	[ "$(cut -d. -f1 /proc/uptime)" -ge "$1" ]
}

# say MESSAGE: on stderr, and appended to $steps when the script names a file there (the steps'
# times stay in the output directory when the test passes).
say() {
	printf '%s: %s s: %s\n' "$guest_script" "$(uptime_s)" "$*" | tee -a "${steps:-/dev/null}" >&2
}

# Every process: state, wait channel and age; then the kernel stack of each user process other
# than this shell (where the one that hangs waits, or what it runs, when it spins).
processes() {
	ps --ppid 2 -p 2 --deselect -o pid,ppid,stat,wchan:28,etimes,args | cut -c1-200 >&2
	for task in /proc/[0-9]*; do
		pid=${task#/proc/}
		command=$(tr '\0' ' ' <"$task/cmdline" 2>/dev/null | cut -c1-100)
		[ "$pid" != $$ ] && [ -n "$command" ] || continue
		printf '%s %s:\n' "$pid" "$command" >&2
		sed 's/^/    /' "$task/stack" >&2 2>/dev/null
	done
}

fail() {
	say "$*"
	processes
	exit 1
}

# await PID SECONDS WHAT: waits for PID, a child of this shell, at most SECONDS; returns its
# status, or fails naming WHAT and showing every process when the time runs out.
await() {
	deadline=$(deadline_in "$2")
	while running "$1"; do
		! past "$deadline" || fail "$3: still running after $2 s"
		sleep 0.2
	done
	wait "$1"
}

# running PID: whether PID, a child of this shell, is still running (not yet a zombie).
running() {
	state=$(ps -o stat= -p "$1") && [ "${state#Z}" = "$state" ]
}

# until_seen FILE PATTERN SECONDS WHAT [PID]: waits until FILE holds PATTERN, at most SECONDS;
# fails at once, with FILE, if PID (the process that writes FILE, a child) has ended first.
until_seen() {
	deadline=$(deadline_in "$3")
	until grep -q "$2" "$1" 2>/dev/null; do
		if [ -n "${5:-}" ] && ! running "$5"; then
			wait "$5"
			fail "$4: exited $? before '$2' was in $1: $(cat "$1")"
		fi
		! past "$deadline" || fail "$4: no '$2' in $1 after $3 s: $(cat "$1")"
		sleep 0.1
	done
}
