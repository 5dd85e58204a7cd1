//! `iommutop completions SHELL`: the completion script, generated from the same clap definition
//! as the parser (clap_complete), so it cannot drift from it. clap_complete writes static
//! scripts; two things are filled in around it:
//! - PROFILE arguments offer the profiles known when the script is generated (`iommutop
//!   profiles`);
//! - `--device` offers the PCI functions present when completing: bash, zsh and fish list
//!   `/sys/bus/pci/devices` then (a script packaged on one machine serves another). Elvish and
//!   PowerShell get no device list. NIC and disk names, which `--device` takes too, are not
//!   offered.

use crate::cli::Cli;
use crate::exit::{Failure, Outcome};
use anyhow::anyhow;
use clap::CommandFactory;
use clap_complete::Shell;
use iommutop_workloads::ProfileSet;
use std::io::Write;
use std::process::ExitCode;

/// Where the PCI functions are listed, read by the script when completing.
pub const PCI_DEVICES_DIR: &str = "/sys/bus/pci/devices";

/// The one value `--device` offers in the generated script, replaced by the shell's own listing
/// of [`PCI_DEVICES_DIR`]; never left in a script.
const DEVICES_PLACEHOLDER: &str = "__iommutop_pci_devices__";

pub fn completions(shell: Shell) -> Outcome<ExitCode> {
    let names: Vec<String> = ProfileSet::discover()
        .list()
        .into_iter()
        .map(|l| l.name)
        .collect();
    let script = script(shell, &names)?;
    match std::io::stdout().write_all(script.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Failure::from(anyhow!("writing the completion script: {e}")))
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// The script for `shell`, offering `profiles` where a PROFILE goes and the PCI functions
/// present when completing where `--device` goes.
pub fn script(shell: Shell, profiles: &[String]) -> Outcome<String> {
    let mut command = offering_devices(offering_profiles(Cli::command(), profiles), shell);
    // Into memory first: clap_complete panics when its writer fails (`| head`).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "iommutop", &mut script);
    let script = String::from_utf8(script)
        .map_err(|e| anyhow!("clap_complete wrote a script that is not UTF-8: {e}"))?;
    Ok(listing_devices(&script, shell))
}

/// `command` with every PROFILE argument (`run PROFILE`, `--profile`) offering `names`, for the
/// completion script alone: the parser still takes any name or a path to a .toml file.
fn offering_profiles(command: clap::Command, names: &[String]) -> clap::Command {
    command.mut_subcommands(|sub| {
        sub.mut_args(|arg| {
            let is_profile = arg
                .get_value_names()
                .is_some_and(|v| v.iter().any(|n| n == "PROFILE"));
            if is_profile {
                arg.value_parser(clap::builder::PossibleValuesParser::new(names.to_vec()))
            } else {
                arg
            }
        })
    })
}

/// `command` with every `--device` offering the placeholder that [`listing_devices`] replaces,
/// for the shells it knows how to replace it in.
fn offering_devices(command: clap::Command, shell: Shell) -> clap::Command {
    if device_listing(shell).is_none() {
        return command;
    }
    command.mut_subcommands(|sub| {
        sub.mut_args(|arg| {
            if arg.get_long() == Some("device") {
                arg.value_parser(clap::builder::PossibleValuesParser::new([
                    DEVICES_PLACEHOLDER,
                ]))
            } else {
                arg
            }
        })
    })
}

/// What the placeholder stands for in `shell`'s script: the form clap_complete writes it in,
/// and the shell's own listing of the PCI functions, run when completing.
fn device_listing(shell: Shell) -> Option<(String, String)> {
    let listing = match shell {
        Shell::Bash => (
            format!("\"{DEVICES_PLACEHOLDER}\""),
            format!("\"$(ls {PCI_DEVICES_DIR} 2>/dev/null)\""),
        ),
        Shell::Zsh => (
            format!("({DEVICES_PLACEHOLDER})"),
            format!("_files -W {PCI_DEVICES_DIR}"),
        ),
        Shell::Fish => (
            format!("\"{DEVICES_PLACEHOLDER}\\t''\""),
            format!("\"(ls {PCI_DEVICES_DIR} 2>/dev/null)\""),
        ),
        _ => return None,
    };
    Some(listing)
}

/// `script` with the placeholder replaced by the shell's listing of the PCI functions.
fn listing_devices(script: &str, shell: Shell) -> String {
    match device_listing(shell) {
        Some((placeholder, listing)) => script.replace(&placeholder, &listing),
        None => script.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// The placeholder is replaced in every script, and every `--device` of bash, zsh and fish
    /// lists the PCI functions when completing.
    #[test]
    fn every_device_option_lists_the_pci_functions_when_completing() {
        let devices = Cli::command()
            .get_subcommands()
            .filter(|sub| sub.get_arguments().any(|a| a.get_long() == Some("device")))
            .count();
        assert!(devices >= 5, "record, run, top, serve, diagnose: {devices}");
        for shell in Shell::value_variants() {
            let script = script(*shell, &["tcp-rr-1k".to_string()]).expect("a script");
            assert!(!script.contains(DEVICES_PLACEHOLDER), "{shell}: {script}");
            let Some((_, listing)) = device_listing(*shell) else {
                continue;
            };
            assert_eq!(
                script.matches(&listing).count(),
                devices,
                "{shell}: every --device lists {PCI_DEVICES_DIR}"
            );
        }
    }
}
