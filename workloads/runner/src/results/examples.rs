//! One run of each workload whose results were maps before the model typed them, built from
//! fixed numbers through the workload's own code, and the JSON and summary of each: the copies
//! in `model/tests/results/` and `testdata/summaries/` were written by the build before the
//! types (commit 855fd1d), so equal text is the same report and the same summary. A change
//! meant to change them edits the copies, and the diff shows what a reader of reports sees
//! change.

use crate::dma_contention::{self, Step};
use crate::tlb::{steps, CurvePoint, PageSize, SeriesBacking, TlbResults, TscResult};
use crate::vfio_nvme::VfioNvmeResults;
use crate::window::{ProbeWindow, WindowDevice, WindowOp};
use crate::{WorkloadKind, WorkloadOutput};
use iommutop_model::results::fio::{TargetKind, TargetResult};
use iommutop_model::results::WorkloadResults;
use iommutop_model::sample::Op;
use iommutop_model::workload::{Headline, WorkUnit};
use iommutop_vfio_nvme as driver;
use std::collections::BTreeMap;

fn timed(count: u64, mean_ns: f64, p99_ns: u64) -> WindowOp {
    WindowOp {
        count,
        per_s: count as f64 / 5.0,
        mean_ns: Some(mean_ns),
        p50_ns: Some(p99_ns / 2),
        p90_ns: Some(p99_ns - 100),
        p99_ns: Some(p99_ns),
    }
}

/// Three steps: probed with latency, probed but nothing of the device seen, and the last with
/// its latency grown.
fn dma_contention() -> WorkloadOutput {
    let pci = "0000:00:04.0";
    let window = |scale: f64| {
        let mut device = WindowDevice {
            names: vec!["nvme0n1".into()],
            ..WindowDevice::default()
        };
        device
            .ops
            .insert(Op::DmaMap, timed(50_000, 812.5 * scale, 2047));
        device
            .ops
            .insert(Op::DmaUnmap, timed(50_000, 640.25 * scale, 1023));
        device
            .ops
            .insert(Op::IovaAlloc, timed(50_000, 351.0 * scale, 1023));
        device.ops.insert(
            Op::IovaAllocSlow,
            WindowOp {
                count: 12,
                per_s: 2.4,
                mean_ns: None,
                p50_ns: None,
                p90_ns: None,
                p99_ns: None,
            },
        );
        let mut window = ProbeWindow {
            label: "threads".into(),
            duration_s: 5.000125,
            ..ProbeWindow::default()
        };
        window.devices.insert(pci.into(), device);
        window
    };
    let step = |threads: u64, iops: f64, ios: u64, probes| Step {
        threads,
        iops,
        ios,
        clat_mean_us: Some(iops / 1e4),
        clat_p99_us: Some(41.22),
        sys_cpu_percent: Some(12.5),
        probes,
    };
    let curve = vec![
        step(
            1,
            10_000.0,
            50_000,
            Some(dma_contention::step_probes(&window(1.0), pci, 50_000)),
        ),
        step(2, 19_876.4, 99_382, Some(None)),
        step(
            4,
            35_000.5,
            175_002,
            Some(dma_contention::step_probes(&window(2.5), pci, 175_002)),
        ),
    ];
    let target = TargetResult {
        filename: "/dev/nvme0n1".into(),
        kind: TargetKind::BlockDevice,
        disk: Some("nvme0n1".into()),
        pci_address: pci.parse().ok(),
    };
    WorkloadOutput::new(
        dma_contention::DmaContentionResults::of(curve, target, true),
        Headline::uncounted(WorkUnit::Io),
        Vec::new(),
    )
}

