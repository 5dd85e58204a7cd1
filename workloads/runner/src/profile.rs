//! Profiles: `profiles/NAME.toml`, one known investigation each — which workload with which
//! parameters, which probe groups, how long, and thresholds. Documented in `docs/profiles.md`.
//!
//! ```toml
//! description = "netperf TCP_RR 1024/1024 between two NICs"
//! workload = "netperf"
//! duration_s = 10
//!
//! [params]
//! nics = ["eth0", "eth1"]
//!
//! [probes]
//! groups = ["dma", "iommu", "iova", "iotlb", "completion"]
//!
//! [thresholds]
//! fail_if = ["workload.transactions_per_s <= 0"]
//! ```
//!
//! Everything is checked on load, and an error names the file, the line and the key
//! (`profiles/x.toml:7: params.iodepth: expected a whole number 1..=65536, got 0`).

use crate::error::WorkloadError;
use crate::params::ParamValues;
use crate::registry::WorkloadKind;
use iommutop_model::compare::Threshold;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The probe groups a profile may name (one per BPF program family).
pub const PROBE_GROUPS: [&str; 5] = ["dma", "iommu", "iova", "iotlb", "completion"];

/// The profiles shipped with iommutop, embedded in the binary (name, TOML).
pub const BUILT_IN: &[(&str, &str)] = &[
    (
        "tcp-rr-1k",
        include_str!("../../../profiles/tcp-rr-1k.toml"),
    ),
    (
        "fio-randread-4k-qd32x4",
        include_str!("../../../profiles/fio-randread-4k-qd32x4.toml"),
    ),
    (
        "fio-randwrite-4k-qd32x4",
        include_str!("../../../profiles/fio-randwrite-4k-qd32x4.toml"),
    ),
    (
        "fio-read-128k-qd128",
        include_str!("../../../profiles/fio-read-128k-qd128.toml"),
    ),
    (
        "fio-write-128k-qd128",
        include_str!("../../../profiles/fio-write-128k-qd128.toml"),
    ),
    (
        "dma-contention",
        include_str!("../../../profiles/dma-contention.toml"),
    ),
    (
        "tlb-sweep",
        include_str!("../../../profiles/tlb-sweep.toml"),
    ),
    (
        "vfio-nvme-qd1",
        include_str!("../../../profiles/vfio-nvme-qd1.toml"),
    ),
    (
        "vfio-nvme-qd32x4",
        include_str!("../../../profiles/vfio-nvme-qd32x4.toml"),
    ),
    (
        "vfio-nvme-iotlb-sweep",
        include_str!("../../../profiles/vfio-nvme-iotlb-sweep.toml"),
    ),
];

/// The environment variable naming a directory of profiles searched first.
pub const PROFILES_ENV: &str = "IOMMUTOP_PROFILES";

/// A profile that did not load: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ProfileError {
    /// The file (or `built-in:NAME`).
    pub file: String,
    pub line: Option<usize>,
    /// The key at fault (`params.iodepth`), if one is.
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": ")?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        write!(f, "{}", self.message)
    }
}

/// One profile, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// The file name without `.toml`.
    pub name: String,
    pub description: String,
    pub workload: WorkloadKind,
    /// Parameters as the profile (and `--set`) gave them, checked and normalized; defaults are
    /// added by [`Profile::params`].
    pub given: Map<String, Value>,
    pub duration_s: Option<f64>,
    pub probe_groups: Vec<String>,
    /// `--fail-if` expressions: the run exits 4 when one holds.
    pub fail_if: Vec<String>,
    /// Where it was read from (a path, or `built-in:NAME`).
    pub source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    description: Spanned<String>,
    workload: Spanned<String>,
    duration_s: Option<Spanned<f64>>,
    params: Option<Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>>,
    probes: Option<RawProbes>,
    thresholds: Option<RawThresholds>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProbes {
    groups: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawThresholds {
    fail_if: Option<Vec<Spanned<String>>>,
}

/// Turns spans into line numbers for one file.
struct Locator<'a> {
    file: &'a str,
    text: &'a str,
}

