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
}

/// What the I/O does, before the namespace is known.
#[derive(Clone, Copy)]
struct InFlight {
    slot: usize,
    slba: u64,
    start: Instant,
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
