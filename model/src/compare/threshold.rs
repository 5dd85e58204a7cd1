//! `--fail-if` thresholds: `PATH OP VALUE[%]`, read from B, or with `%` the relative change from
//! A to B (`workload.transactions_per_s < -2%`: B did 2% fewer transactions per second than A).
//!
//! Paths:
//! - `workload.<metric>`: a number among the workload's results, or `completions_per_s`.
//! - `device[<selector>].<field>`: the selector is a row key or PCI address, a netdev or disk
//!   name, an NVMe controller (`nvme0` for `nvme0n1`), or a driver name that only one device
//!   with DMA has. Fields: the derived overhead (`translation_ns_per_io`, `translation_ns`,
//!   `cpu_share`, `maps_per_io`, `iommu_maps_per_io`, `iotlb_flushes_per_io`), `completions`,
//!   `domain_type` (text), an operation's `<op>.count`, `<op>.rate_per_s`, `<op>.mean_ns`,
//!   `<op>.p99_ns` (`dma_map.mean_ns`), and the work per unit of the workload
//!   (`per_unit.dma_maps`, `per_unit.iommu_maps`, `per_unit.iotlb_syncs`,
//!   `per_unit.iotlb_flushes`, `per_unit.dma_ns`, `per_unit.iommu_ns`).
//! - `host.<field>`: `kernel_release`, `lab`, `iommu.present`, `iommu.vendor`, `iommu.units`
//!   (how many), `iommu.default_domain_type`, `iommu.dma_mode`, `cmdline.<parameter>`
//!   (`cmdline.intel_iommu`; `(not set)` when absent), `kernel_config.<OPTION>` without `CONFIG_`.
//!
//! Operators: `<`, `<=`, `>`, `>=`, `==`, `!=`. Text and yes/no fields take only `==` and `!=`.
//!
//! `beyond-noise` after a relative workload threshold (`workload.transactions_per_s < -2%
//! beyond-noise`) crosses it only when the change is also beyond the run-to-run noise the reports
//! measure (their repeats, else their interval samples; see [`super::noise`]). Where the noise
//! cannot be measured the change alone decides, and the observation says so.

use super::noise::judge_workload;
use super::numbers::Numbers;
use super::untimed::untimed_reason;
use super::work::{work_units, DeviceWork, COMPLETIONS_PER_S};
use crate::facts::{cmdline_params, DomainType};
use crate::ops_map::op_named;
use crate::report::Report;
use crate::snapshot::Device;
use iommutop_abi::pci::is_pci_address;

/// A `--fail-if` expression that cannot be used, or cannot be evaluated on the reports given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ThresholdError {
    #[error("`{0}` is not PATH OP VALUE[%] (e.g. `workload.transactions_per_s < -2%`)")]
    Syntax(String),
    #[error("`{0}`: unknown path (use workload.<metric>, device[<name>].<field> or host.<field>)")]
    Path(String),
    #[error("`{expr}`: unknown {what} `{name}` (one of: {known})")]
    Field {
        expr: String,
        what: &'static str,
        name: String,
        known: String,
    },
    #[error("`{expr}`: {path} is {kind}: only == and != apply{percent}")]
    Operator {
        expr: String,
        path: String,
        kind: &'static str,
        percent: &'static str,
    },
    #[error("`{expr}`: {what} not found in {side}")]
    Missing {
        expr: String,
        what: String,
        side: &'static str,
    },
    #[error("`{expr}`: {side} counts {op} but has no timing for it: {why}")]
    Untimed {
        expr: String,
        op: &'static str,
        side: &'static str,
        why: String,
    },
    #[error(
        "`{0}`: beyond-noise applies to a relative workload threshold (`workload.<metric> OP VALUE% \
         beyond-noise`), the only change whose noise the reports measure"
    )]
    BeyondNoise(String),
    #[error("`{expr}`: `{name}` is ambiguous in {side}: it matches {matches}")]
    Ambiguous {
        expr: String,
        name: String,
        side: &'static str,
        matches: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Cmp {
    fn ordered(self) -> bool {
        !matches!(self, Cmp::Eq | Cmp::Ne)
    }

    fn holds<T: PartialOrd>(self, left: &T, right: &T) -> bool {
        match self {
            Cmp::Lt => left < right,
            Cmp::Le => left <= right,
            Cmp::Gt => left > right,
            Cmp::Ge => left >= right,
            Cmp::Eq => left == right,
            Cmp::Ne => left != right,
        }
    }
}

/// What a path reads, which decides the operators it takes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Number,
    Text,
    YesNo,
}

