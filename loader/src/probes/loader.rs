//! The only module that holds the loaded BPF object: loads it (load.rs), attaches every selected
//! probe point on the cheapest tier that works (attach.rs), and reads its maps (maps.rs) for as
//! long as [`Probes`] lives.

use super::attach::{attach_point, attach_waiting, WAITING_EVENT, WAITING_PROGRAM};
use super::detach::EarlierDetaches;
use super::{cross_check, detach};
use crate::calibration::dispatch;
use crate::calibration::dispatch::CalibrationError;
use crate::links::fentry_jobs;
use crate::links::fentry_jobs::OwnLoader;
use crate::links::multi::MultiAttached;
use crate::maps::fdinfo;
use crate::maps::map_memory::{MapKind, MapMemory, MapShape};
use crate::maps::probe_maps::{ProbeMaps, SampleError};
use crate::object::load::LoadError;
use crate::object::object_copy::map_data;
use crate::object::relocate::{relocate, Relocated, UnderstudyChoice};
use crate::points::hook_error::HookError;
use crate::points::selection::PointSelection;
use crate::points::status::PointStatus;
use crate::points::table::{Tier, POINTS};
use crate::settings::ProbeSettings;
use crate::timing::timed;
use crate::LOADER_LOG;
use aya::Ebpf;
use iommutop_model::report::StackSample;
use iommutop_model::sample::RawSample;
use iommutop_model::TaskFilter;
use std::os::fd::{AsFd, OwnedFd};

/// How long a call must have been open at a recording's end to be taken for one whose exits were
/// never seen: no DMA or IOMMU call runs this long, and a workload that ended has none running.
pub const OPEN_CALL_AGE_NS: u64 = 100_000_000;

/// How long an attach waits for earlier runs' probes to detach (seconds under emulation).
const EARLIER_DETACHES_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Attached probes and typed handles on their maps. Dropping it detaches everything.
pub struct Probes {
    /// `None` only while being dropped (detaching is timed, see [`Drop`]).
    ebpf: Option<Ebpf>,
    /// The multi-function programs' links, and the functions they serve ([`crate::links::multi`]).
    multi: MultiAttached,
    maps: ProbeMaps,
    statuses: Vec<PointStatus>,
    stats_fd: Option<OwnedFd>,
    /// The kernel's dispatch around probe programs, taken out of self times; why not.
    dispatch: Result<dispatch::Dispatch, CalibrationError>,
    /// Whether the programs can tell an interrupt from its task's work (the preempt count).
    tells_interrupts: bool,
    /// Whether the time a task spends switched out inside a call is measured (the scheduler's
    /// switch hooked), or why not.
    waiting: Result<(), HookError>,
    /// Whether the timed programs have understudies, and why.
    understudies: UnderstudyChoice,
    /// The kernel's own events counted beside the probes, when asked ([`super::cross_check`]).
    cross_check: Option<CrossCheck>,
    /// Every map of the object, as the kernel created it.
    map_shapes: Vec<MapShape>,
}

/// The cross-check's programs as attached, and its maps.
struct CrossCheck {
    attached: cross_check::Attached,
    maps: cross_check::CrossCheckMaps,
}

