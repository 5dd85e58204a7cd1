//! VFIO: the legacy container/group interface with the type1 IOMMU, and iommufd with the VFIO
//! device cdev where the kernel has them. RAII throughout: file descriptors close in `Drop`, DMA
//! mappings are undone by [`crate::mem::DmaBuffer`]'s `Drop`.

use crate::error::Error;
use crate::iova::{IovaRange, FALLBACK_RANGES};
use crate::mmio::Bar;
use crate::params::Backend;
use crate::sys::{self, argsz, ioctl_ptr, ioctl_val};
pub use iommutop_vfio_nvme_results::IommuInfo;
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use vfio_bindings::bindings::vfio as b;

/// The container (`/dev/vfio/vfio`).
#[derive(Debug)]
pub struct Container {
    fd: OwnedFd,
}

/// A VFIO group (`/dev/vfio/N`), attached to a container.
#[derive(Debug)]
pub struct Group {
    fd: OwnedFd,
    number: u32,
}

/// An iommufd context (`/dev/iommu`) with one IO address space.
#[derive(Debug)]
pub struct Iommufd {
    fd: OwnedFd,
    ioas: u32,
}

/// The IOMMU side: maps and unmaps DMA.
#[derive(Debug)]
pub enum Iommu {
    /// Fields drop in order: the group leaves the container before the container closes.
    Type1 {
        group: Group,
        container: Container,
    },
    Iommufd(Iommufd),
}

/// An opened VFIO device and its IOMMU. Fields drop in order: device first.
#[derive(Debug)]
pub struct Vfio {
    pub device: Device,
    pub iommu: Iommu,
    pub info: IommuInfo,
}

/// A VFIO device file descriptor.
#[derive(Debug)]
pub struct Device {
    file: File,
}

fn open_rw(path: &Path) -> Result<File, Error> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| Error::file(path, e))
}

fn sys_err(what: impl Into<String>, source: io::Error, hint: &str) -> Error {
    Error::Sys {
        what: what.into(),
        source,
        hint: hint.to_string(),
    }
}

impl Container {
    pub fn open(dev: &Path) -> Result<Container, Error> {
        let path = dev.join("vfio/vfio");
        let fd: OwnedFd = open_rw(&path)?.into();
        let version = ioctl_val(fd.as_fd(), sys::VFIO_GET_API_VERSION, 0)
            .map_err(|e| sys_err("VFIO_GET_API_VERSION", e, ""))?;
        if version != b::VFIO_API_VERSION as i32 {
            return Err(Error::Vfio(format!(
                "{} speaks VFIO API version {version}, this tool version {}",
                path.display(),
                b::VFIO_API_VERSION
            )));
        }
        Ok(Container { fd })
    }

    fn has_extension(&self, ext: u32) -> bool {
        ioctl_val(
            self.fd.as_fd(),
            sys::VFIO_CHECK_EXTENSION,
            libc::c_ulong::from(ext),
        )
        .map(|r| r > 0)
        .unwrap_or(false)
    }

    fn type1_info(&self) -> Result<(Vec<IovaRange>, bool, u64), Error> {
        // First call learns the size with the capability chain; the second fills it.
        let mut info = b::vfio_iommu_type1_info {
            argsz: argsz::<b::vfio_iommu_type1_info>(),
            ..Default::default()
        };
        // SAFETY: VFIO_IOMMU_GET_INFO writes at most `argsz` bytes into the struct we pass.
        unsafe { ioctl_ptr(self.fd.as_fd(), sys::VFIO_IOMMU_GET_INFO, &mut info) }
            .map_err(|e| sys_err("VFIO_IOMMU_GET_INFO", e, ""))?;
        let pgsizes = info.iova_pgsizes;
        if info.flags & b::VFIO_IOMMU_INFO_CAPS == 0
            || info.argsz as usize <= std::mem::size_of_val(&info)
        {
            return Ok((FALLBACK_RANGES.to_vec(), true, pgsizes));
        }
        let len = info.argsz as usize;
        let mut buf = vec![0u64; len.div_ceil(8)];
        let words = buf.as_mut_ptr();
        // SAFETY: `buf` is at least `len` bytes and 8-byte aligned, as the struct needs; we
        // write its leading `argsz` field.
        unsafe { words.cast::<u32>().write(info.argsz) };
        // SAFETY: the kernel writes at most `argsz` = `len` bytes, which `buf` holds.
        unsafe { ioctl_ptr(self.fd.as_fd(), sys::VFIO_IOMMU_GET_INFO, words) }
            .map_err(|e| sys_err("VFIO_IOMMU_GET_INFO (with capabilities)", e, ""))?;
        let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).take(len).collect();
        match parse_type1_iova_ranges(&bytes) {
            Some(ranges) if !ranges.is_empty() => Ok((ranges, false, pgsizes)),
            _ => Ok((FALLBACK_RANGES.to_vec(), true, pgsizes)),
        }
    }
}

