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
use iommutop_model::results::tlb::Estimate;
use iommutop_model::units::{format_size, iec_size};
use iommutop_model::workload::{Headline, WorkUnit};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;
use steps::Point;

pub use iommutop_model::results::tlb::{
    CurvePoint, PageSize, SeriesBacking, TlbResults, TscResult,
};

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
    page_sizes: Vec<PageSize>,
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
            page_sizes: params
                .strs("page_sizes")?
                .iter()
                .map(|name| name.parse::<PageSize>())
                .collect::<Result<_, _>>()
                .map_err(|e| WorkloadError::param("page_sizes", e.to_string()))?,
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
        self.page_sizes.contains(&PageSize::Size2M)
    }

    /// A buffer for one page size: hugetlb when possible, else THP with a warning.
    fn buffer(&mut self, page_size: PageSize) -> Result<Option<Buffer>, WorkloadError> {
        let len = usize::try_from(self.max_size)
            .map_err(|_| WorkloadError::param("max_size", "too large for this machine"))?;
        let no_memory = |e: std::io::Error| {
            WorkloadError::Environment(format!(
                "cannot map {} for the chase ({e}): lower max_size",
                format_size(self.max_size)
            ))
        };
        if page_size == PageSize::Size4K {
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

    /// One page size's curve: each working set in turn chased through `buffer`, its point sent
    /// live and kept in `curve` (the TSC's rate in `rates`); stops early when cancelled, and
    /// then says so (the second value).
    fn measure_curve(
        &self,
        ctl: &mut dyn RunControl,
        tsc: &Tsc,
        page_size: PageSize,
        buffer: &mut Buffer,
        curve: &mut Vec<CurvePoint>,
        rates: &mut Vec<f64>,
    ) -> Result<(Vec<Point>, bool), WorkloadError> {
        let mut measured = Vec::new();
        for &size in &self.sizes {
            if ctl.cancelled() {
                return Ok((measured, true));
            }
            let size_usize =
                usize::try_from(size).map_err(|_| WorkloadError::param("max_size", "too large"))?;
            let (start, slots) = buffer.link(size_usize, self.pages_pattern, self.seed ^ size);
            // SAFETY: the cycle was just linked in `buffer`, which lives (and is not
            // relinked) until the measurement returns.
            let m = unsafe { chase::measure(start, slots, self.budget, tsc) };
            if let Some(rate) = m.ticks_per_ns {
                rates.push(rate);
            }
            let point = CurvePoint {
                page_size,
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
        Ok((measured, false))
    }

    /// The run's warnings: those gathered while setting up, then what may mislead in the
    /// curves (`both_curves`: 4k and 2m were both measured).
    fn warnings(&mut self, tsc: &Tsc, both_curves: bool, interrupted: bool) -> Vec<String> {
        let mut warnings = std::mem::take(&mut self.warnings);
        if under_hypervisor() && both_curves {
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
        warnings
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
        let mut series: BTreeMap<PageSize, SeriesBacking> = BTreeMap::new();
        let mut points: Vec<(PageSize, Vec<Point>)> = Vec::new();
        let mut rates = Vec::new();
        let mut interrupted = false;
        for page_size in self.page_sizes.clone() {
            let Some(mut buffer) = self.buffer(page_size)? else {
                continue;
            };
            let backing = buffer.backing;
            let info = SeriesBacking {
                backing: backing.name().to_string(),
                huge_fraction: match backing {
                    Backing::Thp { huge_fraction } => Some(huge_fraction),
                    _ => None,
                },
            };
            series.insert(page_size, info);
            ctl.note(&format!(
                "tlb: {page_size} pages ({}), {} working sets from {} to {}",
                backing.name(),
                self.sizes.len(),
                format_size(self.sizes[0]),
                format_size(self.max_size)
            ));
            let (measured, cancelled) =
                self.measure_curve(ctl, &tsc, page_size, &mut buffer, &mut curve, &mut rates)?;
            interrupted = cancelled;
            points.push((page_size, measured));
            drop(buffer);
            if interrupted {
                break;
            }
        }
        let series_of = |size: PageSize| {
            points
                .iter()
                .find(|(p, _)| *p == size)
                .map(|(_, v)| v.as_slice())
                .filter(|v| !v.is_empty())
        };
        let (small, huge) = (series_of(PageSize::Size4K), series_of(PageSize::Size2M));
        let found = steps::classify(small, huge);
        let pattern = if self.pages_pattern { "pages" } else { "lines" };
        let estimates = steps::estimates(&found, pattern);
        let (small_largest, huge_largest) = (
            small.and_then(<[Point]>::last),
            huge.and_then(<[Point]>::last),
        );
        rates.sort_by(f64::total_cmp);
        let results = TlbResults {
            pattern: pattern.to_string(),
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
            work: None,
        };
        let warnings = self.warnings(&tsc, small.is_some() && huge.is_some(), interrupted);
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

/// Whether /proc/cpuinfo says this is a virtual machine (the `hypervisor` flag).
fn under_hypervisor() -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|text| {
        text.lines()
            .find(|l| l.starts_with("flags"))
            .is_some_and(|l| l.split_whitespace().any(|f| f == "hypervisor"))
    })
}

/// The curves side by side, then the steps.
pub fn summarize(results: &TlbResults) -> String {
    let mut sizes: Vec<u64> = results.curve.iter().map(|p| p.bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let at = |page: PageSize, bytes: u64| {
        results
            .curve
            .iter()
            .find(|p| p.page_size == page && p.bytes == bytes)
            .map_or_else(|| "-".to_string(), |p| format!("{:.2}", p.ns_per_access))
    };
    let mut out = format!(
        "tlb pointer chase ({} pattern): ns per access\n{:>10} {:>10} {:>10}\n",
        results.pattern, "working set", "4k pages", "2m pages"
    );
    for bytes in sizes {
        out.push_str(&format!(
            "{:>10} {:>10} {:>10}\n",
            format_size(bytes),
            at(PageSize::Size4K, bytes),
            at(PageSize::Size2M, bytes)
        ));
    }
    for step in &results.steps {
        out.push_str(&format!(
            "step ({} pages, {}): after {} ({:.2} → {:.2} ns, ×{:.2})\n",
            step.page_size,
            step.kind.name(),
            format_size(step.fast_bytes),
            step.ns_before,
            step.ns_after,
            step.ratio,
        ));
    }
    for estimate in &results.estimates {
        out.push_str(&estimate_line(estimate, &results.pattern));
    }
    out
}

/// One reach estimate as a sentence with units: what is estimated, how big, and from which
/// working set (`TLB reach with 4 KiB pages ≈ 64 TLB entries (…)`).
fn estimate_line(estimate: &Estimate, pattern: &str) -> String {
    let what = &estimate.what;
    let working_set = iec_size(estimate.working_set_bytes);
    match (estimate.entries, estimate.cache_bytes) {
        (Some(entries), _) => format!(
            "estimate: {what} ≈ {entries} TLB entries (the chase slows past {working_set} of \
             4 KiB pages)\n"
        ),
        (None, Some(cache)) if pattern == "pages" => format!(
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
        let iommutop_model::results::WorkloadResults::Tlb(results) =
            out.reported().unwrap().results
        else {
            panic!("tlb results");
        };
        assert_eq!(results.curve.len(), 7);
        assert!(results.curve.iter().all(|p| p.ns_per_access > 0.0));
        assert_eq!(results.sizes_per_page_size, 7);
        let text = summarize(&results);
        assert!(text.contains("      256k"), "{text}");
    }

    /// The summary said "cache size at 256k ≈ 4k": no unit, and not what was estimated.
    #[test]
    fn estimates_say_what_they_estimate_with_units() {
        let estimate = |what: &str, working_set_bytes, entries, cache_bytes| Estimate {
            what: what.into(),
            working_set_bytes,
            entries,
            cache_bytes,
        };
        let results = TlbResults {
            pattern: "pages".into(),
            page_sizes: BTreeMap::new(),
            sizes_per_page_size: 0,
            ns_per_access_4k_largest: None,
            ns_per_access_2m_largest: None,
            huge_page_speedup_largest: None,
            tsc: TscResult {
                usable: false,
                ghz: None,
            },
            curve: Vec::new(),
            steps: Vec::new(),
            estimates: vec![
                estimate("TLB reach with 4 KiB pages", 256 << 10, Some(64), None),
                estimate("cache size", 256 << 10, None, Some(4 << 10)),
                estimate("cache or TLB limit (2m pages)", 64 << 20, None, None),
            ],
            interrupted: false,
            work: None,
        };
        let text = summarize(&results);
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
