use super::*;
use crate::report::fixtures::{full_report, minimal_report, report_with_probes};
use crate::report::{ProbeStatus, Refusal, Tier};

#[test]
fn fitted_tables_wrap_their_cells_to_the_width() {
    let report = full_report();
    let wide = render_summary(&report);
    let fitted = render_summary_fitted(&report, Some(100));
    let table_lines = |text: &str| -> Vec<String> {
        text.lines()
            .skip_while(|l| !l.starts_with("PROBE"))
            .take_while(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    assert!(table_lines(&wide).iter().any(|l| l.chars().count() > 100));
    let lines = table_lines(&fitted);
    assert!(lines.len() > table_lines(&wide).len(), "{fitted}");
    for line in &lines {
        assert!(line.chars().count() <= 100, "{line:?} in\n{fitted}");
    }
    // Names and numbers never wrap: the device row is whole.
    assert!(
        fitted.contains("0000:00:02.0  nvme    nvme0n1  DMA-FQ  4000  16.4"),
        "{fitted}"
    );
}

/// `report` printed lines of 320 characters on an 80-column terminal.
#[test]
fn at_80_columns_every_line_fits_and_the_left_out_columns_are_named() {
    let fitted = render_summary_fitted(&full_report(), Some(80));
    assert!(crate::text::widest_line(&fitted) <= 80, "{fitted}");
    assert!(fitted.contains("left out to fit the terminal:"), "{fitted}");
    assert!(fitted.contains("NS/IO"), "{fitted}");
}

#[test]
fn histograms_hold_every_timed_call_of_the_log2_view() {
    let report = full_report();
    let text = render_histograms(&report, None);
    let device = &report.devices[0];
    let latency = device.op(Op::DmaMap).latency.expect("timed");
    let expected: u64 = latency.hist.log2_slots().iter().sum();
    let counted: u64 = text
        .lines()
        .skip_while(|l| !l.contains("dma_map:"))
        .skip(2)
        .take_while(|l| l.contains(" -> "))
        .map(|l| {
            l.split(':')
                .nth(1)
                .and_then(|c| c.split_whitespace().next())
                .map_or(0, |c| c.parse::<u64>().expect("a count"))
        })
        .sum();
    assert!(expected > 0);
    assert_eq!(counted, expected, "{text}");
    assert!(crate::text::widest_line(&text) <= 80, "{text}");
}

#[test]
fn a_device_filter_is_said_on_the_run_line() {
    let mut report = full_report();
    report.apply_device_filter(&crate::device_filter::DeviceFilter {
        device: "nvme0n1".into(),
        pci_address: "0000:00:02.0".parse().expect("address"),
    });
    let text = render_summary(&report);
    assert!(
        text.lines().nth(1).is_some_and(|line| line.ends_with(
            ", device nvme0n1 (0000:00:02.0) only (with deferred and unattributed work)"
        )),
        "{text}"
    );
}

#[test]
fn a_task_filter_is_said_on_the_run_line() {
    let mut report = full_report();
    report.run.task_filter = Some(crate::TaskFilter {
        cgroup: Some("/sys/fs/cgroup/vm".into()),
        cgroup_id: Some(77),
        ..Default::default()
    });
    let text = render_summary(&report);
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|line| line.ends_with(", cgroup /sys/fs/cgroup/vm only")),
        "{text}"
    );
}

/// The device table, header first, and the notes in parentheses under it.
fn device_rows(text: &str) -> Vec<&str> {
    text.lines()
        .skip_while(|l| !l.starts_with("DEVICE"))
        .take_while(|l| {
            !l.is_empty() && !l.starts_with("times are") && !l.starts_with("probe cost")
        })
        .collect()
}

