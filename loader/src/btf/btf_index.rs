//! What the loader needs of the kernel's BTF, from one walk of it ([`super::btf_walk`]):
//!
//! - How many parameters each hooked function takes. An fexit program finds its function's
//!   return value right after the arguments (`ctx[arity]`), and the arity differs between
//!   kernels (`iommu_map` gained a `gfp_t` in 6.3): the loader tells each fexit program where to
//!   look before load (`<program>__ret_at`, see `ebpf/lib/common.bpf.h`), which is how kernels
//!   without `bpf_get_func_ret` (before 5.17) get fexit programs at all.
//! - The BTF type id of each hooked function and tracepoint, which fentry, fexit and BTF
//!   tracepoint programs are loaded against. aya finds that id with a linear search of the BTF
//!   it is given, reading the name of every function on the way, for every program of a run,
//!   after a parse of all of it (both timed in docs/measurements.md, "What the loader no longer
//!   does"). Given
//!   instead [`BtfIndex::attach_targets`], a BTF that holds only the hooked names, each at its
//!   id in the kernel's BTF with a nameless placeholder at every other id, it finds the same id
//!   comparing only those.
//! - The BTF type id of each kernel struct a multi-function program casts a pointer to, and of
//!   the kfunc that casts it ([`crate::links::multi_cast`]), in the same BTF.

use super::btf_walk::{
    blob, record, walk_types, BtfWalkError, KIND_FUNC, KIND_FUNC_PROTO, KIND_PTR, KIND_STRUCT,
    KIND_TYPEDEF, TYPE_RECORD,
};
use aya::{Btf, BtfError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The prefix of the typedef a BTF tracepoint is found by (aya's `BtfTracePoint::load`).
pub const TRACEPOINT_TYPEDEF: &str = "btf_trace_";

/// A function's prototype: how many parameters, and whether it returns a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arity {
    pub params: u32,
    pub returns_value: bool,
}

/// A hooked function as the kernel's BTF describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookedFunction {
    pub id: u32,
    /// None where its FUNC names no FUNC_PROTO.
    pub arity: Option<Arity>,
}

/// The hooked functions and tracepoints the kernel's BTF describes: the first of each name, the
/// one aya's search of the whole BTF finds. A name the kernel lacks is not here, as it is not
/// there: its program's load fails as one for a function this kernel does not have.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BtfIndex {
    pub functions: BTreeMap<String, HookedFunction>,
    /// Tracepoints by event name (`sched_switch`), with the id of their `btf_trace_` typedef.
    pub tracepoints: BTreeMap<String, u32>,
    /// Structs by name, with their id: the first of each name.
    #[serde(default)]
    pub structs: BTreeMap<String, u32>,
}

impl BtfIndex {
    /// Walks `btf` once for `functions`, `tracepoints` and `structs`.
    pub fn walk(
        btf: &[u8],
        functions: &BTreeSet<&str>,
        tracepoints: &BTreeSet<&str>,
        structs: &BTreeSet<&str>,
    ) -> Result<BtfIndex, BtfWalkError> {
        // A prototype's arity by its id (ids start at 1); each wanted FUNC's prototype id.
        let mut protos: Vec<Option<Arity>> = vec![None];
        let mut funcs: BTreeMap<&str, (u32, usize)> = BTreeMap::new();
        let mut typedefs = BTreeMap::new();
        let mut found_structs = BTreeMap::new();
        walk_types(btf, |r| {
            protos.push((r.kind == KIND_FUNC_PROTO).then_some(Arity {
                params: r.vlen as u32,
                returns_value: r.size_or_type != 0,
            }));
            match r.kind {
                KIND_FUNC => {
                    if let Some(name) = r.name().filter(|name| functions.contains(name)) {
                        funcs
                            .entry(name)
                            .or_insert((r.id as u32, r.size_or_type as usize));
                    }
                }
                KIND_TYPEDEF => {
                    let event = r.name().and_then(|n| n.strip_prefix(TRACEPOINT_TYPEDEF));
                    if let Some(event) = event.filter(|event| tracepoints.contains(event)) {
                        typedefs.entry(event.to_string()).or_insert(r.id as u32);
                    }
                }
                KIND_STRUCT => {
                    if let Some(name) = r.name().filter(|name| structs.contains(name)) {
                        found_structs.entry(name.to_string()).or_insert(r.id as u32);
                    }
                }
                _ => {}
            }
        })?;
        let functions = funcs
            .into_iter()
            .map(|(name, (id, proto))| {
                let arity = protos.get(proto).copied().flatten();
                (name.to_string(), HookedFunction { id, arity })
            })
            .collect();
        Ok(BtfIndex {
            functions,
            tracepoints: typedefs,
            structs: found_structs,
        })
    }

