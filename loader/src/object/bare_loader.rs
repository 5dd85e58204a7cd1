//! An aya loader made without parsing the kernel's BTF. `EbpfLoader::new` always
//! parses the whole of `/sys/kernel/btf/vmlinux` (aya 0.14 has no other constructor), and the
//! loader then relocates against the cut of it we keep ([`crate::btf::core_target`]) instead: the
//! parse is thrown away. Under emulation it was the last wait on the path to the first number,
//! with everything else already kept from the boot's first run (docs/measurements.md, "What the
//! loader no longer does").
//!
//! So the loader is made on a thread of its own that first gives itself a private mount namespace
//! (a thread may: the namespace is the thread's, with its own copy of the file-system state) and
//! mounts `/dev/null` over the kernel's BTF there: aya reads nothing, finds no BTF, and keeps
//! none. The namespace, and the mount in it, end with the thread; no other thread or process ever
//! sees either. Where any step is refused, the loader is made as aya makes it, parse included,
//! and nothing else changes.

use aya::EbpfLoader;
use std::ffi::CStr;
use std::io;

/// The kernel's BTF as aya reads it (`Btf::from_sys_fs`).
const KERNEL_BTF: &CStr = c"/sys/kernel/btf/vmlinux";

/// A loader with no BTF of its own: give it the BTF to relocate against (`EbpfLoader::btf`).
pub(crate) fn loader_without_btf() -> EbpfLoader<'static> {
    match std::thread::spawn(made_with_the_kernel_btf_hidden).join() {
        Ok(Ok(loader)) => loader,
        Ok(Err(e)) => {
            log::debug!(
                target: crate::LOADER_LOG,
                "aya's loader made with its parse of the kernel's BTF (hiding it was refused: {e})"
            );
            EbpfLoader::new()
        }
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// On a thread of its own, which it leaves in a mount namespace of its own.
fn made_with_the_kernel_btf_hidden() -> io::Result<EbpfLoader<'static>> {
    let step = |what: &str, status: libc::c_int| {
        if status == 0 {
            Ok(())
        } else {
            let e = io::Error::last_os_error();
            Err(io::Error::new(e.kind(), format!("{what}: {e}")))
        }
    };
    // SAFETY: plain system calls with valid, NUL-terminated paths. CLONE_NEWNS moves only this
    // thread (it implies CLONE_FS, which a thread of a multithreaded process may unshare).
    unsafe {
        step("unshare(CLONE_NEWNS)", libc::unshare(libc::CLONE_NEWNS))?;
        // Private first: a mount below a shared one would otherwise show in every namespace.
        step(
            "making / private",
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ),
        )?;
        step(
            "mounting /dev/null over the kernel's BTF",
            libc::mount(
                c"/dev/null".as_ptr(),
                KERNEL_BTF.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ),
        )?;
    }
    Ok(EbpfLoader::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel_btf_size() -> u64 {
        let path = KERNEL_BTF.to_str().expect("an ASCII path");
        std::fs::metadata(path).map_or(0, |m| m.len())
    }

    /// Needs root, as loading does, and a kernel with BTF (every machine the tests run on).
    #[test]
    fn the_kernel_btf_is_hidden_from_the_loaders_thread_only() {
        let seen_there = std::thread::spawn(|| {
            made_with_the_kernel_btf_hidden().map(|_loader| kernel_btf_size())
        })
        .join()
        .expect("the loader's thread")
        .expect("hiding the kernel's BTF (needs root)");
        assert_eq!(seen_there, 0, "the loader's thread reads /dev/null");
        assert!(
            kernel_btf_size() > 0,
            "this thread still reads the kernel's BTF"
        );
        for process in ["self", "1"] {
            let mounts =
                std::fs::read_to_string(format!("/proc/{process}/mountinfo")).expect("mountinfo");
            assert!(
                !mounts.contains("/sys/kernel/btf"),
                "a mount over the kernel's BTF outlived the loader's thread in {process}'s namespace:\n{mounts}"
            );
        }
    }
}