/// Both page sizes, 2 MiB on transparent huge pages, with a TLB step and a cache step.
fn tlb() -> WorkloadOutput {
    const K: u64 = 1024;
    let sizes = [16 * K, 32 * K, 64 * K, 128 * K, 256 * K, 512 * K];
    let small_ns = [1.25, 1.3, 1.31, 4.5, 4.6, 9.75];
    let huge_ns = [1.2, 1.25, 1.3, 1.3, 1.35, 9.5];
    let points = |ns: &[f64]| -> Vec<steps::Point> {
        sizes
            .iter()
            .zip(ns)
            .map(|(&bytes, &ns)| steps::Point { bytes, ns })
            .collect()
    };
    let (small, huge) = (points(&small_ns), points(&huge_ns));
    let found = steps::classify(Some(&small), Some(&huge));
    let estimates = steps::estimates(&found, "pages");
    let mut curve = Vec::new();
    for (page_size, series, cycles) in [
        (PageSize::Size4K, &small, true),
        (PageSize::Size2M, &huge, false),
    ] {
        for point in series {
            curve.push(CurvePoint {
                page_size,
                bytes: point.bytes,
                ns_per_access: point.ns,
                accesses: 1_000_000 + point.bytes,
                cycles_per_access: cycles.then_some(point.ns * 2.5),
            });
        }
    }
    let page_sizes = BTreeMap::from([
        (
            PageSize::Size4K,
            SeriesBacking {
                backing: "4k".into(),
                huge_fraction: None,
            },
        ),
        (
            PageSize::Size2M,
            SeriesBacking {
                backing: "thp".into(),
                huge_fraction: Some(0.75),
            },
        ),
    ]);
    let results = TlbResults {
        pattern: "pages".into(),
        page_sizes,
        sizes_per_page_size: sizes.len(),
        ns_per_access_4k_largest: Some(9.75),
        ns_per_access_2m_largest: Some(9.5),
        huge_page_speedup_largest: Some(9.75 / 9.5),
        tsc: TscResult {
            usable: true,
            ghz: Some(2.496),
        },
        curve,
        steps: found,
        estimates,
        interrupted: false,
        work: None,
    };
    WorkloadOutput::new(results, Headline::uncounted(WorkUnit::Access), Vec::new())
}

fn histogram(values: impl IntoIterator<Item = u64>) -> driver::LatencyHistogram {
    let mut histogram = driver::LatencyHistogram::new();
    for v in values {
        histogram.record(v);
    }
    histogram
}

fn device() -> driver::DeviceInfo {
    driver::DeviceInfo {
        pci_address: "0000:00:04.0".parse().expect("address"),
        iommu_group: 7,
        model: "QEMU NVMe Ctrl".into(),
        serial: "deadbeef".into(),
        firmware: "9.2.0".into(),
        nvme_version: "1.4".into(),
        nsid: 1,
        lba_size: 512,
        namespace_blocks: 2_097_152,
        capacity_bytes: 1 << 30,
        max_transfer_bytes: Some(512 << 10),
        max_queue_entries: 2048,
        iommu: driver::vfio::IommuInfo {
            backend: "legacy-type1v2".into(),
            iova_ranges: vec![driver::iova::IovaRange {
                start: 0,
                last: 0xfedf_ffff,
            }],
            ranges_assumed: false,
            iova_pgsizes: 0x4020_1000,
        },
    }
}

fn map(what: &str, bytes: u64, page_size: driver::PageSize, iova: u64) -> driver::MapCost {
    driver::MapCost {
        what: what.into(),
        bytes,
        page_size,
        iova,
        map_ns: 48_211,
        unmap_ns: Some(20_500),
        physical_runs: Some(3),
    }
}

fn setup() -> driver::SetupCost {
    let mut setup = driver::SetupCost {
        vfio_open_ns: 1_250_000,
        controller_enable_ns: 3_500_000,
        ..driver::SetupCost::default()
    };
    for (what, bytes) in [("queues", 90_112), ("data", 2 << 20)] {
        setup
            .maps
            .push(map(what, bytes, driver::PageSize::Size4K, 0x10_0000));
        setup.map_total_ns += 48_211;
        setup.unmap_total_ns += 20_500;
    }
    setup
}

