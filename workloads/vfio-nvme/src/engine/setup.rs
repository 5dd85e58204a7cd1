//! Bring-up before the I/O: VFIO opened, the controller identified, the per-thread I/O
//! settings checked against the namespace, and the DMA memory the queues need.

use super::io_loop::IoConfig;
use super::Located;
use crate::error::Error;
use crate::mem::DmaBuffer;
use crate::mmio::Bar;
use crate::nvme::controller::Controller;
use crate::nvme::spec::{IdentifyController, IdentifyNamespace, CTRL_PAGE};
use crate::params::{Pattern, Target};
use crate::report::{DeviceInfo, MapCost};
use crate::vfio::Vfio;
use std::time::Instant;

#[derive(Debug, Clone, Copy)]
pub(super) struct IoSpec {
    pub(super) pattern: Pattern,
    pub(super) block_size: u32,
    pub(super) queue_depth: u16,
    pub(super) verify: bool,
    pub(super) seed: u64,
}

/// The controller up and identified, with the memory for queues.
pub(super) struct Bringup {
    ident: IdentifyController,
    ns: IdentifyNamespace,
    version: String,
}

pub(super) fn identify(ctrl: &mut Controller<'_>, target: &Target) -> Result<Bringup, Error> {
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

pub(super) fn device_info(
    loc: &Located,
    vfio: &Vfio,
    ctrl: &Controller<'_>,
    b: &Bringup,
    nsid: u32,
) -> DeviceInfo {
    DeviceInfo {
        pci_address: loc.pci,
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

pub(super) fn io_config(
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

pub(super) fn round_page(n: u64) -> u64 {
    n.div_ceil(CTRL_PAGE) * CTRL_PAGE
}

/// Bytes of 4 KiB "queues" memory: admin SQ, admin CQ, identify page, and per thread an SQ, a
/// CQ and the PRP list pages of its slots.
pub(super) fn queue_memory(
    threads: u16,
    entries: u16,
    slots: u64,
    list_pages_per_slot: usize,
) -> u64 {
    let sq = round_page(u64::from(entries) * 64);
    let cq = round_page(u64::from(entries) * 16);
    let lists = slots * list_pages_per_slot as u64 * CTRL_PAGE;
    3 * CTRL_PAGE + u64::from(threads) * (sq + cq + lists)
}

/// Opens VFIO and maps BAR0, timing the open.
pub(super) fn open(loc: &Located, target: &Target) -> Result<(Vfio, Bar, u64), Error> {
    let start = Instant::now();
    let vfio = Vfio::open(
        &loc.sys_root,
        &loc.dev_root,
        &loc.pci.to_string(),
        loc.group,
        target.backend,
    )?;
    let open_ns = start.elapsed().as_nanos() as u64;
    vfio.device.enable_bus_master()?;
    let bar = vfio.device.map_bar0()?;
    Ok((vfio, bar, open_ns))
}

pub(super) fn map_cost(what: &str, buf: &DmaBuffer<'_>) -> MapCost {
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
