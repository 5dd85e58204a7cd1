//! The embedded BPF object, relocated against this kernel with every knob set and loaded by aya,
//! and our own loader for what aya 0.14 cannot load: a copy of the object, the BPF syscalls,
//! and the verifier's log in one line.

pub(crate) mod bare_loader;
pub(crate) mod bpf_syscalls;
pub(crate) mod load;
pub(crate) mod object_copy;
pub(crate) mod relocate;
pub(crate) mod verifier_log;
