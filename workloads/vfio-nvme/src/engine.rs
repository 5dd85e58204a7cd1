//! The I/O engine, run inside the worker process: VFIO set-up, DMA memory mapped once,
//! controller bring-up, one queue pair per thread, the submission/completion loop, teardown.

mod io_loop;
mod setup;

use crate::error::Error;
use crate::hist::LatencyHistogram;
use crate::iova::IovaAllocator;
use crate::mem::{DmaBuffer, DmaSlice};
use crate::mmio::Bar;
use crate::nvme::controller::{Controller, QueuePair};
use crate::nvme::prp;
use crate::nvme::spec::CTRL_PAGE;
use crate::params::{self, sweep_steps, PageSize, Params, Pattern, Stop, SweepParams, Target};
use crate::report::{rates, DeviceInfo, SetupCost, ThreadResult, VerifySummary, VfioNvmeRun};
use crate::sweep::{self, SweepSeries, SweepStep, VfioNvmeSweep};
use crate::vfio::{Iommu, Vfio};
use io_loop::{build_slots, io_loop, Cursor, IoConfig, LoopOutcome, Slot, Until};
use setup::{device_info, identify, io_config, map_cost, open, queue_memory, round_page, IoSpec};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Most buffer slots per thread: enough for any queue depth, bounded memory for PRP tables.
const SLOT_LIMIT: usize = 1 << 16;

pub use crate::located::Located;

/// A thread's result as reported, and the loop's outcome it came from.
type ThreadOutcome = (ThreadResult, LoopOutcome);

/// What a thread hands back: its queue pair (to delete) and its outcome.
type ThreadReturn<'a> = (QueuePair<'a>, Result<ThreadOutcome, Error>);

/// What the controller's part of a run found.
struct Ran {
    device: DeviceInfo,
    outcomes: Vec<ThreadOutcome>,
    enable_ns: u64,
}

/// The device as opened: where it is, its VFIO handles and its mapped BAR0.
#[derive(Clone, Copy)]
struct Opened<'a> {
    loc: &'a Located,
    vfio: &'a Vfio,
    bar: &'a Bar,
}

/// How a run divides its memory: per thread a queue pair of `entries`, `pages` data pages of
/// `page` bytes, and `slot_count` buffer slots with `lists_per_slot` PRP list pages each.
struct Layout {
    threads: u16,
    entries: u16,
    pages: u64,
    page: u64,
    block_size: u32,
    slot_count: u64,
    lists_per_slot: usize,
}

impl Layout {
    fn of(params: &Params) -> Layout {
        let pages = params.pages_per_thread();
        let page = params.page_size.bytes();
        let slot_bytes = params::slot_bytes(params.block_size);
        Layout {
            threads: params.threads,
            entries: params.queue_depth + 1,
            pages,
            page,
            block_size: params.block_size,
            slot_count: params::buffer_slot_count(pages, page, slot_bytes).min(SLOT_LIMIT as u64),
            lists_per_slot: prp::list_pages_needed(0, u64::from(params.block_size), CTRL_PAGE),
        }
    }

    fn queue_bytes(&self) -> u64 {
        queue_memory(
            self.threads,
            self.entries,
            self.slot_count,
            self.lists_per_slot,
        )
    }

    fn data_bytes(&self) -> u64 {
        self.pages * self.page * u64::from(self.threads)
    }

    /// Thread `thread`'s share of `quota` I/Os: an even split, the first threads taking one
    /// more each for the remainder.
    fn share(&self, quota: u64, thread: u16) -> u64 {
        let threads = u64::from(self.threads);
        quota / threads + u64::from(u64::from(thread) < quota % threads)
    }
}

/// One I/O thread's queue pair, data and buffer slots, ready to run.
struct Job<'a> {
    thread: u16,
    qp: QueuePair<'a>,
    data: DmaSlice<'a>,
    slots: Vec<Slot>,
}

