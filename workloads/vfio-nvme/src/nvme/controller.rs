//! Controller bring-up and the admin queue (NVMe Base Specification 1.4c §7.6.1), and the I/O
//! queue pairs threads submit to.

use super::queue::{CqIndex, SqIndex};
use super::spec::{
    self, admin, cc, csts, reg, Cap, CompletionEntry, IdentifyController, IdentifyNamespace,
    SubmissionEntry, CQE_STATUS_OFFSET,
};
use crate::error::Error;
use crate::mem::DmaSlice;
use crate::mmio::{Bar, Reg32};
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

const SQE: usize = std::mem::size_of::<SubmissionEntry>();
const CQE: usize = std::mem::size_of::<CompletionEntry>();

/// Admin queue entries (both queues fit one 4 KiB page each).
pub const ADMIN_ENTRIES: u16 = 32;

/// How long an admin command may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A submission queue and its completion queue in DMA memory, with their doorbells.
#[derive(Debug)]
pub struct QueuePair<'a> {
    pub qid: u16,
    sq: DmaSlice<'a>,
    cq: DmaSlice<'a>,
    sq_tail: Reg32<'a>,
    cq_head: Reg32<'a>,
    sqi: SqIndex,
    cqi: CqIndex,
}

impl<'a> QueuePair<'a> {
    /// `sq` holds `entries` 64-byte entries and `cq` as many 16-byte ones; both zeroed here.
    fn new(
        qid: u16,
        entries: u16,
        mut sq: DmaSlice<'a>,
        mut cq: DmaSlice<'a>,
        bar: &'a Bar,
        cap: &Cap,
    ) -> Result<QueuePair<'a>, Error> {
        if sq.len() < usize::from(entries) * SQE || cq.len() < usize::from(entries) * CQE {
            return Err(Error::Controller(format!(
                "queue {qid}: memory too small for {entries} entries"
            )));
        }
        sq.zero();
        cq.zero();
        Ok(QueuePair {
            qid,
            sq,
            cq,
            sq_tail: bar.reg32(cap.sq_tail_doorbell(qid))?,
            cq_head: bar.reg32(cap.cq_head_doorbell(qid))?,
            sqi: SqIndex::new(entries),
            cqi: CqIndex::new(entries),
        })
    }

    pub fn entries(&self) -> u16 {
        self.sqi.entries()
    }

    pub fn sq_iova(&self) -> u64 {
        self.sq.iova()
    }

    pub fn cq_iova(&self) -> u64 {
        self.cq.iova()
    }

    /// Writes `entry` at the tail; the controller sees it at the next [`ring`](Self::ring).
    /// `false` if the submission queue is full.
    pub fn push(&mut self, entry: &SubmissionEntry) -> bool {
        let Some(slot) = self.sqi.push() else {
            return false;
        };
        self.sq.write(usize::from(slot) * SQE, *entry)
    }

    /// Rings the submission queue tail doorbell, after the entries are visible in memory.
    pub fn ring(&self) {
        fence(Ordering::Release);
        self.sq_tail.write(u32::from(self.sqi.tail()));
    }

    /// The next new completion, if any; the head advances past it (ring [`ack`](Self::ack)
    /// to tell the controller).
    pub fn poll(&mut self) -> Option<CompletionEntry> {
        let at = usize::from(self.cqi.head()) * CQE;
        let status: u16 = self.cq.read(at + CQE_STATUS_OFFSET)?;
        if !self.cqi.is_new(status & 1 == 1) {
            return None;
        }
        // The phase tag is written last by the controller: order the rest of the entry after it.
        fence(Ordering::Acquire);
        let entry: CompletionEntry = self.cq.read(at)?;
        self.cqi.advance();
        self.sqi.set_head(entry.sq_head);
        Some(entry)
    }

    /// Rings the completion queue head doorbell: the entries before the head can be reused.
    pub fn ack(&self) {
        self.cq_head.write(u32::from(self.cqi.head()));
    }

    /// Submits one command and waits for its completion (admin use: nothing else in flight).
    fn execute(
        &mut self,
        entry: &SubmissionEntry,
        what: &str,
        timeout: Duration,
    ) -> Result<CompletionEntry, Error> {
        if !self.push(entry) {
            return Err(Error::Controller(format!("{what}: submission queue full")));
        }
        self.ring();
        let start = Instant::now();
        loop {
            if let Some(done) = self.poll() {
                self.ack();
                if done.cid != entry.cid() {
                    return Err(Error::Controller(format!(
                        "{what}: completion for command {} while waiting for {}",
                        done.cid,
                        entry.cid()
                    )));
                }
                let status = done.status();
                if !status.is_success() {
                    return Err(Error::Nvme {
                        context: what.to_string(),
                        status,
                    });
                }
                return Ok(done);
            }
            if start.elapsed() > timeout {
                return Err(Error::Timeout {
                    context: what.to_string(),
                    waited_ms: timeout.as_millis() as u64,
                });
            }
            std::hint::spin_loop();
        }
    }
}

