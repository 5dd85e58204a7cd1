//! What a scrape returns: the totals, the host's identity and the probes' state as metric
//! families, written by the `prometheus` crate's text encoder (format 0.0.4, which Prometheus
//! scrapes and `promtool check metrics` checks). Pure: data in, text out.
//!
//! Units are seconds and bytes; counters end in `_total`. Times are on-CPU self times: a call's
//! time switched out (preempted, asleep on a lock) has counters of its own (`_offcpu_seconds_total`,
//! `_waited_total`), and the probes' own cost nested in a call is left out. Latency histograms take their buckets
//! from the log2 view of the BPF slots (32 a series rather than 128): slot `i` holds
//! `[2^i, 2^(i+1))` ns, so bucket `le` is `2^(i+1)` ns in seconds, and the last slot (from 2^31 ns
//! up) is `+Inf`.

use super::names::op_names;
use super::totals::{DeviceLabels, DeviceTotals, Totals};
use iommutop_model::facts::{cmdline_params, HostFacts};
use iommutop_model::hist::{log2_slot_upper_bound, LOG2_SLOTS};
use iommutop_model::op_stats::OpDelta;
use iommutop_model::Op;
use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};
use prometheus::TextEncoder;

/// The content type of what [`render`] writes.
pub const CONTENT_TYPE: &str = prometheus::TEXT_FORMAT;

/// Command-line parameters that choose the IOMMU and its mode, for `cmdline_iommu`.
const IOMMU_PARAMS: [&str; 5] = [
    "intel_iommu",
    "amd_iommu",
    "iommu",
    "iommu.passthrough",
    "iommu.strict",
];

/// `iommutop_host_info`'s labels: what a fleet groups hosts by.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostLabels {
    pub kernel: String,
    /// `intel`, `amd`, `virtio`, or `none`.
    pub iommu: String,
    /// The domain type most groups have (`DMA-FQ`, `DMA`, `identity`), empty without an IOMMU.
    pub default_domain: String,
    /// The IOMMU parameters of the kernel command line as written, e.g. `intel_iommu=on iommu.strict=1`.
    pub cmdline_iommu: String,
}

impl HostLabels {
    pub fn from_facts(facts: &HostFacts) -> HostLabels {
        let iommu = match facts.iommu_vendor() {
            Some(vendor) => vendor.name().to_string(),
            None if facts.iommu_present() => "other".to_string(),
            None => "none".to_string(),
        };
        let cmdline_iommu = cmdline_params(facts.cmdline.as_deref().unwrap_or(""))
            .into_iter()
            .filter(|(key, _)| IOMMU_PARAMS.contains(key))
            .map(|(key, value)| match value {
                "" => key.to_string(),
                value => format!("{key}={value}"),
            })
            .collect::<Vec<_>>()
            .join(" ");
        HostLabels {
            kernel: facts.kernel_release.clone().unwrap_or_default(),
            iommu,
            default_domain: facts.default_domain_type().unwrap_or_default(),
            cmdline_iommu,
        }
    }
}

/// A probe point and the tier it got (`None`: not attached).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointTier {
    pub point: &'static str,
    pub tier: Option<&'static str>,
}

/// Everything one scrape shows.
#[derive(Debug, Clone, Copy)]
pub struct Exposition<'a> {
    pub totals: &'a Totals,
    pub host: &'a HostLabels,
    pub points: &'a [PointTier],
    /// Online CPUs, so that a CPU share can be taken of the machine as well as of one CPU.
    pub cpus: u64,
    /// Scrapes whose read of the BPF maps failed.
    pub sample_errors: u64,
    /// The kernel's statistics rows: how many hold a key now, and how many were given back.
    pub rows: RowUse,
}

/// The kernel's statistics rows (loader/src/maps/rows.rs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowUse {
    pub in_use: u64,
    pub given_back: u64,
}

