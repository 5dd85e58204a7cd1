//! Why a hook (a kernel function or tracepoint) did not attach, decided once where the error
//! arises: absent from this kernel (not a failure), refused by it, or wrong in our object.

use crate::object::load::ProgramLookup;
use crate::object::object_copy::CopyError;
use crate::object::verifier_log::describe;
use aya::programs::{KProbeError, ProgramError};
use aya::BtfError;
use std::io::ErrorKind;

/// BPF_FUNC_get_func_ret's number, which a verifier that does not know the helper prints.
const GET_FUNC_RET_HELPER: &str = "unknown#184";

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// The function or event is not in this kernel (renamed, inlined, another vendor's, a module
    /// not loaded) or this kernel has no way in (no kprobe PMU): not a failure.
    #[error("{0}")]
    Absent(String),
    /// The verifier refused an fexit program for want of bpf_get_func_ret.
    #[error("this kernel's fexit programs cannot read a return value (bpf_get_func_ret is Linux 5.17+): kprobes instead")]
    NoFuncRet,
    /// The function has no fentry program (it is only in kernels whose fexit cannot read a
    /// return value).
    #[error("no fentry program: {0} is only in kernels whose fexit cannot read a return value")]
    NoFentryProgram(&'static str),
    /// The tracepoint program was loaded for the other event of its shape.
    #[error("program {0} already serves another tracepoint")]
    ProgramTaken(&'static str),
    /// The object lacks the program, or has it under another type.
    #[error(transparent)]
    Program(#[from] ProgramLookup),
    /// Our own loader's copy of the object did not load the program.
    #[error(transparent)]
    Copy(#[from] CopyError),
    /// The object does not serve the hook as the table says.
    #[error("{0}")]
    Object(String),
    /// The kernel refused: the syscall's answer and the verifier's verdict, in one line.
    #[error("{0}")]
    Refused(String),
}

impl HookError {
    /// Whether the hook is absent from this kernel rather than refused.
    pub fn is_absence(&self) -> bool {
        matches!(self, HookError::Absent(_))
    }
}

impl From<ProgramError> for HookError {
    fn from(error: ProgramError) -> HookError {
        let line = describe(&error);
        if line.contains(GET_FUNC_RET_HELPER) || line.contains("bpf_get_func_ret") {
            HookError::NoFuncRet
        } else if names_nothing_here(&error) {
            HookError::Absent(line)
        } else {
            HookError::Refused(line)
        }
    }
}

/// The kernel has no such function or event (no BTF type of the name, `ENOENT` from
/// `perf_event_open`), or no kprobe PMU to attach through.
fn names_nothing_here(error: &ProgramError) -> bool {
    let not_found = |io_error: &std::io::Error| io_error.kind() == ErrorKind::NotFound;
    match error {
        ProgramError::Btf(BtfError::UnknownBtfTypeName { .. }) => true,
        ProgramError::SyscallError(syscall) => not_found(&syscall.io_error),
        ProgramError::KProbeError(KProbeError::FileError { io_error, .. }) => not_found(io_error),
        ProgramError::IOError(io_error) => not_found(io_error),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aya::sys::SyscallError;

    #[test]
    fn a_missing_kprobe_pmu_is_named_and_absent() {
        let error = ProgramError::KProbeError(KProbeError::FileError {
            filename: "/sys/bus/event_source/devices/kprobe/type".into(),
            io_error: std::io::Error::from_raw_os_error(libc::ENOENT),
        });
        let error = HookError::from(error);
        assert!(error.is_absence(), "{error:?}");
        assert!(
            error
                .to_string()
                .starts_with("this kernel has no kprobe PMU"),
            "{error}"
        );
    }

    #[test]
    fn a_function_without_btf_is_absent_and_a_refusal_is_not() {
        let unknown = ProgramError::Btf(BtfError::UnknownBtfTypeName {
            type_name: "dma_map_phys".into(),
        });
        assert_eq!(
            HookError::from(unknown),
            HookError::Absent("unknown BTF type `dma_map_phys`".into())
        );
        let refused = ProgramError::SyscallError(SyscallError {
            call: "perf_event_open",
            io_error: std::io::Error::from_raw_os_error(libc::EPERM),
        });
        assert!(!HookError::from(refused).is_absence());
        let no_symbol = ProgramError::SyscallError(SyscallError {
            call: "perf_event_open",
            io_error: std::io::Error::from_raw_os_error(libc::ENOENT),
        });
        assert!(HookError::from(no_symbol).is_absence());
    }
}