impl Locator<'_> {
    fn line(&self, span: &Range<usize>) -> usize {
        let end = span.start.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    fn error(
        &self,
        span: Option<&Range<usize>>,
        key: Option<&str>,
        message: impl Into<String>,
    ) -> ProfileError {
        ProfileError {
            file: self.file.to_string(),
            line: span.map(|s| self.line(s)),
            key: key.map(str::to_string),
            message: message.into(),
        }
    }
}

/// The key and a better message for serde's key errors (`unknown field`, `missing field`), and
/// whether the error's span points at the key (a missing key has no line of its own).
fn toml_key_error(message: &str) -> Option<(String, String, bool)> {
    let quoted = |rest: &str| {
        rest.split_once('`')
            .map(|(k, tail)| (k.to_string(), tail.to_string()))
    };
    if let Some((key, tail)) = message.strip_prefix("unknown field `").and_then(quoted) {
        if key == "name" {
            return Some((
                key,
                "a profile's name is its file name: remove `name`".into(),
                true,
            ));
        }
        let known: Vec<&str> = tail.split('`').skip(1).step_by(2).collect();
        let near = known
            .iter()
            .find(|k| k.starts_with(key.as_str()) || key.starts_with(**k))
            .map(|k| format!(" (did you mean `{k}`?)"))
            .unwrap_or_else(|| format!(" (known: {})", known.join(", ")));
        return Some((key, format!("unknown key{near}"), true));
    }
    if let Some((key, _)) = message.strip_prefix("missing field `").and_then(quoted) {
        let what = match key.as_str() {
            "workload" => format!("name the workload ({})", WorkloadKind::names()),
            "description" => "give one line saying what the profile reproduces".into(),
            _ => "this key is required".into(),
        };
        return Some((key, format!("missing: {what}"), false));
    }
    None
}

/// A TOML value no parameter takes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum NoParameterValue {
    #[error("dates are not parameter values")]
    Date,
    #[error("tables are not parameter values")]
    Table,
    #[error("{0} is not a finite number")]
    NotFinite(f64),
}

fn toml_to_json(value: &toml::Value) -> Result<Value, NoParameterValue> {
    match value {
        toml::Value::Datetime(_) => Err(NoParameterValue::Date),
        toml::Value::Array(items) => items
            .iter()
            .map(toml_to_json)
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        toml::Value::Table(_) => Err(NoParameterValue::Table),
        toml::Value::String(s) => Ok(Value::from(s.clone())),
        toml::Value::Integer(n) => Ok(Value::from(*n)),
        toml::Value::Float(x) => serde_json::Number::from_f64(*x)
            .map(Value::Number)
            .ok_or(NoParameterValue::NotFinite(*x)),
        toml::Value::Boolean(b) => Ok(Value::from(*b)),
    }
}

/// The TOML's own error (bad syntax, a missing or unknown key, a wrong type), at its line and key.
fn toml_error(at: &Locator, e: &toml::de::Error) -> ProfileError {
    let message = e.message().trim().replace('\n', " ");
    match toml_key_error(&message) {
        Some((key, message, located)) => {
            at.error(e.span().as_ref().filter(|_| located), Some(&key), message)
        }
        None => at.error(e.span().as_ref(), None, message),
    }
}

/// The description: one line, not blank.
fn description<'a>(at: &Locator, raw: &'a Spanned<String>) -> Result<&'a str, ProfileError> {
    let description = raw.get_ref().trim();
    if description.is_empty() || description.contains('\n') {
        return Err(at.error(
            Some(&raw.span()),
            Some("description"),
            "give one line saying what the profile reproduces",
        ));
    }
    Ok(description)
}