#[derive(Debug, Clone, PartialEq)]
enum DeviceField {
    Derived(&'static str),
    Completions,
    DomainType,
    Op {
        op: crate::sample::Op,
        stat: &'static str,
    },
    PerUnit(&'static str),
}

#[derive(Debug, Clone, PartialEq)]
enum HostField {
    KernelRelease,
    Lab,
    IommuPresent,
    IommuVendor,
    IommuUnits,
    DefaultDomainType,
    DmaMode,
    Cmdline(String),
    KernelConfig(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Path {
    Workload(String),
    Device {
        selector: String,
        field: DeviceField,
    },
    Host(HostField),
}

const DERIVED: [&str; 6] = [
    "translation_ns_per_io",
    "translation_ns",
    "cpu_share",
    "maps_per_io",
    "iommu_maps_per_io",
    "iotlb_flushes_per_io",
];
const OP_STATS: [&str; 4] = ["count", "rate_per_s", "mean_ns", "p99_ns"];
/// The statistics only a tier that times calls (fentry, kprobe) gives.
const TIMED_STATS: [&str; 2] = ["mean_ns", "p99_ns"];
const PER_UNIT: [&str; 6] = [
    "dma_maps",
    "iommu_maps",
    "iotlb_syncs",
    "iotlb_flushes",
    "dma_ns",
    "iommu_ns",
];
const HOST_FIELDS: &str = "kernel_release, lab, iommu.present, iommu.vendor, iommu.units, \
iommu.default_domain_type, iommu.dma_mode, cmdline.<parameter>, kernel_config.<OPTION>";

/// The value side of an expression.
#[derive(Debug, Clone, PartialEq)]
enum Expected {
    Number { value: f64, relative: bool },
    Text(String),
}

/// One parsed `--fail-if` expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    text: String,
    path: Path,
    cmp: Cmp,
    expected: Expected,
    /// Crossed only when the change is beyond the noise too (`beyond-noise`).
    beyond_noise: bool,
}

/// The word that makes a threshold wait for a change beyond noise.
const BEYOND_NOISE: &str = "beyond-noise";

/// A threshold's outcome on two reports.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Evaluation {
    pub expression: String,
    /// What was compared: B's value, or the change from A to B (`-3.10%`).
    pub observed: String,
    pub crossed: bool,
    /// The value in A and B as numbers (`None` for text, or where A lacks it), with the noise
    /// of a workload number.
    #[serde(flatten)]
    pub numbers: Numbers,
    /// The unit of `a`, `b` and `change` (`ns per transaction`, `transaction/s`, `calls`);
    /// `None` for text and yes/no values.
    pub unit: Option<String>,
}

impl Evaluation {
    /// `threshold crossed: EXPR (observed X)` or `threshold held: ...`.
    pub fn sentence(&self) -> String {
        let state = if self.crossed { "crossed" } else { "held" };
        format!(
            "threshold {state}: {} (observed {})",
            self.expression, self.observed
        )
    }
}

/// A value read from a report.
#[derive(Debug, Clone, PartialEq)]
enum Observed {
    Number(f64),
    Text(String),
}

impl Threshold {
    pub fn parse(text: &str) -> Result<Threshold, ThresholdError> {
        let text = text.trim();
        let (expression, beyond_noise) = match text.strip_suffix(BEYOND_NOISE) {
            Some(rest) if rest.ends_with(char::is_whitespace) => (rest.trim_end(), true),
            _ => (text, false),
        };
        let mut threshold = Threshold::parse_expression(text, expression)?;
        if beyond_noise {
            let relative = matches!(threshold.expected, Expected::Number { relative: true, .. });
            if !relative || !matches!(threshold.path, Path::Workload(_)) {
                return Err(ThresholdError::BeyondNoise(text.to_string()));
            }
            threshold.beyond_noise = true;
        }
        Ok(threshold)
    }

    /// `PATH OP VALUE[%]` of the whole expression `text`.
    fn parse_expression(whole: &str, text: &str) -> Result<Threshold, ThresholdError> {
        let syntax = || ThresholdError::Syntax(whole.to_string());
        let operators = [
            ("<=", Cmp::Le),
            (">=", Cmp::Ge),
            ("==", Cmp::Eq),
            ("!=", Cmp::Ne),
            ("<", Cmp::Lt),
            (">", Cmp::Gt),
        ];
        // The path ends where the first operator starts (paths hold no operator characters).
        let (at, symbol, cmp) = operators
            .iter()
            .filter_map(|(symbol, cmp)| text.find(symbol).map(|at| (at, *symbol, *cmp)))
            .min_by_key(|(at, symbol, _)| (*at, std::cmp::Reverse(symbol.len())))
            .ok_or_else(syntax)?;
        let path_text = text[..at].trim();
        let value_text = text[at + symbol.len()..].trim();
        if path_text.is_empty() || value_text.is_empty() || path_text.contains(char::is_whitespace)
        {
            return Err(syntax());
        }
        let path = parse_path(whole, path_text)?;
        let kind = path.kind();
        let expected = match kind {
            Kind::Number => {
                let (number, relative) = match value_text.strip_suffix('%') {
                    Some(n) => (n.trim(), true),
                    None => (value_text, false),
                };
                let value: f64 = number.parse().map_err(|_| syntax())?;
                if !value.is_finite() {
                    return Err(syntax());
                }
                Expected::Number {
                    value: if relative { value / 100.0 } else { value },
                    relative,
                }
            }
            Kind::Text | Kind::YesNo => {
                let operator_error = |percent: &'static str| ThresholdError::Operator {
                    expr: whole.to_string(),
                    path: path_text.to_string(),
                    kind: if kind == Kind::Text { "text" } else { "yes/no" },
                    percent,
                };
                if cmp.ordered() {
                    return Err(operator_error(""));
                }
                if value_text.ends_with('%') {
                    return Err(operator_error(", without %"));
                }
                let value = value_text.trim_matches('"').to_string();
                if kind == Kind::YesNo {
                    Expected::Text(yes_no(&value).ok_or_else(syntax)?.to_string())
                } else {
                    Expected::Text(value)
                }
            }
        };
        Ok(Threshold {
            text: whole.to_string(),
            path,
            cmp,
            expected,
            beyond_noise: false,
        })
    }

    /// Evaluates the threshold on A (the baseline) and B.
    pub fn evaluate(&self, a: &Report, b: &Report) -> Result<Evaluation, ThresholdError> {
        let in_b = self.read(b, "B")?;
        let numbers = self.numbers(a, b, &in_b);
        let (crossed, observed) = match (&self.expected, in_b) {
            (Expected::Number { value, relative }, Observed::Number(in_b)) => {
                if *relative {
                    let in_a = match self.read(a, "A")? {
                        Observed::Number(n) => n,
                        Observed::Text(_) => return Err(self.missing("a number", "A")),
                    };
                    let change = if in_a == 0.0 {
                        if in_b == 0.0 {
                            0.0
                        } else {
                            f64::INFINITY.copysign(in_b)
                        }
                    } else {
                        (in_b - in_a) / in_a.abs()
                    };
                    (
                        self.cmp.holds(&change, value),
                        format!(
                            "{:+.2}%: {} in A, {} in B",
                            change * 100.0,
                            show(in_a),
                            show(in_b)
                        ),
                    )
                } else {
                    (self.cmp.holds(&in_b, value), show(in_b))
                }
            }
            (Expected::Text(value), Observed::Text(in_b)) => {
                (self.cmp.holds(&in_b.as_str(), &value.as_str()), in_b)
            }
            _ => return Err(self.missing("a value of the right kind", "B")),
        };
        let (crossed, observed) = match (self.beyond_noise, crossed, numbers.beyond_noise) {
            (true, true, Some(false)) => (
                false,
                format!(
                    "{observed}; within the noise (±{:.2}%)",
                    numbers.noise_pct.unwrap_or_default()
                ),
            ),
            (true, true, None) => (
                true,
                format!("{observed}; noise not measurable, the change alone decides"),
            ),
            _ => (crossed, observed),
        };
        Ok(Evaluation {
            expression: self.text.clone(),
            observed,
            crossed,
            numbers,
            unit: self.unit(b),
        })
    }

    /// The unit of the value the path reads in `report`, as `compare --json`'s findings name
    /// theirs: a workload's headline rate per second of its unit, else the metric's own name;
    /// a device's times in ns, its counts per its unit (the workload's if it drove the device,
    /// else its own I/O; per I/O for the derived overhead). `None` for text and yes/no values.
    fn unit(&self, report: &Report) -> Option<String> {
        let unit = match &self.path {
            Path::Workload(metric) => {
                let units = work_units(report);
                match units.rate_metric.as_deref() {
                    Some(rate) if rate == metric => format!("{}/s", units.unit),
                    _ => metric.clone(),
                }
            }
            Path::Device { field, .. } => match field {
                DeviceField::Derived("translation_ns_per_io") => "ns per I/O".into(),
                DeviceField::Derived("translation_ns") => "ns".into(),
                DeviceField::Derived("cpu_share") => "share of one CPU".into(),
                DeviceField::Derived(_) => "per I/O".into(),
                DeviceField::Completions => "completions".into(),
                DeviceField::DomainType => return None,
                DeviceField::Op { stat, .. } => match *stat {
                    "count" => "calls".into(),
                    "rate_per_s" => "calls/s".into(),
                    _ => "ns".into(),
                },
                DeviceField::PerUnit(name) => {
                    // The device's own unit: the workload's if it drove the device.
                    let units = work_units(report);
                    let per = match &self.path {
                        Path::Device { selector, .. } => self
                            .select(report, selector, "B")
                            .map_or_else(|_| units.unit.clone(), |d| units.of_device(d).name),
                        _ => units.unit.clone(),
                    };
                    if name.ends_with("_ns") {
                        format!("ns per {per}")
                    } else {
                        format!("per {per}")
                    }
                }
            },
            Path::Host(HostField::IommuUnits) => "IOMMU units".into(),
            Path::Host(_) => return None,
        };
        Some(unit)
    }

    /// A's and B's values as numbers, judged against the run-to-run noise where the reports
    /// measure it (a workload result's interval samples).
    fn numbers(&self, a: &Report, b: &Report, in_b: &Observed) -> Numbers {
        let Observed::Number(in_b) = *in_b else {
            return Numbers::default();
        };
        let in_a = match self.read(a, "A") {
            Ok(Observed::Number(in_a)) => Some(in_a),
            _ => None,
        };
        let significance = match &self.path {
            Path::Workload(metric) => {
                in_a.and_then(|in_a| judge_workload(a, b, metric, in_a, in_b))
            }
            _ => None,
        };
        Numbers::of(in_a, Some(in_b), significance)
    }

    fn missing(&self, what: &str, side: &'static str) -> ThresholdError {
        ThresholdError::Missing {
            expr: self.text.clone(),
            what: what.to_string(),
            side,
        }
    }

    fn read(&self, report: &Report, side: &'static str) -> Result<Observed, ThresholdError> {
        match &self.path {
            Path::Workload(metric) if metric == COMPLETIONS_PER_S => {
                let total: u64 = report.devices.iter().map(|d| d.completions).sum();
                Ok(Observed::Number(
                    total as f64 / report.run.duration_s.max(f64::MIN_POSITIVE),
                ))
            }
            Path::Workload(metric) => report
                .run
                .workload
                .as_ref()
                .and_then(|w| w.results.metric(metric))
                .map(Observed::Number)
                .ok_or_else(|| self.missing(&format!("workload result `{metric}`"), side)),
            Path::Device { selector, field } => {
                let device = self.select(report, selector, side)?;
                read_device(report, device, field).ok_or_else(|| match field {
                    DeviceField::Op { op, stat } if TIMED_STATS.contains(stat) => {
                        ThresholdError::Untimed {
                            expr: self.text.clone(),
                            op: op.name(),
                            side,
                            why: untimed_reason(report, *op),
                        }
                    }
                    _ => self.missing(&format!("a value for `{selector}`"), side),
                })
            }
            Path::Host(field) => Ok(read_host(report, field)),
        }
    }

    /// The one device `selector` names in a report.
    fn select<'a>(
        &self,
        report: &'a Report,
        selector: &str,
        side: &'static str,
    ) -> Result<&'a Device, ThresholdError> {
        let exact = report.devices.iter().find(|d| {
            d.key == selector
                || d.pci_address.is_some_and(|a| a.to_string() == selector)
                || d.names.iter().any(|n| n == selector)
        });
        if let Some(device) = exact {
            return Ok(device);
        }
        let by_driver: Vec<&Device> = report
            .devices
            .iter()
            .filter(|d| d.driver.as_deref() == Some(selector))
            .collect();
        let by_controller: Vec<&Device> = report
            .devices
            .iter()
            .filter(|d| d.names.iter().any(|n| is_namespace_of(n, selector)))
            .collect();
        let candidates = if by_driver.is_empty() {
            by_controller
        } else {
            by_driver
        };
        match candidates.as_slice() {
            [one] => Ok(one),
            [] => Err(self.missing(&format!("device `{selector}`"), side)),
            many => {
                let busy: Vec<&&Device> = many
                    .iter()
                    .filter(|d| d.op(crate::sample::Op::DmaMap).count > 0)
                    .collect();
                match busy.as_slice() {
                    [one] => Ok(one),
                    _ => Err(ThresholdError::Ambiguous {
                        expr: self.text.clone(),
                        name: selector.to_string(),
                        side,
                        matches: many
                            .iter()
                            .map(|d| d.key.to_string())
                            .collect::<Vec<_>>()
                            .join(", "),
                    }),
                }
            }
        }
    }
}

