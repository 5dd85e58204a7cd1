//! The key of a snapshot's or a report's row ([`RowKey`]): one type for the several encodings a
//! row key has, each built and read in one place, written as the same string as before.

use crate::pci::PciAddress;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;

/// Key of the row that holds the deferred flush-queue timer's work.
pub const DEFERRED_KEY: &str = "deferred";

/// Key of the row that holds IOMMU work outside any DMA API call (VFIO maps, ...) that no process
/// owns (interrupt context); a process's own such work is on `unattributed:COMM[PID]`.
pub const UNATTRIBUTED_KEY: &str = "unattributed";

/// What kind of thing a row stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowKind {
    /// A PCI function, with the completions of its disks and netdevs folded in.
    Pci,
    /// A non-PCI `struct device` doing DMA (platform devices, ...).
    Device,
    /// Deferred work (flush-queue timer): no device was in flight.
    Deferred,
    /// IOMMU work outside any DMA API call (a VFIO map, ...).
    Unattributed,
    /// A disk whose PCI function sysfs did not tell.
    Disk,
    /// A netdev whose PCI function sysfs did not tell.
    Netdev,
}

/// What a row is keyed by. Two keys are equal when they are written as the same text (a key read
/// back from JSON equals the one written, whichever variant built it).
#[derive(Debug, Clone)]
pub enum RowKey {
    /// A PCI function: `0000:00:02.0`.
    Pci(PciAddress),
    /// Deferred work (flush-queue timer): `deferred`, or `deferred:NAME` when the kernel named
    /// the bucket (the IOMMU unit or domain).
    Deferred { bucket: Option<String> },
    /// IOMMU work outside the DMA API no process owns: `unattributed`, or `unattributed:NAME`
    /// when the kernel named it.
    Unattributed { name: Option<String> },
    /// One process's IOMMU work outside the DMA API: `unattributed:qemu[1234]`.
    Process { comm: String, pid: u64 },
    /// A source the kernel had no name for yet: `KIND@ID`, the id in hex (`disk@1f`).
    Unnamed { kind: &'static str, id: u64 },
    /// A source by its kernel name (a disk, a netdev, a device that is not PCI).
    Named(String),
}

impl RowKey {
    /// The key of a source of `kind` known only by its id.
    pub fn unnamed(kind: RowKind, id: u64) -> RowKey {
        RowKey::Unnamed {
            kind: kind_word(kind),
            id,
        }
    }

    /// Reads a key as [`fmt::Display`] writes it; a key of none of the structured forms (or not
    /// spelt as they are written) is a [`RowKey::Named`], so every key reads and writes back.
    pub fn parse(text: &str) -> RowKey {
        let structured = Self::structured(text);
        match structured {
            Some(key) if key.text() == text => key,
            _ => RowKey::Named(text.to_string()),
        }
    }

    fn structured(text: &str) -> Option<RowKey> {
        if let Ok(address) = text.parse() {
            return Some(RowKey::Pci(address));
        }
        if text == DEFERRED_KEY {
            return Some(RowKey::Deferred { bucket: None });
        }
        if text == UNATTRIBUTED_KEY {
            return Some(RowKey::Unattributed { name: None });
        }
        if let Some(bucket) = text.strip_prefix("deferred:") {
            return Some(RowKey::Deferred {
                bucket: Some(bucket.to_string()),
            });
        }
        if let Some(rest) = text.strip_prefix("unattributed:") {
            let process = rest.strip_suffix(']').and_then(|r| r.rsplit_once('['));
            return Some(
                match process.and_then(|(comm, pid)| Some((comm, pid.parse().ok()?))) {
                    Some((comm, pid)) => RowKey::Process {
                        comm: comm.to_string(),
                        pid,
                    },
                    None => RowKey::Unattributed {
                        name: Some(rest.to_string()),
                    },
                },
            );
        }
        let (kind, id) = text.split_once('@')?;
        let kind = UNNAMED_KINDS.iter().find(|k| **k == kind)?;
        Some(RowKey::Unnamed {
            kind,
            id: u64::from_str_radix(id, 16).ok()?,
        })
    }

    /// The key as it is written.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            RowKey::Named(name) => Cow::Borrowed(name),
            other => Cow::Owned(other.to_string()),
        }
    }

    /// The PCI function this key names, if it names one.
    pub fn pci_address(&self) -> Option<PciAddress> {
        match self {
            RowKey::Pci(address) => Some(*address),
            _ => None,
        }
    }
}

/// The words of [`RowKey::Unnamed`], one per kind of row.
const UNNAMED_KINDS: [&str; 6] = [
    "pci",
    "device",
    DEFERRED_KEY,
    UNATTRIBUTED_KEY,
    "disk",
    "netdev",
];

fn kind_word(kind: RowKind) -> &'static str {
    match kind {
        RowKind::Pci => UNNAMED_KINDS[0],
        RowKind::Device => UNNAMED_KINDS[1],
        RowKind::Deferred => UNNAMED_KINDS[2],
        RowKind::Unattributed => UNNAMED_KINDS[3],
        RowKind::Disk => UNNAMED_KINDS[4],
        RowKind::Netdev => UNNAMED_KINDS[5],
    }
}

impl fmt::Display for RowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowKey::Pci(address) => address.fmt(f),
            RowKey::Deferred { bucket: None } => f.write_str(DEFERRED_KEY),
            RowKey::Deferred {
                bucket: Some(bucket),
            } => write!(f, "{DEFERRED_KEY}:{bucket}"),
            RowKey::Unattributed { name: None } => f.write_str(UNATTRIBUTED_KEY),
            RowKey::Unattributed { name: Some(name) } => write!(f, "{UNATTRIBUTED_KEY}:{name}"),
            RowKey::Process { comm, pid } => write!(f, "{UNATTRIBUTED_KEY}:{comm}[{pid}]"),
            RowKey::Unnamed { kind, id } => write!(f, "{kind}@{id:x}"),
            RowKey::Named(name) => f.write_str(name),
        }
    }
}