/// One I/O run in this process (the worker).
pub fn run_io(loc: &Located, params: &Params, cancel: &AtomicBool) -> Result<VfioNvmeRun, Error> {
    params.validate()?;
    let (vfio, bar, vfio_open_ns) = open(loc, &params.target)?;
    let mut iovas = IovaAllocator::new(&vfio.info.iova_ranges)?;
    let layout = Layout::of(params);
    let mut setup = SetupCost {
        vfio_open_ns,
        ..SetupCost::default()
    };
    let mut qbuf = DmaBuffer::new(
        &vfio.iommu,
        &mut iovas,
        layout.queue_bytes(),
        PageSize::Size4K,
    )?;
    let mut dbuf = DmaBuffer::new(
        &vfio.iommu,
        &mut iovas,
        layout.data_bytes(),
        params.page_size,
    )?;
    let [mut qmap, mut dmap] = [map_cost("queues", &qbuf), map_cost("data", &dbuf)];
    let opened = Opened {
        loc,
        vfio: &vfio,
        bar: &bar,
    };
    let ran = io_on_controller(opened, qbuf.slice(), dbuf.slice(), params, &layout, cancel)?;
    setup.controller_enable_ns = ran.enable_ns;
    dmap.unmap_ns = Some(dbuf.unmap()?);
    qmap.unmap_ns = Some(qbuf.unmap()?);
    setup.add_map(qmap);
    setup.add_map(dmap);
    drop(bar);
    drop(vfio);
    assemble(params, ran.device, setup, ran.outcomes, cancel)
}

/// The controller's part of a run: enabled and identified, a queue pair per thread, the
/// threads run, then the queue pairs deleted and the controller shut down. Returns the device,
/// each thread's outcome and how long enabling took.
fn io_on_controller<'a>(
    opened: Opened<'a>,
    mut q: DmaSlice<'a>,
    mut d: DmaSlice<'a>,
    params: &Params,
    layout: &Layout,
    cancel: &AtomicBool,
) -> Result<Ran, Error> {
    let spec = IoSpec {
        pattern: params.pattern,
        block_size: params.block_size,
        queue_depth: params.queue_depth,
        verify: params.verify,
        seed: params.seed,
    };
    let (mut ctrl, device, cfg) = bring_up(opened, &mut q, &params.target, spec)?;
    let threads = layout.threads;
    let granted = ctrl.set_queue_count(threads)?;
    if granted < threads {
        return Err(Error::Controller(format!(
            "the controller grants {granted} I/O queue pairs, --threads {threads} needs one each"
        )));
    }
    let jobs = carve_jobs(&mut ctrl, &mut q, &mut d, layout)?;
    let results = run_threads(jobs, &cfg, layout, &params.stop, cancel)?;
    let mut pairs = Vec::with_capacity(results.len());
    let mut outcomes = Vec::with_capacity(results.len());
    let mut first_error = None;
    for (qp, outcome) in results {
        pairs.push(qp);
        match outcome {
            Ok(outcome) => outcomes.push(outcome),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    let enable_ns = wind_down(ctrl, pairs, first_error)?;
    Ok(Ran {
        device,
        outcomes,
        enable_ns,
    })
}

/// The controller enabled (its admin queues and Identify page carved from `q`) and identified,
/// the device it is, and the I/O settings `spec` gives on `target`'s namespace.
fn bring_up<'a>(
    opened: Opened<'a>,
    q: &mut DmaSlice<'a>,
    target: &Target,
    spec: IoSpec,
) -> Result<(Controller<'a>, DeviceInfo, IoConfig), Error> {
    let page = CTRL_PAGE as usize;
    let asq = q.take(page, page)?;
    let acq = q.take(page, page)?;
    let identify_page = q.take(page, page)?;
    let mut ctrl = Controller::enable(opened.bar, asq, acq, identify_page)?;
    let b = identify(&mut ctrl, target)?;
    let device = device_info(opened.loc, opened.vfio, &ctrl, &b, target.nsid);
    let cfg = io_config(&b, target.nsid, spec, device.max_transfer_bytes)?;
    Ok((ctrl, device, cfg))
}

/// Per thread: its queues and PRP list pages carved from `q`, its data from `d`, its buffer
/// slots built, and its I/O queue pair created on the controller.
fn carve_jobs<'a>(
    ctrl: &mut Controller<'a>,
    q: &mut DmaSlice<'a>,
    d: &mut DmaSlice<'a>,
    layout: &Layout,
) -> Result<Vec<Job<'a>>, Error> {
    let page = CTRL_PAGE as usize;
    let entries = u64::from(layout.entries);
    let mut jobs = Vec::with_capacity(usize::from(layout.threads));
    for thread in 0..layout.threads {
        let sq = q.take(round_page(entries * 64) as usize, page)?;
        let cq = q.take(round_page(entries * 16) as usize, page)?;
        let list_bytes = layout.slot_count as usize * layout.lists_per_slot * page;
        let mut lists = q.take(list_bytes, page)?;
        let data = d.take((layout.pages * layout.page) as usize, page)?;
        let slots = build_slots(
            &data,
            &mut lists,
            layout.pages,
            layout.page,
            layout.block_size,
            SLOT_LIMIT,
        )?;
        let qp = ctrl.create_queue_pair(thread + 1, layout.entries, sq, cq)?;
        jobs.push(Job {
            thread,
            qp,
            data,
            slots,
        });
    }
    Ok(jobs)
}

