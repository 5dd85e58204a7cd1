//! TLB reach: a pointer chase over growing working sets (4 KiB … 256 MiB), once on 4 KiB pages
//! and once on 2 MiB pages, in ns (and TSC cycles where the TSC is usable) per access. Steps in
//! the curves are reported as TLB or cache reach estimates: a step only 4 KiB pages see is the
//! TLB running out of entries.
//!
//! 2 MiB pages come from the hugetlb pool. When it has too few free pages the run says so and
//! falls back to transparent huge pages (reporting how much of the buffer got them), or, with
//! `reserve_hugepages = true` (root), raises the pool for the run and lowers it after.
//! Needs no privileges otherwise.

pub mod chase;
pub mod hugepages;
pub mod steps;

use crate::control::RunControl;
use crate::error::WorkloadError;
use crate::params::{DefaultValue, Kind, ParamSpec, ParamValues};
use crate::{Workload, WorkloadOutput};
use chase::{Backing, Buffer, Tsc, PAGE_2M};
use hugepages::Reservation;
use iommutop_model::units::{format_size, iec_size};
use iommutop_model::workload::{Headline, WorkUnit};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;
use steps::Point;

pub const SPECS: &[ParamSpec] = &[
    ParamSpec {
        key: "page_sizes",
        kind: Kind::ChoiceList(&["4k", "2m"]),
        default: DefaultValue::Strs(&["4k", "2m"]),
        help: "page sizes to measure, one curve each",
    },
    ParamSpec {
        key: "min_size",
        kind: Kind::Size {
            min: 4096,
            max: 1 << 40,
        },
        default: DefaultValue::Int(4096),
        help: "smallest working set",
    },
    ParamSpec {
        key: "max_size",
        kind: Kind::Size {
            min: 8192,
            max: 1 << 40,
        },
        default: DefaultValue::Int(256 << 20),
        help: "largest working set (the buffer's size)",
    },
    ParamSpec {
        key: "sizes_per_octave",
        kind: Kind::Int { min: 1, max: 8 },
        default: DefaultValue::Int(2),
        help: "working sets per doubling (1: powers of two)",
    },
    ParamSpec {
        key: "pattern",
        kind: Kind::Choice(&["pages", "lines"]),
        default: DefaultValue::Str("pages"),
        help: "`pages`: one cache line per 4 KiB page (TLB reach apart from cache size); `lines`: every cache line",
    },
    ParamSpec {
        key: "time_per_size_ms",
        kind: Kind::Int {
            min: 1,
            max: 600_000,
        },
        default: DefaultValue::Int(200),
        help: "measuring time per working set (at least 3 passes)",
    },
    ParamSpec {
        key: "reserve_hugepages",
        kind: Kind::Bool,
        default: DefaultValue::Bool(false),
        help: "raise the 2 MiB hugetlb pool for the run and put it back after (root)",
    },
    ParamSpec {
        key: "seed",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: DefaultValue::Int(1),
        help: "seeds the random chase order",
    },
];

pub struct Tlb {
    params: ParamValues,
    page_sizes: Vec<String>,
    sizes: Vec<u64>,
    max_size: u64,
    pages_pattern: bool,
    budget: Duration,
    reserve: bool,
    seed: u64,
    reservation: Option<Reservation>,
    warnings: Vec<String>,
}

impl Tlb {
    pub fn new(params: ParamValues) -> Result<Tlb, WorkloadError> {
        let min = params.u64("min_size")?;
        let max = params.u64("max_size")?;
        if min >= max {
            return Err(WorkloadError::param(
                "min_size",
                format!(
                    "must be below max_size ({} ≥ {})",
                    format_size(min),
                    format_size(max)
                ),
            ));
        }
        let per_octave = u32::try_from(params.u64("sizes_per_octave")?)
            .map_err(|_| WorkloadError::param("sizes_per_octave", "out of range"))?;
        Ok(Tlb {
            page_sizes: params.strs("page_sizes")?,
            sizes: chase::working_sets(min, max, per_octave),
            max_size: max,
            pages_pattern: params.str("pattern")? == "pages",
            budget: Duration::from_millis(params.u64("time_per_size_ms")?),
            reserve: params.bool("reserve_hugepages")?,
            seed: params.u64("seed")?,
            reservation: None,
            warnings: Vec::new(),
            params,
        })
    }

