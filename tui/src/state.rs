//! The application state, the actions that change it, and [`update`], the one function that
//! changes it. Nothing here knows about terminals or threads: the caller turns key presses,
//! samples and clock ticks into [`Action`]s and acts on the [`Effect`] returned.

use crate::columns::Column;
use crate::history::History;
use crate::rows;
use iommutop_model::facts::{DomainType, HostFacts, IommuVendor};
use iommutop_model::losses::Losses;
use iommutop_model::report::Tier;
use iommutop_model::sample::Op;
use iommutop_model::snapshot::{Device, Snapshot};
use serde_json::Value;
use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

/// Refresh intervals `+` and `-` step through.
pub const INTERVALS: [Duration; 7] = [
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(5),
    Duration::from_secs(10),
    Duration::from_secs(30),
];

/// Rows PageUp/PageDown move by.
const PAGE: usize = 10;

/// Snapshots kept while paused (older ones are dropped; the report has them all anyway).
const BACKLOG: usize = 120;

/// Workload notes kept for the workload pane.
const NOTES: usize = 4;

/// What the header says about the host.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostSummary {
    pub kernel: Option<String>,
    pub iommu_present: bool,
    pub vendor: Option<IommuVendor>,
    pub units: Vec<String>,
    pub default_domain_type: Option<String>,
    pub mode: Option<DomainType>,
    pub lab: bool,
    /// `--pid`/`--cgroup`: whose work alone is counted (`process 1234 (qemu)`).
    pub scope: Option<String>,
}

impl HostSummary {
    pub fn from_facts(facts: &HostFacts) -> HostSummary {
        HostSummary {
            kernel: facts.kernel_release.clone(),
            iommu_present: facts.iommu_present(),
            vendor: facts.iommu_vendor(),
            units: facts.iommu_units.iter().map(|u| u.name.clone()).collect(),
            default_domain_type: facts.default_domain_type(),
            mode: facts.dma_mode(),
            lab: facts.lab,
            scope: None,
        }
    }

    /// Says that only `filter`'s tasks are counted.
    pub fn with_scope(mut self, filter: Option<&iommutop_model::TaskFilter>) -> HostSummary {
        self.scope = filter.map(|f| f.describe());
        self
    }
}

/// The tier one probe point got, for the detail pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpProbe {
    pub op: Op,
    /// Logical point (`dma_map`, `block_complete`, ...).
    pub point: String,
    /// `None`: no tier attached.
    pub tier: Option<Tier>,
    /// Whether the tier measures latency (tracepoints only count).
    pub latency: bool,
}

/// A key press, independent of the terminal library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    /// A letter with Ctrl held.
    Ctrl(char),
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    Left,
    Right,
    Enter,
    Esc,
    Backspace,
    Tab,
    BackTab,
}

/// What a running profile's workload said.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadEvent {
    /// Its numbers for the interval under way (`{"transactions_per_s": ...}`).
    Live(Value),
    /// A line of progress.
    Note(String),
    /// It is stopping (cancelled by the user), restoring what it changed.
    Stopping,
    /// It ended: one line on how (results, or the error).
    Finished(String),
}

/// Everything that changes the state.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A new interval from the sampler.
    Sample(Box<Snapshot>),
    Key(Key),
    /// Time since the view started (drives the clock and the workload's progress).
    Tick(Duration),
    /// iommutop's own CPU use over the last interval, as a share of one CPU.
    ToolCpu(f64),
    Workload(WorkloadEvent),
    /// A line for the status bar (sampling failed, report written, ...).
    Status(String),
}

/// What the caller must do after an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    None,
    /// The user asked to quit.
    Quit,
    /// The sampler should sample at this interval from now on.
    SetInterval(Duration),
}

/// Where typed characters go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// Keys are commands.
    Normal,
    /// Keys edit the filter text.
    Filter,
}