/// Runs every job on a thread of its own until `stop` (a quota split over the threads, or a
/// deadline from now) or `cancel`.
fn run_threads<'a>(
    jobs: Vec<Job<'a>>,
    cfg: &IoConfig,
    layout: &Layout,
    stop: &Stop,
    cancel: &AtomicBool,
) -> Result<Vec<ThreadReturn<'a>>, Error> {
    let (quota, deadline) = match stop {
        Stop::Ios(n) => (Some(*n), None),
        Stop::Duration(d) => (None, Some(Instant::now() + *d)),
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .into_iter()
            .map(|job| {
                let until = Until {
                    quota: quota.map(|q| layout.share(q, job.thread)),
                    deadline,
                };
                s.spawn(move || run_thread(job, cfg, layout, until, cancel))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| Error::Worker("an I/O thread panicked".into()))
            })
            .collect::<Result<Vec<_>, Error>>()
    })
}

fn run_thread<'a>(
    mut job: Job<'a>,
    cfg: &IoConfig,
    layout: &Layout,
    until: Until,
    cancel: &AtomicBool,
) -> ThreadReturn<'a> {
    let mut cursor = Cursor::new(cfg, job.thread, layout.threads);
    let outcome = io_loop(
        &mut job.qp,
        &mut job.data,
        &job.slots,
        cfg,
        &mut cursor,
        until,
        cancel,
    )
    .map(|o| (thread_result(job.thread, job.qp.qid, layout.pages, &o), o));
    (job.qp, outcome)
}

fn thread_result(thread: u16, qid: u16, pages: u64, o: &LoopOutcome) -> ThreadResult {
    let elapsed_s = o.elapsed.as_secs_f64();
    let (iops, mb_s) = rates(o.ios, o.bytes, elapsed_s);
    ThreadResult {
        thread,
        qid,
        pages,
        ios: o.ios,
        bytes: o.bytes,
        elapsed_s,
        iops,
        mb_s,
        latency: o.hist.summary(),
        ccdf: o.hist.ccdf(),
        histogram: o.hist.buckets_reported(),
    }
}

