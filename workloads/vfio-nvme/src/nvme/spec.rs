//! The parts of the NVM Express Base Specification, Revision 1.4c ("the spec" below) this driver
//! uses: controller registers (§3.1), submission and completion entries (§4.2, §4.6), status
//! codes (§4.6.1.2), admin commands (§5) and the Identify data structures (§5.15.2).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::mem::size_of;

/// Controller register offsets in BAR0 (§3.1).
pub mod reg {
    /// Controller Capabilities, 64 bits (§3.1.1).
    pub const CAP: usize = 0x00;
    /// Version (§3.1.2).
    pub const VS: usize = 0x08;
    /// Interrupt Mask Set (§3.1.3): we poll, so all vectors stay masked.
    pub const INTMS: usize = 0x0c;
    /// Controller Configuration (§3.1.5).
    pub const CC: usize = 0x14;
    /// Controller Status (§3.1.6).
    pub const CSTS: usize = 0x1c;
    /// Admin Queue Attributes (§3.1.8).
    pub const AQA: usize = 0x24;
    /// Admin Submission Queue Base Address, 64 bits (§3.1.9).
    pub const ASQ: usize = 0x28;
    /// Admin Completion Queue Base Address, 64 bits (§3.1.10).
    pub const ACQ: usize = 0x30;
    /// The first doorbell (§3.1.24).
    pub const DOORBELLS: usize = 0x1000;
}

/// CC fields (§3.1.5).
pub mod cc {
    pub const EN: u32 = 1;
    /// I/O Command Set Selected = NVM (bits 6:4 = 0).
    pub const CSS_NVM: u32 = 0;
    /// Shutdown Notification (bits 15:14): normal shutdown.
    pub const SHN_NORMAL: u32 = 1 << 14;
    pub const SHN_MASK: u32 = 3 << 14;

    /// CC with 4 KiB memory pages (MPS = 0), 64-byte SQ entries (IOSQES = 6), 16-byte CQ
    /// entries (IOCQES = 4), round-robin arbitration, NVM command set.
    pub const fn value(enable: bool) -> u32 {
        let iosqes = 6 << 16;
        let iocqes = 4 << 20;
        let mps = 0 << 7;
        iosqes | iocqes | mps | CSS_NVM | if enable { EN } else { 0 }
    }
}

/// CSTS fields (§3.1.6).
pub mod csts {
    pub const RDY: u32 = 1;
    /// Controller Fatal Status.
    pub const CFS: u32 = 1 << 1;
    /// Shutdown Status (bits 3:2): 10b = shutdown processing complete.
    pub const SHST_MASK: u32 = 3 << 2;
    pub const SHST_COMPLETE: u32 = 2 << 2;
}

/// The controller's memory page size as configured in CC.MPS: PRP entries are in these units.
pub const CTRL_PAGE: u64 = 4096;

/// Controller Capabilities (§3.1.1), decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cap {
    /// Maximum Queue Entries Supported, as a count (MQES + 1).
    pub max_queue_entries: u32,
    /// Contiguous Queues Required.
    pub contiguous_queues_required: bool,
    /// Worst-case time for CSTS.RDY to follow CC.EN, in ms (TO × 500 ms).
    pub timeout_ms: u64,
    /// Doorbell Stride: doorbells are 4 << DSTRD bytes apart.
    pub doorbell_stride: u32,
    /// The NVM command set is supported (CSS bit 0).
    pub nvm_command_set: bool,
    /// Memory Page Size Minimum and Maximum, in bytes.
    pub page_min: u64,
    pub page_max: u64,
}

impl Cap {
    pub fn from_raw(raw: u64) -> Cap {
        let field = |shift: u32, bits: u32| (raw >> shift) & ((1u64 << bits) - 1);
        Cap {
            max_queue_entries: field(0, 16) as u32 + 1,
            contiguous_queues_required: field(16, 1) == 1,
            timeout_ms: field(24, 8) * 500,
            doorbell_stride: 4 << field(32, 4),
            nvm_command_set: field(37, 8) & 1 == 1,
            page_min: 1 << (12 + field(48, 4)),
            page_max: 1 << (12 + field(52, 4)),
        }
    }

    /// Offset of submission queue `qid`'s tail doorbell (§3.1.24).
    pub fn sq_tail_doorbell(&self, qid: u16) -> usize {
        reg::DOORBELLS + (2 * qid as usize) * self.doorbell_stride as usize
    }

