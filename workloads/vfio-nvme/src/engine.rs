//! The I/O engine, run inside the worker process: VFIO set-up, DMA memory mapped once,
//! controller bring-up, one queue pair per thread, the submission/completion loop, teardown.

mod io_loop;
mod setup;

use crate::error::Error;
use crate::hist::LatencyHistogram;
use crate::iova::IovaAllocator;
use crate::mem::DmaBuffer;
use crate::nvme::controller::{Controller, QueuePair};
use crate::nvme::prp;
use crate::nvme::spec::CTRL_PAGE;
use crate::params::{self, sweep_steps, PageSize, Params, Pattern, Stop, SweepParams};
use crate::report::{rates, DeviceInfo, SetupCost, ThreadResult, VerifySummary, VfioNvmeRun};
use crate::sweep::{self, SweepSeries, SweepStep, VfioNvmeSweep};
use io_loop::{build_slots, io_loop, Cursor, LoopOutcome, Until};
use setup::{device_info, identify, io_config, map_cost, open, queue_memory, round_page, IoSpec};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Most buffer slots per thread: enough for any queue depth, bounded memory for PRP tables.
const SLOT_LIMIT: usize = 1 << 16;

pub use crate::located::Located;

/// What a thread hands back: its queue pair (to delete) and its outcome.
type ThreadReturn<'a> = (QueuePair<'a>, Result<(ThreadResult, LoopOutcome), Error>);

