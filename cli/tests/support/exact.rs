//! Reading what `cli/tests/lab/exact.sh` left in its output directory: the reports, the block
//! layer's and the workloads' own counts, and the checks every exact-count test makes.

use super::{op_bytes, op_count, read, read_guest_report, read_json, run_guest_script};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Boots the lab with `lab_args` and runs `exact.sh MODE`, returning its output directory.
pub fn boot(name: &str, lab_args: &[&str], mode: &str) -> PathBuf {
    run_guest_script(&format!("exact-{name}"), lab_args, "exact.sh", &[mode])
}

/// A report the guest wrote, after checking that its command succeeded and it is schema-valid.
pub fn read_report(out: &Path, name: &str) -> Value {
    let report = read_guest_report(out, name);
    assert_self_time_within_raw(&report);
    report
}

/// Every timed op keeps its time as measured (`raw_total_ns`), and its self time (`total_ns`,
/// the nested probes' run time taken out) is not above it.
pub fn assert_self_time_within_raw(report: &Value) {
    for row in report["devices"].as_array().expect("devices") {
        for (op, stats) in row["ops"].as_object().expect("ops") {
            let latency = &stats["latency"];
            if latency.is_null() {
                continue;
            }
            let raw = latency["raw_total_ns"]
                .as_u64()
                .unwrap_or_else(|| panic!("{} {op}: no raw_total_ns in {latency}", row["key"]));
            let own = latency["total_ns"].as_u64().expect("total_ns");
            assert!(
                own <= raw,
                "{} {op}: self {own} ns above raw {raw} ns",
                row["key"]
            );
        }
    }
}

/// dma_map's time in a report: (self, raw) ns.
pub fn dma_map_times(report: &Value) -> (u64, u64) {
    let latency = &device(report, NVME)["ops"]["dma_map"]["latency"];
    let ns = |field: &str| {
        latency[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{latency}"))
    };
    (ns("total_ns"), ns("raw_total_ns"))
}

pub fn device<'a>(report: &'a Value, key: &str) -> &'a Value {
    report["devices"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["key"] == key))
        .unwrap_or_else(|| panic!("no row {key} in {}", report["devices"]))
}

pub fn count(row: &Value, op: &str) -> u64 {
    op_count(row, op)
}

pub fn bytes(row: &Value, op: &str) -> u64 {
    op_bytes(row, op)
}

/// The calls of `op` the report says its counts lack: those no program saw (`losses`' `lost`,
/// the figure of the op's group of entry programs, on no known device) and those still open at
/// the end, on every device.
pub fn reported_loss(report: &Value, op: &str) -> u64 {
    let figures = &report["losses"]["ops"][op];
    assert!(
        figures.is_object(),
        "the report has no losses for {op}: {}",
        report["losses"]
    );
    figures["lost"].as_u64().unwrap_or(0) + figures["open_at_end"].as_u64().unwrap_or(0)
}

/// A count of ours against an independent one of the same work: within 0.5% either way, with no
/// allowance for what the report admits (a report that says it lost calls is checked apart, by
/// [`assert_loss_figure_true`]).
pub fn assert_counted(what: &str, counted: u64, truth: u64) {
    eprintln!("{what}: {counted} of {truth}");
    assert!(
        truth > 0 && counted <= truth + truth / 200,
        "{what}: {counted} counted, more than 0.5% above the {truth} done"
    );
    assert_not_short(what, counted, truth);
}

/// A NIC's maps and unmaps agree within 0.5%. (Under PREEMPT_RT the kernel skipped a program
/// that a task preempted inside it left running on that CPU, for every call there until the task
/// ran again: 26 to 66 maps a run went uncounted before understudies, all of one NIC's at times.)
pub fn assert_maps_match_unmaps(nic: &str, row: &Value) {
    let (maps, unmaps) = (count(row, "dma_map"), count(row, "dma_unmap"));
    eprintln!("{nic}: {maps} maps, {unmaps} unmaps");
    assert!(
        maps > 0 && maps.abs_diff(unmaps) <= maps.max(unmaps) / 200,
        "{nic}: {maps} maps against {unmaps} unmaps: more than 0.5% apart"
    );
}