/// The workload pane of a profile run.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadView {
    pub profile: String,
    pub workload: String,
    /// How long the workload is expected to run, if known.
    pub expected: Option<Duration>,
    pub live: Option<Value>,
    pub notes: VecDeque<String>,
    pub stopping: bool,
    pub finished: Option<String>,
    /// When it finished, as time since start.
    pub finished_at: Option<Duration>,
}

impl WorkloadView {
    pub fn new(profile: &str, workload: &str, expected: Option<Duration>) -> WorkloadView {
        WorkloadView {
            profile: profile.to_string(),
            workload: workload.to_string(),
            expected,
            live: None,
            notes: VecDeque::new(),
            stopping: false,
            finished: None,
            finished_at: None,
        }
    }
}

/// The whole state of the live view.
#[derive(Debug, Clone)]
pub struct State {
    pub(crate) host: HostSummary,
    pub(crate) probes: Vec<OpProbe>,
    /// The snapshot shown (frozen while paused).
    pub(crate) snapshot: Option<Snapshot>,
    pub(crate) history: History,
    /// Snapshots that arrived while paused, applied on resume.
    backlog: VecDeque<Box<Snapshot>>,
    pub(crate) sort: Column,
    pub(crate) descending: bool,
    pub(crate) filter: String,
    pub(crate) input: Input,
    /// The selected row, by key, so that it stays selected when rows move.
    pub(crate) selected: Option<String>,
    pub(crate) paused: bool,
    pub(crate) help: bool,
    pub(crate) detail: bool,
    pub(crate) interval: Duration,
    pub(crate) elapsed: Duration,
    pub(crate) samples: u64,
    pub(crate) tool_cpu: Option<f64>,
    pub(crate) workload: Option<WorkloadView>,
    pub(crate) status: Option<String>,
    /// `--device`: the one device whose rows the sampler keeps, as the header names it.
    pub(crate) device: Option<String>,
}

impl State {
    pub fn new(host: HostSummary, probes: Vec<OpProbe>, interval: Duration) -> State {
        State {
            host,
            probes,
            snapshot: None,
            history: History::default(),
            backlog: VecDeque::new(),
            sort: Column::MapsPerS,
            descending: true,
            filter: String::new(),
            input: Input::Normal,
            selected: None,
            paused: false,
            help: false,
            detail: true,
            interval,
            elapsed: Duration::ZERO,
            samples: 0,
            tool_cpu: None,
            workload: None,
            status: None,
            device: None,
        }
    }

    /// Adds the workload pane of a profile run.
    pub fn with_workload(mut self, workload: WorkloadView) -> State {
        self.workload = Some(workload);
        self
    }

    /// Starts sorted by `column`, in its usual direction (`top --sort`).
    pub fn with_sort(mut self, column: Column) -> State {
        self.set_sort(column);
        self
    }

    /// Starts with the filter set to `text`, as if typed after `/` (`top --filter`).
    /// The rows come from one device only (`top --device`): the header says which, so that an
    /// empty table is not read as an idle host.
    pub fn with_device(mut self, filter: Option<&iommutop_model::DeviceFilter>) -> State {
        self.device = filter.map(iommutop_model::DeviceFilter::label);
        self
    }

    pub fn with_filter(mut self, text: &str) -> State {
        self.filter = text.to_string();
        self.keep_selection_visible();
        self
    }

    /// The rows shown: filtered, then sorted.
    pub fn rows(&self) -> Vec<&Device> {
        let Some(snapshot) = &self.snapshot else {
            return Vec::new();
        };
        rows::shown(&snapshot.devices, self.sort, self.descending, &self.filter)
    }

    /// The selected row, if any row is shown.
    pub fn selected_device(&self) -> Option<&Device> {
        let rows = self.rows();
        let key = self.selected.as_deref()?;
        rows.into_iter().find(|d| d.key == key)
    }

    /// Index of the selected row among [`State::rows`].
    pub fn selected_index(&self) -> Option<usize> {
        let key = self.selected.as_deref()?;
        self.rows().iter().position(|d| d.key == key)
    }