    /// The prototype of each function found that has one.
    pub fn arities(&self) -> BTreeMap<String, Arity> {
        self.functions
            .iter()
            .filter_map(|(name, function)| Some((name.clone(), function.arity?)))
            .collect()
    }

    /// What fentry, fexit and BTF tracepoint programs are loaded against: a BTF of ids 1 to the
    /// last found, each function, tracepoint typedef and struct (empty) found at its id, a
    /// nameless pointer to void at every other.
    pub fn attach_targets(&self) -> Result<Btf, BtfError> {
        let named = self
            .functions
            .iter()
            .map(|(name, function)| (function.id, KIND_FUNC, name.clone()))
            .chain(
                self.tracepoints
                    .iter()
                    .map(|(event, id)| (*id, KIND_TYPEDEF, format!("{TRACEPOINT_TYPEDEF}{event}"))),
            )
            .chain(
                self.structs
                    .iter()
                    .map(|(name, id)| (*id, KIND_STRUCT, name.clone())),
            );
        let mut strings = vec![0u8];
        let mut records: BTreeMap<u32, [u8; TYPE_RECORD]> = BTreeMap::new();
        for (id, kind, name) in named {
            let name_off = strings.len() as u32;
            strings.extend_from_slice(name.as_bytes());
            strings.push(0);
            records.insert(id, record(name_off, kind, 0, 0));
        }
        let last = records.keys().next_back().copied().unwrap_or(0) as usize;
        let mut types = record(0, KIND_PTR, 0, 0).repeat(last);
        for (id, bytes) in records {
            let at = (id as usize - 1) * TYPE_RECORD;
            types[at..at + TYPE_RECORD].copy_from_slice(&bytes);
        }
        Btf::parse(&blob(&types, &strings), aya::Endianness::Little)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::btf_walk::with_trailing;
    use aya_obj::btf::BtfKind;

    /// "\0int\0iommu_map\0iova_free\0btf_trace_e\0": ids 1 INT, 2 FUNC_PROTO (6 params), 3 FUNC
    /// iommu_map, 4 STRUCT of 2 members (skipped by its size), 5 FUNC_PROTO (3, void), 6 FUNC
    /// iova_free, 7 TYPEDEF btf_trace_e, 8 FUNC_PROTO (2), 9 FUNC iommu_map again (a second
    /// static function of the name).
    fn kernel_like() -> Vec<u8> {
        let strings = b"\0int\0iommu_map\0iova_free\0btf_trace_e\0";
        let types = [
            with_trailing(record(1, 1, 0, 4), 4),
            with_trailing(record(0, KIND_FUNC_PROTO, 6, 1), 6 * 8),
            with_trailing(record(5, KIND_FUNC, 0, 2), 0),
            with_trailing(record(0, 4, 2, 16), 2 * 12),
            with_trailing(record(0, KIND_FUNC_PROTO, 3, 0), 3 * 8),
            with_trailing(record(15, KIND_FUNC, 0, 5), 0),
            with_trailing(record(25, KIND_TYPEDEF, 0, 2), 0),
            with_trailing(record(0, KIND_FUNC_PROTO, 2, 1), 2 * 8),
            with_trailing(record(5, KIND_FUNC, 0, 8), 0),
        ]
        .concat();
        blob(&types, strings)
    }

    fn index(functions: &[&str], tracepoints: &[&str]) -> BtfIndex {
        let (functions, tracepoints) = (
            functions.iter().copied().collect(),
            tracepoints.iter().copied().collect(),
        );
        BtfIndex::walk(&kernel_like(), &functions, &tracepoints, &BTreeSet::new()).expect("walks")
    }

    #[test]
    fn a_function_s_arity_is_its_prototype_s_parameter_count() {
        let arities = index(&["iommu_map", "iova_free", "absent"], &[]).arities();
        let of = |name| {
            arities
                .get(name)
                .map(|a: &Arity| (a.params, a.returns_value))
        };
        assert_eq!(
            of("iommu_map"),
            Some((6, true)),
            "the first of two functions of one name"
        );
        assert_eq!(
            of("iova_free"),
            Some((3, false)),
            "a prototype returning type 0 is void"
        );
        assert_eq!(arities.get("absent"), None);
    }

    #[test]
    fn each_hooked_name_is_found_at_its_kernel_id_as_aya_finds_it_there() {
        let targets = index(&["iommu_map", "iova_free"], &["e"])
            .attach_targets()
            .expect("parses");
        let whole = Btf::parse(&kernel_like(), aya::Endianness::Little).expect("aya parses it");
        for (name, kind, id) in [
            ("iommu_map", BtfKind::Func, 3),
            ("iova_free", BtfKind::Func, 6),
            ("btf_trace_e", BtfKind::Typedef, 7),
        ] {
            assert_eq!(whole.id_by_type_name_kind(name, kind).ok(), Some(id));
            assert_eq!(
                targets.id_by_type_name_kind(name, kind).ok(),
                Some(id),
                "{name}"
            );
        }
    }

    #[test]
    fn a_name_the_kernel_lacks_or_not_asked_for_is_absent_as_from_the_kernel_s_btf() {
        let targets = index(&["iommu_map", "not_in_this_kernel"], &[])
            .attach_targets()
            .expect("parses");
        assert!(matches!(
            targets.id_by_type_name_kind("not_in_this_kernel", BtfKind::Func),
            Err(BtfError::UnknownBtfTypeName { .. })
        ));
        assert!(targets
            .id_by_type_name_kind("iova_free", BtfKind::Func)
            .is_err());
        assert!(
            BtfIndex::default().attach_targets().is_ok(),
            "nothing found"
        );
    }

    #[test]
    fn the_running_kernel_s_hooked_names_have_their_ids_and_the_dma_api_its_arities() {
        let Ok(kernel) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            panic!("/sys/kernel/btf/vmlinux: this test needs a kernel with BTF");
        };
        let functions = BTreeSet::from(["dma_unmap_page_attrs", "dma_map_sg_attrs", "schedule"]);
        let tracepoints = BTreeSet::from(["sched_switch", "napi_poll"]);
        let structs = BTreeSet::from(["device", "scatterlist"]);
        let index = BtfIndex::walk(&kernel, &functions, &tracepoints, &structs).expect("walks");
        // include/linux/dma-mapping.h, unchanged from 5.10 to 6.18.
        let arities = index.arities();
        let of = |name| {
            arities
                .get(name)
                .map(|a: &Arity| (a.params, a.returns_value))
        };
        assert_eq!(of("dma_unmap_page_attrs"), Some((5, false)));
        assert_eq!(of("dma_map_sg_attrs"), Some((5, true)));
        let targets = index.attach_targets().expect("parses");
        let whole = Btf::parse(&kernel, aya::Endianness::Little).expect("aya parses it");
        let names = functions
            .iter()
            .map(|f| (f.to_string(), BtfKind::Func))
            .chain(
                tracepoints
                    .iter()
                    .map(|t| (format!("{TRACEPOINT_TYPEDEF}{t}"), BtfKind::Typedef)),
            )
            .chain(structs.iter().map(|s| (s.to_string(), BtfKind::Struct)));
        for (name, kind) in names {
            let id = whole
                .id_by_type_name_kind(&name, kind)
                .expect("in the kernel");
            assert_eq!(
                targets.id_by_type_name_kind(&name, kind).ok(),
                Some(id),
                "{name}"
            );
        }
    }
}