    fn huge_pages_needed(&self) -> u64 {
        self.max_size.div_ceil(PAGE_2M as u64)
    }

    fn wants_2m(&self) -> bool {
        self.page_sizes.iter().any(|p| p == "2m")
    }

    /// A buffer for one page size: hugetlb when possible, else THP with a warning.
    fn buffer(&mut self, page_size: &str) -> Result<Option<Buffer>, WorkloadError> {
        let len = usize::try_from(self.max_size)
            .map_err(|_| WorkloadError::param("max_size", "too large for this machine"))?;
        let no_memory = |e: std::io::Error| {
            WorkloadError::Environment(format!(
                "cannot map {} for the chase ({e}): lower max_size",
                format_size(self.max_size)
            ))
        };
        if page_size == "4k" {
            return Buffer::small(len).map(Some).map_err(no_memory);
        }
        match Buffer::hugetlb(len) {
            Ok(buffer) => Ok(Some(buffer)),
            Err(e) => {
                let free = hugepages::free_2m();
                let why = if self.reserve {
                    format!("mapping hugetlb pages failed ({e}) with {free} free")
                } else {
                    format!(
                        "only {free} free 2 MiB huge pages, {} needed (reserve them: \
                         reserve_hugepages=true as root, or echo {} > {}/nr_hugepages)",
                        self.huge_pages_needed(),
                        self.huge_pages_needed(),
                        hugepages::DIR_2M
                    )
                };
                let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
                    .unwrap_or_default();
                if thp.contains("[never]") || thp.is_empty() {
                    self.warnings.push(format!(
                        "2 MiB pages not measured: {why}, and transparent huge pages are off"
                    ));
                    return Ok(None);
                }
                let buffer = Buffer::thp(len).map_err(no_memory)?;
                let fraction = match buffer.backing {
                    Backing::Thp { huge_fraction } => huge_fraction,
                    _ => 0.0,
                };
                self.warnings.push(format!(
                    "2 MiB pages: {why}; measured on transparent huge pages instead ({:.0}% of \
                     the buffer got them)",
                    fraction * 100.0
                ));
                Ok(Some(buffer))
            }
        }
    }
}