    pub fn sort_column(&self) -> Column {
        self.sort
    }
    pub fn sort_descending(&self) -> bool {
        self.descending
    }
    pub fn filter(&self) -> &str {
        &self.filter
    }
    pub fn input(&self) -> Input {
        self.input
    }
    pub fn is_paused(&self) -> bool {
        self.paused
    }
    pub fn help_shown(&self) -> bool {
        self.help
    }
    pub fn interval(&self) -> Duration {
        self.interval
    }
    pub fn snapshot(&self) -> Option<&Snapshot> {
        self.snapshot.as_ref()
    }
    pub fn samples(&self) -> u64 {
        self.samples
    }
    pub fn workload(&self) -> Option<&WorkloadView> {
        self.workload.as_ref()
    }
    pub fn status(&self) -> Option<&str> {
        self.status.as_deref()
    }

    /// The probe points that serve `op`.
    pub fn probes_for(&self, op: Op) -> impl Iterator<Item = &OpProbe> {
        self.probes.iter().filter(move |p| p.op == op)
    }

    /// BPF run time per event over the shown interval, from the kernel's BPF statistics.
    pub fn bpf_ns_per_event(&self) -> Option<f64> {
        let snapshot = self.snapshot.as_ref()?;
        let run_time: u64 = snapshot
            .programs
            .values()
            .fold(0u64, |sum, p| sum.saturating_add(p.run_time_ns));
        (snapshot.events > 0 && run_time > 0).then(|| run_time as f64 / snapshot.events as f64)
    }

    /// What the probes did not see whole in the interval shown: calls no program saw, and the
    /// calls counted but untimed. `None` before the first sample.
    pub fn losses(&self) -> Option<Losses> {
        let timed: BTreeSet<Op> = self
            .probes
            .iter()
            .filter(|p| p.tier.is_some() && p.latency)
            .map(|p| p.op)
            .collect();
        let snapshot = self.snapshot.as_ref()?;
        Some(Losses::of_timed(snapshot, &timed))
    }

    fn show(&mut self, snapshot: Box<Snapshot>) {
        self.history.record(&snapshot);
        self.snapshot = Some(*snapshot);
        self.samples += 1;
        self.keep_selection_visible();
    }

    /// Selects the first row when the selected one is gone (filtered out, vanished).
    fn keep_selection_visible(&mut self) {
        let rows = self.rows();
        let present = self
            .selected
            .as_deref()
            .is_some_and(|key| rows.iter().any(|d| d.key == key));
        if !present {
            self.selected = rows.first().map(|d| d.key.to_string());
        }
    }

    /// Moves the selection by `delta` rows, clamped to the table.
    fn move_selection(&mut self, delta: isize) {
        let rows = self.rows();
        if rows.is_empty() {
            return;
        }
        let current = self
            .selected
            .as_deref()
            .and_then(|key| rows.iter().position(|d| d.key == key))
            .unwrap_or(0);
        let last = rows.len() - 1;
        let target = current.saturating_add_signed(delta).min(last);
        self.selected = Some(rows[target].key.to_string());
    }

    fn select_edge(&mut self, last: bool) {
        let rows = self.rows();
        let row = if last { rows.last() } else { rows.first() };
        self.selected = row.map(|d| d.key.to_string());
    }

    fn set_sort(&mut self, column: Column) {
        self.sort = column;
        self.descending = column.descending_by_default();
    }

    /// The next longer (or shorter) of [`INTERVALS`]; none past the ends.
    fn step_interval(&mut self, longer: bool) -> Effect {
        let current = self.interval;
        let next = if longer {
            INTERVALS.iter().copied().find(|&i| i > current)
        } else {
            INTERVALS.iter().copied().rev().find(|&i| i < current)
        };
        match next {
            Some(next) => {
                self.interval = next;
                Effect::SetInterval(next)
            }
            None => Effect::None,
        }
    }

    fn toggle_pause(&mut self) {
        self.paused = !self.paused;
        if !self.paused {
            while let Some(snapshot) = self.backlog.pop_front() {
                self.show(snapshot);
            }
        }
    }
}

