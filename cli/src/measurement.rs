//! A recording measurement: probes attached, one sample per interval, a report at the end.
//! Dropping a measurement detaches every probe and turns BPF statistics back off.

use crate::cli::NetdevScope;
use crate::exit::load_failure;
use crate::exit::Outcome;
use crate::privileges::require_bpf_privileges;
use crate::proc_stat;
use anyhow::Context;
use iommutop_loader::sysinfo;
use iommutop_loader::{CrossCheckAttached, PointSelection, PointStatus, ProbeSettings, Probes};
use iommutop_model::cross_check::{CrossCheck, CrossCheckInputs};
use iommutop_model::facts::HostFacts;
use iommutop_model::report::UnderstudiesUsed;
use iommutop_model::report::{
    IntervalPoint, ProbeEntry, ProbeStatus, Refusal, Report, ReportInputs, Run,
};
use iommutop_model::sample::{Health, Op, RawSample};
use iommutop_model::snapshot::Snapshot;
use iommutop_model::unseen::{unseen_completions, BlockLayerWindow, UnseenCompletions};
use iommutop_model::{DeviceFilter, TaskFilter};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

pub struct Measurement {
    probes: Probes,
    facts: HostFacts,
    started_at: SystemTime,
    started: Instant,
    first: RawSample,
    /// The block layer's completed requests per disk around `first` (the end is read at the
    /// last sample).
    block: BlockLayerWindow,
    previous: RawSample,
    intervals: Vec<IntervalPoint>,
    /// Points `--points` left out, said in the report.
    left_out: Vec<&'static str>,
    /// `--device`: the rows kept in every snapshot and in the report.
    device_filter: Option<DeviceFilter>,
    /// `--pid`/`--cgroup`: whose work the kernel counts.
    task_filter: Option<TaskFilter>,
}

/// What the caller ran, for the report's `run` section.
#[derive(Debug, Default)]
pub struct RunDescription {
    pub profile: Option<String>,
    pub command: Vec<String>,
    pub exit_status: Option<i32>,
    pub workload: Option<iommutop_model::report::WorkloadReport>,
    pub interval: Duration,
    pub warnings: Vec<String>,
}

impl RunDescription {
    /// A profile's run: its name, its workload's parameters and results.
    pub fn profile(
        name: &str,
        workload: iommutop_workloads::WorkloadKind,
        params: iommutop_model::params::WorkloadParams,
        results: iommutop_model::results::WorkloadResults,
        interval: Duration,
        warnings: Vec<String>,
    ) -> RunDescription {
        RunDescription {
            profile: Some(name.to_string()),
            workload: Some(iommutop_model::report::WorkloadReport {
                name: workload.name().to_string(),
                params,
                results,
            }),
            interval,
            warnings,
            ..RunDescription::default()
        }
    }
}

impl Measurement {
    /// Checks privileges, attaches the probes (counting only `task_filter`'s tasks' work, if
    /// given; with `cross_check`, the kernel's own DMA and IOMMU events too) and takes the first
    /// sample.
    pub fn start(
        points: &PointSelection,
        task_filter: Option<TaskFilter>,
        netdevs: NetdevScope,
        cross_check: bool,
    ) -> Outcome<Measurement> {
        log::debug!("starting the measurement");
        require_bpf_privileges()?;
        let mut settings = ProbeSettings::from_env().map_err(load_failure)?;
        settings.virtual_netdevs = netdevs == NetdevScope::All;
        settings.cross_check = cross_check;
        // The system's facts (sysfs, the kernel's config) are read beside the attach, which
        // waits on the kernel most of the time.
        let (facts, probes) = std::thread::scope(|scope| {
            let facts = scope.spawn(|| {
                let started = Instant::now();
                let facts = host_facts();
                log::debug!(
                    "the system's facts read in {} ms",
                    started.elapsed().as_millis()
                );
                facts
            });
            let probes = Probes::attach(&settings, true, points, task_filter.as_ref());
            (facts.join(), probes)
        });
        let facts = facts.unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        let probes = probes.map_err(load_failure)?;
        let (first, block) = first_sample(&probes)?;
        if let Some(seconds) = seconds_since_process_start() {
            log::info!("first data ready {seconds:.2} s after iommutop started");
        }
        Ok(Measurement {
            probes,
            facts,
            started_at: SystemTime::now(),
            started: Instant::now(),
            block,
            previous: first.clone(),
            first,
            intervals: Vec::new(),
            left_out: points.left_out(),
            device_filter: None,
            task_filter,
        })
    }

