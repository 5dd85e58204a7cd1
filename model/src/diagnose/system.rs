//! The system half of a diagnosis: is there an IOMMU, why is it on (or off), which mode, and
//! which devices sit behind translation — from the live host facts, so that it also says what a
//! report cannot (every group, devices that did no DMA during the run).

use crate::compare::{config_role_for, Role};
use crate::facts::{DomainType, HostFacts, IommuCmdline, IommuVendor};
use std::fmt::Write;

/// Why the IOMMU is in the state it is in, as far as the command line and kernel config tell.
pub fn iommu_reasons(facts: &HostFacts) -> Vec<String> {
    let cmdline = facts.cmdline_iommu();
    let config = |option: &str| facts.kernel_config.get(option).map(String::as_str);
    let mut reasons = Vec::new();
    let intel_options = |option: &str| {
        cmdline
            .intel_iommu
            .as_deref()
            .is_some_and(|v| v.split(',').any(|o| o == option))
    };
    match (facts.iommu_present(), facts.iommu_vendor()) {
        (true, Some(IommuVendor::Intel)) => {
            if intel_options("on") {
                reasons.push("the Intel IOMMU is on: `intel_iommu=on` on the command line".into());
            } else if config("INTEL_IOMMU_DEFAULT_ON") == Some("y") {
                reasons.push(
                    "the Intel IOMMU is on by default: the kernel was built with \
                     CONFIG_INTEL_IOMMU_DEFAULT_ON=y (no `intel_iommu=` on the command line)"
                        .into(),
                );
            } else {
                reasons.push(
                    "the Intel IOMMU is on although neither `intel_iommu=on` nor \
                     CONFIG_INTEL_IOMMU_DEFAULT_ON=y asks for it (firmware or platform policy)"
                        .into(),
                );
            }
            if intel_options("sm_on") {
                reasons.push("scalable mode requested: `intel_iommu=sm_on`".into());
            } else if intel_options("sm_off") {
                reasons.push("scalable mode off: `intel_iommu=sm_off`".into());
            } else if config("INTEL_IOMMU_SCALABLE_MODE_DEFAULT_ON") == Some("y") {
                reasons.push(
                    "scalable mode by default (CONFIG_INTEL_IOMMU_SCALABLE_MODE_DEFAULT_ON=y), \
                     where the hardware has it"
                        .into(),
                );
            }
        }
        (true, Some(IommuVendor::Amd)) => reasons.push(
            "the AMD IOMMU is on: it is used whenever the firmware describes one (IVRS), unless \
             `amd_iommu=off`"
                .into(),
        ),
        (true, Some(IommuVendor::Virtio)) => {
            reasons.push("a virtio-iommu translates for the devices attached to it".into())
        }
        (true, Some(IommuVendor::SmmuV3)) => reasons.push(
            "an ARM SMMUv3 translates for the devices behind it: arm-smmu-v3 probes every one \
             the firmware (device tree or IORT) describes, unless `iommu.passthrough=1`"
                .into(),
        ),
        (true, None) => reasons.push("an IOMMU of unknown vendor is active".into()),
        (false, _) => reasons.push(off_reason(facts, &cmdline)),
    }
    if facts.iommu_present() {
        reasons.extend(mode_reason(facts, &cmdline));
    }
    reasons
}

fn off_reason(facts: &HostFacts, cmdline: &IommuCmdline) -> String {
    let config = |option: &str| facts.kernel_config.get(option).map(String::as_str);
    if cmdline.intel_iommu.as_deref() == Some("off") {
        return "no IOMMU is active: `intel_iommu=off` on the command line".into();
    }
    if cmdline.amd_iommu.as_deref() == Some("off") {
        return "no IOMMU is active: `amd_iommu=off` on the command line".into();
    }
    if config("INTEL_IOMMU") == Some("y") && config("INTEL_IOMMU_DEFAULT_ON") != Some("y") {
        return "no IOMMU is active: the kernel has the Intel IOMMU driver but \
                CONFIG_INTEL_IOMMU_DEFAULT_ON is off and `intel_iommu=on` is not given (or the \
                machine has no VT-d)"
            .into();
    }
    "no IOMMU is active: the machine (or VM) exposes none, or the kernel lacks its driver".into()
}