impl Path {
    fn kind(&self) -> Kind {
        match self {
            Path::Workload(_) => Kind::Number,
            Path::Device { field, .. } => match field {
                DeviceField::DomainType => Kind::Text,
                _ => Kind::Number,
            },
            Path::Host(field) => match field {
                HostField::IommuUnits => Kind::Number,
                HostField::Lab | HostField::IommuPresent => Kind::YesNo,
                _ => Kind::Text,
            },
        }
    }
}

fn parse_path(expr: &str, path: &str) -> Result<Path, ThresholdError> {
    let unknown = |what: &'static str, name: &str, known: String| ThresholdError::Field {
        expr: expr.to_string(),
        what,
        name: name.to_string(),
        known,
    };
    if let Some(metric) = path.strip_prefix("workload.") {
        if metric.is_empty() {
            return Err(ThresholdError::Path(expr.to_string()));
        }
        return Ok(Path::Workload(metric.to_string()));
    }
    if let Some(rest) = path.strip_prefix("device[") {
        let (selector, field) = rest
            .split_once("].")
            .filter(|(selector, _)| !selector.is_empty())
            .ok_or_else(|| ThresholdError::Path(expr.to_string()))?;
        let known_fields = || {
            let mut known: Vec<String> = DERIVED.iter().map(|s| s.to_string()).collect();
            known.extend(["completions".into(), "domain_type".into()]);
            known.push(format!("<op>.{{{}}}", OP_STATS.join(",")));
            known.push(format!("per_unit.{{{}}}", PER_UNIT.join(",")));
            known.join(", ")
        };
        let field = if let Some(name) = DERIVED.iter().find(|f| **f == field) {
            DeviceField::Derived(name)
        } else if field == "completions" {
            DeviceField::Completions
        } else if field == "domain_type" {
            DeviceField::DomainType
        } else if let Some(name) = field.strip_prefix("per_unit.") {
            let name = PER_UNIT
                .iter()
                .find(|f| **f == name)
                .ok_or_else(|| unknown("device field", field, known_fields()))?;
            DeviceField::PerUnit(name)
        } else if let Some((op, stat)) = field.split_once('.') {
            let op = op_named(op).ok_or_else(|| {
                let ops: Vec<&str> = crate::sample::Op::ALL.iter().map(|o| o.name()).collect();
                unknown("operation", op, ops.join(", "))
            })?;
            let stat = OP_STATS
                .iter()
                .find(|s| **s == stat)
                .ok_or_else(|| unknown("operation statistic", stat, OP_STATS.join(", ")))?;
            DeviceField::Op { op, stat }
        } else {
            return Err(unknown("device field", field, known_fields()));
        };
        return Ok(Path::Device {
            selector: selector.to_string(),
            field,
        });
    }
    if let Some(field) = path.strip_prefix("host.") {
        let field = match field {
            "kernel_release" => HostField::KernelRelease,
            "lab" => HostField::Lab,
            "iommu.present" => HostField::IommuPresent,
            "iommu.vendor" => HostField::IommuVendor,
            "iommu.units" => HostField::IommuUnits,
            "iommu.default_domain_type" => HostField::DefaultDomainType,
            "iommu.dma_mode" => HostField::DmaMode,
            other => match (
                other.strip_prefix("cmdline."),
                other.strip_prefix("kernel_config."),
            ) {
                (Some(param), _) if !param.is_empty() => HostField::Cmdline(param.to_string()),
                (_, Some(option)) if !option.is_empty() => HostField::KernelConfig(
                    option.strip_prefix("CONFIG_").unwrap_or(option).to_string(),
                ),
                _ => return Err(unknown("host field", other, HOST_FIELDS.to_string())),
            },
        };
        return Ok(Path::Host(field));
    }
    Err(ThresholdError::Path(expr.to_string()))
}

