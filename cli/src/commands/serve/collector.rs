//! The one owner of the probes and the totals: a thread that attaches once, then answers scrape
//! requests. Each request reads the BPF maps once (scrapes closer together than
//! [`FRESH_FOR`] share one read), adds the interval to the totals and encodes them; the HTTP
//! side only passes text along. A device's change (a driver bound or unbound, a device added or
//! removed, a NIC renamed: the kernel's uevents) is a request too: the counts so far go to the
//! labels they were made under, and the device's series move to its new labels at once. When
//! every scrape request sender is gone the thread ends and dropping the probes detaches them.

use super::encode::{render, EncodeError, Exposition, HostLabels, PointTier, RowUse};
use super::totals::Totals;
use super::uevents::{DeviceChange, Uevents};
use crate::cli::NetdevScope;
use crate::exit::load_failure;
use crate::exit::{Failure, Outcome};
use anyhow::{anyhow, Context};
use iommutop_host::sysfs::link_name;
use iommutop_loader::sysinfo;
use iommutop_loader::{
    ended_sources, HostNow, PointSelection, ProbeSettings, Probes, SourceId, SysfsHost,
};
use iommutop_model::facts::HostFacts;
use iommutop_model::sample::{RawSample, SourceKind};
use iommutop_model::snapshot::{RowKey, Snapshot};
use iommutop_model::{DeviceFilter, TaskFilter};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// Scrapes within this long of the last map read get its text again (several Prometheus
/// servers scraping one host cost one read).
const FRESH_FOR: Duration = Duration::from_millis(200);

/// Drivers, groups and domain types are read from sysfs again this often, whatever the uevents
/// said (a change of domain type or a rename the uevents do not announce, a burst the socket
/// dropped).
const FACTS_REFRESH: Duration = Duration::from_secs(10);

/// Scrape requests waiting for the collector; more wait in the HTTP server.
const QUEUE: usize = 16;

/// A scrape's answer: the text, or why it could not be written.
pub type Scraped = Result<String, EncodeError>;

/// What the collector is asked to do.
enum Request {
    Scrape(oneshot::Sender<Scraped>),
    DeviceChanged(DeviceChange),
}

/// How the HTTP side asks for a scrape.
#[derive(Clone)]
pub struct ScrapeRequests(mpsc::Sender<Request>);

impl ScrapeRequests {
    /// The current metrics, or `None` when the collector has ended.
    pub async fn scrape(&self) -> Option<Scraped> {
        let (reply, answer) = oneshot::channel();
        self.0.send(Request::Scrape(reply)).await.ok()?;
        answer.await.ok()
    }

    pub fn collector_alive(&self) -> bool {
        !self.0.is_closed()
    }
}

/// What the probes got at start: how many points attached, and what their times hold that is
/// not the calls' work (waiting, when the scheduler's switch could not be hooked), or what
/// else `serve` could not do (hear the kernel's device events).
pub struct Attached {
    pub points: usize,
    pub caveats: Vec<String>,
}

/// Attaches the probes on a thread of their own; returns once they are attached (or failed to).
/// With `device_filter` (`--device`), only its rows become series; with `task_filter`
/// (`--pid`/`--cgroup`), only those tasks' task-context work is counted.
pub fn start(
    points: PointSelection,
    device_filter: Option<DeviceFilter>,
    task_filter: Option<TaskFilter>,
    netdevs: NetdevScope,
) -> Outcome<(ScrapeRequests, JoinHandle<()>, Attached)> {
    let (requests, inbox) = mpsc::channel(QUEUE);
    let (ready_tx, ready) = std_mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("iommutop-collector".into())
        .spawn(move || {
            match Collector::attach(&points, device_filter, task_filter.as_ref(), netdevs) {
                Ok(collector) => {
                    let _ = ready_tx.send(Ok(collector.attached()));
                    collector.serve(inbox);
                }
                Err(failure) => {
                    let _ = ready_tx.send(Err(failure));
                }
            }
        })
        .context("starting the collector thread")?;
    match ready.recv() {
        Ok(Ok(mut attached)) => {
            if let Err(e) = forward_device_changes(requests.downgrade()) {
                attached.caveats.push(format!(
                    "the kernel's device events cannot be read ({e}): a rebound or hotplugged \
                     device's series get its new labels within {} s, and counts made meanwhile \
                     may go to its old ones",
                    FACTS_REFRESH.as_secs()
                ));
            }
            Ok((ScrapeRequests(requests), handle, attached))
        }
        Ok(Err(failure)) => {
            let _ = handle.join();
            Err(failure)
        }
        Err(_) => {
            let _ = handle.join();
            Err(Failure::from(anyhow!(
                "the collector thread ended while attaching the probes"
            )))
        }
    }
}