/// The IOVA ranges in a `vfio_iommu_type1_info` with its capability chain (the whole buffer the
/// kernel filled). `None` if there is no IOVA-range capability or the chain is malformed.
pub fn parse_type1_iova_ranges(info: &[u8]) -> Option<Vec<IovaRange>> {
    let u16_at = |o: usize| info.get(o..o + 2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        info.get(o..o + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| {
        info.get(o..o + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_ne_bytes)
    };
    let flags = u32_at(4)?;
    if flags & b::VFIO_IOMMU_INFO_CAPS == 0 {
        return None;
    }
    let mut offset = u32_at(16)? as usize;
    // Each hop must move forward: a malformed chain cannot loop.
    let mut last = 0usize;
    while offset != 0 && offset > last {
        let id = u16_at(offset)?;
        let next = u32_at(offset + 4)? as usize;
        if u32::from(id) == b::VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE {
            let count = u32_at(offset + 8)? as usize;
            let mut ranges = Vec::with_capacity(count.min(64));
            for i in 0..count {
                let at = offset + 16 + 16 * i;
                ranges.push(IovaRange {
                    start: u64_at(at)?,
                    last: u64_at(at + 8)?,
                });
            }
            return Some(ranges);
        }
        last = offset;
        offset = next;
    }
    None
}

impl Group {
    pub fn open(dev: &Path, number: u32) -> Result<Group, Error> {
        let path = dev.join(format!("vfio/{number}"));
        let fd: OwnedFd = open_rw(&path)?.into();
        let mut status = b::vfio_group_status {
            argsz: argsz::<b::vfio_group_status>(),
            flags: 0,
        };
        // SAFETY: VFIO_GROUP_GET_STATUS fills a vfio_group_status of `argsz` bytes.
        unsafe { ioctl_ptr(fd.as_fd(), sys::VFIO_GROUP_GET_STATUS, &mut status) }
            .map_err(|e| sys_err("VFIO_GROUP_GET_STATUS", e, ""))?;
        if status.flags & b::VFIO_GROUP_FLAGS_VIABLE == 0 {
            return Err(Error::Vfio(format!(
                "IOMMU group {number} is not viable: every device in /sys/kernel/iommu_groups/{number}/devices must be bound to vfio-pci or to no driver"
            )));
        }
        Ok(Group { fd, number })
    }

    pub fn number(&self) -> u32 {
        self.number
    }

    fn set_container(&self, container: &Container) -> Result<(), Error> {
        let mut cfd: i32 = container.fd.as_raw_fd();
        // SAFETY: VFIO_GROUP_SET_CONTAINER reads one int, the container's fd.
        unsafe { ioctl_ptr(self.fd.as_fd(), sys::VFIO_GROUP_SET_CONTAINER, &mut cfd) }
            .map_err(|e| sys_err("VFIO_GROUP_SET_CONTAINER", e, ""))?;
        Ok(())
    }

    fn device(&self, pci: &str) -> Result<Device, Error> {
        let name =
            CString::new(pci).map_err(|_| Error::Vfio(format!("bad PCI address {pci:?}")))?;
        // SAFETY: VFIO_GROUP_GET_DEVICE_FD reads a NUL-terminated string, which `name` is and
        // which outlives the call.
        let fd = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                sys::VFIO_GROUP_GET_DEVICE_FD,
                name.as_ptr(),
            )
        };
        if fd < 0 {
            return Err(Error::last_os(
                format!("VFIO_GROUP_GET_DEVICE_FD {pci}"),
                " (is the device bound to vfio-pci?)",
            ));
        }
        // SAFETY: the kernel returned a new file descriptor that nothing else owns.
        let owned = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        Ok(Device {
            file: File::from(owned),
        })
    }
}