/// The workload the profile names, if it is one.
fn workload(at: &Locator, raw: &Spanned<String>) -> Result<WorkloadKind, ProfileError> {
    WorkloadKind::from_name(raw.get_ref()).ok_or_else(|| {
        at.error(
            Some(&raw.span()),
            Some("workload"),
            format!(
                "unknown workload `{}` (known: {})",
                raw.get_ref(),
                WorkloadKind::names()
            ),
        )
    })
}

/// The parameters given, checked, and where each was written in the file.
type GivenParams = (Map<String, Value>, BTreeMap<String, Range<usize>>);

/// The parameters given under `[params]`, each a key of the workload's and checked by its spec.
fn given_params(
    at: &Locator,
    workload: WorkloadKind,
    raw: Option<Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>>,
) -> Result<GivenParams, ProfileError> {
    let mut given = Map::new();
    let mut spans: BTreeMap<String, Range<usize>> = BTreeMap::new();
    for (key, value) in raw.map(Spanned::into_inner).unwrap_or_default() {
        let full_key = format!("params.{}", key.get_ref());
        let spec = workload.spec(key.get_ref()).ok_or_else(|| {
            at.error(
                Some(&key.span()),
                Some(&full_key),
                crate::params::unknown_key_message(
                    key.get_ref(),
                    workload.name(),
                    workload.specs(),
                ),
            )
        })?;
        let json = toml_to_json(value.get_ref())
            .map_err(|m| at.error(Some(&value.span()), Some(&full_key), m.to_string()))?;
        let checked = spec
            .check(&json)
            .map_err(|m| at.error(Some(&value.span()), Some(&full_key), m))?;
        spans.insert(key.get_ref().clone(), value.span());
        given.insert(key.into_inner(), checked);
    }
    Ok((given, spans))
}

/// The top-level `duration_s`, given to the workload as its duration parameter (checked by its
/// spec): refused for a workload that runs until done, and beside the same parameter.
fn duration(
    at: &Locator,
    workload: WorkloadKind,
    d: &Spanned<f64>,
    (given, spans): &mut GivenParams,
) -> Result<f64, ProfileError> {
    let Some(key) = workload.duration_key() else {
        return Err(at.error(
            Some(&d.span()),
            Some("duration_s"),
            format!(
                "workload {} runs until it is done and takes no duration: remove it",
                workload.name()
            ),
        ));
    };
    if let Some(span) = spans.get(key) {
        return Err(at.error(
            Some(span),
            Some(&format!("params.{key}")),
            "the duration is set twice: keep the top-level duration_s",
        ));
    }
    let value = Value::from(*d.get_ref());
    let checked = workload
        .spec(key)
        .map(|s| s.check(&value))
        .transpose()
        .map_err(|m| at.error(Some(&d.span()), Some("duration_s"), m))?;
    if let Some(v) = checked {
        given.insert(key.to_string(), v);
    }
    Ok(*d.get_ref())
}

/// The probe groups named under `[probes]` (at least one, each known), or all of them.
fn probe_groups(
    at: &Locator,
    raw: Option<Spanned<Vec<Spanned<String>>>>,
) -> Result<Vec<String>, ProfileError> {
    let Some(groups) = raw else {
        return Ok(PROBE_GROUPS.iter().map(|g| g.to_string()).collect());
    };
    let span = groups.span();
    let groups = groups.into_inner();
    if groups.is_empty() {
        return Err(at.error(
            Some(&span),
            Some("probes.groups"),
            format!("name at least one of: {}", PROBE_GROUPS.join(", ")),
        ));
    }
    let mut out = Vec::new();
    for g in groups {
        if !PROBE_GROUPS.contains(&g.get_ref().as_str()) {
            return Err(at.error(
                Some(&g.span()),
                Some("probes.groups"),
                format!(
                    "unknown probe group `{}` (known: {})",
                    g.get_ref(),
                    PROBE_GROUPS.join(", ")
                ),
            ));
        }
        out.push(g.into_inner());
    }
    Ok(out)
}