/// Deletes the I/O queue pairs (best effort: a queue that timed out may not delete cleanly)
/// and shuts the controller down. `failure`, the I/O's first error, comes before the
/// shutdown's. Returns how long enabling the controller took.
fn wind_down<'a>(
    mut ctrl: Controller<'a>,
    pairs: impl IntoIterator<Item = QueuePair<'a>>,
    failure: Option<Error>,
) -> Result<u64, Error> {
    for qp in pairs {
        let _ = ctrl.delete_queue_pair(qp);
    }
    let shutdown = ctrl.shutdown();
    let enable_ns = ctrl.enable_ns;
    drop(ctrl);
    if let Some(e) = failure {
        return Err(e);
    }
    shutdown?;
    Ok(enable_ns)
}

fn assemble(
    params: &Params,
    device: DeviceInfo,
    setup: SetupCost,
    outcomes: Vec<ThreadOutcome>,
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
        params: params.clone(),
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
    let mut setup = SetupCost {
        vfio_open_ns,
        ..SetupCost::default()
    };
    let mut qbuf = DmaBuffer::new(
        &vfio.iommu,
        &mut iovas,
        queue_memory(1, SWEEP_ENTRIES, 0, 0),
        PageSize::Size4K,
    )?;
    let mut qmap = map_cost("queues", &qbuf);
    let opened = Opened {
        loc,
        vfio: &vfio,
        bar: &bar,
    };
    let swept = sweep_on_controller(opened, qbuf.slice(), &mut iovas, sp, cancel)?;
    for series in &swept.series {
        setup.add_map(series.map.clone());
    }
    setup.controller_enable_ns = swept.enable_ns;
    qmap.unmap_ns = Some(qbuf.unmap()?);
    setup.add_map(qmap);
    drop(bar);
    drop(vfio);
    Ok(VfioNvmeSweep {
        params: sp.clone(),
        device: swept.device,
        setup,
        series: swept.series,
        interrupted: swept.interrupted || cancel.load(Ordering::Relaxed),
        host: Default::default(),
        iotlb_entries_4k: None,
        iotlb_entries_2m: None,
        iotlb_entries_1g: None,
        work: None,
    }
    .with_knees_on_top())
}

/// Entries of the sweep's one I/O queue pair: one command in flight.
const SWEEP_ENTRIES: u16 = 2;

/// What the controller's part of a sweep found.
struct Swept {
    device: DeviceInfo,
    enable_ns: u64,
    series: Vec<SweepSeries>,
    interrupted: bool,
}

/// Why a sweep stopped before its last page size.
enum Stopped {
    Interrupted,
    Failed(Error),
}

/// The controller's part of a sweep: enabled and identified, one queue pair, a series per page
/// size until one fails or `cancel`, then the queue pair deleted and the controller shut down.
fn sweep_on_controller<'a>(
    opened: Opened<'a>,
    mut q: DmaSlice<'a>,
    iovas: &mut IovaAllocator,
    sp: &SweepParams,
    cancel: &AtomicBool,
) -> Result<Swept, Error> {
    let spec = IoSpec {
        pattern: Pattern::RandRead,
        block_size: sp.block_size,
        queue_depth: 1,
        verify: false,
        seed: sp.seed,
    };
    let (mut ctrl, device, cfg) = bring_up(opened, &mut q, &sp.target, spec)?;
    ctrl.set_queue_count(1)?;
    let page = CTRL_PAGE as usize;
    let sq = q.take(page, page)?;
    let cq = q.take(page, page)?;
    let mut qp = ctrl.create_queue_pair(1, SWEEP_ENTRIES, sq, cq)?;
    let mut cursor = Cursor::new(&cfg, 0, 1);
    let mut prober = Prober {
        qp: &mut qp,
        cfg: &cfg,
        cursor: &mut cursor,
        sp,
        cancel,
    };
    let mut series = Vec::new();
    let mut stopped = None;
    for &size in &sp.page_sizes {
        let (swept, stop) = prober.sweep_size(&opened.vfio.iommu, iovas, &mut q, size);
        series.extend(swept);
        if stop.is_some() {
            stopped = stop;
            break;
        }
    }
    let (failure, interrupted) = match stopped {
        Some(Stopped::Failed(e)) => (Some(e), false),
        Some(Stopped::Interrupted) => (None, true),
        None => (None, false),
    };
    let enable_ns = wind_down(ctrl, [qp], failure)?;
    Ok(Swept {
        device,
        enable_ns,
        series,
        interrupted,
    })
}

