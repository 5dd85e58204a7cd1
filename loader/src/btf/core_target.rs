//! The part of the kernel's BTF the object's CO-RE relocations can read, cut out as a BTF of its
//! own to relocate against. For each type a relocation starts from, aya looks for candidates with
//! a search of every kernel type of its kind, reading each one's name: the largest part of its
//! relocation of this object, natively and under emulation, where nothing else can start until it
//! ends (docs/measurements.md, "What the loader no longer does"). Searched in this cut, the same candidates are found
//! among a few hundred types.
//!
//! What a relocation can read of the kernel's types, starting from the types the object names:
//! their members, arrays, typedefs and modifiers, enum values, sizes and names. Not what a
//! pointer points to: a field's access path stops at a pointer (the next read is a relocation of
//! its own, from its own named type), and aya's check of a field's type calls any two pointers
//! compatible without following them. So the cut keeps every kernel type named like one of the
//! object's (without a `___flavor` suffix), and what those reach except through a pointer; each
//! kept pointer points to void. Each type keeps its kind, size, layout and names; only ids
//! change, which no relocation of this object reads (it has no `bpf_core_type_id_kernel`).
//! A unit test relocates the object against both this cut and the whole BTF and compares every
//! instruction.

use super::btf_walk::{
    blob, walk_types, BtfWalkError, TypeRecord, KIND_PTR, KIND_STRUCT, TYPE_RECORD,
};
use std::collections::{BTreeSet, HashMap};

const KIND_INT: u32 = 1;
const KIND_ARRAY: u32 = 3;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FWD: u32 = 7;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_FLOAT: u32 = 16;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// Kinds a relocation's starting type can have: named, and searched for by name.
const NAMED_KINDS: [u32; 8] = [
    KIND_INT,
    KIND_STRUCT,
    KIND_UNION,
    KIND_ENUM,
    KIND_FWD,
    KIND_TYPEDEF,
    KIND_FLOAT,
    KIND_ENUM64,
];

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CutError {
    #[error("{0}")]
    Walk(#[from] BtfWalkError),
    #[error("the object's BTF: {0}")]
    Object(String),
    #[error(
        "BTF type {id} ({kind}) reached from a type the object names, which the cut does not keep"
    )]
    Unexpected { id: usize, kind: u32 },
    #[error("BTF type {id} refers to type {to}, which the BTF does not have")]
    Dangling { id: usize, to: u32 },
}

/// A name without its `___flavor` suffix, as CO-RE matches it.
fn flavorless(name: &str) -> &str {
    name.split_once("___").map_or(name, |(name, _)| name)
}

/// The names of the types `object`'s BTF describes, flavorless: every type a relocation can
/// start from is among them.
pub fn object_type_names(object: &[u8]) -> Result<BTreeSet<String>, CutError> {
    let parsed = aya_obj::Object::parse(object).map_err(|e| CutError::Object(e.to_string()))?;
    let btf = parsed
        .btf
        .ok_or_else(|| CutError::Object("the object has no BTF".into()))?
        .to_bytes();
    let mut names = BTreeSet::new();
    walk_types(&btf, |r| {
        if let Some(name) = r.name().filter(|_| NAMED_KINDS.contains(&r.kind)) {
            names.insert(flavorless(name).to_string());
        }
    })?;
    Ok(names)
}

/// The cut of `kernel_btf` for types named as `names` are: a BTF blob.
pub fn cut(kernel_btf: &[u8], names: &BTreeSet<String>) -> Result<Vec<u8>, CutError> {
    let mut records: Vec<Option<TypeRecord>> = vec![None];
    walk_types(kernel_btf, |r| {
        records.push(Some(*r));
    })?;
    let record = |id: u32| records.get(id as usize).and_then(Option::as_ref);
    let mut kept = vec![false; records.len()];
    let mut reached: Vec<u32> = records
        .iter()
        .flatten()
        .filter(|r| NAMED_KINDS.contains(&r.kind))
        .filter(|r| r.name().is_some_and(|n| names.contains(flavorless(n))))
        .map(|r| r.id as u32)
        .collect();
    while let Some(id) = reached.pop() {
        if id == 0 || kept[id as usize] {
            continue;
        }
        let Some(r) = record(id) else {
            return Err(CutError::Dangling { id: 0, to: id });
        };
        kept[id as usize] = true;
        for to in references(r)? {
            if record(to).is_none() && to != 0 {
                return Err(CutError::Dangling { id: r.id, to });
            }
            reached.push(to);
        }
    }
    let mut new_ids = vec![0u32; records.len()];
    let mut next = 1;
    for (id, keep) in kept.iter().enumerate() {
        if *keep {
            new_ids[id] = next;
            next += 1;
        }
    }
    let mut writer = Writer::default();
    for r in records.iter().flatten().filter(|r| kept[r.id]) {
        writer.push(r, &new_ids);
    }
    Ok(blob(&writer.types, &writer.strings))
}

