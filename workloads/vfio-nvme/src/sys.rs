//! ioctl numbers and the few iommufd structs `vfio-bindings` lacks.
//!
//! VFIO's structs and constants come from rust-vmm's `vfio-bindings` (bindgen output of
//! linux/vfio.h). The request numbers are macros there (`_IO(VFIO_TYPE, VFIO_BASE + n)`), which
//! bindgen cannot translate, so they are computed here the way include/uapi/asm-generic/ioctl.h
//! does. linux/iommufd.h is not in `vfio-bindings`: its structs are below, with size assertions.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use vfio_bindings::bindings::vfio::{VFIO_BASE, VFIO_TYPE};

const IOC_TYPESHIFT: u32 = 8;
const IOC_NRMASK: u32 = 0xff;

/// `_IO(type, nr)` = `_IOC(_IOC_NONE, type, nr, 0)`: direction and size are 0, as VFIO and
/// iommufd declare all their requests (the argument's size travels in its own `argsz`/`size`
/// field), so only the type and number bits are set.
pub const fn io(ty: u8, nr: u32) -> libc::Ioctl {
    (((ty as u32) << IOC_TYPESHIFT) | (nr & IOC_NRMASK)) as libc::Ioctl
}

const fn vfio(offset: u32) -> libc::Ioctl {
    io(VFIO_TYPE, VFIO_BASE + offset)
}

// linux/vfio.h
pub const VFIO_GET_API_VERSION: libc::Ioctl = vfio(0);
pub const VFIO_CHECK_EXTENSION: libc::Ioctl = vfio(1);
pub const VFIO_SET_IOMMU: libc::Ioctl = vfio(2);
pub const VFIO_GROUP_GET_STATUS: libc::Ioctl = vfio(3);
pub const VFIO_GROUP_SET_CONTAINER: libc::Ioctl = vfio(4);
pub const VFIO_GROUP_GET_DEVICE_FD: libc::Ioctl = vfio(6);
pub const VFIO_DEVICE_GET_INFO: libc::Ioctl = vfio(7);
pub const VFIO_DEVICE_GET_REGION_INFO: libc::Ioctl = vfio(8);
pub const VFIO_DEVICE_RESET: libc::Ioctl = vfio(11);
pub const VFIO_IOMMU_GET_INFO: libc::Ioctl = vfio(12);
pub const VFIO_IOMMU_MAP_DMA: libc::Ioctl = vfio(13);
pub const VFIO_IOMMU_UNMAP_DMA: libc::Ioctl = vfio(14);
pub const VFIO_DEVICE_BIND_IOMMUFD: libc::Ioctl = vfio(18);
pub const VFIO_DEVICE_ATTACH_IOMMUFD_PT: libc::Ioctl = vfio(19);

// linux/iommufd.h: IOMMUFD_TYPE is ';' like VFIO_TYPE, commands start at 0x80.
const IOMMUFD_TYPE: u8 = b';';
const IOMMUFD_CMD_BASE: u32 = 0x80;
pub const IOMMU_IOAS_ALLOC: libc::Ioctl = io(IOMMUFD_TYPE, IOMMUFD_CMD_BASE + 1);
pub const IOMMU_IOAS_IOVA_RANGES: libc::Ioctl = io(IOMMUFD_TYPE, IOMMUFD_CMD_BASE + 4);
pub const IOMMU_IOAS_MAP: libc::Ioctl = io(IOMMUFD_TYPE, IOMMUFD_CMD_BASE + 5);
pub const IOMMU_IOAS_UNMAP: libc::Ioctl = io(IOMMUFD_TYPE, IOMMUFD_CMD_BASE + 6);

/// `struct iommu_ioas_alloc` (linux/iommufd.h).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IommuIoasAlloc {
    pub size: u32,
    pub flags: u32,
    pub out_ioas_id: u32,
}
const _: () = assert!(std::mem::size_of::<IommuIoasAlloc>() == 12);

/// `struct iommu_iova_range`: `last` is inclusive.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IommuIovaRange {
    pub start: u64,
    pub last: u64,
}
const _: () = assert!(std::mem::size_of::<IommuIovaRange>() == 16);

/// `struct iommu_ioas_iova_ranges`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IommuIoasIovaRanges {
    pub size: u32,
    pub ioas_id: u32,
    pub num_iovas: u32,
    pub reserved: u32,
    pub allowed_iovas: u64,
    pub out_iova_alignment: u64,
}
const _: () = assert!(std::mem::size_of::<IommuIoasIovaRanges>() == 32);