impl Probes {
    /// Loads the object and attaches every selected point it can, each on the cheapest tier that
    /// works.
    /// `enable_stats` turns on the kernel's BPF run-time statistics for as long as this lives.
    /// With `tasks` (`--pid`/`--cgroup`), only the selected tasks' task-context work is counted:
    /// the knobs are set before load, so that without a filter the verifier drops the checks.
    pub fn attach(
        settings: &ProbeSettings,
        enable_stats: bool,
        selection: &PointSelection,
        tasks: Option<&TaskFilter>,
    ) -> Result<Probes, LoadError> {
        match detach::wait_for_earlier_detaches(&detach::lock_path(), EARLIER_DETACHES_LIMIT) {
            EarlierDetaches::None => {}
            EarlierDetaches::Waited(waited) => log::info!(target: LOADER_LOG,
                "an earlier run's probes detached after {:.1} s",
                waited.as_secs_f64()
            ),
            EarlierDetaches::StillDetaching(waited) => log::warn!(target: LOADER_LOG,
                "an earlier run's probes are still detaching after {:.0} s: while they do, their \
                 programs run inside the calls these probes time",
                waited.as_secs_f64()
            ),
        }
        let Relocated {
            btf,
            mut ebpf,
            symbols,
            stats_fd,
            dispatch,
            copy,
            multi,
            understudies,
        } = relocate(settings, enable_stats, tasks)?;
        let map_shapes = map_shapes(&ebpf);
        let maps = ProbeMaps::take(&mut ebpf)?;
        let tells_interrupts = symbols.preempt.is_some();
        let mut kernel = symbols.support;
        let own = copy.as_ref().ok().map(|copy| OwnLoader {
            copy,
            multi: multi.is_ok(),
            understudies: understudies.on,
        });
        let multi = kernel.attach_ahead(
            &mut ebpf,
            &btf,
            own,
            POINTS.iter().filter(|point| selection.includes(point)),
            fentry_jobs::threads(),
        );
        log::debug!(target: LOADER_LOG, "attaching");
        let statuses: Vec<PointStatus> = POINTS
            .iter()
            .filter(|point| selection.includes(point))
            .map(|point| attach_point(&mut ebpf, &btf, &mut kernel, point))
            .inspect(|status| match status.tier {
                Some(tier) => log::info!(target: LOADER_LOG,
                    "{}: {} ({})",
                    status.point,
                    tier.name(),
                    status.attached_hook_labels().join(", ")
                ),
                None => log::info!(target: LOADER_LOG, "{}: unavailable", status.point),
            })
            .collect();
        let timed = statuses
            .iter()
            .any(|status| matches!(status.tier, Some(Tier::Fentry | Tier::Kprobe)));
        let waiting = if timed {
            attach_waiting(
                &mut ebpf,
                &btf,
                kernel.verified_ahead(WAITING_PROGRAM, WAITING_EVENT),
            )
        } else {
            Ok(())
        };
        if let Err(why) = &waiting {
            log::info!(target: LOADER_LOG, "time switched out inside calls not measured: {why}");
        }
        let cross_check = if settings.cross_check {
            let attached = cross_check::attach(&mut ebpf, &btf, |f| kernel.has_function(f));
            for (program, outcome) in &attached {
                match outcome {
                    Ok(event) => {
                        log::info!(target: LOADER_LOG, "cross-check: {program} on {event}")
                    }
                    Err(why) => log::info!(target: LOADER_LOG, "cross-check: {program}: {why}"),
                }
            }
            let maps = cross_check::CrossCheckMaps::take(&mut ebpf)
                .map_err(|e| LoadError::Object(e.to_string()))?;
            Some(CrossCheck { attached, maps })
        } else {
            None
        };
        if statuses.iter().all(|s| s.tier.is_none()) {
            let reasons = statuses
                .iter()
                .flat_map(|s| s.refused.first())
                .map(|r| format!("{}: {}", r.tier.name(), r.reason))
                .next()
                .unwrap_or_default();
            return Err(LoadError::NothingAttached(reasons));
        }
        Ok(Probes {
            ebpf: Some(ebpf),
            multi,
            maps,
            statuses,
            stats_fd,
            dispatch,
            tells_interrupts,
            waiting,
            understudies,
            cross_check,
            map_shapes,
        })
    }

    /// The probes' maps as the kernel created them, and this machine's possible CPUs: what
    /// they hold here and on a larger machine ([`MapMemory`]).
    pub fn map_memory(&self) -> MapMemory {
        let cpus = aya::util::nr_cpus().map_or(1, |cpus| cpus as u64);
        MapMemory::new(cpus, self.map_shapes.clone())
    }

    /// Whether the timed programs have understudies ([`crate::calibration::understudy`]), and why.
    pub fn understudies(&self) -> &UnderstudyChoice {
        &self.understudies
    }

    /// Each cross-check program's event (`system:event`), or why it has none; None when the
    /// cross-check was not asked for.
    pub fn cross_check_events(&self) -> Option<&cross_check::Attached> {
        self.cross_check.as_ref().map(|c| &c.attached)
    }

    /// Charges IOMMU work done outside any DMA API call by process `tgid` or its children (a
    /// userspace driver's VFIO mappings) to the PCI device `pci_address`, under that device's
    /// row, instead of to `unattributed`.
    pub fn charge_to_device(&mut self, tgid: u32, pci_address: &str) -> Result<(), SampleError> {
        self.maps.charge_to_device(tgid, pci_address)
    }

    /// The calibrated dispatch the probes take out of a call's self time, in ns.
    pub fn dispatch_ns(&self) -> Option<u64> {
        self.dispatch.as_ref().ok().map(|d| d.gap_ns)
    }

    /// The calibrated cost of a probed call to the call it is nested in, beyond its programs'
    /// runs, in ns.
    pub fn nested_dispatch_ns(&self) -> Option<u64> {
        let dispatch = self.dispatch.as_ref().ok()?;
        dispatch.nested_ns.as_ref().ok().copied()
    }

    /// What the probes' times hold that is not the calls' work, when waiting is not measured.
    pub fn waiting_caveat(&self) -> Option<String> {
        self.waiting.as_ref().err().map(|why| {
            format!("times include any time a task spent switched out inside a call (preempted, or asleep on a lock): the scheduler's switch could not be hooked ({why})")
        })
    }

    /// What the probes' self times could not take out, when the dispatch calibration failed.
    pub fn self_time_caveat(&self) -> Option<String> {
        let timed = self
            .statuses
            .iter()
            .any(|status| matches!(status.tier, Some(Tier::Fentry | Tier::Kprobe)));
        if !timed {
            return None;
        }
        match &self.dispatch {
            Err(why) => Some(format!(
                "self times still hold the kernel's dispatch around each nested probe (not calibrated: {why})"
            )),
            Ok(dispatch) => dispatch.nested_ns.as_ref().err().map(|why| {
                format!(
                    "self times may keep part of the trampoline's work around each nested probe (counted as two gaps: {why})"
                )
            }),
        }
    }

