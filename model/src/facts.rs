//! What sysfs and procfs say about the host and its devices, as plain data.
//!
//! The `iommutop` binary fills these (its `sysinfo` module reads `/proc` and `/sys`); the model only
//! interprets them: which IOMMU, which default domain type, which PCI device a disk or netdev
//! belongs to.

pub use iommutop_abi::domain::DomainType;
use iommutop_abi::pci::PciAddress;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Who made the IOMMU, as far as the kernel's IOMMU units tell.
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
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum IommuVendor {
    /// Intel VT-d (`dmar*` units).
    Intel,
    /// AMD-Vi (`ivhd*` units).
    Amd,
    /// virtio-iommu (units named after their virtio device).
    Virtio,
    /// ARM SMMUv3 (`smmu3.0x…` units, named after their MMIO base).
    SmmuV3,
}

impl IommuVendor {
    /// The vendor of a unit from its name in `/sys/class/iommu`; `None` for others (ARM SMMUv2, ...).
    pub fn from_unit_name(name: &str) -> Option<IommuVendor> {
        if name.starts_with("dmar") {
            Some(IommuVendor::Intel)
        } else if name.starts_with("ivhd") {
            Some(IommuVendor::Amd)
        } else if name.starts_with("virtio") {
            Some(IommuVendor::Virtio)
        } else if name.starts_with("smmu3.") {
            Some(IommuVendor::SmmuV3)
        } else {
            None
        }
    }

    /// The vendor of a unit named after its device, from that device's driver.
    pub fn from_driver_name(driver: &str) -> Option<IommuVendor> {
        match driver {
            "virtio_iommu" => Some(IommuVendor::Virtio),
            "arm-smmu-v3" => Some(IommuVendor::SmmuV3),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// One IOMMU hardware unit (`/sys/class/iommu/NAME`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IommuUnit {
    pub name: String,
    pub vendor: Option<IommuVendor>,
}

/// One IOMMU group (`/sys/kernel/iommu_groups/N`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IommuGroup {
    pub id: u32,
    /// Contents of `type`: `DMA`, `DMA-FQ`, `identity`, `blocked`, `unmanaged`, ...
    pub domain_type: Option<String>,
    /// Device names in the group (PCI addresses for PCI devices).
    pub devices: Vec<String>,
}

/// The IOMMU-related parameters of the kernel command line, raw values as written.
/// A parameter given without `=` has the value `""`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IommuCmdline {
    /// `intel_iommu=` (`on`, `off`, `strict`, `sm_on`, ...; comma-separated).
    pub intel_iommu: Option<String>,
    /// `amd_iommu=` (`off`, `fullflush`, `force_isolation`, ...).
    pub amd_iommu: Option<String>,
    /// `iommu=` (`pt`, `nopt`, `force`, `off`, ...).
    pub iommu: Option<String>,
    /// `iommu.passthrough=` (boolean).
    pub iommu_passthrough: Option<String>,
    /// `iommu.strict=` (boolean).
    pub iommu_strict: Option<String>,
}

impl IommuCmdline {
    /// Picks the IOMMU parameters out of a kernel command line (last occurrence wins, as in the kernel).
    pub fn parse(cmdline: &str) -> IommuCmdline {
        let mut parsed = IommuCmdline::default();
        for (key, value) in cmdline_params(cmdline) {
            let slot = match key {
                "intel_iommu" => &mut parsed.intel_iommu,
                "amd_iommu" => &mut parsed.amd_iommu,
                "iommu" => &mut parsed.iommu,
                "iommu.passthrough" => &mut parsed.iommu_passthrough,
                "iommu.strict" => &mut parsed.iommu_strict,
                _ => continue,
            };
            *slot = Some(value.to_string());
        }
        parsed
    }