impl Iommufd {
    fn open(dev: &Path) -> Result<Iommufd, Error> {
        let path = dev.join("iommu");
        let fd: OwnedFd = open_rw(&path)?.into();
        let mut alloc = sys::IommuIoasAlloc {
            size: argsz::<sys::IommuIoasAlloc>(),
            ..Default::default()
        };
        // SAFETY: IOMMU_IOAS_ALLOC fills a struct iommu_ioas_alloc of `size` bytes.
        unsafe { ioctl_ptr(fd.as_fd(), sys::IOMMU_IOAS_ALLOC, &mut alloc) }
            .map_err(|e| sys_err("IOMMU_IOAS_ALLOC", e, ""))?;
        Ok(Iommufd {
            fd,
            ioas: alloc.out_ioas_id,
        })
    }

    fn ranges(&self) -> Result<Vec<IovaRange>, Error> {
        let mut ranges = vec![sys::IommuIovaRange::default(); 16];
        let mut req = sys::IommuIoasIovaRanges {
            size: argsz::<sys::IommuIoasIovaRanges>(),
            ioas_id: self.ioas,
            num_iovas: ranges.len() as u32,
            allowed_iovas: ranges.as_mut_ptr() as u64,
            ..Default::default()
        };
        // SAFETY: the kernel writes at most `num_iovas` ranges to `allowed_iovas`, which points
        // at that many; the struct itself is `size` bytes.
        let first = unsafe { ioctl_ptr(self.fd.as_fd(), sys::IOMMU_IOAS_IOVA_RANGES, &mut req) };
        if let Err(e) = first {
            if e.raw_os_error() != Some(libc::EMSGSIZE) {
                return Err(sys_err("IOMMU_IOAS_IOVA_RANGES", e, ""));
            }
            ranges = vec![sys::IommuIovaRange::default(); req.num_iovas as usize];
            req.allowed_iovas = ranges.as_mut_ptr() as u64;
            // SAFETY: as above, with the array resized to the count the kernel asked for.
            unsafe { ioctl_ptr(self.fd.as_fd(), sys::IOMMU_IOAS_IOVA_RANGES, &mut req) }
                .map_err(|e| sys_err("IOMMU_IOAS_IOVA_RANGES", e, ""))?;
        }
        ranges.truncate(req.num_iovas as usize);
        Ok(ranges
            .iter()
            .map(|r| IovaRange {
                start: r.start,
                last: r.last,
            })
            .collect())
    }
}

impl Iommu {
    /// Maps `size` bytes at `vaddr` to `iova`, readable and writable by the device.
    pub fn map(&self, vaddr: u64, iova: u64, size: u64) -> Result<(), Error> {
        let hint = " (RLIMIT_MEMLOCK too low? run as root or raise `ulimit -l`)";
        match self {
            Iommu::Type1 { container, .. } => {
                let mut map = b::vfio_iommu_type1_dma_map {
                    argsz: argsz::<b::vfio_iommu_type1_dma_map>(),
                    flags: b::VFIO_DMA_MAP_FLAG_READ | b::VFIO_DMA_MAP_FLAG_WRITE,
                    vaddr,
                    iova,
                    size,
                };
                // SAFETY: VFIO_IOMMU_MAP_DMA reads a vfio_iommu_type1_dma_map; the kernel pins
                // and checks the user range itself.
                unsafe { ioctl_ptr(container.fd.as_fd(), sys::VFIO_IOMMU_MAP_DMA, &mut map) }
                    .map_err(|e| {
                        sys_err(
                            format!("VFIO_IOMMU_MAP_DMA of {size} bytes at IOVA {iova:#x}"),
                            e,
                            hint,
                        )
                    })?;
            }
            Iommu::Iommufd(fd) => {
                let mut map = sys::IommuIoasMap {
                    size: argsz::<sys::IommuIoasMap>(),
                    flags: sys::IOMMU_IOAS_MAP_FIXED_IOVA
                        | sys::IOMMU_IOAS_MAP_READABLE
                        | sys::IOMMU_IOAS_MAP_WRITEABLE,
                    ioas_id: fd.ioas,
                    user_va: vaddr,
                    length: size,
                    iova,
                    ..Default::default()
                };
                // SAFETY: IOMMU_IOAS_MAP reads a struct iommu_ioas_map of `size` bytes.
                unsafe { ioctl_ptr(fd.fd.as_fd(), sys::IOMMU_IOAS_MAP, &mut map) }.map_err(
                    |e| {
                        sys_err(
                            format!("IOMMU_IOAS_MAP of {size} bytes at IOVA {iova:#x}"),
                            e,
                            hint,
                        )
                    },
                )?;
            }
        }
        Ok(())
    }

