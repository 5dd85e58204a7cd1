//! Exact counts in the lab: per-device counts checked against an independent count of the same
//! work, on the conditions real machines have: two CPUs on a fully preemptible kernel with the NVMe
//! and both NICs busy at once, multi-segment and mixed-size I/O (AMD-Vi and virtio-iommu:
//! vendors.rs).
//!
//! The independent counts: fio's own I/O count and bytes, netperf's transactions, dd's block
//! count, and the block layer's completed reads (`/sys/block/nvme0n1/stat`). The guest side is
//! `cli/tests/lab/exact.sh`.

use crate::support::exact::*;
use crate::support::*;
use serde_json::Value;

/// 6.12 on two CPUs with full preemption, the NVMe reading and both NICs doing TCP_RR at once:
/// a per-CPU tracker lost up to 15% of the NVMe's maps here and charged one task's work to
/// another (the frames of preempted and migrated tasks).
#[test]
fn preempted_tasks_on_two_cpus_with_three_devices_busy_count_exactly() {
    if lab_skipped("preempted_tasks_on_two_cpus_with_three_devices_busy_count_exactly") {
        return;
    }
    three_devices_busy_count_exactly("6.12", &["--append", "preempt=full"], "concurrent");
}

/// The same on Debian's PREEMPT_RT kernel, where interrupts run in threads: the NVMe's
/// completions and the NICs' NAPI polls are tasks there, preemptible like any other. With one
/// thread-id slot for all of them (`IOMMUTOP_TASK_SLOTS=1`): every task but the slot's holder
/// keeps its calls in flight in the hash by thread id, and tasks pass the slot between them while
/// others' calls are still in flight there.
#[test]
fn preempt_rt_kernel_with_three_devices_busy_counts_exactly() {
    if lab_skipped("preempt_rt_kernel_with_three_devices_busy_counts_exactly") {
        return;
    }
    three_devices_busy_count_exactly("6.12-rt", &[], "concurrent-one-slot");
}

