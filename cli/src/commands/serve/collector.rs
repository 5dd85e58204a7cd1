//! The one owner of the probes and the totals: a thread that attaches once, then answers scrape
//! requests. Each request reads the BPF maps once (scrapes closer together than
//! [`FRESH_FOR`] share one read), adds the interval to the totals and encodes them; the HTTP
//! side only passes text along. When every request sender is gone the thread ends and dropping
//! the probes detaches them.

use super::encode::{render, Exposition, HostLabels, PointTier};
use super::totals::Totals;
use crate::exit::{Failure, Outcome};
use crate::probes::{load_failure, PointSelection, ProbeSettings, Probes};
use crate::sysinfo;
use anyhow::{anyhow, Context};
use iommutop_model::facts::HostFacts;
use iommutop_model::sample::RawSample;
use iommutop_model::snapshot::Snapshot;
use iommutop_model::{DeviceFilter, TaskFilter};
use std::path::Path;
use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// Scrapes within this long of the last map read get its text again (several Prometheus
/// servers scraping one host cost one read).
const FRESH_FOR: Duration = Duration::from_millis(200);

/// Drivers, groups and domain types are read from sysfs again this often, so that hotplugged
/// and rebound devices get their labels.
const FACTS_REFRESH: Duration = Duration::from_secs(10);

/// Scrape requests waiting for the collector; more wait in the HTTP server.
const QUEUE: usize = 16;

/// A scrape's answer: the text, or why the maps could not be read.
pub type Scraped = Result<String, String>;

/// How the HTTP side asks for a scrape.
#[derive(Clone)]
pub struct ScrapeRequests(mpsc::Sender<oneshot::Sender<Scraped>>);

impl ScrapeRequests {
    /// The current metrics, or `None` when the collector has ended.
    pub async fn scrape(&self) -> Option<Scraped> {
        let (reply, answer) = oneshot::channel();
        self.0.send(reply).await.ok()?;
        answer.await.ok()
    }

    pub fn collector_alive(&self) -> bool {
        !self.0.is_closed()
    }
}

/// What the probes got at start: how many points attached, and what their times hold that is
/// not the calls' work (waiting, when the scheduler's switch could not be hooked).
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
) -> Outcome<(ScrapeRequests, JoinHandle<()>, Attached)> {
    let (requests, inbox) = mpsc::channel(QUEUE);
    let (ready_tx, ready) = std_mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("iommutop-collector".into())
        .spawn(
            move || match Collector::attach(&points, device_filter, task_filter.as_ref()) {
                Ok(collector) => {
                    let _ = ready_tx.send(Ok(collector.attached()));
                    collector.serve(inbox);
                }
                Err(failure) => {
                    let _ = ready_tx.send(Err(failure));
                }
            },
        )
        .context("starting the collector thread")?;
    match ready.recv() {
        Ok(Ok(attached)) => Ok((ScrapeRequests(requests), handle, attached)),
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
}

impl Collector {
    fn attach(
        points: &PointSelection,
        device_filter: Option<DeviceFilter>,
        task_filter: Option<&TaskFilter>,
    ) -> Outcome<Collector> {
        let facts = host_facts()?;
        let settings = ProbeSettings::from_env().map_err(load_failure)?;
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
        })
    }

    fn attached(&self) -> Attached {
        Attached {
            points: self.points.iter().filter(|p| p.tier.is_some()).count(),
            caveats: self.probes.waiting_caveat().into_iter().collect(),
        }
    }

    fn serve(mut self, mut inbox: mpsc::Receiver<oneshot::Sender<Scraped>>) {
        while let Some(reply) = inbox.blocking_recv() {
            let _ = reply.send(self.scrape());
        }
    }

    fn scrape(&mut self) -> Scraped {
        if let Some((at, text)) = &self.last {
            if at.elapsed() < FRESH_FOR {
                return Ok(text.clone());
            }
        }
        self.refresh_facts();
        match self.probes.sample() {
            Ok(current) => {
                let mut snapshot = Snapshot::between(&self.previous, &current, &self.facts.devices);
                if let Some(filter) = &self.device_filter {
                    filter.apply_to_snapshot(&mut snapshot);
                }
                self.totals.add(&snapshot);
                self.previous = current;
            }
            Err(error) => {
                self.sample_errors += 1;
                log::warn!("reading the BPF maps: {error}");
            }
        }
        let text = render(&Exposition {
            totals: &self.totals,
            host: &self.host,
            points: &self.points,
            cpus: self.cpus,
            sample_errors: self.sample_errors,
        })
        .map_err(|e| e.to_string())?;
        self.last = Some((Instant::now(), text.clone()));
        Ok(text)
    }

    fn refresh_facts(&mut self) {
        if self.facts_read.elapsed() < FACTS_REFRESH {
            return;
        }
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

fn host_facts() -> Outcome<HostFacts> {
    Ok(sysinfo::collect(Path::new("/")).context("reading system facts from /proc and /sys")?)
}

fn online_cpus() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u64::try_from(cpus).unwrap_or(1).max(1)
}