    /// Offset of completion queue `qid`'s head doorbell (§3.1.25).
    pub fn cq_head_doorbell(&self, qid: u16) -> usize {
        reg::DOORBELLS + (2 * qid as usize + 1) * self.doorbell_stride as usize
    }
}

/// Admin command opcodes (§5).
pub mod admin {
    pub const DELETE_IO_SQ: u8 = 0x00;
    pub const CREATE_IO_SQ: u8 = 0x01;
    pub const DELETE_IO_CQ: u8 = 0x04;
    pub const CREATE_IO_CQ: u8 = 0x05;
    pub const IDENTIFY: u8 = 0x06;
    pub const SET_FEATURES: u8 = 0x09;
    /// Identify CNS values (§5.15.1).
    pub const CNS_NAMESPACE: u32 = 0x00;
    pub const CNS_CONTROLLER: u32 = 0x01;
    /// Feature Identifier: Number of Queues (§5.21.1.7).
    pub const FID_NUMBER_OF_QUEUES: u32 = 0x07;
}

/// NVM command set opcodes (§6).
pub mod nvm {
    pub const WRITE: u8 = 0x01;
    pub const READ: u8 = 0x02;
}

/// A Submission Queue Entry: the Common Command Format (§4.2), 64 bytes.
/// PSDT is 0 (PRPs); FUSE is 0 (not fused).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubmissionEntry {
    /// Command Dword 0: opcode (7:0), FUSE (9:8), PSDT (15:14), command identifier (31:16).
    pub cdw0: u32,
    /// Namespace Identifier.
    pub nsid: u32,
    pub cdw2: u32,
    pub cdw3: u32,
    /// Metadata Pointer (unused: our namespaces have no separate metadata).
    pub mptr: u64,
    /// PRP Entry 1 (§4.3).
    pub prp1: u64,
    /// PRP Entry 2 or PRP List pointer (§4.3).
    pub prp2: u64,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
}

const _: () = assert!(size_of::<SubmissionEntry>() == 64);

impl SubmissionEntry {
    pub fn new(opcode: u8, cid: u16) -> SubmissionEntry {
        SubmissionEntry {
            cdw0: u32::from(opcode) | (u32::from(cid) << 16),
            ..SubmissionEntry::default()
        }
    }

    pub fn opcode(&self) -> u8 {
        (self.cdw0 & 0xff) as u8
    }

    pub fn cid(&self) -> u16 {
        (self.cdw0 >> 16) as u16
    }

    /// Identify (§5.15): `cns` in CDW10, the 4 KiB result at `prp1`.
    pub fn identify(cid: u16, cns: u32, nsid: u32, prp1: u64) -> SubmissionEntry {
        SubmissionEntry {
            nsid,
            prp1,
            cdw10: cns,
            ..SubmissionEntry::new(admin::IDENTIFY, cid)
        }
    }

    /// Set Features, Number of Queues (§5.21.1.7): counts are 0-based in CDW11.
    pub fn set_number_of_queues(cid: u16, sqs: u16, cqs: u16) -> SubmissionEntry {
        SubmissionEntry {
            cdw10: admin::FID_NUMBER_OF_QUEUES,
            cdw11: u32::from(sqs.saturating_sub(1)) | (u32::from(cqs.saturating_sub(1)) << 16),
            ..SubmissionEntry::new(admin::SET_FEATURES, cid)
        }
    }

    /// Create I/O Completion Queue (§5.3): physically contiguous (PC = 1), interrupts off.
    pub fn create_io_cq(cid: u16, qid: u16, entries: u16, prp1: u64) -> SubmissionEntry {
        SubmissionEntry {
            prp1,
            cdw10: (u32::from(entries - 1) << 16) | u32::from(qid),
            cdw11: 1,
            ..SubmissionEntry::new(admin::CREATE_IO_CQ, cid)
        }
    }

    /// Create I/O Submission Queue (§5.4): contiguous, bound to completion queue `cqid`.
    pub fn create_io_sq(cid: u16, qid: u16, entries: u16, cqid: u16, prp1: u64) -> SubmissionEntry {
        SubmissionEntry {
            prp1,
            cdw10: (u32::from(entries - 1) << 16) | u32::from(qid),
            cdw11: (u32::from(cqid) << 16) | 1,
            ..SubmissionEntry::new(admin::CREATE_IO_SQ, cid)
        }
    }