    pub fn unmap(&self, iova: u64, size: u64) -> Result<(), Error> {
        match self {
            Iommu::Type1 { container, .. } => {
                let mut unmap = b::vfio_iommu_type1_dma_unmap {
                    argsz: argsz::<b::vfio_iommu_type1_dma_unmap>(),
                    flags: 0,
                    iova,
                    size,
                    data: Default::default(),
                };
                // SAFETY: VFIO_IOMMU_UNMAP_DMA reads and updates a vfio_iommu_type1_dma_unmap
                // (no flags, so no trailing data).
                unsafe { ioctl_ptr(container.fd.as_fd(), sys::VFIO_IOMMU_UNMAP_DMA, &mut unmap) }
                    .map_err(|e| sys_err(format!("VFIO_IOMMU_UNMAP_DMA at IOVA {iova:#x}"), e, ""))?;
            }
            Iommu::Iommufd(fd) => {
                let mut unmap = sys::IommuIoasUnmap {
                    size: argsz::<sys::IommuIoasUnmap>(),
                    ioas_id: fd.ioas,
                    iova,
                    length: size,
                };
                // SAFETY: IOMMU_IOAS_UNMAP reads and updates a struct iommu_ioas_unmap.
                unsafe { ioctl_ptr(fd.fd.as_fd(), sys::IOMMU_IOAS_UNMAP, &mut unmap) }
                    .map_err(|e| sys_err(format!("IOMMU_IOAS_UNMAP at IOVA {iova:#x}"), e, ""))?;
            }
        }
        Ok(())
    }
}

/// The VFIO device cdev of a PCI device (`/dev/vfio/devices/vfioN`), if the kernel has one.
fn device_cdev(sys_root: &Path, dev: &Path, pci: &str) -> Option<PathBuf> {
    let dir = sys_root.join(format!("bus/pci/devices/{pci}/vfio-dev"));
    let name = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("vfio"))?;
    let path = dev.join("vfio/devices").join(name);
    path.exists().then_some(path)
}

/// Whether `backend` resolves to iommufd on this host.
pub fn use_iommufd(backend: Backend, sys_root: &Path, dev: &Path, pci: &str) -> bool {
    match backend {
        Backend::Legacy => false,
        Backend::Iommufd => true,
        Backend::Auto => dev.join("iommu").exists() && device_cdev(sys_root, dev, pci).is_some(),
    }
}

impl Vfio {
    /// Opens `pci` (bound to vfio-pci, in IOMMU group `group`) through `backend`.
    pub fn open(
        sys_root: &Path,
        dev: &Path,
        pci: &str,
        group: u32,
        backend: Backend,
    ) -> Result<Vfio, Error> {
        if use_iommufd(backend, sys_root, dev, pci) {
            Vfio::open_iommufd(sys_root, dev, pci)
        } else {
            Vfio::open_type1(dev, pci, group)
        }
    }

