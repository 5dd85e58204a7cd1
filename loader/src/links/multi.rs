//! Multi-function links: where the kernel links one tracing program to many functions
//! (`BPF_TRACE_FENTRY_MULTI` and `BPF_TRACE_FEXIT_MULTI`, 7.x), one entry and one exit program
//! of ebpf/progs/multi.bpf.c stand in for the fentry and fexit programs of every function of a
//! family, each function told by its cookie ([`super::multi_shapes`]). The verifier walks each
//! program once, where it walks a per-function program once for every function (the verification
//! of both, timed on 7.3: docs/measurements.md, "One program for many functions").
//!
//! aya 0.14 loads tracing programs for one function only, so these are loaded by our own loader
//! from a copy of the object ([`crate::object::object_copy`]) with the multi-function attach types and
//! linked to their functions. Their links are plain descriptors, kept for as long as the probes
//! live: the detach ([`crate::probes::detach`]) hands them on with every other BPF file.

use super::multi_shapes::Family;
use crate::calibration::role::Role;
use crate::calibration::understudy::Understudy;
use crate::object::bpf_syscalls::{
    link_tracing_multi, BPF_TRACE_FENTRY_MULTI, BPF_TRACE_FEXIT_MULTI,
};
use crate::object::object_copy::{CopyError, ObjectCopy};
use crate::timing::timed;
use aya::Btf;
use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// A kernel function that exists where the kernel has multi-function tracing links.
pub(crate) const KERNEL_MARKER: &str = "bpf_tracing_multi_attach";

/// A family's programs attached: their links (held: the programs stay linked, and live, as long as
/// the links are open).
pub(crate) struct MultiLinks {
    pub links: Vec<OwnedFd>,
    /// Each program's file, for its statistics (recursion misses), by name (an understudy's is
    /// its lead's, [`crate::calibration::role::name_of`]).
    pub programs: Vec<(String, OwnedFd)>,
}

/// A function a multi-function program serves: its own fentry and fexit programs, which its
/// family's stand in for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Served {
    pub own_entry: Option<&'static str>,
    pub own_exit: &'static str,
    pub family: Family,
}

/// What our own loader attached ([`crate::object::object_copy`]): the multi-function programs' links and
/// programs, the functions they serve, and the per-function programs' understudies.
#[derive(Default)]
pub(crate) struct MultiAttached {
    pub links: Vec<MultiLinks>,
    pub served: Vec<Served>,
    pub understudies: Vec<Understudy>,
}

impl MultiAttached {
    /// Each program our own loader attached, by name.
    pub(crate) fn programs(&self) -> impl Iterator<Item = (&str, BorrowedFd<'_>)> {
        let families = self
            .links
            .iter()
            .flat_map(|links| links.programs.iter())
            .map(|(name, fd)| (name.as_str(), fd.as_fd()));
        let understudies = self
            .understudies
            .iter()
            .map(|understudy| (understudy.name.as_str(), understudy.program.as_fd()));
        families.chain(understudies)
    }

    /// The multi-function program that runs in place of each per-function program it stands in
    /// for, by the per-function program's name.
    pub(crate) fn stand_ins(&self) -> BTreeMap<&'static str, &'static str> {
        self.served
            .iter()
            .flat_map(|served| {
                let (entry, exit) = served.family.programs();
                served
                    .own_entry
                    .map(|own| (own, entry))
                    .into_iter()
                    .chain([(served.own_exit, exit)])
            })
            .collect()
    }
}

/// Loads `family`'s programs from `copy` and links them to `functions` (their ids in the kernel's
/// BTF, each with its cookie): the exit first, so that no entry runs without its exit. With
/// `understudies`, each program's understudy is linked before it: the kernel runs the programs of
/// a function last linked first, and an understudy must run after its lead. `btf` has the
/// kernel's names at their ids.
pub(crate) fn attach_family(
    copy: &ObjectCopy,
    btf: &Btf,
    family: Family,
    functions: &[(u32, u64)],
    understudies: bool,
) -> Result<MultiLinks, CopyError> {
    let (entry, exit) = family.programs();
    let (ids, cookies): (Vec<u32>, Vec<u64>) = functions.iter().copied().unzip();
    let roles: &[Role] = if understudies {
        &[Role::Understudy, Role::Lead]
    } else {
        &[Role::Lead]
    };
    let mut attached = MultiLinks {
        links: Vec::new(),
        programs: Vec::new(),
    };
    for (name, attach_type) in [
        (exit, BPF_TRACE_FEXIT_MULTI),
        (entry, BPF_TRACE_FENTRY_MULTI),
    ] {
        for &role in roles {
            let shown = role.program_name(name);
            let fd = copy.load_timed(btf, name, role, attach_type, 0)?;
            let link = timed(&shown, "attached", || {
                link_tracing_multi(&fd, attach_type, &ids, &cookies)
            })
            .map_err(|e| CopyError::Link {
                program: shown.clone(),
                functions: format!("{} functions", ids.len()),
                reason: e.to_string(),
            })?;
            attached.links.push(link);
            attached.programs.push((shown, fd));
        }
    }
    Ok(attached)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_function_s_own_programs_name_their_family_s() {
        let served = MultiAttached {
            links: Vec::new(),
            understudies: Vec::new(),
            served: vec![
                Served {
                    own_entry: Some("dma__map_sg__fentry"),
                    own_exit: "dma__map_sg__fexit",
                    family: Family::Device,
                },
                Served {
                    own_entry: Some("iova__alloc_fast__fentry"),
                    own_exit: "iova__alloc_fast__fexit",
                    family: Family::Mapping,
                },
            ],
        };
        assert_eq!(
            served.stand_ins(),
            BTreeMap::from([
                ("dma__map_sg__fentry", "multi__device__fentry"),
                ("dma__map_sg__fexit", "multi__device__fexit"),
                ("iova__alloc_fast__fentry", "multi__mapping__fentry"),
                ("iova__alloc_fast__fexit", "multi__mapping__fexit"),
            ])
        );
        assert_eq!(
            served.programs().count(),
            0,
            "no family attached, no program"
        );
    }
}