fn host() -> driver::HostChanges {
    driver::HostChanges {
        rebind: Some(driver::Rebind {
            pci_address: "0000:00:04.0".parse().expect("address"),
            from: Some("nvme".into()),
            override_before: None,
            to: "vfio-pci".into(),
            namespaces: vec!["nvme0n1".into()],
            restored: true,
        }),
        hugepages: vec![driver::HugeChange {
            page_size: driver::PageSize::Size2M,
            from: 0,
            to: 2,
            restored: true,
        }],
        recovered: None,
    }
}

/// Two threads at QD 4 with verify on, the latencies spread over several buckets.
fn vfio_nvme_run() -> WorkloadOutput {
    let histograms = [9_000, 11_500]
        .map(|base: u64| histogram((0..400).map(|i| base + i * 37 + (i % 7) * 1_001)));
    let thread = |thread: u16, histogram: &driver::LatencyHistogram| driver::ThreadResult {
        thread,
        qid: thread + 1,
        pages: 4,
        ios: histogram.total(),
        bytes: histogram.total() * 4096,
        elapsed_s: 0.25,
        iops: histogram.total() as f64 / 0.25,
        mb_s: (histogram.total() * 4096) as f64 / 1e6 / 0.25,
        latency: histogram.summary(),
        ccdf: histogram.ccdf(),
        histogram: histogram.buckets_reported(),
    };
    let threads = vec![thread(0, &histograms[0]), thread(1, &histograms[1])];
    let mut total = driver::LatencyHistogram::new();
    for histogram in &histograms {
        total.merge(histogram);
    }
    let mut params = driver::Params {
        queue_depth: 4,
        threads: 2,
        verify: true,
        ..driver::Params::default()
    };
    params.target.device = Some("0000:00:04.0".into());
    params.target.bind = true;
    let setup = setup();
    let result = driver::VfioNvmeRun {
        params,
        device: device(),
        setup_maps: setup.maps.len(),
        setup_map_ns: setup.map_total_ns,
        setup,
        elapsed_s: 0.25,
        ios: total.total(),
        bytes: total.total() * 4096,
        iops: total.total() as f64 / 0.25,
        mb_s: (total.total() * 4096) as f64 / 1e6 / 0.25,
        latency: total.summary(),
        ccdf: total.ccdf(),
        histogram: total.buckets_reported(),
        threads,
        verify: Some(driver::VerifySummary {
            blocks_written: 0,
            blocks_checked: 800,
            blocks_mismatched: 0,
        }),
        interrupted: false,
        host: host(),
        latency_ns: total.summary(),
        work: None,
        worker_pid: Some(4321),
    };
    let work = Headline::counted(WorkUnit::Io, result.ios as f64, "iops", result.iops);
    let results = VfioNvmeResults::Run(Box::new(result));
    WorkloadOutput::new(results, work, Vec::new())
}

/// 4 KiB pages with a knee at 64 pages; 2 MiB pages flat (no knee).
fn vfio_nvme_sweep() -> WorkloadOutput {
    let series = |page_size: driver::PageSize, medians: &[u64]| {
        let steps: Vec<driver::SweepStep> = medians
            .iter()
            .enumerate()
            .map(|(i, &median_ns)| {
                let pages = 1u64 << (i * 2);
                driver::SweepStep {
                    pages,
                    bytes_covered: pages * page_size.bytes(),
                    ios: 1000,
                    median_ns,
                    p90_ns: median_ns + 900,
                    p99_ns: median_ns + 4_100,
                    mean_ns: median_ns as f64 + 123.456,
                }
            })
            .collect();
        let (knee, verdict) = driver::sweep::analyse(page_size, &steps);
        driver::SweepSeries {
            page_size,
            map: map(
                "data",
                steps.last().map_or(0, |s| s.bytes_covered),
                page_size,
                0x20_0000,
            ),
            steps,
            knee,
            verdict,
        }
    };
    let result = driver::VfioNvmeSweep {
        params: driver::SweepParams {
            page_sizes: vec![driver::PageSize::Size4K, driver::PageSize::Size2M],
            max_pages_per_size: vec![(driver::PageSize::Size2M, 16)],
            ..driver::SweepParams::default()
        },
        device: device(),
        setup: setup(),
        series: vec![
            series(
                driver::PageSize::Size4K,
                &[9_000, 9_010, 8_990, 9_005, 12_400, 12_380],
            ),
            series(driver::PageSize::Size2M, &[9_000, 9_020, 8_990]),
        ],
        interrupted: false,
        host: driver::HostChanges::default(),
        iotlb_entries_4k: None,
        iotlb_entries_2m: None,
        iotlb_entries_1g: None,
        work: None,
    }
    .with_knees_on_top();
    let results = VfioNvmeResults::Sweep(Box::new(result));
    WorkloadOutput::new(results, Headline::uncounted(WorkUnit::Io), Vec::new())
}