/// Passes the kernel's device changes to the collector from a thread of their own, holding the
/// request channel weakly: it ends (at its next event) once the collector has, and never keeps
/// the collector alive.
fn forward_device_changes(requests: mpsc::WeakSender<Request>) -> std::io::Result<()> {
    let uevents = Uevents::open()?;
    std::thread::Builder::new()
        .name("iommutop-uevents".into())
        .spawn(move || loop {
            let change = match uevents.next_change() {
                Ok(change) => change,
                Err(error) => {
                    log::warn!("reading the kernel's device events: {error}");
                    return;
                }
            };
            let Some(requests) = requests.upgrade() else {
                return;
            };
            if requests
                .blocking_send(Request::DeviceChanged(change))
                .is_err()
            {
                return;
            }
        })?;
    Ok(())
}

struct Collector {
    probes: Probes,
    facts: HostFacts,
    facts_read: Instant,
    host: HostLabels,
    points: Vec<PointTier>,
    cpus: u64,
    previous: RawSample,
    totals: Totals,
    sample_errors: u64,
    last: Option<(Instant, String)>,
    device_filter: Option<DeviceFilter>,
    /// Disks that counted and that no device owned at the last read of the facts.
    unowned_disks: BTreeSet<SourceId>,
    rows: RowUse,
}

impl Collector {
    fn attach(
        points: &PointSelection,
        device_filter: Option<DeviceFilter>,
        task_filter: Option<&TaskFilter>,
        netdevs: NetdevScope,
    ) -> Outcome<Collector> {
        let facts = host_facts()?;
        let mut settings = ProbeSettings::from_env().map_err(load_failure)?;
        settings.virtual_netdevs = netdevs == NetdevScope::All;
        let probes = Probes::attach(&settings, true, points, task_filter).map_err(load_failure)?;
        let points = probes
            .statuses()
            .iter()
            .map(|status| PointTier {
                point: status.point,
                tier: status.tier.map(|tier| tier.name()),
            })
            .collect();
        Ok(Collector {
            probes,
            host: HostLabels::from_facts(&facts),
            facts,
            facts_read: Instant::now(),
            points,
            cpus: online_cpus(),
            // Counting starts at the attach: the first scrape shows everything since.
            previous: RawSample::default(),
            totals: Totals::default(),
            sample_errors: 0,
            last: None,
            device_filter,
            unowned_disks: BTreeSet::new(),
            rows: RowUse::default(),
        })
    }

    fn attached(&self) -> Attached {
        Attached {
            points: self.points.iter().filter(|p| p.tier.is_some()).count(),
            caveats: self.probes.waiting_caveat().into_iter().collect(),
        }
    }

    fn serve(mut self, mut inbox: mpsc::Receiver<Request>) {
        while let Some(request) = inbox.blocking_recv() {
            match request {
                Request::Scrape(reply) => {
                    let _ = reply.send(self.scrape());
                }
                Request::DeviceChanged(change) => self.device_changed(&change),
            }
        }
    }

    fn scrape(&mut self) -> Scraped {
        if let Some((at, text)) = &self.last {
            if at.elapsed() < FRESH_FOR {
                return Ok(text.clone());
            }
        }
        if self.facts_read.elapsed() >= FACTS_REFRESH || self.a_driver_arrived() {
            self.read_facts();
        }
        // The text is as fresh as the maps' read, not as its rendering's end: rendering a scrape
        // takes long enough under emulation that a reuse timed from its end handed out stale
        // reads (docs/measurements.md, "Figures the code's choices rest on").
        let read_at = Instant::now();
        self.collect();
        let text = render(&Exposition {
            totals: &self.totals,
            host: &self.host,
            points: &self.points,
            cpus: self.cpus,
            sample_errors: self.sample_errors,
            rows: self.rows,
        })?;
        let host = SysfsHost {
            root: "/".into(),
            devices: &self.facts.devices,
        };
        self.totals
            .end_series_of_gone(|device| device_still_there(device, &host));
        self.last = Some((read_at, text.clone()));
        Ok(text)
    }

    /// A device's labels change: the counts made under the old ones are added to their series
    /// first (a driver leaving, a device going), or the new ones are read first (a driver that
    /// arrived mapped under its own name before the kernel said so). The next scrape reads anew.
    fn device_changed(&mut self, change: &DeviceChange) {
        log::debug!("device change: {change:?}");
        if change.change.ends_labels() {
            self.collect();
            self.read_facts();
        } else {
            self.read_facts();
            self.collect();
        }
        self.last = None;
    }

    /// Reads the maps and adds what changed since the last read to the totals: a device's DMA
    /// work under the driver the kernel counted it under, the rest under the devices' labels as
    /// read from sysfs (read again first when a disk no device owned appeared: a controller
    /// bound to its driver again). Then gives back the rows of sources that can count no more.
    fn collect(&mut self) {
        let current = match self.probes.sample() {
            Ok(current) => current,
            Err(error) => {
                self.sample_errors += 1;
                log::warn!("reading the BPF maps: {error}");
                return;
            }
        };
        if self.disk_appeared(&current) {
            self.read_facts();
            self.unowned_disks = self.unowned_disks_of(&current);
        }
        let mut snapshot =
            Snapshot::between_by_binding(&self.previous, &current, &self.facts.devices);
        if let Some(filter) = &self.device_filter {
            filter.apply_to_snapshot(&mut snapshot);
        }
        self.totals.add(&snapshot);
        let host = SysfsHost {
            root: "/".into(),
            devices: &self.facts.devices,
        };
        let ended = ended_sources(&self.previous, &current, &host);
        let mut freed = 0;
        match self.probes.give_back(&ended) {
            Ok(given) => {
                freed = given.freed.len();
                if !given.retired.is_empty() || !given.freed.is_empty() {
                    log::debug!(
                        "rows retired: {:?}; freed: {:?}",
                        given.retired,
                        given.freed
                    );
                }
                self.rows.given_back += freed as u64;
            }
            Err(error) => log::warn!("giving statistics rows back: {error}"),
        }
        self.rows.in_use = current.sources.len().saturating_sub(freed) as u64;
        self.previous = current;
    }

