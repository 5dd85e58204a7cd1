//! `iommutop top [--interval S] [--profile P [--set K=V]... [--duration S]] [--json FILE]`: the
//! live view (also what `iommutop` alone runs on a terminal).
//!
//! Three parties, one owner each:
//! - this thread owns the terminal and the view's [`State`]: it reads keys, applies [`Action`]s
//!   with the tui crate's pure `update`, and redraws only when something changed;
//! - the sampler thread owns the [`Session`] (and the report sink): it samples every interval
//!   and sends each [`Snapshot`] on a bounded channel; at the end it builds and writes the report;
//! - with a profile, the workload runs on a thread of the sampler's, as under `iommutop run`.
//!
//! The terminal is restored by [`Screen`]'s `Drop`, by a panic hook, and after SIGINT, SIGTERM
//! or SIGHUP (they set a flag the loop looks at); while the view is up, stderr goes to a
//! memory file whose contents are printed once the terminal is back, so no log line can land
//! on the screen.

use crate::cli::TopArgs;
use crate::commands::workload::{
    checked_profile_workload, load_profile, restore_leftovers, workload_failure,
};
use crate::exit::{Failure, Outcome};
use crate::output::{JsonTarget, ReportSink};
use crate::probes::PointStatus;
use crate::session::{probe_entry, RunDescription, Session};
use anyhow::{anyhow, Context};
use iommutop_model::report::WorkloadReport;
use iommutop_model::snapshot::Snapshot;
use iommutop_tui::{
    render, update, Action, Effect, HostSummary, Key, OpProbe, State, WorkloadEvent, WorkloadView,
};
use iommutop_workloads::{
    ProbeWindow, RunControl, WindowAccumulator, Workload, WorkloadError, WorkloadKind,
    WorkloadOutput,
};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::crossterm::{cursor, execute};
use ratatui::prelude::CrosstermBackend;
use ratatui::Terminal;
use serde_json::{Map, Value};
use std::io::{IsTerminal, Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

/// Snapshots in flight between the sampler and the view; the sampler waits when it is full.
const SAMPLE_QUEUE: usize = 8;

/// Longest the view sleeps between looks at keys, samples and signals.
const POLL: Duration = Duration::from_millis(100);

/// The clock, the workload's progress and iommutop's own CPU are refreshed this often.
const TICK: Duration = Duration::from_secs(1);

/// iommutop's CPU is averaged over this window (`/proc/self/stat` counts in clock ticks).
const CPU_WINDOW: Duration = Duration::from_secs(10);

/// What was captured on stderr while the view was up is printed afterwards, at most this much.
const CAPTURED_MAX: u64 = 64 << 10;

/// `iommutop` alone: the view on a terminal; elsewhere (a pipe, a script) the help, exit 2.
pub fn without_subcommand() -> Outcome<ExitCode> {
    if std::io::stdout().is_terminal() {
        return run(&TopArgs {
            interval: 1.0,
            profile: None,
            set: Vec::new(),
            duration: None,
            json: None,
        });
    }
    use clap::CommandFactory;
    eprintln!("{}", crate::cli::Cli::command().render_help());
    Ok(ExitCode::from(crate::exit::Code::Usage as u8))
}

pub fn run(args: &TopArgs) -> Outcome<ExitCode> {
    if !std::io::stdout().is_terminal() {
        return Err(Failure::usage(anyhow!(
            "`iommutop top` draws on a terminal and stdout is not one (to record without a \
             view, use `iommutop record --json FILE`)"
        )));
    }
    let target = args.json.as_deref().map(JsonTarget::parse);
    if matches!(target, Some(JsonTarget::Stream)) {
        return Err(Failure::usage(anyhow!(
            "`--json -` would write into the view: give `iommutop top --json` a file"
        )));
    }
    let interval = Duration::from_secs_f64(args.interval);
    let profile = args
        .profile
        .as_deref()
        .map(|name| ProfileRun::load(name, &args.set, args.duration))
        .transpose()?;
    let sink = match target {
        Some(target) => ReportSink::open(Some(target))?,
        None => ReportSink::Silent,
    };
    let signals = install_signal_flag()?;
    if profile.is_some() {
        restore_leftovers();
    }
    eprintln!("iommutop: attaching probes…");
    let session = Session::start()?;

    let mut state = State::new(
        HostSummary::from_facts(session.facts()),
        op_probes(session.probe_statuses()),
        interval,
    );
    if let Some(profile) = &profile {
        state = state.with_workload(WorkloadView::new(
            &profile.name,
            profile.kind.name(),
            profile.expected,
        ));
    }

    let (control, control_rx) = mpsc::channel();
    let (samples, samples_rx) = mpsc::sync_channel(SAMPLE_QUEUE);
    let sampler = Sampler {
        session,
        sink,
        interval,
        control: control_rx,
        control_tx: Some(control.clone()),
        out: samples,
        profile,
    };
    let handle = std::thread::Builder::new()
        .name("iommutop-sampler".into())
        .spawn(move || sampler.run())
        .context("starting the sampler thread")?;

    // A panic in the view still stops the sampler, lets a workload restore what it changed and
    // writes the report; then it goes on unwinding (the panic hook already gave the terminal back).
    let shown = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let control = StopOnDrop(control);
        let mut screen = Screen::enter()?;
        let shown = view_loop(&mut screen, &mut state, &control, &samples_rx, &signals);
        drop(control);
        screen.leave();
        shown
    }));
    drop(samples_rx);
    let end = handle.join();
    let shown = match shown {
        Ok(shown) => shown,
        Err(panic) => std::panic::resume_unwind(panic),
    };
    let Ok(end) = end else {
        return Err(Failure::from(anyhow!("the sampler thread panicked")));
    };
    shown?;
    end.map(|()| ExitCode::SUCCESS)
}

