//! Command-line interface (clap). Parsing only: the commands live in `commands/`.

use clap::{Args, Parser, Subcommand};
use iommutop_loader::PointSelection;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "iommutop",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("IOMMUTOP_GIT_COMMIT"), ")"),
    about = "Per-device IOMMU translation cost, measured with eBPF",
    long_about = "iommutop attaches BPF programs to the DMA map/unmap, IOVA allocation, IOTLB \
sync/flush and completion paths, and shows per PCI device what address translation costs."
)]
pub struct Cli {
    /// Say what iommutop does on stderr: -v which tier each probe got, -vv every hook tried
    /// and why it was refused (RUST_LOG, e.g. `RUST_LOG=iommutop=debug`, overrides).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Without one: `top` on a terminal, this help otherwise.
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show which attach tier each probe point gets on this kernel, why others were refused, and
    /// what the probes' BPF maps take in kernel memory here and with 256 CPUs.
    Probes(ProbesArgs),
    /// Attach, run COMMAND (or wait), and write one report.
    Record(RecordArgs),
    /// Run a workload under the probes and explain what translation costs, where, and what to try.
    Diagnose(DiagnoseArgs),
    /// Line up two reports and explain the difference; --fail-if gates CI.
    Compare(CompareArgs),
    /// Run a profile (a known investigation) under the probes: the workload's numbers and the
    /// probes' in one report.
    Run(RunArgs),
    /// Run one workload alone, without probes, and print its numbers.
    Workload(WorkloadArgs),
    /// List the profiles `iommutop run` knows.
    Profiles(ProfilesArgs),
    /// The live view: per device, what translation costs, every interval (what `iommutop`
    /// alone runs on a terminal).
    Top(TopArgs),
    /// Show a saved report again: its summary and verdict, the report in the current schema, its
    /// call paths as folded stacks or a flame graph.
    Report(ReportArgs),
    /// Export per-device translation cost to Prometheus: attach the probes once and serve
    /// `/metrics` (text format 0.0.4) and `/healthz` until SIGINT or SIGTERM.
    Serve(ServeArgs),
    /// Print a shell completion script, e.g. `iommutop completions bash >
    /// /etc/bash_completion.d/iommutop`; in bash, zsh and fish, --device offers the PCI devices
    /// present when completing.
    Completions(CompletionsArgs),
    /// Write the manual pages (iommutop.1, iommutop-COMMAND.1) into DIR; docs/man/ holds them.
    #[command(hide = true)]
    Man { dir: PathBuf },
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A report written by `record`, `run`, `diagnose` or `top` with --json, the NDJSON stream
    /// `record --json -` writes, or `-` to read either from standard input.
    #[arg(value_name = "FILE|-")]
    pub file: PathBuf,
    #[arg(long, value_enum, default_value = "text", help = FORMAT_HELP)]
    pub format: OutputFormat,
    #[arg(long, value_name = "FILE|-", help = JSON_HELP)]
    pub json: Option<PathBuf>,
    /// Also print each timed operation's latency distribution per device, as log2 histograms of
    /// nanoseconds (as bcc's biolatency draws them).
    #[arg(long)]
    pub hist: bool,
    /// The device the verdict is about (PCI address, NIC or disk name); default: every device.
    #[arg(long, value_name = "DEV")]
    pub device: Option<String>,
    /// Write the sampled call paths as folded stacks to FILE.
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Write a flame graph (SVG) of the sampled call paths to FILE.
    #[arg(long, value_name = "FILE.svg")]
    pub flamegraph: Option<PathBuf>,
    #[arg(long, value_name = "FILE.html", help = HTML_HELP)]
    pub html: Option<PathBuf>,
}

/// `--format` of every command that prints a result: what goes to standard output.
const FORMAT_HELP: &str = "What to print: text for a terminal, json (what --json writes), \
markdown for an issue or a pull request, or html (the page --html writes); a command refuses a \
format it has no form for.";

