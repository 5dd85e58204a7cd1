//! An IOMMU domain's type ([`DomainType`]), as sysfs writes it in a group's `type`, and the DMA
//! mode a default domain of that type gives (strict, lazy or passthrough).

use serde::{Deserialize, Serialize};

/// What an IOMMU group's domain is (`/sys/kernel/iommu_groups/N/type`); in JSON the name sysfs
/// writes. The first three are the default domains the DMA API uses, one per DMA mode.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    strum::VariantArray,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
)]
pub enum DomainType {
    /// `DMA`: translated, the IOTLB invalidated on every unmap (mode `strict`).
    #[serde(rename = "DMA")]
    #[strum(serialize = "DMA")]
    Dma,
    /// `DMA-FQ`: translated, invalidations batched by a flush queue (mode `lazy`).
    #[serde(rename = "DMA-FQ")]
    #[strum(serialize = "DMA-FQ")]
    DmaFq,
    /// `identity`: not translated (mode `passthrough`: `iommu=pt`, `iommu.passthrough=1`).
    #[serde(rename = "identity")]
    #[strum(serialize = "identity")]
    Identity,
    /// `blocked`: no DMA at all.
    #[serde(rename = "blocked")]
    #[strum(serialize = "blocked")]
    Blocked,
    /// `unmanaged`: mapped by its owner (VFIO), not by the DMA API.
    #[serde(rename = "unmanaged")]
    #[strum(serialize = "unmanaged")]
    Unmanaged,
}

impl DomainType {
    /// The type as sysfs writes it (`DMA`, `DMA-FQ`, `identity`, ...).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The DMA mode a default domain of this type gives, as reports name it (`strict`, `lazy`,
    /// `passthrough`); `None` for a type no default domain has.
    pub fn mode_name(self) -> Option<&'static str> {
        match self {
            DomainType::Dma => Some("strict"),
            DomainType::DmaFq => Some("lazy"),
            DomainType::Identity => Some("passthrough"),
            DomainType::Blocked | DomainType::Unmanaged => None,
        }
    }

    /// The default domain type of a DMA mode named as [`DomainType::mode_name`] names it.
    pub fn of_mode(mode: &str) -> Option<DomainType> {
        [DomainType::Dma, DomainType::DmaFq, DomainType::Identity]
            .into_iter()
            .find(|t| t.mode_name() == Some(mode))
    }

    /// Whether DMA through a domain of this type is translated (an IOVA the IOMMU looks up).
    pub fn is_translated(self) -> bool {
        matches!(self, DomainType::Dma | DomainType::DmaFq)
    }
}

/// A default domain's type written as its DMA mode (`"strict"`, `"lazy"`, `"passthrough"`, or
/// null): how reports' `dma_mode` holds it. `#[serde(with = "iommutop_abi::domain::as_mode")]`.
pub mod as_mode {
    use crate::domain::DomainType;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(mode: &Option<DomainType>, s: S) -> Result<S::Ok, S::Error> {
        match mode.and_then(DomainType::mode_name) {
            Some(name) => s.serialize_some(name),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DomainType>, D::Error> {
        let Some(name) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        DomainType::of_mode(&name).map(Some).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown DMA mode `{name}`: expected strict, lazy or passthrough"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::VariantArray;

    /// The names are sysfs's, in JSON and on screen, and parse back.
    #[test]
    fn types_are_named_as_sysfs_names_them() {
        for &t in DomainType::VARIANTS {
            assert_eq!(serde_json::to_value(t).expect("encodes"), t.name());
            assert_eq!(t.to_string(), t.name());
            assert_eq!(t.name().parse::<DomainType>(), Ok(t));
        }
        assert_eq!(DomainType::DmaFq.name(), "DMA-FQ");
        assert!("DMA_FQ".parse::<DomainType>().is_err());
    }

    /// `dma_mode` is written as the mode's name, as before there was one type for both.
    #[test]
    fn a_mode_is_written_and_read_by_its_name() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Host {
            #[serde(with = "as_mode")]
            dma_mode: Option<DomainType>,
        }
        for (mode, json) in [
            (Some(DomainType::Dma), r#"{"dma_mode":"strict"}"#),
            (Some(DomainType::DmaFq), r#"{"dma_mode":"lazy"}"#),
            (Some(DomainType::Identity), r#"{"dma_mode":"passthrough"}"#),
            (None, r#"{"dma_mode":null}"#),
        ] {
            let host = Host { dma_mode: mode };
            assert_eq!(serde_json::to_string(&host).expect("encodes"), json);
            assert_eq!(serde_json::from_str::<Host>(json).expect("decodes"), host);
        }
        assert!(serde_json::from_str::<Host>(r#"{"dma_mode":"DMA"}"#).is_err());
    }
}
