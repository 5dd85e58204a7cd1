//! Verifying the fentry and fexit programs this kernel will get before any is attached, on as
//! many threads as there are CPUs for (issue 30): the kernel does not serialise root's
//! `BPF_PROG_LOAD`, and verifying ~60 programs one after the other was a fifth of `record`'s
//! start. Attaching stays in order (attach.rs): links change kernel text under one lock anyway.
//! A program that fails here is not tried again: its error is the hook's.

use super::hook_error::HookError;
use super::timing::timed;
use aya::programs::Program;
use aya::{Btf, Ebpf};
use std::collections::HashMap;
use std::num::NonZeroUsize;

/// A program to verify, and the kernel function it is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Bound {
    pub program: &'static str,
    pub function: &'static str,
}

/// Threads to verify on: the CPUs this process may run on, at most 8; 1 means verifying as
/// each hook is attached, as before.
pub(super) fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .min(8)
}

/// Loads (verifies) every `wanted` fentry/fexit program on `threads` threads; the errors, by
/// program. Programs of other types, or missing from the object, are left to attach.rs.
pub(super) fn verify_ahead(
    ebpf: &mut Ebpf,
    btf: &Btf,
    wanted: &[Bound],
    threads: usize,
) -> HashMap<&'static str, HookError> {
    let function_of: HashMap<&str, Bound> = wanted.iter().map(|b| (b.program, *b)).collect();
    let mut work: Vec<(Bound, &mut Program)> = ebpf
        .programs_mut()
        .filter_map(|(name, program)| Some((*function_of.get(name)?, program)))
        .collect();
    let per_thread = work.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = work
            .chunks_mut(per_thread)
            .map(|chunk| scope.spawn(move || verify_chunk(chunk, btf)))
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| handle.join().unwrap_or_default())
            .collect()
    })
}

fn verify_chunk(chunk: &mut [(Bound, &mut Program)], btf: &Btf) -> Vec<(&'static str, HookError)> {
    chunk
        .iter_mut()
        .filter_map(|(bound, program)| {
            let result = timed(bound.program, "verified", || match program {
                Program::FEntry(p) => p.load(bound.function, btf),
                Program::FExit(p) => p.load(bound.function, btf),
                _ => Ok(()),
            });
            result.err().map(|e| (bound.program, HookError::from(e)))
        })
        .collect()
}
