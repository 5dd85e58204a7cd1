//! Assembling a [`Report`] from what a run collected.

use super::{
    Host, HostIommu, IntervalDevice, IntervalPoint, ProbeEntry, ProbeStatus, ProgramOverhead,
    Report, Run, SelfOverhead, Tool, SCHEMA_VERSION, TOOL_NAME,
};
use crate::device_filter::DeviceFilter;
use crate::facts::HostFacts;
use crate::losses::Losses;
use crate::sample::{Health, Op, RawSample};
use crate::snapshot::{Device, RowKey, Snapshot};
use crate::tail::{dma_tails, Tail};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Everything a run hands over to make its report.
#[derive(Debug, Clone)]
pub struct ReportInputs<'a> {
    /// `env!("CARGO_PKG_VERSION")` of the binary.
    pub tool_version: &'a str,
    pub host: &'a HostFacts,
    pub run: Run,
    /// The sample taken right after the probes attached, and the last one.
    pub first: &'a RawSample,
    pub last: &'a RawSample,
    pub probes: Vec<ProbeEntry>,
    pub bpf_stats_enabled_by_iommutop: bool,
    pub intervals: Vec<IntervalPoint>,
    /// The run's own warnings; the builder adds those it can see in the data.
    pub warnings: Vec<String>,
}

impl Report {
    /// Keeps the rows (and their interval figures and call paths) `filter` keeps, and records
    /// the filter in `run.device_filter`.
    pub fn apply_device_filter(&mut self, filter: &DeviceFilter) {
        self.devices.retain(|row| filter.keeps(row));
        let kept: BTreeSet<RowKey> = self.devices.iter().map(|row| row.key.clone()).collect();
        let address = RowKey::Pci(filter.pci_address);
        let keeps_key = |key: &RowKey| kept.contains(key) || *key == address;
        for interval in &mut self.intervals {
            interval.devices.retain(|key, _| keeps_key(key));
        }
        self.stacks.retain(|stack| keeps_key(&stack.device));
        if let Some(losses) = &mut self.losses {
            losses.retain_devices(keeps_key);
        }
        if let Some(check) = &mut self.cross_check {
            check.rows.retain(|row| {
                row.device
                    .as_deref()
                    .is_none_or(|name| keeps_key(&name.into()))
            });
        }
        self.run.device_filter = Some(filter.clone());
    }

    /// The report of a run: devices and self overhead over the whole run (first to last sample).
    pub fn build(inputs: ReportInputs<'_>) -> Report {
        let whole_run = Snapshot::between(inputs.first, inputs.last, &inputs.host.devices);
        let losses = Losses::of(&whole_run, &inputs.probes);
        let mut warnings = inputs.warnings;
        warnings.extend(host_warnings(inputs.host));
        warnings.extend(probe_warnings(&inputs.probes));
        warnings.extend(losses.warnings());
        warnings.extend(health_warnings(&whole_run.health));
        warnings.extend(requeue_warnings(&whole_run.devices));
        warnings.extend(dma_tails(&whole_run.devices).iter().map(Tail::sentence));
        let mut seen = std::collections::BTreeSet::new();
        warnings.retain(|w| seen.insert(w.clone()));
        Report {
            schema_version: SCHEMA_VERSION,
            tool: Tool {
                name: TOOL_NAME.to_string(),
                version: inputs.tool_version.to_string(),
            },
            host: Host::from_facts(inputs.host),
            run: inputs.run,
            self_overhead: SelfOverhead::from_snapshot(
                &whole_run,
                inputs.bpf_stats_enabled_by_iommutop,
            ),
            devices: whole_run.devices,
            probes: inputs.probes,
            intervals: inputs.intervals,
            warnings,
            health: whole_run.health.clone(),
            losses: Some(losses),
            cross_check: None,
            stacks: Vec::new(),
            repeats: None,
        }
    }
}

impl Host {
    pub fn from_facts(facts: &HostFacts) -> Host {
        Host {
            kernel_release: facts.kernel_release.clone(),
            cmdline: facts.cmdline.clone(),
            iommu: HostIommu {
                present: facts.iommu_present(),
                vendor: facts.iommu_vendor(),
                units: facts.iommu_units.iter().map(|u| u.name.clone()).collect(),
                default_domain_type: facts.default_domain_type(),
                dma_mode: facts.dma_mode(),
            },
            kernel_config: facts.kernel_config.clone(),
            lab: facts.lab,
        }
    }
}

impl SelfOverhead {
    /// Per-program cost over a snapshot's interval; the total is divided by the events counted.
    pub fn from_snapshot(snapshot: &Snapshot, bpf_stats_enabled_by_iommutop: bool) -> SelfOverhead {
        let programs: Vec<ProgramOverhead> = snapshot
            .programs
            .iter()
            .map(|(name, delta)| ProgramOverhead {
                name: name.clone(),
                run_count: delta.run_count,
                run_time_ns: delta.run_time_ns,
                ns_per_event: (delta.run_count > 0)
                    .then(|| delta.run_time_ns as f64 / delta.run_count as f64),
                recursion_misses: Some(snapshot.program_misses.get(name).copied().unwrap_or(0)),
            })
            .collect();
        let total_ns = programs
            .iter()
            .fold(0u64, |sum, p| sum.saturating_add(p.run_time_ns));
        SelfOverhead {
            dispatch_ns: None,
            nested_dispatch_ns: None,
            understudies: None,
            bpf_stats_enabled_by_iommutop,
            total_ns_per_event: (snapshot.events > 0 && total_ns > 0)
                .then(|| total_ns as f64 / snapshot.events as f64),
            programs,
        }
    }
}