/// The `[thresholds] fail_if` expressions, each one that parses and is absolute (a relative one
/// needs a baseline, which only `compare` has).
fn fail_if(at: &Locator, raw: Vec<Spanned<String>>) -> Result<Vec<String>, ProfileError> {
    let mut fail_if = Vec::new();
    for expr in raw {
        let text = expr.get_ref().trim();
        let bad = |m: String| at.error(Some(&expr.span()), Some("thresholds.fail_if"), m);
        Threshold::parse(text).map_err(|e| bad(e.to_string()))?;
        if text.ends_with('%') {
            return Err(bad(format!(
                "`{text}`: a relative threshold needs a baseline report: use it with \
                 `iommutop compare --fail-if`"
            )));
        }
        fail_if.push(text.to_string());
    }
    Ok(fail_if)
}

impl Profile {
    /// Parses and checks a profile. `file` names it in errors; `name` is its name.
    pub fn parse(name: &str, file: &str, text: &str) -> Result<Profile, ProfileError> {
        let at = Locator { file, text };
        let raw: RawProfile = toml::from_str(text).map_err(|e| toml_error(&at, &e))?;
        let description = description(&at, &raw.description)?;
        let workload = workload(&at, &raw.workload)?;
        let params_span = raw.params.as_ref().map(|p| p.span());
        let mut params = given_params(&at, workload, raw.params)?;
        let duration_s = raw
            .duration_s
            .map(|d| duration(&at, workload, &d, &mut params))
            .transpose()?;
        let probe_groups = probe_groups(&at, raw.probes.and_then(|p| p.groups))?;
        let fail_if = fail_if(
            &at,
            raw.thresholds.and_then(|t| t.fail_if).unwrap_or_default(),
        )?;
        let (given, spans) = params;
        let profile = Profile {
            name: name.to_string(),
            description: description.to_string(),
            workload,
            given,
            duration_s,
            probe_groups,
            fail_if,
            source: file.to_string(),
        };
        // The workload's own checks on the combination (a mode and its keys, ...): pure, no
        // system access.
        if let Err(e) = profile.build_check() {
            let (key, message) = match e {
                WorkloadError::Param { key, message } => (Some(key), message),
                other => (None, other.to_string()),
            };
            let span = key
                .as_ref()
                .and_then(|k| spans.get(k))
                .cloned()
                .or(params_span);
            let key = key.map(|k| format!("params.{k}"));
            return Err(at.error(span.as_ref(), key.as_deref(), message));
        }
        Ok(profile)
    }

    fn build_check(&self) -> Result<(), WorkloadError> {
        let params = self.params()?;
        self.workload.build(params)?;
        Ok(())
    }

    /// Reads a profile file; its name is the file name without `.toml`.
    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ProfileError {
            file: file.clone(),
            line: None,
            key: None,
            message: format!("cannot read it: {e}"),
        })?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Profile::parse(&name, &file, &text)
    }

    /// Overrides one parameter from the command line (`--set key=value`).
    pub fn set(&mut self, assignment: &str) -> Result<(), WorkloadError> {
        let (key, text) = assignment.split_once('=').ok_or_else(|| {
            WorkloadError::param(
                assignment,
                "write key=value (e.g. --set filename=/dev/nvme0n1)",
            )
        })?;
        let key = key.trim();
        let spec = self.workload.spec(key).ok_or_else(|| {
            WorkloadError::param(
                key,
                crate::params::unknown_key_message(
                    key,
                    self.workload.name(),
                    self.workload.specs(),
                ),
            )
        })?;
        let value = spec
            .parse_text(text)
            .map_err(|m| WorkloadError::param(key, m))?;
        self.given.insert(key.to_string(), value);
        Ok(())
    }

    /// Overrides the duration (`--duration S`).
    pub fn set_duration(&mut self, seconds: f64) -> Result<(), WorkloadError> {
        let key = self.workload.duration_key().ok_or_else(|| {
            WorkloadError::param(
                "duration",
                format!(
                    "workload {} runs until it is done and takes no duration",
                    self.workload.name()
                ),
            )
        })?;
        let value = Value::from(seconds);
        let checked = match self.workload.spec(key) {
            Some(spec) => spec
                .check(&value)
                .map_err(|m| WorkloadError::param(key, m))?,
            None => value,
        };
        self.given.insert(key.to_string(), checked);
        self.duration_s = Some(seconds);
        Ok(())
    }

    /// The workload's parameters: what the profile gives, defaults for the rest.
    pub fn params(&self) -> Result<ParamValues, WorkloadError> {
        self.workload.params(self.given.clone())
    }

    /// The thresholds, parsed.
    pub fn thresholds(&self) -> Vec<Threshold> {
        self.fail_if
            .iter()
            .filter_map(|t| Threshold::parse(t).ok())
            .collect()
    }
}