    /// The default domain the command line asks for, if it asks: passthrough from `iommu=pt` or
    /// `iommu.passthrough=1`, strict or lazy from `iommu.strict=`, `intel_iommu=strict`,
    /// `amd_iommu=fullflush`.
    pub fn requested_mode(&self) -> Option<DomainType> {
        let passthrough = match (self.iommu_passthrough.as_deref(), self.iommu.as_deref()) {
            (Some(value), _) => parse_kernel_bool(value),
            (None, Some(value)) => iommu_option_passthrough(value),
            (None, None) => None,
        };
        if passthrough == Some(true) {
            return Some(DomainType::Identity);
        }
        let strict = self
            .iommu_strict
            .as_deref()
            .and_then(parse_kernel_bool)
            .or_else(|| has_option(self.intel_iommu.as_deref(), "strict").then_some(true))
            .or_else(|| has_option(self.amd_iommu.as_deref(), "fullflush").then_some(true));
        match strict {
            Some(true) => Some(DomainType::Dma),
            Some(false) => Some(DomainType::DmaFq),
            None => None,
        }
    }
}

/// `(major, minor)` of a kernel release string (`5.10.0-46-amd64` → `(5, 10)`).
pub fn release_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The first kernel whose sysfs tells a lazy domain (`DMA-FQ`) from a strict one (`DMA`).
const DMA_FQ_TYPE_SINCE: (u32, u32) = (5, 15);

/// What an IOMMU group's domain type means. Before 5.15 a lazy domain (flush queue on) and a
/// strict one were both `DMA` in sysfs: the mode was the driver's default, lazy for VT-d and
/// AMD-Vi, unless the command line asked for strict (`intel_iommu=strict`, `iommu.strict=1`,
/// `amd_iommu=fullflush`). Such a group is reported as what it behaves as, `DMA-FQ`.
pub fn effective_domain_type(raw: &str, kernel_release: Option<&str>, cmdline: &str) -> String {
    let before_fq_type = kernel_release
        .and_then(release_version)
        .is_some_and(|version| version < DMA_FQ_TYPE_SINCE);
    let strict = IommuCmdline::parse(cmdline).requested_mode() == Some(DomainType::Dma);
    if raw.parse() == Ok(DomainType::Dma) && before_fq_type && !strict {
        DomainType::DmaFq.name().to_string()
    } else {
        raw.to_string()
    }
}

/// `key=value` pairs of a kernel command line; a bare word has the value `""`. Quoted values keep
/// their spaces.
pub fn cmdline_params(cmdline: &str) -> Vec<(&str, &str)> {
    let mut params = Vec::new();
    let mut rest = cmdline.trim_start();
    while !rest.is_empty() {
        let mut in_quotes = false;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                if c == '"' {
                    in_quotes = !in_quotes;
                }
                c.is_whitespace() && !in_quotes
            })
            .map_or(rest.len(), |(i, _)| i);
        let word = &rest[..end];
        let (key, value) = word.split_once('=').unwrap_or((word, ""));
        params.push((key, value.trim_matches('"')));
        rest = rest[end..].trim_start();
    }
    params
}

/// The kernel's `kstrtobool`: `1/y/Y/on` true, `0/n/N/off` false.
fn parse_kernel_bool(value: &str) -> Option<bool> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "y" | "yes" | "on" => Some(true),
        "0" | "n" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// x86 `iommu=` options: `pt` asks for passthrough, `nopt` for translation.
fn iommu_option_passthrough(value: &str) -> Option<bool> {
    value.split(',').fold(None, |found, option| match option {
        "pt" => Some(true),
        "nopt" => Some(false),
        _ => found,
    })
}

fn has_option(value: Option<&str>, option: &str) -> bool {
    value.is_some_and(|v| v.split(',').any(|o| o == option))
}