/// `--json` of every command that prints a result.
const JSON_HELP: &str = "Also write the result as JSON to FILE, or to standard output with `-` \
(the text then goes to standard error).";

/// `--format` of `record` and `run`, which stream rather than print a finished result.
const STREAM_FORMAT_HELP: &str = "What to print: text (the summary; with --print, each \
interval's table too), json (one JSON object per interval, then the report: what `--json -` \
streams), or markdown or html (the report when it is complete, as `iommutop report --format` \
prints it).";

/// `--json` of the commands that print a table (`probes`, `profiles`): as every command's, and
/// alone as `--json -`.
const JSON_TABLE_HELP: &str = "Also write the result as JSON to FILE, or to standard output with \
`-` (the table then goes to standard error); `--json` alone is `--json -`.";

/// What a command prints to standard output (`--format`), the same choices on every command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
    Markdown,
    Html,
}

impl OutputFormat {
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Text => "text",
            OutputFormat::Json => "json",
            OutputFormat::Markdown => "markdown",
            OutputFormat::Html => "html",
        }
    }
}

/// `--html` of the commands that have a report.
const HTML_HELP: &str = "Write the report as one self-contained HTML page to FILE: per device \
the latency distribution of each timed operation, rates over time, where the translation time \
goes, the sampled call paths (no network needed to view it).";

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ProbesArgs {
    #[arg(long, value_name = "FILE|-", num_args = 0..=1, default_missing_value = "-",
          help = JSON_TABLE_HELP)]
    pub json: Option<PathBuf>,
    /// What to print: text (a table) or json; markdown and html are refused.
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
    /// Load every embedded BPF program against every target this kernel has (without
    /// attaching), so the verifier judges all of them; exits 1 if any is rejected.
    #[arg(long)]
    pub verify: bool,
    /// Run the BPF test programs in this kernel (BPF_PROG_TEST_RUN, never attached) and check
    /// that it computes what iommutop reads back: the latency histogram's slot of every edge
    /// value; exits 1 on any disagreement.
    #[arg(long, conflicts_with = "verify")]
    pub selftest: bool,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Stop after this many seconds (default: when COMMAND exits, or on Ctrl-C).
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub duration: Option<f64>,
    /// Sampling interval in seconds.
    #[arg(long, value_name = "S", default_value = "1", value_parser = parse_seconds)]
    pub interval: f64,
    /// Print each interval's table to stdout while recording, as `top --batch` does (the
    /// summary follows at the end).
    #[arg(long)]
    pub print: bool,
    /// Write the report as JSON to FILE, or `-` to stream one JSON object per interval to stdout.
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "text", help = STREAM_FORMAT_HELP)]
    pub format: OutputFormat,
    /// Record with --device's IOMMU group switched to this domain type (unbound, switched and
    /// bound again before the probes attach; restored after, also on Ctrl-C).
    #[arg(long, value_name = "TYPE", requires = "device",
          value_parser = clap::builder::PossibleValuesParser::new(crate::domain::TYPES))]
    pub domain: Option<String>,
    #[arg(long, value_name = "DEV", help = DEVICE_HELP_RECORD)]
    pub device: Option<String>,
    #[command(flatten)]
    pub tasks: crate::task_filter::TaskFilterArgs,
    /// Which netdevs' packets are counted: `physical`, NICs with a parent device (on its row), or
    /// `all`, also those without one (veth, tun, lo, bridges), each on a row of its own.
    #[arg(long, value_enum, value_name = "WHICH", default_value = "physical")]
    pub netdev: NetdevScope,
    /// Write the sampled call paths as folded stacks (for flame-graph tools) to FILE.
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Write a flame graph (SVG) of the sampled call paths to FILE.
    #[arg(long, value_name = "FILE.svg")]
    pub flamegraph: Option<PathBuf>,
    /// Also count the kernel's own DMA and IOMMU trace events (dma:*, 6.12+; iommu:map and
    /// iommu:unmap), per device where they name one, and report them beside the probes' counts:
    /// a second opinion that the counts hold on this machine.
    #[arg(long)]
    pub cross_check: bool,
    /// Attach only these probe points (comma-separated, `iommutop probes` lists them) and the
    /// DMA API points the IOMMU-side ones need for attribution: less cost, fewer numbers.
    #[arg(long, value_name = "LIST", value_parser = PointSelection::parse)]
    pub points: Option<PointSelection>,
    /// The command to run under the probes.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DiagnoseArgs {
    /// The workload: a profile (`iommutop profiles`); default: picked from the devices present
    /// (a NIC gets tcp-rr-1k with a second free NIC, an NVMe fio-randread-4k-qd32x4).
    #[arg(long, value_name = "PROFILE")]
    pub profile: Option<String>,
    /// Override one of the profile's parameters (repeatable), e.g. `--set host=192.0.2.10`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// The device to diagnose (PCI address, netdev or disk name); also picks the default
    /// workload and the device of --ab.
    #[arg(long, value_name = "ADDR")]
    pub device: Option<String>,
    /// Also write the run's report as JSON to FILE; with --ab, the other mode's report beside
    /// it, named for that mode: `rr.json` → `rr-identity.json` (`rr-DMA-FQ.json` or
    /// `rr-DMA.json` when the group starts in identity).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// What to print: text (the system before the run, then the verdict and the advice), json
    /// (the same lines, each device's figures per unit and the run's report:
    /// docs/diagnose.schema.json), markdown (for an issue or a pull request) or html (the page
    /// --html writes). --json FILE still writes the run's report.
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
    /// Run the workload this long (the profile's duration_s; a command is stopped after it).
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub duration: Option<f64>,
    /// Write the sampled call paths as folded stacks (for flame-graph tools) to FILE.
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Write a flame graph (SVG) of the sampled call paths to FILE.
    #[arg(long, value_name = "FILE.svg")]
    pub flamegraph: Option<PathBuf>,
    /// Write the diagnosis as one self-contained HTML page to FILE (what --format html prints):
    /// the system, the verdict with each device's figures, then the run's report with its charts.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
    /// Run the workload again with the device's IOMMU group in `identity` (or, if it is in
    /// identity, translated), restore the group and bindings, and report the measured
    /// difference in the workload's own numbers.
    #[arg(long)]
    pub ab: bool,
    /// Rerun the workload of this earlier report (its profile with the same parameters, or its
    /// command) on this kernel and compare with it: after an upgrade, why this kernel is slower
    /// than the last one. `--set` overrides a parameter (another device name here).
    #[arg(long, value_name = "OLD.json", conflicts_with_all = ["profile", "ab", "command"])]
    pub baseline: Option<PathBuf>,
    /// A command to diagnose instead of a profile.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline report.
    pub a: PathBuf,
    /// The report compared with it.
    pub b: PathBuf,
    #[arg(long, value_name = "FILE|-", help = JSON_HELP)]
    pub json: Option<PathBuf>,
    /// Exit with code 4 when this holds, e.g. `workload.transactions_per_s < -2%` or
    /// `device[nvme0n1].translation_ns_per_io > 800` (repeatable). `beyond-noise` after a
    /// relative workload threshold holds it only for a change beyond the runs' noise.
    #[arg(long = "fail-if", value_name = "EXPR")]
    pub fail_if: Vec<String>,
    /// What to print: text (the findings and their evidence), json (what --json writes),
    /// markdown (the reports, a table of the findings with their numbers and one of the
    /// thresholds, for a pull-request comment) or html (the page --html writes).
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
    /// Write the comparison as one self-contained HTML page to FILE: the findings, then per
    /// device A's and B's latency distributions on the same charts and their rates side by side.
    #[arg(long, value_name = "FILE.html")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A profile name (`iommutop profiles` lists them) or a path to a .toml file.
    #[arg(value_name = "PROFILE")]
    pub profile: String,
    /// Write the report as JSON to FILE, or `-` to stream one JSON object per interval to stdout.
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "text", help = STREAM_FORMAT_HELP)]
    pub format: OutputFormat,
    #[arg(long, value_name = "FILE.html", help = HTML_HELP)]
    pub html: Option<PathBuf>,
    /// Run the workload this long (its `duration_s`; for dma-contention, each step's).
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub duration: Option<f64>,
    /// Override one of the profile's workload parameters (repeatable), e.g.
    /// `--set filename=/dev/nvme0n1` or `--set nics=eth2,eth3`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Sampling interval in seconds.
    #[arg(long, value_name = "S", default_value = "1", value_parser = parse_seconds)]
    pub interval: f64,
    /// Also count the kernel's own DMA and IOMMU trace events (dma:*, 6.12+; iommu:map and
    /// iommu:unmap), per device where they name one, and report them beside the probes' counts:
    /// a second opinion that the counts hold on this machine.
    #[arg(long)]
    pub cross_check: bool,
    /// Attach only these probe points (comma-separated, `iommutop probes` lists them) and the
    /// DMA API points the IOMMU-side ones need for attribution: less cost, fewer numbers.
    #[arg(long, value_name = "LIST", value_parser = PointSelection::parse)]
    pub points: Option<PointSelection>,
    #[arg(long, value_name = "DEV", help = crate::device_filter::HELP)]
    pub device: Option<String>,
    #[command(flatten)]
    pub tasks: crate::task_filter::TaskFilterArgs,
    /// Run the workload N times under the probes, one after the other, and keep each run's
    /// numbers in the report (`repeats`): `compare` then measures noise across the runs.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub runs: u32,
    /// Run the workload K times first, under the probes, and discard those runs (warm caches,
    /// page tables, ARP and connection state).
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub warmup: u32,
}

