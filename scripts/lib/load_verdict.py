#!/usr/bin/env python3
"""The verdict of a lab load cell: exact.sh's `load` mode left its output in DIR.

Checks iommutop's counts against counts that do not come from its probes: the block layer's
completed reads (/sys/block/nvme0n1/stat) and fio's own I/O count for the NVMe; for each NIC,
its maps against its unmaps and its packets against the kernel's interface counters. Prints one
line (`ok` or `FAIL`, then the figures) and exits 1 when a check failed.

Usage: load_verdict.py DIR NAME
       load_verdict.py --table DIR:TITLE...   a Markdown table of the cells, for the docs
"""
import json
import re
import sys

NVME = "0000:00:04.0"
NICS = ("0000:00:05.0", "0000:00:06.0")
TOLERANCE = 0.005  # every count within 0.5% of the truth


def read(path):
    with open(path) as f:
        return f.read()


def nic_packets(d, when):
    packets = {}
    for line in read(f"{d}/load.nic-packets-{when}").splitlines():
        # "PCI-ADDRESS PACKETS SENT RECEIVED" (exact.sh's nic_packets)
        address, count = line.split()[:2]
        packets[address] = int(count)
    return packets


def count(row, op):
    return row.get("ops", {}).get(op, {}).get("count", 0)


def off(measured, truth):
    return abs(measured - truth) / max(truth, 1)


def verdict(d):
    problems, figures = [], []
    report = json.loads(read(f"{d}/load.json"))
    rows = {r["key"]: r for r in report["devices"]}
    block = int(read(f"{d}/load.block-reads").strip())
    fio = json.loads(read(f"{d}/load.fio.json"))
    fio_ios = sum(job["read"]["total_ios"] for job in fio["jobs"])
    nvme = rows.get(NVME, {})
    figures.append(f"block {block} fio {fio_ios}")
    # iommu_map too: a page-table map whose DMA call's entry program the kernel skipped is charged
    # through its IOMMU domain to the device the domain serves.
    for op in ("dma_map", "dma_unmap", "iommu_map", "completion"):
        n = count(nvme, op)
        figures.append(f"{op} {n}")
        if off(n, block) > TOLERANCE:
            problems.append(f"NVMe {op} {n} vs the block layer's {block} ({off(n, block):.2%})")
    if off(block, fio_ios) > TOLERANCE:
        problems.append(f"the block layer's {block} reads vs fio's {fio_ios}")
    before, after = nic_packets(d, "before"), nic_packets(d, "after")
    for nic in NICS:
        row = rows.get(nic, {})
        maps, unmaps = count(row, "dma_map"), count(row, "dma_unmap")
        seen = count(row, "tx_packets") + count(row, "completion")
        kernel = after.get(nic, 0) - before.get(nic, 0)
        figures.append(f"{nic[-4:]} map {maps} unmap {unmaps} packets {seen}/{kernel}")
        if off(unmaps, maps) > TOLERANCE or maps == 0:
            problems.append(f"{nic} maps {maps} vs unmaps {unmaps}")
        if off(seen, kernel) > TOLERANCE:
            problems.append(f"{nic} packets {seen} vs the interface counters' {kernel}")
    problems += loss_problems(report, nvme, block)
    for row in (report.get("cross_check") or {}).get("rows", []):
        if not row.get("agrees", True):
            problems.append(f"{row.get('device') or 'all devices'} {row['op']}: probes "
                            f"{row['probes']} vs the kernel's events {row['kernel']}")
    health = {k: v for k, v in report.get("health", {}).items() if v}
    if health:
        figures.append(f"health {health}")
    misses = report.get("possible_misses")
    if misses:
        figures.append(f"possible misses {misses}")
    return problems, figures


# Words of the report's warnings that say a count may be short (tests/support/exact.rs).
LOSS_WORDS = ("lost", "short", "may be missing", "may be incomplete", "open when")


