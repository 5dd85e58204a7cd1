//! The I/O engine, run inside the worker process: VFIO set-up, DMA memory mapped once,
//! controller bring-up, one queue pair per thread, the submission/completion loop, teardown.

use crate::error::Error;
use crate::hist::LatencyHistogram;
use crate::iova::IovaAllocator;
use crate::mem::{DmaBuffer, DmaSlice};
use crate::mmio::Bar;
use crate::nvme::controller::{Controller, QueuePair};
use crate::nvme::prp;
use crate::nvme::spec::{nvm, IdentifyController, IdentifyNamespace, SubmissionEntry, CTRL_PAGE};
use crate::params::{self, sweep_steps, PageSize, Params, Pattern, Stop, SweepParams, Target};
use crate::report::{
    rates, DeviceInfo, MapCost, RunResult, SetupCost, ThreadResult, VerifySummary,
};
use crate::rng::Rng;
use crate::sweep::{self, SweepResult, SweepSeries, SweepStep};
use crate::verify;
use crate::vfio::Vfio;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Most buffer slots per thread: enough for any queue depth, bounded memory for PRP tables.
const SLOT_LIMIT: usize = 1 << 16;
/// A command that has not completed after this long is reported as timed out.
const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// Empty polls before a polling thread yields its CPU (threads may outnumber CPUs).
const SPINS_BEFORE_YIELD: u32 = 64;

pub use crate::located::Located;

/// A data buffer slot: its offset in the thread's data slice and its precomputed PRPs.
#[derive(Debug, Clone, Copy)]
struct Slot {
    offset: usize,
    prp1: u64,
    prp2: u64,
}

/// Builds the slots of `data` (page-major over `pages` pages of `page`), carving PRP list pages
/// from `lists` and writing them when a buffer spans more than two controller pages.
fn build_slots(
    data: &DmaSlice<'_>,
    lists: &mut DmaSlice<'_>,
    pages: u64,
    page: u64,
    bs: u32,
    limit: usize,
) -> Result<Vec<Slot>, Error> {
    let offsets = params::buffer_slots(pages, page, params::slot_bytes(bs), limit);
    let per_slot = prp::list_pages_needed(0, u64::from(bs), CTRL_PAGE);
    let mut slots = Vec::with_capacity(offsets.len());
    for off in offsets {
        let mut list_pages = (0..per_slot)
            .map(|_| lists.take(CTRL_PAGE as usize, CTRL_PAGE as usize))
            .collect::<Result<Vec<_>, _>>()?;
        let list_iovas: Vec<u64> = list_pages.iter().map(DmaSlice::iova).collect();
        let prps = prp::build(data.iova() + off, u64::from(bs), CTRL_PAGE, &list_iovas)?;
        for (list, entries) in list_pages.iter_mut().zip(&prps.lists) {
            for (i, entry) in entries.iter().enumerate() {
                if !list.write(i * 8, *entry) {
                    return Err(Error::Controller("PRP list larger than its page".into()));
                }
            }
        }
        slots.push(Slot {
            offset: usize::try_from(off).map_err(|_| Error::Vfio("slot offset overflow".into()))?,
            prp1: prps.prp1,
            prp2: prps.prp2,
        });
    }
    Ok(slots)
}

/// Per-thread I/O settings.
#[derive(Debug, Clone, Copy)]
struct IoConfig {
    pattern: Pattern,
    nsid: u32,
    lba_size: u32,
    block_size: u32,
    blocks_per_io: u16,
    /// Distinct I/O positions on the namespace (capacity / block size).
    units: u64,
    queue_depth: u16,
    verify: bool,
    seed: u64,
}

#[derive(Debug, Default)]
struct LoopOutcome {
    ios: u64,
    bytes: u64,
    elapsed: Duration,
    hist: LatencyHistogram,
    verify: VerifySummary,
    first_mismatch: Option<verify::Mismatch>,
    interrupted: bool,
}

/// Where one thread's I/O goes next.
struct Cursor {
    rng: Rng,
    next_unit: u64,
}

impl Cursor {
    fn new(cfg: &IoConfig, thread: u16, threads: u16) -> Cursor {
        Cursor {
            rng: Rng::for_thread(cfg.seed, thread),
            next_unit: cfg.units * u64::from(thread) / u64::from(threads.max(1)),
        }
    }