/// One I/O run in this process (the worker).
pub fn run_io(loc: &Located, params: &Params, cancel: &AtomicBool) -> Result<VfioNvmeRun, Error> {
    params.validate()?;
    let (vfio, bar, vfio_open_ns) = open(loc, &params.target)?;
    let mut iovas = IovaAllocator::new(&vfio.info.iova_ranges)?;
    let threads = params.threads;
    let entries = params.queue_depth + 1;
    let pages = params.pages_per_thread();
    let page = params.page_size.bytes();
    let slot_count = params::buffer_slot_count(pages, page, params::slot_bytes(params.block_size))
        .min(SLOT_LIMIT as u64);
    let lists_per_slot = prp::list_pages_needed(0, u64::from(params.block_size), CTRL_PAGE);
    let mut setup = SetupCost {
        vfio_open_ns,
        ..SetupCost::default()
    };
    let mut qbuf = DmaBuffer::new(
        &vfio.iommu,
        &mut iovas,
        queue_memory(threads, entries, slot_count, lists_per_slot),
        PageSize::Size4K,
    )?;
    let mut dbuf = DmaBuffer::new(
        &vfio.iommu,
        &mut iovas,
        pages * page * u64::from(threads),
        params.page_size,
    )?;
    let maps = [map_cost("queues", &qbuf), map_cost("data", &dbuf)];

    let (device, outcomes, enable_ns) = {
        let mut q = qbuf.slice();
        let asq = q.take(CTRL_PAGE as usize, CTRL_PAGE as usize)?;
        let acq = q.take(CTRL_PAGE as usize, CTRL_PAGE as usize)?;
        let idp = q.take(CTRL_PAGE as usize, CTRL_PAGE as usize)?;
        let mut ctrl = Controller::enable(&bar, asq, acq, idp)?;
        let b = identify(&mut ctrl, &params.target)?;
        let device = device_info(loc, &vfio, &ctrl, &b, params.target.nsid);
        let spec = IoSpec {
            pattern: params.pattern,
            block_size: params.block_size,
            queue_depth: params.queue_depth,
            verify: params.verify,
            seed: params.seed,
        };
        let cfg = io_config(&b, params.target.nsid, spec, device.max_transfer_bytes)?;
        let granted = ctrl.set_queue_count(threads)?;
        if granted < threads {
            return Err(Error::Controller(format!(
                "the controller grants {granted} I/O queue pairs, --threads {threads} needs one each"
            )));
        }
        let mut d = dbuf.slice();
        let mut jobs = Vec::with_capacity(usize::from(threads));
        for t in 0..threads {
            let sq = q.take(
                round_page(u64::from(entries) * 64) as usize,
                CTRL_PAGE as usize,
            )?;
            let cq = q.take(
                round_page(u64::from(entries) * 16) as usize,
                CTRL_PAGE as usize,
            )?;
            let mut lists = q.take(
                slot_count as usize * lists_per_slot * CTRL_PAGE as usize,
                CTRL_PAGE as usize,
            )?;
            let data = d.take((pages * page) as usize, CTRL_PAGE as usize)?;
            let slots = build_slots(
                &data,
                &mut lists,
                pages,
                page,
                params.block_size,
                SLOT_LIMIT,
            )?;
            let qp = ctrl.create_queue_pair(t + 1, entries, sq, cq)?;
            jobs.push((t, qp, data, slots));
        }
        let (quota, deadline) = match params.stop {
            Stop::Ios(n) => (Some(n), None),
            Stop::Duration(d) => (None, Some(Instant::now() + d)),
        };
        let results: Vec<ThreadReturn<'_>> = std::thread::scope(|s| {
            let handles: Vec<_> = jobs
                .into_iter()
                .map(|(t, mut qp, mut data, slots)| {
                    let cfg = &cfg;
                    s.spawn(move || {
                        let share = quota.map(|q| {
                            q / u64::from(threads)
                                + u64::from(u64::from(t) < q % u64::from(threads))
                        });
                        let mut cursor = Cursor::new(cfg, t, threads);
                        let r = io_loop(
                            &mut qp,
                            &mut data,
                            &slots,
                            cfg,
                            &mut cursor,
                            Until {
                                quota: share,
                                deadline,
                            },
                            cancel,
                        )
                        .map(|o| {
                            let (iops, mb_s) = rates(o.ios, o.bytes, o.elapsed.as_secs_f64());
                            let tr = ThreadResult {
                                thread: t,
                                qid: qp.qid,
                                pages,
                                ios: o.ios,
                                bytes: o.bytes,
                                elapsed_s: o.elapsed.as_secs_f64(),
                                iops,
                                mb_s,
                                latency: o.hist.summary(),
                                ccdf: o.hist.ccdf(),
                                histogram: o.hist.buckets_reported(),
                            };
                            (tr, o)
                        });
                        (qp, r)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .map_err(|_| Error::Worker("an I/O thread panicked".into()))
                })
                .collect::<Result<Vec<_>, Error>>()
        })?;
        let mut outcomes = Vec::new();
        let mut first_error = None;
        for (qp, r) in results {
            // Best effort: a queue that timed out may not delete cleanly; shutdown follows.
            let _ = ctrl.delete_queue_pair(qp);
            match r {
                Ok(x) => outcomes.push(x),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let shutdown = ctrl.shutdown();
        let enable_ns = ctrl.enable_ns;
        drop(ctrl);
        if let Some(e) = first_error {
            return Err(e);
        }
        shutdown?;
        (device, outcomes, enable_ns)
    };
    setup.controller_enable_ns = enable_ns;
    let [mut qmap, mut dmap] = maps;
    dmap.unmap_ns = Some(dbuf.unmap()?);
    qmap.unmap_ns = Some(qbuf.unmap()?);
    setup.add_map(qmap);
    setup.add_map(dmap);
    drop(bar);
    drop(vfio);
    assemble(params, device, setup, outcomes, cancel)
}

fn assemble(
    params: &Params,
    device: DeviceInfo,
    setup: SetupCost,
    outcomes: Vec<(ThreadResult, LoopOutcome)>,
    cancel: &AtomicBool,
) -> Result<VfioNvmeRun, Error> {
    let mut hist = LatencyHistogram::new();
    let mut ios = 0;
    let mut bytes = 0;
    let mut elapsed = 0f64;
    let mut verify = VerifySummary::default();
    let mut interrupted = cancel.load(Ordering::Relaxed);
    let mut threads = Vec::new();
    let mut first_mismatch = None;
    for (t, o) in outcomes {
        if first_mismatch.is_none() {
            first_mismatch = o.first_mismatch;
        }
        hist.merge(&o.hist);
        ios += o.ios;
        bytes += o.bytes;
        elapsed = elapsed.max(o.elapsed.as_secs_f64());
        verify.blocks_written += o.verify.blocks_written;
        verify.blocks_checked += o.verify.blocks_checked;
        verify.blocks_mismatched += o.verify.blocks_mismatched;
        interrupted |= o.interrupted;
        threads.push(t);
    }
    if let Some(m) = first_mismatch {
        return Err(Error::Verify {
            checked: verify.blocks_checked,
            mismatched: verify.blocks_mismatched,
            first_lba: m.lba,
            first_offset: m.offset,
            expected: m.expected,
            found: m.found,
        });
    }
    let (iops, mb_s) = rates(ios, bytes, elapsed);
    let latency = hist.summary();
    Ok(VfioNvmeRun {
        params: params.reported(),
        device,
        setup_maps: setup.maps.len(),
        setup_map_ns: setup.map_total_ns,
        setup,
        elapsed_s: elapsed,
        ios,
        bytes,
        iops,
        mb_s,
        latency,
        ccdf: hist.ccdf(),
        histogram: hist.buckets_reported(),
        threads,
        verify: params.verify.then_some(verify),
        interrupted,
        host: Default::default(),
        latency_ns: latency,
        work: None,
        worker_pid: Some(std::process::id()),
    })
}

/// The IOTLB sweep in this process (the worker): one queue pair, QD1 reads; per page size one
/// data buffer of the largest working set, mapped once; per step a warm-up pass over its pages,
/// then the measured I/Os.
pub fn run_sweep(
    loc: &Located,
    sp: &SweepParams,
    cancel: &AtomicBool,
) -> Result<VfioNvmeSweep, Error> {
    sp.validate()?;
    let (vfio, bar, vfio_open_ns) = open(loc, &sp.target)?;
    let mut iovas = IovaAllocator::new(&vfio.info.iova_ranges)?;
    let entries = 2;
    let mut setup = SetupCost {
        vfio_open_ns,
        ..SetupCost::default()
    };
    let mut qbuf = DmaBuffer::new(
        &vfio.iommu,
        &mut iovas,
        queue_memory(1, entries, 0, 0),
        PageSize::Size4K,
    )?;
    let mut qmap = map_cost("queues", &qbuf);
    let mut series = Vec::new();
    let mut interrupted = false;
    let (device, enable_ns) = {
        let mut q = qbuf.slice();
        let asq = q.take(CTRL_PAGE as usize, CTRL_PAGE as usize)?;
        let acq = q.take(CTRL_PAGE as usize, CTRL_PAGE as usize)?;
        let idp = q.take(CTRL_PAGE as usize, CTRL_PAGE as usize)?;
        let mut ctrl = Controller::enable(&bar, asq, acq, idp)?;
        let b = identify(&mut ctrl, &sp.target)?;
        let device = device_info(loc, &vfio, &ctrl, &b, sp.target.nsid);
        let spec = IoSpec {
            pattern: Pattern::RandRead,
            block_size: sp.block_size,
            queue_depth: 1,
            verify: false,
            seed: sp.seed,
        };
        let cfg = io_config(&b, sp.target.nsid, spec, device.max_transfer_bytes)?;
        ctrl.set_queue_count(1)?;
        let sq = q.take(CTRL_PAGE as usize, CTRL_PAGE as usize)?;
        let cq = q.take(CTRL_PAGE as usize, CTRL_PAGE as usize)?;
        let mut qp = ctrl.create_queue_pair(1, entries, sq, cq)?;
        let mut cursor = Cursor::new(&cfg, 0, 1);
        let mut failure = None;
        'sizes: for &size in &sp.page_sizes {
            let max = sp.max_pages_for(size);
            let page = size.bytes();
            let mut dbuf = match DmaBuffer::new(&vfio.iommu, &mut iovas, max * page, size) {
                Ok(d) => d,
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            };
            let mut map = map_cost("data", &dbuf);
            let mut steps = Vec::new();
            {
                let mut data = dbuf.slice();
                let mut no_lists = q.take(0, 1)?;
                for n in sweep_steps(max) {
                    let slots =
                        build_slots(&data, &mut no_lists, n, page, sp.block_size, n as usize)?;
                    let warm = n.max(32);
                    let r = io_loop(
                        &mut qp,
                        &mut data,
                        &slots,
                        &cfg,
                        &mut cursor,
                        Until::ios(warm),
                        cancel,
                    )
                    .and_then(|_| {
                        io_loop(
                            &mut qp,
                            &mut data,
                            &slots,
                            &cfg,
                            &mut cursor,
                            Until::ios(sp.ios_per_step),
                            cancel,
                        )
                    });
                    match r {
                        Ok(o) if o.interrupted => {
                            interrupted = true;
                            break;
                        }
                        Ok(o) => steps.push(SweepStep {
                            pages: n,
                            bytes_covered: n * page,
                            ios: o.ios,
                            median_ns: o.hist.quantile(0.5).unwrap_or(0),
                            p90_ns: o.hist.quantile(0.9).unwrap_or(0),
                            p99_ns: o.hist.quantile(0.99).unwrap_or(0),
                            mean_ns: o.hist.mean().unwrap_or(0.0),
                        }),
                        Err(e) => {
                            failure = Some(e);
                            break;
                        }
                    }
                }
            }
            map.unmap_ns = dbuf.unmap().ok();
            let (knee, verdict) = sweep::analyse(size, &steps);
            series.push(SweepSeries {
                page_size: size,
                map: map.clone(),
                steps,
                knee,
                verdict,
            });
            setup.add_map(map);
            if failure.is_some() || interrupted {
                break 'sizes;
            }
        }
        let _ = ctrl.delete_queue_pair(qp);
        let shutdown = ctrl.shutdown();
        let enable_ns = ctrl.enable_ns;
        drop(ctrl);
        if let Some(e) = failure {
            return Err(e);
        }
        shutdown?;
        (device, enable_ns)
    };
    setup.controller_enable_ns = enable_ns;
    qmap.unmap_ns = Some(qbuf.unmap()?);
    setup.add_map(qmap);
    drop(bar);
    drop(vfio);
    Ok(VfioNvmeSweep {
        params: sp.clone(),
        device,
        setup,
        series,
        interrupted: interrupted || cancel.load(Ordering::Relaxed),
        host: Default::default(),
        iotlb_entries_4k: None,
        iotlb_entries_2m: None,
        iotlb_entries_1g: None,
        work: None,
    }
    .with_knees_on_top())
}