/// `mode`: exact.sh's concurrent mode, with the default slots or one slot.
fn three_devices_busy_count_exactly(kernel: &str, append: &[&str], mode: &str) {
    let mut lab_args = vec!["--kernel", kernel, "--iommu", "intel", "--smp", "2"];
    lab_args.extend_from_slice(append);
    let busy = boot(&format!("{mode}-{kernel}"), &lab_args, mode);
    let report = read_report(&busy, "concurrent");
    assert_nothing_untracked(&report);

    let nvme = device(&report, NVME);
    let fio_ios = fio_reads(&busy, "concurrent", "total_ios");
    for op in ["dma_map", "dma_unmap", "completion"] {
        assert_counted(
            &format!("NVMe {op} vs fio's I/Os"),
            count(nvme, op),
            fio_ios,
        );
    }
    assert_counted(
        "NVMe completions vs the block layer's",
        count(nvme, "completion"),
        block_reads(&busy, "concurrent"),
    );
    // A page-table map whose DMA call's entry program the kernel skipped is counted, but on
    // `unattributed` (shared with the NICs): none is lost, and the NVMe's own row is within 1%.
    let unattributed = report["devices"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["key"] == "unattributed"))
        .map_or(0, |row| count(row, "iommu_map"));
    let nvme_iommu_maps = count(nvme, "iommu_map");
    assert!(
        nvme_iommu_maps as f64 <= fio_ios as f64 * 1.005,
        "NVMe page-table maps {nvme_iommu_maps} vs fio's {fio_ios}"
    );
    // At least: `unattributed` holds the NICs' too.
    assert_not_short(
        &format!(
            "NVMe page-table maps {nvme_iommu_maps} (+{unattributed} unattributed) vs fio's I/Os"
        ),
        nvme_iommu_maps + unattributed,
        fio_ios,
    );
    assert_close(
        "NVMe page-table maps vs fio's I/Os",
        nvme_iommu_maps,
        fio_ios,
        1.0,
    );

    let alone = boot(
        &format!("rr-one-cpu-{kernel}"),
        &["--kernel", kernel, "--iommu", "intel", "--smp", "1"],
        "rr",
    );
    let alone_report = read_report(&alone, "rr");
    let (busy_rr, alone_rr) = (
        transactions(&busy, "concurrent"),
        transactions(&alone, "rr"),
    );
    for nic in NICS {
        let row = device(&report, nic);
        assert_maps_match_unmaps(nic, row);
        assert!(
            count(row, "tx_packets") > 0 && count(row, "completion") > 0,
            "{nic} sent and received: {row}"
        );
        assert_eq!(row["derived"]["io_basis"], "packets", "{row}");
        // Per packet (the kernel's own interface counters; per transaction printed beside),
        // without the NIC's RX ring fill: bringing the link up maps a whole ring of buffers
        // before the first packet, a fixed cost that a run with fewer transactions (the busy
        // one, where fio competes for the CPUs) would spread over fewer of them.
        let per = |report: &Value, work: u64| {
            count(device(report, nic), "dma_map").saturating_sub(E1000E_RX_RING_FILL) as f64
                / work as f64
        };
        let (two_cpus, one_cpu) = (per(&report, busy_rr), per(&alone_report, alone_rr));
        let (two_cpus_packet, one_cpu_packet) = (
            per(&report, nic_packets(&busy, "concurrent", nic)),
            per(&alone_report, nic_packets(&alone, "rr", nic)),
        );
        eprintln!(
            "{kernel} {nic}: {two_cpus:.4} maps per transaction on 2 CPUs, {one_cpu:.4} on 1; \
             {two_cpus_packet:.4} per packet on 2 CPUs, {one_cpu_packet:.4} on 1"
        );
        // Per packet, not per transaction: how many packets a transaction takes is TCP's, and
        // moves with the scheduling (6.12-rt at 33a6f44: 2.19 packets a transaction with fio
        // busy on 2 CPUs, 2.08 alone on 1, whatever the probes count; the maps per packet 1.458
        // and 1.482).
        assert!(
            (two_cpus_packet - one_cpu_packet).abs() <= one_cpu_packet * 0.02,
            "{nic}: {two_cpus_packet:.4} maps per packet on 2 CPUs, {one_cpu_packet:.4} on 1"
        );
    }
}

/// nvme-pci maps a multi-segment request with dma_map_sgtable up to 6.16, which passes neither
/// through dma_map_sg_attrs nor (for its page tables) through iommu_map: 5% of the maps of 128 KiB
/// reads were missing. Mixed sizes: the block layer splits some of fio's I/Os, so requests are
/// checked against its count and bytes against fio's.
#[test]
fn multi_segment_and_mixed_size_reads_count_every_map() {
    if lab_skipped("multi_segment_and_mixed_size_reads_count_every_map") {
        return;
    }
    multi_segment_reads_count_every_map("6.12", PageTables::OnePerRequest);
}

/// From 6.17 the block layer maps a multi-segment request with the IOVA API (dma_iova_try_alloc,
/// a dma_iova_link per segment, dma_iova_sync; dma_iova_destroy), which no DMA API map or unmap
/// function sees: 12.5% of the 128 KiB reads were uncounted on 6.18, their IOVA and IOTLB work
/// unattributed.
#[test]
fn reads_mapped_through_the_iova_api_count_every_map() {
    if lab_skipped("reads_mapped_through_the_iova_api_count_every_map") {
        return;
    }
    multi_segment_reads_count_every_map("6.18", PageTables::OnePerSegment);
}

/// How many page-table maps a multi-segment request makes on a kernel.
#[derive(Clone, Copy, PartialEq)]
enum PageTables {
    /// One iommu_map_sg per request (dma_map_sgtable).
    OnePerRequest,
    /// One iommu_map_nosync per linked segment (dma_iova_link), each mapping its own bytes.
    OnePerSegment,
}