/// One profile found while listing.
#[derive(Debug, Clone)]
pub struct Listed {
    pub name: String,
    pub source: String,
    pub profile: Result<Profile, ProfileError>,
}

/// Where profiles are found: `$IOMMUTOP_PROFILES`, then the `profiles/` of the project the
/// binary was built in (so edits there apply without a rebuild), then the built-in copies.
#[derive(Debug, Clone, Default)]
pub struct ProfileSet {
    pub dirs: Vec<PathBuf>,
}

impl ProfileSet {
    pub fn discover() -> ProfileSet {
        let mut dirs = Vec::new();
        if let Some(dir) = std::env::var_os(PROFILES_ENV) {
            dirs.push(PathBuf::from(dir));
        }
        if let Some(dir) = project_profiles_dir() {
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        ProfileSet { dirs }
    }

    pub fn with_dirs(dirs: Vec<PathBuf>) -> ProfileSet {
        ProfileSet { dirs }
    }

    /// Every profile by name (the first found wins), sorted by name.
    pub fn list(&self) -> Vec<Listed> {
        let mut found: BTreeMap<String, Listed> = BTreeMap::new();
        for dir in &self.dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut paths: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.is_file())
                .collect();
            paths.sort();
            for path in paths {
                let name = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                found.entry(name.clone()).or_insert_with(|| Listed {
                    name,
                    source: path.display().to_string(),
                    profile: Profile::load(&path),
                });
            }
        }
        for (name, text) in BUILT_IN {
            found.entry(name.to_string()).or_insert_with(|| {
                let source = format!("built-in:{name}");
                Listed {
                    name: name.to_string(),
                    profile: Profile::parse(name, &source, text),
                    source,
                }
            });
        }
        found.into_values().collect()
    }

    /// A profile by name, or by path (anything with a `/` or ending in `.toml`).
    pub fn find(&self, name_or_path: &str) -> Result<Profile, ProfileError> {
        if name_or_path.contains('/') || name_or_path.ends_with(".toml") {
            return Profile::load(Path::new(name_or_path));
        }
        for dir in &self.dirs {
            let path = dir.join(format!("{name_or_path}.toml"));
            if path.is_file() {
                return Profile::load(&path);
            }
        }
        if let Some((name, text)) = BUILT_IN.iter().find(|(n, _)| *n == name_or_path) {
            return Profile::parse(name, &format!("built-in:{name}"), text);
        }
        Err(ProfileError {
            file: name_or_path.to_string(),
            line: None,
            key: None,
            message: format!(
                "no such profile (`iommutop profiles` lists them; a path to a .toml works too{})",
                self.dirs
                    .first()
                    .map(|d| format!("; searched {}", d.display()))
                    .unwrap_or_default()
            ),
        })
    }
}