    /// Whether `sample` has a disk no device of the facts owns that was not there at the last
    /// read of them: a disk that appeared since (a device rebound to its driver again scans its
    /// namespaces; a disk of the same name is a new source, with a new sequence number). One
    /// that stays unowned (a loop device) costs one read.
    fn disk_appeared(&self, sample: &RawSample) -> bool {
        !self.unowned_disks_of(sample).is_subset(&self.unowned_disks)
    }

    fn unowned_disks_of(&self, sample: &RawSample) -> BTreeSet<SourceId> {
        sample
            .sources
            .iter()
            .filter(|source| source.kind == SourceKind::Disk && !source.name.is_empty())
            .filter(|source| !self.facts.devices.iter().any(|d| d.owns_name(&source.name)))
            .map(SourceId::of)
            .collect()
    }

    /// Whether a PCI function now has a driver other than the one last read. The kernel links
    /// the driver in sysfs before its probe runs, and announces the binding only after: a scrape
    /// between the two must count the probe's maps (an NVMe's identify, its namespace scan,
    /// the first reads) under the new driver. A driver leaving is the unbind uevent's: during
    /// its teardown the link is already gone, and those maps are still the old driver's.
    fn a_driver_arrived(&self) -> bool {
        self.facts.devices.iter().any(|device| {
            let link = format!("/sys/bus/pci/devices/{}/driver", device.pci_address);
            link_name(Path::new(&link)).is_some_and(|driver| Some(driver) != device.driver)
        })
    }

    fn read_facts(&mut self) {
        match host_facts() {
            Ok(facts) => {
                self.host = HostLabels::from_facts(&facts);
                self.facts = facts;
            }
            Err(failure) => log::warn!("{failure}"),
        }
        self.facts_read = Instant::now();
    }
}

/// Whether the device a series' `device` label names is still on the host: a PCI function the
/// facts list, a process alive, a disk or netdev present, a device on a bus; the deferred and
/// unattributed rows always are. The same view of the host that ends the probes' rows.
fn device_still_there(device: &str, host: &SysfsHost) -> bool {
    match RowKey::parse(device) {
        RowKey::Pci(address) => host.devices().iter().any(|d| d.pci_address == address),
        RowKey::Process { pid, .. } => host.process_alive(pid),
        RowKey::Named(name) => {
            let on_a_bus = || {
                std::fs::read_dir(host.root.join("sys/bus")).is_ok_and(|buses| {
                    buses
                        .flatten()
                        .any(|bus| bus.path().join("devices").join(&name).exists())
                })
            };
            host.has_netdev(&name) || host.has_disk(&name) || on_a_bus()
        }
        RowKey::Deferred { .. } | RowKey::Unattributed { .. } | RowKey::Unnamed { .. } => true,
    }
}

fn host_facts() -> Outcome<HostFacts> {
    Ok(sysinfo::collect(Path::new("/")).context("reading system facts from /proc and /sys")?)
}

fn online_cpus() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u64::try_from(cpus).unwrap_or(1).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iommutop_model::facts::DeviceFacts;

    #[test]
    fn a_series_device_is_there_while_the_host_shows_it() {
        let root =
            std::env::temp_dir().join(format!("iommutop-still-there-{}", std::process::id()));
        for dir in [
            "proc/227",
            "sys/class/net/veth7",
            "sys/block/loop0",
            "sys/bus/platform/devices/ff8000.dma",
        ] {
            std::fs::create_dir_all(root.join(dir)).expect("fixture");
        }
        let facts = HostFacts {
            devices: vec![DeviceFacts {
                pci_address: "0000:00:04.0".parse().expect("address"),
                ..DeviceFacts::default()
            }],
            ..HostFacts::default()
        };
        let host = SysfsHost {
            root: root.clone(),
            devices: &facts.devices,
        };
        let there = |device: &str| device_still_there(device, &host);
        for device in [
            "0000:00:04.0",
            "unattributed:sh[227]",
            "veth7",
            "loop0",
            "ff8000.dma",
            "deferred",
            "unattributed",
        ] {
            assert!(there(device), "{device}");
        }
        for device in ["0000:00:05.0", "unattributed:sh[228]", "veth8", "nvme0n1"] {
            assert!(!there(device), "{device}");
        }
        std::fs::remove_dir_all(&root).expect("cleanup");
    }
}
