//! Understudies: a second copy of each timed fentry and fexit program (and of each multi-function
//! family's), attached to the same functions, that acts only where its lead evidently did not
//! (ebpf/lib/role.bpf.h, ebpf/lib/track.bpf.h). The kernel skips a trampoline program for a call
//! made while that program is already running on the CPU: a task preempted inside it (PREEMPT_RT,
//! full and lazy preemption preempt inside BPF programs) or an interrupt that landed in it. It does
//! not skip another program, the copy, which then enters or closes the call in the lead's place.
//!
//! A copy is the lead's instructions from the object copy ([`super::object_copy`]) with its one
//! role instruction patched ([`cast_as_understudy`]), loaded by our own loader for the same
//! function and linked before its lead: the kernel runs the programs of a function last linked
//! first, and an understudy runs after its lead.

use super::abi::{IOMMUTOP_ROLE_LEAD, IOMMUTOP_ROLE_UNDERSTUDY};
use super::bpf_syscalls::link_tracing;
use super::object_copy::{ObjectCopy, Role};
use super::timing::timed;
use aya::Btf;
use aya_obj::btf::BtfKind;
use aya_obj::generated::bpf_insn;
use std::os::fd::OwnedFd;

/// BPF_ALU64 | BPF_MOV | BPF_K: the role instruction, `r = IOMMUTOP_ROLE_LEAD`.
const MOV64_IMM: u8 = 0xb7;

/// The name an understudy goes by: its lead's, marked.
pub(super) fn name_of(lead: &str) -> String {
    format!("{lead}.understudy")
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(super) enum RoleError {
    #[error(
        "the program has no role instruction to make an understudy of (rebuild the BPF object)"
    )]
    NoRole,
}

/// Patches every role instruction of a lead's `instructions` into an understudy's; how many
/// there were.
pub(super) fn cast_as_understudy(instructions: &mut [bpf_insn]) -> Result<usize, RoleError> {
    let mut patched = 0;
    for insn in instructions.iter_mut() {
        if insn.code == MOV64_IMM && insn.imm as u32 == IOMMUTOP_ROLE_LEAD {
            insn.imm = IOMMUTOP_ROLE_UNDERSTUDY as i32;
            patched += 1;
        }
    }
    if patched == 0 {
        return Err(RoleError::NoRole);
    }
    Ok(patched)
}

/// An understudy loaded and linked to its function, for as long as the probes live.
pub(super) struct Understudy {
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
pub(super) fn attach(
    copy: &ObjectCopy,
    btf: &Btf,
    lead: &'static str,
    function: &str,
    attach_type: u32,
) -> Result<Understudy, String> {
    let name = name_of(lead);
    let id = btf
        .id_by_type_name_kind(function, BtfKind::Func)
        .map_err(|e| format!("{name}: {function} in the kernel's BTF: {e}"))?;
    let program = copy.load_timed(btf, lead, Role::Understudy, attach_type, id)?;
    let link = timed(&name, "attached", || link_tracing(&program, attach_type))
        .map_err(|e| format!("{name}: linking {function}: {e}"))?;
    Ok(Understudy {
        name,
        program,
        link,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mov(imm: u32) -> bpf_insn {
        // SAFETY: bpf_insn is plain integers, for which all zeroes is a value.
        let mut insn: bpf_insn = unsafe { std::mem::zeroed() };
        insn.code = MOV64_IMM;
        insn.imm = imm as i32;
        insn
    }

    #[test]
    fn every_role_instruction_becomes_an_understudy_s_and_nothing_else_changes() {
        let mut program = [mov(IOMMUTOP_ROLE_LEAD), mov(7), mov(IOMMUTOP_ROLE_LEAD)];
        assert_eq!(cast_as_understudy(&mut program), Ok(2));
        let imms: Vec<u32> = program.iter().map(|i| i.imm as u32).collect();
        assert_eq!(
            imms,
            [IOMMUTOP_ROLE_UNDERSTUDY, 7, IOMMUTOP_ROLE_UNDERSTUDY]
        );
    }

    #[test]
    fn a_program_without_a_role_is_an_error_not_a_silent_lead() {
        assert_eq!(cast_as_understudy(&mut [mov(7)]), Err(RoleError::NoRole));
    }

    /// Every timed program as built carries its role: the loader can make an understudy of it.
    #[test]
    fn every_built_fentry_and_fexit_program_has_a_role_to_patch() {
        let object = crate::probes::load::TaskStacks::for_this_kernel().object();
        let parsed = aya_obj::Object::parse(object).expect("the object parses");
        let timed = super::super::table::POINTS
            .iter()
            .flat_map(|point| point.functions)
            .filter_map(|hook| hook.fentry)
            .flat_map(|programs| programs.names())
            .chain(super::super::multi_shapes::Family::every_program());
        for name in timed {
            let program = &parsed.programs[name];
            let mut instructions = parsed.functions[&program.function_key()]
                .instructions
                .clone();
            assert!(
                cast_as_understudy(&mut instructions).is_ok(),
                "{name} has no role instruction"
            );
        }
    }
}
