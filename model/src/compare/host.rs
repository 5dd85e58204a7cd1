//! What differs between A's and B's hosts ([`HostDifference`]): the kernel, the IOMMU, the
//! default domain type, the IOMMU parameters of the command line and the IOMMU kernel config,
//! each with the [`Role`] it plays.

use super::path;
use crate::facts::{DomainType, IommuCmdline, IommuVendor};
use crate::report::Report;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What a host difference can do to translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Decides whether DMA is translated at all (IOMMU on/off, passthrough).
    Translation,
    /// Decides strict or lazy (flush-queue) IOTLB invalidation.
    Invalidation,
    /// Changes what translation costs (scalable mode, debugging, bounce buffers).
    Cost,
    /// Context only (kernel release, IOMMU features this workload does not use).
    Context,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Translation => "decides translation",
            Role::Invalidation => "decides invalidation",
            Role::Cost => "changes its cost",
            Role::Context => "context",
        }
    }
}

/// One host fact that differs between A and B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostDifference {
    /// `kernel`, `IOMMU`, `default domain type`, `command line iommu.passthrough`,
    /// `CONFIG_INTEL_IOMMU_DEFAULT_ON`, ...
    pub what: String,
    pub a: String,
    pub b: String,
    pub role: Role,
}

impl HostDifference {
    /// `command line iommu.passthrough: 1 in A, (not set) in B`.
    pub fn sentence(&self) -> String {
        format!("{}: {} in A, {} in B", self.what, self.a, self.b)
    }
}

/// The host's IOMMU in a few words: vendor (units), default domain; "none" without one.
pub fn iommu_description(host: &crate::report::Host) -> String {
    if !host.iommu.present {
        return "none".into();
    }
    format!(
        "{} ({}), default domain {}",
        host.iommu.vendor.map_or("unknown vendor", |v| v.name()),
        host.iommu.units.join(", "),
        host.iommu
            .default_domain_type
            .as_deref()
            .unwrap_or("unknown")
    )
}

/// The command-line parameters that decide translation, as the kernel reads them (last wins).
pub(super) fn iommu_params(report: &Report) -> BTreeMap<String, String> {
    let parsed = report
        .host
        .cmdline
        .as_deref()
        .map(IommuCmdline::parse)
        .unwrap_or_default();
    [
        ("intel_iommu", parsed.intel_iommu),
        ("amd_iommu", parsed.amd_iommu),
        ("iommu", parsed.iommu),
        ("iommu.passthrough", parsed.iommu_passthrough),
        ("iommu.strict", parsed.iommu_strict),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_string(), v?)))
    .collect()
}

/// The role of a command-line parameter.
fn param_role(param: &str) -> Role {
    match param {
        "iommu.strict" => Role::Invalidation,
        _ => Role::Translation,
    }
}

/// The vendor whose driver a config option belongs to (`INTEL_IOMMU_*` → Intel), if any.
pub fn config_vendor(option: &str) -> Option<IommuVendor> {
    if option.starts_with("INTEL_IOMMU") {
        Some(IommuVendor::Intel)
    } else if option.starts_with("AMD_IOMMU") {
        Some(IommuVendor::Amd)
    } else if option == "VIRTIO_IOMMU" {
        Some(IommuVendor::Virtio)
    } else if option.starts_with("ARM_SMMU_V3") {
        Some(IommuVendor::SmmuV3)
    } else {
        None
    }
}

/// The role of an IOMMU kernel config option (without `CONFIG_`) on a host whose IOMMU is
/// `vendors` (one per report): another vendor's driver options are context.
pub fn config_role_for(option: &str, vendors: &[Option<IommuVendor>]) -> Role {
    match config_vendor(option) {
        Some(vendor) if !vendors.contains(&Some(vendor)) => Role::Context,
        _ => config_role(option),
    }
}

