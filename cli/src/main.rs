//! iommutop: per-device IOMMU translation cost, measured with eBPF.

mod cli;
mod commands;
mod domain;
mod exit;
mod output;
mod privileges;
mod probes;
mod session;
mod stop;
mod sysinfo;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Probes(args) => commands::probes::run(&args),
        cli::Command::Record(args) => commands::record::run(&args),
        cli::Command::Diagnose(args) => commands::diagnose::run(&args),
        cli::Command::Compare(args) => commands::compare::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
}