/// What sysfs says about one PCI function.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeviceFacts {
    /// `0000:00:02.0`
    pub pci_address: PciAddress,
    /// Bound driver (`nvme`, `e1000e`, `vfio-pci`); `None` when unbound.
    pub driver: Option<String>,
    pub vendor_id: Option<u16>,
    pub device_id: Option<u16>,
    /// 24-bit PCI class code (`0x010802` is NVMe).
    pub class: Option<u32>,
    pub iommu_group: Option<u32>,
    /// The group's domain type (`DMA`, `DMA-FQ`, `identity`, ...).
    pub domain_type: Option<String>,
    /// The IOMMU unit translating for it (`dmar0`, `ivhd0`).
    pub iommu_unit: Option<String>,
    /// Network interfaces on this function (`eth0`).
    pub netdevs: Vec<String>,
    /// Block disks on this function (`nvme0n1`, `nvme0c0n1`, `vda`).
    pub disks: Vec<String>,
    /// Other kernel devices under this function whose names may key DMA work (`nvme0`, `virtio0`).
    pub children: Vec<String>,
    /// The physical function of an SR-IOV virtual function (its `physfn` link); `None` for
    /// every other function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physfn: Option<PciAddress>,
    /// The virtual functions a physical function has enabled (`sriov_numvfs`); `None` for a
    /// function without SR-IOV.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sriov_numvfs: Option<u32>,
}

impl DeviceFacts {
    /// Whether a kernel name (disk, netdev, child device) belongs to this function.
    pub fn owns_name(&self, name: &str) -> bool {
        [&self.netdevs, &self.disks, &self.children]
            .into_iter()
            .any(|names| names.iter().any(|n| n == name))
    }
}

/// What sysfs and procfs say about the host.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HostFacts {
    /// `/proc/sys/kernel/osrelease`
    pub kernel_release: Option<String>,
    /// `/proc/cmdline`
    pub cmdline: Option<String>,
    /// IOMMU-relevant kernel config options without the `CONFIG_` prefix (`INTEL_IOMMU` → `y`);
    /// an option that "is not set" has the value `n`.
    pub kernel_config: BTreeMap<String, String>,
    pub iommu_units: Vec<IommuUnit>,
    pub groups: Vec<IommuGroup>,
    pub devices: Vec<DeviceFacts>,
    /// Running inside the iommutop lab (its kernel command line carries `iommutop.lab=1`).
    pub lab: bool,
}

impl HostFacts {
    /// Whether any IOMMU unit is registered.
    pub fn iommu_present(&self) -> bool {
        !self.iommu_units.is_empty()
    }

    /// The vendor of the first unit whose vendor is known.
    pub fn iommu_vendor(&self) -> Option<IommuVendor> {
        self.iommu_units.iter().find_map(|unit| unit.vendor)
    }

    /// The IOMMU parameters of the kernel command line.
    pub fn cmdline_iommu(&self) -> IommuCmdline {
        self.cmdline
            .as_deref()
            .map(IommuCmdline::parse)
            .unwrap_or_default()
    }

    /// The domain type most groups have (what the kernel chose by default, since iommutop restores
    /// any group it changes); ties go to the type named first alphabetically. Without groups,
    /// what the command line and then the kernel config ask for. `None` without an IOMMU.
    pub fn default_domain_type(&self) -> Option<String> {
        if !self.iommu_present() {
            return None;
        }
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for group in &self.groups {
            if let Some(domain_type) = group.domain_type.as_deref() {
                *votes.entry(domain_type).or_default() += 1;
            }
        }
        let observed = votes
            .iter()
            .max_by(|(a_type, a_votes), (b_type, b_votes)| {
                a_votes.cmp(b_votes).then_with(|| b_type.cmp(a_type))
            })
            .map(|(domain_type, _)| domain_type.to_string());
        observed.or_else(|| self.requested_mode().map(|mode| mode.name().to_string()))
    }

    /// Strict, lazy or passthrough, from the default domain type.
    pub fn dma_mode(&self) -> Option<DomainType> {
        self.default_domain_type()
            .as_deref()
            .and_then(|domain_type| domain_type.parse::<DomainType>().ok())
            .filter(|domain_type| domain_type.mode_name().is_some())
    }

