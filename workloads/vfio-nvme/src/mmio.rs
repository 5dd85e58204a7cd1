//! MMIO: a mapped BAR, accessed only with volatile, aligned 32-bit reads and writes.
//! 64-bit registers (CAP, ASQ, ACQ) are accessed as two 32-bit halves, low first, which the
//! NVMe specification allows (§3.1) and every controller accepts.

use crate::error::Error;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

/// A BAR mapped into our address space with `mmap` on the VFIO device fd; unmapped in `Drop`.
#[derive(Debug)]
pub struct Bar {
    base: NonNull<u8>,
    len: usize,
}

impl Bar {
    pub(crate) fn map(fd: BorrowedFd<'_>, offset: u64, size: u64) -> Result<Bar, Error> {
        let len = usize::try_from(size).map_err(|_| Error::Vfio(format!("BAR of {size} bytes")))?;
        let off = libc::off_t::try_from(offset)
            .map_err(|_| Error::Vfio(format!("BAR offset {offset:#x}")))?;
        // SAFETY: a fresh shared mapping of the device region; the kernel validates offset and
        // length against the region, and nothing else aliases the new address range.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                off,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::last_os(format!("mmap of BAR0 ({len} bytes)"), ""));
        }
        let base = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| Error::Vfio("mmap returned NULL".into()))?;
        Ok(Bar { base, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A handle on the 32-bit register at `offset`, checked once here.
    pub fn reg32(&self, offset: usize) -> Result<Reg32<'_>, Error> {
        if !offset.is_multiple_of(4) || offset.checked_add(4).is_none_or(|end| end > self.len) {
            return Err(Error::Controller(format!(
                "register offset {offset:#x} outside BAR0 ({:#x} bytes)",
                self.len
            )));
        }
        // SAFETY: offset + 4 <= len, so the pointer stays inside the mapping.
        let ptr = unsafe { self.base.as_ptr().add(offset) }.cast::<u32>();
        Ok(Reg32 {
            ptr: NonNull::new(ptr).ok_or_else(|| Error::Vfio("null register".into()))?,
            _bar: PhantomData,
        })
    }

    pub fn read32(&self, offset: usize) -> Result<u32, Error> {
        Ok(self.reg32(offset)?.read())
    }

    pub fn write32(&self, offset: usize, value: u32) -> Result<(), Error> {
        self.reg32(offset)?.write(value);
        Ok(())
    }

    pub fn read64(&self, offset: usize) -> Result<u64, Error> {
        let low = self.read32(offset)?;
        let high = self.read32(offset + 4)?;
        Ok(u64::from(low) | (u64::from(high) << 32))
    }

    pub fn write64(&self, offset: usize, value: u64) -> Result<(), Error> {
        self.write32(offset, value as u32)?;
        self.write32(offset + 4, (value >> 32) as u32)
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping made in `map`; every `Reg32` borrows
        // `self`, so none outlives it.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// One 32-bit register (a doorbell, CC, CSTS) inside a [`Bar`], valid while the BAR is mapped.
#[derive(Debug, Clone, Copy)]
pub struct Reg32<'bar> {
    ptr: NonNull<u32>,
    _bar: PhantomData<&'bar Bar>,
}

// SAFETY: a Reg32 only performs single aligned 32-bit volatile accesses to device memory, which
// the device serializes; it gives no access to Rust-visible memory. Each I/O queue's doorbells
// are handed to the one thread that owns that queue.
unsafe impl Send for Reg32<'_> {}

impl Reg32<'_> {
    pub fn read(self) -> u32 {
        // SAFETY: `ptr` is aligned and inside the live BAR mapping (checked in `Bar::reg32`,
        // and the lifetime ties us to the Bar).
        unsafe { self.ptr.as_ptr().read_volatile() }
    }

    pub fn write(self, value: u32) {
        // SAFETY: as in `read`.
        unsafe { self.ptr.as_ptr().write_volatile(value) }
    }
}