    /// Delete I/O Submission Queue (§5.7) or Completion Queue (§5.6).
    pub fn delete_io_queue(cid: u16, opcode: u8, qid: u16) -> SubmissionEntry {
        SubmissionEntry {
            cdw10: u32::from(qid),
            ..SubmissionEntry::new(opcode, cid)
        }
    }

    /// Read (§6.9) or Write (§6.15) of `blocks` logical blocks from `slba`.
    pub fn read_write(
        opcode: u8,
        cid: u16,
        nsid: u32,
        slba: u64,
        blocks: u16,
        prp1: u64,
        prp2: u64,
    ) -> SubmissionEntry {
        SubmissionEntry {
            nsid,
            prp1,
            prp2,
            cdw10: slba as u32,
            cdw11: (slba >> 32) as u32,
            // Number of Logical Blocks, 0-based (bits 15:0).
            cdw12: u32::from(blocks.saturating_sub(1)),
            ..SubmissionEntry::new(opcode, cid)
        }
    }
}

/// A Completion Queue Entry (§4.6), 16 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompletionEntry {
    /// Command specific (Set Features returns the queues allocated here).
    pub dw0: u32,
    pub dw1: u32,
    /// SQ Head Pointer: how far the controller has consumed the submission queue.
    pub sq_head: u16,
    pub sq_id: u16,
    /// Command Identifier of the completed command.
    pub cid: u16,
    /// Phase Tag (bit 0) and Status Field (bits 15:1, §4.6.1).
    pub status: u16,
}

const _: () = assert!(size_of::<CompletionEntry>() == 16);
/// Byte offset of `status` in a completion entry, for the volatile phase check.
pub const CQE_STATUS_OFFSET: usize = 14;

impl CompletionEntry {
    pub fn phase(&self) -> bool {
        self.status & 1 == 1
    }

    pub fn status(&self) -> Status {
        Status::from_field(self.status)
    }
}

/// Status Code Type (§4.6.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StatusType {
    Generic,
    CommandSpecific,
    MediaAndDataIntegrity,
    PathRelated,
    VendorSpecific,
    Reserved(u8),
}

/// A decoded Status Field (§4.6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// Status Code Type, 3 bits.
    pub sct: u8,
    /// Status Code, 8 bits.
    pub sc: u8,
    /// More information in the Error Information log page.
    pub more: bool,
    /// Do Not Retry.
    pub dnr: bool,
}

impl Status {
    /// From the 16-bit word holding the phase tag (bit 0) and the status field (bits 15:1).
    pub fn from_field(word: u16) -> Status {
        Status {
            sc: ((word >> 1) & 0xff) as u8,
            sct: ((word >> 9) & 0x7) as u8,
            more: word & (1 << 14) != 0,
            dnr: word & (1 << 15) != 0,
        }
    }

    pub fn is_success(&self) -> bool {
        self.sct == 0 && self.sc == 0
    }

    pub fn status_type(&self) -> StatusType {
        match self.sct {
            0 => StatusType::Generic,
            1 => StatusType::CommandSpecific,
            2 => StatusType::MediaAndDataIntegrity,
            3 => StatusType::PathRelated,
            7 => StatusType::VendorSpecific,
            other => StatusType::Reserved(other),
        }
    }