fn multi_segment_reads_count_every_map(kernel: &str, page_tables: PageTables) {
    let out = boot(
        &format!("multiseg-{kernel}"),
        &["--kernel", kernel, "--iommu", "intel", "--smp", "2"],
        "multiseg",
    );
    let large = read_report(&out, "read-128k");
    assert_nothing_untracked(&large);
    let nvme = device(&large, NVME);
    let fio_ios = large["run"]["workload"]["results"]["ios"]
        .as_u64()
        .expect("fio's I/O count in the report");
    for op in ["dma_map", "dma_unmap", "completion"] {
        assert_close(
            &format!("{kernel} 128 KiB reads: {op} vs fio"),
            count(nvme, op),
            fio_ios,
            0.5,
        );
    }
    assert_eq!(
        bytes(nvme, "dma_map"),
        count(nvme, "dma_map") * 128 * 1024,
        "{kernel}: scatter-gather and IOVA-API maps count the bytes of their requests"
    );
    assert_page_tables(kernel, nvme, page_tables, fio_ios, Linking::Possible);

    let mixed = read_report(&out, "mixed");
    assert_nothing_untracked(&mixed);
    let nvme = device(&mixed, NVME);
    let requests = block_reads(&out, "mixed");
    for op in ["dma_map", "dma_unmap", "completion"] {
        assert_close(
            &format!("{kernel} 4k-256k reads: {op} vs the block layer's requests"),
            count(nvme, op),
            requests,
            0.5,
        );
    }
    assert_close(
        &format!("{kernel} 4k-256k reads: bytes mapped vs fio's bytes read"),
        bytes(nvme, "dma_map"),
        fio_reads(&out, "mixed", "io_bytes"),
        0.5,
    );
    assert_page_tables(kernel, nvme, page_tables, requests, Linking::Required);
}

/// Whether a run must have linked some request segment by segment (IOVA API kernels).
#[derive(Clone, Copy, PartialEq)]
enum Linking {
    /// fio's 128 KiB sequential reads: their 16 MiB of buffers, faulted in order on a guest
    /// just booted, come out of the page allocator nearly contiguous (141 of 18,226 reads had
    /// more than one segment on 6.18).
    Possible,
    /// fio's random 4k-256k reads: about half link several segments (18,253 more page-table
    /// maps than the 22,599 reads on 6.18), so none at all means the IOVA API went unused.
    Required,
}

fn assert_page_tables(
    kernel: &str,
    nvme: &Value,
    page_tables: PageTables,
    requests: u64,
    linking: Linking,
) {
    match page_tables {
        PageTables::OnePerRequest => assert_close(
            &format!("{kernel}: iommu_map vs requests"),
            count(nvme, "iommu_map"),
            requests,
            0.5,
        ),
        PageTables::OnePerSegment => {
            // Where fio's buffer is not physically contiguous a request links several
            // segments, each its own page-table map; together they map exactly the bytes the
            // DMA maps did (fio's buffers are page-aligned), plus the coherent buffers the
            // driver allocated meanwhile (its PRP/SGL list pool growing by a page).
            let maps = count(nvme, "iommu_map");
            let as_expected = match linking {
                Linking::Required => maps > requests,
                Linking::Possible => maps >= requests,
            };
            assert!(
                as_expected,
                "{kernel}: {maps} page-table maps for {requests} requests: fewer than one per \
                 request, or no request linked segment by segment where some must be"
            );
            assert_eq!(
                bytes(nvme, "iommu_map"),
                bytes(nvme, "dma_map") + bytes(nvme, "dma_alloc"),
                "{kernel}: the segments' page-table maps cover exactly what the DMA maps mapped"
            );
        }
    }
}