/// The types `r` reaches other than through a pointer.
fn references(r: &TypeRecord) -> Result<Vec<u32>, CutError> {
    Ok(match r.kind {
        KIND_INT | KIND_ENUM | KIND_FWD | KIND_FLOAT | KIND_ENUM64 | KIND_PTR => Vec::new(),
        KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
            vec![r.size_or_type]
        }
        KIND_ARRAY => vec![word(r.raw, TYPE_RECORD), word(r.raw, TYPE_RECORD + 4)],
        KIND_STRUCT | KIND_UNION => (0..r.vlen)
            .map(|m| word(r.raw, TYPE_RECORD + 12 * m + 4))
            .collect(),
        KIND_FUNC_PROTO => std::iter::once(r.size_or_type)
            .chain((0..r.vlen).map(|p| word(r.raw, TYPE_RECORD + 8 * p + 4)))
            .collect(),
        kind => return Err(CutError::Unexpected { id: r.id, kind }),
    })
}

fn word(raw: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([raw[at], raw[at + 1], raw[at + 2], raw[at + 3]])
}

fn set_word(raw: &mut [u8], at: usize, value: u32) {
    raw[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

/// The cut's type and string sections, written a record at a time.
#[derive(Default)]
struct Writer {
    types: Vec<u8>,
    strings: Vec<u8>,
    offsets: HashMap<String, u32>,
}

impl Writer {
    fn string(&mut self, r: &TypeRecord, offset: u32) -> u32 {
        if self.strings.is_empty() {
            self.strings.push(0);
        }
        let Some(name) = r.string_at(offset) else {
            return 0;
        };
        if let Some(at) = self.offsets.get(name) {
            return *at;
        }
        let at = self.strings.len() as u32;
        self.strings.extend_from_slice(name.as_bytes());
        self.strings.push(0);
        self.offsets.insert(name.to_string(), at);
        at
    }

    /// `r` with its names in this cut's strings and its references to types in this cut's ids
    /// (`new_ids`; a pointer's to void).
    fn push(&mut self, r: &TypeRecord, new_ids: &[u32]) {
        let mut raw = r.raw.to_vec();
        let name = self.string(r, r.name_off);
        set_word(&mut raw, 0, name);
        let id = |old: u32| new_ids[old as usize];
        match r.kind {
            KIND_PTR => set_word(&mut raw, 8, 0),
            KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                set_word(&mut raw, 8, id(r.size_or_type))
            }
            KIND_ARRAY => {
                for at in [TYPE_RECORD, TYPE_RECORD + 4] {
                    set_word(&mut raw, at, id(word(r.raw, at)));
                }
            }
            KIND_STRUCT | KIND_UNION => {
                for m in 0..r.vlen {
                    let at = TYPE_RECORD + 12 * m;
                    let member = self.string(r, word(r.raw, at));
                    set_word(&mut raw, at, member);
                    set_word(&mut raw, at + 4, id(word(r.raw, at + 4)));
                }
            }
            KIND_ENUM | KIND_ENUM64 => {
                let size = if r.kind == KIND_ENUM { 8 } else { 12 };
                for v in 0..r.vlen {
                    let at = TYPE_RECORD + size * v;
                    let value = self.string(r, word(r.raw, at));
                    set_word(&mut raw, at, value);
                }
            }
            KIND_FUNC_PROTO => {
                set_word(&mut raw, 8, id(r.size_or_type));
                for p in 0..r.vlen {
                    let at = TYPE_RECORD + 8 * p;
                    let param = self.string(r, word(r.raw, at));
                    set_word(&mut raw, at, param);
                    set_word(&mut raw, at + 4, id(word(r.raw, at + 4)));
                }
            }
            _ => {}
        }
        self.types.extend_from_slice(&raw);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::btf_walk::record;
    use crate::object::load::TaskStacks;
    use aya::Btf;

    fn with(record: [u8; TYPE_RECORD], trailing: &[u32]) -> Vec<u8> {
        let mut bytes = record.to_vec();
        for word in trailing {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        bytes
    }

    /// "\0int\0device\0ops\0next\0bus\0cb\0x\0": 1 INT int, 2 STRUCT device {int ops; struct
    /// bus *next}, 3 PTR -> 4, 4 STRUCT bus {void (*cb)}, 5 PTR -> 6, 6 FUNC_PROTO, 7 STRUCT x.
    fn kernel_like() -> Vec<u8> {
        let types = [
            with(record(1, KIND_INT, 0, 4), &[32]),
            with(record(5, KIND_STRUCT, 2, 16), &[12, 1, 0, 16, 3, 64]),
            with(record(0, KIND_PTR, 0, 4), &[]),
            with(record(21, KIND_STRUCT, 1, 8), &[25, 5, 0]),
            with(record(0, KIND_PTR, 0, 6), &[]),
            with(record(0, KIND_FUNC_PROTO, 0, 0), &[]),
            with(record(28, KIND_STRUCT, 0, 0), &[]),
        ]
        .concat();
        blob(&types, b"\0int\0device\0ops\0next\0bus\0cb\0x\0")
    }

    fn kinds_and_names(btf: &[u8]) -> Vec<(u32, Option<String>, u32)> {
        let mut seen = Vec::new();
        walk_types(btf, |r| {
            seen.push((r.kind, r.name().map(String::from), r.size_or_type))
        })
        .expect("walks");
        seen
    }

    #[test]
    fn a_named_type_keeps_its_members_types_and_its_pointers_point_to_void() {
        let names = BTreeSet::from([flavorless("device___old").to_string()]);
        let cut = cut(&kernel_like(), &names).expect("cuts");
        assert_eq!(
            kinds_and_names(&cut),
            [
                (KIND_INT, Some("int".into()), 4),
                (KIND_STRUCT, Some("device".into()), 16),
                (KIND_PTR, None, 0),
            ],
            "bus, its callback's pointer and prototype, and x are left out"
        );
        let whole = Btf::parse(&cut, aya::Endianness::Little);
        assert!(whole.is_ok(), "aya parses the cut: {whole:?}");
    }

    #[test]
    fn a_reference_to_a_type_the_btf_lacks_is_refused() {
        let types = with(record(1, KIND_TYPEDEF, 0, 9), &[]);
        assert_eq!(
            cut(&blob(&types, b"\0t\0"), &BTreeSet::from(["t".to_string()])),
            Err(CutError::Dangling { id: 1, to: 9 })
        );
    }

    /// Relocates `object` against `target` as aya's loader does before loading: every function's
    /// instructions afterwards.
    fn relocated(object: &[u8], target: &Btf) -> Result<Vec<(String, String)>, String> {
        let mut parsed = aya_obj::Object::parse(object).expect("the object parses");
        parsed.relocate_btf(target).map_err(|e| e.to_string())?;
        Ok(parsed
            .functions
            .values()
            .map(|f| (f.name.clone(), format!("{:?}", f.instructions)))
            .collect())
    }

    #[test]
    fn the_objects_relocate_against_the_cut_exactly_as_against_the_running_kernel_s_btf() {
        let Ok(kernel) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            panic!("/sys/kernel/btf/vmlinux: this test needs a kernel with BTF");
        };
        let whole = Btf::parse(&kernel, aya::Endianness::Little).expect("aya parses it");
        for stacks in [TaskStacks::SlotsByThread, TaskStacks::HashedByThread] {
            let object = stacks.object();
            let names = object_type_names(object).expect("the object's names");
            let cut = cut(&kernel, &names).expect("cuts");
            assert!(
                cut.len() * 10 < kernel.len(),
                "{} of {} bytes cut",
                cut.len(),
                kernel.len()
            );
            let cut = Btf::parse(&cut, aya::Endianness::Little).expect("aya parses the cut");
            let against_whole = relocated(object, &whole).expect("relocates against the whole");
            let against_cut = relocated(object, &cut).expect("relocates against the cut");
            assert_eq!(against_whole.len(), against_cut.len());
            for ((name, whole), (_, cut)) in against_whole.iter().zip(&against_cut) {
                assert!(whole == cut, "{stacks:?}: {name} relocates differently");
            }
            // The comparison sees a difference where there is one: against a cut of no type,
            // the relocations fail.
            let nothing = super::cut(&kernel, &BTreeSet::new()).expect("cuts");
            let nothing = Btf::parse(&nothing, aya::Endianness::Little).expect("aya parses it");
            assert!(relocated(object, &nothing) != Ok(against_whole));
        }
    }
}
