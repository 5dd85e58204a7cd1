//! Every IOMMU vendor the lab has, counted exactly: dd's 2,000 direct 4 KiB reads of the NVMe
//! behind AMD-Vi and virtio-iommu (VT-d is exact.rs's), with every point attached and with only
//! the DMA API's, and the IOTLB invalidations where each vendor's driver and mode put them. The
//! guest side is `cli/tests/lab/exact.sh dd`.

use crate::support::exact::*;
use crate::support::*;
use serde_json::Value;
use std::path::Path;

/// IOTLB invalidations per 4 KiB read that the driver issues, derived from the kernel source
/// (6.12), for a domain of the given type:
/// - AMD-Vi, strict (`DMA`; QEMU's AMD-Vi reports NpCache, and with NpCache the driver neither
///   uses a flush queue nor skips the flush after a map): `amd_iommu_iotlb_sync_map` flushes the
///   new range (`domain_flush_np_cache` → `amd_iommu_domain_flush_pages`), and the unmap's
///   `amd_iommu_iotlb_sync` flushes the gathered range (→ `amd_iommu_domain_flush_pages`, counted
///   once with it): 2.
/// - virtio-iommu, lazy (`DMA-FQ`): the unmap queues its request and the flush queue's timer
///   syncs them all with `viommu_flush_iotlb_all` (charged to `deferred`, whole-domain): 0 on the
///   device.
fn expected_invalidations_per_read(iommu: &str, domain_type: &str) -> Option<f64> {
    match (iommu, domain_type) {
        ("amd", "DMA") => Some(2.0),
        ("virtio", "DMA-FQ") => Some(0.0),
        _ => None,
    }
}

fn domain_type_of(out: &Path, pci: &str) -> String {
    read(&out.join("groups.txt"))
        .lines()
        .find(|line| line.split_whitespace().next() == Some(pci))
        .and_then(|line| line.split_whitespace().last())
        .unwrap_or_else(|| panic!("no IOMMU group lists {pci}"))
        .to_string()
}

#[test]
fn amd_and_virtio_iommus_count_maps_and_invalidations_exactly() {
    if lab_skipped("amd_and_virtio_iommus_count_maps_and_invalidations_exactly") {
        return;
    }
    for iommu in ["amd", "virtio"] {
        let out = boot(
            &format!("dd-{iommu}"),
            &["--kernel", "6.12", "--iommu", iommu, "--smp", "2"],
            "dd",
        );
        let report = read_report(&out, "dd");
        let nvme = every_read_counted(&report, iommu);
        // The unit names its vendor (virtio-iommu's by its device's driver), and no other
        // vendor's driver functions are hooked: they are never called here.
        assert_eq!(
            report["host"]["iommu"]["vendor"], iommu,
            "{}",
            report["host"]
        );
        let others = if iommu == "amd" {
            ["intel_", "qi_submit"]
        } else {
            ["intel_", "amd_"]
        };
        for probe in report["probes"].as_array().expect("probes") {
            let hooks = probe["symbol"].as_str().unwrap_or_default();
            assert!(
                !others.iter().any(|other| hooks.contains(other)),
                "{iommu}: another vendor's function hooked: {probe}"
            );
        }
        // Self time: with every point attached, the IOVA, page-table and IOTLB probes run inside
        // each map and their run time is taken out; with only dma_map and dma_unmap attached,
        // nothing runs inside a map, and only the calibrated dispatch of the map's own probes
        // is taken out of each.
        let (own, raw) = dma_map_times(&report);
        assert!(
            own < raw,
            "{iommu}: nested probes ran inside the maps: self {own} vs raw {raw}"
        );
        let alone = read_report(&out, "dd-points");
        assert_close(
            &format!("{iommu}: dma_map with --points vs dd's 2000 reads"),
            count(device(&alone, NVME), "dma_map"),
            2000,
            0.5,
        );
        let (own, raw) = dma_map_times(&alone);
        let dispatch = alone["self_overhead"]["dispatch_ns"]
            .as_u64()
            .unwrap_or_else(|| panic!("{iommu}: dispatch not calibrated: {}", alone["warnings"]));
        let timed = device(&alone, NVME)["ops"]["dma_map"]["latency"]["timed"]
            .as_u64()
            .expect("timed");
        assert_eq!(
            own,
            raw - timed * dispatch,
            "{iommu}: with --points dma_map,dma_unmap nothing but the dispatch is taken out \
             ({timed} maps, {dispatch} ns dispatch)"
        );
        // A nested call's dispatch holds two programs' entering and leaving: more than one gap.
        let nested = report["self_overhead"]["nested_dispatch_ns"]
            .as_u64()
            .unwrap_or_else(|| {
                panic!(
                    "{iommu}: nested dispatch not calibrated: {}",
                    report["warnings"]
                )
            });
        assert!(
            nested > dispatch,
            "{iommu}: a nested call's dispatch {nested} ns, one gap {dispatch} ns"
        );
        let domain_type = domain_type_of(&out, NVME);
        let per_read = count(nvme, "iotlb_flush") as f64 / 2000.0;
        eprintln!("{iommu} ({domain_type}): {per_read} invalidations per read");
        let expected = expected_invalidations_per_read(iommu, &domain_type)
            .unwrap_or_else(|| panic!("{iommu}: no expectation for a {domain_type} domain"));
        assert!(
            (per_read - expected).abs() <= expected * 0.005 + 0.0025,
            "{iommu} ({domain_type}): {per_read} invalidations per read, the driver issues {expected}"
        );
        // A whole-domain flush is counted as such and adds no bytes (AMD passes 2^63).
        assert!(
            bytes(nvme, "iotlb_flush") <= count(nvme, "iotlb_flush") * (1 << 30),
            "{iommu}: {} bytes of invalidations",
            bytes(nvme, "iotlb_flush")
        );
        if domain_type == "DMA-FQ" {
            let deferred = device(&report, "deferred");
            assert!(count(deferred, "fq_flush") > 0, "{deferred}");
            assert_eq!(
                count(deferred, "iotlb_flush_full"),
                count(deferred, "iotlb_flush"),
                "the flush queue's invalidations are whole-domain ones: {deferred}"
            );
        }
    }
}