    /// The spec's name for this status (§4.6.1.2).
    pub fn name(&self) -> &'static str {
        match (self.sct, self.sc) {
            (0, 0x00) => "Successful Completion",
            (0, 0x01) => "Invalid Command Opcode",
            (0, 0x02) => "Invalid Field in Command",
            (0, 0x03) => "Command ID Conflict",
            (0, 0x04) => "Data Transfer Error",
            (0, 0x05) => "Commands Aborted due to Power Loss Notification",
            (0, 0x06) => "Internal Error",
            (0, 0x07) => "Command Abort Requested",
            (0, 0x08) => "Command Aborted due to SQ Deletion",
            (0, 0x09) => "Command Aborted due to Failed Fused Command",
            (0, 0x0a) => "Command Aborted due to Missing Fused Command",
            (0, 0x0b) => "Invalid Namespace or Format",
            (0, 0x0c) => "Command Sequence Error",
            (0, 0x0d) => "Invalid SGL Segment Descriptor",
            (0, 0x0e) => "Invalid Number of SGL Descriptors",
            (0, 0x0f) => "Data SGL Length Invalid",
            (0, 0x10) => "Metadata SGL Length Invalid",
            (0, 0x11) => "SGL Descriptor Type Invalid",
            (0, 0x12) => "Invalid Use of Controller Memory Buffer",
            (0, 0x13) => "PRP Offset Invalid",
            (0, 0x14) => "Atomic Write Unit Exceeded",
            (0, 0x15) => "Operation Denied",
            (0, 0x16) => "SGL Offset Invalid",
            (0, 0x18) => "Host Identifier Inconsistent Format",
            (0, 0x19) => "Keep Alive Timer Expired",
            (0, 0x1a) => "Keep Alive Timeout Invalid",
            (0, 0x1b) => "Command Aborted due to Preempt and Abort",
            (0, 0x1c) => "Sanitize Failed",
            (0, 0x1d) => "Sanitize In Progress",
            (0, 0x1e) => "SGL Data Block Granularity Invalid",
            (0, 0x1f) => "Command Not Supported for Queue in CMB",
            (0, 0x20) => "Namespace is Write Protected",
            (0, 0x21) => "Command Interrupted",
            (0, 0x22) => "Transient Transport Error",
            (0, 0x80) => "LBA Out of Range",
            (0, 0x81) => "Capacity Exceeded",
            (0, 0x82) => "Namespace Not Ready",
            (0, 0x83) => "Reservation Conflict",
            (0, 0x84) => "Format In Progress",
            (1, 0x00) => "Completion Queue Invalid",
            (1, 0x01) => "Invalid Queue Identifier",
            (1, 0x02) => "Invalid Queue Size",
            (1, 0x03) => "Abort Command Limit Exceeded",
            (1, 0x05) => "Asynchronous Event Request Limit Exceeded",
            (1, 0x06) => "Invalid Firmware Slot",
            (1, 0x07) => "Invalid Firmware Image",
            (1, 0x08) => "Invalid Interrupt Vector",
            (1, 0x09) => "Invalid Log Page",
            (1, 0x0a) => "Invalid Format",
            (1, 0x0b) => "Firmware Activation Requires Conventional Reset",
            (1, 0x0c) => "Invalid Queue Deletion",
            (1, 0x0d) => "Feature Identifier Not Saveable",
            (1, 0x0e) => "Feature Not Changeable",
            (1, 0x0f) => "Feature Not Namespace Specific",
            (1, 0x10) => "Firmware Activation Requires NVM Subsystem Reset",
            (1, 0x11) => "Firmware Activation Requires Controller Level Reset",
            (1, 0x12) => "Firmware Activation Requires Maximum Time Violation",
            (1, 0x13) => "Firmware Activation Prohibited",
            (1, 0x14) => "Overlapping Range",
            (1, 0x15) => "Namespace Insufficient Capacity",
            (1, 0x16) => "Namespace Identifier Unavailable",
            (1, 0x18) => "Namespace Already Attached",
            (1, 0x19) => "Namespace Is Private",
            (1, 0x1a) => "Namespace Not Attached",
            (1, 0x1b) => "Thin Provisioning Not Supported",
            (1, 0x1c) => "Controller List Invalid",
            (1, 0x1d) => "Device Self-test In Progress",
            (1, 0x1e) => "Boot Partition Write Prohibited",
            (1, 0x1f) => "Invalid Controller Identifier",
            (1, 0x20) => "Invalid Secondary Controller State",
            (1, 0x21) => "Invalid Number of Controller Resources",
            (1, 0x22) => "Invalid Resource Identifier",
            (1, 0x23) => "Sanitize Prohibited While Persistent Memory Region is Enabled",
            (1, 0x24) => "ANA Group Identifier Invalid",
            (1, 0x25) => "ANA Attach Failed",
            (1, 0x80) => "Conflicting Attributes",
            (1, 0x81) => "Invalid Protection Information",
            (1, 0x82) => "Attempted Write to Read Only Range",
            (2, 0x80) => "Write Fault",
            (2, 0x81) => "Unrecovered Read Error",
            (2, 0x82) => "End-to-end Guard Check Error",
            (2, 0x83) => "End-to-end Application Tag Check Error",
            (2, 0x84) => "End-to-end Reference Tag Check Error",
            (2, 0x85) => "Compare Failure",
            (2, 0x86) => "Access Denied",
            (2, 0x87) => "Deallocated or Unwritten Logical Block",
            (3, 0x00) => "Internal Path Error",
            (3, 0x01) => "Asymmetric Access Persistent Loss",
            (3, 0x02) => "Asymmetric Access Inaccessible",
            (3, 0x03) => "Asymmetric Access Transition",
            (3, 0x60) => "Controller Pathing Error",
            (3, 0x70) => "Host Pathing Error",
            (3, 0x71) => "Command Aborted By Host",
            (7, _) => "Vendor Specific",
            _ => "Unknown Status",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (SCT {:#x}, SC {:#04x}",
            self.name(),
            self.sct,
            self.sc
        )?;
        if self.dnr {
            f.write_str(", do not retry")?;
        }
        f.write_str(")")
    }
}

/// The fields we use from the Identify Controller data structure (§5.15.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentifyController {
    pub serial: String,
    pub model: String,
    pub firmware: String,
    /// Maximum Data Transfer Size as a power of two of CAP.MPSMIN pages (0: no limit).
    pub mdts: u8,
    pub controller_id: u16,
    /// Number of Namespaces (the largest valid NSID).
    pub namespaces: u32,
}