def loss_problems(report, nvme, block):
    """The NVMe's loss figures against its true loss, the reads its count lacks: each figure lies
    between the true loss and max(2x the true loss, 10), and a run whose counts equal the block
    layer's reads warns of no loss."""
    problems = []
    losses = report.get("losses")
    if losses is None:
        return ["no `losses` in the report"]
    ops = losses.get("ops", {})
    for op in ("dma_map", "dma_unmap", "iommu_map"):
        figures = ops.get(op, {})
        said = (figures.get("lost") or 0) + \
            figures.get("devices", {}).get(NVME, {}).get("open_at_end", 0)
        true = max(0, block - count(nvme, op))
        if not true <= said <= max(2 * true, 10):
            problems.append(f"NVMe {op}: {true} short of the block layer, the report says {said}")
    compared = ("dma_map", "dma_unmap", "completion")
    if all(count(nvme, op) == block for op in compared):
        for warning in report.get("warnings", []):
            if contradicts(warning, compared):
                problems.append(f"counts exact, yet the report warns: {warning}")
    return problems


# Every operation's report name (abi/src/op.rs).
OPS = ("dma_map", "dma_unmap", "iommu_map", "iommu_unmap", "iova_alloc", "iova_free",
       "iotlb_sync", "iotlb_flush", "fq_flush", "completion", "iova_alloc_slow",
       "iotlb_flush_full", "dma_alloc", "dma_free", "tx_packets", "requeue")


def contradicts(warning, exact):
    """Whether a warning says a count of the operations `exact` may be short: it has a loss word
    and names one of them, or names no operation at all. A warning that names only others (an
    IOTLB flush a kprobe's recursion guard skipped) tells the truth of counts this verdict has
    nothing to hold against (cli/tests/support/exact.rs says the same)."""
    if not any(word in warning for word in LOSS_WORDS):
        return False
    named = [op for op in OPS if op in re.split(r"[^A-Za-z0-9_]+", warning)]
    return not named or any(op in exact for op in named)


def table_row(d, title):
    try:
        report = json.loads(read(f"{d}/load.json"))
        rows = {r["key"]: r for r in report["devices"]}
        block = int(read(f"{d}/load.block-reads").strip())
        problems, _ = verdict(d)
    except (OSError, ValueError, KeyError) as e:
        return f"| {title} | no result: {type(e).__name__} |" + " |" * 7
    nvme = rows.get(NVME, {})

    def against(op):
        n = count(nvme, op)
        return f"{n:,}" if n == block else f"**{n:,} ({(n - block) / max(block, 1):+.2%})**"

    before, after = nic_packets(d, "before"), nic_packets(d, "after")
    nics = []
    for nic in NICS:
        row = rows.get(nic, {})
        seen = count(row, "tx_packets") + count(row, "completion")
        kernel = after.get(nic, 0) - before.get(nic, 0)
        nics.append(f"{count(row, 'dma_map'):,}/{count(row, 'dma_unmap'):,}, "
                    f"{seen:,}/{kernel:,} pkts")
    health = report.get("health", {})
    skipped = [f"{k} {v:,}" for k, v in sorted(health.items())
               if v and (k in ("recursion_misses", "exit_without_entry",
                               "abandoned_frames") or k.startswith("missed_calls."))]
    # Calls no program saw, per group of entry programs (reports with `losses`).
    skipped += [f"lost {'/'.join(g['ops'])} {g['lost']:,}"
                for g in (report.get("losses") or {}).get("groups", []) if g.get("lost")]
    skipped = ", ".join(skipped)
    status = "ok" if not problems else "**FAIL**"
    return (f"| {title} | {block:,} | {against('dma_map')} | {against('dma_unmap')} | "
            f"{against('completion')} | {against('iommu_map')} | {'; '.join(nics)} | "
            f"{skipped or '-'} | {status} |")


def table(cells):
    print("| kernel, IOMMU | block-layer reads | NVMe dma_map | dma_unmap | completions | "
          "iommu_map | NICs: maps/unmaps, packets seen/interface counters | "
          "skipped runs, and calls lost (`losses`; `missed_calls` bounded them before) | "
          "NVMe and NICs within 0.5% |")
    print("|---|---|---|---|---|---|---|---|---|")
    for cell in cells:
        d, title = cell.split(":", 1)
        print(table_row(d, title))
    return 0


def main():
    if sys.argv[1] == "--table":
        return table(sys.argv[2:])
    d, name = sys.argv[1], sys.argv[2]
    try:
        problems, figures = verdict(d)
    except (OSError, ValueError, KeyError, StopIteration) as e:
        problems, figures = [f"no result: {e!r}"], []
    status = "FAIL" if problems else "ok  "
    detail = "; ".join(problems) if problems else ""
    print(f"{status}  {name} load: {', '.join(figures)}{'  ' + detail if detail else ''}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
