//! How many parameters kernel functions take, read from the kernel's BTF: an fexit program finds
//! its function's return value right after the arguments (`ctx[arity]`), and the arity differs
//! between kernels (`iommu_map` gained a `gfp_t` in 6.3). The loader tells each fexit program
//! where to look before load (`<program>__ret_at`, see `ebpf/lib/common.bpf.h`), which is how
//! kernels without `bpf_get_func_ret` (before 5.17) get fexit programs at all.
//!
//! Only what that needs is parsed: the type section's records are walked by kind to find each
//! `FUNC` and the parameter count of its `FUNC_PROTO` (include/uapi/linux/btf.h).

use std::collections::{BTreeMap, BTreeSet};

const BTF_MAGIC: u16 = 0xeb9f;
const TYPE_RECORD: usize = 12;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ArityError {
    #[error("not BTF (no 0xeb9f magic, or another byte order)")]
    NotBtf,
    #[error("BTF truncated at byte {0}")]
    Truncated(usize),
    #[error("BTF type {id} has unknown kind {kind}")]
    UnknownKind { id: usize, kind: u32 },
}

/// Bytes that follow a type record of `kind` with `vlen` members, or None for a kind this
/// parser does not know (a newer kernel's).
fn trailing_bytes(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        1 | 14 | 17 => 4,             // INT, VAR, DECL_TAG
        3 => 12,                      // ARRAY
        4 | 5 | 15 | 19 => 12 * vlen, // STRUCT, UNION, DATASEC, ENUM64
        6 | 13 => 8 * vlen,           // ENUM, FUNC_PROTO
        2 | 7..=12 | 16 | 18 => 0,    // PTR, FWD, TYPEDEF, modifiers, FUNC, FLOAT, TYPE_TAG
        _ => return None,
    })
}

fn u32_at(data: &[u8], at: usize) -> Result<u32, ArityError> {
    data.get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or(ArityError::Truncated(at))
}

fn name_at(strings: &[u8], offset: usize) -> Option<&str> {
    let tail = strings.get(offset..)?;
    let end = tail.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&tail[..end]).ok()
}

/// A function's prototype: how many parameters, and whether it returns a value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arity {
    pub params: u32,
    pub returns_value: bool,
}