pub const IOMMU_IOAS_MAP_FIXED_IOVA: u32 = 1 << 0;
pub const IOMMU_IOAS_MAP_WRITEABLE: u32 = 1 << 1;
pub const IOMMU_IOAS_MAP_READABLE: u32 = 1 << 2;

/// `struct iommu_ioas_map`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IommuIoasMap {
    pub size: u32,
    pub flags: u32,
    pub ioas_id: u32,
    pub reserved: u32,
    pub user_va: u64,
    pub length: u64,
    pub iova: u64,
}
const _: () = assert!(std::mem::size_of::<IommuIoasMap>() == 40);

/// `struct iommu_ioas_unmap`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct IommuIoasUnmap {
    pub size: u32,
    pub ioas_id: u32,
    pub iova: u64,
    pub length: u64,
}
const _: () = assert!(std::mem::size_of::<IommuIoasUnmap>() == 24);

/// `struct vfio_device_bind_iommufd` up to `out_devid`, the size every kernel with the cdev
/// accepts (6.17 appended `token_uuid_ptr`, which we do not use).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct VfioDeviceBindIommufd {
    pub argsz: u32,
    pub flags: u32,
    pub iommufd: i32,
    pub out_devid: u32,
}
const _: () = assert!(std::mem::size_of::<VfioDeviceBindIommufd>() == 16);

/// `struct vfio_device_attach_iommufd_pt` up to `pt_id` (6.13 appended `pasid`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct VfioDeviceAttachIommufdPt {
    pub argsz: u32,
    pub flags: u32,
    pub pt_id: u32,
}
const _: () = assert!(std::mem::size_of::<VfioDeviceAttachIommufdPt>() == 12);

/// The size of `T` as the `u32` the kernel's `argsz`/`size` fields want.
pub const fn argsz<T>() -> u32 {
    std::mem::size_of::<T>() as u32
}

/// `ioctl(fd, request, arg)` with a pointer argument.
///
/// # Safety
/// `request` must be an ioctl that reads and writes at most the bytes of `*arg` (VFIO and
/// iommufd bound that by the `argsz`/`size` field the caller filled in), and any pointers inside
/// `*arg` must be valid for what the request does with them.
pub unsafe fn ioctl_ptr<T>(
    fd: BorrowedFd<'_>,
    request: libc::Ioctl,
    arg: *mut T,
) -> io::Result<i32> {
    // SAFETY: the caller guarantees `arg` is what `request` expects; `fd` is open (borrowed).
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request, arg) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// `ioctl(fd, request, value)` with an integer argument (or none).
pub fn ioctl_val(
    fd: BorrowedFd<'_>,
    request: libc::Ioctl,
    value: libc::c_ulong,
) -> io::Result<i32> {
    // SAFETY: the requests passed here (VFIO_GET_API_VERSION, VFIO_CHECK_EXTENSION,
    // VFIO_SET_IOMMU, VFIO_DEVICE_RESET) take an integer or nothing, so no memory is touched.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request, value) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_numbers_match_the_kernel_headers() {
        // Values as strace decodes them from the kernel's own headers.
        assert_eq!(VFIO_GET_API_VERSION, 0x3b64);
        assert_eq!(VFIO_CHECK_EXTENSION, 0x3b65);
        assert_eq!(VFIO_SET_IOMMU, 0x3b66);
        assert_eq!(VFIO_GROUP_GET_STATUS, 0x3b67);
        assert_eq!(VFIO_GROUP_SET_CONTAINER, 0x3b68);
        assert_eq!(VFIO_GROUP_GET_DEVICE_FD, 0x3b6a);
        assert_eq!(VFIO_DEVICE_GET_REGION_INFO, 0x3b6c);
        assert_eq!(VFIO_DEVICE_RESET, 0x3b6f);
        assert_eq!(VFIO_IOMMU_GET_INFO, 0x3b70);
        assert_eq!(VFIO_IOMMU_MAP_DMA, 0x3b71);
        assert_eq!(VFIO_IOMMU_UNMAP_DMA, 0x3b72);
        assert_eq!(VFIO_DEVICE_BIND_IOMMUFD, 0x3b76);
        assert_eq!(VFIO_DEVICE_ATTACH_IOMMUFD_PT, 0x3b77);
        assert_eq!(IOMMU_IOAS_ALLOC, 0x3b81);
        assert_eq!(IOMMU_IOAS_IOVA_RANGES, 0x3b84);
        assert_eq!(IOMMU_IOAS_MAP, 0x3b85);
        assert_eq!(IOMMU_IOAS_UNMAP, 0x3b86);
    }
}
