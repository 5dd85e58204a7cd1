//! `iommutop workload NAME [KEY=VALUE | --KEY VALUE]... [--json FILE] [--duration S]`: one
//! workload alone, without probes (no root needed unless the workload itself needs it), its
//! numbers printed or written as JSON.

use crate::cli::WorkloadArgs;
use crate::exit::{Failure, Outcome};
use crate::stop::StopSignal;
use anyhow::{anyhow, Context};
use iommutop_workloads::error::ErrorClass;
use iommutop_workloads::params::{BadValue, ParamValues};
use iommutop_workloads::{ProbeWindow, ReportedOutput, WorkloadOutput};
use iommutop_workloads::{Profile, ProfileSet, RunControl, Workload, WorkloadError, WorkloadKind};
use serde_json::{json, Map, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A workload error on its way to `main`, with the exit code its class calls for.
pub fn workload_failure(error: WorkloadError) -> Failure {
    match error.class() {
        ErrorClass::Usage => Failure::usage(error),
        ErrorClass::Environment => Failure::environment(error),
        ErrorClass::Runtime | ErrorClass::Cancelled => Failure::from(error),
    }
}

/// The workload to run, its parameters checked.
pub fn build_workload(kind: WorkloadKind, params: ParamValues) -> Outcome<Box<dyn Workload>> {
    kind.build(params).map_err(workload_failure)
}

/// A profile by name or path, with `--set KEY=VALUE` and `--duration` applied.
pub fn load_profile(name: &str, sets: &[String], duration: Option<f64>) -> Outcome<Profile> {
    let mut profile = ProfileSet::discover().find(name).map_err(Failure::usage)?;
    for assignment in sets {
        profile
            .set(assignment)
            .map_err(|e| Failure::usage(anyhow!("--set {assignment}: {e}")))?;
    }
    if let Some(seconds) = duration {
        profile
            .set_duration(seconds)
            .map_err(|e| Failure::usage(anyhow!("--duration: {e}")))?;
    }
    Ok(profile)
}

/// A profile's workload, built from its parameters.
pub fn profile_workload(profile: &Profile) -> Outcome<Box<dyn Workload>> {
    let params = profile
        .params()
        .map_err(|e| Failure::usage(anyhow!("profile {}: {e}", profile.name)))?;
    build_workload(profile.workload, params)
}

/// A profile's workload, built and checked before anything is attached or changed; a failed
/// check names the profile.
pub fn checked_profile_workload(profile: &Profile) -> Outcome<Box<dyn Workload>> {
    let workload = profile_workload(profile)?;
    workload.check().map_err(|e| {
        let failure = workload_failure(e);
        Failure {
            error: anyhow!("profile {}: {:#}", profile.name, failure.error),
            code: failure.code,
        }
    })?;
    Ok(workload)
}

/// Puts back what killed runs left (as root: only root changes anything), saying so: the host
/// layer's one sweep over /run/iommutop.
pub fn restore_leftovers() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        for line in iommutop_host::sweep(&iommutop_host::HostRoot::system()) {
            eprintln!("iommutop: {line}");
        }
    }
}

/// Without probes: Ctrl-C cancels, notes go to stderr, checkpoints have nothing to give.
struct Unprobed<'a> {
    stop: &'a StopSignal,
}

impl RunControl for Unprobed<'_> {
    fn cancelled(&self) -> bool {
        self.stop.requested()
    }
    fn live(&mut self, _numbers: Value) {}
    fn note(&mut self, line: &str) {
        eprintln!("iommutop: {line}");
    }
    fn checkpoint(&mut self, _label: &str) -> Option<ProbeWindow> {
        None
    }
}

/// What the trailing arguments say.
#[derive(Debug, Default, PartialEq)]
struct Parsed {
    given: Map<String, Value>,
    json: Option<PathBuf>,
    duration: Option<f64>,
    help: bool,
}

/// Why the trailing arguments were refused.
#[derive(Debug, thiserror::Error, PartialEq)]
enum ArgsError {
    #[error(
        "`{arg}`: give parameters as KEY=VALUE (`iommutop workload {workload} --help` lists them)"
    )]
    NotKeyValue { arg: String, workload: &'static str },
    #[error("--{0} needs a value")]
    NoValue(String),
    #[error("--duration {0}: give positive seconds")]
    BadDuration(String),
    #[error("`{key}`: {message}")]
    UnknownKey { key: String, message: String },
    #[error("`{key}`: {problem}")]
    BadValue { key: String, problem: BadValue },
}

