//! The role a copy of a timed program plays (ebpf/lib/role.bpf.h): the lead, as built, or its
//! understudy ([`super::understudy`]), the same instructions with their one role instruction
//! patched ([`cast_as_understudy`]), under a name of its own ([`name_of`]).

use crate::abi::{IOMMUTOP_ROLE_LEAD, IOMMUTOP_ROLE_UNDERSTUDY};
use aya_obj::generated::bpf_insn;

/// The role a copy of a timed program plays (ebpf/lib/role.bpf.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// As built: the program that times its calls.
    Lead,
    /// The same instructions with their role patched: acts where its lead's run was skipped.
    Understudy,
}

impl Role {
    /// The name a program's copy in this role goes by (the lead's own, or [`name_of`] it).
    pub(crate) fn program_name(self, lead: &str) -> String {
        match self {
            Role::Lead => lead.to_string(),
            Role::Understudy => name_of(lead),
        }
    }
}

/// BPF_ALU64 | BPF_MOV | BPF_K: the role instruction, `r = IOMMUTOP_ROLE_LEAD`.
const MOV64_IMM: u8 = 0xb7;

/// The name an understudy goes by: its lead's, marked.
pub(crate) fn name_of(lead: &str) -> String {
    format!("{lead}.understudy")
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum RoleError {
    #[error(
        "the program has no role instruction to make an understudy of (rebuild the BPF object)"
    )]
    NoRole,
}

/// Patches every role instruction of a lead's `instructions` into an understudy's; how many
/// there were.
pub(crate) fn cast_as_understudy(instructions: &mut [bpf_insn]) -> Result<usize, RoleError> {
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
        let object = crate::object::load::TaskStacks::for_this_kernel().object();
        let parsed = aya_obj::Object::parse(object).expect("the object parses");
        let timed = crate::points::table::POINTS
            .iter()
            .flat_map(|point| point.functions)
            .filter_map(|hook| hook.fentry)
            .flat_map(|programs| programs.names())
            .chain(crate::links::multi_shapes::Family::every_program());
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
