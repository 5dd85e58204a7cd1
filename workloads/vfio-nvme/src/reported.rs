//! The driver's results as the report holds them ([`iommutop_vfio_nvme_results`]): the
//! same numbers, the histogram as its buckets. The driver keeps its own run and sweep results
//! (the histogram must stay one for its work and the worker's replies) and its run parameters (a
//! `Duration`); everything else is the model's own type.

use crate::hist::LatencyHistogram;
use crate::params::{Params, Stop};
use crate::report::{RunResult, ThreadResult};
use crate::sweep::SweepResult;
use iommutop_vfio_nvme_results::{self as model, params};

impl RunResult {
    /// The run as the report holds it, with the set-up mapping cost and the latency in ns on
    /// top.
    pub fn reported(&self) -> model::VfioNvmeRun {
        model::VfioNvmeRun {
            params: run_params(&self.params),
            device: self.device.clone(),
            setup: self.setup.clone(),
            elapsed_s: self.elapsed_s,
            ios: self.ios,
            bytes: self.bytes,
            iops: self.iops,
            mb_s: self.mb_s,
            latency: self.latency,
            ccdf: self.ccdf.clone(),
            histogram: self.histogram.buckets_reported(),
            threads: self.threads.iter().map(thread).collect(),
            verify: self.verify,
            interrupted: self.interrupted,
            host: self.host.clone(),
            setup_maps: self.setup.maps.len(),
            setup_map_ns: self.setup.map_total_ns,
            latency_ns: self.latency,
            work: None,
            worker_pid: Some(self.worker_pid),
        }
    }
}

impl SweepResult {
    /// The sweep as the report holds it, with each page size's IOTLB-entries estimate on top.
    pub fn reported(&self) -> model::VfioNvmeSweep {
        model::VfioNvmeSweep {
            params: self.params.clone(),
            device: self.device.clone(),
            setup: self.setup.clone(),
            series: self.series.clone(),
            interrupted: self.interrupted,
            host: self.host.clone(),
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

fn run_params(p: &Params) -> params::RunParams {
    params::RunParams {
        target: p.target.clone(),
        pattern: p.pattern,
        block_size: p.block_size,
        queue_depth: p.queue_depth,
        threads: p.threads,
        stop: match p.stop {
            Stop::Duration(duration) => params::Stop::Duration(duration.as_secs_f64()),
            Stop::Ios(ios) => params::Stop::Ios(ios),
        },
        pages: p.pages,
        page_size: p.page_size,
        allow_write: p.allow_write,
        verify: p.verify,
        seed: p.seed,
    }
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
        latency: t.latency,
        ccdf: t.ccdf.clone(),
        histogram: t.histogram.buckets_reported(),
    }
}