/// `nvme0n1` and `nvme0c0n1` are namespaces of the controller `nvme0`.
fn is_namespace_of(name: &str, controller: &str) -> bool {
    if is_pci_address(controller) {
        return false;
    }
    name.strip_prefix(controller).is_some_and(|rest| {
        let mut chars = rest.chars();
        matches!(chars.next(), Some('n' | 'c')) && chars.next().is_some_and(|c| c.is_ascii_digit())
    })
}

fn yes_no(value: &str) -> Option<&'static str> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "yes" | "y" | "1" | "on" => Some("yes"),
        "false" | "no" | "n" | "0" | "off" => Some("no"),
        _ => None,
    }
}

fn show(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

fn read_device(report: &Report, d: &Device, field: &DeviceField) -> Option<Observed> {
    let number = match field {
        DeviceField::Derived(name) => match *name {
            "translation_ns_per_io" => d.derived.translation_ns_per_io,
            "translation_ns" => d.derived.translation_ns.map(|ns| ns as f64),
            "cpu_share" => d.derived.cpu_share,
            "maps_per_io" => d.derived.maps_per_io,
            "iommu_maps_per_io" => d.derived.iommu_maps_per_io,
            "iotlb_flushes_per_io" => d.derived.iotlb_flushes_per_io,
            _ => None,
        },
        DeviceField::Completions => Some(d.completions as f64),
        DeviceField::DomainType => {
            return Some(Observed::Text(
                d.domain_type.clone().unwrap_or_else(|| "(none)".into()),
            ))
        }
        DeviceField::Op { op, stat } => {
            let stats = d.op(*op);
            match *stat {
                "count" => Some(stats.count as f64),
                "rate_per_s" => Some(stats.rate_per_s),
                "mean_ns" => stats.latency.as_ref().map(|l| l.mean_ns),
                "p99_ns" => stats.latency.as_ref().map(|l| l.p99_ns as f64),
                _ => None,
            }
        }
        DeviceField::PerUnit(name) => {
            let work = DeviceWork::of(d, &work_units(report));
            match *name {
                "dma_maps" => work.dma_maps,
                "iommu_maps" => work.iommu_maps,
                "iotlb_syncs" => work.iotlb_syncs,
                "iotlb_flushes" => work.iotlb_flushes,
                "dma_ns" => work.dma_ns,
                "iommu_ns" => work.iommu_ns,
                _ => None,
            }
        }
    };
    number.map(Observed::Number)
}

fn read_host(report: &Report, field: &HostField) -> Observed {
    let host = &report.host;
    let text = |value: Option<&str>| Observed::Text(value.unwrap_or("(unknown)").to_string());
    let yes = |flag: bool| Observed::Text(if flag { "yes" } else { "no" }.to_string());
    match field {
        HostField::KernelRelease => text(host.kernel_release.as_deref()),
        HostField::Lab => yes(host.lab),
        HostField::IommuPresent => yes(host.iommu.present),
        HostField::IommuVendor => {
            Observed::Text(host.iommu.vendor.map_or("(none)", |v| v.name()).to_string())
        }
        HostField::IommuUnits => Observed::Number(host.iommu.units.len() as f64),
        HostField::DefaultDomainType => text(host.iommu.default_domain_type.as_deref()),
        HostField::DmaMode => text(host.iommu.dma_mode.and_then(DomainType::mode_name)),
        HostField::Cmdline(param) => Observed::Text(
            cmdline_params(host.cmdline.as_deref().unwrap_or(""))
                .into_iter()
                .rev()
                .find(|(key, _)| key == param)
                .map_or_else(|| "(not set)".to_string(), |(_, value)| value.to_string()),
        ),
        HostField::KernelConfig(option) => text(host.kernel_config.get(option).map(String::as_str)),
    }
}

#[cfg(test)]
mod tests;