    fn next(&mut self, cfg: &IoConfig) -> u64 {
        let unit = if cfg.pattern.is_random() {
            self.rng.below(cfg.units)
        } else {
            let u = self.next_unit % cfg.units;
            self.next_unit = u + 1;
            u
        };
        unit * u64::from(cfg.blocks_per_io)
    }
}

/// When a loop stops submitting (besides `cancel`).
#[derive(Debug, Clone, Copy)]
struct Until {
    quota: Option<u64>,
    deadline: Option<Instant>,
}

impl Until {
    fn ios(n: u64) -> Until {
        Until {
            quota: Some(n),
            deadline: None,
        }
    }
}

/// What the I/O does, before the namespace is known.
#[derive(Debug, Clone, Copy)]
struct IoSpec {
    pattern: Pattern,
    block_size: u32,
    queue_depth: u16,
    verify: bool,
    seed: u64,
}

#[derive(Clone, Copy)]
struct InFlight {
    slot: usize,
    slba: u64,
    start: Instant,
}

/// Submits and completes I/O on `qp` until `quota` I/Os, `deadline`, or `cancel`; drains what
/// is in flight before returning.
fn io_loop(
    qp: &mut QueuePair<'_>,
    data: &mut DmaSlice<'_>,
    slots: &[Slot],
    cfg: &IoConfig,
    cursor: &mut Cursor,
    until: Until,
    cancel: &AtomicBool,
) -> Result<LoopOutcome, Error> {
    let Until { quota, deadline } = until;
    let qd = usize::from(cfg.queue_depth)
        .min(slots.len())
        .min(usize::from(qp.entries() - 1));
    if qd == 0 {
        return Err(Error::Controller(
            "no buffer slots or queue entries for I/O".into(),
        ));
    }
    let opcode = if cfg.pattern.is_write() {
        nvm::WRITE
    } else {
        nvm::READ
    };
    let bs = cfg.block_size as usize;
    let mut scratch = vec![0u8; if cfg.verify { bs } else { 0 }];
    let mut free_slots: VecDeque<usize> = (0..slots.len()).collect();
    let mut free_cids: Vec<u16> = (0..qd as u16).rev().collect();
    let mut inflight: Vec<Option<InFlight>> = vec![None; qd];
    let mut out = LoopOutcome::default();
    let mut submitted = 0u64;
    let mut outstanding = 0usize;
    let mut failure: Option<Error> = None;
    let mut last_progress = Instant::now();
    let mut spins = 0u32;
    let began = Instant::now();

    loop {
        let now = Instant::now();
        let stopping = failure.is_some()
            || quota.is_some_and(|q| submitted >= q)
            || deadline.is_some_and(|d| now >= d)
            || cancel.load(Ordering::Relaxed);
        if stopping && cancel.load(Ordering::Relaxed) {
            out.interrupted = true;
        }
        if !stopping {
            let mut pushed = false;
            while let Some(cid) = free_cids.pop() {
                if quota.is_some_and(|q| submitted >= q) {
                    free_cids.push(cid);
                    break;
                }
                let Some(slot_index) = free_slots.pop_front() else {
                    free_cids.push(cid);
                    break;
                };
                let slot = slots[slot_index];
                let slba = cursor.next(cfg);
                if cfg.verify && cfg.pattern.is_write() {
                    verify::fill(&mut scratch, slba, cfg.lba_size, cfg.seed);
                    if !data.copy_in(slot.offset, &scratch) {
                        return Err(Error::Controller(
                            "buffer slot outside the data buffer".into(),
                        ));
                    }
                }
                let entry = SubmissionEntry::read_write(
                    opcode,
                    cid,
                    cfg.nsid,
                    slba,
                    cfg.blocks_per_io,
                    slot.prp1,
                    slot.prp2,
                );
                let start = Instant::now();
                if !qp.push(&entry) {
                    free_cids.push(cid);
                    free_slots.push_front(slot_index);
                    break;
                }
                inflight[usize::from(cid)] = Some(InFlight {
                    slot: slot_index,
                    slba,
                    start,
                });
                submitted += 1;
                outstanding += 1;
                pushed = true;
            }
            if pushed {
                qp.ring();
            }
        }
        if stopping && outstanding == 0 {
            break;
        }

        let mut completed_any = false;
        while let Some(cqe) = qp.poll() {
            let done = Instant::now();
            completed_any = true;
            let Some(f) = inflight
                .get_mut(usize::from(cqe.cid))
                .and_then(Option::take)
            else {
                failure.get_or_insert(Error::Controller(format!(
                    "completion for command {} that is not in flight",
                    cqe.cid
                )));
                continue;
            };
            outstanding -= 1;
            free_slots.push_back(f.slot);
            free_cids.push(cqe.cid);
            let status = cqe.status();
            if !status.is_success() {
                failure.get_or_insert(Error::Nvme {
                    context: format!(
                        "{} of {} blocks at LBA {} (queue {})",
                        if cfg.pattern.is_write() {
                            "write"
                        } else {
                            "read"
                        },
                        cfg.blocks_per_io,
                        f.slba,
                        qp.qid
                    ),
                    status,
                });
                continue;
            }
            out.hist
                .record(done.duration_since(f.start).as_nanos() as u64);
            out.ios += 1;
            out.bytes += bs as u64;
            if cfg.verify {
                let blocks = u64::from(cfg.blocks_per_io);
                if cfg.pattern.is_write() {
                    out.verify.blocks_written += blocks;
                } else {
                    if !data.copy_out(slots[f.slot].offset, &mut scratch) {
                        return Err(Error::Controller(
                            "buffer slot outside the data buffer".into(),
                        ));
                    }
                    let (bad, first) = verify::check(&scratch, f.slba, cfg.lba_size, cfg.seed);
                    out.verify.blocks_checked += blocks;
                    out.verify.blocks_mismatched += bad;
                    if out.first_mismatch.is_none() {
                        out.first_mismatch = first;
                    }
                }
            }
        }
        if completed_any {
            qp.ack();
            last_progress = Instant::now();
            spins = 0;
        } else if outstanding > 0 {
            if last_progress.elapsed() > IO_TIMEOUT {
                return Err(Error::Timeout {
                    context: format!("{outstanding} I/O commands on queue {}", qp.qid),
                    waited_ms: IO_TIMEOUT.as_millis() as u64,
                });
            }
            spins += 1;
            if spins >= SPINS_BEFORE_YIELD {
                spins = 0;
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
    out.elapsed = began.elapsed();
    match failure {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// The controller up and identified, with the memory for queues.
struct Bringup {
    ident: IdentifyController,
    ns: IdentifyNamespace,
    version: String,
}

fn identify(ctrl: &mut Controller<'_>, target: &Target) -> Result<Bringup, Error> {
    let ident = ctrl.identify_controller()?;
    let ns = ctrl.identify_namespace(target.nsid)?;
    if ns.metadata_size != 0 {
        return Err(Error::Controller(format!(
            "namespace {} is formatted with {} bytes of metadata per block; this driver needs a format without",
            target.nsid, ns.metadata_size
        )));
    }
    Ok(Bringup {
        version: ctrl.version()?,
        ident,
        ns,
    })
}

fn device_info(
    loc: &Located,
    vfio: &Vfio,
    ctrl: &Controller<'_>,
    b: &Bringup,
    nsid: u32,
) -> DeviceInfo {
    DeviceInfo {
        pci_address: loc.pci.clone(),
        iommu_group: loc.group,
        model: b.ident.model.clone(),
        serial: b.ident.serial.clone(),
        firmware: b.ident.firmware.clone(),
        nvme_version: b.version.clone(),
        nsid,
        lba_size: b.ns.lba_size,
        namespace_blocks: b.ns.size_blocks,
        capacity_bytes: b.ns.size_blocks * u64::from(b.ns.lba_size),
        max_transfer_bytes: b.ident.max_transfer(ctrl.cap().page_min),
        max_queue_entries: ctrl.cap().max_queue_entries,
        iommu: vfio.info.clone(),
    }
}

fn io_config(
    b: &Bringup,
    nsid: u32,
    spec: IoSpec,
    max_transfer: Option<u64>,
) -> Result<IoConfig, Error> {
    let IoSpec {
        pattern,
        block_size: bs,
        queue_depth: qd,
        verify,
        seed,
    } = spec;
    let lba = b.ns.lba_size;
    if !bs.is_multiple_of(lba) {
        return Err(Error::Param(crate::error::ParamError::new(
            "--bs",
            bs.to_string(),
            format!("the namespace's logical blocks are {lba} bytes: give a multiple of {lba}"),
        )));
    }
    if let Some(max) = max_transfer {
        if u64::from(bs) > max {
            return Err(Error::Param(crate::error::ParamError::new(
                "--bs",
                bs.to_string(),
                format!("the controller transfers at most {max} bytes per command (MDTS)"),
            )));
        }
    }
    let blocks_per_io = u16::try_from(bs / lba)
        .map_err(|_| Error::Controller(format!("{bs} bytes are more than 65536 blocks")))?;
    let units = b.ns.size_blocks / u64::from(blocks_per_io);
    if units == 0 {
        return Err(Error::Controller(format!(
            "the namespace is smaller than one {bs}-byte I/O"
        )));
    }
    Ok(IoConfig {
        pattern,
        nsid,
        lba_size: lba,
        block_size: bs,
        blocks_per_io,
        units,
        queue_depth: qd,
        verify,
        seed,
    })
}

fn round_page(n: u64) -> u64 {
    n.div_ceil(CTRL_PAGE) * CTRL_PAGE
}

/// Bytes of 4 KiB "queues" memory: admin SQ, admin CQ, identify page, and per thread an SQ, a
/// CQ and the PRP list pages of its slots.
fn queue_memory(threads: u16, entries: u16, slots: u64, list_pages_per_slot: usize) -> u64 {
    let sq = round_page(u64::from(entries) * 64);
    let cq = round_page(u64::from(entries) * 16);
    let lists = slots * list_pages_per_slot as u64 * CTRL_PAGE;
    3 * CTRL_PAGE + u64::from(threads) * (sq + cq + lists)
}

/// Opens VFIO and maps BAR0, timing the open.
fn open(loc: &Located, target: &Target) -> Result<(Vfio, Bar, u64), Error> {
    let start = Instant::now();
    let vfio = Vfio::open(
        &loc.sys_root,
        &loc.dev_root,
        &loc.pci,
        loc.group,
        target.backend,
    )?;
    let open_ns = start.elapsed().as_nanos() as u64;
    vfio.device.enable_bus_master()?;
    let bar = vfio.device.map_bar0()?;
    Ok((vfio, bar, open_ns))
}

/// What a thread hands back: its queue pair (to delete) and its outcome.
type ThreadReturn<'a> = (QueuePair<'a>, Result<(ThreadResult, LoopOutcome), Error>);

/// One I/O run in this process (the worker).
pub fn run_io(loc: &Located, params: &Params, cancel: &AtomicBool) -> Result<RunResult, Error> {
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
                                histogram: o.hist.clone(),
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

fn map_cost(what: &str, buf: &DmaBuffer<'_>) -> MapCost {
    MapCost {
        what: what.to_string(),
        bytes: buf.len() as u64,
        page_size: buf.page(),
        iova: buf.iova(),
        map_ns: buf.map_ns(),
        unmap_ns: None,
        physical_runs: buf.physical_runs(),
    }
}

fn assemble(
    params: &Params,
    device: DeviceInfo,
    setup: SetupCost,
    outcomes: Vec<(ThreadResult, LoopOutcome)>,
    cancel: &AtomicBool,
) -> Result<RunResult, Error> {
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
    Ok(RunResult {
        params: params.clone(),
        device,
        setup,
        elapsed_s: elapsed,
        ios,
        bytes,
        iops,
        mb_s,
        latency: hist.summary(),
        ccdf: hist.ccdf(),
        histogram: hist,
        threads,
        verify: params.verify.then_some(verify),
        interrupted,
        host: Default::default(),
    })
}

/// The IOTLB sweep in this process (the worker): one queue pair, QD1 reads; per page size one
/// data buffer of the largest working set, mapped once; per step a warm-up pass over its pages,
/// then the measured I/Os.
pub fn run_sweep(
    loc: &Located,
    sp: &SweepParams,
    cancel: &AtomicBool,
) -> Result<SweepResult, Error> {
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
    Ok(SweepResult {
        params: sp.clone(),
        device,
        setup,
        series,
        interrupted: interrupted || cancel.load(Ordering::Relaxed),
        host: Default::default(),
    })
}