/// AMD-Vi on the oldest lab kernel, whose AMD-Vi has DMA ops of its own (6.12's is checked above;
/// 6.1's, 6.18's and 7.3's in scripts/matrix). 5.10's AMD-Vi is lazy under a group type of `DMA`
/// (`DMA-FQ` is 5.15's name); the report says lazy.
#[test]
fn amd_iommu_counts_exactly_on_5_10() {
    if lab_skipped("amd_iommu_counts_exactly_on_5_10") {
        return;
    }
    vendor_counts_exactly("5.10", "amd");
}

/// AMD-Vi on the newest lab kernel.
#[test]
#[ignore = "CI runs 6.12's and 5.10's for time; scripts/matrix runs this (cargo test -- --ignored)"]
fn amd_iommu_counts_exactly_on_7_3() {
    if lab_skipped("amd_iommu_counts_exactly_on_7_3") {
        return;
    }
    vendor_counts_exactly("7.3", "amd");
}

/// virtio-iommu on the newest lab kernel (6.12's is checked above; 6.18's in scripts/matrix;
/// Debian's 5.10 and 6.1 lack its driver).
#[test]
#[ignore = "CI runs 6.12's for time; scripts/matrix runs this (cargo test -- --ignored)"]
fn virtio_iommu_counts_exactly_on_7_3() {
    if lab_skipped("virtio_iommu_counts_exactly_on_7_3") {
        return;
    }
    vendor_counts_exactly("7.3", "virtio");
}

/// dd's 2,000 direct 4 KiB reads on `kernel` behind `iommu`, two CPUs: every DMA map and unmap,
/// page-table map and unmap and completion counted, and the invalidations where the report's
/// mode puts them: a strict domain's on the device, as many per read as the driver issues; a
/// lazy one's none there, all in the flush queue's deferred row as whole-domain flushes.
fn vendor_counts_exactly(kernel: &str, iommu: &str) {
    let cell = format!("{kernel} {iommu}");
    let out = boot(
        &format!("dd-{kernel}-{iommu}"),
        &["--kernel", kernel, "--iommu", iommu, "--smp", "2"],
        "dd",
    );
    let report = read_report(&out, "dd");
    let nvme = every_read_counted(&report, &cell);
    match report["host"]["iommu"]["dma_mode"].as_str() {
        Some("strict") => {
            let per_read = count(nvme, "iotlb_flush") as f64 / 2000.0;
            let expected = expected_invalidations_per_read(iommu, "DMA")
                .unwrap_or_else(|| panic!("{cell}: no expectation for a strict domain"));
            assert!(
                (per_read - expected).abs() <= expected * 0.005 + 0.0025,
                "{cell} (strict): {per_read} invalidations per read, the driver issues {expected}"
            );
        }
        Some("lazy") => {
            assert_eq!(count(nvme, "iotlb_flush"), 0, "{cell} (lazy): {nvme}");
            let deferred = device(&report, "deferred");
            assert!(count(deferred, "fq_flush") > 0, "{cell}: {deferred}");
            assert!(count(deferred, "iotlb_flush") > 0, "{cell}: {deferred}");
            assert_eq!(
                count(deferred, "iotlb_flush_full"),
                count(deferred, "iotlb_flush"),
                "{cell}: the flush queue's invalidations are whole-domain ones: {deferred}"
            );
        }
        other => panic!("{cell}: DMA mode {other:?}: {}", report["host"]["iommu"]),
    }
}

/// The NVMe's row of a dd report, after checking that nothing went untracked and that each of
/// dd's 2,000 reads is one DMA map and unmap, one page-table map and unmap, and one completion.
fn every_read_counted<'a>(report: &'a Value, cell: &str) -> &'a Value {
    assert_nothing_untracked(report);
    let nvme = device(report, NVME);
    for op in [
        "dma_map",
        "dma_unmap",
        "iommu_map",
        "iommu_unmap",
        "completion",
    ] {
        assert_close(
            &format!("{cell}: {op} vs dd's 2000 reads"),
            count(nvme, op),
            2000,
            0.5,
        );
    }
    nvme
}