/// The view until the user quits or a signal comes (and the sampler has then ended), or until
/// the sampler ends in a failure, which the sampler thread returns.
fn view_loop(
    screen: &mut Screen,
    state: &mut State,
    control: &StopOnDrop,
    samples: &Receiver<FromSampler>,
    signals: &AtomicBool,
) -> Outcome {
    let started = Instant::now();
    let mut cpu = SelfCpu::new();
    let mut next_tick = started;
    let mut dirty = true;
    let mut last_draw = started;
    let mut quitting = false;
    let mut sampler_done = false;
    loop {
        if dirty {
            screen
                .terminal
                .draw(|frame| render(state, frame))
                .context("drawing the view")?;
            dirty = false;
            last_draw = Instant::now();
            // Debug builds only: lets a test check that a panic gives the terminal back.
            #[cfg(debug_assertions)]
            if std::env::var_os("IOMMUTOP_TOP_TEST_PANIC").is_some() {
                panic!("IOMMUTOP_TOP_TEST_PANIC is set: panicking after the first frame");
            }
        }
        if signals.load(Ordering::Relaxed) && !quitting {
            quitting = true;
            control.stop();
        }
        if quitting && sampler_done {
            return Ok(());
        }
        let now = Instant::now();
        if now >= next_tick {
            update(state, Action::Tick(now.duration_since(started)));
            if let Some(share) = cpu.sample() {
                update(state, Action::ToolCpu(share));
            }
            next_tick += TICK;
            // The clock alone redraws at most once a second: when samples come every second,
            // their frames show it.
            if now.duration_since(last_draw) >= TICK {
                dirty = true;
            }
        }
        let wait = next_tick.saturating_duration_since(now).min(POLL);
        if event::poll(wait).context("reading the terminal")? {
            match event::read().context("reading the terminal")? {
                Event::Key(key) => {
                    if let Some(key) = key_of(key) {
                        match update(state, Action::Key(key)) {
                            Effect::Quit if !quitting => {
                                quitting = true;
                                control.stop();
                                if !sampler_done {
                                    update(state, Action::Status("stopping…".into()));
                                }
                            }
                            Effect::SetInterval(interval) => {
                                control.send(ToSampler::Interval(interval))
                            }
                            Effect::Quit | Effect::None => {}
                        }
                        dirty = true;
                    }
                }
                Event::Resize(..) => dirty = true,
                _ => {}
            }
        }
        loop {
            match samples.try_recv() {
                Ok(FromSampler::Sample(snapshot)) => {
                    update(state, Action::Sample(snapshot));
                }
                Ok(FromSampler::Workload(event)) => {
                    update(state, Action::Workload(event));
                }
                Ok(FromSampler::Done(line)) => {
                    sampler_done = true;
                    update(state, Action::Status(line));
                }
                Ok(FromSampler::Failed) => return Ok(()),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    sampler_done = true;
                    if quitting {
                        return Ok(());
                    }
                    break;
                }
            }
            dirty = true;
        }
    }
}

