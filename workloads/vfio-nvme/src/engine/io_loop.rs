//! The submission/completion loop of one thread: buffer slots with their PRPs, where the next
//! I/O goes, and when the loop stops.

use crate::error::Error;
use crate::hist::LatencyHistogram;
use crate::mem::DmaSlice;
use crate::nvme::controller::QueuePair;
use crate::nvme::prp;
use crate::nvme::spec::{nvm, SubmissionEntry, CTRL_PAGE};
use crate::params::{self, Pattern};
use crate::report::VerifySummary;
use crate::rng::Rng;
use crate::verify;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A command that has not completed after this long is reported as timed out.
const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// Empty polls before a polling thread yields its CPU (threads may outnumber CPUs).
const SPINS_BEFORE_YIELD: u32 = 64;

/// A data buffer slot: its offset in the thread's data slice and its precomputed PRPs.
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    offset: usize,
    prp1: u64,
    prp2: u64,
}

/// Builds the slots of `data` (page-major over `pages` pages of `page`), carving PRP list pages
/// from `lists` and writing them when a buffer spans more than two controller pages.
pub(super) fn build_slots(
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
pub(super) struct IoConfig {
    pub(super) pattern: Pattern,
    pub(super) nsid: u32,
    pub(super) lba_size: u32,
    pub(super) block_size: u32,
    pub(super) blocks_per_io: u16,
    /// Distinct I/O positions on the namespace (capacity / block size).
    pub(super) units: u64,
    pub(super) queue_depth: u16,
    pub(super) verify: bool,
    pub(super) seed: u64,
}

#[derive(Debug, Default)]
pub(super) struct LoopOutcome {
    pub(super) ios: u64,
    pub(super) bytes: u64,
    pub(super) elapsed: Duration,
    pub(super) hist: LatencyHistogram,
    pub(super) verify: VerifySummary,
    pub(super) first_mismatch: Option<verify::Mismatch>,
    pub(super) interrupted: bool,
}

/// Where one thread's I/O goes next.
pub(super) struct Cursor {
    rng: Rng,
    next_unit: u64,
}

impl Cursor {
    pub(super) fn new(cfg: &IoConfig, thread: u16, threads: u16) -> Cursor {
        Cursor {
            rng: Rng::for_thread(cfg.seed, thread),
            next_unit: cfg.units * u64::from(thread) / u64::from(threads.max(1)),
        }
    }

    pub(super) fn next(&mut self, cfg: &IoConfig) -> u64 {
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
pub(super) struct Until {
    pub(super) quota: Option<u64>,
    pub(super) deadline: Option<Instant>,
}

impl Until {
    pub(super) fn ios(n: u64) -> Until {
        Until {
            quota: Some(n),
            deadline: None,
        }
    }

    fn quota_met(&self, submitted: u64) -> bool {
        self.quota.is_some_and(|q| submitted >= q)
    }

    fn reached(&self, submitted: u64, now: Instant) -> bool {
        self.quota_met(submitted) || self.deadline.is_some_and(|d| now >= d)
    }
}

/// What the I/O does, before the namespace is known.
#[derive(Clone, Copy)]
struct InFlight {
    slot: usize,
    slba: u64,
    start: Instant,
}

/// What one loop works on: the queue pair, the thread's data buffer and its slots, and the I/O
/// settings.
struct Lane<'l, 'q, 'd> {
    qp: &'l mut QueuePair<'q>,
    data: &'l mut DmaSlice<'d>,
    slots: &'l [Slot],
    cfg: &'l IoConfig,
}

/// Which slots and command ids are free, what is in flight, and what has completed so far.
struct Books {
    free_slots: VecDeque<usize>,
    free_cids: Vec<u16>,
    inflight: Vec<Option<InFlight>>,
    /// One block's worth of bytes to fill or check when verifying, else empty.
    scratch: Vec<u8>,
    submitted: u64,
    outstanding: usize,
    /// The first failure; the loop stops submitting and drains once it is set.
    failure: Option<Error>,
    out: LoopOutcome,
}

/// How long the loop has waited on the controller without a completion.
struct Patience {
    last_progress: Instant,
    spins: u32,
}

/// Submits and completes I/O on `qp` until `quota` I/Os, `deadline`, or `cancel`; drains what
/// is in flight before returning.
pub(super) fn io_loop(
    qp: &mut QueuePair<'_>,
    data: &mut DmaSlice<'_>,
    slots: &[Slot],
    cfg: &IoConfig,
    cursor: &mut Cursor,
    until: Until,
    cancel: &AtomicBool,
) -> Result<LoopOutcome, Error> {
    let qd = usize::from(cfg.queue_depth)
        .min(slots.len())
        .min(usize::from(qp.entries() - 1));
    if qd == 0 {
        return Err(Error::Controller(
            "no buffer slots or queue entries for I/O".into(),
        ));
    }
    let mut lane = Lane {
        qp,
        data,
        slots,
        cfg,
    };
    let mut books = Books::new(cfg, slots.len(), qd);
    let mut patience = Patience::new();
    let began = Instant::now();
    loop {
        let cancelled = cancel.load(Ordering::Relaxed);
        let stopping =
            books.failure.is_some() || until.reached(books.submitted, Instant::now()) || cancelled;
        if cancelled {
            books.out.interrupted = true;
        }
        if !stopping {
            books.submit(&mut lane, cursor, until)?;
        }
        if stopping && books.outstanding == 0 {
            break;
        }
        if books.reap(&mut lane)? {
            lane.qp.ack();
            patience.progressed();
        } else if books.outstanding > 0 {
            patience.wait(books.outstanding, lane.qp.qid)?;
        }
    }
    books.out.elapsed = began.elapsed();
    match books.failure {
        Some(e) => Err(e),
        None => Ok(books.out),
    }
}

impl Books {
    fn new(cfg: &IoConfig, slot_count: usize, queue_depth: usize) -> Books {
        Books {
            free_slots: (0..slot_count).collect(),
            free_cids: (0..queue_depth as u16).rev().collect(),
            inflight: vec![None; queue_depth],
            scratch: vec![
                0u8;
                if cfg.verify {
                    cfg.block_size as usize
                } else {
                    0
                }
            ],
            submitted: 0,
            outstanding: 0,
            failure: None,
            out: LoopOutcome::default(),
        }
    }

    /// Puts I/O on every free command id until the quota, the slots or the queue run out, and
    /// rings the doorbell once for them all.
    fn submit(&mut self, lane: &mut Lane, cursor: &mut Cursor, until: Until) -> Result<(), Error> {
        let cfg = lane.cfg;
        let opcode = if cfg.pattern.is_write() {
            nvm::WRITE
        } else {
            nvm::READ
        };
        let mut pushed = false;
        while let Some(cid) = self.free_cids.pop() {
            if until.quota_met(self.submitted) {
                self.free_cids.push(cid);
                break;
            }
            let Some(slot_index) = self.free_slots.pop_front() else {
                self.free_cids.push(cid);
                break;
            };
            let slot = lane.slots[slot_index];
            let slba = cursor.next(cfg);
            if cfg.verify && cfg.pattern.is_write() {
                verify::fill(&mut self.scratch, slba, cfg.lba_size, cfg.seed);
                if !lane.data.copy_in(slot.offset, &self.scratch) {
                    return Err(slot_outside_buffer());
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
            if !lane.qp.push(&entry) {
                self.free_cids.push(cid);
                self.free_slots.push_front(slot_index);
                break;
            }
            self.inflight[usize::from(cid)] = Some(InFlight {
                slot: slot_index,
                slba,
                start,
            });
            self.submitted += 1;
            self.outstanding += 1;
            pushed = true;
        }
        if pushed {
            lane.qp.ring();
        }
        Ok(())
    }

    /// Takes every completion the controller has posted; says whether there was any.
    fn reap(&mut self, lane: &mut Lane) -> Result<bool, Error> {
        let mut completed_any = false;
        while let Some(cqe) = lane.qp.poll() {
            let done = Instant::now();
            completed_any = true;
            let Some(f) = self
                .inflight
                .get_mut(usize::from(cqe.cid))
                .and_then(Option::take)
            else {
                self.failure.get_or_insert(Error::Controller(format!(
                    "completion for command {} that is not in flight",
                    cqe.cid
                )));
                continue;
            };
            self.outstanding -= 1;
            self.free_slots.push_back(f.slot);
            self.free_cids.push(cqe.cid);
            let status = cqe.status();
            if !status.is_success() {
                self.failure.get_or_insert(Error::Nvme {
                    context: failed_io(lane.cfg, f.slba, lane.qp.qid),
                    status,
                });
                continue;
            }
            self.out
                .hist
                .record(done.duration_since(f.start).as_nanos() as u64);
            self.out.ios += 1;
            self.out.bytes += u64::from(lane.cfg.block_size);
            if lane.cfg.verify {
                self.verify_completed(lane, f)?;
            }
        }
        Ok(completed_any)
    }

    /// Counts a verified write, or checks a read's data against the pattern written.
    fn verify_completed(&mut self, lane: &mut Lane, f: InFlight) -> Result<(), Error> {
        let cfg = lane.cfg;
        let blocks = u64::from(cfg.blocks_per_io);
        if cfg.pattern.is_write() {
            self.out.verify.blocks_written += blocks;
            return Ok(());
        }
        if !lane
            .data
            .copy_out(lane.slots[f.slot].offset, &mut self.scratch)
        {
            return Err(slot_outside_buffer());
        }
        let (bad, first) = verify::check(&self.scratch, f.slba, cfg.lba_size, cfg.seed);
        self.out.verify.blocks_checked += blocks;
        self.out.verify.blocks_mismatched += bad;
        if self.out.first_mismatch.is_none() {
            self.out.first_mismatch = first;
        }
        Ok(())
    }
}

impl Patience {
    fn new() -> Patience {
        Patience {
            last_progress: Instant::now(),
            spins: 0,
        }
    }

    fn progressed(&mut self) {
        self.last_progress = Instant::now();
        self.spins = 0;
    }

    /// Spins, yielding the CPU now and then, or fails once nothing has completed for
    /// `IO_TIMEOUT`.
    fn wait(&mut self, outstanding: usize, qid: u16) -> Result<(), Error> {
        if self.last_progress.elapsed() > IO_TIMEOUT {
            return Err(Error::Timeout {
                context: format!("{outstanding} I/O commands on queue {qid}"),
                waited_ms: IO_TIMEOUT.as_millis() as u64,
            });
        }
        self.spins += 1;
        if self.spins >= SPINS_BEFORE_YIELD {
            self.spins = 0;
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
        Ok(())
    }
}

fn slot_outside_buffer() -> Error {
    Error::Controller("buffer slot outside the data buffer".into())
}

fn failed_io(cfg: &IoConfig, slba: u64, qid: u16) -> String {
    let what = if cfg.pattern.is_write() {
        "write"
    } else {
        "read"
    };
    format!(
        "{what} of {} blocks at LBA {slba} (queue {qid})",
        cfg.blocks_per_io
    )
}