/// Reads a key ([`RowKey::parse`]).
impl From<&str> for RowKey {
    fn from(text: &str) -> RowKey {
        RowKey::parse(text)
    }
}

impl From<String> for RowKey {
    fn from(text: String) -> RowKey {
        RowKey::parse(&text)
    }
}

impl PartialEq for RowKey {
    fn eq(&self, other: &RowKey) -> bool {
        self.text() == other.text()
    }
}

impl Eq for RowKey {}

/// Keys sort as the text they are written as, so that a map by key writes its JSON in the order
/// a map by text did.
impl Ord for RowKey {
    fn cmp(&self, other: &RowKey) -> std::cmp::Ordering {
        self.text().cmp(&other.text())
    }
}

impl PartialOrd for RowKey {
    fn partial_cmp(&self, other: &RowKey) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::hash::Hash for RowKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text().hash(state);
    }
}

/// A key equals the text it is written as.
impl PartialEq<str> for RowKey {
    fn eq(&self, text: &str) -> bool {
        self.text() == text
    }
}

impl PartialEq<&str> for RowKey {
    fn eq(&self, text: &&str) -> bool {
        self == *text
    }
}

impl PartialEq<String> for RowKey {
    fn eq(&self, text: &String) -> bool {
        self == text.as_str()
    }
}

impl Serialize for RowKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RowKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RowKey, D::Error> {
        String::deserialize(deserializer).map(|text| RowKey::parse(&text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_encoding_reads_into_its_variant_and_writes_back() {
        let cases = [
            ("0000:00:02.0", RowKey::Pci("0000:00:02.0".parse().unwrap())),
            ("deferred", RowKey::Deferred { bucket: None }),
            (
                "deferred:dmar0",
                RowKey::Deferred {
                    bucket: Some("dmar0".into()),
                },
            ),
            ("unattributed", RowKey::Unattributed { name: None }),
            (
                "unattributed:vfio",
                RowKey::Unattributed {
                    name: Some("vfio".into()),
                },
            ),
            (
                "unattributed:qemu-system-x86[1234]",
                RowKey::Process {
                    comm: "qemu-system-x86".into(),
                    pid: 1234,
                },
            ),
            (
                "disk@1f",
                RowKey::Unnamed {
                    kind: "disk",
                    id: 0x1f,
                },
            ),
            ("nvme0n1", RowKey::Named("nvme0n1".into())),
        ];
        for (text, key) in cases {
            let variant = |key: &RowKey| format!("{key:?}");
            assert_eq!(variant(&RowKey::parse(text)), variant(&key), "{text}");
            assert_eq!(key.to_string(), text);
            let json = serde_json::to_string(&key).expect("encodes");
            assert_eq!(json, format!("\"{text}\""));
            let read = serde_json::from_str::<RowKey>(&json).expect("decodes");
            assert_eq!(variant(&read), variant(&key));
        }
    }

    /// A key that only looks like a structured one, spelt otherwise than it would be written,
    /// stays a name, so that it writes back as it was read.
    #[test]
    fn keys_of_no_structured_form_are_names_and_write_back() {
        for text in [
            "0000:00:02.9",
            "10DE:AF:1F.7",
            "unattributed:x[0012]",
            "disk@01f",
            "disk@xyz",
            "widget@1f",
            "eth0",
            "",
        ] {
            let key = RowKey::parse(text);
            assert!(
                matches!(&key, RowKey::Named(name) if name == text),
                "{text}: {key:?}"
            );
            assert_eq!(key.to_string(), text);
        }
    }

    #[test]
    fn an_unnamed_source_is_keyed_by_its_kind_and_hex_id() {
        assert_eq!(
            RowKey::unnamed(RowKind::Netdev, 255).to_string(),
            "netdev@ff"
        );
        assert_eq!(RowKey::unnamed(RowKind::Device, 1).to_string(), "device@1");
        let pci = RowKey::parse("0000:00:05.0");
        assert_eq!(
            pci.pci_address().map(|a| a.to_string()).as_deref(),
            Some("0000:00:05.0")
        );
        assert_eq!(RowKey::parse("deferred").pci_address(), None);
        let named_like_a_process = RowKey::Unattributed {
            name: Some("x[12]".into()),
        };
        assert_eq!(named_like_a_process, RowKey::parse("unattributed:x[12]"));
        assert_eq!(RowKey::from("deferred"), "deferred");
    }

    #[test]
    fn keys_sort_as_their_text_so_a_map_by_key_writes_the_json_a_map_by_text_did() {
        let texts = [
            "unattributed:fio[7]",
            "0000:00:04.0",
            "netdev@ff",
            "deferred",
            "0000:00:1c.2",
            "nvme0n1",
            "deferred:dmar0",
        ];
        let by_key: std::collections::BTreeMap<RowKey, u32> =
            texts.iter().map(|t| (RowKey::parse(t), 1)).collect();
        let by_text: std::collections::BTreeMap<String, u32> =
            texts.iter().map(|t| (t.to_string(), 1)).collect();
        assert_eq!(
            serde_json::to_string(&by_key).unwrap(),
            serde_json::to_string(&by_text).unwrap()
        );
        let read: std::collections::BTreeMap<RowKey, u32> =
            serde_json::from_str(&serde_json::to_string(&by_text).unwrap()).unwrap();
        assert_eq!(read, by_key);
    }
}