/// crossterm's key to the view's.
fn key_of(event: KeyEvent) -> Option<Key> {
    if event.kind == KeyEventKind::Release {
        return None;
    }
    let key = match event.code {
        KeyCode::Char(c) if event.modifiers.contains(KeyModifiers::CONTROL) => {
            Key::Ctrl(c.to_ascii_lowercase())
        }
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        KeyCode::Left => Key::Left,
        KeyCode::Right => Key::Right,
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Tab => Key::Tab,
        KeyCode::BackTab => Key::BackTab,
        KeyCode::F(1) => Key::Char('?'),
        _ => return None,
    };
    Some(key)
}

/// The view's list of which tier serves which operation.
fn op_probes(statuses: &[PointStatus]) -> Vec<OpProbe> {
    statuses
        .iter()
        .map(|status| {
            let entry = probe_entry(status);
            OpProbe {
                op: status.op,
                point: entry.point,
                tier: entry.tier,
                latency: entry.latency,
            }
        })
        .collect()
}

/// SIGINT, SIGTERM and SIGHUP set the returned flag (raw mode turns Ctrl-C into a key, so
/// SIGINT only comes from `kill`).
fn install_signal_flag() -> Outcome<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, Arc::clone(&flag))
            .context("installing the signal handlers")?;
    }
    Ok(flag)
}

// ---------------------------------------------------------------------------------------------
// The terminal

/// Whether the terminal is in raw mode on the alternate screen (so that restoring is done once,
/// by whichever of `Drop`, the panic hook or `leave` comes first).
static TERMINAL_TAKEN: AtomicBool = AtomicBool::new(false);

/// The real stderr while the view is up (-1: not redirected).
static SAVED_STDERR: AtomicI32 = AtomicI32::new(-1);

static PANIC_HOOK: Once = Once::new();

/// The terminal, taken: raw mode, alternate screen, hidden cursor, stderr captured. Given back
/// by [`Screen::leave`], on drop, or by the panic hook.
struct Screen {
    terminal: Terminal<CrosstermBackend<std::io::Stdout>>,
    captured: Option<std::fs::File>,
}

impl Screen {
    fn enter() -> Outcome<Screen> {
        PANIC_HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                give_back_terminal();
                previous(info);
            }));
        });
        let captured = capture_stderr();
        let taken = Screen::take_terminal();
        if taken.is_err() {
            give_back_terminal();
        }
        Ok(Screen {
            terminal: taken?,
            captured,
        })
    }

    fn take_terminal() -> Outcome<Terminal<CrosstermBackend<std::io::Stdout>>> {
        enable_raw_mode().context("switching the terminal to raw mode")?;
        TERMINAL_TAKEN.store(true, Ordering::SeqCst);
        execute!(std::io::stdout(), EnterAlternateScreen, cursor::Hide)
            .context("switching to the alternate screen")?;
        Ok(Terminal::new(CrosstermBackend::new(std::io::stdout()))
            .context("setting up the terminal")?)
    }

    /// Gives the terminal back and prints what was said on stderr meanwhile. Idempotent.
    fn leave(&mut self) {
        give_back_terminal();
        if let Some(mut file) = self.captured.take() {
            let mut text = String::new();
            let length = file.seek(std::io::SeekFrom::End(0)).unwrap_or(0);
            let start = length.saturating_sub(CAPTURED_MAX);
            if file.seek(std::io::SeekFrom::Start(start)).is_ok() {
                let _ = file.take(CAPTURED_MAX).read_to_string(&mut text);
            }
            if !text.is_empty() {
                let mut stderr = std::io::stderr().lock();
                let _ = stderr.write_all(text.as_bytes());
                let _ = stderr.flush();
            }
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.leave();
    }
}

