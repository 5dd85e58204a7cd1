//! The application state, the actions that change it, and [`update`], the one function that
//! changes it. Nothing here knows about terminals or threads: the caller turns key presses,
//! samples and clock ticks into [`Action`]s and acts on the [`Effect`] returned.

use crate::columns::Column;
use crate::history::History;
use crate::rows;
use iommutop_model::facts::{DmaMode, HostFacts, IommuVendor};
use iommutop_model::report::Tier;
use iommutop_model::sample::Op;
use iommutop_model::snapshot::{Device, Snapshot};
use serde_json::Value;
use std::collections::VecDeque;
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
    pub mode: Option<DmaMode>,
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

    /// Calls the probes saw at one end only or could not track over the shown interval (the
    /// health counters that change what the numbers mean; sampled call paths excepted).
    pub fn health_events(&self) -> u64 {
        self.snapshot.as_ref().map_or(0, |snapshot| {
            snapshot
                .health
                .iter()
                .filter(|(name, _)| name.as_str() != "stack_lost")
                .fold(0u64, |sum, (_, &n)| sum.saturating_add(n))
        })
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
            self.selected = rows.first().map(|d| d.key.clone());
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
        self.selected = Some(rows[target].key.clone());
    }

    fn select_edge(&mut self, last: bool) {
        let rows = self.rows();
        let row = if last { rows.last() } else { rows.first() };
        self.selected = row.map(|d| d.key.clone());
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
mod tests {
    use super::*;
    use iommutop_model::snapshot::OpStats;
    use iommutop_model::RowKind;

    fn device(key: &str, driver: &str, maps_per_s: f64, cpu: Option<f64>) -> Device {
        let mut ops = std::collections::BTreeMap::new();
        ops.insert(
            Op::DmaMap,
            OpStats {
                count: maps_per_s as u64,
                rate_per_s: maps_per_s,
                ..OpStats::default()
            },
        );
        Device {
            key: key.to_string(),
            kind: RowKind::Pci,
            pci_address: Some(key.to_string()),
            driver: Some(driver.to_string()),
            names: vec![format!("{driver}0")],
            iommu_group: None,
            domain_type: Some("DMA-FQ".into()),
            iommu_unit: None,
            ops,
            completions: 0,
            derived: iommutop_model::Derived {
                cpu_share: cpu,
                ..Default::default()
            },
            pid: None,
        }
    }

    fn snapshot(at_s: u64, devices: Vec<Device>) -> Box<Snapshot> {
        Box::new(Snapshot {
            monotonic_ns: at_s * 1_000_000_000,
            interval_ns: 1_000_000_000,
            devices,
            ..Snapshot::default()
        })
    }

    fn three_devices(at_s: u64) -> Box<Snapshot> {
        snapshot(
            at_s,
            vec![
                device("0000:00:04.0", "nvme", 500.0, Some(0.02)),
                device("0000:00:05.0", "e1000e", 2_000.0, None),
                device("0000:00:06.0", "e1000e", 100.0, Some(0.05)),
            ],
        )
    }

    fn state() -> State {
        State::new(HostSummary::default(), vec![], Duration::from_secs(1))
    }

    fn keys(state: &mut State, keys: &[Key]) {
        for &k in keys {
            update(state, Action::Key(k));
        }
    }

    fn shown_keys(state: &State) -> Vec<String> {
        state.rows().iter().map(|d| d.key.clone()).collect()
    }

    #[test]
    fn rows_sort_by_maps_per_second_first_and_select_the_top_one() {
        let mut s = state();
        update(&mut s, Action::Sample(three_devices(1)));
        assert_eq!(
            shown_keys(&s),
            ["0000:00:05.0", "0000:00:04.0", "0000:00:06.0"]
        );
        assert_eq!(s.selected.as_deref(), Some("0000:00:05.0"));
    }

    #[test]
    fn sorting_cycles_columns_reverses_and_puts_unmeasured_last() {
        let mut s = state();
        update(&mut s, Action::Sample(three_devices(1)));
        keys(&mut s, &[Key::Char('S')]); // the column before MAPS/s
        assert_eq!(s.sort, Column::Domain);
        s.set_sort(Column::Cpu);
        assert_eq!(
            shown_keys(&s),
            ["0000:00:06.0", "0000:00:04.0", "0000:00:05.0"]
        );
        keys(&mut s, &[Key::Char('r')]);
        // Ascending now, and the unmeasured row still last.
        assert_eq!(
            shown_keys(&s),
            ["0000:00:04.0", "0000:00:06.0", "0000:00:05.0"]
        );
        keys(&mut s, &[Key::Char('s')]);
        assert_eq!(s.sort, Column::Device);
        assert!(!s.descending, "text sorts A to Z first");
        assert_eq!(
            shown_keys(&s),
            ["0000:00:04.0", "0000:00:05.0", "0000:00:06.0"]
        );
    }

    #[test]
    fn filtering_matches_key_driver_and_names_and_esc_clears_it() {
        let mut s = state();
        update(&mut s, Action::Sample(three_devices(1)));
        keys(
            &mut s,
            &[Key::Char('/'), Key::Char('N'), Key::Char('v'), Key::Enter],
        );
        assert_eq!(s.filter, "Nv");
        assert_eq!(shown_keys(&s), ["0000:00:04.0"]);
        assert_eq!(s.selected.as_deref(), Some("0000:00:04.0"));
        // In normal mode again: 'q' would quit, not type.
        assert_eq!(update(&mut s, Action::Key(Key::Char('/'))), Effect::None);
        keys(
            &mut s,
            &[
                Key::Backspace,
                Key::Backspace,
                Key::Char('0'),
                Key::Char('6'),
            ],
        );
        assert_eq!(shown_keys(&s), ["0000:00:06.0"]);
        keys(&mut s, &[Key::Esc]);
        assert_eq!(s.filter, "");
        assert_eq!(s.input, Input::Normal);
        assert_eq!(shown_keys(&s).len(), 3);
    }

    #[test]
    fn a_view_started_sorted_and_filtered_shows_only_matching_rows_in_that_order() {
        let mut s = state().with_sort(Column::Cpu).with_filter("E1000");
        assert_eq!(s.sort_column(), Column::Cpu);
        assert!(s.sort_descending());
        assert_eq!(s.filter(), "E1000");
        assert_eq!(
            s.input(),
            Input::Normal,
            "keys are commands, not filter text"
        );
        update(&mut s, Action::Sample(three_devices(1)));
        assert_eq!(shown_keys(&s), ["0000:00:06.0", "0000:00:05.0"]);
        assert_eq!(s.selected.as_deref(), Some("0000:00:06.0"));
        // The start-up filter is an ordinary one: Esc clears it.
        keys(&mut s, &[Key::Esc]);
        assert_eq!(shown_keys(&s).len(), 3);
    }

    #[test]
    fn a_text_column_given_at_start_up_sorts_a_to_z() {
        let mut s = state().with_sort(Column::Device);
        update(&mut s, Action::Sample(three_devices(1)));
        assert!(!s.sort_descending());
        assert_eq!(
            shown_keys(&s),
            ["0000:00:04.0", "0000:00:05.0", "0000:00:06.0"]
        );
    }

    #[test]
    fn typing_q_in_the_filter_does_not_quit() {
        let mut s = state();
        keys(&mut s, &[Key::Char('/')]);
        assert_eq!(update(&mut s, Action::Key(Key::Char('q'))), Effect::None);
        assert_eq!(s.filter, "q");
        assert_eq!(update(&mut s, Action::Key(Key::Ctrl('c'))), Effect::Quit);
    }

    #[test]
    fn selection_moves_clamps_and_follows_its_row_across_resorts() {
        let mut s = state();
        update(&mut s, Action::Sample(three_devices(1)));
        keys(&mut s, &[Key::Down]);
        assert_eq!(s.selected.as_deref(), Some("0000:00:04.0"));
        keys(&mut s, &[Key::Down, Key::Down, Key::Down]);
        assert_eq!(s.selected.as_deref(), Some("0000:00:06.0"));
        keys(&mut s, &[Key::Home]);
        assert_eq!(s.selected_index(), Some(0));
        keys(&mut s, &[Key::End, Key::PageUp]);
        assert_eq!(s.selected_index(), Some(0));
        keys(&mut s, &[Key::Down]);
        // The NVMe is selected; a new sample reorders rows, the selection stays on it.
        let mut reordered = three_devices(2);
        reordered.devices[0] = device("0000:00:04.0", "nvme", 9_000.0, None);
        update(&mut s, Action::Sample(reordered));
        assert_eq!(s.selected.as_deref(), Some("0000:00:04.0"));
        assert_eq!(s.selected_index(), Some(0));
    }

    #[test]
    fn a_vanished_selection_falls_back_to_the_first_row() {
        let mut s = state();
        update(&mut s, Action::Sample(three_devices(1)));
        keys(&mut s, &[Key::End]);
        update(
            &mut s,
            Action::Sample(snapshot(2, vec![device("0000:00:04.0", "nvme", 1.0, None)])),
        );
        assert_eq!(s.selected.as_deref(), Some("0000:00:04.0"));
    }

    #[test]
    fn pause_freezes_the_view_and_resume_catches_up_without_losing_history() {
        let mut s = state();
        update(&mut s, Action::Sample(three_devices(1)));
        keys(&mut s, &[Key::Char('p')]);
        assert!(s.is_paused());
        update(&mut s, Action::Sample(three_devices(2)));
        update(&mut s, Action::Sample(three_devices(3)));
        assert_eq!(s.snapshot().map(|x| x.monotonic_ns), Some(1_000_000_000));
        assert_eq!(s.samples(), 1);
        keys(&mut s, &[Key::Char(' ')]);
        assert!(!s.is_paused());
        assert_eq!(s.snapshot().map(|x| x.monotonic_ns), Some(3_000_000_000));
        assert_eq!(s.history.points("0000:00:04.0").count(), 3);
    }

    #[test]
    fn the_pause_backlog_is_bounded() {
        let mut s = state();
        keys(&mut s, &[Key::Char('p')]);
        for t in 1..=(BACKLOG as u64 + 50) {
            update(&mut s, Action::Sample(three_devices(t)));
        }
        assert_eq!(s.backlog.len(), BACKLOG);
        keys(&mut s, &[Key::Char('p')]);
        assert_eq!(
            s.snapshot().map(|x| x.monotonic_ns),
            Some((BACKLOG as u64 + 50) * 1_000_000_000)
        );
    }

    #[test]
    fn plus_and_minus_step_the_interval_within_bounds() {
        let mut s = state();
        assert_eq!(
            update(&mut s, Action::Key(Key::Char('+'))),
            Effect::SetInterval(Duration::from_secs(2))
        );
        assert_eq!(
            update(&mut s, Action::Key(Key::Char('-'))),
            Effect::SetInterval(Duration::from_secs(1))
        );
        keys(&mut s, &[Key::Char('-'), Key::Char('-')]);
        assert_eq!(s.interval(), Duration::from_millis(250));
        assert_eq!(update(&mut s, Action::Key(Key::Char('-'))), Effect::None);
        // An interval given on the command line between the steps goes to the next step.
        let mut odd = State::new(HostSummary::default(), vec![], Duration::from_millis(1500));
        assert_eq!(
            update(&mut odd, Action::Key(Key::Char('+'))),
            Effect::SetInterval(Duration::from_secs(2))
        );
        let mut odd = State::new(HostSummary::default(), vec![], Duration::from_millis(1500));
        assert_eq!(
            update(&mut odd, Action::Key(Key::Char('-'))),
            Effect::SetInterval(Duration::from_secs(1))
        );
    }

    #[test]
    fn help_swallows_keys_until_closed() {
        let mut s = state();
        keys(&mut s, &[Key::Char('?')]);
        assert!(s.help_shown());
        assert_eq!(update(&mut s, Action::Key(Key::Char('p'))), Effect::None);
        assert!(!s.is_paused());
        assert_eq!(update(&mut s, Action::Key(Key::Char('q'))), Effect::None);
        assert!(!s.help_shown());
        assert_eq!(update(&mut s, Action::Key(Key::Char('q'))), Effect::Quit);
    }

    #[test]
    fn bpf_cost_per_event_comes_from_the_program_stats() {
        let mut s = state();
        let mut snap = three_devices(1);
        snap.events = 1_000;
        snap.programs.insert(
            "dma__map_page__fentry".into(),
            iommutop_model::snapshot::ProgramDelta {
                run_count: 500,
                run_time_ns: 40_000,
            },
        );
        snap.programs.insert(
            "dma__unmap_page__fentry".into(),
            iommutop_model::snapshot::ProgramDelta {
                run_count: 500,
                run_time_ns: 45_000,
            },
        );
        update(&mut s, Action::Sample(snap));
        assert_eq!(s.bpf_ns_per_event(), Some(85.0));
    }

    #[test]
    fn workload_events_fill_the_pane() {
        let mut s = state().with_workload(WorkloadView::new(
            "tcp-rr-1k",
            "netperf",
            Some(Duration::from_secs(30)),
        ));
        update(
            &mut s,
            Action::Workload(WorkloadEvent::Live(
                serde_json::json!({"transactions_per_s": 1234.5}),
            )),
        );
        for i in 0..6 {
            update(
                &mut s,
                Action::Workload(WorkloadEvent::Note(format!("n{i}"))),
            );
        }
        update(&mut s, Action::Tick(Duration::from_secs(31)));
        update(
            &mut s,
            Action::Workload(WorkloadEvent::Finished("done".into())),
        );
        let view = s.workload().expect("pane");
        assert_eq!(view.notes.len(), NOTES);
        assert_eq!(view.notes.front().map(String::as_str), Some("n2"));
        assert_eq!(view.finished_at, Some(Duration::from_secs(31)));
        assert!(view.live.is_some());
    }
}