/// What a sweep's steps run on: its queue pair, I/O settings and cursor.
struct Prober<'p, 'a> {
    qp: &'p mut QueuePair<'a>,
    cfg: &'p IoConfig,
    cursor: &'p mut Cursor,
    sp: &'p SweepParams,
    cancel: &'p AtomicBool,
}

impl<'a> Prober<'_, 'a> {
    /// One page size's series over a data buffer of its largest step, mapped for it alone;
    /// no series when the buffer cannot be had. Says whether the sweep stops here.
    fn sweep_size(
        &mut self,
        iommu: &Iommu,
        iovas: &mut IovaAllocator,
        q: &mut DmaSlice<'a>,
        size: PageSize,
    ) -> (Option<SweepSeries>, Option<Stopped>) {
        let max = self.sp.max_pages_for(size);
        let page = size.bytes();
        let mut dbuf = match DmaBuffer::new(iommu, iovas, max * page, size) {
            Ok(d) => d,
            Err(e) => return (None, Some(Stopped::Failed(e))),
        };
        let mut map = map_cost("data", &dbuf);
        let (steps, stopped) = self.steps(&mut dbuf.slice(), q, max, page);
        map.unmap_ns = dbuf.unmap().ok();
        let (knee, verdict) = sweep::analyse(size, &steps);
        let series = SweepSeries {
            page_size: size,
            map,
            steps,
            knee,
            verdict,
        };
        (Some(series), stopped)
    }

    /// The steps over `data`, from one page to `max`, until one fails or is interrupted.
    fn steps(
        &mut self,
        data: &mut DmaSlice<'_>,
        q: &mut DmaSlice<'a>,
        max: u64,
        page: u64,
    ) -> (Vec<SweepStep>, Option<Stopped>) {
        let mut steps = Vec::new();
        let mut no_lists = match q.take(0, 1) {
            Ok(none) => none,
            Err(e) => return (steps, Some(Stopped::Failed(e))),
        };
        for pages in sweep_steps(max) {
            match self.step(data, &mut no_lists, pages, page) {
                Ok(o) if o.interrupted => return (steps, Some(Stopped::Interrupted)),
                Ok(o) => steps.push(SweepStep {
                    pages,
                    bytes_covered: pages * page,
                    ios: o.ios,
                    median_ns: o.hist.quantile(0.5).unwrap_or(0),
                    p90_ns: o.hist.quantile(0.9).unwrap_or(0),
                    p99_ns: o.hist.quantile(0.99).unwrap_or(0),
                    mean_ns: o.hist.mean().unwrap_or(0.0),
                }),
                Err(e) => return (steps, Some(Stopped::Failed(e))),
            }
        }
        (steps, None)
    }

    /// One step: a warm-up pass over `pages` pages (at least 32 I/Os), then the measured I/Os.
    fn step(
        &mut self,
        data: &mut DmaSlice<'_>,
        no_lists: &mut DmaSlice<'_>,
        pages: u64,
        page: u64,
    ) -> Result<LoopOutcome, Error> {
        let bs = self.sp.block_size;
        let slots = build_slots(data, no_lists, pages, page, bs, pages as usize)?;
        let warm = pages.max(32);
        let mut run = |until| {
            io_loop(
                self.qp,
                data,
                &slots,
                self.cfg,
                self.cursor,
                until,
                self.cancel,
            )
        };
        run(Until::ios(warm)).and_then(|_| run(Until::ios(self.sp.ios_per_step)))
    }
}