    fn open_type1(dev: &Path, pci: &str, group_number: u32) -> Result<Vfio, Error> {
        let container = Container::open(dev)?;
        let (kind, name) = if container.has_extension(b::VFIO_TYPE1v2_IOMMU) {
            (b::VFIO_TYPE1v2_IOMMU, "legacy-type1v2")
        } else if container.has_extension(b::VFIO_TYPE1_IOMMU) {
            (b::VFIO_TYPE1_IOMMU, "legacy-type1")
        } else {
            return Err(Error::Vfio(
                "the VFIO container offers no type1 IOMMU: load vfio_iommu_type1 (modprobe vfio_iommu_type1)".into(),
            ));
        };
        let group = Group::open(dev, group_number)?;
        group.set_container(&container)?;
        ioctl_val(
            container.fd.as_fd(),
            sys::VFIO_SET_IOMMU,
            libc::c_ulong::from(kind),
        )
        .map_err(|e| {
            sys_err(
                "VFIO_SET_IOMMU",
                e,
                " (is the IOMMU enabled? intel_iommu=on)",
            )
        })?;
        let (iova_ranges, ranges_assumed, iova_pgsizes) = container.type1_info()?;
        let device = group.device(pci)?;
        Ok(Vfio {
            device,
            iommu: Iommu::Type1 { group, container },
            info: IommuInfo {
                backend: name.to_string(),
                iova_ranges,
                ranges_assumed,
                iova_pgsizes,
            },
        })
    }

    fn open_iommufd(sys_root: &Path, dev: &Path, pci: &str) -> Result<Vfio, Error> {
        let cdev = device_cdev(sys_root, dev, pci).ok_or_else(|| {
            Error::Vfio(format!(
                "{pci} has no VFIO device cdev (/sys/bus/pci/devices/{pci}/vfio-dev): the kernel lacks CONFIG_VFIO_DEVICE_CDEV; use --backend legacy"
            ))
        })?;
        let file = open_rw(&cdev)?;
        let iommufd = Iommufd::open(dev)?;
        let mut bind = sys::VfioDeviceBindIommufd {
            argsz: argsz::<sys::VfioDeviceBindIommufd>(),
            iommufd: iommufd.fd.as_raw_fd(),
            ..Default::default()
        };
        // SAFETY: VFIO_DEVICE_BIND_IOMMUFD reads and updates `argsz` bytes of the struct.
        unsafe { ioctl_ptr(file.as_fd(), sys::VFIO_DEVICE_BIND_IOMMUFD, &mut bind) }
            .map_err(|e| sys_err("VFIO_DEVICE_BIND_IOMMUFD", e, ""))?;
        let mut attach = sys::VfioDeviceAttachIommufdPt {
            argsz: argsz::<sys::VfioDeviceAttachIommufdPt>(),
            flags: 0,
            pt_id: iommufd.ioas,
        };
        // SAFETY: VFIO_DEVICE_ATTACH_IOMMUFD_PT reads and updates `argsz` bytes of the struct.
        unsafe {
            ioctl_ptr(
                file.as_fd(),
                sys::VFIO_DEVICE_ATTACH_IOMMUFD_PT,
                &mut attach,
            )
        }
        .map_err(|e| sys_err("VFIO_DEVICE_ATTACH_IOMMUFD_PT", e, ""))?;
        let ranges = iommufd.ranges()?;
        let (iova_ranges, ranges_assumed) = if ranges.is_empty() {
            (FALLBACK_RANGES.to_vec(), true)
        } else {
            (ranges, false)
        };
        Ok(Vfio {
            device: Device { file },
            iommu: Iommu::Iommufd(iommufd),
            info: IommuInfo {
                backend: "iommufd".to_string(),
                iova_ranges,
                ranges_assumed,
                iova_pgsizes: 0,
            },
        })
    }
}

/// PCI command register bits (PCI Local Bus 3.0 §6.2.2).
const PCI_COMMAND: u64 = 0x04;
const PCI_COMMAND_MEMORY: u16 = 1 << 1;
const PCI_COMMAND_MASTER: u16 = 1 << 2;
const PCI_COMMAND_INTX_DISABLE: u16 = 1 << 10;

impl Device {
    fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    pub fn region_info(&self, index: u32) -> Result<b::vfio_region_info, Error> {
        let mut info = b::vfio_region_info {
            argsz: argsz::<b::vfio_region_info>(),
            index,
            ..Default::default()
        };
        // SAFETY: VFIO_DEVICE_GET_REGION_INFO fills `argsz` bytes of a vfio_region_info.
        unsafe { ioctl_ptr(self.fd(), sys::VFIO_DEVICE_GET_REGION_INFO, &mut info) }
            .map_err(|e| sys_err(format!("VFIO_DEVICE_GET_REGION_INFO {index}"), e, ""))?;
        Ok(info)
    }