#[derive(Debug, Args)]
#[command(disable_help_flag = true, after_help = workload_list())]
pub struct WorkloadArgs {
    /// The workload (one of those listed below).
    #[arg(value_name = "NAME", required_unless_present = "help")]
    pub name: Option<String>,
    /// Parameters as KEY=VALUE or --KEY VALUE (e.g. `max_size=64m`, `--rw randread`).
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub args: Vec<String>,
    /// Write the parameters, results and warnings as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Run the workload this long (its `duration_s`).
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub duration: Option<f64>,
    /// Print help (with NAME: the workload's parameters).
    #[arg(short, long)]
    pub help: bool,
}

#[derive(Debug, Args)]
pub struct ProfilesArgs {
    #[arg(long, value_name = "FILE|-", num_args = 0..=1, default_missing_value = "-",
          help = JSON_TABLE_HELP)]
    pub json: Option<PathBuf>,
    /// What to print: text (a table) or json; markdown and html are refused.
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct TopArgs {
    /// Refresh (sampling) interval in seconds; + and - change it while running.
    #[arg(long, value_name = "S", default_value = "1", value_parser = parse_seconds)]
    pub interval: f64,
    /// Run this profile's workload beside the view (`iommutop profiles` lists them).
    #[arg(long, value_name = "PROFILE")]
    pub profile: Option<String>,
    /// Override one of the profile's parameters (repeatable), e.g. `--set nics=eth2,eth3`.
    #[arg(long = "set", value_name = "KEY=VALUE", requires = "profile")]
    pub set: Vec<String>,
    /// Run the profile's workload this long.
    #[arg(long, value_name = "S", value_parser = parse_seconds, requires = "profile")]
    pub duration: Option<f64>,
    /// Write the run's report as JSON to FILE when the view ends (with a profile: when the
    /// workload ends).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// What to print: text (the view, or --batch's table), or with --batch json (one JSON
    /// object per interval, then the report, as `record --json -` streams), markdown or html
    /// (no table: the report at the end, as `iommutop report --format` prints it).
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
    /// Attach only these probe points (comma-separated, `iommutop probes` lists them) and the
    /// DMA API points the IOMMU-side ones need for attribution: less cost, fewer numbers.
    #[arg(long, value_name = "LIST", value_parser = PointSelection::parse)]
    pub points: Option<PointSelection>,
    /// Print the table as text to stdout, one timestamped block per interval, instead of the
    /// view (as `top -b` does): for pipes and logs.
    #[arg(short, long)]
    pub batch: bool,
    /// With --batch: stop after COUNT intervals (default: at Ctrl-C).
    #[arg(short = 'n', long, value_name = "COUNT", requires = "batch",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub iterations: Option<u64>,
    /// Start sorted by this column: its name (device, driver, names, domain, maps-per-s,
    /// mb-per-s, map-p50, map-p99, unmap-p50, unmap-p99, iova-p50, syncs-per-s, flushes-per-s,
    /// ns-per-io, cpu) or its header (`NS/IO`), any case; `s` changes it in the view.
    #[arg(long, value_name = "COL")]
    pub sort: Option<String>,
    /// Start showing only the rows whose address, driver, disk or NIC names or domain type
    /// contain TEXT (any case), as `/` does in the view.
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
    #[arg(long, value_name = "DEV", help = crate::device_filter::HELP)]
    pub device: Option<String>,
    #[command(flatten)]
    pub tasks: crate::task_filter::TaskFilterArgs,
    /// Which netdevs' packets are counted: `physical`, NICs with a parent device (on its row), or
    /// `all`, also those without one (veth, tun, lo, bridges), each on a row of its own.
    #[arg(long, value_enum, value_name = "WHICH", default_value = "physical")]
    pub netdev: NetdevScope,
}