/// The prototype of each function of `wanted` that the BTF describes (the first, where a name is
/// described twice: the one aya binds an fentry to).
pub fn function_arities(
    btf: &[u8],
    wanted: &BTreeSet<&str>,
) -> Result<BTreeMap<String, Arity>, ArityError> {
    let magic = btf
        .get(0..2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .ok_or(ArityError::Truncated(0))?;
    if magic != BTF_MAGIC {
        return Err(ArityError::NotBtf);
    }
    let header_len = u32_at(btf, 4)? as usize;
    let (type_off, type_len) = (u32_at(btf, 8)? as usize, u32_at(btf, 12)? as usize);
    let (str_off, str_len) = (u32_at(btf, 16)? as usize, u32_at(btf, 20)? as usize);
    let types = btf
        .get(header_len + type_off..header_len + type_off + type_len)
        .ok_or(ArityError::Truncated(header_len + type_off))?;
    let strings = btf
        .get(header_len + str_off..header_len + str_off + str_len)
        .ok_or(ArityError::Truncated(header_len + str_off))?;

    // Type ids start at 1; a prototype's arity by its id, each wanted FUNC's prototype.
    let mut protos: Vec<Option<Arity>> = vec![None];
    let mut funcs: Vec<(&str, usize)> = Vec::new();
    let mut at = 0;
    while at < types.len() {
        let id = protos.len();
        let (name_off, info, size_or_type) = (
            u32_at(types, at)?,
            u32_at(types, at + 4)?,
            u32_at(types, at + 8)?,
        );
        let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        let trailing = trailing_bytes(kind, vlen).ok_or(ArityError::UnknownKind { id, kind })?;
        protos.push((kind == 13).then_some(Arity {
            params: vlen as u32,
            returns_value: size_or_type != 0,
        }));
        if kind == 12 {
            if let Some(name) = name_at(strings, name_off as usize).filter(|n| wanted.contains(n)) {
                funcs.push((name, size_or_type as usize));
            }
        }
        at += TYPE_RECORD + trailing;
    }
    let mut arities = BTreeMap::new();
    for (name, proto) in funcs {
        if let Some(Some(arity)) = protos.get(proto) {
            arities.entry(name.to_string()).or_insert(*arity);
        }
    }
    Ok(arities)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob of `types` (each a record and its trailing bytes) and a string section.
    fn btf(types: &[Vec<u8>], strings: &[u8]) -> Vec<u8> {
        let type_bytes: Vec<u8> = types.concat();
        let mut out = Vec::new();
        out.extend_from_slice(&BTF_MAGIC.to_le_bytes());
        out.extend_from_slice(&[1, 0]);
        for word in [24u32, 0, type_bytes.len() as u32, type_bytes.len() as u32] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&(strings.len() as u32).to_le_bytes());
        out.extend_from_slice(&type_bytes);
        out.extend_from_slice(strings);
        out
    }

    fn record(name_off: u32, kind: u32, vlen: u32, size_or_type: u32, trailing: usize) -> Vec<u8> {
        let mut r = Vec::new();
        for word in [name_off, (kind << 24) | vlen, size_or_type] {
            r.extend_from_slice(&word.to_le_bytes());
        }
        r.resize(TYPE_RECORD + trailing, 0);
        r
    }

    #[test]
    fn a_function_s_arity_is_its_prototype_s_parameter_count() {
        // "\0int\0iommu_map\0iova_free\0": ids 1 INT, 2 FUNC_PROTO (6 params), 3 FUNC iommu_map,
        // 4 struct with 2 members (skipped by its size), 5 FUNC_PROTO (3), 6 FUNC iova_free.
        let strings = b"\0int\0iommu_map\0iova_free\0";
        let blob = btf(
            &[
                record(1, 1, 0, 4, 4),
                record(0, 13, 6, 1, 6 * 8),
                record(5, 12, 0, 2, 0),
                record(0, 4, 2, 16, 2 * 12),
                record(0, 13, 3, 0, 3 * 8),
                record(15, 12, 0, 5, 0),
            ],
            strings,
        );
        let wanted = BTreeSet::from(["iommu_map", "iova_free", "absent"]);
        let arities = function_arities(&blob, &wanted).expect("parses");
        let of = |name| {
            arities
                .get(name)
                .map(|a: &Arity| (a.params, a.returns_value))
        };
        assert_eq!(of("iommu_map"), Some((6, true)));
        assert_eq!(
            of("iova_free"),
            Some((3, false)),
            "a prototype returning type 0 is void"
        );
        assert_eq!(arities.get("absent"), None);
    }

    #[test]
    fn the_first_description_of_a_name_wins() {
        let strings = b"\0f\0";
        let blob = btf(
            &[
                record(0, 13, 2, 0, 16),
                record(1, 12, 0, 1, 0),
                record(0, 13, 5, 0, 40),
                record(1, 12, 0, 3, 0),
            ],
            strings,
        );
        let arities = function_arities(&blob, &BTreeSet::from(["f"])).expect("parses");
        assert_eq!(arities.get("f").map(|a| a.params), Some(2));
    }

    #[test]
    fn what_is_not_btf_is_refused_not_misread() {
        assert_eq!(
            function_arities(b"\x7fELF....", &BTreeSet::new()),
            Err(ArityError::NotBtf)
        );
        let mut blob = btf(&[record(0, 1, 0, 4, 4)], b"\0");
        blob.truncate(30);
        assert!(matches!(
            function_arities(&blob, &BTreeSet::new()),
            Err(ArityError::Truncated(_))
        ));
        let unknown = btf(&[record(0, 31, 0, 0, 0)], b"\0");
        assert_eq!(
            function_arities(&unknown, &BTreeSet::new()),
            Err(ArityError::UnknownKind { id: 1, kind: 31 })
        );
    }

    #[test]
    fn the_running_kernel_s_dma_api_has_the_arities_the_fexit_programs_expect() {
        let Ok(blob) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            panic!("/sys/kernel/btf/vmlinux: this test needs a kernel with BTF");
        };
        let wanted = BTreeSet::from(["dma_unmap_page_attrs", "dma_map_sg_attrs"]);
        let arities = function_arities(&blob, &wanted).expect("the kernel's BTF parses");
        // include/linux/dma-mapping.h, unchanged from 5.10 to 6.18.
        let of = |name| {
            arities
                .get(name)
                .map(|a: &Arity| (a.params, a.returns_value))
        };
        assert_eq!(of("dma_unmap_page_attrs"), Some((5, false)));
        assert_eq!(of("dma_map_sg_attrs"), Some((5, true)));
    }
}
