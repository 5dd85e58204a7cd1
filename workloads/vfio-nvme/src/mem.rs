//! DMA memory: anonymous mappings backed by 4 KiB pages (transparent huge pages refused) or by
//! 2 MiB / 1 GiB hugetlb pages, mapped once through VFIO at an IOVA from our allocator.
//!
//! Memory the device reads or writes is never handed out as `&mut [u8]` or `&mut T`: a
//! [`DmaSlice`] is a unique handle on a byte range that copies in and out and does volatile
//! accesses. Slices are carved from a buffer without overlap, so a slice can move to the thread
//! that owns its queue or its data pages.

use crate::error::Error;
use crate::iova::IovaAllocator;
use crate::params::PageSize;
use crate::vfio::Iommu;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ptr::NonNull;
use std::time::Instant;

/// The granule of /proc/self/pagemap entries.
const SMALL_PAGE: u64 = 4096;

/// The frame number in a pagemap entry (bits 0-54) of a present page (bit 63); None when absent
/// or hidden (shown as 0 without CAP_SYS_ADMIN). Documentation/admin-guide/mm/pagemap.rst.
fn frame_of(entry: u64) -> Option<u64> {
    let frame = entry & ((1 << 55) - 1);
    (entry >> 63 == 1 && frame != 0).then_some(frame)
}

/// How many runs of consecutive frame numbers `frames` makes, in order.
fn contiguous_runs(frames: &[u64]) -> u64 {
    let breaks = frames.windows(2).filter(|w| w[1] != w[0] + 1).count() as u64;
    if frames.is_empty() {
        0
    } else {
        breaks + 1
    }
}

/// Anonymous memory from `mmap`, locked in place by VFIO's pinning; unmapped in `Drop`.
#[derive(Debug)]
pub struct HostMemory {
    base: NonNull<u8>,
    len: usize,
    page: PageSize,
}

impl HostMemory {
    /// `len` bytes (rounded up to whole pages) of zeroed memory in pages of `page`.
    pub fn alloc(len: u64, page: PageSize) -> Result<HostMemory, Error> {
        let len = len.div_ceil(page.bytes()) * page.bytes();
        let len = usize::try_from(len)
            .map_err(|_| Error::Vfio(format!("{len} bytes do not fit the address space")))?;
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        match page {
            PageSize::Size4K => {}
            PageSize::Size2M => {
                flags |= libc::MAP_HUGETLB | libc::MAP_HUGE_2MB | libc::MAP_POPULATE
            }
            PageSize::Size1G => {
                flags |= libc::MAP_HUGETLB | libc::MAP_HUGE_1GB | libc::MAP_POPULATE
            }
        }
        // SAFETY: a fresh anonymous mapping; nothing aliases the returned range.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let err = std::io::Error::last_os_error();
            if page.is_huge() {
                let pages = len as u64 / page.bytes();
                return Err(Error::HugePages(format!(
                    "mmap of {pages} {page} huge pages failed ({err}): {}",
                    reserve_advice(page, pages)
                )));
            }
            return Err(Error::Sys {
                what: format!("mmap of {len} bytes"),
                source: err,
                hint: String::new(),
            });
        }
        let base = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| Error::Vfio("mmap returned NULL".into()))?;
        let mem = HostMemory { base, len, page };
        if page == PageSize::Size4K {
            // Transparent huge pages would back this with 2 MiB pages and void the 4 KiB
            // experiment: refuse them before the first touch, then touch every page.
            // SAFETY: advice on our own fresh mapping; it changes no memory contents.
            let rc = unsafe { libc::madvise(ptr, len, libc::MADV_NOHUGEPAGE) };
            if rc != 0 {
                return Err(Error::last_os("madvise(MADV_NOHUGEPAGE)", ""));
            }
            for off in (0..len).step_by(4096) {
                // SAFETY: `off < len`, inside our mapping, which nothing else references yet.
                unsafe { mem.base.as_ptr().add(off).write_volatile(0) };
            }
        }
        Ok(mem)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn page(&self) -> PageSize {
        self.page
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `alloc`; slices borrow the DmaBuffer owning us.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// How to get huge pages of `page` size, for error messages.
pub fn reserve_advice(page: PageSize, pages: u64) -> String {
    let Some(dir) = page.hugepages_dir() else {
        return String::new();
    };
    let sysfs = format!("/sys/kernel/mm/hugepages/{dir}/nr_hugepages");
    match page {
        PageSize::Size1G => format!(
            "1 GiB pages can rarely be reserved at run time: boot with `hugepagesz=1G hugepages={pages}` on the kernel command line (or try `echo {pages} > {sysfs}`, or --reserve-hugepages)"
        ),
        _ => format!(
            "reserve them with `echo {pages} > {sysfs}` (more if others use huge pages), or pass --reserve-hugepages to let the tool do it and undo it after"
        ),
    }
}

/// Host memory mapped for DMA at `iova`; unmapped from the IOMMU in `Drop` (or [`unmap`]),
/// before the memory itself is freed.
///
/// [`unmap`]: DmaBuffer::unmap
#[derive(Debug)]
pub struct DmaBuffer<'i> {
    mem: HostMemory,
    iova: u64,
    iommu: &'i Iommu,
    map_ns: u64,
    mapped: bool,
}