impl IdentifyController {
    pub fn parse(data: &[u8]) -> Option<IdentifyController> {
        if data.len() < 4096 {
            return None;
        }
        Some(IdentifyController {
            serial: ascii(&data[4..24]),
            model: ascii(&data[24..64]),
            firmware: ascii(&data[64..72]),
            mdts: data[77],
            controller_id: u16::from_le_bytes([data[78], data[79]]),
            namespaces: u32::from_le_bytes([data[516], data[517], data[518], data[519]]),
        })
    }

    /// The largest transfer in bytes, given CAP.MPSMIN (`None`: no limit).
    pub fn max_transfer(&self, page_min: u64) -> Option<u64> {
        (self.mdts != 0).then(|| page_min << self.mdts.min(40))
    }
}

/// The fields we use from the Identify Namespace data structure (§5.15.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentifyNamespace {
    /// Namespace Size, in logical blocks.
    pub size_blocks: u64,
    /// Logical block size in bytes, from the LBA format FLBAS selects.
    pub lba_size: u32,
    /// Metadata bytes per block in that format (we need 0).
    pub metadata_size: u16,
}

impl IdentifyNamespace {
    pub fn parse(data: &[u8]) -> Option<IdentifyNamespace> {
        if data.len() < 4096 {
            return None;
        }
        let size_blocks = u64::from_le_bytes(data[0..8].try_into().ok()?);
        let nlbaf = data[25];
        let flbas = data[26];
        // FLBAS bits 3:0 select the format; bits 6:5 are its upper bits when NLBAF > 16.
        let mut index = usize::from(flbas & 0x0f);
        if nlbaf >= 16 {
            index |= usize::from((flbas >> 5) & 0x3) << 4;
        }
        let at = 128 + 4 * index;
        let lbaf = u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?);
        let lbads = (lbaf >> 16) & 0xff;
        if !(9..=16).contains(&lbads) {
            return None;
        }
        Some(IdentifyNamespace {
            size_blocks,
            lba_size: 1 << lbads,
            metadata_size: (lbaf & 0xffff) as u16,
        })
    }
}

