//! What `diagnose` runs: a profile (named, or picked from the devices present: a NIC gets
//! TCP_RR, an NVMe gets fio random reads), or the user's command after `--`.

use crate::cli::DiagnoseArgs;
use crate::exit::{Failure, Outcome};
use anyhow::anyhow;
use iommutop_model::facts::{DeviceFacts, HostFacts};
use iommutop_model::params::ParamValue;
use iommutop_model::report::Report;
use iommutop_workloads::process::find_in_path;
use iommutop_workloads::{Profile, ProfileSet};
use std::path::Path;

/// The profile picked for a NIC.
pub const NIC_PROFILE: &str = "tcp-rr-1k";
/// The profile picked for an NVMe.
pub const NVME_PROFILE: &str = "fio-randread-4k-qd32x4";
/// Direct 4 KiB reads of an NVMe namespace when fio is not installed: read-only, safe on any disk.
const DD_READS: u32 = 4000;

/// The workload of a diagnosis.
#[derive(Debug, Clone)]
pub enum Plan {
    /// A profile's workload, with its own numbers in the report.
    Profile(Box<Profile>),
    /// A command run under the probes (its numbers are its own business).
    Command(Vec<String>),
}

impl Plan {
    pub fn describe(&self) -> String {
        match self {
            Plan::Profile(p) => format!("profile {} ({})", p.name, p.description),
            Plan::Command(argv) => format!("`{}`", iommutop_model::shell::join(argv)),
        }
    }
}

/// The device a diagnosis is about, as sysfs knows it.
pub fn device_facts<'a>(facts: &'a HostFacts, name: &str) -> Option<&'a DeviceFacts> {
    facts.device(name).or_else(|| facts.owner_of(name))
}

/// Picks the workload: `-- COMMAND`, `--profile`, else from `--device` or the devices present.
pub fn choose(args: &DiagnoseArgs, facts: &HostFacts) -> Outcome<Plan> {
    if !args.command.is_empty() {
        if args.profile.is_some() || !args.set.is_empty() {
            return Err(Failure::usage(anyhow!(
                "give --profile (with --set) or a command after --, not both"
            )));
        }
        return Ok(Plan::Command(args.command.clone()));
    }
    let device = match &args.device {
        Some(name) => Some(device_facts(facts, name).ok_or_else(|| {
            Failure::usage(anyhow!(
                "--device {name}: no such PCI device, network interface or disk here"
            ))
        })?),
        None => None,
    };
    let mut profile = match &args.profile {
        Some(name) => find(name)?,
        None => match default_plan(facts, device)? {
            DefaultPlan::Profile { name, sets } => {
                let mut profile = find(name)?;
                for assignment in sets {
                    profile
                        .set(&assignment)
                        .map_err(|e| Failure::from(anyhow!("{name}: {e}")))?;
                }
                profile
            }
            DefaultPlan::Command(argv) => return Ok(Plan::Command(argv)),
        },
    };
    for assignment in &args.set {
        profile
            .set(assignment)
            .map_err(|e| Failure::usage(anyhow!("--set {assignment}: {e}")))?;
    }
    if let Some(seconds) = args.duration {
        profile
            .set_duration(seconds)
            .map_err(|e| Failure::usage(anyhow!("--duration: {e}")))?;
    }
    Ok(Plan::Profile(Box::new(profile)))
}

/// The workload of an earlier report, to run again here: its profile with the parameters it ran
/// with (then `overrides`), else its command.
pub fn from_baseline(path: &Path, baseline: &Report, overrides: &[String]) -> Outcome<Plan> {
    let shown = path.display();
    let run = &baseline.run;
    let profile_name = run.profile.as_deref().filter(|name| {
        // `diagnose -- COMMAND` names its run "diagnose": the command is the workload.
        *name != "diagnose" || run.command.is_empty()
    });
    let Some(name) = profile_name else {
        if run.command.is_empty() {
            return Err(Failure::usage(anyhow!(
                "--baseline {shown}: the report names no workload to run again (no profile, no \
                 command); record the baseline with `iommutop run PROFILE --json` or `diagnose --json`"
            )));
        }
        if !overrides.is_empty() {
            return Err(Failure::usage(anyhow!(
                "--baseline {shown} ran a command (`{}`): --set applies to profiles only",
                iommutop_model::shell::join(&run.command)
            )));
        }
        return Ok(Plan::Command(run.command.clone()));
    };
    let mut profile = ProfileSet::discover().find(name).map_err(|e| {
        Failure::usage(anyhow!(
            "--baseline {shown}: its profile cannot run here: {e}"
        ))
    })?;
    let params = run.workload.as_ref().map(|w| &w.params);
    for (key, value) in params.into_iter().flatten() {
        let assignment = format!("{key}={}", param_text(value));
        profile.set(&assignment).map_err(|e| {
            Failure::usage(anyhow!(
                "--baseline {shown}: its parameter {assignment} does not apply here: {e}"
            ))
        })?;
    }
    for assignment in overrides {
        profile
            .set(assignment)
            .map_err(|e| Failure::usage(anyhow!("--set {assignment}: {e}")))?;
    }
    Ok(Plan::Profile(Box::new(profile)))
}

