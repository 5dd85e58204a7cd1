//! The multi-function programs' typed reads (ebpf/lib/cast.bpf.h): their arguments are plain
//! numbers, and what they point at is cast to its kernel type with the kfunc `bpf_rdonly_cast`,
//! after which a field is one load (a helper read of it cost a DMA entry many more instructions:
//! docs/measurements.md, "Typed reads and the DMA page calls on their own programs"). aya cannot parse an object that calls a kfunc, so each cast is
//! written as two raw instructions that name no BTF id (abi.h, `IOMMUTOP_CAST_MARK`):
//! `r2 = IOMMUTOP_CAST_MARK | type` and a kfunc call whose immediate is
//! `IOMMUTOP_CAST_CALL_MARK`. Before load, [`complete`] gives them the kernel's ids: the type's
//! and the kfunc's, from the BTF the programs are attached with (where [`crate::btf::btf_index`] puts
//! them).

use crate::abi::iommutop_cast_type::IOMMUTOP_CAST_TYPES;
use crate::abi::{IOMMUTOP_CAST_CALL_MARK, IOMMUTOP_CAST_MARK};
use aya::Btf;
use aya_obj::btf::BtfKind;
use aya_obj::generated::bpf_insn;

/// The kfunc that casts.
pub(crate) const RDONLY_CAST: &str = "bpf_rdonly_cast";

/// The struct each `enum iommutop_cast_type` names, in its order.
pub(crate) const CAST_TYPES: [&str; IOMMUTOP_CAST_TYPES as usize] = [
    "device",
    "scatterlist",
    "sg_table",
    "iova_domain",
    "iommu_iotlb_gather",
];

/// BPF_JMP | BPF_CALL.
const CALL: u8 = 0x85;
/// BPF_ALU64 | BPF_MOV | BPF_K.
const MOV64_IMM: u8 = 0xb7;
/// A call's source register when it calls a kfunc (BPF_PSEUDO_KFUNC_CALL).
const KFUNC_CALL: u8 = 2;
/// The register that holds bpf_rdonly_cast's second argument, the type id.
const TYPE_ID_REG: u8 = 2;
const MARK_MASK: u32 = 0xffff_0000;

/// The kernel's BTF ids a cast needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CastIds {
    kfunc: u32,
    types: [u32; IOMMUTOP_CAST_TYPES as usize],
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum CastError {
    #[error("the kernel's BTF has no {0}")]
    Absent(String),
    #[error("instruction {0}: a cast without its type before it (rebuild the BPF object)")]
    NoType(usize),
    #[error(
        "instruction {0}: a cast to type {1}, which abi.h does not name (rebuild the BPF object)"
    )]
    UnknownType(usize, u32),
}

impl CastIds {
    /// The ids in `btf` (the kernel's, or a BTF that has its names at their ids).
    pub(crate) fn find(btf: &Btf) -> Result<CastIds, CastError> {
        let id = |name: &str, kind, what: &str| {
            btf.id_by_type_name_kind(name, kind)
                .map_err(|_| CastError::Absent(format!("{what}{name}")))
        };
        let kfunc = id(RDONLY_CAST, BtfKind::Func, "kfunc ")?;
        let mut types = [0; IOMMUTOP_CAST_TYPES as usize];
        for (slot, name) in types.iter_mut().zip(CAST_TYPES) {
            *slot = id(name, BtfKind::Struct, "struct ")?;
        }
        Ok(CastIds { kfunc, types })
    }
}

fn marked(value: i32, mark: u32) -> Option<u32> {
    let value = value as u32;
    (value & MARK_MASK == mark & MARK_MASK).then_some(value & !MARK_MASK)
}

/// Whether `instructions` hold a cast to complete (only the multi-function programs do).
pub(crate) fn casts_in(instructions: &[bpf_insn]) -> bool {
    instructions.iter().any(|i| {
        i.code == CALL && i.src_reg() == KFUNC_CALL && i.imm as u32 == IOMMUTOP_CAST_CALL_MARK
    })
}

