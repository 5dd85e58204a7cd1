//! The verdict of `iommutop diagnose`: from one report, what translation costs each device, where
//! the time goes, which call paths pay it, and what to try. Pure: the same report gives the same
//! words, so it is unit-tested on fixture reports.

use crate::report::Report;
use crate::sample::Op;
use crate::snapshot::Device;
use std::fmt::Write;

/// Operations whose time a verdict breaks the translation cost into, with their plain names.
const WHERE: [(Op, &str); 7] = [
    (Op::IovaAlloc, "IOVA allocation"),
    (
        Op::IovaAllocSlow,
        "IOVA allocation through the rbtree (cache misses)",
    ),
    (Op::IommuMap, "page-table updates (map)"),
    (Op::IommuUnmap, "page-table updates (unmap)"),
    (Op::IotlbSync, "IOTLB sync after map"),
    (Op::IotlbFlush, "IOTLB invalidation and its wait"),
    (Op::IovaFree, "IOVA release"),
];

/// Devices worth a verdict: those that mapped memory for DMA, busiest first.
fn dma_devices<'a>(report: &'a Report, only: Option<&str>) -> Vec<&'a Device> {
    let mut devices: Vec<&Device> = report
        .devices
        .iter()
        .filter(|d| d.op(Op::DmaMap).count > 0)
        .filter(|d| {
            only.is_none_or(|wanted| d.key == wanted || d.names.iter().any(|n| n == wanted))
        })
        .collect();
    devices.sort_by_key(|d| std::cmp::Reverse(d.op(Op::DmaMap).count));
    devices
}