impl Workload for Tlb {
    fn name(&self) -> &'static str {
        "tlb"
    }

    fn params(&self) -> crate::params::WorkloadParams {
        self.params.to_params()
    }

    fn check(&self) -> Result<(), WorkloadError> {
        if self.reserve && self.wants_2m() {
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } != 0 {
                return Err(WorkloadError::Environment(
                    "reserve_hugepages=true raises /proc/sys/vm/nr_hugepages: run as root, or \
                     leave it false to fall back to transparent huge pages"
                        .into(),
                ));
            }
        }
        Ok(())
    }

    fn prepare(&mut self) -> Result<(), WorkloadError> {
        if self.reserve && self.wants_2m() {
            self.warnings
                .extend(iommutop_host::sweep(&iommutop_host::HostRoot::system()));
            let reservation = Reservation::ensure_2m(self.huge_pages_needed())?;
            if reservation.free < self.huge_pages_needed() {
                self.warnings.push(format!(
                    "the kernel granted {} of {} huge pages of 2 MiB (memory fragmented?)",
                    reservation.free,
                    self.huge_pages_needed()
                ));
            }
            self.reservation = Some(reservation);
        }
        Ok(())
    }

    fn run(&mut self, ctl: &mut dyn RunControl) -> Result<WorkloadOutput, WorkloadError> {
        let tsc = Tsc::detect();
        let mut curve = Vec::new();
        let mut series: BTreeMap<String, SeriesBacking> = BTreeMap::new();
        let mut points: Vec<(String, Vec<Point>)> = Vec::new();
        let mut rates = Vec::new();
        let mut interrupted = false;
        for page_size in self.page_sizes.clone() {
            let Some(mut buffer) = self.buffer(&page_size)? else {
                continue;
            };
            let backing = buffer.backing;
            let info = SeriesBacking {
                backing: backing.name(),
                huge_fraction: match backing {
                    Backing::Thp { huge_fraction } => Some(huge_fraction),
                    _ => None,
                },
            };
            series.insert(page_size.clone(), info);
            ctl.note(&format!(
                "tlb: {page_size} pages ({}), {} working sets from {} to {}",
                backing.name(),
                self.sizes.len(),
                format_size(self.sizes[0]),
                format_size(self.max_size)
            ));
            let mut measured = Vec::new();
            for &size in &self.sizes {
                if ctl.cancelled() {
                    interrupted = true;
                    break;
                }
                let size_usize = usize::try_from(size)
                    .map_err(|_| WorkloadError::param("max_size", "too large"))?;
                let (start, slots) = buffer.link(size_usize, self.pages_pattern, self.seed ^ size);
                // SAFETY: the cycle was just linked in `buffer`, which lives (and is not
                // relinked) until the measurement returns.
                let m = unsafe { chase::measure(start, slots, self.budget, &tsc) };
                if let Some(rate) = m.ticks_per_ns {
                    rates.push(rate);
                }
                let point = CurvePoint {
                    page_size: page_size.clone(),
                    bytes: size,
                    ns_per_access: m.ns_per_access,
                    accesses: m.accesses,
                    cycles_per_access: m.ticks_per_access,
                };
                ctl.live(json!(point));
                curve.push(point);
                measured.push(Point {
                    bytes: size,
                    ns: m.ns_per_access,
                });
            }
            points.push((page_size, measured));
            drop(buffer);
            if interrupted {
                break;
            }
        }
        let series_of = |name: &str| {
            points
                .iter()
                .find(|(p, _)| p == name)
                .map(|(_, v)| v.as_slice())
                .filter(|v| !v.is_empty())
        };
        let (small, huge) = (series_of("4k"), series_of("2m"));
        let found = steps::classify(small, huge);
        let pattern = if self.pages_pattern { "pages" } else { "lines" };
        let estimates = steps::estimates(&found, pattern);
        let (small_largest, huge_largest) = (
            small.and_then(<[Point]>::last),
            huge.and_then(<[Point]>::last),
        );
        rates.sort_by(f64::total_cmp);
        let results = TlbResults {
            pattern,
            page_sizes: series,
            sizes_per_page_size: points.iter().map(|(_, v)| v.len()).max().unwrap_or(0),
            ns_per_access_4k_largest: small_largest.map(|p| p.ns),
            ns_per_access_2m_largest: huge_largest.map(|p| p.ns),
            huge_page_speedup_largest: small_largest
                .zip(huge_largest)
                .filter(|(_, b)| b.ns > 0.0)
                .map(|(a, b)| a.ns / b.ns),
            tsc: TscResult {
                usable: tsc.usable(),
                ghz: rates.get(rates.len() / 2).copied(),
            },
            curve,
            steps: found,
            estimates,
            interrupted,
        };
        let mut warnings = std::mem::take(&mut self.warnings);
        if under_hypervisor() && small.is_some() && huge.is_some() {
            warnings.push(
                "running under a hypervisor: a 2 MiB page of this guest is one TLB entry only \
                 if the host backs it with a huge page too, so steps both curves show may be \
                 TLB steps rather than caches"
                    .into(),
            );
        }
        if !tsc.usable() {
            warnings.push(
                "the TSC is not constant and non-stop here (no constant_tsc/nonstop_tsc): ns \
                 only, no cycles"
                    .into(),
            );
        }
        if interrupted {
            warnings.push("interrupted: the curves stop at the last working set measured".into());
        }
        Ok(WorkloadOutput::new(
            results,
            Headline::uncounted(WorkUnit::Access),
            warnings,
        ))
    }

    fn restore(&mut self) -> Vec<String> {
        self.reservation
            .take()
            .and_then(|mut r| r.restore())
            .into_iter()
            .collect()
    }
}