fn mode_reason(facts: &HostFacts, cmdline: &IommuCmdline) -> Option<String> {
    let mode = facts.dma_mode()?;
    let (what, option) = match mode {
        DomainType::Identity => (
            "passthrough: devices use identity domains, DMA is not translated",
            "IOMMU_DEFAULT_PASSTHROUGH",
        ),
        DomainType::DmaFq => (
            "lazy: DMA-FQ domains, IOTLB invalidations batched by a flush queue",
            "IOMMU_DEFAULT_DMA_LAZY",
        ),
        DomainType::Dma => (
            "strict: DMA domains, an IOTLB invalidation on every unmap",
            "IOMMU_DEFAULT_DMA_STRICT",
        ),
        DomainType::Blocked | DomainType::Unmanaged => return None,
    };
    let config = |option: &str| facts.kernel_config.get(option).is_some_and(|v| v == "y");
    let requested = cmdline.requested_mode();
    let source = if requested == Some(mode) {
        let mut given = Vec::new();
        for (key, value) in [
            ("iommu", &cmdline.iommu),
            ("iommu.passthrough", &cmdline.iommu_passthrough),
            ("iommu.strict", &cmdline.iommu_strict),
            ("intel_iommu", &cmdline.intel_iommu),
            ("amd_iommu", &cmdline.amd_iommu),
        ] {
            if let Some(value) = value {
                given.push(format!("`{key}={value}`"));
            }
        }
        format!("asked for on the command line ({})", given.join(" "))
    } else if requested.is_none() {
        if config(option) {
            format!("the kernel's default (CONFIG_{option}=y)")
        } else {
            "chosen by the IOMMU driver".into()
        }
    } else {
        "not what the command line asks for: forced by the IOMMU driver or hardware (e.g. an \
         emulated IOMMU in caching mode forces strict), or groups changed at run time"
            .into()
    };
    Some(format!("default mode {what}; {source}"))
}

/// What a domain type means for a device's DMA.
pub fn translation_state(domain_type: Option<&str>) -> &'static str {
    let Some(domain_type) = domain_type else {
        return "no IOMMU group: not translated";
    };
    match domain_type.parse() {
        Ok(DomainType::Identity) => "identity: not translated",
        Ok(DomainType::Dma) => "translated, strict",
        Ok(DomainType::DmaFq) => "translated, lazy",
        Ok(DomainType::Blocked) => "blocked: no DMA allowed",
        Ok(DomainType::Unmanaged) => "owned by a user-space driver (VFIO): its own mappings",
        Err(_) => "translated",
    }
}