/// Where `serve` listens unless told: this machine only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9464";

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address and port to serve on. The default answers this machine only; to let a
    /// Prometheus elsewhere scrape, say so: `--listen 0.0.0.0:9464` (or a chosen address).
    #[arg(long, value_name = "ADDR:PORT", default_value = DEFAULT_LISTEN)]
    pub listen: String,
    /// Attach only these probe points (comma-separated, `iommutop probes` lists them) and the
    /// DMA API points the IOMMU-side ones need for attribution: less cost, fewer series.
    #[arg(long, value_name = "LIST", value_parser = PointSelection::parse)]
    pub points: Option<PointSelection>,
    #[arg(long, value_name = "DEV", help = crate::device_filter::HELP)]
    pub device: Option<String>,
    #[command(flatten)]
    pub tasks: crate::task_filter::TaskFilterArgs,
    /// Which netdevs' packets are counted: `physical`, NICs with a parent device (on its row), or
    /// `all`, also those without one (veth, tun, lo, bridges), each on a row of its own.
    #[arg(long, value_enum, value_name = "WHICH", default_value = "physical")]
    pub netdev: NetdevScope,
}

/// Which netdevs' packets are counted (`--netdev`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum NetdevScope {
    /// NICs with a parent device, whose packets go to that device's row.
    #[default]
    Physical,
    /// Also netdevs without a parent device: a container host makes thousands.
    All,
}