impl<'i> DmaBuffer<'i> {
    /// Allocates `len` bytes in `page` pages and maps them at an IOVA aligned to the page size
    /// (so the IOMMU can use a superpage for a huge page), timing the map call.
    pub fn new(
        iommu: &'i Iommu,
        iovas: &mut IovaAllocator,
        len: u64,
        page: PageSize,
    ) -> Result<DmaBuffer<'i>, Error> {
        let mem = HostMemory::alloc(len, page)?;
        let iova = iovas.alloc(mem.len as u64, page.bytes())?;
        let start = Instant::now();
        iommu.map(mem.base.as_ptr() as u64, iova, mem.len as u64)?;
        let map_ns = start.elapsed().as_nanos() as u64;
        Ok(DmaBuffer {
            mem,
            iova,
            iommu,
            map_ns,
            mapped: true,
        })
    }

    pub fn iova(&self) -> u64 {
        self.iova
    }

    pub fn len(&self) -> usize {
        self.mem.len
    }

    pub fn is_empty(&self) -> bool {
        self.mem.len == 0
    }

    pub fn page(&self) -> PageSize {
        self.mem.page
    }

    /// How long the map ioctl took (pinning and IOMMU page-table writes), in ns.
    pub fn map_ns(&self) -> u64 {
        self.map_ns
    }

    /// Physically contiguous runs of the buffer's pages, from /proc/self/pagemap (frame numbers
    /// are shown to CAP_SYS_ADMIN only): VFIO type1 maps one IOMMU range per run. None when the
    /// frame numbers are hidden or a page is not present.
    pub fn physical_runs(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let pagemap = std::fs::File::open("/proc/self/pagemap").ok()?;
        let base = self.mem.base.as_ptr() as u64;
        let pages = self.mem.len / SMALL_PAGE as usize;
        let mut raw = vec![0u8; pages * 8];
        pagemap
            .read_exact_at(&mut raw, base / SMALL_PAGE * 8)
            .ok()?;
        let frames = raw
            .chunks_exact(8)
            .map(|entry| frame_of(u64::from_le_bytes(entry.try_into().ok()?)))
            .collect::<Option<Vec<u64>>>()?;
        Some(contiguous_runs(&frames))
    }

    /// The whole buffer as one slice, to carve with [`DmaSlice::take`].
    pub fn slice(&mut self) -> DmaSlice<'_> {
        DmaSlice {
            base: self.mem.base,
            len: self.mem.len,
            iova: self.iova,
            _buf: PhantomData,
        }
    }

    /// Unmaps from the IOMMU now, returning how long it took in ns. The device must no longer
    /// use the buffer.
    pub fn unmap(mut self) -> Result<u64, Error> {
        self.mapped = false;
        let start = Instant::now();
        self.iommu.unmap(self.iova, self.mem.len as u64)?;
        Ok(start.elapsed().as_nanos() as u64)
    }
}