/// The load cell: two CPUs, fio 4 KiB random reads at QD32 × 4 jobs on the NVMe and TCP_RR on both
/// NICs at once, recorded with `--cross-check`. On main `e09d472` 5.10 (kprobes: a kprobe program
/// is skipped when an interrupt lands in another) lost NVMe unmaps, and 7.3 (a stale frame of
/// `dma_map_phys` taken for its wrapper's, every later map of the task its uncounted twin) NVMe
/// maps: docs/probes.md, "Attribution", has how many. Every count against the block layer's, fio's
/// and the NICs' interface counters, within 0.5% with no allowance for what the report admits; the
/// report's loss figures against the shortfall; the kernel's own events (6.12+) against the probes,
/// the NICs' maps' independent truth; and, where the kernel preempts inside programs
/// (`understudies`), at most 0.1% of the timed operations' calls untimed.
fn load_cell_counts_exactly(kernel: &str, understudies: bool) {
    let out = boot(
        &format!("load-{kernel}"),
        &["--kernel", kernel, "--iommu", "intel", "--smp", "2"],
        "load",
    );
    let report = read_report(&out, "load");
    assert_load_cell(kernel, &out, &report, understudies);
}

/// What every load cell checks of its report (see [`load_cell_counts_exactly`]).
fn assert_load_cell(kernel: &str, out: &std::path::Path, report: &Value, understudies: bool) {
    assert_nothing_untracked(report);
    let reads = block_reads(out, "load");
    assert_close(
        &format!("{kernel}: the block layer's reads vs fio's"),
        reads,
        fio_reads(out, "load", "total_ios"),
        0.5,
    );
    let nvme = device(report, NVME);
    // A page-table map whose DMA call's programs the kernel skipped is charged through its IOMMU
    // domain to the device the domain serves, so the NVMe's row has one per read still.
    for op in ["dma_map", "dma_unmap", "completion", "iommu_map"] {
        assert_counted(
            &format!("{kernel} under load: NVMe {op} vs the block layer's reads"),
            count(nvme, op),
            reads,
        );
    }
    for op in ["dma_map", "dma_unmap"] {
        assert_loss_figure_true(
            &format!("{kernel} under load"),
            report,
            op,
            count(nvme, op),
            reads,
        );
    }
    let compared = ["dma_map", "dma_unmap", "completion"];
    if compared.iter().all(|op| count(nvme, op) == reads) {
        assert_no_loss_warning(
            &format!("{kernel} under load, counts exact"),
            report,
            &compared,
        );
    }
    for nic in NICS {
        let row = device(report, nic);
        assert_maps_match_unmaps(&format!("{kernel} under load: {nic}"), row);
        assert_close(
            &format!(
                "{kernel} under load: {nic} packets sent and received vs its interface counters"
            ),
            count(row, "tx_packets") + count(row, "completion"),
            nic_packets(out, "load", nic),
            0.5,
        );
        assert_nic_directions(
            &format!("{kernel} under load: {nic}"),
            row,
            nic_packets_sent(out, "load", nic),
            nic_packets_received(out, "load", nic),
            transactions(out, "load"),
        );
    }
    let mut compared = vec![NVME];
    compared.extend(NICS);
    assert_cross_check_agrees(
        &format!("{kernel} under load"),
        report,
        &compared,
        !matches!(kernel, "5.10" | "6.1"),
        kernel != "5.10",
    );
    assert_eq!(
        report["self_overhead"]["understudies"]["on"], understudies,
        "{kernel}: understudies: {}",
        report["self_overhead"]["understudies"]
    );
    if understudies {
        assert_untimed_within_target(&format!("{kernel} under load"), report);
    }
}

#[test]
fn load_cell_counts_exactly_on_5_10() {
    if lab_skipped("load_cell_counts_exactly_on_5_10") {
        return;
    }
    load_cell_counts_exactly("5.10", false);
}

#[test]
fn load_cell_counts_exactly_on_6_12() {
    if lab_skipped("load_cell_counts_exactly_on_6_12") {
        return;
    }
    load_cell_counts_exactly("6.12", false);
}

#[test]
fn load_cell_counts_exactly_on_7_3() {
    if lab_skipped("load_cell_counts_exactly_on_7_3") {
        return;
    }
    load_cell_counts_exactly("7.3", true);
}