    /// Keeps only `filter`'s rows (`--device`) in every snapshot and in the report.
    pub fn with_device_filter(mut self, filter: Option<DeviceFilter>) -> Measurement {
        self.device_filter = filter;
        self
    }

    /// IOMMU work this process's children do outside the DMA API (a userspace driver's VFIO
    /// mappings) goes to `pci_address`'s row from now on.
    pub fn charge_children_to(&mut self, pci_address: &str) -> Outcome {
        self.probes
            .charge_to_device(std::process::id(), pci_address)
            .with_context(|| format!("charging userspace-driver work to {pci_address}"))?;
        Ok(())
    }

    /// The device `--device` keeps, if any.
    pub fn device_filter(&self) -> Option<&DeviceFilter> {
        self.device_filter.as_ref()
    }

    /// `--pid`/`--cgroup`, if given.
    pub fn task_filter(&self) -> Option<&TaskFilter> {
        self.task_filter.as_ref()
    }

    pub fn facts(&self) -> &HostFacts {
        &self.facts
    }

    pub fn probe_statuses(&self) -> &[PointStatus] {
        self.probes.statuses()
    }

    /// Samples now: the snapshot of the interval since the previous sample, also kept as a
    /// point of the report's interval series (with the workload's numbers, if any).
    pub fn sample(&mut self, workload: Option<Value>) -> Outcome<Snapshot> {
        let current = self.probes.sample().context("sampling the BPF maps")?;
        let mut snapshot = Snapshot::between(&self.previous, &current, &self.facts.devices);
        if let Some(filter) = &self.device_filter {
            filter.apply_to_snapshot(&mut snapshot);
        }
        let t_s = self.started.elapsed().as_secs_f64();
        self.intervals
            .push(IntervalPoint::from_snapshot(t_s, &snapshot, workload));
        self.previous = current;
        Ok(snapshot)
    }

    /// Starts the measurement again from now: what the probes saw before (warm-up runs) is left
    /// out of the report's devices, intervals and duration.
    pub fn restart(&mut self) -> Outcome {
        let (now, block) = first_sample(&self.probes)?;
        self.block = block;
        self.first = now.clone();
        self.previous = now;
        self.intervals.clear();
        self.started = Instant::now();
        self.started_at = SystemTime::now();
        Ok(())
    }

    /// The counters now, outside the interval series: the bounds of one repeated run.
    pub fn mark(&mut self) -> Outcome<RawSample> {
        Ok(self.probes.sample().context("sampling the BPF maps")?)
    }

    /// The work between two [`Measurement::mark`]s, with the `--device` filter applied.
    pub fn between(&self, earlier: &RawSample, later: &RawSample) -> Snapshot {
        let mut snapshot = Snapshot::between(earlier, later, &self.facts.devices);
        if let Some(filter) = &self.device_filter {
            filter.apply_to_snapshot(&mut snapshot);
        }
        snapshot
    }

    /// Seconds since the measurement started.
    pub fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Takes the last sample and builds the report over the whole measurement; the probes then
    /// detach as `detach` says.
    pub fn finish(self, run: RunDescription, detach: Detach) -> Outcome<Report> {
        let (report, probes) = self.finish_attached(run)?;
        match detach {
            Detach::Here => drop(probes),
            Detach::Behind => probes.detach_behind(),
        }
        Ok(report)
    }

