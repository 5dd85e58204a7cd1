//! The lines a person reads of a vfio-nvme run: a run's totals, threads, set-up cost and host
//! changes, or a sweep's table per page size with its verdict.

use iommutop_model::results::vfio_nvme::{LatencySummary, VfioNvmeRun, VfioNvmeSweep};
use std::fmt::Write as _;

/// A few lines for a terminal.
pub fn run_text(run: &VfioNvmeRun) -> String {
    let mut s = String::new();
    let d = &run.device;
    let _ = writeln!(
        s,
        "{} {} (ns {}, {} x {} B) via {}: {} bs={} qd={} threads={} pages={} x {}",
        d.pci_address,
        d.model,
        d.nsid,
        d.namespace_blocks,
        d.lba_size,
        d.iommu.backend,
        run.params.pattern,
        run.params.block_size,
        run.params.queue_depth,
        run.params.threads,
        run.params.pages_per_thread(),
        run.params.page_size,
    );
    let _ = writeln!(
        s,
        "{} I/Os in {:.2} s: {:.0} IOPS, {:.2} MB/s{}",
        run.ios,
        run.elapsed_s,
        run.iops,
        run.mb_s,
        if run.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    );
    let _ = writeln!(s, "latency: {}", latency_text(&run.latency));
    for t in &run.threads {
        let _ = writeln!(
            s,
            "  thread {} (queue {}): {} I/Os, {:.0} IOPS, {}",
            t.thread,
            t.qid,
            t.ios,
            t.iops,
            latency_text(&t.latency)
        );
    }
    let maps = run
        .setup
        .maps
        .iter()
        .map(|m| {
            format!(
                "{} {} KiB in {} pages: {:.1} us",
                m.what,
                m.bytes >> 10,
                m.page_size,
                m.map_ns as f64 / 1e3
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        s,
        "set-up: VFIO open {:.1} ms, DMA map {:.1} ms ({maps}), controller enable {:.1} ms; unmap {:.1} ms",
        ms(run.setup.vfio_open_ns),
        ms(run.setup.map_total_ns),
        ms(run.setup.controller_enable_ns),
        ms(run.setup.unmap_total_ns),
    );
    if let Some(v) = &run.verify {
        let _ = writeln!(
            s,
            "verify: {} blocks written, {} checked, {} mismatched",
            v.blocks_written, v.blocks_checked, v.blocks_mismatched
        );
    }
    for note in run.host.notes() {
        let _ = writeln!(s, "host: {note}");
    }
    s
}

/// The evidence as a text table per page size, with the verdict under it, then the host
/// changes.
pub fn sweep_text(sweep: &VfioNvmeSweep) -> String {
    let mut s = String::new();
    for series in &sweep.series {
        let _ = writeln!(
            s,
            "page size {} (data buffer {} mapped once in {:.1} us)",
            series.page_size,
            human_bytes(series.map.bytes),
            series.map.map_ns as f64 / 1e3
        );
        let _ = writeln!(
            s,
            "{:>8} {:>10} {:>7} {:>11} {:>11} {:>11} {:>8}",
            "pages", "covers", "ios", "median_us", "p90_us", "p99_us", "vs_1st"
        );
        let first = series
            .steps
            .first()
            .map(|f| f.median_ns as f64)
            .unwrap_or(0.0);
        for st in &series.steps {
            let rel = if first > 0.0 {
                (st.median_ns as f64 / first - 1.0) * 100.0
            } else {
                0.0
            };
            let _ = writeln!(
                s,
                "{:>8} {:>10} {:>7} {:>11.1} {:>11.1} {:>11.1} {:>+7.1}%",
                st.pages,
                human_bytes(st.bytes_covered),
                st.ios,
                st.median_ns as f64 / 1e3,
                st.p90_ns as f64 / 1e3,
                st.p99_ns as f64 / 1e3,
                rel
            );
        }
        let _ = writeln!(s, "{}\n", series.verdict);
    }
    for note in sweep.host.notes() {
        let _ = writeln!(s, "host: {note}");
    }
    s
}

fn latency_text(latency: &Option<LatencySummary>) -> String {
    match latency {
        Some(l) => format!(
            "p50 {:.1} us  p90 {:.1} us  p99 {:.1} us  p99.9 {:.1} us  max {:.1} us",
            us(l.p50_ns),
            us(l.p90_ns),
            us(l.p99_ns),
            us(l.p999_ns),
            us(l.max_ns)
        ),
        None => "no completions".to_string(),
    }
}

fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b => format!("{} KiB", b >> 10),
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}
