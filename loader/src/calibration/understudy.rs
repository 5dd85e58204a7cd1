//! Understudies: a second copy of each timed fentry and fexit program (and of each multi-function
//! family's), attached to the same functions, that acts only where its lead evidently did not
//! (ebpf/lib/role.bpf.h, ebpf/lib/track.bpf.h, ebpf/lib/exit.bpf.h). The kernel skips a
//! trampoline program for a call made while that program is already running on the CPU: a task
//! preempted inside it (PREEMPT_RT, full and lazy preemption preempt inside BPF programs) or an
//! interrupt that landed in it. It does not skip another program, the copy, which then enters or
//! closes the call in the lead's place.
//!
//! A copy is the lead's instructions from the object copy ([`crate::object::object_copy`]) with its one
//! role instruction patched ([`super::role::cast_as_understudy`]), loaded by our own loader for
//! the same function and linked before its lead: the kernel runs the programs of a function last
//! linked first, and an understudy runs after its lead.

use super::role::{name_of, Role};
use crate::object::bpf_syscalls::link_tracing;
use crate::object::object_copy::{CopyError, ObjectCopy};
use crate::timing::timed;
use aya::Btf;
use aya_obj::btf::BtfKind;
use std::os::fd::OwnedFd;

/// An understudy loaded and linked to its function, for as long as the probes live.
pub(crate) struct Understudy {
    pub name: String,
    pub program: OwnedFd,
    #[expect(
        dead_code,
        reason = "held: the function stays linked while the link is open"
    )]
    link: OwnedFd,
}

/// Loads the understudy of `lead` (a fentry or fexit program, `attach_type` says which) from
/// `copy` and links it to `function`, whose id `btf` has.
pub(crate) fn attach(
    copy: &ObjectCopy,
    btf: &Btf,
    lead: &'static str,
    function: &str,
    attach_type: u32,
) -> Result<Understudy, CopyError> {
    let name = name_of(lead);
    let id = btf
        .id_by_type_name_kind(function, BtfKind::Func)
        .map_err(|e| CopyError::NoFunction {
            program: name.clone(),
            function: function.to_string(),
            reason: e.to_string(),
        })?;
    let program = copy.load_timed(btf, lead, Role::Understudy, attach_type, id)?;
    let link = timed(&name, "attached", || link_tracing(&program, attach_type)).map_err(|e| {
        CopyError::Link {
            program: name.clone(),
            functions: function.to_string(),
            reason: e.to_string(),
        }
    })?;
    Ok(Understudy {
        name,
        program,
        link,
    })
}