/// Leaves the alternate screen and raw mode, shows the cursor, puts stderr back. Idempotent,
/// and never panics: it runs from `Drop` and from the panic hook.
fn give_back_terminal() {
    if TERMINAL_TAKEN.swap(false, Ordering::SeqCst) {
        let _ = execute!(std::io::stdout(), LeaveAlternateScreen, cursor::Show);
        let _ = disable_raw_mode();
    }
    let saved = SAVED_STDERR.swap(-1, Ordering::SeqCst);
    if saved >= 0 {
        // SAFETY: `saved` is the descriptor capture_stderr() duplicated from fd 2 and nobody
        // else closes it; dup2 onto 2 and close are plain syscalls on descriptors we own.
        unsafe {
            libc::dup2(saved, libc::STDERR_FILENO);
            libc::close(saved);
        }
    }
}

/// Points fd 2 at a memory file (children inherit it too) and returns that file, or `None`
/// (stderr left alone) if the kernel refuses.
fn capture_stderr() -> Option<std::fs::File> {
    // SAFETY: memfd_create takes a NUL-terminated name and flags; it returns a new descriptor
    // or -1.
    let memfd = unsafe { libc::memfd_create(c"iommutop-top-stderr".as_ptr(), libc::MFD_CLOEXEC) };
    if memfd < 0 {
        return None;
    }
    // SAFETY: memfd is a descriptor we just created and own alone.
    let file = unsafe { std::fs::File::from_raw_fd(memfd) };
    // SAFETY: dup of fd 2 returns a new descriptor (or -1); we own it until give_back_terminal.
    let saved = unsafe { libc::fcntl(libc::STDERR_FILENO, libc::F_DUPFD_CLOEXEC, 3) };
    if saved < 0 {
        return None;
    }
    // SAFETY: both descriptors are open; dup2 replaces fd 2 with a copy of the memory file's.
    if unsafe { libc::dup2(file.as_raw_fd(), libc::STDERR_FILENO) } < 0 {
        // SAFETY: saved is ours and unused.
        unsafe { libc::close(saved) };
        return None;
    }
    SAVED_STDERR.store(saved, Ordering::SeqCst);
    Some(file)
}

/// iommutop's own CPU (all threads) over the last [`CPU_WINDOW`], as a share of one CPU,
/// from `/proc/self/stat`.
struct SelfCpu {
    ticks_per_s: f64,
    readings: std::collections::VecDeque<(Instant, u64)>,
}

impl SelfCpu {
    fn new() -> SelfCpu {
        // SAFETY: sysconf has no preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        SelfCpu {
            ticks_per_s: if ticks > 0 { ticks as f64 } else { 100.0 },
            readings: std::collections::VecDeque::new(),
        }
    }

    /// Takes a reading; the share since the oldest reading in the window, once there are two.
    fn sample(&mut self) -> Option<f64> {
        let now = Instant::now();
        let ticks = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|text| cpu_ticks(&text))?;
        self.readings.push_back((now, ticks));
        while self
            .readings
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > CPU_WINDOW)
        {
            self.readings.pop_front();
        }
        let (first_at, first_ticks) = *self.readings.front()?;
        let wall = now.duration_since(first_at).as_secs_f64();
        (wall > 0.0).then(|| ticks.saturating_sub(first_ticks) as f64 / self.ticks_per_s / wall)
    }
}