/// The role of an IOMMU kernel config option (without `CONFIG_`).
pub fn config_role(option: &str) -> Role {
    match option {
        "IOMMU_SUPPORT"
        | "IOMMU_API"
        | "IOMMU_DMA"
        | "INTEL_IOMMU"
        | "AMD_IOMMU"
        | "VIRTIO_IOMMU"
        | "INTEL_IOMMU_DEFAULT_ON"
        | "IOMMU_DEFAULT_PASSTHROUGH" => Role::Translation,
        "IOMMU_DEFAULT_DMA_STRICT" | "IOMMU_DEFAULT_DMA_LAZY" => Role::Invalidation,
        "INTEL_IOMMU_SCALABLE_MODE_DEFAULT_ON"
        | "IOMMU_IOVA"
        | "DMA_API_DEBUG"
        | "SWIOTLB"
        | "IRQ_REMAP" => Role::Cost,
        _ => Role::Context,
    }
}

/// The host difference naming the code that translates DMA (see [`path`]).
pub const DMA_PATH: &str = "DMA translation code";

pub(super) fn host_differences(a: &Report, b: &Report) -> Vec<HostDifference> {
    let mut out = Vec::new();
    let mut push = |what: String, va: String, vb: String, role: Role| {
        if va != vb {
            out.push(HostDifference {
                what,
                a: va,
                b: vb,
                role,
            });
        }
    };
    let show = |v: Option<&str>| v.unwrap_or("unknown").to_string();
    let iommu = |r: &Report| {
        if r.host.iommu.present {
            format!(
                "{} ({})",
                r.host.iommu.vendor.map_or("unknown vendor", |v| v.name()),
                r.host.iommu.units.join(", ")
            )
        } else {
            "none".into()
        }
    };
    push("IOMMU".into(), iommu(a), iommu(b), Role::Translation);
    let domain = |r: &Report| show(r.host.iommu.default_domain_type.as_deref());
    let (da, db) = (domain(a), domain(b));
    let domain_role = if [da.as_str(), db.as_str()]
        .iter()
        .all(|t| t.parse().is_ok_and(DomainType::is_translated))
    {
        Role::Invalidation
    } else {
        Role::Translation
    };
    push("default domain type".into(), da, db, domain_role);
    let (pa, pb) = (iommu_params(a), iommu_params(b));
    let params: BTreeSet<&String> = pa.keys().chain(pb.keys()).collect();
    let not_set = || "(not set)".to_string();
    for key in params {
        push(
            format!("command line {key}"),
            pa.get(key).cloned().unwrap_or_else(not_set),
            pb.get(key).cloned().unwrap_or_else(not_set),
            param_role(key),
        );
    }
    // A report without the kernel config (unreadable on that host) says nothing about it.
    let (ca, cb) = (&a.host.kernel_config, &b.host.kernel_config);
    if !ca.is_empty() && !cb.is_empty() {
        let options: BTreeSet<&String> = ca.keys().chain(cb.keys()).collect();
        for key in options {
            let value = |c: &BTreeMap<String, String>| {
                c.get(key).cloned().unwrap_or_else(|| "(absent)".into())
            };
            push(
                format!("CONFIG_{key}"),
                value(ca),
                value(cb),
                config_role_for(key, &[a.host.iommu.vendor, b.host.iommu.vendor]),
            );
        }
    }
    if let (Some(pa), Some(pb)) = (path::dma_path(a), path::dma_path(b)) {
        push(
            DMA_PATH.into(),
            pa.describe().into(),
            pb.describe().into(),
            Role::Cost,
        );
    }
    push(
        "kernel".into(),
        show(a.host.kernel_release.as_deref()),
        show(b.host.kernel_release.as_deref()),
        Role::Context,
    );
    // Causes before consequences: the command line and config decide the IOMMU and its domains.
    out.sort_by_key(|d| {
        let order = if d.what.starts_with("command line") {
            0
        } else if d.what.starts_with("CONFIG_") {
            1
        } else {
            2
        };
        (d.role, order)
    });
    out
}