impl Drop for DmaBuffer<'_> {
    fn drop(&mut self) {
        if self.mapped {
            // Nothing to report to from Drop; the container closing unmaps anyway.
            let _ = self.iommu.unmap(self.iova, self.mem.len as u64);
        }
    }
}

/// A unique handle on a byte range of a [`DmaBuffer`] that the device may also access.
#[derive(Debug)]
pub struct DmaSlice<'b> {
    base: NonNull<u8>,
    len: usize,
    iova: u64,
    _buf: PhantomData<&'b mut [u8]>,
}

// SAFETY: a DmaSlice is the only handle on its bytes (slices are split, never cloned), like a
// `&mut [u8]`, so moving it to another thread moves exclusive access with it.
unsafe impl Send for DmaSlice<'_> {}

impl<'b> DmaSlice<'b> {
    pub fn iova(&self) -> u64 {
        self.iova
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Splits off the first `len` bytes, after skipping to an offset aligned to `align` (a power
    /// of two dividing the page size; IOVA and address share their alignment then).
    pub fn take(&mut self, len: usize, align: usize) -> Result<DmaSlice<'b>, Error> {
        let short = || {
            Error::Vfio(format!(
                "DMA buffer too small: {len} bytes wanted, {} left",
                self.len
            ))
        };
        if !align.is_power_of_two() {
            return Err(Error::Vfio(format!(
                "alignment {align} is not a power of two"
            )));
        }
        let skip = ((self.iova as usize).wrapping_neg()) & (align - 1);
        let total = skip.checked_add(len).ok_or_else(short)?;
        if total > self.len {
            return Err(short());
        }
        // SAFETY: skip <= total <= len, inside the range this slice owns.
        let start = unsafe { self.base.as_ptr().add(skip) };
        let front = DmaSlice {
            base: NonNull::new(start).ok_or_else(short)?,
            len,
            iova: self.iova + skip as u64,
            _buf: PhantomData,
        };
        // SAFETY: total <= len, so the rest starts inside or at the end of our range.
        let rest = unsafe { self.base.as_ptr().add(total) };
        self.base = NonNull::new(rest).ok_or_else(short)?;
        self.len -= total;
        self.iova += total as u64;
        Ok(front)
    }

    fn check(&self, offset: usize, len: usize, align: usize) -> Option<*mut u8> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: offset + len <= self.len: inside our range.
        let ptr = unsafe { self.base.as_ptr().add(offset) };
        (ptr as usize).is_multiple_of(align).then_some(ptr)
    }

    /// A volatile write of `value` at `offset` (bounds and alignment checked; `false` if not).
    pub fn write<T: Copy>(&mut self, offset: usize, value: T) -> bool {
        match self.check(offset, size_of::<T>(), align_of::<T>()) {
            Some(ptr) => {
                // SAFETY: in bounds and aligned for T (checked); we hold the unique handle.
                unsafe { ptr.cast::<T>().write_volatile(value) };
                true
            }
            None => false,
        }
    }

    /// A volatile read of a `T` at `offset` (bounds and alignment checked). `T` must be valid for
    /// any bit pattern (integers and the `#[repr(C)]` NVMe entries are).
    pub fn read<T: Copy>(&self, offset: usize) -> Option<T> {
        let ptr = self.check(offset, size_of::<T>(), align_of::<T>())?;
        // SAFETY: in bounds and aligned for T (checked). Callers read only plain-integer types,
        // for which every bit pattern the device can leave is a valid value.
        Some(unsafe { ptr.cast::<T>().read_volatile() })
    }