fn ascii(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim_matches(|c: char| c == ' ' || c == '\0')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_decodes_qemu_values() {
        // QEMU's NVMe: MQES 2047, CQR, TO 15 (7.5 s), DSTRD 0, CSS NVM, MPSMIN 0, MPSMAX 4.
        let raw: u64 = 0x7ff | (1 << 16) | (0x0f << 24) | (1 << 37) | (4 << 52);
        let cap = Cap::from_raw(raw);
        assert_eq!(cap.max_queue_entries, 2048);
        assert!(cap.contiguous_queues_required);
        assert_eq!(cap.timeout_ms, 7500);
        assert_eq!(cap.doorbell_stride, 4);
        assert!(cap.nvm_command_set);
        assert_eq!(cap.page_min, 4096);
        assert_eq!(cap.page_max, 65536);
    }

    #[test]
    fn doorbells_follow_the_stride() {
        let cap = Cap::from_raw(1 << 37);
        assert_eq!(cap.sq_tail_doorbell(0), 0x1000);
        assert_eq!(cap.cq_head_doorbell(0), 0x1004);
        assert_eq!(cap.sq_tail_doorbell(1), 0x1008);
        assert_eq!(cap.cq_head_doorbell(3), 0x101c);
        let wide = Cap::from_raw((1 << 37) | (2u64 << 32)); // 16-byte stride
        assert_eq!(wide.sq_tail_doorbell(1), 0x1020);
        assert_eq!(wide.cq_head_doorbell(1), 0x1030);
    }

    #[test]
    fn cc_sets_entry_sizes_and_enable() {
        assert_eq!(cc::value(false), 0x0046_0000);
        assert_eq!(cc::value(true), 0x0046_0001);
    }

    #[test]
    fn entries_have_the_spec_layout() {
        let e = SubmissionEntry::read_write(nvm::READ, 7, 1, 0x1_2345_6789, 8, 0x10000, 0x11000);
        assert_eq!(e.opcode(), 0x02);
        assert_eq!(e.cid(), 7);
        assert_eq!(e.cdw10, 0x2345_6789);
        assert_eq!(e.cdw11, 0x1);
        assert_eq!(e.cdw12, 7, "NLB is 0-based");
        assert_eq!(std::mem::offset_of!(SubmissionEntry, prp1), 24);
        assert_eq!(std::mem::offset_of!(SubmissionEntry, prp2), 32);
        assert_eq!(std::mem::offset_of!(SubmissionEntry, cdw10), 40);
        assert_eq!(
            std::mem::offset_of!(CompletionEntry, status),
            CQE_STATUS_OFFSET
        );
        assert_eq!(std::mem::offset_of!(CompletionEntry, cid), 12);
        let q = SubmissionEntry::create_io_sq(1, 3, 64, 3, 0x20000);
        assert_eq!(q.cdw10, (63 << 16) | 3);
        assert_eq!(q.cdw11, (3 << 16) | 1);
        let n = SubmissionEntry::set_number_of_queues(2, 4, 4);
        assert_eq!(n.cdw11, 0x0003_0003);
    }

    #[test]
    fn status_names_come_from_the_spec() {
        // Phase 1, SCT 0, SC 0x80, DNR: LBA Out of Range.
        let word: u16 = 1 | (0x80 << 1) | (1 << 15);
        let s = Status::from_field(word);
        assert_eq!((s.sct, s.sc, s.dnr), (0, 0x80, true));
        assert_eq!(
            s.to_string(),
            "LBA Out of Range (SCT 0x0, SC 0x80, do not retry)"
        );
        let s = Status::from_field((0x0b << 1) | (1 << 15));
        assert_eq!(s.name(), "Invalid Namespace or Format");
        let s = Status::from_field((2 << 9) | (0x81 << 1));
        assert_eq!(s.name(), "Unrecovered Read Error");
        assert_eq!(s.status_type(), StatusType::MediaAndDataIntegrity);
        let s = Status::from_field((1 << 9) | (0x01 << 1));
        assert_eq!(s.name(), "Invalid Queue Identifier");
        assert!(Status::from_field(1).is_success());
        assert_eq!(Status::from_field(0x3f << 1).name(), "Unknown Status");
    }

    #[test]
    fn identify_controller_fields() {
        let mut d = vec![0u8; 4096];
        d[4..12].copy_from_slice(b"serial01");
        d[24..35].copy_from_slice(b"QEMU NVMe C");
        d[64..72].copy_from_slice(b"8.0.0   ");
        d[77] = 7;
        d[516..520].copy_from_slice(&256u32.to_le_bytes());
        let c = IdentifyController::parse(&d).unwrap();
        assert_eq!(c.serial, "serial01");
        assert_eq!(c.model, "QEMU NVMe C");
        assert_eq!(c.firmware, "8.0.0");
        assert_eq!(c.namespaces, 256);
        assert_eq!(c.max_transfer(4096), Some(512 << 10));
        assert!(IdentifyController::parse(&d[..100]).is_none());
    }

    #[test]
    fn identify_namespace_picks_the_formatted_lba_size() {
        let mut d = vec![0u8; 4096];
        d[0..8].copy_from_slice(&524_288u64.to_le_bytes());
        d[25] = 1; // two formats
        d[26] = 1; // using format 1
        d[128..132].copy_from_slice(&(9u32 << 16).to_le_bytes());
        d[132..136].copy_from_slice(&(12u32 << 16).to_le_bytes());
        let n = IdentifyNamespace::parse(&d).unwrap();
        assert_eq!(n.size_blocks, 524_288);
        assert_eq!(n.lba_size, 4096);
        assert_eq!(n.metadata_size, 0);
        d[132..136].copy_from_slice(&0u32.to_le_bytes());
        assert!(
            IdentifyNamespace::parse(&d).is_none(),
            "LBADS 0 is not a format"
        );
    }
}
