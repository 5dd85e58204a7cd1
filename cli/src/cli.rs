//! Command-line interface (clap). Parsing only: the commands live in `commands/`.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "iommutop",
    version,
    about = "Per-device IOMMU translation cost, measured with eBPF",
    long_about = "iommutop attaches BPF programs to the DMA map/unmap, IOVA allocation, IOTLB \
sync/flush and completion paths, and shows per PCI device what address translation costs."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show which attach tier each probe point gets on this kernel, and why others were refused.
    Probes(ProbesArgs),
    /// Attach, run COMMAND (or wait), and write one report.
    Record(RecordArgs),
    /// Run a workload under the probes and explain what translation costs, where, and what to try.
    Diagnose(DiagnoseArgs),
    /// Line up two reports and explain the difference; --fail-if gates CI.
    Compare(CompareArgs),
}

#[derive(Debug, Args)]
pub struct ProbesArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Load every embedded BPF program against every target this kernel has (without
    /// attaching), so the verifier judges all of them; exits 1 if any is rejected.
    #[arg(long)]
    pub verify: bool,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Stop after this many seconds (default: when COMMAND exits, or on Ctrl-C).
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub duration: Option<f64>,
    /// Sampling interval in seconds.
    #[arg(long, value_name = "S", default_value = "1", value_parser = parse_seconds)]
    pub interval: f64,
    /// Write the report as JSON to FILE, or `-` to stream one JSON object per interval to stdout.
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<PathBuf>,
    /// The command to run under the probes.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DiagnoseArgs {
    /// Explain only this device (PCI address, netdev or disk name).
    #[arg(long, value_name = "ADDR")]
    pub device: Option<String>,
    /// Also write the run's report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Stop the workload after this many seconds.
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub duration: Option<f64>,
    /// Write the sampled call paths as folded stacks (for flame-graph tools) to FILE.
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Write a flame graph (SVG) of the sampled call paths to FILE.
    #[arg(long, value_name = "FILE.svg")]
    pub flamegraph: Option<PathBuf>,
    /// Run the workload again with --device's IOMMU group in `identity`, restore the group, and
    /// report the measured difference.
    #[arg(long)]
    pub ab: bool,
    /// The workload to diagnose (default: 2000 direct 4 KiB reads of the first NVMe namespace).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline report.
    pub a: PathBuf,
    /// The report compared with it.
    pub b: PathBuf,
    /// Also write the comparison as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Exit with code 4 when this holds, e.g. `workload.transactions_per_s < -2%` or
    /// `device[nvme0n1].translation_ns_per_io > 800` (repeatable).
    #[arg(long = "fail-if", value_name = "EXPR")]
    pub fail_if: Vec<String>,
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(format!("`{text}` must be a positive number of seconds"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn record_takes_the_command_after_double_dash() {
        let cli = Cli::try_parse_from([
            "iommutop",
            "record",
            "--json",
            "r.json",
            "--",
            "dd",
            "if=/dev/zero",
        ])
        .expect("parses");
        let Command::Record(args) = cli.command else {
            panic!("not record")
        };
        assert_eq!(args.command, ["dd", "if=/dev/zero"]);
        assert_eq!(args.json.as_deref(), Some(std::path::Path::new("r.json")));
    }

    #[test]
    fn seconds_must_be_positive() {
        assert!(Cli::try_parse_from(["iommutop", "record", "--interval", "0"]).is_err());
        assert!(Cli::try_parse_from(["iommutop", "record", "--duration", "x"]).is_err());
    }
}
