//! `--fail-if` thresholds: `PATH OP VALUE[%]`, evaluated on B (absolute) or on the change from A
//! to B (with `%`). Paths: `workload.<metric>` (a workload result, or `completions_per_s`) and
//! `device[<PCI address, netdev or disk>].<field>` with the fields of a device's derived overhead
//! (`translation_ns_per_io`, `cpu_share`, `maps_per_io`, `iommu_maps_per_io`,
//! `iotlb_flushes_per_io`).

use crate::report::Report;
use crate::snapshot::Device;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ThresholdError {
    #[error("`{0}` is not PATH OP VALUE[%] (e.g. `workload.transactions_per_s < -2%`)")]
    Syntax(String),
    #[error("`{0}`: unknown path (use workload.<metric> or device[<name>].<field>)")]
    Path(String),
    #[error("`{0}`: unknown device field (translation_ns_per_io, cpu_share, maps_per_io, iommu_maps_per_io, iotlb_flushes_per_io)")]
    Field(String),
    #[error("`{expr}`: {what} not found in {side}")]
    Missing {
        expr: String,
        what: String,
        side: &'static str,
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

#[derive(Debug, Clone, PartialEq)]
enum Path {
    Workload(String),
    Device { name: String, field: String },
}

const FIELDS: [&str; 5] = [
    "translation_ns_per_io",
    "cpu_share",
    "maps_per_io",
    "iommu_maps_per_io",
    "iotlb_flushes_per_io",
];

/// One parsed `--fail-if` expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    text: String,
    path: Path,
    cmp: Cmp,
    value: f64,
    relative: bool,
}

impl Threshold {
    pub fn parse(text: &str) -> Result<Threshold, ThresholdError> {
        let syntax = || ThresholdError::Syntax(text.to_string());
        let (path, rest) = text
            .trim()
            .split_once(char::is_whitespace)
            .ok_or_else(syntax)?;
        let rest = rest.trim();
        let (cmp, value) = [
            ("<=", Cmp::Le),
            (">=", Cmp::Ge),
            ("==", Cmp::Eq),
            ("!=", Cmp::Ne),
            ("<", Cmp::Lt),
            (">", Cmp::Gt),
        ]
        .iter()
        .find_map(|(sym, cmp)| rest.strip_prefix(sym).map(|v| (*cmp, v.trim())))
        .ok_or_else(syntax)?;
        let (number, relative) = match value.strip_suffix('%') {
            Some(n) => (n.trim(), true),
            None => (value, false),
        };
        let mut value: f64 = number.parse().map_err(|_| syntax())?;
        if relative {
            value /= 100.0;
        }
        let path = if let Some(metric) = path.strip_prefix("workload.") {
            Path::Workload(metric.to_string())
        } else if let Some(rest) = path.strip_prefix("device[") {
            let (name, field) = rest
                .split_once("].")
                .ok_or_else(|| ThresholdError::Path(text.to_string()))?;
            if !FIELDS.contains(&field) {
                return Err(ThresholdError::Field(text.to_string()));
            }
            Path::Device {
                name: name.to_string(),
                field: field.to_string(),
            }
        } else {
            return Err(ThresholdError::Path(text.to_string()));
        };
        Ok(Threshold {
            text: text.trim().to_string(),
            path,
            cmp,
            value,
            relative,
        })
    }

    fn read(&self, report: &Report, side: &'static str) -> Result<f64, ThresholdError> {
        let missing = |what: String| ThresholdError::Missing {
            expr: self.text.clone(),
            what,
            side,
        };
        match &self.path {
            Path::Workload(metric) if metric == "completions_per_s" => {
                let total: u64 = report.devices.iter().map(|d| d.completions).sum();
                Ok(total as f64 / report.run.duration_s.max(f64::MIN_POSITIVE))
            }
            Path::Workload(metric) => report
                .run
                .workload
                .as_ref()
                .and_then(|w| w.results.get(metric))
                .and_then(|v| v.as_f64())
                .ok_or_else(|| missing(format!("workload result `{metric}`"))),
            Path::Device { name, field } => {
                let device = report
                    .devices
                    .iter()
                    .find(|d| d.key == *name || d.names.iter().any(|n| n == name))
                    .ok_or_else(|| missing(format!("device `{name}`")))?;
                derived_field(device, field)
                    .ok_or_else(|| missing(format!("`{field}` of `{name}`")))
            }
        }
    }

    /// Whether the threshold is crossed, with the sentence that says so.
    pub fn crossed(&self, a: &Report, b: &Report) -> Result<Option<String>, ThresholdError> {
        let in_b = self.read(b, "B")?;
        let observed = if self.relative {
            let in_a = self.read(a, "A")?;
            if in_a == 0.0 {
                0.0
            } else {
                (in_b - in_a) / in_a
            }
        } else {
            in_b
        };
        let hit = match self.cmp {
            Cmp::Lt => observed < self.value,
            Cmp::Le => observed <= self.value,
            Cmp::Gt => observed > self.value,
            Cmp::Ge => observed >= self.value,
            Cmp::Eq => observed == self.value,
            Cmp::Ne => observed != self.value,
        };
        let shown = if self.relative {
            format!("{:+.2}%", observed * 100.0)
        } else {
            format!("{observed:.2}")
        };
        Ok(hit.then(|| format!("threshold crossed: {} (observed {shown})", self.text)))
    }
}

fn derived_field(d: &Device, field: &str) -> Option<f64> {
    match field {
        "translation_ns_per_io" => d.derived.translation_ns_per_io,
        "cpu_share" => d.derived.cpu_share,
        "maps_per_io" => d.derived.maps_per_io,
        "iommu_maps_per_io" => d.derived.iommu_maps_per_io,
        "iotlb_flushes_per_io" => d.derived.iotlb_flushes_per_io,
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::full_report;

    #[test]
    fn parses_relative_and_absolute_thresholds() {
        let t = Threshold::parse("workload.transactions_per_s < -2%").expect("parses");
        assert_eq!(t.cmp, Cmp::Lt);
        assert!(t.relative);
        assert!((t.value + 0.02).abs() < 1e-12);
        let t = Threshold::parse("device[nvme0n1].translation_ns_per_io > 800").expect("parses");
        assert_eq!(
            t.path,
            Path::Device {
                name: "nvme0n1".into(),
                field: "translation_ns_per_io".into()
            }
        );
        assert!(!t.relative);
    }

    #[test]
    fn bad_expressions_say_what_is_expected() {
        for (text, needle) in [
            ("workload.x", "is not PATH OP VALUE"),
            ("host.kernel > 1", "unknown path"),
            ("device[x].speed > 1", "unknown device field"),
            ("workload.x < fast", "is not PATH OP VALUE"),
        ] {
            let error = Threshold::parse(text).expect_err(text).to_string();
            assert!(error.contains(needle), "{text}: {error}");
        }
    }

    #[test]
    fn evaluates_a_device_field_on_b() {
        let r = full_report();
        let key = r
            .devices
            .iter()
            .find(|d| d.derived.translation_ns_per_io.is_some())
            .expect("timed device")
            .key
            .clone();
        let above =
            Threshold::parse(&format!("device[{key}].translation_ns_per_io > 0")).expect("parses");
        assert!(above.crossed(&r, &r).expect("evaluates").is_some());
        let unchanged =
            Threshold::parse(&format!("device[{key}].translation_ns_per_io > 1%")).expect("parses");
        assert!(unchanged.crossed(&r, &r).expect("evaluates").is_none());
        let missing = Threshold::parse("device[nope].cpu_share > 0").expect("parses");
        assert!(missing
            .crossed(&r, &r)
            .expect_err("no such device")
            .to_string()
            .contains("device `nope` not found in B"));
    }
}