    /// Maps BAR0 (the NVMe registers and doorbells).
    pub fn map_bar0(&self) -> Result<Bar, Error> {
        let info = self.region_info(b::VFIO_PCI_BAR0_REGION_INDEX)?;
        if info.size == 0 {
            return Err(Error::Vfio("BAR0 is empty".into()));
        }
        if info.flags & b::VFIO_REGION_INFO_FLAG_MMAP == 0 {
            return Err(Error::Vfio(
                "BAR0 cannot be mmap'ed through VFIO (MSI-X table inside it without interrupt remapping?)".into(),
            ));
        }
        Bar::map(self.fd(), info.offset, info.size)
    }

    /// Enables memory decoding and bus mastering (so the controller can DMA), INTx off (we poll).
    pub fn enable_bus_master(&self) -> Result<u16, Error> {
        let cfg = self.region_info(b::VFIO_PCI_CONFIG_REGION_INDEX)?;
        let mut word = [0u8; 2];
        self.file
            .read_exact_at(&mut word, cfg.offset + PCI_COMMAND)
            .map_err(|e| sys_err("reading the PCI command register", e, ""))?;
        let before = u16::from_le_bytes(word);
        let after = before | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER | PCI_COMMAND_INTX_DISABLE;
        self.file
            .write_all_at(&after.to_le_bytes(), cfg.offset + PCI_COMMAND)
            .map_err(|e| sys_err("writing the PCI command register", e, ""))?;
        Ok(before)
    }

    /// Function-level reset through VFIO, where the device supports one.
    pub fn reset(&self) -> Result<(), Error> {
        ioctl_val(self.fd(), sys::VFIO_DEVICE_RESET, 0)
            .map(|_| ())
            .map_err(|e| sys_err("VFIO_DEVICE_RESET", e, ""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info_with_caps(caps: &[u8], cap_offset: u32) -> Vec<u8> {
        let mut v = vec![0u8; 24];
        v[4..8].copy_from_slice(&b::VFIO_IOMMU_INFO_CAPS.to_ne_bytes());
        v[16..20].copy_from_slice(&cap_offset.to_ne_bytes());
        v.extend_from_slice(caps);
        let n = v.len() as u32;
        v[0..4].copy_from_slice(&n.to_ne_bytes());
        v
    }

    fn cap_header(id: u16, next: u32) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(&id.to_ne_bytes());
        h.extend_from_slice(&1u16.to_ne_bytes());
        h.extend_from_slice(&next.to_ne_bytes());
        h
    }

    #[test]
    fn iova_ranges_are_read_from_the_capability_chain() {
        // A migration capability (id 2) first, then the IOVA ranges: what VT-d at 39 bits gives.
        let mut caps = cap_header(2, 24 + 24);
        caps.extend_from_slice(&[0u8; 16]);
        caps.extend(cap_header(1, 0));
        caps.extend_from_slice(&2u32.to_ne_bytes());
        caps.extend_from_slice(&0u32.to_ne_bytes());
        for (s, l) in [(0u64, 0xfedf_ffffu64), (0xfef0_0000, (1 << 39) - 1)] {
            caps.extend_from_slice(&s.to_ne_bytes());
            caps.extend_from_slice(&l.to_ne_bytes());
        }
        let info = info_with_caps(&caps, 24);
        let ranges = parse_type1_iova_ranges(&info).unwrap();
        assert_eq!(
            ranges,
            vec![
                IovaRange {
                    start: 0,
                    last: 0xfedf_ffff
                },
                IovaRange {
                    start: 0xfef0_0000,
                    last: (1 << 39) - 1
                }
            ]
        );
    }

    #[test]
    fn malformed_chains_yield_nothing() {
        // No caps flag.
        assert!(parse_type1_iova_ranges(&[0u8; 24]).is_none());
        // A cap pointing at itself.
        let caps = cap_header(2, 24);
        assert!(parse_type1_iova_ranges(&info_with_caps(&caps, 24)).is_none());
        // A range count past the end of the buffer.
        let mut caps = cap_header(1, 0);
        caps.extend_from_slice(&9u32.to_ne_bytes());
        caps.extend_from_slice(&0u32.to_ne_bytes());
        assert!(parse_type1_iova_ranges(&info_with_caps(&caps, 24)).is_none());
    }
}
