# shellcheck shell=bash
# What the guest kernel said on its console (lab/run's console.log): trouble, when, and whose.
# Pure text processing (awk, grep), no state: lab/run sources it, and the host tests run it on
# the fixtures in cli/tests/fixtures/console/.

# The lines that are trouble: an oops or a trap's die line (`Oops: 0000 [#1]`, and before 6.7
# without the prefix: `int3: 0000 [#1]`, `double fault: 0000 [#1]`), a BUG, a warning, a panic,
# a process killed by a fault (a task that oopses dies by SIGSEGV, which is all its parent sees),
# a task blocked for minutes, an RCU stall. (ERE, for grep -E and awk; no {n} intervals, which
# Debian's mawk does not take.)
readonly CONSOLE_TROUBLE='Oops: |: [0-9a-f][0-9a-f][0-9a-f][0-9a-f] \[#[0-9]+\]|BUG: |kernel BUG at|WARNING: |general protection fault|segfault at |traps: |Kernel panic|blocked for more than|rcu.*detected stall'

# console_verdict LOG: one line saying whose the trouble in LOG is, then each trouble line with
# when the kernel printed it, `before` or `during` the command (the init's `lab-init: running
# the command at T s`; a line is during the command when its timestamp is T or later, or, with no
# timestamp, when it comes after that line; everything is `before` when the command never
# started). The first line is one of:
#   clean             no trouble
#   emulator LINE     the first trouble is a crash that only the emulator causes, LINE its die
#                     line: an `int3` oops (multi-threaded TCG running a breakpoint that the
#                     kernel's text patching had already taken out: a static key at boot, the
#                     probes' attach or detach), or a register dump whose EFLAGS no x86 CPU can
#                     hold (bit 1 clear, or bit 3, 5, 15 or 22 and up set: QEMU's state corrupted)
#   trouble           anything else: the kernel's own report, which fails the run
console_verdict() {
  # The pattern through the environment: awk -v would read its backslashes as escapes.
  LAB_TROUBLE_RE=$CONSOLE_TROUBLE awk '
    # Seconds of a "[  12.345678] ..." line, or -1.
    function stamp(line) {
      if (line !~ /^\[ *[0-9]+\.[0-9]+\]/) return -1
      sub(/^\[ */, "", line)
      sub(/\].*/, "", line)
      return line + 0
    }
    # Whether the hex number h (an EFLAGS) has a bit set that the CPU keeps clear, or bit 1,
    # which it keeps set, clear. By hex digit: no number in awk holds 64 bits exactly.
    function impossible_flags(h,    n, i, d, pos) {
      h = tolower(h)
      n = length(h)
      for (i = n; i >= 1; i--) {
        d = index("0123456789abcdef", substr(h, i, 1)) - 1
        if (d < 0) return 0
        pos = n - i # which digit: 0 holds bits 0-3
        if (pos == 0 && (int(d / 2) % 2 == 0 || int(d / 8) % 2 == 1)) return 1
        if (pos == 1 && int(d / 2) % 2 == 1) return 1
        if (pos == 3 && int(d / 8) % 2 == 1) return 1
        if (pos == 5 && d >= 4) return 1
        if (pos >= 6 && d != 0) return 1
      }
      return 0
    }
    function crash(line) {
      return line ~ /Oops: |: [0-9a-f][0-9a-f][0-9a-f][0-9a-f] \[#[0-9]+\]|traps: PANIC|Kernel panic/
    }
    {
      sub(/\r$/, "")
      text[NR] = $0
      if (!started && match($0, /lab-init: running the command at [0-9.]+ s/)) {
        started = NR
        split(substr($0, RSTART, RLENGTH), w, " ")
        start_time = w[6] + 0
      }
    }
    $0 ~ ENVIRON["LAB_TROUBLE_RE"] {
      n++
      line[n] = NR
    }
    END {
      if (!n) { print "clean"; exit }
      first = text[line[1]]
      whose = "trouble"
      if (crash(first)) {
        if (first ~ /int3: [0-9a-f][0-9a-f][0-9a-f][0-9a-f] \[#/) whose = "emulator"
        for (i = line[1]; i <= NR && i < line[1] + 60; i++) {
          if (match(text[i], /EFLAGS: [0-9a-fA-F]+/) && impossible_flags(substr(text[i], RSTART + 8, RLENGTH - 8))) {
            whose = "emulator"
            break
          }
        }
      }
      if (whose == "emulator") print "emulator " first
      else print "trouble"
      for (k = 1; k <= n; k++) {
        t = stamp(text[line[k]])
        during = started && (t >= 0 ? t >= start_time : line[k] > started)
        print (during ? "during " : "before ") text[line[k]]
      }
    }
  ' "$1"
}

# console_context LOG: the first three trouble lines of LOG and the 30 after each (the call
# trace, the registers), for a person to read.
console_context() {
  grep -aE -m 3 -A 30 "$CONSOLE_TROUBLE" "$1" || true
}