/// Gives every cast in `instructions` the kernel's ids; returns how many there were.
pub(crate) fn complete(instructions: &mut [bpf_insn], ids: &CastIds) -> Result<usize, CastError> {
    let mut casts = 0;
    for at in 0..instructions.len() {
        let call = &instructions[at];
        if call.code != CALL
            || call.src_reg() != KFUNC_CALL
            || call.imm as u32 != IOMMUTOP_CAST_CALL_MARK
        {
            continue;
        }
        let type_at = at.checked_sub(1).ok_or(CastError::NoType(at))?;
        let load = &instructions[type_at];
        if load.code != MOV64_IMM || load.dst_reg() != TYPE_ID_REG {
            return Err(CastError::NoType(at));
        }
        let kind = marked(load.imm, IOMMUTOP_CAST_MARK).ok_or(CastError::NoType(at))?;
        let type_id = *ids
            .types
            .get(kind as usize)
            .ok_or(CastError::UnknownType(at, kind))?;
        instructions[type_at].imm = type_id as i32;
        instructions[at].imm = ids.kfunc as i32;
        casts += 1;
    }
    Ok(casts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(code: u8, dst: u8, src: u8, imm: u32) -> bpf_insn {
        // SAFETY: bpf_insn is plain integers, for which all zeroes is a value.
        let mut insn: bpf_insn = unsafe { std::mem::zeroed() };
        insn.code = code;
        insn.imm = imm as i32;
        insn.set_dst_reg(dst);
        insn.set_src_reg(src);
        insn
    }

    fn cast_to(kind: u32) -> [bpf_insn; 2] {
        [
            insn(MOV64_IMM, TYPE_ID_REG, 0, IOMMUTOP_CAST_MARK | kind),
            insn(CALL, 0, KFUNC_CALL, IOMMUTOP_CAST_CALL_MARK),
        ]
    }

    const IDS: CastIds = CastIds {
        kfunc: 70_001,
        types: [11, 12, 13, 14, 15],
    };

    #[test]
    fn each_cast_gets_its_type_s_id_and_the_kfunc_s() {
        let helper_call = insn(CALL, 0, 0, 6);
        let mut program = [cast_to(3).as_slice(), &[helper_call], &cast_to(0)].concat();
        assert_eq!(complete(&mut program, &IDS), Ok(2));
        let imms: Vec<i32> = program.iter().map(|i| i.imm).collect();
        assert_eq!(imms, [14, 70_001, 6, 11, 70_001]);
    }

    #[test]
    fn a_cast_the_loader_cannot_read_is_an_error_not_a_guess() {
        let call = insn(CALL, 0, KFUNC_CALL, IOMMUTOP_CAST_CALL_MARK);
        assert_eq!(complete(&mut [call], &IDS), Err(CastError::NoType(0)));
        let other_register = insn(MOV64_IMM, 3, 0, IOMMUTOP_CAST_MARK);
        assert_eq!(
            complete(&mut [other_register, call], &IDS),
            Err(CastError::NoType(1))
        );
        assert_eq!(
            complete(&mut cast_to(IOMMUTOP_CAST_TYPES), &IDS),
            Err(CastError::UnknownType(1, IOMMUTOP_CAST_TYPES))
        );
    }

    #[test]
    fn the_built_multi_function_programs_cast_and_every_cast_is_completed() {
        let object = crate::object::load::TaskStacks::for_this_kernel().object();
        let parsed = aya_obj::Object::parse(object).expect("the object parses");
        let mut casts = 0;
        for name in crate::links::multi_shapes::Family::every_program() {
            let program = &parsed.programs[name];
            let mut instructions = parsed.functions[&program.function_key()]
                .instructions
                .clone();
            casts += complete(&mut instructions, &IDS).expect("complete");
            assert!(
                instructions
                    .iter()
                    .all(|i| i.imm as u32 != IOMMUTOP_CAST_CALL_MARK),
                "{name}"
            );
        }
        assert!(casts > 0, "the device key's driver read is a cast");
    }

    #[test]
    fn the_running_kernel_names_every_cast_type_and_the_kfunc() {
        let btf = Btf::from_sys_fs().expect("this test needs a kernel with BTF");
        let ids = CastIds::find(&btf).expect("6.2+ has bpf_rdonly_cast");
        assert!(ids.types.iter().all(|id| *id > 0));
    }
}
