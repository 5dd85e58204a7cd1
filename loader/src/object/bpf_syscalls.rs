//! The BPF syscalls our own loader makes ([`super::object_copy`]), which aya 0.14 does not: loading
//! a BTF, loading a tracing program with any attach type and target (aya loads each program once),
//! linking one to its function, and linking one to many functions
//! (`BPF_TRACE_FENTRY_MULTI`/`FEXIT_MULTI`, 7.x).
//! Each attr is a `union bpf_attr` prefix of exactly its fields: padding would reach the kernel
//! uninitialised, and it refuses, without a word in the verifier's log, what it does not know
//! to be zero.

use aya_obj::generated::{bpf_func_info, bpf_insn, bpf_line_info};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `enum bpf_attach_type` values of fentry and fexit programs.
pub(crate) const BPF_TRACE_FENTRY: u32 = 24;
pub(crate) const BPF_TRACE_FEXIT: u32 = 25;
/// `enum bpf_attach_type` values of the multi-function links (7.x uapi).
pub(crate) const BPF_TRACE_FENTRY_MULTI: u32 = 59;
pub(crate) const BPF_TRACE_FEXIT_MULTI: u32 = 60;
const BPF_PROG_TYPE_TRACING: u32 = 26;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_BTF_LOAD: libc::c_long = 18;
const BPF_LINK_CREATE: libc::c_long = 28;

/// A tracing program's relocated instructions and their BTF line and function records.
#[derive(Clone)]
pub(crate) struct TracingProgram {
    pub name: &'static str,
    pub instructions: Vec<bpf_insn>,
    pub func_info: Vec<bpf_func_info>,
    pub func_info_rec_size: usize,
    pub line_info: Vec<bpf_line_info>,
    pub line_info_rec_size: usize,
}

/// `union bpf_attr` for BPF_BTF_LOAD.
#[repr(C)]
#[derive(Default)]
struct BtfLoadAttr {
    btf: u64,
    btf_log_buf: u64,
    btf_size: u32,
    btf_log_size: u32,
    btf_log_level: u32,
    btf_log_true_size: u32,
}

/// `union bpf_attr` for BPF_PROG_LOAD, up to the fields used here.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    attach_btf_id: u32,
    attach_btf_obj_fd: u32,
    core_relo_cnt: u32,
}

/// `union bpf_attr` for BPF_LINK_CREATE of a multi-function tracing link.
#[repr(C)]
#[derive(Default)]
struct TracingMultiLinkAttr {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    ids: u64,
    cookies: u64,
    cnt: u32,
    unused: u32,
}

/// `union bpf_attr` for BPF_LINK_CREATE of a tracing program to the function it was loaded for.
#[repr(C)]
#[derive(Default)]
struct TracingLinkAttr {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
}

const _: () = assert!(std::mem::size_of::<BtfLoadAttr>() == 32);
const _: () = assert!(std::mem::size_of::<TracingLinkAttr>() == 16);
const _: () = assert!(std::mem::size_of::<ProgLoadAttr>() == 120);
const _: () = assert!(std::mem::size_of::<TracingMultiLinkAttr>() == 40);

/// The bpf(2) syscall, returning the descriptor it made.
fn bpf_fd<T>(command: libc::c_long, attr: &mut T) -> std::io::Result<OwnedFd> {
    // SAFETY: attr is a live, initialised union bpf_attr prefix of the size passed; every pointer
    // in it points at memory that outlives the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            command,
            std::ptr::from_mut(attr).cast::<libc::c_void>(),
            std::mem::size_of::<T>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Loads a BTF blob: its descriptor.
pub(crate) fn load_btf(btf: &[u8]) -> std::io::Result<OwnedFd> {
    let mut attr = BtfLoadAttr {
        btf: btf.as_ptr() as u64,
        btf_size: btf.len() as u32,
        ..BtfLoadAttr::default()
    };
    bpf_fd(BPF_BTF_LOAD, &mut attr)
}

/// Loads `program` as a tracing program of `attach_type` for the kernel function of BTF id
/// `attach_btf_id` (0: for none, a multi-function program), its records typed by `btf`; the
/// verifier writes its log into `log` (level 1) when one is given.
pub(crate) fn load_tracing(
    program: &TracingProgram,
    license: &CString,
    btf: &OwnedFd,
    attach_type: u32,
    attach_btf_id: u32,
    log: Option<&mut [u8]>,
) -> std::io::Result<OwnedFd> {
    let mut prog_name = [0u8; 16];
    for (slot, byte) in prog_name.iter_mut().zip(program.name.bytes().take(15)) {
        *slot = byte;
    }
    let (log_level, log_size, log_buf) = match log {
        Some(log) => (1, log.len() as u32, log.as_mut_ptr() as u64),
        None => (0, 0, 0),
    };
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_TRACING,
        insn_cnt: program.instructions.len() as u32,
        insns: program.instructions.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level,
        log_size,
        log_buf,
        prog_name,
        expected_attach_type: attach_type,
        prog_btf_fd: btf.as_raw_fd() as u32,
        func_info_rec_size: program.func_info_rec_size as u32,
        func_info: program.func_info.as_ptr() as u64,
        func_info_cnt: program.func_info.len() as u32,
        line_info_rec_size: program.line_info_rec_size as u32,
        line_info: program.line_info.as_ptr() as u64,
        line_info_cnt: program.line_info.len() as u32,
        attach_btf_id,
        ..ProgLoadAttr::default()
    };
    bpf_fd(BPF_PROG_LOAD, &mut attr)
}

/// Links `program` (a fentry or fexit program loaded as `attach_type` for one function) to it.
pub(crate) fn link_tracing(program: &OwnedFd, attach_type: u32) -> std::io::Result<OwnedFd> {
    let mut attr = TracingLinkAttr {
        prog_fd: program.as_raw_fd() as u32,
        attach_type,
        ..TracingLinkAttr::default()
    };
    bpf_fd(BPF_LINK_CREATE, &mut attr)
}

/// Links `program` (loaded as `attach_type`) to the functions of kernel BTF `ids`, each run with
/// its cookie.
pub(crate) fn link_tracing_multi(
    program: &OwnedFd,
    attach_type: u32,
    ids: &[u32],
    cookies: &[u64],
) -> std::io::Result<OwnedFd> {
    let mut attr = TracingMultiLinkAttr {
        prog_fd: program.as_raw_fd() as u32,
        attach_type,
        ids: ids.as_ptr() as u64,
        cookies: cookies.as_ptr() as u64,
        cnt: ids.len() as u32,
        ..TracingMultiLinkAttr::default()
    };
    bpf_fd(BPF_LINK_CREATE, &mut attr)
}