impl Drop for Tlb {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

/// How a page size's buffer was backed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesBacking {
    /// `4k`, `hugetlb` or `thp`.
    pub backing: &'static str,
    /// With `thp`: the share of the buffer the kernel gave huge pages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub huge_fraction: Option<f64>,
}

/// One working set measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurvePoint {
    pub page_size: String,
    pub bytes: u64,
    pub ns_per_access: f64,
    pub accesses: u64,
    /// TSC cycles, where the TSC is constant and non-stop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycles_per_access: Option<f64>,
}

/// The TSC: whether cycles can be trusted, and its rate (the median of the measurements').
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TscResult {
    pub usable: bool,
    pub ghz: Option<f64>,
}

/// What a tlb run did, as `run.workload.results` holds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TlbResults {
    /// `pages` or `lines`: what the chase steps over.
    pub pattern: &'static str,
    pub page_sizes: BTreeMap<String, SeriesBacking>,
    pub sizes_per_page_size: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns_per_access_4k_largest: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns_per_access_2m_largest: Option<f64>,
    /// ns per access with 4 KiB pages over 2 MiB at the largest working set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub huge_page_speedup_largest: Option<f64>,
    pub tsc: TscResult,
    pub curve: Vec<CurvePoint>,
    pub steps: Vec<steps::Step>,
    pub estimates: Vec<steps::Estimate>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// Whether /proc/cpuinfo says this is a virtual machine (the `hypervisor` flag).
fn under_hypervisor() -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|text| {
        text.lines()
            .find(|l| l.starts_with("flags"))
            .is_some_and(|l| l.split_whitespace().any(|f| f == "hypervisor"))
    })
}

/// The curves side by side, then the steps.
pub fn summarize(results: &Map<String, Value>) -> String {
    let curve = results
        .get("curve")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut sizes: Vec<u64> = curve.iter().filter_map(|p| p["bytes"].as_u64()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let at = |page: &str, bytes: u64| {
        curve
            .iter()
            .find(|p| p["page_size"] == page && p["bytes"] == bytes)
            .and_then(|p| p["ns_per_access"].as_f64())
            .map_or_else(|| "-".to_string(), |v| format!("{v:.2}"))
    };
    let mut out = format!(
        "tlb pointer chase ({} pattern): ns per access\n{:>10} {:>10} {:>10}\n",
        results
            .get("pattern")
            .and_then(Value::as_str)
            .unwrap_or("?"),
        "working set",
        "4k pages",
        "2m pages"
    );
    for bytes in sizes {
        out.push_str(&format!(
            "{:>10} {:>10} {:>10}\n",
            format_size(bytes),
            at("4k", bytes),
            at("2m", bytes)
        ));
    }
    for step in results
        .get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.push_str(&format!(
            "step ({} pages, {}): after {} ({:.2} → {:.2} ns, ×{:.2})\n",
            step["page_size"].as_str().unwrap_or("?"),
            step["kind"].as_str().unwrap_or("?"),
            format_size(step["fast_bytes"].as_u64().unwrap_or(0)),
            step["ns_before"].as_f64().unwrap_or(0.0),
            step["ns_after"].as_f64().unwrap_or(0.0),
            step["ratio"].as_f64().unwrap_or(0.0),
        ));
    }
    let pattern = results.get("pattern").and_then(Value::as_str);
    for estimate in results
        .get("estimates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.push_str(&estimate_line(estimate, pattern));
    }
    out
}