/// Applies one action.
pub fn update(state: &mut State, action: Action) -> Effect {
    match action {
        Action::Sample(snapshot) => {
            if state.paused {
                if state.backlog.len() == BACKLOG {
                    state.backlog.pop_front();
                }
                state.backlog.push_back(snapshot);
            } else {
                state.show(snapshot);
            }
            Effect::None
        }
        Action::Key(key) => key_pressed(state, key),
        Action::Tick(elapsed) => {
            state.elapsed = elapsed;
            Effect::None
        }
        Action::ToolCpu(share) => {
            state.tool_cpu = share.is_finite().then_some(share);
            Effect::None
        }
        Action::Workload(event) => {
            if let Some(view) = state.workload.as_mut() {
                match event {
                    WorkloadEvent::Live(numbers) => view.live = Some(numbers),
                    WorkloadEvent::Note(line) => {
                        if view.notes.len() == NOTES {
                            view.notes.pop_front();
                        }
                        view.notes.push_back(line);
                    }
                    WorkloadEvent::Stopping => view.stopping = true,
                    WorkloadEvent::Finished(line) => {
                        view.finished = Some(line);
                        view.finished_at = Some(state.elapsed);
                    }
                }
            }
            Effect::None
        }
        Action::Status(line) => {
            state.status = Some(line);
            Effect::None
        }
    }
}

fn key_pressed(state: &mut State, key: Key) -> Effect {
    if key == Key::Ctrl('c') {
        return Effect::Quit;
    }
    if state.help {
        if matches!(
            key,
            Key::Esc | Key::Enter | Key::Char('?') | Key::Char('q') | Key::Char('h')
        ) {
            state.help = false;
        }
        return Effect::None;
    }
    match state.input {
        Input::Filter => filter_key(state, key),
        Input::Normal => normal_key(state, key),
    }
}

fn filter_key(state: &mut State, key: Key) -> Effect {
    match key {
        Key::Enter => state.input = Input::Normal,
        Key::Esc => {
            state.filter.clear();
            state.input = Input::Normal;
        }
        Key::Backspace => {
            state.filter.pop();
        }
        Key::Ctrl('u') => state.filter.clear(),
        Key::Char(c) if !c.is_control() => state.filter.push(c),
        Key::Up => state.move_selection(-1),
        Key::Down => state.move_selection(1),
        _ => return Effect::None,
    }
    state.keep_selection_visible();
    Effect::None
}

fn normal_key(state: &mut State, key: Key) -> Effect {
    match key {
        Key::Char('q') => return Effect::Quit,
        Key::Char('?') | Key::Char('h') => state.help = true,
        Key::Up | Key::Char('k') => state.move_selection(-1),
        Key::Down | Key::Char('j') => state.move_selection(1),
        Key::PageUp => state.move_selection(-(PAGE as isize)),
        Key::PageDown => state.move_selection(PAGE as isize),
        Key::Home | Key::Char('g') => state.select_edge(false),
        Key::End | Key::Char('G') => state.select_edge(true),
        Key::Char('s') | Key::Char('>') | Key::Right | Key::Tab => {
            state.set_sort(state.sort.next())
        }
        Key::Char('S') | Key::Char('<') | Key::Left | Key::BackTab => {
            state.set_sort(state.sort.previous())
        }
        Key::Char('r') => state.descending = !state.descending,
        Key::Char('/') => state.input = Input::Filter,
        Key::Esc => state.filter.clear(),
        Key::Char('p') | Key::Char(' ') => state.toggle_pause(),
        Key::Char('d') => state.detail = !state.detail,
        Key::Char('+') | Key::Char('=') => return state.step_interval(true),
        Key::Char('-') | Key::Char('_') => return state.step_interval(false),
        _ => return Effect::None,
    }
    state.keep_selection_visible();
    Effect::None
}

#[cfg(test)]
mod tests;