fn parse_args(kind: WorkloadKind, args: &[String]) -> Result<Parsed, ArgsError> {
    let mut parsed = Parsed::default();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--help" || arg == "-h" || arg == "help" {
            parsed.help = true;
            continue;
        }
        let (key, inline) = match arg.strip_prefix("--") {
            Some(rest) => match rest.split_once('=') {
                Some((k, v)) => (k.to_string(), Some(v.to_string())),
                None => (rest.to_string(), None),
            },
            None => match arg.split_once('=') {
                Some((k, v)) => (k.to_string(), Some(v.to_string())),
                None => {
                    return Err(ArgsError::NotKeyValue {
                        arg: arg.clone(),
                        workload: kind.name(),
                    })
                }
            },
        };
        let key = key.replace('-', "_");
        let is_flag = kind
            .spec(&key)
            .is_some_and(|s| s.kind == iommutop_workloads::params::Kind::Bool);
        let value = match inline {
            Some(v) => v,
            None if is_flag => "true".to_string(),
            None => {
                let v = args
                    .get(i)
                    .ok_or_else(|| ArgsError::NoValue(key.clone()))?
                    .clone();
                i += 1;
                v
            }
        };
        match key.as_str() {
            "json" => parsed.json = Some(PathBuf::from(value)),
            "duration" => {
                parsed.duration = Some(
                    value
                        .parse()
                        .ok()
                        .filter(|v: &f64| v.is_finite() && *v > 0.0)
                        .ok_or_else(|| ArgsError::BadDuration(value.clone()))?,
                )
            }
            _ => {
                let spec = kind.spec(&key).ok_or_else(|| ArgsError::UnknownKey {
                    message: iommutop_workloads::params::unknown_key_message(
                        &key,
                        kind.name(),
                        kind.specs(),
                    ),
                    key: key.clone(),
                })?;
                let value = spec
                    .parse_text(&value)
                    .map_err(|problem| ArgsError::BadValue {
                        key: key.clone(),
                        problem,
                    })?;
                parsed.given.insert(key, value);
            }
        }
    }
    Ok(parsed)
}

/// `iommutop workload --help`: the command's own help, its usage line naming the program.
fn command_help() -> String {
    let mut command = <crate::cli::Cli as clap::CommandFactory>::command();
    command.build();
    command
        .find_subcommand_mut("workload")
        .map(|workload| workload.render_long_help().to_string())
        .unwrap_or_default()
}

/// `iommutop workload NAME --help`: the parameters, their values and defaults.
fn parameter_help(kind: WorkloadKind) -> String {
    let mut out = format!(
        "{}: {}\n\nusage: iommutop workload {} [KEY=VALUE]... [--json FILE|-]{}\n\nparameters:\n",
        kind.name(),
        kind.description(),
        kind.name(),
        if kind.duration_key().is_some() {
            " [--duration S]"
        } else {
            ""
        }
    );
    for spec in kind.specs() {
        out.push_str(&format!(
            "  {:<18} {}\n  {:<18} ({}{})\n",
            spec.key,
            spec.help,
            "",
            spec.describe_kind(),
            spec.default_text()
                .map(|d| format!("; default {d}"))
                .unwrap_or_default()
        ));
    }
    out
}