/// An enabled controller: BAR0, capabilities and the admin queue pair.
#[derive(Debug)]
pub struct Controller<'a> {
    bar: &'a Bar,
    cap: Cap,
    admin: QueuePair<'a>,
    data: DmaSlice<'a>,
    next_cid: u16,
    enabled: bool,
    /// How long reset + enable took, in ns.
    pub enable_ns: u64,
}

fn wait_for(
    bar: &Bar,
    what: &str,
    timeout: Duration,
    done: impl Fn(u32) -> bool,
) -> Result<u32, Error> {
    let start = Instant::now();
    loop {
        let status = bar.read32(reg::CSTS)?;
        if status == u32::MAX {
            return Err(Error::Controller(format!(
                "{what}: CSTS reads all ones (the device is gone or its BAR is not decoded)"
            )));
        }
        if done(status) {
            return Ok(status);
        }
        if start.elapsed() > timeout {
            return Err(Error::Timeout {
                context: what.to_string(),
                waited_ms: timeout.as_millis() as u64,
            });
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

impl<'a> Controller<'a> {
    /// Resets and enables the controller (§7.6.1): CC.EN = 0 and wait for CSTS.RDY = 0; admin
    /// queue attributes and addresses; CC with the NVM command set, 4 KiB pages and entry sizes,
    /// EN = 1; wait for CSTS.RDY = 1. `asq` and `acq` are one 4 KiB page each, `data` a 4 KiB
    /// page for Identify.
    pub fn enable(
        bar: &'a Bar,
        asq: DmaSlice<'a>,
        acq: DmaSlice<'a>,
        data: DmaSlice<'a>,
    ) -> Result<Controller<'a>, Error> {
        let start = Instant::now();
        let cap = Cap::from_raw(bar.read64(reg::CAP)?);
        if !cap.nvm_command_set {
            return Err(Error::Controller(
                "the controller does not support the NVM command set".into(),
            ));
        }
        if cap.page_min > spec::CTRL_PAGE {
            return Err(Error::Controller(format!(
                "the controller's smallest memory page is {} bytes; this driver uses 4 KiB",
                cap.page_min
            )));
        }
        let timeout = Duration::from_millis(cap.timeout_ms.max(500));
        if bar.read32(reg::CC)? & cc::EN != 0 {
            bar.write32(reg::CC, bar.read32(reg::CC)? & !cc::EN)?;
        }
        wait_for(bar, "reset (CSTS.RDY = 0)", timeout, |s| s & csts::RDY == 0)?;
        // Mask all interrupt vectors: we poll.
        bar.write32(reg::INTMS, u32::MAX)?;
        let admin = QueuePair::new(0, ADMIN_ENTRIES, asq, acq, bar, &cap)?;
        let entries = u32::from(ADMIN_ENTRIES - 1);
        bar.write32(reg::AQA, (entries << 16) | entries)?;
        bar.write64(reg::ASQ, admin.sq_iova())?;
        bar.write64(reg::ACQ, admin.cq_iova())?;
        bar.write32(reg::CC, cc::value(false))?;
        bar.write32(reg::CC, cc::value(true))?;
        let status = wait_for(bar, "enable (CSTS.RDY = 1)", timeout, |s| {
            s & (csts::RDY | csts::CFS) != 0
        })?;
        if status & csts::CFS != 0 {
            return Err(Error::Controller(
                "fatal status (CSTS.CFS) after enable".into(),
            ));
        }
        Ok(Controller {
            bar,
            cap,
            admin,
            data,
            next_cid: 0,
            enabled: true,
            enable_ns: start.elapsed().as_nanos() as u64,
        })
    }

    pub fn cap(&self) -> &Cap {
        &self.cap
    }

    pub fn version(&self) -> Result<String, Error> {
        let vs = self.bar.read32(reg::VS)?;
        Ok(format!("{}.{}.{}", vs >> 16, (vs >> 8) & 0xff, vs & 0xff))
    }

    fn cid(&mut self) -> u16 {
        self.next_cid = self.next_cid.wrapping_add(1);
        self.next_cid
    }

    fn identify(&mut self, cns: u32, nsid: u32, what: &str) -> Result<Vec<u8>, Error> {
        self.data.zero();
        let cid = self.cid();
        let cmd = SubmissionEntry::identify(cid, cns, nsid, self.data.iova());
        self.admin.execute(&cmd, what, ADMIN_TIMEOUT)?;
        let mut out = vec![0u8; 4096];
        if !self.data.copy_out(0, &mut out) {
            return Err(Error::Controller(format!(
                "{what}: identify buffer smaller than 4 KiB"
            )));
        }
        Ok(out)
    }

    pub fn identify_controller(&mut self) -> Result<IdentifyController, Error> {
        let data = self.identify(admin::CNS_CONTROLLER, 0, "identify controller")?;
        IdentifyController::parse(&data)
            .ok_or_else(|| Error::Controller("short identify controller data".into()))
    }

    pub fn identify_namespace(&mut self, nsid: u32) -> Result<IdentifyNamespace, Error> {
        let what = format!("identify namespace {nsid}");
        let data = self.identify(admin::CNS_NAMESPACE, nsid, &what)?;
        let ns = IdentifyNamespace::parse(&data).ok_or_else(|| {
            Error::Controller(format!("{what}: no valid LBA format (inactive namespace?)"))
        })?;
        if ns.size_blocks == 0 {
            return Err(Error::Controller(format!(
                "{what}: the namespace is inactive (size 0): give an active --nsid"
            )));
        }
        Ok(ns)
    }

    /// Asks for `n` I/O queue pairs (Set Features, Number of Queues); returns how many the
    /// controller allocated (the smaller of SQs and CQs).
    pub fn set_queue_count(&mut self, n: u16) -> Result<u16, Error> {
        let cid = self.cid();
        let done = self.admin.execute(
            &SubmissionEntry::set_number_of_queues(cid, n, n),
            "set features (number of queues)",
            ADMIN_TIMEOUT,
        )?;
        let sqs = (done.dw0 & 0xffff) as u16 + 1;
        let cqs = (done.dw0 >> 16) as u16 + 1;
        Ok(sqs.min(cqs))
    }

    /// Creates I/O queue pair `qid` with `entries` entries in `sq` and `cq`.
    pub fn create_queue_pair(
        &mut self,
        qid: u16,
        entries: u16,
        sq: DmaSlice<'a>,
        cq: DmaSlice<'a>,
    ) -> Result<QueuePair<'a>, Error> {
        if u32::from(entries) > self.cap.max_queue_entries {
            return Err(Error::Controller(format!(
                "queue of {entries} entries: the controller allows at most {} (lower --qd)",
                self.cap.max_queue_entries
            )));
        }
        let pair = QueuePair::new(qid, entries, sq, cq, self.bar, &self.cap)?;
        let cid = self.cid();
        self.admin.execute(
            &SubmissionEntry::create_io_cq(cid, qid, entries, pair.cq_iova()),
            &format!("create I/O completion queue {qid}"),
            ADMIN_TIMEOUT,
        )?;
        let cid = self.cid();
        self.admin.execute(
            &SubmissionEntry::create_io_sq(cid, qid, entries, qid, pair.sq_iova()),
            &format!("create I/O submission queue {qid}"),
            ADMIN_TIMEOUT,
        )?;
        Ok(pair)
    }

    /// Deletes an I/O queue pair: the submission queue first, then its completion queue (§5.6).
    pub fn delete_queue_pair(&mut self, pair: QueuePair<'a>) -> Result<(), Error> {
        let qid = pair.qid;
        let cid = self.cid();
        self.admin.execute(
            &SubmissionEntry::delete_io_queue(cid, admin::DELETE_IO_SQ, qid),
            &format!("delete I/O submission queue {qid}"),
            ADMIN_TIMEOUT,
        )?;
        let cid = self.cid();
        self.admin.execute(
            &SubmissionEntry::delete_io_queue(cid, admin::DELETE_IO_CQ, qid),
            &format!("delete I/O completion queue {qid}"),
            ADMIN_TIMEOUT,
        )?;
        Ok(())
    }

    /// Normal shutdown (CC.SHN = 01b, wait for CSTS.SHST = 10b, §7.6.2), then disable, so the
    /// kernel driver finds the controller idle when it binds again.
    pub fn shutdown(&mut self) -> Result<(), Error> {
        let timeout = Duration::from_millis(self.cap.timeout_ms.max(500));
        let cc = self.bar.read32(reg::CC)?;
        self.bar
            .write32(reg::CC, (cc & !cc::SHN_MASK) | cc::SHN_NORMAL)?;
        wait_for(self.bar, "shutdown (CSTS.SHST)", timeout, |s| {
            s & csts::SHST_MASK == csts::SHST_COMPLETE
        })?;
        self.disable()
    }

    fn disable(&mut self) -> Result<(), Error> {
        let timeout = Duration::from_millis(self.cap.timeout_ms.max(500));
        self.bar.write32(reg::CC, 0)?;
        wait_for(self.bar, "disable (CSTS.RDY = 0)", timeout, |s| {
            s & csts::RDY == 0
        })?;
        self.enabled = false;
        Ok(())
    }
}

impl Drop for Controller<'_> {
    /// Stops all DMA before the buffers it targets are unmapped (they drop after us).
    fn drop(&mut self) {
        if self.enabled {
            let _ = self.disable();
        }
    }
}