/// `record --device`: the filter, and the device `--domain` switches.
const DEVICE_HELP_RECORD: &str =
    "Show only this device: a PCI address (0000:00:04.0), a NIC (eth0) or a disk (nvme0n1). The \
     `deferred` and `unattributed` rows stay, because they are not any one device's work. Nothing \
     on the host is switched, unless --domain asks for this device's IOMMU group";

/// The workloads `iommutop workload` runs, one a line with what each does, for its help.
fn workload_list() -> String {
    let mut text = String::from("Workloads:\n");
    for kind in iommutop_workloads::WorkloadKind::ALL {
        text.push_str(&format!("  {:<16} {}\n", kind.name(), kind.description()));
    }
    text.push_str("\n`iommutop workload NAME --help` lists a workload's parameters.");
    text
}

/// Why a number of seconds was refused.
#[derive(Debug, thiserror::Error)]
enum SecondsError {
    #[error("`{0}` is not a number of seconds")]
    NotANumber(String),
    #[error("`{0}` must be a positive number of seconds")]
    NotPositive(String),
}

fn parse_seconds(text: &str) -> Result<f64, SecondsError> {
    let value: f64 = text
        .parse()
        .map_err(|_| SecondsError::NotANumber(text.to_string()))?;
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(SecondsError::NotPositive(text.to_string()))
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
        let Some(Command::Record(args)) = cli.command else {
            panic!("not record")
        };
        assert_eq!(args.command, ["dd", "if=/dev/zero"]);
        assert_eq!(args.json.as_deref(), Some(std::path::Path::new("r.json")));
    }

    #[test]
    fn workload_takes_its_parameters_after_the_name() {
        let cli = Cli::try_parse_from([
            "iommutop",
            "workload",
            "--json",
            "t.json",
            "tlb",
            "max_size=1m",
            "--pattern",
            "lines",
        ])
        .expect("parses");
        let Some(Command::Workload(args)) = cli.command else {
            panic!("not workload")
        };
        assert_eq!(args.name.as_deref(), Some("tlb"));
        assert_eq!(args.args, ["max_size=1m", "--pattern", "lines"]);
        assert_eq!(args.json.as_deref(), Some(std::path::Path::new("t.json")));
    }

    #[test]
    fn run_takes_repeated_sets() {
        let cli = Cli::try_parse_from([
            "iommutop",
            "run",
            "fio-randwrite-4k-qd32x4",
            "--set",
            "filename=/dev/nvme0n1",
            "--set",
            "numjobs=2",
            "--duration",
            "3",
        ])
        .expect("parses");
        let Some(Command::Run(args)) = cli.command else {
            panic!("not run")
        };
        assert_eq!(args.set, ["filename=/dev/nvme0n1", "numjobs=2"]);
        assert_eq!(args.duration, Some(3.0));
    }

    #[test]
    fn top_is_optional_and_takes_a_profile() {
        let cli = Cli::try_parse_from(["iommutop"]).expect("parses");
        assert!(cli.command.is_none());
        let cli = Cli::try_parse_from([
            "iommutop",
            "top",
            "--interval",
            "0.5",
            "--profile",
            "tcp-rr-1k",
            "--json",
            "r.json",
        ])
        .expect("parses");
        let Some(Command::Top(args)) = cli.command else {
            panic!("not top")
        };
        assert_eq!(args.interval, 0.5);
        assert_eq!(args.profile.as_deref(), Some("tcp-rr-1k"));
        assert!(Cli::try_parse_from(["iommutop", "top", "--set", "a=b"]).is_err());
    }

    /// `--device` was only the target of `--domain`; alone it now filters.
    #[test]
    fn record_takes_device_without_domain_but_not_domain_without_device() {
        let cli = Cli::try_parse_from(["iommutop", "record", "--device", "vda"]).expect("parses");
        let Some(Command::Record(args)) = cli.command else {
            panic!("not record")
        };
        assert_eq!(args.device.as_deref(), Some("vda"));
        assert_eq!(args.domain, None);
        assert!(Cli::try_parse_from(["iommutop", "record", "--domain", "identity"]).is_err());
        for command in ["run", "top", "serve"] {
            let mut argv = vec!["iommutop", command, "--device", "eth0"];
            if command == "run" {
                argv.push("tcp-rr-1k");
            }
            assert!(Cli::try_parse_from(&argv).is_ok(), "{command}");
        }
    }

    #[test]
    fn top_takes_a_start_up_sort_and_filter() {
        let cli = Cli::try_parse_from([
            "iommutop",
            "top",
            "--batch",
            "--sort",
            "ns-per-io",
            "--filter",
            "nvme",
        ])
        .expect("parses");
        let Some(Command::Top(args)) = cli.command else {
            panic!("not top")
        };
        assert_eq!(args.sort.as_deref(), Some("ns-per-io"));
        assert_eq!(args.filter.as_deref(), Some("nvme"));
    }

    #[test]
    fn seconds_must_be_positive() {
        assert!(Cli::try_parse_from(["iommutop", "record", "--interval", "0"]).is_err());
        assert!(Cli::try_parse_from(["iommutop", "record", "--duration", "x"]).is_err());
    }
}
