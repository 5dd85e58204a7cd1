//! iommutop: per-device IOMMU translation cost, measured with eBPF.

mod cli;
mod commands;
mod device_filter;
mod domain;
mod exit;
mod measurement;
mod output;
mod privileges;
mod proc_stat;
mod report_format;
mod stop;
mod task_filter;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // The vfio-nvme workload does its I/O in a child: this executable started as its worker.
    if let Some(code) = iommutop_vfio_nvme::worker::maybe_run() {
        return code;
    }
    let cli = cli::Cli::parse();
    init_logging(cli.verbose);
    log::debug!("command line read");
    let result = match cli.command {
        None => commands::top::without_subcommand(),
        Some(command) => run(command),
    };
    match result {
        Ok(code) => code,
        Err(failure) => failure.report(),
    }
}

/// Warnings by default, more of iommutop's own with each -v (the libraries stay at warnings);
/// RUST_LOG, when set, decides instead.
fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => log::LevelFilter::Warn,
        1 => log::LevelFilter::Info,
        _ => log::LevelFilter::Debug,
    };
    // -vv shows when each step happened: where attaching spends its time.
    let timestamps = (verbose >= 2).then_some(env_logger::TimestampPrecision::Millis);
    env_logger::Builder::new()
        .filter_level(log::LevelFilter::Warn)
        .filter_module("iommutop", level)
        .parse_env("RUST_LOG")
        .format_timestamp(timestamps)
        .init();
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
        cli::Command::Report(args) => commands::report::run(&args),
        cli::Command::Serve(args) => commands::serve::run(&args),
        cli::Command::Completions(args) => commands::completions::completions(args.shell),
        cli::Command::Man { dir } => commands::docs::man_pages(&dir),
    }
}