/// The system half of the verdict: is anything translated, and why.
pub fn system_facts(report: &Report) -> String {
    let host = &report.host;
    let mut out = String::new();
    let kernel = host.kernel_release.as_deref().unwrap_or("unknown kernel");
    let _ = writeln!(
        out,
        "kernel {kernel}{}",
        if host.lab { " (iommutop lab)" } else { "" }
    );
    if !host.iommu.present {
        let _ = writeln!(
            out,
            "IOMMU: none active: DMA addresses are not translated here"
        );
    } else {
        let vendor = host.iommu.vendor.map_or("unknown vendor", |v| v.name());
        let domain = host
            .iommu
            .default_domain_type
            .as_deref()
            .unwrap_or("unknown");
        let mode = host.iommu.dma_mode.map_or("unknown", |m| m.name());
        let _ = writeln!(
            out,
            "IOMMU: {vendor} ({}), default domain {domain}, {mode} invalidation",
            host.iommu.units.join(", ")
        );
    }
    let cmdline_iommu: Vec<&str> = host
        .cmdline
        .as_deref()
        .unwrap_or("")
        .split_whitespace()
        .filter(|p| {
            [
                "intel_iommu=",
                "amd_iommu=",
                "iommu=",
                "iommu.passthrough=",
                "iommu.strict=",
            ]
            .iter()
            .any(|k| p.starts_with(k))
        })
        .collect();
    let _ = writeln!(
        out,
        "command line: {}",
        if cmdline_iommu.is_empty() {
            "no IOMMU parameters".to_string()
        } else {
            cmdline_iommu.join(" ")
        }
    );
    let config: Vec<String> = host
        .kernel_config
        .iter()
        .filter(|(k, _)| k.contains("IOMMU"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if !config.is_empty() {
        let _ = writeln!(out, "kernel config: {}", config.join(" "));
    }
    out
}

/// The verdict for every device that did DMA during the run (or the one asked for).
pub fn verdict(report: &Report, device: Option<&str>) -> String {
    let mut out = system_facts(report);
    let devices = dma_devices(report, device);
    if devices.is_empty() {
        let _ = writeln!(
            out,
            "\nno device mapped memory for DMA during the run{}: nothing to attribute",
            device
                .map(|d| format!(" (asked for {d})"))
                .unwrap_or_default()
        );
        return out;
    }
    for d in devices {
        out.push('\n');
        out.push_str(&device_verdict(report, d));
    }
    out
}

fn device_verdict(report: &Report, d: &Device) -> String {
    let mut out = String::new();
    let names = if d.names.is_empty() {
        String::new()
    } else {
        format!(" ({})", d.names.join(", "))
    };
    let driver = d.driver.as_deref().unwrap_or("no driver");
    let domain = d.domain_type.as_deref().unwrap_or("no IOMMU group");
    let _ = writeln!(out, "{}{names}, {driver}, domain {domain}", d.key);
    let maps = d.op(Op::DmaMap);
    let translated = d.op(Op::IommuMap).count > 0;
    let _ = writeln!(
        out,
        "  {} DMA maps{}, {} completed I/Os",
        maps.count,
        maps.avg_bytes
            .map(|b| format!(" of {b:.0} bytes on average"))
            .unwrap_or_default(),
        d.completions
    );
    match (d.derived.translation_ns_per_io, d.derived.cpu_share) {
        (Some(per_io), Some(share)) => {
            let _ = writeln!(
                out,
                "  translation costs {per_io:.0} ns per I/O and {:.1}% of one CPU",
                share * 100.0
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "  translation time not measured (the DMA path was only counted)"
            );
        }
    }
    if !translated {
        let _ = writeln!(
            out,
            "  no IOMMU page-table work: this device's DMA is not translated ({domain})"
        );
        return out;
    }
    let mut shares: Vec<(f64, &str)> = WHERE
        .iter()
        .filter_map(|(op, what)| d.derived.of_which.get(op).map(|share| (*share, *what)))
        .filter(|(share, _)| *share > 0.0)
        .collect();
    shares.sort_by(|a, b| b.0.total_cmp(&a.0));
    if !shares.is_empty() {
        let _ = writeln!(
            out,
            "  where the time goes (shares of translation time, nested ones overlap):"
        );
        for (share, what) in shares {
            let _ = writeln!(out, "    {:5.1}%  {what}", share * 100.0);
        }
    }
    let per_io = |op: Op| {
        let count = d.op(op).count as f64;
        (d.completions > 0).then(|| count / d.completions as f64)
    };
    if let (Some(syncs), Some(flushes)) = (per_io(Op::IotlbSync), d.derived.iotlb_flushes_per_io) {
        let _ = writeln!(
            out,
            "  per I/O: {syncs:.2} IOTLB syncs, {flushes:.2} IOTLB invalidations"
        );
    }
    let paths = heaviest_paths(report, &d.key);
    if !paths.is_empty() {
        let _ = writeln!(out, "  call paths that pay it (sampled):");
        for (op, path, samples) in paths {
            let _ = writeln!(out, "    {op} ×{samples}: {path}");
        }
    }
    let _ = writeln!(out, "  what to try:");
    for advice in advice(d) {
        let _ = writeln!(out, "    - {advice}");
    }
    out
}

/// Frames shown of a call path: the probed function and the callers that explain it.
const SHOWN_FRAMES: usize = 6;

/// A device's sampled call paths as shown (their first frames), merged and heaviest first.
fn heaviest_paths(report: &Report, device: &str) -> Vec<(String, String, u64)> {
    let mut merged: Vec<(String, String, u64)> = Vec::new();
    for stack in report.stacks.iter().filter(|s| s.device == device) {
        let path = stack
            .frames
            .iter()
            .take(SHOWN_FRAMES)
            .map(String::as_str)
            .collect::<Vec<_>>();
        let path = path.join(" ← ");
        match merged
            .iter_mut()
            .find(|(op, p, _)| *op == stack.op && *p == path)
        {
            Some((_, _, samples)) => *samples += stack.samples,
            None => merged.push((stack.op.clone(), path, stack.samples)),
        }
    }
    merged.sort_by_key(|(_, _, samples)| std::cmp::Reverse(*samples));
    merged.truncate(3);
    merged
}

/// The sampled call paths in the folded format of flame-graph tools, one line per path:
/// `DEVICE;OP;outermost;...;innermost SAMPLES`.
pub fn folded_stacks(report: &Report) -> Vec<String> {
    report
        .stacks
        .iter()
        .map(|s| {
            let mut frames: Vec<&str> = vec![s.device.as_str(), s.op.as_str()];
            frames.extend(s.frames.iter().rev().map(String::as_str));
            format!("{} {}", frames.join(";"), s.samples)
        })
        .collect()
}

/// What to try for a translated device, from its domain type and mapping pattern.
fn advice(d: &Device) -> Vec<String> {
    let mut tips = Vec::new();
    let saving = d
        .derived
        .translation_ns_per_io
        .map(|ns| format!(" (saves up to the {ns:.0} ns per I/O measured here; `iommutop diagnose --ab` measures it)"))
        .unwrap_or_default();
    tips.push(format!(
        "a trusted device can skip translation: identity domain for its group (`echo identity > /sys/kernel/iommu_groups/{}/type` with the driver unbound) or `iommu=pt` for all{saving}",
        d.iommu_group.map_or("N".to_string(), |g| g.to_string())
    ));
    if d.domain_type.as_deref() == Some("DMA") {
        let flushes = d.derived.iotlb_flushes_per_io.unwrap_or(0.0);
        tips.push(format!(
            "strict mode invalidates the IOTLB on every unmap ({flushes:.2} per I/O): lazy mode (`DMA-FQ`, `iommu.strict=0`) batches them"
        ));
    }
    if let Some(avg) = d.op(Op::DmaMap).avg_bytes {
        if avg < 8192.0 && d.derived.maps_per_io.is_some_and(|m| m >= 2.0) {
            tips.push(format!(
                "{:.1} small maps ({avg:.0} bytes) per I/O: larger DMA segments or reused (pooled) mappings amortise the per-map cost",
                d.derived.maps_per_io.unwrap_or(0.0)
            ));
        }
    }
    tips.push(
        "a userspace driver (VFIO) maps once at set-up; with 2 MiB pages it also needs fewer IOTLB entries (`iommutop workload vfio-nvme --iotlb-sweep`)".to_string(),
    );
    tips
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::full_report;

    #[test]
    fn names_the_device_its_cost_and_what_to_try() {
        let report = full_report();
        let text = verdict(&report, None);
        let device = report
            .devices
            .iter()
            .find(|d| d.op(Op::DmaMap).count > 0)
            .expect("fixture has a DMA device");
        assert!(text.contains(&device.key), "{text}");
        assert!(text.contains("what to try:"), "{text}");
        assert!(text.contains("identity domain"), "{text}");
    }

    #[test]
    fn call_paths_that_look_the_same_are_merged_heaviest_first() {
        let mut report = full_report();
        let device = report.devices[0].key.clone();
        let path = |top: &str, samples| crate::report::StackSample {
            device: device.clone(),
            op: "dma_map".into(),
            samples,
            total_ns: 0,
            frames: vec!["dma_map_page_attrs".into(), top.into()],
        };
        report.stacks = vec![
            path("nvme_queue_rq", 2),
            path("e1000_xmit_frame", 3),
            path("nvme_queue_rq", 4),
        ];
        let paths = heaviest_paths(&report, &device);
        assert_eq!(
            paths,
            [
                (
                    "dma_map".to_string(),
                    "dma_map_page_attrs ← nvme_queue_rq".to_string(),
                    6
                ),
                (
                    "dma_map".to_string(),
                    "dma_map_page_attrs ← e1000_xmit_frame".to_string(),
                    3
                ),
            ]
        );
    }

    #[test]
    fn folded_stacks_put_the_device_and_op_first_and_the_callee_last() {
        let mut report = full_report();
        report.stacks = vec![crate::report::StackSample {
            device: "0000:00:05.0".into(),
            op: "dma_map".into(),
            samples: 7,
            total_ns: 0,
            frames: vec!["dma_map_page_attrs".into(), "e1000_xmit_frame".into()],
        }];
        assert_eq!(
            folded_stacks(&report),
            ["0000:00:05.0;dma_map;e1000_xmit_frame;dma_map_page_attrs 7"]
        );
    }

    #[test]
    fn an_unknown_device_is_said_to_have_done_no_dma() {
        let text = verdict(&full_report(), Some("0000:ff:00.0"));
        assert!(
            text.contains(
                "no device mapped memory for DMA during the run (asked for 0000:ff:00.0)"
            ),
            "{text}"
        );
    }
}