/// [`assert_counted`]'s lower bound alone, for a count that may hold other work besides.
pub fn assert_not_short(what: &str, counted: u64, truth: u64) {
    assert!(
        truth.saturating_sub(counted) <= truth / 200,
        "{what}: {counted} counted of {truth}: short by more than 0.5%"
    );
}

/// The report's loss figure of `op` lies between the true loss (`truth` less `counted`, the calls
/// an independent count has that the probes do not) and twice that, or 10 where that is less: a
/// figure that is true and tight.
pub fn assert_loss_figure_true(what: &str, report: &Value, op: &str, counted: u64, truth: u64) {
    let lost = truth.saturating_sub(counted);
    let figure = reported_loss(report, op);
    eprintln!("{what}: {op} lost {lost} by the independent count, {figure} by the report");
    assert!(
        figure >= lost && figure <= (2 * lost).max(10),
        "{what}: the report says {figure} {op} calls were lost or left open, the independent count \
         {lost}: not between {lost} and {}",
        (2 * lost).max(10)
    );
}

/// Words of the report's warnings that say a count may be short.
const LOSS_WORDS: [&str; 5] = [
    "lost",
    "short",
    "may be missing",
    "may be incomplete",
    "open when",
];

/// A report whose counts of `exact` (operation names) equal the independent ones says nothing
/// of losses of them: no warning that one of those counts is short, that its calls were lost,
/// or that numbers may be incomplete. A warning that names only other operations (an IOTLB
/// flush a kprobe's recursion guard skipped) is the report telling the truth about counts this
/// test has nothing to hold against; a warning that names no operation counts against all.
pub fn assert_no_loss_warning(what: &str, report: &Value, exact: &[&str]) {
    for warning in report["warnings"].as_array().expect("warnings") {
        let text = warning.as_str().unwrap_or_default();
        if !LOSS_WORDS.iter().any(|word| text.contains(word)) {
            continue;
        }
        let named = ops_named(text);
        assert!(
            !named.is_empty() && !named.iter().any(|op| exact.contains(op)),
            "{what}: counts of {exact:?} exact, yet the report warns: {text}"
        );
    }
}

/// The operations a sentence names, by their report names as whole words.
pub fn ops_named(text: &str) -> Vec<&'static str> {
    let words: Vec<&str> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    iommutop_model::sample::Op::ALL
        .iter()
        .map(|op| op.name())
        .filter(|name| words.contains(name))
        .collect()
}

/// Of the operations measured with latency, no more than 0.1% of the calls went untimed (the
/// calls an interrupt or a preemption landed in: the histograms' tail).
pub fn assert_untimed_within_target(what: &str, report: &Value) {
    let ops = report["losses"]["ops"].as_object().expect("losses.ops");
    let (mut calls, mut untimed) = (0u64, 0u64);
    for (op, figures) in ops {
        if let Some(n) = figures["untimed"].as_u64() {
            let c = figures["calls"].as_u64().unwrap_or(0);
            eprintln!("{what}: {op} {n} of {c} untimed");
            calls += c;
            untimed += n;
        }
    }
    let share = untimed as f64 / calls.max(1) as f64;
    eprintln!(
        "{what}: {untimed} of {calls} timed-op calls untimed ({:.3}%)",
        share * 100.0
    );
    assert!(
        calls > 0 && share <= 0.001,
        "{what}: {untimed} of {calls} calls untimed ({:.3}%), more than 0.1%",
        share * 100.0
    );
}