impl IntervalPoint {
    /// The headline numbers of one interval, `t_s` seconds into the run.
    pub fn from_snapshot(t_s: f64, snapshot: &Snapshot, workload: Option<Value>) -> IntervalPoint {
        let devices: BTreeMap<RowKey, IntervalDevice> = snapshot
            .devices
            .iter()
            .map(|device| {
                let point = IntervalDevice {
                    dma_map_per_s: device.op(Op::DmaMap).rate_per_s,
                    translation_ns_per_io: device.derived.translation_ns_per_io,
                    completions_per_s: device.op(Op::Completion).rate_per_s,
                };
                (device.key.clone(), point)
            })
            .collect();
        IntervalPoint {
            t_s,
            devices,
            workload,
        }
    }
}

fn host_warnings(host: &HostFacts) -> Vec<String> {
    if host.iommu_present() {
        return Vec::new();
    }
    vec![
        "no IOMMU is active on this host: DMA addresses are not translated, so there is no \
          translation cost to measure"
            .to_string(),
    ]
}

fn probe_warnings(probes: &[ProbeEntry]) -> Vec<String> {
    let mut warnings = Vec::new();
    let mut every_tier_refused = Vec::new();
    for probe in probes {
        let reason = probe.reason.as_deref();
        match (probe.status, reason) {
            (ProbeStatus::Attached, _) => {}
            (ProbeStatus::Unavailable, None) if !probe.refused.is_empty() => {
                every_tier_refused.push(probe.point.as_str());
            }
            (ProbeStatus::Unavailable, reason) => warnings.push(format!(
                "probe {} unavailable: {}",
                probe.point,
                reason.unwrap_or("no reason given")
            )),
            (ProbeStatus::Failed, reason) => warnings.push(format!(
                "probe {} failed: {}",
                probe.point,
                reason.unwrap_or("no reason given")
            )),
        }
    }
    if !every_tier_refused.is_empty() {
        warnings.push(format!(
            "not measured, every tier refused (the probe table says why): {}",
            every_tier_refused.join(", ")
        ));
    }
    let counts_only: Vec<&str> = probes
        .iter()
        .filter(|p| p.status == ProbeStatus::Attached && !p.latency)
        .map(|p| p.point.as_str())
        .collect();
    if !counts_only.is_empty() {
        warnings.push(format!(
            "latency not measured for {}: attached at a tier that only counts",
            counts_only.join(", ")
        ));
    }
    warnings
}

/// `IOMMUTOP_MAX_PROCESSES` in `ebpf/include/iommutop/abi.h`: processes with an `unattributed`
/// row of their own (checked against the header where the bindings are generated).
pub const MAX_PROCESS_ROWS: u32 = 64;

/// `IOMMUTOP_MAX_DEVICES` in the same header: the most rows of statistics `IOMMUTOP_STATS_ROWS`
/// may ask for (checked there too).
pub const MAX_STATS_ROWS: u32 = 256;

/// The health counters that the loss figures replace: each of them counted runs or calls that
/// `losses` now accounts for exactly ([`Losses::warnings`] says what they came to).
fn accounted_in_losses(counter: Health) -> bool {
    matches!(
        counter,
        Health::RecursionMisses
            | Health::ExitWithoutEntry
            | Health::AbandonedFrames
            | Health::MissedCalls(_)
    )
}

/// Each row whose block requests were requeued: each was mapped again when issued again, so its
/// DMA maps exceed its completed I/Os by that many (a controller reset requeues every request it
/// had in flight).
fn requeue_warnings(devices: &[Device]) -> Vec<String> {
    devices
        .iter()
        .filter(|d| d.op(Op::Requeue).count > 0)
        .map(|d| {
            let requeued = d.op(Op::Requeue).count;
            format!(
                "{}: {requeued} block requests were requeued (sent back to be issued again: the driver could not take them, or a controller reset cancelled them in flight), and mapped again when issued again: {requeued} of its DMA maps are of no completed I/O",
                d.key
            )
        })
        .collect()
}

fn health_warnings(health: &BTreeMap<Health, u64>) -> Vec<String> {
    health
        .iter()
        .filter(|(&counter, &count)| count > 0 && !accounted_in_losses(counter))
        .map(|(counter, &count)| match counter {
            Health::DeviceMapFull => {
                format!("{count} events of devices that found every statistics row taken were dropped (device_map_full): the counts are short by that many; IOMMUTOP_STATS_ROWS sets more rows, up to {MAX_STATS_ROWS}")
            }
            Health::NestingOverflow => format!(
                "{count} calls nested deeper than the tracker follows (8): counted by their exits, not timed; their nested work was charged to the call below them"
            ),
            Health::TaskMapFull => format!(
                "{count} calls of tasks whose in-flight stack could not be created: counted by their exits, not timed"
            ),
            Health::ProcessMapFull => format!(
                "{count} IOMMU calls outside the DMA API by processes beyond the first {} went to the shared `unattributed` row, not to a row of their process",
                MAX_PROCESS_ROWS
            ),
            Health::RowBusy => format!(
                "{count} events of a device seen for the first time were dropped (the counts are short by that many): its statistics row could not be written then (the map busy on that CPU: an interrupt landed in an update); later events were counted"
            ),
            Health::ClockBehindEntry => format!(
                "{count} calls' exits read an earlier time than their entries (the kernel's fast clock stepped back between CPUs or across a timekeeping update): counted, untimed"
            ),
            Health::StackLost => format!(
                "{count} sampled call paths could not be recorded (stack map full or unwinding failed)"
            ),
            Health::DriverRequests => format!(
                "{count} block requests of no disk completed: a driver's own commands (NVMe admin: Identify, Set Features after a controller reset); the DMA maps of their data are of no I/O"
            ),
            other => format!("probe health counter {other} rose by {count}"),
        })
        .collect()
}
