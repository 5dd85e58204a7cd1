#!/usr/bin/env python3
"""Folds `perf script -F cpu,time,period,ip,sym` (a call-graph profile) into one line per distinct
stack: `PERIOD SYM;SYM;...` from the outermost frame to the sampled one, PERIOD the sum of the
samples' periods (ns for cpu-clock). A first line says what the profile covers:
`# cpus N span_ns S samples K`, the CPUs that were sampled and the time from the first sample to
the last: a profile that lost samples (perf's buffer overrun, throttling) sums to less than
N x S, and the share of time a stack had is its period over N x S, not over the periods' sum.
Reads standard input, writes standard output.

Used in the lab's guest (a second opinion on the times): perf's own output there is tens of MB, the
folded form a few hundred KB, and it needs the guest's /proc/kallsyms to be resolved at all.
"""
import sys
from collections import Counter


def samples(lines):
    """Yields (cpu, time in ns, period, [symbols, innermost first]) per sample."""
    header, stack = None, []
    for line in lines:
        text = line.strip()
        if not text:
            if header is not None:
                yield (*header, stack)
            header, stack = None, []
            continue
        if header is None:
            # The sample's header: "[CPU] SECONDS.MICROS: PERIOD".
            cpu, seconds, period = text.split()[:3]
            header = (int(cpu.strip("[]")), round(float(seconds.rstrip(":")) * 1e9), int(period))
            continue
        # A frame: "ADDRESS SYMBOL", the symbol "[unknown]" when unresolved.
        parts = text.split(None, 1)
        stack.append(parts[1] if len(parts) > 1 else "[unknown]")
    if header is not None:
        yield (*header, stack)


def main():
    folded, cpus, first, last, count = Counter(), set(), None, None, 0
    for cpu, time_ns, period, stack in samples(sys.stdin):
        folded[";".join(reversed(stack))] += period
        cpus.add(cpu)
        first = time_ns if first is None else min(first, time_ns)
        last = time_ns if last is None else max(last, time_ns)
        count += 1
    print(f"# cpus {len(cpus)} span_ns {(last or 0) - (first or 0)} samples {count}")
    for stack, period in folded.most_common():
        print(f"{period} {stack}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