/// `profiles/` of the project the running binary lives in (`target/debug/iommutop` →
/// `../../profiles`), if there is one.
pub fn project_profiles_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .skip(1)
        .find(|dir| dir.join("Cargo.toml").is_file() && dir.join("profiles").is_dir())
        .map(|dir| dir.join("profiles"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Profile, ProfileError> {
        Profile::parse("t", "t.toml", text)
    }

    #[test]
    fn a_minimal_profile_loads_with_all_probe_groups() {
        let p = parse("description = \"x\"\nworkload = \"tlb\"\n").unwrap();
        assert_eq!(p.workload, WorkloadKind::Tlb);
        assert_eq!(p.probe_groups.len(), PROBE_GROUPS.len());
        assert!(p.given.is_empty());
        assert!(p.params().unwrap().has("max_size"), "defaults apply");
    }

    #[test]
    fn errors_name_the_line_and_the_key() {
        let err =
            parse("description = \"x\"\nworkload = \"fio\"\n[params]\niodepth = 0\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.toml:4: params.iodepth: expected a whole number 1..=65536, got 0"
        );
        let err = parse("description = \"x\"\nworkload = \"fio\"\nname = \"y\"\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.toml:3: name: a profile's name is its file name: remove `name`"
        );
    }

    #[test]
    fn the_duration_goes_to_the_workloads_duration_parameter() {
        let p = parse("description = \"x\"\nworkload = \"fio\"\nduration_s = 3\n").unwrap();
        assert_eq!(p.params().unwrap().f64("duration_s").unwrap(), 3.0);
        let p =
            parse("description = \"x\"\nworkload = \"dma-contention\"\nduration_s = 2\n").unwrap();
        assert_eq!(p.params().unwrap().f64("step_s").unwrap(), 2.0);
    }

    #[test]
    fn set_overrides_a_parameter_and_checks_it() {
        let mut p = parse("description = \"x\"\nworkload = \"fio\"\n").unwrap();
        p.set("filename=/dev/nvme0n1").unwrap();
        p.set("bs=128k").unwrap();
        assert_eq!(p.given["bs"], Value::from(131072));
        assert_eq!(
            p.set("iodpeth=3").unwrap_err().to_string(),
            "parameter `iodpeth`: unknown parameter for workload fio (did you mean `iodepth`?)"
        );
        assert!(p.set("bs").is_err());
        let mut tlb = parse("description = \"x\"\nworkload = \"tlb\"\n").unwrap();
        assert!(tlb.set_duration(5.0).is_err());
    }

    #[test]
    fn relative_thresholds_are_refused() {
        let err = parse(
            "description = \"x\"\nworkload = \"tlb\"\n[thresholds]\nfail_if = [\"workload.x < -2%\"]\n",
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "t.toml:4: thresholds.fail_if: `workload.x < -2%`: a relative threshold"
            ),
            "{err}"
        );
    }

    #[test]
    fn every_shipped_profile_is_built_in_and_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profiles");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let mut built_in: Vec<String> = BUILT_IN.iter().map(|(n, _)| n.to_string()).collect();
        built_in.sort();
        assert_eq!(on_disk, built_in, "profiles/ and BUILT_IN differ");
        for (name, text) in BUILT_IN {
            let p = Profile::parse(name, name, text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(&p.name, name);
        }
    }

    #[test]
    fn the_set_finds_names_in_directories_before_built_ins() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("tlb-sweep.toml"),
            "description = \"mine\"\nworkload = \"tlb\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("broken.toml"), "workload = 3\n").unwrap();
        let set = ProfileSet::with_dirs(vec![dir.path().to_path_buf()]);
        assert_eq!(set.find("tlb-sweep").unwrap().description, "mine");
        assert_eq!(set.find("tcp-rr-1k").unwrap().source, "built-in:tcp-rr-1k");
        let err = set.find("nope").unwrap_err().to_string();
        assert!(err.starts_with("nope: no such profile"), "{err}");
        let listed = set.list();
        assert!(listed
            .iter()
            .any(|l| l.name == "broken" && l.profile.is_err()));
        assert!(listed.iter().any(|l| l.name == "tcp-rr-1k"));
    }
}