/// A parameter as `--set` writes it: strings bare, lists comma-separated, numbers and booleans
/// as JSON prints them.
fn param_text(value: &ParamValue) -> String {
    match value {
        ParamValue::Str(s) => s.clone(),
        ParamValue::List(items) => items.iter().map(param_text).collect::<Vec<_>>().join(","),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

fn find(name: &str) -> Outcome<Profile> {
    ProfileSet::discover().find(name).map_err(Failure::usage)
}

enum DefaultPlan {
    Profile {
        name: &'static str,
        sets: Vec<String>,
    },
    Command(Vec<String>),
}

/// A NIC that can take part in a local TCP_RR: a PCI function with a netdev that is down (not
/// carrying anything) — the workload itself refuses one that carries the default route.
fn free_nics(facts: &HostFacts) -> Vec<(&DeviceFacts, &str)> {
    facts
        .devices
        .iter()
        .filter(|d| d.driver.is_some())
        .flat_map(|d| d.netdevs.iter().map(move |n| (d, n.as_str())))
        .filter(|(_, nic)| !is_up(nic))
        .collect()
}

fn is_up(nic: &str) -> bool {
    std::fs::read_to_string(format!("/sys/class/net/{nic}/flags"))
        .ok()
        .and_then(|f| u32::from_str_radix(f.trim().trim_start_matches("0x"), 16).ok())
        .is_some_and(|flags| flags & 1 != 0)
}

fn nvme_disk(device: &DeviceFacts) -> Option<&str> {
    (device.driver.as_deref() == Some("nvme"))
        .then(|| device.disks.first().map(String::as_str))
        .flatten()
}

fn default_plan(facts: &HostFacts, device: Option<&DeviceFacts>) -> Outcome<DefaultPlan> {
    let nics = free_nics(facts);
    let tcp_rr = |client: &str, server: &str| DefaultPlan::Profile {
        name: NIC_PROFILE,
        sets: vec![format!("nics={client},{server}")],
    };
    let nvme = |disk: &str| {
        if find_in_path("fio").is_some() {
            DefaultPlan::Profile {
                name: NVME_PROFILE,
                sets: vec![format!("filename=/dev/{disk}")],
            }
        } else {
            eprintln!("iommutop: fio is not installed: reading /dev/{disk} with dd instead");
            DefaultPlan::Command(vec![
                "dd".into(),
                format!("if=/dev/{disk}"),
                "of=/dev/null".into(),
                "bs=4k".into(),
                format!("count={DD_READS}"),
                "iflag=direct".into(),
            ])
        }
    };
    match device {
        Some(d) if !d.netdevs.is_empty() => {
            let client = d.netdevs[0].as_str();
            let server = nics
                .iter()
                .find(|(other, _)| other.pci_address != d.pci_address)
                .map(|(_, nic)| *nic)
                .ok_or_else(|| {
                    Failure::usage(anyhow!(
                        "TCP_RR on {client} needs a second NIC cabled to it and not in use; give \
                         `--profile {NIC_PROFILE} --set host=ADDRESS` for a remote netserver, or \
                         the workload after --"
                    ))
                })?;
            Ok(tcp_rr(client, server))
        }
        Some(d) => nvme_disk(d).map(nvme).ok_or_else(|| {
            Failure::usage(anyhow!(
                "no default workload for {} ({}): give --profile or the workload after --",
                d.pci_address,
                d.driver.as_deref().unwrap_or("no driver")
            ))
        }),
        None => {
            if let [(a, client), (b, server), ..] = nics.as_slice() {
                if a.pci_address != b.pci_address {
                    return Ok(tcp_rr(client, server));
                }
            }
            facts
                .devices
                .iter()
                .find_map(nvme_disk)
                .map(nvme)
                .ok_or_else(|| {
                    Failure::usage(anyhow!(
                        "no workload to diagnose: no two free NICs for TCP_RR and no NVMe \
                         namespace; give --profile (`iommutop profiles` lists them) or the \
                         workload after --, e.g. `iommutop diagnose -- netperf -H HOST -t TCP_RR`"
                    ))
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn report_parameters_are_written_as_set_takes_them() {
        let text = |value| param_text(&ParamValue::from_json(&value).expect("a parameter"));
        assert_eq!(text(json!("eth0")), "eth0");
        assert_eq!(text(json!(["eth0", "eth1"])), "eth0,eth1");
        assert_eq!(text(json!(3.5)), "3.5");
        assert_eq!(text(json!(5.0)), "5.0");
        assert_eq!(text(json!(32)), "32");
        assert_eq!(text(json!(true)), "true");
    }
}