/// One reach estimate as a sentence with units: what is estimated, how big, and from which
/// working set (`TLB reach with 4 KiB pages ≈ 64 TLB entries (…)`).
fn estimate_line(estimate: &Value, pattern: Option<&str>) -> String {
    let what = estimate["what"].as_str().unwrap_or("?");
    let working_set = iec_size(estimate["working_set_bytes"].as_u64().unwrap_or(0));
    match (
        estimate["entries"].as_u64(),
        estimate["cache_bytes"].as_u64(),
    ) {
        (Some(entries), _) => format!(
            "estimate: {what} ≈ {entries} TLB entries (the chase slows past {working_set} of \
             4 KiB pages)\n"
        ),
        (None, Some(cache)) if pattern == Some("pages") => format!(
            "estimate: {what} ≈ {} (the chase slows past {working_set} of working set, one \
             64-byte line touched per 4 KiB page)\n",
            iec_size(cache)
        ),
        (None, Some(cache)) => format!(
            "estimate: {what} ≈ {} (the chase slows past {working_set} of working set, every \
             line touched)\n",
            iec_size(cache)
        ),
        (None, None) => {
            format!("estimate: {what}: the chase slows past {working_set} of working set\n")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::BasicControl;
    use crate::registry::WorkloadKind;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn a_quick_sweep_on_4k_pages_gives_a_point_per_working_set() {
        let params = WorkloadKind::Tlb
            .params(
                json!({"page_sizes": ["4k"], "max_size": "256k", "sizes_per_octave": 1,
                       "time_per_size_ms": 1})
                .as_object()
                .cloned()
                .unwrap(),
            )
            .unwrap();
        let mut tlb = Tlb::new(params).unwrap();
        tlb.check().unwrap();
        tlb.prepare().unwrap();
        let cancel = AtomicBool::new(false);
        let mut live = 0;
        let out = {
            let mut ctl = BasicControl::new(&cancel).on_live(|_| live += 1);
            tlb.run(&mut ctl).unwrap()
        };
        assert_eq!(live, 7, "4k … 256k");
        let results = out.reported().unwrap().results.to_map().unwrap();
        let curve = results["curve"].as_array().unwrap();
        assert_eq!(curve.len(), 7);
        assert!(curve
            .iter()
            .all(|p| p["ns_per_access"].as_f64().unwrap() > 0.0));
        assert_eq!(results["sizes_per_page_size"], json!(7));
        let text = summarize(&results);
        assert!(text.contains("      256k"), "{text}");
    }

    /// The summary said "cache size at 256k ≈ 4k": no unit, and not what was estimated.
    #[test]
    fn estimates_say_what_they_estimate_with_units() {
        let results = json!({
            "pattern": "pages",
            "estimates": [
                {"what": "TLB reach with 4 KiB pages", "working_set_bytes": 256 << 10,
                 "entries": 64, "cache_bytes": null},
                {"what": "cache size", "working_set_bytes": 256 << 10,
                 "entries": null, "cache_bytes": 4 << 10},
                {"what": "cache or TLB limit (2m pages)", "working_set_bytes": 64 << 20,
                 "entries": null, "cache_bytes": null},
            ],
        });
        let text = summarize(results.as_object().unwrap());
        assert!(
            text.contains(
                "estimate: TLB reach with 4 KiB pages ≈ 64 TLB entries (the chase slows past \
                 256 KiB of 4 KiB pages)\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "estimate: cache size ≈ 4 KiB (the chase slows past 256 KiB of working set, \
                 one 64-byte line touched per 4 KiB page)\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "estimate: cache or TLB limit (2m pages): the chase slows past 64 MiB of \
                 working set\n"
            ),
            "{text}"
        );
        assert!(!text.contains("at 256k"), "{text}");
    }

    #[test]
    fn min_must_be_below_max() {
        let params = WorkloadKind::Tlb
            .params(
                json!({"min_size": "1m", "max_size": "1m"})
                    .as_object()
                    .cloned()
                    .unwrap(),
            )
            .unwrap();
        let err = Tlb::new(params).err().unwrap().to_string();
        assert_eq!(
            err,
            "parameter `min_size`: must be below max_size (1m ≥ 1m)"
        );
    }
}