/// Waiting inside translation: on PREEMPT_RT a lock inside translation sleeps, and a task in a DMA
/// call is preempted by the interrupt threads: that time is waiting, not the call's cost. The
/// report keeps it apart (`offcpu_ns`, `waited`), out of `total_ns`; the counts are the block
/// layer's and everything else is as in the load cells.
#[test]
fn preempt_rt_waiting_inside_translation_is_measured_apart() {
    if lab_skipped("preempt_rt_waiting_inside_translation_is_measured_apart") {
        return;
    }
    let out = boot(
        "load-6.12-rt-amd",
        &["--kernel", "6.12-rt", "--iommu", "amd", "--smp", "2"],
        "load",
    );
    let report = read_report(&out, "load");
    // On RT a task is preempted inside a probe program far more often (every program switched
    // out there holds its place on the CPU, and the kernel skips it for every call meanwhile):
    // CI at 477d305 counted 2,801 maps of 2,826 reads (25 short, 0.88%) before understudies.
    assert_load_cell("6.12-rt AMD-Vi", &out, &report, true);
    let nvme = device(&report, NVME);
    let (mut waited, mut offcpu) = (0, 0);
    for op in ["dma_map", "dma_unmap"] {
        let latency = &nvme["ops"][op]["latency"];
        let field = |name: &str| {
            latency[name]
                .as_u64()
                .unwrap_or_else(|| panic!("NVMe {op}: no {name} in {latency}"))
        };
        let (own, raw, op_offcpu) = (field("total_ns"), field("raw_total_ns"), field("offcpu_ns"));
        assert!(
            own + op_offcpu <= raw,
            "NVMe {op}: self {own} ns and waiting {op_offcpu} ns exceed the {raw} ns measured"
        );
        waited += field("waited");
        offcpu += op_offcpu;
    }
    eprintln!("6.12-rt AMD-Vi: {waited} NVMe DMA calls waited {offcpu} ns in all");
    assert!(
        waited > 0 && offcpu > 0,
        "on PREEMPT_RT under load some NVMe DMA calls wait switched out: {nvme}"
    );
    // Under emulation the NVMe's maps keep a tail on the CPU too (the vCPU held by the host:
    // gone on the instruction clock, docs/measurements.md): a mean over 4x its median is named.
    let map = &nvme["ops"]["dma_map"]["latency"];
    let (mean, p50) = (
        map["mean_ns"].as_f64().unwrap(),
        map["p50_ns"].as_f64().unwrap(),
    );
    let said = format!("{} dma_map: its mean", nvme["key"].as_str().unwrap());
    let named = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .any(|w| w.starts_with(&said));
    eprintln!("6.12-rt AMD-Vi: NVMe dma_map mean {mean:.0} ns, p50 {p50:.0} ns");
    assert!(
        mean <= 4.0 * p50 || named,
        "NVMe dma_map mean {mean} ns is over 4x its p50 {p50} ns and no warning says what the tail is"
    );
    // The verdict names it (measured: 66% of the NVMe's DMA map and unmap time was waiting).
    let shown = std::process::Command::new(env!("CARGO_BIN_EXE_iommutop"))
        .arg("report")
        .arg(out.join("load.json"))
        .output()
        .expect("iommutop report runs");
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains("waiting inside translation"),
        "diagnose's verdict does not name the waiting: {text}"
    );
}