/// The system facts section of `iommutop diagnose`.
pub fn render_system(facts: &HostFacts) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kernel {}{}",
        facts.kernel_release.as_deref().unwrap_or("unknown"),
        if facts.lab { " (iommutop lab)" } else { "" }
    );
    if facts.iommu_present() {
        let units: Vec<&str> = facts.iommu_units.iter().map(|u| u.name.as_str()).collect();
        let _ = writeln!(
            out,
            "IOMMU: {} ({}), default domain {}",
            facts.iommu_vendor().map_or("unknown vendor", |v| v.name()),
            units.join(", "),
            facts.default_domain_type().as_deref().unwrap_or("unknown")
        );
    } else {
        let _ = writeln!(out, "IOMMU: none active");
    }
    for reason in iommu_reasons(facts) {
        let _ = writeln!(out, "  {reason}");
    }
    let params: Vec<String> = crate::facts::cmdline_params(facts.cmdline.as_deref().unwrap_or(""))
        .into_iter()
        .filter(|(key, _)| {
            matches!(
                *key,
                "intel_iommu" | "amd_iommu" | "iommu" | "iommu.passthrough" | "iommu.strict"
            )
        })
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    let _ = writeln!(
        out,
        "command line: {}",
        if params.is_empty() {
            "no IOMMU parameters".to_string()
        } else {
            params.join(" ")
        }
    );
    let config: Vec<String> = facts
        .kernel_config
        .iter()
        .filter(|(option, _)| config_role_for(option, &[facts.iommu_vendor()]) != Role::Context)
        .map(|(option, value)| format!("{option}={value}"))
        .collect();
    if config.is_empty() {
        let _ = writeln!(
            out,
            "kernel config: not readable (no /proc/config.gz or /boot/config-*)"
        );
    } else {
        let _ = writeln!(out, "kernel config: {}", config.join(" "));
    }
    if !facts.groups.is_empty() {
        let _ = writeln!(out, "IOMMU groups:");
        let mut groups: Vec<_> = facts.groups.iter().collect();
        groups.sort_by_key(|g| g.id);
        for group in groups {
            let members: Vec<String> = group
                .devices
                .iter()
                .map(|name| match facts.device(name) {
                    Some(d) => {
                        let mut parts = vec![name.clone()];
                        parts.extend(d.driver.clone());
                        parts.extend(d.netdevs.iter().cloned());
                        parts.extend(d.disks.iter().cloned());
                        parts.join(" ")
                    }
                    None => name.clone(),
                })
                .collect();
            let _ = writeln!(
                out,
                "  group {:<3} {:<9} {:<38} {}",
                group.id,
                group.domain_type.as_deref().unwrap_or("?"),
                members.join(", "),
                translation_state(group.domain_type.as_deref())
            );
        }
    }
    let outside: Vec<String> = facts
        .devices
        .iter()
        .filter(|d| d.iommu_group.is_none() && d.driver.is_some())
        .map(|d| format!("{} ({})", d.pci_address, d.driver.as_deref().unwrap_or("")))
        .collect();
    if !outside.is_empty() {
        let _ = writeln!(
            out,
            "outside any IOMMU group (DMA not translated): {}",
            outside.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{DeviceFacts, IommuGroup, IommuUnit};

    fn intel(cmdline: &str, config: &[(&str, &str)], group_type: &str) -> HostFacts {
        HostFacts {
            kernel_release: Some("6.12.95+deb12-amd64".into()),
            cmdline: Some(cmdline.into()),
            kernel_config: config
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            iommu_units: vec![IommuUnit {
                name: "dmar0".into(),
                vendor: Some(IommuVendor::Intel),
            }],
            groups: vec![IommuGroup {
                id: 2,
                domain_type: Some(group_type.into()),
                devices: vec!["0000:00:05.0".into()],
            }],
            devices: vec![
                DeviceFacts {
                    pci_address: "0000:00:05.0".parse().expect("address"),
                    driver: Some("e1000e".into()),
                    iommu_group: Some(2),
                    domain_type: Some(group_type.into()),
                    netdevs: vec!["eth0".into()],
                    ..DeviceFacts::default()
                },
                DeviceFacts {
                    pci_address: "0000:00:01.0".parse().expect("address"),
                    driver: Some("virtio-pci".into()),
                    ..DeviceFacts::default()
                },
            ],
            lab: false,
        }
    }

    #[test]
    fn the_story_kernel_turned_the_intel_iommu_on_by_default() {
        let facts = intel(
            "root=/dev/sda1",
            &[
                ("INTEL_IOMMU", "y"),
                ("INTEL_IOMMU_DEFAULT_ON", "y"),
                ("INTEL_IOMMU_SCALABLE_MODE_DEFAULT_ON", "y"),
                ("IOMMU_DEFAULT_DMA_LAZY", "y"),
            ],
            "DMA-FQ",
        );
        let reasons = iommu_reasons(&facts);
        assert_eq!(
            reasons,
            [
                "the Intel IOMMU is on by default: the kernel was built with \
                 CONFIG_INTEL_IOMMU_DEFAULT_ON=y (no `intel_iommu=` on the command line)",
                "scalable mode by default (CONFIG_INTEL_IOMMU_SCALABLE_MODE_DEFAULT_ON=y), \
                 where the hardware has it",
                "default mode lazy: DMA-FQ domains, IOTLB invalidations batched by a flush \
                 queue; the kernel's default (CONFIG_IOMMU_DEFAULT_DMA_LAZY=y)",
            ]
        );
    }

    #[test]
    fn the_command_line_is_named_when_it_decides() {
        let facts = intel(
            "intel_iommu=on iommu.passthrough=1",
            &[("INTEL_IOMMU", "y")],
            "identity",
        );
        let reasons = iommu_reasons(&facts);
        assert_eq!(
            reasons[0],
            "the Intel IOMMU is on: `intel_iommu=on` on the command line"
        );
        assert_eq!(
            reasons[1],
            "default mode passthrough: devices use identity domains, DMA is not translated; \
             asked for on the command line (`iommu.passthrough=1` `intel_iommu=on`)"
        );
        let forced = intel("intel_iommu=on", &[("IOMMU_DEFAULT_DMA_LAZY", "n")], "DMA");
        assert!(iommu_reasons(&forced)[1].ends_with("chosen by the IOMMU driver"));
    }

    #[test]
    fn no_iommu_says_why_not() {
        let mut facts = intel(
            "quiet",
            &[("INTEL_IOMMU", "y"), ("INTEL_IOMMU_DEFAULT_ON", "n")],
            "DMA",
        );
        facts.iommu_units.clear();
        facts.groups.clear();
        let reasons = iommu_reasons(&facts);
        assert_eq!(reasons.len(), 1);
        assert!(
            reasons[0].contains("CONFIG_INTEL_IOMMU_DEFAULT_ON is off"),
            "{reasons:?}"
        );
        facts.cmdline = Some("intel_iommu=off".into());
        assert_eq!(
            iommu_reasons(&facts),
            ["no IOMMU is active: `intel_iommu=off` on the command line"]
        );
    }

    #[test]
    fn the_section_lists_groups_and_untranslated_devices() {
        let text = render_system(&intel("intel_iommu=on", &[("INTEL_IOMMU", "y")], "DMA-FQ"));
        assert!(
            text.contains("IOMMU: intel (dmar0), default domain DMA-FQ\n"),
            "{text}"
        );
        assert!(text.contains("command line: intel_iommu=on\n"), "{text}");
        assert!(
            text.contains("  group 2   DMA-FQ    0000:00:05.0 e1000e eth0"),
            "{text}"
        );
        assert!(text.contains("translated, lazy\n"), "{text}");
        assert!(
            text.contains(
                "outside any IOMMU group (DMA not translated): 0000:00:01.0 (virtio-pci)"
            ),
            "{text}"
        );
    }
}
