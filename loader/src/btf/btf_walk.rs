//! One pass over a BTF blob's type records (include/uapi/linux/btf.h), for what the loader needs
//! of the kernel's BTF without parsing all of it: each record's kind, its id, and its name only
//! when asked for: aya's full parse of the kernel's BTF is slow under emulation
//! (docs/measurements.md, "What the loader no longer does").

/// BTF's magic number, in the byte order this parser reads (little-endian).
pub const BTF_MAGIC: u16 = 0xeb9f;
/// A type record's fixed part: name offset, info, size or type.
pub const TYPE_RECORD: usize = 12;
/// The BTF header's length in the version this parser writes.
pub const HEADER_LEN: u32 = 24;

pub const KIND_PTR: u32 = 2;
pub const KIND_STRUCT: u32 = 4;
pub const KIND_TYPEDEF: u32 = 8;
pub const KIND_FUNC: u32 = 12;
pub const KIND_FUNC_PROTO: u32 = 13;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BtfWalkError {
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

fn u32_at(data: &[u8], at: usize) -> Result<u32, BtfWalkError> {
    data.get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or(BtfWalkError::Truncated(at))
}

/// One type record: its id (ids start at 1) and fixed fields, its name read on request.
#[derive(Clone, Copy)]
pub struct TypeRecord<'b> {
    pub id: usize,
    pub kind: u32,
    pub vlen: usize,
    pub size_or_type: u32,
    pub name_off: u32,
    /// The record as it is in the BTF, its trailing bytes (members, parameters, values) included.
    pub raw: &'b [u8],
    strings: &'b [u8],
}

impl<'b> TypeRecord<'b> {
    /// The record's name, or None where it has none or it is not UTF-8.
    pub fn name(&self) -> Option<&'b str> {
        self.string_at(self.name_off)
    }

    /// The string at `offset` of the BTF's string section (a member's or a value's name).
    pub fn string_at(&self, offset: u32) -> Option<&'b str> {
        let tail = self.strings.get(offset as usize..)?;
        let end = tail.iter().position(|&b| b == 0)?;
        std::str::from_utf8(&tail[..end])
            .ok()
            .filter(|n| !n.is_empty())
    }
}

/// Calls `visit` with each type record of `btf`, in id order.
pub fn walk_types<'b>(
    btf: &'b [u8],
    mut visit: impl FnMut(&TypeRecord<'b>),
) -> Result<(), BtfWalkError> {
    let magic = btf
        .get(0..2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .ok_or(BtfWalkError::Truncated(0))?;
    if magic != BTF_MAGIC {
        return Err(BtfWalkError::NotBtf);
    }
    let header_len = u32_at(btf, 4)? as usize;
    let (type_off, type_len) = (u32_at(btf, 8)? as usize, u32_at(btf, 12)? as usize);
    let (str_off, str_len) = (u32_at(btf, 16)? as usize, u32_at(btf, 20)? as usize);
    let types = btf
        .get(header_len + type_off..header_len + type_off + type_len)
        .ok_or(BtfWalkError::Truncated(header_len + type_off))?;
    let strings = btf
        .get(header_len + str_off..header_len + str_off + str_len)
        .ok_or(BtfWalkError::Truncated(header_len + str_off))?;
    let (mut at, mut id) = (0, 1);
    while at < types.len() {
        let info = u32_at(types, at + 4)?;
        let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        let trailing = trailing_bytes(kind, vlen).ok_or(BtfWalkError::UnknownKind { id, kind })?;
        let end = at + TYPE_RECORD + trailing;
        let record = TypeRecord {
            id,
            kind,
            vlen,
            size_or_type: u32_at(types, at + 8)?,
            name_off: u32_at(types, at)?,
            raw: types.get(at..end).ok_or(BtfWalkError::Truncated(end))?,
            strings,
        };
        visit(&record);
        at = end;
        id += 1;
    }
    Ok(())
}

/// A BTF blob of `types` (each a record and its trailing bytes, ids from 1) and `strings`.
pub fn blob(types: &[u8], strings: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN as usize + types.len() + strings.len());
    out.extend_from_slice(&BTF_MAGIC.to_le_bytes());
    out.extend_from_slice(&[1, 0]); // version 1, no flags
    let type_len = types.len() as u32;
    for word in [HEADER_LEN, 0, type_len, type_len, strings.len() as u32] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    out.extend_from_slice(types);
    out.extend_from_slice(strings);
    out
}

/// A type record without trailing bytes.
pub fn record(name_off: u32, kind: u32, vlen: u32, size_or_type: u32) -> [u8; TYPE_RECORD] {
    let mut bytes = [0; TYPE_RECORD];
    for (i, word) in [name_off, (kind << 24) | vlen, size_or_type]
        .into_iter()
        .enumerate()
    {
        bytes[i * 4..i * 4 + 4].copy_from_slice(&word.to_le_bytes());
    }
    bytes
}

/// `record` followed by `trailing` zero bytes: a type of test BTF with its members or values.
#[cfg(test)]
pub fn with_trailing(record: [u8; TYPE_RECORD], trailing: usize) -> Vec<u8> {
    let mut bytes = record.to_vec();
    bytes.resize(TYPE_RECORD + trailing, 0);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_in_id_order_with_their_names_read_on_request() {
        // "\0int\0f\0": ids 1 INT (4 trailing bytes), 2 STRUCT of 2 members, 3 FUNC f.
        let types = [
            with_trailing(record(1, 1, 0, 4), 4),
            with_trailing(record(0, 4, 2, 16), 2 * 12),
            with_trailing(record(5, KIND_FUNC, 0, 2), 0),
        ]
        .concat();
        let btf = blob(&types, b"\0int\0f\0");
        let mut seen = Vec::new();
        walk_types(&btf, |r| seen.push((r.id, r.kind, r.name()))).expect("walks");
        assert_eq!(
            seen,
            [(1, 1, Some("int")), (2, 4, None), (3, KIND_FUNC, Some("f"))]
        );
    }

    #[test]
    fn what_is_not_btf_is_refused_not_misread() {
        assert_eq!(
            walk_types(b"\x7fELF....", |_| {}),
            Err(BtfWalkError::NotBtf)
        );
        let mut truncated = blob(&with_trailing(record(0, 1, 0, 4), 4), b"\0");
        truncated.truncate(30);
        assert!(matches!(
            walk_types(&truncated, |_| {}),
            Err(BtfWalkError::Truncated(_))
        ));
        let unknown = blob(&record(0, 31, 0, 0), b"\0");
        assert_eq!(
            walk_types(&unknown, |_| {}),
            Err(BtfWalkError::UnknownKind { id: 1, kind: 31 })
        );
    }
}
