//! vfio-nvme-demo: drives the library from a command line, for lab tests and experiments.
//! The `iommutop` CLI is the real entry point; this binary keeps the library honest on its own.

use iommutop_vfio_nvme::{iotlb_sweep, restore_leftovers, run, worker, Params, SweepParams};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

const HELP: &str = "\
usage: vfio-nvme-demo [OPTIONS]            run I/O on an NVMe controller through VFIO
       vfio-nvme-demo --iotlb-sweep [OPTIONS]
       vfio-nvme-demo --restore [--device DEV]

device and host:
  --device DEV           0000:01:00.0, nvme0 or /dev/nvme0n1 (default: the only NVMe controller)
  --bind                 bind it to vfio-pci for the run and back to its driver after
  --reserve-hugepages    raise nr_hugepages as the run needs, put it back after
  --backend B            auto (default), legacy or iommufd
  --nsid N               namespace (default 1)
I/O:
  --pattern P            randread (default), randwrite, read, write
  --bs SIZE              bytes per I/O (default 4k)
  --qd N                 commands in flight per thread (default 1)
  --threads N            threads, one I/O queue pair each (default 1)
  --duration TIME        run this long (default 10s), or
  --ios N                this many I/Os in total
  --pages N              distinct buffer pages per thread (default: what --qd needs)
  --page-size S          4k (default), 2m or 1g; a list (4k,2m) with --iotlb-sweep
  --allow-write          writes overwrite the device: needed for randwrite/write, with --device
  --verify               writes a pattern derived from LBA and --seed; reads check it
  --seed N               random LBAs and pattern (default 1)
sweep:
  --iotlb-sweep          QD1 reads over 1, 2, 4 ... --pages pages per page size; --ios per step
output:
  --json PATH            the full result as JSON
  --ccdf-csv PATH        the latency CCDF as CSV (thread,latency_ns,ccdf)
  --svg PATH             the sweep's plot
exit status: 0 done, 1 failed, 2 bad usage";

enum Mode {
    Run(Params),
    Sweep(SweepParams),
    Restore(Option<String>),
}

struct Cli {
    mode: Mode,
    json: Option<PathBuf>,
    ccdf_csv: Option<PathBuf>,
    svg: Option<PathBuf>,
}

fn takes_value(option: &str) -> bool {
    !matches!(
        option,
        "--bind"
            | "--reserve-hugepages"
            | "--allow-write"
            | "--verify"
            | "--iotlb-sweep"
            | "--restore"
            | "--help"
    )
}

fn parse(args: &[String]) -> Result<Option<Cli>, String> {
    let mut pairs = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let (opt, inline) = match arg.split_once('=') {
            Some((o, v)) => (o.to_string(), Some(v.to_string())),
            None => (arg.clone(), None),
        };
        if !opt.starts_with("--") {
            return Err(format!(
                "unexpected argument `{arg}` (options start with --)"
            ));
        }
        let value = if inline.is_some() || !takes_value(&opt) {
            inline
        } else {
            i += 1;
            Some(
                args.get(i)
                    .cloned()
                    .ok_or_else(|| format!("{opt} needs a value"))?,
            )
        };
        pairs.push((opt, value));
        i += 1;
    }
    if pairs.iter().any(|(o, _)| o == "--help" || o == "-h") {
        return Ok(None);
    }
    let has = |name: &str| pairs.iter().any(|(o, _)| o == name);
    let mut cli = Cli {
        mode: if has("--restore") {
            Mode::Restore(
                pairs
                    .iter()
                    .find(|(o, _)| o == "--device")
                    .and_then(|(_, v)| v.clone()),
            )
        } else if has("--iotlb-sweep") {
            Mode::Sweep(SweepParams::default())
        } else {
            Mode::Run(Params::default())
        },
        json: None,
        ccdf_csv: None,
        svg: None,
    };
    for (opt, value) in pairs {
        match opt.as_str() {
            "--iotlb-sweep" | "--restore" => {}
            "--json" => cli.json = value.map(PathBuf::from),
            "--ccdf-csv" => cli.ccdf_csv = value.map(PathBuf::from),
            "--svg" => cli.svg = value.map(PathBuf::from),
            _ => match &mut cli.mode {
                Mode::Run(p) => p.set(&opt, value.as_deref()).map_err(|e| e.to_string())?,
                Mode::Sweep(p) => p.set(&opt, value.as_deref()).map_err(|e| e.to_string())?,
                Mode::Restore(_) if opt == "--device" => {}
                Mode::Restore(_) => return Err(format!("{opt}: --restore takes only --device")),
            },
        }
    }
    match &cli.mode {
        Mode::Run(p) => p.validate().map_err(|e| e.to_string())?,
        Mode::Sweep(p) => p.validate().map_err(|e| e.to_string())?,
        Mode::Restore(_) => {}
    }
    Ok(Some(cli))
}

fn write(path: &Option<PathBuf>, text: &str) -> Result<(), String> {
    match path {
        Some(p) => std::fs::write(p, text).map_err(|e| format!("writing {}: {e}", p.display())),
        None => Ok(()),
    }
}

fn main() -> ExitCode {
    if let Some(code) = worker::maybe_run() {
        return code;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cli = match parse(&args) {
        Ok(Some(cli)) => cli,
        Ok(None) => {
            println!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("vfio-nvme-demo: {e}");
            return ExitCode::from(2);
        }
    };
    let cancel = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(signal, Arc::clone(&cancel)) {
            eprintln!("vfio-nvme-demo: cannot handle signal {signal}: {e}");
            return ExitCode::FAILURE;
        }
    }
    let outcome: Result<(), String> = match cli.mode {
        Mode::Restore(device) => match restore_leftovers(device.as_deref()) {
            Ok(Some(note)) => {
                println!("{note}");
                Ok(())
            }
            Ok(None) => {
                println!("nothing to restore");
                Ok(())
            }
            Err(e) => Err(e.to_string()),
        },
        Mode::Run(params) => match run(&params, &cancel) {
            Ok(result) => {
                print!("{}", result.summary_text());
                serde_json::to_string_pretty(&result)
                    .map_err(|e| e.to_string())
                    .and_then(|json| write(&cli.json, &json))
                    .and_then(|_| write(&cli.ccdf_csv, &result.ccdf_csv()))
            }
            Err(e) => Err(e.to_string()),
        },
        Mode::Sweep(params) => match iotlb_sweep(&params, &cancel) {
            Ok(result) => {
                print!("{}", result.table());
                for note in result.host.notes() {
                    println!("host: {note}");
                }
                serde_json::to_string_pretty(&result)
                    .map_err(|e| e.to_string())
                    .and_then(|json| write(&cli.json, &json))
                    .and_then(|_| write(&cli.svg, &result.svg()))
            }
            Err(e) => Err(e.to_string()),
        },
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vfio-nvme-demo: error: {e}");
            ExitCode::FAILURE
        }
    }
}