#[test]
fn vfs_are_indented_under_their_pf_though_another_nic_sorts_between() {
    let text = render_summary(&crate::report::fixtures::sriov_report());
    let expected = "\
DEVICE          DRIVER  NAMES    DOMAIN  MAPS    MB   MAP50   MAP99  IOVAS  SYNCS  FLUSHES   IOS   NS/IO   CPU%
0000:00:02.0    nvme    nvme0n1  DMA-FQ  4000  16.4  1.92us  1.92us   4000   4000        0  4000  3.00us  0.60%
0000:00:0c.0    igb     eth1     DMA-FQ   300   0.5       -       -      0      0        0     0       -      -
  0000:00:1c.0  igbvf   eth3     DMA-FQ  1000   1.5       -       -      0      0        0     0       -      -
  0000:00:1c.2  igbvf   eth4     DMA-FQ   500   0.8       -       -      0      0        0     0       -      -
  0000:00:1c.4  igbvf   eth5     DMA-FQ  4000   6.0       -       -      0      0        0     0       -      -
0000:00:0d.0    e1000e  eth2     DMA-FQ  2000   3.0       -       -      0      0        0     0       -      -
deferred        -       -        -          0   0.0       -       -      0      0        0     0       -      -
(indented: SR-IOV virtual functions, each under its physical function)";
    assert_eq!(device_rows(&text).join("\n"), expected, "{text}");
    // Fitted to 80 columns, the indentation stays.
    let fitted = render_summary_fitted(&crate::report::fixtures::sriov_report(), Some(80));
    assert!(
        fitted
            .lines()
            .any(|l| l.starts_with("  0000:00:1c.4  igbvf   eth5")),
        "{fitted}"
    );
}

/// `--device` on a VF keeps its row without its PF's: the row says whose VF it is.
#[test]
fn a_vf_without_its_pf_says_whose_it_is() {
    let mut report = crate::report::fixtures::sriov_report();
    report.apply_device_filter(&crate::device_filter::DeviceFilter {
        device: "eth3".into(),
        pci_address: "0000:00:1c.0".parse().expect("address"),
    });
    let text = render_summary(&report);
    let rows = device_rows(&text);
    assert_eq!(rows.len(), 3, "{text}");
    assert!(
        rows[1].starts_with("0000:00:1c.0 (VF of 0000:00:0c.0)  igbvf"),
        "{text}"
    );
    assert!(rows[2].starts_with("deferred "), "{text}");
    assert!(!text.contains("(indented"), "{text}");
}

#[test]
fn a_full_report() {
    let expected = "\
iommutop 0.1.0, kernel 6.12.95+deb12-amd64, IOMMU intel (dmar0), default domain DMA-FQ (lazy), lab
run 2.0 s, interval 1.0 s, profile nvme-4k-read, workload fio, exit status 0

DEVICE        DRIVER  NAMES    DOMAIN  MAPS    MB   MAP50   MAP99  IOVAS  SYNCS  FLUSHES   IOS   NS/IO   CPU%
0000:00:02.0  nvme    nvme0n1  DMA-FQ  4000  16.4  1.92us  1.92us   4000   4000        0  4000  3.00us  0.60%
deferred      -       -        -          0   0.0       -       -      0      0        0     0       -      -

MAPS BY DIRECTION  TO DEV  PER SENT  FROM DEV  PER RCVD  BOTH  UNKNOWN
0000:00:02.0            0         -         0         -     0     4000
(TO DEV: buffers the device reads, a NIC's packets to send; FROM DEV: buffers it writes, a NIC's receive buffers; PER SENT, PER RCVD: those maps per packet the NIC sent, received; UNKNOWN: maps whose direction no probe read)
times are self times: the probes nested in each call ran 13.16% of the measured time, taken out (raw_total_ns in the JSON keeps it)
probe cost: 16000 runs of iommutop's BPF programs took 2.80ms in all (175ns per run), 0.14% of one CPU over the run

calls not seen whole (untimed: counted, not timed; lost: seen by no program; open at end: counted nowhere):
OP         CALLS  UNTIMED  LOST  OPEN AT END
dma_map     4000        0     2            0
dma_unmap   4000        -     2            1
iommu_map   4000        -     3            0
lost: the 2 of dma_map and dma_unmap are one figure (one group of programs serves them: which each call was, the kernel cannot say)

PROBE        TIER        STATUS       LATENCY  SYMBOLS             NOTES
dma_map      fentry      attached     yes      dma_map_page_attrs  -
iommu_map    tracepoint  attached     no       iommu:map           refused fentry (no BTF for iommu_map), kprobe (kprobes are not built into this kernel)
iotlb_flush  -           unavailable  no       -                   no vendor IOTLB function in kallsyms

warnings:
  - kprobes unavailable: CONFIG_KPROBES is off
  - probe iotlb_flush unavailable: no vendor IOTLB function in kallsyms
  - latency not measured for iommu_map: attached at a tier that only counts
  - 2 calls of dma_map or dma_unmap were seen by no probe program (the kernel skipped every program that could have seen them; one group of programs serves these operations, so which of them each was, it cannot say): their counts together are short by that many (of which devices, nothing tells: neither end was seen)
  - 3 iommu_map events were seen by no probe program (the kernel skipped every program that could have seen them): the counts are short by that many (of which devices, nothing tells: neither end was seen)
  - 1 dma_unmap call of 0000:00:02.0 was still open when the recording ended (its exit was never seen): counted nowhere, so 0000:00:02.0's dma_unmap count is short by one
  - 2 calls nested deeper than the tracker follows (8): counted by their exits, not timed; their nested work was charged to the call below them
";
    assert_eq!(render_summary(&full_report()), expected);
}

