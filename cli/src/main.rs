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
    // The vfio-nvme workload does its I/O in a child: this executable started as its worker.
    if let Some(code) = iommutop_vfio_nvme::worker::maybe_run() {
        return code;
    }
    let cli = cli::Cli::parse();
    let result = match cli.command {
        None => commands::top::without_subcommand(),
        Some(command) => run(command),
    };
    match result {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
}

fn run(command: cli::Command) -> exit::Outcome<ExitCode> {
    match command {
        cli::Command::Probes(args) => commands::probes::run(&args),
        cli::Command::Record(args) => commands::record::run(&args),
        cli::Command::Diagnose(args) => commands::diagnose::run(&args),
        cli::Command::Compare(args) => commands::compare::run(&args),
        cli::Command::Run(args) => commands::run::run(&args),
        cli::Command::Workload(args) => commands::workload::run(&args),
        cli::Command::Profiles(args) => commands::profiles::run(&args),
        cli::Command::Top(args) => commands::top::run(&args),
    }
}
