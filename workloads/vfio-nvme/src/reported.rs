//! The driver's results as the report holds them ([`iommutop_model::results::vfio_nvme`]): the
//! same numbers, the histogram as its buckets. The driver keeps its own types for its work and
//! for the worker's replies, where the histogram must stay one.

use crate::changes::{HostChanges, HugeChange, Rebind};
use crate::hist::{CcdfPoint, LatencyHistogram, LatencySummary};
use crate::iova::IovaRange;
use crate::params::{Backend, PageSize, Params, Pattern, Stop, SweepParams, Target};
use crate::report::{DeviceInfo, MapCost, RunResult, SetupCost, ThreadResult, VerifySummary};
use crate::sweep::{Knee, SweepResult, SweepSeries, SweepStep};
use crate::vfio::IommuInfo;
use iommutop_model::results::vfio_nvme::{self as model, host, params};

impl RunResult {
    /// The run as the report holds it, with the set-up mapping cost and the latency in ns on
    /// top.
    pub fn reported(&self) -> model::VfioNvmeRun {
        model::VfioNvmeRun {
            params: run_params(&self.params),
            device: device(&self.device),
            setup: setup(&self.setup),
            elapsed_s: self.elapsed_s,
            ios: self.ios,
            bytes: self.bytes,
            iops: self.iops,
            mb_s: self.mb_s,
            latency: self.latency.map(latency),
            ccdf: ccdf(&self.ccdf),
            histogram: self.histogram.buckets_reported(),
            threads: self.threads.iter().map(thread).collect(),
            verify: self.verify.map(verify),
            interrupted: self.interrupted,
            host: host_changes(&self.host),
            setup_maps: self.setup.maps.len(),
            setup_map_ns: self.setup.map_total_ns,
            latency_ns: self.latency.map(latency),
            work: None,
        }
    }
}

impl SweepResult {
    /// The sweep as the report holds it, with each page size's IOTLB-entries estimate on top.
    pub fn reported(&self) -> model::VfioNvmeSweep {
        model::VfioNvmeSweep {
            params: sweep_params(&self.params),
            device: device(&self.device),
            setup: setup(&self.setup),
            series: self.series.iter().map(series).collect(),
            interrupted: self.interrupted,
            host: host_changes(&self.host),
            iotlb_entries_4k: None,
            iotlb_entries_2m: None,
            iotlb_entries_1g: None,
            work: None,
        }
        .with_knees_on_top()
    }
}

impl LatencyHistogram {
    /// The non-empty buckets with the exact count, extremes and sum.
    pub fn buckets_reported(&self) -> model::HistogramBuckets {
        model::HistogramBuckets {
            sub_bucket_bits: crate::hist::SUB_BITS,
            count: self.total(),
            min_ns: self.min(),
            max_ns: self.max(),
            sum_ns: self.sum(),
            buckets: self.buckets().map(|(l, h, c)| [l, h, c]).collect(),
        }
    }
}

impl HostChanges {
    pub fn reported(&self) -> host::HostChanges {
        host_changes(self)
    }
}

pub fn page_size(size: PageSize) -> params::PageSize {
    match size {
        PageSize::Size4K => params::PageSize::Size4K,
        PageSize::Size2M => params::PageSize::Size2M,
        PageSize::Size1G => params::PageSize::Size1G,
    }
}

fn pattern(pattern: Pattern) -> params::Pattern {
    match pattern {
        Pattern::RandRead => params::Pattern::RandRead,
        Pattern::RandWrite => params::Pattern::RandWrite,
        Pattern::Read => params::Pattern::Read,
        Pattern::Write => params::Pattern::Write,
    }
}

fn target(target: &Target) -> params::Target {
    params::Target {
        device: target.device.clone(),
        bind: target.bind,
        reserve_hugepages: target.reserve_hugepages,
        backend: match target.backend {
            Backend::Auto => params::Backend::Auto,
            Backend::Legacy => params::Backend::Legacy,
            Backend::Iommufd => params::Backend::Iommufd,
        },
        nsid: target.nsid,
    }
}

fn run_params(p: &Params) -> params::RunParams {
    params::RunParams {
        target: target(&p.target),
        pattern: pattern(p.pattern),
        block_size: p.block_size,
        queue_depth: p.queue_depth,
        threads: p.threads,
        stop: match p.stop {
            Stop::Duration(duration) => params::Stop::Duration(duration.as_secs_f64()),
            Stop::Ios(ios) => params::Stop::Ios(ios),
        },
        pages: p.pages,
        page_size: page_size(p.page_size),
        allow_write: p.allow_write,
        verify: p.verify,
        seed: p.seed,
    }
}

fn sweep_params(p: &SweepParams) -> params::SweepParams {
    params::SweepParams {
        target: target(&p.target),
        page_sizes: p.page_sizes.iter().copied().map(page_size).collect(),
        max_pages: p.max_pages,
        max_pages_per_size: p
            .max_pages_per_size
            .iter()
            .map(|&(size, pages)| (page_size(size), pages))
            .collect(),
        ios_per_step: p.ios_per_step,
        block_size: p.block_size,
        seed: p.seed,
    }
}