    /// [`Measurement::finish`], with the probes still attached: they detach when the returned
    /// [`Probes`] is dropped (seconds under emulation: ftrace waits for the kernel's RCU-tasks
    /// grace periods link by link), so a caller can write the report before that.
    pub fn finish_attached(mut self, run: RunDescription) -> Outcome<(Report, Probes)> {
        self.block.before_last = completed_requests();
        let last = self
            .probes
            .last_sample(&self.first)
            .context("last sample")?;
        let unseen = self.unseen_completions(&last);
        // Devices may have changed driver or domain type during the run: describe them as they
        // are at the end, when the report is read.
        self.facts = host_facts()?;
        let duration_s = self.started.elapsed().as_secs_f64();
        let probes = self.probes.statuses().iter().map(probe_entry).collect();
        let mut warnings = run.warnings;
        if let Some(filter) = &self.task_filter {
            warnings.push(filter.note());
            if !self.probes.tells_interrupts() {
                warnings.push(
                    "the kernel's preempt count is not in /proc/kallsyms (kptr_restrict, or an \
                     architecture iommutop does not know): interrupts that arrived while a \
                     selected task ran in user mode may be counted as its work"
                        .to_string(),
                );
            }
        }
        if !self.left_out.is_empty() {
            warnings.push(format!(
                "points not attached (--points): {}; their counts read 0 here because they were \
                 not measured",
                self.left_out.join(", ")
            ));
        }
        warnings.extend(unseen.iter().map(UnseenCompletions::warning));
        warnings.extend(self.probes.self_time_caveat());
        warnings.extend(self.probes.waiting_caveat());
        for status in self.probes.statuses() {
            for caveat in &status.caveats {
                warnings.push(format!("{}: {caveat}", status.point));
            }
        }
        let stacks = self.probes.stack_samples().unwrap_or_else(|e| {
            warnings.push(format!("call paths not sampled: {e}"));
            Vec::new()
        });
        let mut report = Report::build(ReportInputs {
            tool_version: env!("CARGO_PKG_VERSION"),
            host: &self.facts,
            run: Run {
                started_at: iommutop_model::time::rfc3339_utc(self.started_at),
                duration_s,
                interval_s: run.interval.as_secs_f64(),
                profile: run.profile,
                command: run.command,
                exit_status: run.exit_status,
                workload: run.workload,
                device_filter: None,
                task_filter: self.task_filter.clone(),
            },
            first: &self.first,
            last: &last,
            probes,
            bpf_stats_enabled_by_iommutop: self.probes.stats_enabled_by_us(),
            intervals: std::mem::take(&mut self.intervals),
            warnings,
        });
        report.stacks = stacks;
        if !unseen.is_empty() {
            report.health.insert(
                Health::CompletionsUnseen,
                unseen.iter().map(UnseenCompletions::unseen).sum(),
            );
        }
        report.self_overhead.dispatch_ns = self.probes.dispatch_ns();
        report.self_overhead.nested_dispatch_ns = self.probes.nested_dispatch_ns();
        let understudies = self.probes.understudies();
        report.self_overhead.understudies = Some(UnderstudiesUsed {
            on: understudies.on,
            why: understudies.why.clone(),
        });
        if let Some(attached) = self.probes.cross_check_events() {
            let check = cross_check(
                &report,
                &self.first,
                &last,
                attached,
                self.task_filter.is_some(),
            );
            report.warnings.extend(check.warnings());
            report.cross_check = Some(check);
        }
        if let Some(filter) = &self.device_filter {
            report.apply_device_filter(filter);
        }
        Ok((report, self.probes))
    }
}

/// The kernel's own events over the run against the report's counts ([`CrossCheck`]).
fn cross_check(
    report: &Report,
    first: &RawSample,
    last: &RawSample,
    attached: &CrossCheckAttached,
    filtered: bool,
) -> CrossCheck {
    let probes: BTreeMap<String, BTreeMap<Op, u64>> = report
        .devices
        .iter()
        .map(|row| {
            let counts = Op::ALL.iter().map(|&op| (op, row.op(op).count)).collect();
            (row.key.to_string(), counts)
        })
        .collect();
    let misses: BTreeMap<String, u64> = report
        .self_overhead
        .programs
        .iter()
        .filter_map(|p| Some((p.name.clone(), p.recursion_misses?)))
        .collect();
    CrossCheck::of(
        &CrossCheckInputs {
            first,
            last,
            attached,
            filtered,
        },
        &probes,
        &report.self_overhead.programs,
        &misses,
    )
}

/// How a finished measurement lets go of its probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detach {
    /// Before `finish` returns: when more measuring follows in this process, which the
    /// programs still detaching would slow down.
    Here,
    /// In a process of its own, while this one goes on ([`Probes::detach_behind`]): when
    /// nothing is measured after, so that the user does not wait for the kernel's detach.
    Behind,
}