/// The kernel's own events (`--cross-check`) agree with the probes on every row compared, and
/// the rows of `devices` and the page tables were compared where the kernel has the events
/// (`dma_events`: 6.12+; `iommu_events`: all but 5.10's VT-d, whose own DMA ops map without the
/// IOMMU API). What was not compared is said in the notes.
pub fn assert_cross_check_agrees(
    what: &str,
    report: &Value,
    devices: &[&str],
    dma_events: bool,
    iommu_events: bool,
) {
    let check = &report["cross_check"];
    let rows = check["rows"].as_array().unwrap_or_else(|| {
        panic!("{what}: no cross_check in the report (was --cross-check given?): {check}")
    });
    for row in rows {
        eprintln!(
            "{what}: cross-check {} {}: probes {} kernel {} (+{} skipped, +{} without event)",
            row["device"],
            row["op"],
            row["probes"],
            row["kernel"],
            row["kernel_skipped"],
            row["without_event"]
        );
        assert_eq!(
            row["agrees"], true,
            "{what}: the kernel's events disagree: {row}"
        );
    }
    let compared = |device: Option<&str>, op: &str| {
        rows.iter()
            .any(|r| r["device"].as_str() == device && r["op"] == op)
    };
    let said = |op: &str| {
        check["notes"].as_array().is_some_and(|notes| {
            notes.iter().any(|n| {
                n.as_str()
                    .unwrap_or("")
                    .starts_with(&format!("{op}: not compared"))
            })
        })
    };
    for op in ["iommu_map", "iommu_unmap"] {
        if iommu_events {
            assert!(compared(None, op), "{what}: {op} not compared: {check}");
        } else {
            assert!(said(op), "{what}: {op} not compared and not said: {check}");
        }
    }
    if dma_events {
        for device in devices {
            for op in ["dma_map", "dma_unmap"] {
                assert!(
                    compared(Some(device), op),
                    "{what}: {device} {op} not compared: {check}"
                );
            }
        }
    } else {
        for op in ["dma_map", "dma_unmap"] {
            assert!(
                said(op),
                "{what}: a kernel without dma: events must say {op} was not compared: {check}"
            );
        }
    }
}

/// `measured` is within `percent` of `truth`.
pub fn assert_close(what: &str, measured: u64, truth: u64, percent: f64) {
    let off = measured.abs_diff(truth) as f64 * 100.0 / truth.max(1) as f64;
    assert!(
        truth > 0 && off <= percent,
        "{what}: {measured} against {truth} ({off:.3}% off, at most {percent}%)"
    );
}

/// A read figure of fio's own (`total_ios`, `io_bytes`), summed over its jobs.
pub fn fio_reads(out: &Path, name: &str, field: &str) -> u64 {
    let fio = read_json(&out.join(format!("{name}.fio.json")));
    fio["jobs"]
        .as_array()
        .expect("fio jobs")
        .iter()
        .map(|job| job["read"][field].as_u64().unwrap_or(0))
        .sum()
}

pub fn block_reads(out: &Path, name: &str) -> u64 {
    read(&out.join(format!("{name}.block-reads")))
        .trim()
        .parse()
        .expect("block layer read count")
}

/// Packets a NIC sent and received over a recording, by the kernel's interface counters.
pub fn nic_packets(out: &Path, name: &str, pci: &str) -> u64 {
    nic_counter(out, name, pci, 0)
}

/// The packets a NIC sent over the recording `name`, by its interface counters.
pub fn nic_packets_sent(out: &Path, name: &str, pci: &str) -> u64 {
    nic_counter(out, name, pci, 1)
}

/// The packets a NIC received over the recording `name`, by its interface counters.
pub fn nic_packets_received(out: &Path, name: &str, pci: &str) -> u64 {
    nic_counter(out, name, pci, 2)
}

/// Column `column` of the guest's "PCI-ADDRESS PACKETS [SENT RECEIVED]" lines, after less
/// before.
fn nic_counter(out: &Path, name: &str, pci: &str, column: usize) -> u64 {
    let of = |which: &str| -> u64 {
        read(&out.join(format!("{name}.nic-packets-{which}")))
            .lines()
            .find_map(|line| {
                let mut fields = line.split_whitespace();
                (fields.next()? == pci).then(|| fields.nth(column)?.parse().ok())?
            })
            .unwrap_or_else(|| panic!("no packet counters of {pci} {which} {name} ({column})"))
    };
    of("after") - of("before")
}