#[test]
fn a_minimal_report() {
    let expected = "\
iommutop 0.1.0, kernel unknown, no IOMMU
run 0.0 s, interval 1.0 s

no DMA or IOMMU activity was seen

warnings:
  - no IOMMU is active on this host: DMA addresses are not translated, so there is no translation cost to measure
";
    assert_eq!(render_summary(&minimal_report()), expected);
}

#[test]
fn a_command_run_and_a_probe_with_reason_and_refusals() {
    let mut report = minimal_report();
    report.run.command = vec!["dd".into(), "if=/dev/nvme0n1".into()];
    report.run.exit_status = Some(1);
    report.warnings.clear();
    report.probes = vec![ProbeEntry {
        point: "completion.nvme".into(),
        tier: Some(crate::report::Tier::Tracepoint),
        symbol: Some("nvme:nvme_complete_rq".into()),
        status: crate::report::ProbeStatus::Attached,
        latency: false,
        reason: Some("nvme_pci_complete_rq is never hit".into()),
        refused: vec![crate::report::Refusal {
            tier: crate::report::Tier::Fentry,
            reason: "EPERM".into(),
        }],
    }];
    let expected = "\
iommutop 0.1.0, kernel unknown, no IOMMU
run 0.0 s, interval 1.0 s, command `dd if=/dev/nvme0n1`, exit status 1

no DMA or IOMMU activity was seen

PROBE            TIER        STATUS    LATENCY  SYMBOLS                NOTES
completion.nvme  tracepoint  attached  no       nvme:nvme_complete_rq  nvme_pci_complete_rq is never hit; refused fentry (EPERM)
";
    assert_eq!(render_summary(&report), expected);
}

/// A point no tier could hook printed its refusals three times (reason, notes, warnings).
#[test]
fn each_refusal_is_said_once() {
    let refused = vec![
        Refusal {
            tier: Tier::Fentry,
            reason: "alloc_iova_fast: refused before verification".into(),
        },
        Refusal {
            tier: Tier::Kprobe,
            reason: "this kernel has no kprobe PMU".into(),
        },
    ];
    let unhooked = |point: &str| ProbeEntry {
        point: point.into(),
        tier: None,
        symbol: None,
        status: ProbeStatus::Unavailable,
        latency: false,
        reason: None,
        refused: refused.clone(),
    };
    let text = render_summary(&report_with_probes(vec![
        unhooked("iova_alloc"),
        unhooked("iova_free"),
    ]));
    let iova_free_row = text
        .lines()
        .find(|line| line.starts_with("iova_free "))
        .unwrap_or_default();
    assert_eq!(iova_free_row.matches("no kprobe PMU").count(), 1, "{text}");
    assert_eq!(
        text.matches("no kprobe PMU").count(),
        2,
        "one per row: {text}"
    );
    assert_eq!(
        text.matches("refused before verification").count(),
        2,
        "one per row: {text}"
    );
    assert!(
        text.contains(
            "not measured, every tier refused (the probe table says why): iova_alloc, \
             iova_free"
        ),
        "{text}"
    );
}