pub fn run(args: &WorkloadArgs) -> Outcome<ExitCode> {
    let Some(name) = &args.name else {
        print!("{}", command_help());
        return Ok(ExitCode::SUCCESS);
    };
    let kind = WorkloadKind::from_name(name).ok_or_else(|| {
        Failure::usage(anyhow!(
            "unknown workload `{name}` (known: {})",
            WorkloadKind::names()
        ))
    })?;
    let mut parsed = parse_args(kind, &args.args).map_err(|m| Failure::usage(anyhow!(m)))?;
    if parsed.help || args.help {
        print!("{}", parameter_help(kind));
        return Ok(ExitCode::SUCCESS);
    }
    let json = parsed.json.take().or_else(|| args.json.clone());
    if let Some(seconds) = parsed.duration.or(args.duration) {
        let key = kind.duration_key().ok_or_else(|| {
            Failure::usage(anyhow!(
                "workload {} runs until it is done and takes no --duration",
                kind.name()
            ))
        })?;
        parsed.given.insert(key.to_string(), json!(seconds));
    }
    let params = kind.params(parsed.given).map_err(workload_failure)?;
    let mut workload = build_workload(kind, params)?;
    workload.check().map_err(workload_failure)?;
    if let Some(path) = json.as_deref().filter(|p| !is_stdout(p)) {
        check_writable(path)?;
    }
    restore_leftovers();
    let stop = StopSignal::install()?;
    let mut ctl = Unprobed { stop: &stop };
    let result = workload.prepare().and_then(|()| workload.run(&mut ctl));
    let problems = workload.restore();
    for problem in &problems {
        eprintln!("iommutop: not restored: {problem}");
    }
    let params = workload.params();
    drop(workload);
    let ReportedOutput {
        results,
        mut warnings,
    } = result
        .and_then(WorkloadOutput::reported)
        .map_err(workload_failure)?;
    warnings.extend(problems.iter().map(|p| format!("not restored: {p}")));
    // With `--json -` stdout carries the JSON alone; the summary goes to stderr.
    if json.as_deref().is_some_and(is_stdout) {
        eprint!("{}", kind.summarize(&results));
    } else {
        print!("{}", kind.summarize(&results));
    }
    match &json {
        Some(path) => {
            let value = json!({
                "name": kind.name(),
                "params": params,
                "results": results,
                "warnings": warnings,
            });
            for warning in &warnings {
                eprintln!("iommutop: warning: {warning}");
            }
            if is_stdout(path) {
                println!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                write_json(path, &value)?;
                eprintln!("iommutop: results written to {}", path.display());
            }
        }
        None => {
            for warning in &warnings {
                eprintln!("iommutop: warning: {warning}");
            }
        }
    }
    if results.interrupted() {
        return Err(Failure::from(anyhow!(
            "interrupted (the results cover the run up to then)"
        )));
    }
    if problems.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Failure::from(anyhow!(
            "could not restore everything: {}",
            problems.join("; ")
        )))
    }
}

/// `--json -`: standard output.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Fails early if `path` cannot be written; a file created to find out is removed again, so a
/// failed run leaves no empty report behind.
fn check_writable(path: &Path) -> Outcome {
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(|_| {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
        })
        .map_err(|e| {
            Failure::usage(anyhow!(
                "cannot write {}: {e} (choose a writable path for --json)",
                path.display()
            ))
        })
}

fn write_json(path: &Path, value: &Value) -> Outcome {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    if !crate::output::written_by_rename(path) {
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        return Ok(());
    }
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".iommutop-tmp");
    let temporary = PathBuf::from(temporary);
    std::fs::File::create(&temporary)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&temporary, path))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parameters_come_as_key_value_or_as_options() {
        let parsed = parse_args(
            WorkloadKind::Fio,
            &strings(&[
                "rw=randread",
                "--bs",
                "4k",
                "--iodepth=8",
                "--direct",
                "--json",
                "x.json",
            ]),
        )
        .unwrap();
        assert_eq!(parsed.given["rw"], json!("randread"));
        assert_eq!(parsed.given["bs"], json!(4096));
        assert_eq!(parsed.given["iodepth"], json!(8));
        assert_eq!(parsed.given["direct"], json!(true));
        assert_eq!(parsed.json.as_deref(), Some(Path::new("x.json")));
        let parsed = parse_args(
            WorkloadKind::Tlb,
            &strings(&["--page-sizes", "4k", "max-size=1m"]),
        )
        .unwrap();
        assert_eq!(parsed.given["page_sizes"], json!(["4k"]));
        assert_eq!(parsed.given["max_size"], json!(1 << 20));
    }

    #[test]
    fn bad_arguments_say_what_to_do() {
        let err = parse_args(WorkloadKind::Fio, &strings(&["randread"])).unwrap_err();
        assert!(
            err.to_string().contains("give parameters as KEY=VALUE"),
            "{err}"
        );
        let err = parse_args(WorkloadKind::Fio, &strings(&["iodpeth=3"])).unwrap_err();
        assert!(err.to_string().contains("did you mean `iodepth`"), "{err}");
        let err = parse_args(WorkloadKind::Fio, &strings(&["--bs"])).unwrap_err();
        assert_eq!(err.to_string(), "--bs needs a value");
    }

    #[test]
    fn command_help_names_the_program_and_every_workload() {
        let text = command_help();
        assert!(text.contains("Usage: iommutop workload "), "{text}");
        for kind in WorkloadKind::ALL {
            assert!(text.contains(kind.name()), "{}: {text}", kind.name());
        }
        assert!(!text.contains("not yet"), "{text}");
    }

    #[test]
    fn help_lists_every_parameter() {
        for kind in WorkloadKind::ALL {
            let text = parameter_help(kind);
            for spec in kind.specs() {
                assert!(text.contains(spec.key), "{}: {}", kind.name(), spec.key);
            }
        }
    }
}