fn iommu(info: &IommuInfo) -> model::IommuInfo {
    model::IommuInfo {
        backend: info.backend.clone(),
        iova_ranges: info
            .iova_ranges
            .iter()
            .map(|&IovaRange { start, last }| model::IovaRange { start, last })
            .collect(),
        ranges_assumed: info.ranges_assumed,
        iova_pgsizes: info.iova_pgsizes,
    }
}

fn device(d: &DeviceInfo) -> model::DeviceInfo {
    model::DeviceInfo {
        pci_address: d.pci_address,
        iommu_group: d.iommu_group,
        model: d.model.clone(),
        serial: d.serial.clone(),
        firmware: d.firmware.clone(),
        nvme_version: d.nvme_version.clone(),
        nsid: d.nsid,
        lba_size: d.lba_size,
        namespace_blocks: d.namespace_blocks,
        capacity_bytes: d.capacity_bytes,
        max_transfer_bytes: d.max_transfer_bytes,
        max_queue_entries: d.max_queue_entries,
        iommu: iommu(&d.iommu),
    }
}

fn map_cost(m: &MapCost) -> model::MapCost {
    model::MapCost {
        what: m.what.clone(),
        bytes: m.bytes,
        page_size: page_size(m.page_size),
        iova: m.iova,
        map_ns: m.map_ns,
        unmap_ns: m.unmap_ns,
        physical_runs: m.physical_runs,
    }
}

fn setup(s: &SetupCost) -> model::SetupCost {
    model::SetupCost {
        vfio_open_ns: s.vfio_open_ns,
        controller_enable_ns: s.controller_enable_ns,
        maps: s.maps.iter().map(map_cost).collect(),
        map_total_ns: s.map_total_ns,
        unmap_total_ns: s.unmap_total_ns,
    }
}

fn latency(l: LatencySummary) -> model::LatencySummary {
    model::LatencySummary {
        count: l.count,
        min_ns: l.min_ns,
        mean_ns: l.mean_ns,
        p50_ns: l.p50_ns,
        p90_ns: l.p90_ns,
        p99_ns: l.p99_ns,
        p999_ns: l.p999_ns,
        max_ns: l.max_ns,
    }
}

fn ccdf(points: &[CcdfPoint]) -> Vec<model::CcdfPoint> {
    points
        .iter()
        .map(|p| model::CcdfPoint {
            latency_ns: p.latency_ns,
            ccdf: p.ccdf,
        })
        .collect()
}

fn thread(t: &ThreadResult) -> model::ThreadResult {
    model::ThreadResult {
        thread: t.thread,
        qid: t.qid,
        pages: t.pages,
        ios: t.ios,
        bytes: t.bytes,
        elapsed_s: t.elapsed_s,
        iops: t.iops,
        mb_s: t.mb_s,
        latency: t.latency.map(latency),
        ccdf: ccdf(&t.ccdf),
        histogram: t.histogram.buckets_reported(),
    }
}

fn verify(v: VerifySummary) -> model::VerifySummary {
    model::VerifySummary {
        blocks_written: v.blocks_written,
        blocks_checked: v.blocks_checked,
        blocks_mismatched: v.blocks_mismatched,
    }
}

fn host_changes(h: &HostChanges) -> host::HostChanges {
    host::HostChanges {
        rebind: h.rebind.as_ref().map(|r: &Rebind| host::Rebind {
            pci_address: r.pci_address,
            from: r.from.clone(),
            override_before: r.override_before.clone(),
            to: r.to.clone(),
            namespaces: r.namespaces.clone(),
            restored: r.restored,
        }),
        hugepages: h
            .hugepages
            .iter()
            .map(|c: &HugeChange| host::HugeChange {
                page_size: page_size(c.page_size),
                from: c.from,
                to: c.to,
                restored: c.restored,
            })
            .collect(),
        recovered: h.recovered.clone(),
    }
}

fn step(s: &SweepStep) -> model::SweepStep {
    model::SweepStep {
        pages: s.pages,
        bytes_covered: s.bytes_covered,
        ios: s.ios,
        median_ns: s.median_ns,
        p90_ns: s.p90_ns,
        p99_ns: s.p99_ns,
        mean_ns: s.mean_ns,
    }
}

fn knee(k: &Knee) -> model::Knee {
    model::Knee {
        pages_before: k.pages_before,
        pages_after: k.pages_after,
        entries_estimate: k.entries_estimate,
        below_ns: k.below_ns,
        above_ns: k.above_ns,
        jump_ratio: k.jump_ratio,
        noise_ns: k.noise_ns,
    }
}

fn series(s: &SweepSeries) -> model::SweepSeries {
    model::SweepSeries {
        page_size: page_size(s.page_size),
        map: map_cost(&s.map),
        steps: s.steps.iter().map(step).collect(),
        knee: s.knee.as_ref().map(knee),
        verdict: s.verdict.clone(),
    }
}