/// Every time against measures that are not the probes': the load cell (fio 4 KiB
/// random reads, 8 jobs at QD1, and TCP_RR on both NICs; QD1 because the instruction clock's one
/// TCG thread makes QEMU 7.2's NVMe behind VT-d lose batched reads, see docs/lab.md) under
/// perf's sampling profile of every CPU, on the lab's instruction clock (`--icount 1`: 2 ns an
/// instruction). Under plain TCG a guest's clock follows the host's, so a call's time holds the
/// emulator's stalls (a vCPU waiting for QEMU's big lock in an IOMMU register write): real to
/// the guest, but a timer interrupt cannot sample them, and they differ from run to run. On the
/// instruction clock a call takes the instructions it runs. Only the DMA API's points are
/// attached (`exact.sh profile-dma`): with every point on, three quarters of a DMA map's
/// instructions are other probes' (self time takes them out; its own accuracy is
/// `bench/self-time`'s), and the comparison would test that subtraction rather than the timing.
/// `scripts/lib/time_verdict.py` checks that no timed DMA call of the NVMe outlasts fio's
/// longest I/O nor one of a NIC netperf's longest transaction, that each device's dma_map mean
/// is at most 4x its median, and that each driver's dma_map time agrees with the profile's within
/// 35% (its unmaps happen in hard interrupts, where a timer's sample cannot land: printed, not
/// compared); the counts stay exact.
fn times_agree_with_the_workloads_and_a_profile(kernel: &str, iommu: &str, smp: &str) {
    let out = boot(
        &format!("profile-{kernel}-{iommu}-smp{smp}"),
        // Shift 1, not 0: the same instructions take twice the guest's time, so the workloads'
        // 6 s hold half as many and the guest runs half as long on its one host thread (201 and
        // 214 s alone, where shift 0 took 563 s in a full suite and 604 s in CI); the verdict's
        // figures stayed within shift 0's spread (docs/measurements.md). scripts/matrix's
        // cells keep shift 0.
        &[
            "--kernel",
            kernel,
            "--iommu",
            iommu,
            "--smp",
            smp,
            "--icount",
            "1",
            "--timeout",
            "1500",
        ],
        "profile-dma",
    );
    let report = read_report(&out, "profile");
    assert_nothing_untracked(&report);
    let nvme = device(&report, NVME);
    let reads = block_reads(&out, "profile");
    for op in ["dma_map", "dma_unmap"] {
        assert_close(
            &format!("{kernel} {iommu} {smp} vCPUs: NVMe {op} vs the block layer's reads"),
            count(nvme, op),
            reads,
            0.5,
        );
    }
    let verdict = std::process::Command::new("python3")
        .arg(project_root().join("scripts/lib/time_verdict.py"))
        .arg(&out)
        .arg("profile")
        .output()
        .expect("python3 runs scripts/lib/time_verdict.py");
    let text = String::from_utf8_lossy(&verdict.stdout);
    eprintln!("{text}{}", String::from_utf8_lossy(&verdict.stderr));
    assert!(
        verdict.status.success(),
        "{kernel} {iommu} on {smp} vCPUs: the times disagree with the workloads or the profile: {text}"
    );
}

/// On 2 vCPUs, where a call can be preempted and resumed elsewhere. The 1-vCPU cell and the
/// other kernels' and vendors' are `scripts/matrix`'s (each costs 200 s of one host core on the
/// instruction clock: CI keeps the harder one).
#[test]
fn times_agree_with_the_workloads_and_a_profile_on_2_vcpus() {
    if lab_skipped("times_agree_with_the_workloads_and_a_profile_on_2_vcpus") {
        return;
    }
    // VT-d: AMD-Vi maps with interrupts off nearly throughout, so a timer's samples land where
    // they come back on, and its NVMe figure wanders (1.02x, 1.13x, 1.26x in three runs; the
    // matrix keeps that cell).
    times_agree_with_the_workloads_and_a_profile("6.12", "intel", "2");
}

/// Needs no guest: which warnings count against exact counts.
#[test]
fn a_loss_warning_counts_against_the_operations_it_names() {
    let report = |warning: &str| serde_json::json!({ "warnings": [warning] });
    let flushes =
        "2 iotlb_flush calls were seen by no probe program: the counts are short by that many";
    assert_no_loss_warning("flushes", &report(flushes), &["dma_map", "completion"]);
    for warning in [
        "3 dma_map calls were seen by no probe program: the counts are short by that many",
        "the counts may be incomplete",
    ] {
        let refused = std::panic::catch_unwind(|| {
            assert_no_loss_warning("maps", &report(warning), &["dma_map", "completion"])
        });
        assert!(refused.is_err(), "{warning}");
    }
    assert_eq!(
        ops_named("dma_map_sg and iova_alloc_slow"),
        ["iova_alloc_slow"]
    );
}