#[derive(Debug, thiserror::Error)]
#[error("encoding the metrics: {0}")]
pub struct EncodeError(#[from] prometheus::Error);

/// The scrape's text.
pub fn render(exposition: &Exposition) -> Result<String, EncodeError> {
    Ok(TextEncoder::new().encode_to_string(&families(exposition))?)
}

/// Every family with at least one series, in a fixed order.
pub fn families(exposition: &Exposition) -> Vec<MetricFamily> {
    let totals = exposition.totals;
    let mut families = Vec::new();
    for op in Op::ALL {
        let names = op_names(op);
        families.push(device_counter(
            &format!("iommutop_{}_total", names.calls),
            &format!("Per device: {}.", names.what),
            totals,
            |device| op_delta(device, op).count as f64,
        ));
        if names.timed {
            families.push(device_counter(
                &format!("iommutop_{}_seconds_total", names.call),
                &format!(
                    "Per device: on-CPU time spent in {} (timed calls only: fentry or kprobe \
                     tier), without the probes' own cost or time switched out.",
                    names.what
                ),
                totals,
                |device| nanoseconds(op_delta(device, op).total_ns),
            ));
            families.push(device_counter(
                &format!("iommutop_{}_offcpu_seconds_total", names.call),
                &format!(
                    "Per device: time tasks spent switched out (preempted, asleep on a lock) \
                     inside {}, waiting that iommutop_{}_seconds_total leaves out; 0 when the \
                     scheduler's switch could not be hooked (then the waiting is in that time).",
                    names.what, names.call
                ),
                totals,
                |device| nanoseconds(op_delta(device, op).offcpu_ns),
            ));
            families.push(device_counter(
                &format!("iommutop_{}_waited_total", names.calls),
                &format!(
                    "Per device: {} whose task was switched out at least once inside the call.",
                    names.what
                ),
                totals,
                |device| op_delta(device, op).waited as f64,
            ));
            families.push(device_histogram(
                &format!("iommutop_{}_duration_seconds", names.call),
                &format!(
                    "Per device: on-CPU latency of {} (BPF log2 buckets), time switched out \
                     left out.",
                    names.what
                ),
                totals,
                op,
            ));
        }
    }
    families.push(device_counter(
        "iommutop_dma_map_bytes_total",
        "Per device: bytes mapped through the DMA API.",
        totals,
        |device| op_delta(device, Op::DmaMap).bytes as f64,
    ));
    families.push(device_counter(
        "iommutop_completion_bytes_total",
        "Per device: bytes of completed block I/O.",
        totals,
        |device| op_delta(device, Op::Completion).bytes as f64,
    ));
    families.push(device_counter(
        "iommutop_translation_seconds_total",
        "Per device: on-CPU time spent translating, the outermost timed translation calls \
         (map + unmap), counted once, time switched out left out; its rate is the CPUs' worth \
         of time spent on it.",
        totals,
        |device| nanoseconds(device.translation_ns),
    ));
    families.extend(host_families(exposition));
    families.extend(self_families(exposition));
    families.retain(|family| !family.get_metric().is_empty());
    families
}

fn op_delta(device: &DeviceTotals, op: Op) -> OpDelta {
    device.ops.get(&op).copied().unwrap_or_default()
}

fn nanoseconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn host_families(exposition: &Exposition) -> Vec<MetricFamily> {
    let host = exposition.host;
    let info = gauge_metric(
        &[
            ("kernel", &host.kernel),
            ("iommu", &host.iommu),
            ("default_domain", &host.default_domain),
            ("cmdline_iommu", &host.cmdline_iommu),
        ],
        1.0,
    );
    let points = exposition
        .points
        .iter()
        .map(|point| {
            gauge_metric(
                &[
                    ("point", point.point),
                    ("tier", point.tier.unwrap_or("none")),
                ],
                if point.tier.is_some() { 1.0 } else { 0.0 },
            )
        })
        .collect();
    vec![
        family(
            "iommutop_host_info",
            "The host: kernel release, IOMMU vendor, default domain type, IOMMU command line; always 1.",
            MetricType::GAUGE,
            vec![info],
        ),
        family(
            "iommutop_host_cpus",
            "Online CPUs of the host.",
            MetricType::GAUGE,
            vec![gauge_metric(&[], exposition.cpus as f64)],
        ),
        family(
            "iommutop_probe_point_attached",
            "Per probe point: 1 when attached (tier: fentry, kprobe, tracepoint), 0 when none worked.",
            MetricType::GAUGE,
            points,
        ),
    ]
}

/// What the probes cost and whether they are healthy.
fn self_families(exposition: &Exposition) -> Vec<MetricFamily> {
    let totals = exposition.totals;
    let per_program = |value: fn(u64, u64) -> f64| {
        totals
            .programs
            .iter()
            .map(|(program, delta)| {
                counter_metric(
                    &[("program", program)],
                    value(delta.run_count, delta.run_time_ns),
                )
            })
            .collect()
    };
    vec![
        family(
            "iommutop_probe_seconds_total",
            "Per BPF program: CPU time it ran (the kernel's BPF statistics).",
            MetricType::COUNTER,
            per_program(|_, ns| nanoseconds(ns)),
        ),
        family(
            "iommutop_probe_runs_total",
            "Per BPF program: times it ran (the kernel's BPF statistics).",
            MetricType::COUNTER,
            per_program(|runs, _| runs as f64),
        ),
        family(
            "iommutop_probe_events_total",
            "Operations the probes counted, over all devices.",
            MetricType::COUNTER,
            vec![counter_metric(&[], totals.events as f64)],
        ),
        family(
            "iommutop_probe_health_total",
            "Probe health: events lost or miscounted, by cause (map full, nesting overflow, exit \
             without entry, program runs the kernel skipped, ...); should stay 0.",
            MetricType::COUNTER,
            totals
                .health
                .iter()
                .map(|(counter, value)| {
                    counter_metric(&[("counter", &counter.to_string())], *value as f64)
                })
                .collect(),
        ),
        family(
            "iommutop_probe_rows",
            "Statistics rows the probes hold a key in (a device's binding, a disk, a process): \
             flat on a host whose devices come and go, since rows are given back.",
            MetricType::GAUGE,
            vec![gauge_metric(&[], exposition.rows.in_use as f64)],
        ),
        family(
            "iommutop_probe_rows_given_back_total",
            "Statistics rows given back to the probes once their key could count no more (its \
             device gone or bound elsewhere, its disk or netdev replaced, its process exited).",
            MetricType::COUNTER,
            vec![counter_metric(&[], exposition.rows.given_back as f64)],
        ),
        family(
            "iommutop_sample_errors_total",
            "Scrapes whose read of the BPF maps failed.",
            MetricType::COUNTER,
            vec![counter_metric(&[], exposition.sample_errors as f64)],
        ),
    ]
}

fn device_counter(
    name: &str,
    help: &str,
    totals: &Totals,
    value: impl Fn(&DeviceTotals) -> f64,
) -> MetricFamily {
    let metrics = totals
        .devices
        .iter()
        .map(|(labels, device)| counter_metric(&device_labels(labels), value(device)))
        .collect();
    family(name, help, MetricType::COUNTER, metrics)
}

/// Only devices with timed calls of `op` get a histogram (an all-zero one says nothing).
fn device_histogram(name: &str, help: &str, totals: &Totals, op: Op) -> MetricFamily {
    let metrics = totals
        .devices
        .iter()
        .filter_map(|(labels, device)| {
            let delta = device.ops.get(&op).filter(|delta| delta.timed > 0)?;
            let mut metric = Metric::from_label(label_pairs(&device_labels(labels)));
            metric.set_histogram(log2_histogram(delta));
            Some(metric)
        })
        .collect();
    family(name, help, MetricType::HISTOGRAM, metrics)
}

/// The histogram's log2 view (32 buckets a series, not the 128 finer slots) as cumulative
/// buckets in seconds; the encoder adds `+Inf`.
fn log2_histogram(delta: &OpDelta) -> Histogram {
    let slots = delta.hist.log2_slots();
    let mut cumulative = 0u64;
    let buckets = (0..LOG2_SLOTS - 1)
        .filter_map(|slot| {
            cumulative = cumulative.saturating_add(slots[slot]);
            let upper_ns = log2_slot_upper_bound(slot)?;
            let mut bucket = Bucket::default();
            bucket.set_upper_bound(nanoseconds(upper_ns));
            bucket.set_cumulative_count(cumulative);
            Some(bucket)
        })
        .collect();
    let mut histogram = Histogram::default();
    histogram.set_bucket(buckets);
    histogram.set_sample_count(delta.hist.total());
    histogram.set_sample_sum(nanoseconds(delta.total_ns));
    histogram
}

/// A device series' labels; `physfn` only on an SR-IOV virtual function's (an empty label and
/// an absent one are the same series to Prometheus: absent keeps every other series as it was).
fn device_labels(labels: &DeviceLabels) -> Vec<(&str, &str)> {
    let mut pairs = vec![
        ("device", labels.device.as_str()),
        ("driver", labels.driver.as_str()),
        ("group", labels.group.as_str()),
        ("domain", labels.domain.as_str()),
    ];
    if !labels.physfn.is_empty() {
        pairs.push(("physfn", labels.physfn.as_str()));
    }
    pairs
}

fn label_pairs(pairs: &[(&str, &str)]) -> Vec<LabelPair> {
    pairs
        .iter()
        .map(|(name, value)| {
            let mut pair = LabelPair::default();
            pair.set_name((*name).to_string());
            pair.set_value((*value).to_string());
            pair
        })
        .collect()
}

fn counter_metric(labels: &[(&str, &str)], value: f64) -> Metric {
    let mut counter = Counter::default();
    counter.set_value(value);
    let mut metric = Metric::from_label(label_pairs(labels));
    metric.set_counter(counter);
    metric
}

fn gauge_metric(labels: &[(&str, &str)], value: f64) -> Metric {
    let mut gauge = Gauge::default();
    gauge.set_value(value);
    let mut metric = Metric::from_label(label_pairs(labels));
    metric.set_gauge(gauge);
    metric
}

fn family(name: &str, help: &str, kind: MetricType, metrics: Vec<Metric>) -> MetricFamily {
    let mut family = MetricFamily::default();
    family.set_name(name.to_string());
    family.set_help(help.to_string());
    family.set_field_type(kind);
    family.set_metric(metrics);
    family
}

#[cfg(test)]
mod tests;
