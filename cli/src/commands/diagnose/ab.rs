//! `diagnose --ab`: the workload once more with the device's IOMMU group in the other mode
//! (identity if it is translated, its translated type if it is in identity), the group and
//! bindings restored on every exit path, and the two runs lined up.

use super::plan::{device_facts, Plan};
use super::{measure, sibling};
use crate::cli::DiagnoseArgs;
use crate::commands::record::domain_failure;
use crate::domain::DomainSwitch;
use crate::exit::{Failure, Outcome};
use crate::measurement::Detach;
use crate::output::{JsonTarget, ReportSink};
use crate::stop::StopSignal;
use anyhow::anyhow;
use iommutop_model::diagnose::{ab_outcome, AbOutcome};
use iommutop_model::facts::{DomainType, HostFacts};
use iommutop_model::pci::PciAddress;
use iommutop_model::report::Report;
use serde_json::Value;
use std::path::Path;

/// The device of the experiment and the two domain types it runs in.
#[derive(Debug, Clone)]
pub struct AbDevice {
    pub address: PciAddress,
    pub group: u32,
    pub original: String,
    pub other: String,
}

/// The device named by `--device`, else the one the profile's workload drives (the client NIC of
/// TCP_RR, the disk fio reads).
pub fn device_for(args: &DiagnoseArgs, plan: &Plan, facts: &HostFacts) -> Outcome<AbDevice> {
    let name = match (&args.device, plan) {
        (Some(name), _) => name.clone(),
        (None, Plan::Profile(profile)) => profile_device(&profile.given).ok_or_else(|| {
            Failure::usage(anyhow!(
                "--ab needs --device ADDR: profile {} names no NIC or disk to switch",
                profile.name
            ))
        })?,
        (None, Plan::Command(_)) => {
            return Err(Failure::usage(anyhow!(
                "--ab needs --device ADDR with a command: the device whose IOMMU group runs once \
                 translated and once in identity"
            )))
        }
    };
    let device = device_facts(facts, &name)
        .ok_or_else(|| Failure::usage(anyhow!("--ab: no PCI device, NIC or disk `{name}` here")))?;
    let group = device.iommu_group.ok_or_else(|| {
        Failure::environment(anyhow!(
            "--ab: {} is in no IOMMU group: no IOMMU translates it, so there is nothing to \
             compare",
            device.pci_address
        ))
    })?;
    let original = device.domain_type.clone().unwrap_or_default();
    let translated_type = match facts.cmdline_iommu().requested_mode() {
        Some(DomainType::Dma) => DomainType::Dma,
        _ => DomainType::DmaFq,
    };
    let other = match original.parse() {
        Ok(DomainType::Dma | DomainType::DmaFq) => DomainType::Identity,
        Ok(DomainType::Identity) => translated_type,
        _ => {
            return Err(Failure::environment(anyhow!(
                "--ab: IOMMU group {group} of {} is `{original}`: only DMA, DMA-FQ and identity \
                 groups are switched",
                device.pci_address
            )))
        }
    };
    Ok(AbDevice {
        address: device.pci_address,
        group,
        original,
        other: other.name().to_string(),
    })
}

/// `nics = ["eth0", "eth1"]` → `eth0`; `filename = "/dev/nvme0n1"` → `nvme0n1`.
fn profile_device(given: &serde_json::Map<String, Value>) -> Option<String> {
    if let Some(Value::Array(nics)) = given.get("nics") {
        return nics.first().and_then(Value::as_str).map(str::to_string);
    }
    given
        .get("filename")
        .and_then(Value::as_str)
        .and_then(|f| f.strip_prefix("/dev/"))
        .map(str::to_string)
}

/// Switches the group, runs the workload again, restores the group (also on error and Ctrl-C),
/// and lines the two runs up. The other mode's report goes beside `--json`'s.
pub fn experiment(
    device: &AbDevice,
    first: &Report,
    plan: &Plan,
    duration: Option<f64>,
    stop: &StopSignal,
    json: Option<&Path>,
) -> Outcome<AbOutcome> {
    let AbDevice {
        address,
        group,
        original,
        other,
    } = device;
    let mut sink = match json {
        Some(path) => ReportSink::open(Some(JsonTarget::File(sibling(path, other))))?,
        None => ReportSink::Silent,
    };
    let mut switch = DomainSwitch::apply(&address.to_string(), other).map_err(domain_failure)?;
    eprintln!(
        "iommutop: A/B: IOMMU group {group} of {address} is now {other} (was {original}); \
         running the workload again"
    );
    let second = if stop.requested() || switch.interrupted() {
        None
    } else {
        Some(measure(plan, duration, stop, &mut sink, Detach::Behind))
    };
    let restored = switch.restore();
    match &restored {
        Ok(()) => eprintln!(
            "iommutop: A/B: IOMMU group {group} restored to {original}, its devices bound to their \
             drivers again"
        ),
        Err(e) => eprintln!("iommutop: A/B: {e}"),
    }
    restored.map_err(domain_failure)?;
    let second = match second {
        Some(measured) => measured?,
        None => {
            return Err(Failure::from(anyhow!(
                "interrupted before the {other} run; IOMMU group {group} restored to {original}"
            )))
        }
    };
    sink.report(&second.report)?;
    if let Some(failure) = second.failure {
        return Err(Failure {
            code: failure.code,
            error: anyhow!(
                "the {other} run: {:#}; IOMMU group {group} restored to {original}",
                failure.error
            ),
        });
    }
    let key = first
        .devices
        .iter()
        .find(|d| d.pci_address == Some(*address))
        .map_or_else(|| address.to_string(), |d| d.key.to_string());
    Ok(if other == DomainType::Identity.name() {
        ab_outcome(first, &second.report, &key)
    } else {
        ab_outcome(&second.report, first, &key)
    })
}