    /// What the command line, else the kernel config, asks the default domain to be.
    fn requested_mode(&self) -> Option<DomainType> {
        self.cmdline_iommu().requested_mode().or_else(|| {
            let enabled = |option: &str| self.kernel_config.get(option).is_some_and(|v| v == "y");
            if enabled("IOMMU_DEFAULT_PASSTHROUGH") {
                Some(DomainType::Identity)
            } else if enabled("IOMMU_DEFAULT_DMA_LAZY") {
                Some(DomainType::DmaFq)
            } else if enabled("IOMMU_DEFAULT_DMA_STRICT") {
                Some(DomainType::Dma)
            } else {
                None
            }
        })
    }

    /// The facts of the PCI function with this address.
    pub fn device(&self, pci_address: &str) -> Option<&DeviceFacts> {
        let address: PciAddress = pci_address.parse().ok()?;
        self.devices.iter().find(|d| d.pci_address == address)
    }

    /// The PCI function a disk, netdev or child device name belongs to.
    pub fn owner_of(&self, name: &str) -> Option<&DeviceFacts> {
        self.devices.iter().find(|d| d.owns_name(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(units: &[&str], group_types: &[&str], cmdline: &str) -> HostFacts {
        HostFacts {
            cmdline: Some(cmdline.to_string()),
            iommu_units: units
                .iter()
                .map(|name| IommuUnit {
                    name: name.to_string(),
                    vendor: IommuVendor::from_unit_name(name),
                })
                .collect(),
            groups: group_types
                .iter()
                .enumerate()
                .map(|(id, t)| IommuGroup {
                    id: id as u32,
                    domain_type: Some(t.to_string()),
                    devices: vec![],
                })
                .collect(),
            ..HostFacts::default()
        }
    }

    #[test]
    fn lazy_domains_before_5_15_are_told_from_strict_ones_by_the_command_line() {
        assert_eq!(release_version("5.10.0-46-amd64"), Some((5, 10)));
        assert_eq!(release_version("7.3.4+deb13-amd64"), Some((7, 3)));
        let old = Some("5.10.0-46-amd64");
        assert_eq!(
            effective_domain_type("DMA", old, "intel_iommu=on"),
            "DMA-FQ"
        );
        assert_eq!(
            effective_domain_type("DMA", old, "intel_iommu=on,strict"),
            "DMA"
        );
        assert_eq!(effective_domain_type("DMA", old, "iommu.strict=1"), "DMA");
        assert_eq!(effective_domain_type("identity", old, ""), "identity");
        let new = Some("6.12.95+deb12-amd64");
        assert_eq!(effective_domain_type("DMA", new, "intel_iommu=on"), "DMA");
        assert_eq!(effective_domain_type("DMA", None, ""), "DMA");
    }

    #[test]
    fn unit_names_give_the_vendor() {
        assert_eq!(
            IommuVendor::from_unit_name("dmar0"),
            Some(IommuVendor::Intel)
        );
        assert_eq!(IommuVendor::from_unit_name("ivhd1"), Some(IommuVendor::Amd));
        assert_eq!(
            IommuVendor::from_unit_name("virtio0"),
            Some(IommuVendor::Virtio)
        );
        assert_eq!(
            IommuVendor::from_unit_name("smmu3.0x0000000009050000"),
            Some(IommuVendor::SmmuV3)
        );
        assert_eq!(IommuVendor::SmmuV3.name(), "smmu_v3");
        assert_eq!(IommuVendor::from_unit_name("arm-smmu.0"), None);
    }

    #[test]
    fn cmdline_params_split_words_and_quotes() {
        let params = cmdline_params(r#"BOOT_IMAGE=/vmlinuz quiet  init="/bin/sh -c x" iommu=pt"#);
        assert_eq!(
            params,
            vec![
                ("BOOT_IMAGE", "/vmlinuz"),
                ("quiet", ""),
                ("init", "/bin/sh -c x"),
                ("iommu", "pt")
            ]
        );
    }

    #[test]
    fn cmdline_picks_iommu_parameters_last_wins() {
        let parsed = IommuCmdline::parse(
            "console=ttyS0 intel_iommu=on,sm_on iommu.strict=1 iommu.strict=0 amd_iommu=off \
             iommu.passthrough=0 iommu=nopt",
        );
        assert_eq!(parsed.intel_iommu.as_deref(), Some("on,sm_on"));
        assert_eq!(parsed.amd_iommu.as_deref(), Some("off"));
        assert_eq!(parsed.iommu.as_deref(), Some("nopt"));
        assert_eq!(parsed.iommu_passthrough.as_deref(), Some("0"));
        assert_eq!(parsed.iommu_strict.as_deref(), Some("0"));
        assert_eq!(parsed.requested_mode(), Some(DomainType::DmaFq));
    }

    #[test]
    fn cmdline_requested_modes() {
        let mode = |line: &str| IommuCmdline::parse(line).requested_mode();
        assert_eq!(mode("iommu=pt"), Some(DomainType::Identity));
        assert_eq!(mode("iommu.passthrough=1"), Some(DomainType::Identity));
        assert_eq!(mode("iommu=pt iommu.passthrough=0"), None);
        assert_eq!(mode("iommu.strict=1"), Some(DomainType::Dma));
        assert_eq!(mode("intel_iommu=on,strict"), Some(DomainType::Dma));
        assert_eq!(mode("amd_iommu=fullflush"), Some(DomainType::Dma));
        assert_eq!(mode("intel_iommu=on"), None);
    }

    #[test]
    fn default_domain_is_what_most_groups_have() {
        let facts = host(
            &["dmar0"],
            &["DMA-FQ", "DMA-FQ", "identity"],
            "iommu.strict=1",
        );
        assert_eq!(facts.default_domain_type().as_deref(), Some("DMA-FQ"));
        assert_eq!(facts.dma_mode(), Some(DomainType::DmaFq));
        assert_eq!(facts.iommu_vendor(), Some(IommuVendor::Intel));
    }

    #[test]
    fn default_domain_falls_back_to_cmdline_then_config() {
        let mut facts = host(&["ivhd0"], &[], "iommu.passthrough=1");
        assert_eq!(facts.dma_mode(), Some(DomainType::Identity));
        facts.cmdline = None;
        facts
            .kernel_config
            .insert("IOMMU_DEFAULT_DMA_STRICT".into(), "y".into());
        assert_eq!(facts.default_domain_type().as_deref(), Some("DMA"));
        assert_eq!(facts.dma_mode(), Some(DomainType::Dma));
    }

    #[test]
    fn no_iommu_means_no_domain_type() {
        let facts = host(&[], &["DMA"], "iommu.strict=1");
        assert!(!facts.iommu_present());
        assert_eq!(facts.default_domain_type(), None);
        assert_eq!(facts.dma_mode(), None);
        assert_eq!(facts.iommu_vendor(), None);
    }

    #[test]
    fn names_find_their_pci_function() {
        let facts = HostFacts {
            devices: vec![DeviceFacts {
                pci_address: "0000:00:04.0".parse().expect("address"),
                disks: vec!["nvme0n1".into()],
                netdevs: vec![],
                children: vec!["nvme0".into()],
                ..DeviceFacts::default()
            }],
            ..HostFacts::default()
        };
        assert_eq!(
            facts
                .owner_of("nvme0n1")
                .map(|d| d.pci_address.to_string())
                .as_deref(),
            Some("0000:00:04.0")
        );
        assert!(facts.owner_of("nvme0").is_some());
        assert!(facts.owner_of("eth0").is_none());
        assert!(facts.device("0000:00:04.0").is_some());
    }
}