    /// Copies `src` into the slice at `offset`; `false` if out of bounds.
    pub fn copy_in(&mut self, offset: usize, src: &[u8]) -> bool {
        match self.check(offset, src.len(), 1) {
            Some(ptr) => {
                // SAFETY: `src.len()` bytes at `ptr` are ours (checked) and cannot overlap `src`,
                // which is ordinary Rust memory.
                unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), ptr, src.len()) };
                true
            }
            None => false,
        }
    }

    /// Copies from the slice at `offset` into `dst`; `false` if out of bounds.
    pub fn copy_out(&self, offset: usize, dst: &mut [u8]) -> bool {
        match self.check(offset, dst.len(), 1) {
            Some(ptr) => {
                // SAFETY: `dst.len()` bytes at `ptr` are ours (checked); `dst` is separate memory.
                unsafe {
                    std::ptr::copy_nonoverlapping(ptr.cast_const(), dst.as_mut_ptr(), dst.len())
                };
                true
            }
            None => false,
        }
    }

    /// Zeroes the whole slice.
    pub fn zero(&mut self) {
        // SAFETY: exactly our range.
        unsafe { std::ptr::write_bytes(self.base.as_ptr(), 0, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_in_a_row_make_one_run() {
        assert_eq!(contiguous_runs(&[]), 0);
        assert_eq!(contiguous_runs(&[7]), 1);
        assert_eq!(contiguous_runs(&[7, 8, 9, 3, 4, 10]), 3);
        assert_eq!(contiguous_runs(&[9, 8]), 2, "descending frames are apart");
    }

    #[test]
    fn hidden_and_absent_pages_have_no_frame() {
        assert_eq!(frame_of((1 << 63) | 0x1234), Some(0x1234));
        assert_eq!(frame_of(1 << 63), None, "hidden: present, frame 0");
        assert_eq!(frame_of(0x1234), None, "not present");
        assert_eq!(
            frame_of((1 << 63) | (1 << 55) | 5),
            Some(5),
            "soft-dirty bit ignored"
        );
    }

    /// A DmaSlice over plain heap memory, for the carving and bounds logic.
    fn slice_over(buf: &mut [u64], iova: u64) -> DmaSlice<'_> {
        DmaSlice {
            base: NonNull::new(buf.as_mut_ptr().cast::<u8>()).unwrap(),
            len: buf.len() * 8,
            iova,
            _buf: PhantomData,
        }
    }

    #[test]
    fn carving_keeps_slices_disjoint_and_aligned() {
        let mut backing = vec![0u64; 4096];
        let mut whole = slice_over(&mut backing, 0x10000);
        let a = whole.take(100, 8).unwrap();
        let b = whole.take(64, 4096).unwrap();
        assert_eq!(a.iova(), 0x10000);
        assert_eq!(b.iova(), 0x11000, "aligned up past a");
        assert_eq!(whole.iova(), 0x11040);
        assert_eq!(whole.len(), 32768 - 0x1040);
        assert!(whole.take(1 << 20, 8).is_err());
        assert!(whole.take(8, 3).is_err());
    }

    #[test]
    fn accesses_are_bounds_and_alignment_checked() {
        let mut backing = vec![0u64; 8];
        let mut s = slice_over(&mut backing, 0x10000);
        assert!(s.write::<u32>(4, 0xdead_beef));
        assert_eq!(s.read::<u32>(4), Some(0xdead_beef));
        assert!(!s.write::<u64>(4, 1), "misaligned");
        assert!(!s.write::<u64>(64, 1), "out of bounds");
        assert_eq!(s.read::<u64>(60), None);
        assert!(s.copy_in(8, &[1, 2, 3]));
        let mut out = [0u8; 3];
        assert!(s.copy_out(8, &mut out));
        assert_eq!(out, [1, 2, 3]);
        assert!(!s.copy_in(62, &[0; 3]));
        s.zero();
        assert_eq!(s.read::<u64>(8), Some(0));
    }

    #[test]
    fn advice_names_the_sysfs_file_and_the_kernel_command_line() {
        let a = reserve_advice(PageSize::Size2M, 4);
        assert!(
            a.contains("echo 4 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
            "{a}"
        );
        assert!(a.contains("--reserve-hugepages"));
        let a = reserve_advice(PageSize::Size1G, 2);
        assert!(a.contains("hugepagesz=1G hugepages=2"), "{a}");
    }

    #[test]
    fn small_pages_are_allocated_zeroed() {
        let mem = HostMemory::alloc(10_000, PageSize::Size4K).unwrap();
        assert_eq!(mem.len(), 12288);
        assert_eq!(mem.page(), PageSize::Size4K);
    }
}