/// Each example by the name of its copies, with its workload.
fn examples() -> Vec<(&'static str, WorkloadKind, WorkloadOutput)> {
    vec![
        (
            "dma-contention",
            WorkloadKind::DmaContention,
            dma_contention(),
        ),
        ("tlb", WorkloadKind::Tlb, tlb()),
        ("vfio-nvme-run", WorkloadKind::VfioNvme, vfio_nvme_run()),
        ("vfio-nvme-sweep", WorkloadKind::VfioNvme, vfio_nvme_sweep()),
    ]
}

/// `text` is the copy at `path`, line for line.
fn assert_copy(path: &std::path::Path, text: &str) {
    let expected = std::fs::read_to_string(path).expect("the copy");
    if let Some((line, (got, want))) = text
        .lines()
        .zip(expected.lines())
        .enumerate()
        .find(|(_, (got, want))| got != want)
    {
        panic!(
            "{}:{}: {want:?} in the copy, {got:?} now",
            path.display(),
            line + 1
        );
    }
    assert_eq!(
        text.lines().count(),
        expected.lines().count(),
        "{}: lines",
        path.display()
    );
    assert!(text == expected, "differs from {}", path.display());
}

#[test]
fn examples_write_the_json_of_the_build_before_their_types() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../model/tests/results");
    for (name, kind, output) in examples() {
        let results = output.reported().expect("encodes").results;
        let read = WorkloadResults::read(kind.name(), results.to_map().expect("encodes"));
        assert!(
            !matches!(read, WorkloadResults::Other(_)),
            "{name} read as a map"
        );
        assert_eq!(read, results, "{name} read back");
        let mut text = serde_json::to_string_pretty(&results).expect("encodes");
        text.push('\n');
        assert_copy(&dir.join(format!("{name}.json")), &text);
    }
}

/// The summaries a person reads are those of the build before the types, word for word.
#[test]
fn examples_summaries_are_those_of_the_build_before_their_types() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/summaries");
    for (name, kind, output) in examples() {
        let results = output.reported().expect("encodes").results;
        assert_copy(&dir.join(format!("{name}.txt")), &kind.summarize(&results));
    }
}

/// A series whose later run failed keeps its complete runs' results typed, with the error beside
/// them: the summary a person reads is the complete runs', word for word, and the JSON reads
/// back as the same marked results.
#[test]
fn examples_marked_by_a_failed_later_run_summarize_as_before() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/summaries");
    let failed = WorkloadResults::Failed {
        error: "run 2: the workload exited with 1".into(),
    };
    for (name, kind, output) in examples() {
        let complete = output.reported().expect("encodes").results;
        let marked = complete.clone().marked_by(kind.name(), &failed);
        assert!(
            matches!(&marked, WorkloadResults::Marked { results, .. } if **results == complete),
            "{name}: {marked:?}"
        );
        assert_eq!(marked.error(), Some("run 2: the workload exited with 1"));
        let read = WorkloadResults::read(kind.name(), marked.to_map().expect("encodes"));
        assert_eq!(read, marked, "{name} read back");
        assert_copy(&dir.join(format!("{name}.txt")), &kind.summarize(&marked));
    }
}