    /// Whether the programs find each CPU's preempt count: without it an interrupt that arrives
    /// while a task runs in user mode is taken for that task's work (`--pid`, process rows).
    pub fn tells_interrupts(&self) -> bool {
        self.tells_interrupts
    }

    /// What each point got: its tier, hooks, and why better tiers were refused.
    pub fn statuses(&self) -> &[PointStatus] {
        &self.statuses
    }

    /// Whether the kernel's BPF statistics are on (ours or someone else's).
    pub fn stats_enabled_by_us(&self) -> bool {
        self.stats_fd.is_some()
    }

    /// Reads every map once and sums the per-CPU values.
    pub fn sample(&self) -> Result<RawSample, SampleError> {
        let mut sample = self.maps.sample(self.ebpf(), &self.multi)?;
        if let Some(cross_check) = &self.cross_check {
            sample.kernel_events = cross_check
                .maps
                .read()
                .map_err(|e| SampleError::of("iommutop_kernel_events", e))?;
        }
        Ok(sample)
    }

    /// A recording's last sample, with the calls still open at its end that began after
    /// `first` was read: calls whose exits the kernel skipped, counted nowhere. A frame younger
    /// than [`OPEN_CALL_AGE_NS`] may be a call still running, and is left out.
    pub fn last_sample(&self, first: &RawSample) -> Result<RawSample, SampleError> {
        let mut last = self.sample()?;
        last.open_calls = self.maps.open_calls(
            first.monotonic_ns,
            last.monotonic_ns.saturating_sub(OPEN_CALL_AGE_NS),
        )?;
        Ok(last)
    }

    /// Gives back the rows of sources that can count no more ([`crate::maps::rows`]); once per sample,
    /// after it.
    pub fn give_back(
        &mut self,
        ended: &[crate::maps::rows::SourceId],
    ) -> Result<crate::maps::rows::GivenBack, SampleError> {
        self.maps.give_back(ended)
    }

    /// The sampled call paths so far, symbolized, heaviest (by summed latency) first.
    pub fn stack_samples(&self) -> Result<Vec<StackSample>, SampleError> {
        self.maps.stack_samples()
    }

    fn ebpf(&self) -> &Ebpf {
        self.ebpf
            .as_ref()
            .expect("the object lives until Probes is dropped")
    }
}

/// Every map of the loaded object as the kernel describes it (type, sizes and entries after the
/// loader set them, and the kernel's own count of its memory); a map it cannot describe is left
/// out, and logged.
fn map_shapes(ebpf: &Ebpf) -> Vec<MapShape> {
    ebpf.maps()
        .filter_map(|(name, map)| {
            let data = map_data(map);
            let info = data
                .info()
                .map_err(|e| log::info!(target: LOADER_LOG, "map `{name}`: no information: {e}"))
                .ok()?;
            let kind = info
                .map_type()
                .map_or(MapKind::Other(0), |t| MapKind::from_kernel(t as u32));
            let kernel_bytes =
                fdinfo::read(data.fd().as_fd()).and_then(|text| fdinfo::field(&text, "memlock"));
            Some(MapShape {
                name: name.to_string(),
                kind,
                key_size: info.key_size(),
                value_size: info.value_size(),
                max_entries: info.max_entries(),
                flags: info.map_flags(),
                kernel_bytes,
            })
        })
        .collect()
}

impl Probes {
    /// Detaches every program behind this process ([`super::detach`]): returns at once, and the
    /// kernel's waits happen in a detached grandchild that ends when they are over. Where no
    /// grandchild can be made, detaches here, as dropping does.
    ///
    /// Handed over, the probes are closed by descriptor and forgotten, not dropped: after the
    /// fork every page this process writes is copied, and freeing the loaded object (megabytes)
    /// cost seconds under emulation. Its memory is the process's until it exits.
    pub fn detach_behind(self) {
        let started = std::time::Instant::now();
        let lock = detach::lock_path();
        let probes = std::mem::ManuallyDrop::new(self);
        let close_all = |descriptors: &[std::os::fd::RawFd]| {
            for &fd in descriptors {
                // SAFETY: the BPF objects' descriptors, whose owners (the loaded object, the
                // maps' handles, the statistics' fd, all in `probes`) are never dropped now.
                unsafe { libc::close(fd) };
            }
        };
        match detach::hand_over(&lock, close_all) {
            Ok(pid) => log::info!(target: LOADER_LOG,
                "the probes detach behind, in process {pid} (handed over in {} ms)",
                started.elapsed().as_millis()
            ),
            Err(e) => {
                drop(std::mem::ManuallyDrop::into_inner(probes));
                log::info!(target: LOADER_LOG,
                    "the probes detached here, in {} ms: no process could take them over ({e})",
                    started.elapsed().as_millis()
                );
            }
        }
    }
}

impl Drop for Probes {
    /// Detaches every program and closes the maps, timed (-vv).
    fn drop(&mut self) {
        if let Some(ebpf) = self.ebpf.take() {
            let multi = std::mem::take(&mut self.multi);
            timed("every program", "detached", || drop((ebpf, multi)));
        }
    }
}