pub fn transactions(out: &Path, name: &str) -> u64 {
    let netperf = read_json(&out.join(format!("{name}.netperf.json")));
    netperf["results"]["transactions"]
        .as_u64()
        .unwrap_or_else(|| panic!("netperf's transactions: {netperf}"))
}

/// The health counters that mean a call was not tracked at all: they must stay 0. (Calls seen at
/// one end only, because the kernel skipped one of our programs, are counted; see
/// docs/probes.md.) `device_map_full` was 1 or 2 in some 5.10 and 6.1 load cells: two CPUs that
/// took a row for one new key at once, where the loser read the kernel's EEXIST as a failure
/// (`iommutop_insert` in ebpf/lib/maps.bpf.h says why).
pub fn assert_nothing_untracked(report: &Value) {
    let health = &report["health"];
    assert!(health.is_object(), "the report has no health: {report}");
    for counter in ["nesting_overflow", "task_map_full", "device_map_full"] {
        assert_eq!(health[counter], 0, "{counter}: {health}");
    }
    eprintln!("health: {health}");
}

pub const NVME: &str = "0000:00:04.0";
/// The buffers e1000e maps when its link comes up, before any packet: its RX ring's free
/// descriptors (`e1000_desc_unused` of the default 256-descriptor ring, E1000_DEFAULT_RXD).
pub const E1000E_RX_RING_FILL: u64 = 255;
pub const NICS: [&str; 2] = ["0000:00:05.0", "0000:00:06.0"];

/// An e1000e's DMA maps by direction (`dma_map_directions`) against its interface counters over a
/// recording that brought its link up and ran TCP_RR (`transactions` of them): every map is of a
/// known direction and none both ways; from the device, the receive ring's first fill
/// ([`E1000E_RX_RING_FILL`]) and then one buffer mapped again per packet received; to the device,
/// one map per packet sent (its linear part: headers, or a whole ACK) and one more per packet that
/// carries data in a page fragment (each request or response: one per transaction; the netperf
/// control connection's few messages, 2 or 3 a run, are the rest). Measured on 6.12's load cell:
/// 1,356 from the device = 1,101 received + 255; 2,198 to the device = 1,116 sent + 1,080
/// transactions + 2 (docs/measurements.md).
pub fn assert_nic_directions(
    label: &str,
    row: &Value,
    sent: u64,
    received: u64,
    transactions: u64,
) {
    let split = &row["dma_map_directions"];
    let n = |direction: &str| {
        split[direction]["count"]
            .as_u64()
            .unwrap_or_else(|| panic!("{label}: no {direction} in {split}"))
    };
    let (to, from, both, unknown) = (
        n("to_device"),
        n("from_device"),
        n("bidirectional"),
        n("not_known"),
    );
    eprintln!(
        "{label}: DMA maps {} = {to} to the device + {from} from the device + {both} both ways \
         + {unknown} not known; packets sent {sent} (probes {}), received {received} (probes {}); \
         per packet sent {:.4}, per packet received {:.4} ({:.4} without the RX ring fill); \
         report: {} and {}",
        op_count(row, "dma_map"),
        op_count(row, "tx_packets"),
        op_count(row, "completion"),
        to as f64 / sent as f64,
        from as f64 / received as f64,
        from.saturating_sub(E1000E_RX_RING_FILL) as f64 / received as f64,
        split["to_device_per_packet_sent"],
        split["from_device_per_packet_received"],
    );
    assert_eq!(
        to + from + both + unknown,
        op_count(row, "dma_map"),
        "{label}: {split}"
    );
    assert_eq!((both, unknown), (0, 0), "{label}: {split}");
    assert_close(
        &format!("{label}: maps from the device less the RX ring's fill vs packets received"),
        from.saturating_sub(E1000E_RX_RING_FILL),
        received,
        0.5,
    );
    assert_close(
        &format!("{label}: maps to the device vs packets sent + transactions"),
        to,
        sent + transactions,
        0.5,
    );
}