/// utime + stime (clock ticks) from the text of `/proc/PID/stat`.
fn cpu_ticks(stat: &str) -> Option<u64> {
    // The command name is in parentheses and may hold spaces: fields count from after it.
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Field 3 (state) is fields[0]; utime is field 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

// ---------------------------------------------------------------------------------------------
// The sampler

enum ToSampler {
    Interval(Duration),
    /// Quit: cancel the workload, build the report, end.
    Stop,
    Workload(FromWorkload),
}

enum FromSampler {
    Sample(Box<Snapshot>),
    Workload(WorkloadEvent),
    /// The session ended and the report is written (if asked for): a line for the status bar.
    Done(String),
    /// The session ended in a failure: the view closes and the failure is printed.
    Failed,
}

/// Asks the sampler to stop when the view ends, however it ends.
struct StopOnDrop(Sender<ToSampler>);

impl StopOnDrop {
    fn send(&self, message: ToSampler) {
        let _ = self.0.send(message);
    }
    fn stop(&self) {
        self.send(ToSampler::Stop);
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A profile, loaded and checked before anything is attached.
struct ProfileRun {
    name: String,
    kind: WorkloadKind,
    workload: Box<dyn Workload>,
    expected: Option<Duration>,
}

impl ProfileRun {
    /// The profile with `--set` and `--duration` applied, its workload built and checked (as
    /// `iommutop run` does).
    fn load(name: &str, sets: &[String], duration: Option<f64>) -> Outcome<ProfileRun> {
        let profile = load_profile(name, sets, duration)?;
        let workload = checked_profile_workload(&profile)?;
        let expected = expected_duration(profile.workload, &workload.params());
        Ok(ProfileRun {
            name: profile.name,
            kind: profile.workload,
            workload,
            expected,
        })
    }
}

/// How long a workload with these parameters should run: its duration, times its steps for
/// dma-contention; `None` when it runs until done (tlb).
fn expected_duration(kind: WorkloadKind, params: &Map<String, Value>) -> Option<Duration> {
    let seconds = |key: &str| params.get(key).and_then(Value::as_f64);
    let total = match kind {
        WorkloadKind::DmaContention => {
            let steps = params
                .get("threads")
                .and_then(Value::as_array)
                .map_or(1, Vec::len);
            seconds("step_s")? * steps as f64
        }
        WorkloadKind::Tlb => return None,
        _ => seconds("duration_s")?,
    };
    (total.is_finite() && total > 0.0).then(|| Duration::from_secs_f64(total))
}

/// What the workload thread tells the sampler.
enum FromWorkload {
    Live(Value),
    Note(String),
    Checkpoint(String),
    Done(Box<Finished>),
}

struct Finished {
    result: Result<WorkloadOutput, WorkloadError>,
    params: Map<String, Value>,
    not_restored: Vec<String>,
}

/// The workload's side: cancellation from a flag, everything else to the sampler.
struct Control {
    sampler: Sender<ToSampler>,
    windows: Receiver<Option<ProbeWindow>>,
    cancel: Arc<AtomicBool>,
}

impl RunControl for Control {
    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
    fn live(&mut self, numbers: Value) {
        let _ = self
            .sampler
            .send(ToSampler::Workload(FromWorkload::Live(numbers)));
    }
    fn note(&mut self, line: &str) {
        let _ = self
            .sampler
            .send(ToSampler::Workload(FromWorkload::Note(line.to_string())));
    }
    fn checkpoint(&mut self, label: &str) -> Option<ProbeWindow> {
        self.sampler
            .send(ToSampler::Workload(FromWorkload::Checkpoint(
                label.to_string(),
            )))
            .ok()?;
        self.windows.recv().ok().flatten()
    }
}

struct Sampler {
    session: Session,
    sink: ReportSink,
    interval: Duration,
    control: Receiver<ToSampler>,
    /// Handed to the workload's [`Control`]; dropped otherwise, so that `control` disconnects
    /// once the view and the workload are gone.
    control_tx: Option<Sender<ToSampler>>,
    out: SyncSender<FromSampler>,
    profile: Option<ProfileRun>,
}

/// How the sampling loop ended.
enum Ended {
    /// The view quit (or went away).
    Stopped,
    /// Sampling failed.
    Failed(Failure),
}

impl Sampler {
    /// Samples until told to stop (or until the profile's workload ends), then writes the
    /// report; the outcome is the command's.
    fn run(mut self) -> Outcome {
        let out = self.out.clone();
        let initial_interval = self.interval;
        let outcome = match self.profile.take() {
            None => {
                self.control_tx = None;
                let ended = self.sample_until_stopped(None);
                self.conclude(
                    ended,
                    RunDescription {
                        interval: initial_interval,
                        ..RunDescription::default()
                    },
                )
            }
            Some(profile) => self.run_profile(profile, initial_interval),
        };
        let _ = out.send(match &outcome {
            Ok(line) => FromSampler::Done(line.clone()),
            Err(_) => FromSampler::Failed,
        });
        outcome.map(|_| ())
    }

    /// Builds the report and writes it; a status line saying so.
    fn conclude(self, ended: Ended, run: RunDescription) -> Outcome<String> {
        if let Ended::Failed(failure) = ended {
            return Err(failure);
        }
        let Sampler {
            session, mut sink, ..
        } = self;
        let report = session.finish(run)?;
        let written = match &sink {
            ReportSink::File { path, .. } => Some(path.display().to_string()),
            _ => None,
        };
        sink.report(&report)?;
        Ok(match written {
            Some(path) => format!("report written to {path} · probes detached · q quits"),
            None => "probes detached · q quits".to_string(),
        })
    }

    /// The sampling loop. `workload` handles the workload's messages; it returns `true` when
    /// the workload has ended.
    fn sample_until_stopped(&mut self, mut workload: Option<&mut WorkloadSide>) -> Ended {
        let mut next = Instant::now() + self.interval;
        let mut stopping = false;
        loop {
            let wait = next.saturating_duration_since(Instant::now());
            match self.control.recv_timeout(wait) {
                Ok(ToSampler::Interval(interval)) => {
                    next = next - self.interval + interval;
                    self.interval = interval;
                }
                Ok(ToSampler::Stop) => match workload.as_deref_mut() {
                    None => return Ended::Stopped,
                    Some(side) if !stopping => {
                        stopping = true;
                        side.cancel.store(true, Ordering::Relaxed);
                        let _ = self
                            .out
                            .send(FromSampler::Workload(WorkloadEvent::Stopping));
                    }
                    Some(_) => {}
                },
                Ok(ToSampler::Workload(message)) => {
                    let Some(side) = workload.as_deref_mut() else {
                        continue;
                    };
                    match message {
                        FromWorkload::Live(numbers) => {
                            side.live = Some(numbers.clone());
                            let _ = self
                                .out
                                .send(FromSampler::Workload(WorkloadEvent::Live(numbers)));
                        }
                        FromWorkload::Note(line) => {
                            let _ = self
                                .out
                                .send(FromSampler::Workload(WorkloadEvent::Note(line)));
                        }
                        FromWorkload::Checkpoint(label) => {
                            let window = match self.sample(Some(side)) {
                                Ok(()) => Some(side.accumulator.take(&label)),
                                Err(failure) => {
                                    side.cancel.store(true, Ordering::Relaxed);
                                    let _ = side.windows.send(None);
                                    return Ended::Failed(failure);
                                }
                            };
                            let _ = side.windows.send(window);
                        }
                        FromWorkload::Done(finished) => {
                            side.finished = Some(*finished);
                            return Ended::Stopped;
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Ended::Stopped,
            }
            if Instant::now() >= next {
                if let Err(failure) = self.sample(workload.as_deref_mut()) {
                    if let Some(side) = workload.as_deref_mut() {
                        side.cancel.store(true, Ordering::Relaxed);
                    }
                    return Ended::Failed(failure);
                }
                next += self.interval;
                // After a stall (the view stopped reading), the next interval starts now.
                next = next.max(Instant::now());
            }
        }
    }

    /// One sample, to the view (waiting if it is behind) and to the workload's window.
    fn sample(&mut self, side: Option<&mut WorkloadSide>) -> Outcome {
        let (live, accumulator) = match side {
            Some(side) => (side.live.take(), Some(&mut side.accumulator)),
            None => (None, None),
        };
        let snapshot = self.session.sample(live)?;
        if let Some(accumulator) = accumulator {
            accumulator.add(&snapshot);
        }
        // A closed view is not a sampling failure: the loop learns of it from `control`.
        let _ = self.out.send(FromSampler::Sample(Box::new(snapshot)));
        Ok(())
    }

    /// The profile's workload on a thread of its own while this one samples.
    fn run_profile(mut self, profile: ProfileRun, interval: Duration) -> Outcome<String> {
        let ProfileRun {
            name,
            kind,
            mut workload,
            ..
        } = profile;
        let (window_tx, windows) = mpsc::channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let mut side = WorkloadSide {
            cancel: Arc::clone(&cancel),
            windows: window_tx,
            accumulator: WindowAccumulator::new(),
            live: None,
            finished: None,
        };
        let Some(sampler) = self.control_tx.take() else {
            return Err(Failure::from(anyhow!(
                "the sampler has no line for the workload"
            )));
        };
        let mut control = Control {
            sampler,
            windows,
            cancel,
        };
        let ended = std::thread::scope(|scope| {
            let worker = scope.spawn(move || {
                let result = workload.prepare().and_then(|()| workload.run(&mut control));
                let not_restored = workload.restore();
                let params = workload.params();
                drop(workload);
                let _ = control
                    .sampler
                    .send(ToSampler::Workload(FromWorkload::Done(Box::new(
                        Finished {
                            result,
                            params,
                            not_restored,
                        },
                    ))));
            });
            let mut ended = self.sample_until_stopped(Some(&mut side));
            if side.finished.is_none() {
                // Stopped by the view or a failure: wait for the workload to restore and end.
                side.cancel.store(true, Ordering::Relaxed);
                let _ = side.windows.send(None);
                while side.finished.is_none() {
                    match self.control.recv() {
                        Ok(ToSampler::Workload(FromWorkload::Done(finished))) => {
                            side.finished = Some(*finished);
                        }
                        Ok(ToSampler::Workload(FromWorkload::Checkpoint(_))) => {
                            let _ = side.windows.send(None);
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
            }
            if worker.join().is_err() && matches!(ended, Ended::Stopped) {
                ended = Ended::Failed(Failure::from(anyhow!("the workload thread panicked")));
            }
            ended
        });
        drop(side.windows);
        let finished = side.finished.unwrap_or_else(|| Finished {
            result: Err(WorkloadError::Tool {
                tool: "iommutop".into(),
                message: "the workload thread ended without a word".into(),
            }),
            params: Map::new(),
            not_restored: Vec::new(),
        });
        let Finished {
            result,
            params,
            not_restored,
        } = finished;
        let (results, mut warnings, error) = match result {
            Ok(output) => (output.results, output.warnings, None),
            Err(e) => {
                let mut results = Map::new();
                results.insert("error".into(), e.to_string().into());
                (results, vec![format!("the workload failed: {e}")], Some(e))
            }
        };
        warnings.extend(not_restored.iter().map(|l| format!("not restored: {l}")));
        let summary = match &error {
            Some(e) => format!("failed: {e}"),
            None => first_line(&kind.summarize(&results)),
        };
        let _ = self
            .out
            .send(FromSampler::Workload(WorkloadEvent::Finished(summary)));
        let line = self.conclude(
            ended,
            RunDescription {
                profile: Some(name),
                workload: Some(WorkloadReport {
                    name: kind.name().to_string(),
                    params,
                    results,
                }),
                interval,
                warnings,
                ..RunDescription::default()
            },
        )?;
        if let Some(e) = error {
            return Err(workload_failure(e));
        }
        if !not_restored.is_empty() {
            return Err(Failure::from(anyhow!(
                "could not restore everything: {}",
                not_restored.join("; ")
            )));
        }
        Ok(line)
    }
}

/// The sampler's side of a running workload.
struct WorkloadSide {
    cancel: Arc<AtomicBool>,
    windows: Sender<Option<ProbeWindow>>,
    accumulator: WindowAccumulator,
    /// The workload's numbers for the interval under way, kept with the next sample.
    live: Option<Value>,
    finished: Option<Finished>,
}

fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("done")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_skip_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (iommu top (x)) S 1 4242 4242 34816 4242 4194304 1234 0 0 0 \
                    150 25 0 0 20 0 3 0 123456 1000000 500 18446744073709551615";
        assert_eq!(cpu_ticks(stat), Some(175));
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn keys_map_to_the_views_keys() {
        let press = |code, modifiers| KeyEvent::new(code, modifiers);
        assert_eq!(
            key_of(press(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Key::Ctrl('c'))
        );
        assert_eq!(
            key_of(press(KeyCode::Char('q'), KeyModifiers::NONE)),
            Some(Key::Char('q'))
        );
        assert_eq!(
            key_of(press(KeyCode::F(1), KeyModifiers::NONE)),
            Some(Key::Char('?'))
        );
        let mut release = press(KeyCode::Char('q'), KeyModifiers::NONE);
        release.kind = KeyEventKind::Release;
        assert_eq!(key_of(release), None);
    }

    #[test]
    fn expected_durations_follow_the_workload() {
        let params = |v: Value| v.as_object().cloned().unwrap_or_default();
        assert_eq!(
            expected_duration(
                WorkloadKind::Netperf,
                &params(serde_json::json!({"duration_s": 30}))
            ),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            expected_duration(
                WorkloadKind::DmaContention,
                &params(serde_json::json!({"step_s": 5, "threads": [1, 2, 4, 8]}))
            ),
            Some(Duration::from_secs(20))
        );
        assert_eq!(expected_duration(WorkloadKind::Tlb, &Map::new()), None);
    }
}