impl Measurement {
    /// Disks whose completions the probes undercounted between `first` and `last`. Not judged
    /// under `--pid`/`--cgroup`, which count no completions.
    fn unseen_completions(&self, last: &RawSample) -> Vec<UnseenCompletions> {
        if self.task_filter.is_some() {
            return Vec::new();
        }
        unseen_completions(&self.block, &self.first, last)
    }
}

/// The first sample of a measurement, with the block layer read on both sides of it (the start of
/// its window; the end is read at the last sample).
fn first_sample(probes: &Probes) -> Outcome<(RawSample, BlockLayerWindow)> {
    let before_first = completed_requests();
    let first = probes.sample().context("first sample")?;
    let block = BlockLayerWindow {
        before_first,
        after_first: completed_requests(),
        before_last: BTreeMap::new(),
    };
    Ok((first, block))
}

/// Seconds since this process started, by the kernel's clock of it (`/proc/self/stat`'s start
/// time against `/proc/uptime`, in clock ticks: 10 ms steps): what the user has waited, loading
/// the executable included.
fn seconds_since_process_start() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Field 22; field 3 is the first after the name.
    let start_ticks: f64 = proc_stat::fields_after_name(&stat)?.get(19)?.parse().ok()?;
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(uptime - start_ticks / proc_stat::ticks_per_second()?)
}

/// The block layer's completed requests per request-based disk, now.
fn completed_requests() -> BTreeMap<String, u64> {
    iommutop_host::disk_stats::completed_requests(&iommutop_host::HostRoot::system())
}

fn host_facts() -> Outcome<HostFacts> {
    Ok(sysinfo::collect(Path::new("/")).context("reading system facts from /proc and /sys")?)
}

/// The report's view of a probe point.
pub fn probe_entry(status: &PointStatus) -> ProbeEntry {
    let attached = status.attached_hook_labels();
    let failed: Vec<String> = status
        .hooks
        .iter()
        .filter(|h| !h.is_attached() && !h.absent)
        .map(|h| format!("{}: {}", h.hook, h.error.as_deref().unwrap_or("")))
        .collect();
    ProbeEntry {
        point: status.point.to_string(),
        tier: status.tier,
        symbol: (!attached.is_empty()).then(|| attached.join(", ")),
        status: if status.tier.is_some() {
            ProbeStatus::Attached
        } else {
            ProbeStatus::Unavailable
        },
        latency: status.measures_latency(),
        reason: if status.tier.is_none() {
            unavailable_reason(status)
        } else {
            (!failed.is_empty()).then(|| failed.join("; "))
        },
        refused: status
            .refused
            .iter()
            .map(|r| Refusal {
                tier: r.tier,
                reason: r.reason.clone(),
            })
            .collect(),
    }
}

/// Why a point got no tier, beyond its refusals: nothing when the refusals say it (the
/// report's `refused` holds them, and the summary prints them once).
fn unavailable_reason(status: &PointStatus) -> Option<String> {
    status
        .refused
        .is_empty()
        .then(|| "no tier of this point exists on this kernel".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use iommutop_loader::Refusal as TierRefusal;
    use iommutop_model::report::Tier;
    use iommutop_model::sample::Op;

    fn unhooked(refused: Vec<TierRefusal>) -> PointStatus {
        PointStatus {
            point: "iova_alloc",
            op: Op::IovaAlloc,
            tier: None,
            hooks: vec![],
            refused,
            caveats: vec![],
        }
    }

    /// The refusals went into `reason` as well as `refused`, and the summary printed both.
    #[test]
    fn an_unhooked_points_refusals_are_kept_once() {
        let entry = probe_entry(&unhooked(vec![TierRefusal {
            tier: Tier::Kprobe,
            reason: "this kernel has no kprobe PMU".into(),
        }]));
        assert_eq!(entry.status, ProbeStatus::Unavailable);
        assert_eq!(entry.reason, None);
        assert_eq!(entry.refused.len(), 1);
        let entry = probe_entry(&unhooked(vec![]));
        assert_eq!(
            entry.reason.as_deref(),
            Some("no tier of this point exists on this kernel")
        );
    }
}
