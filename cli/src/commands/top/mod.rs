//! `iommutop top [--interval S] [--profile P [--set K=V]... [--duration S]] [--json FILE]`: the
//! live view (also what `iommutop` alone runs on a terminal).
//!
//! Three parties, one owner each:
//! - this thread owns the terminal and the view's [`State`]: it reads keys, applies [`Action`]s
//!   with the tui crate's pure `update`, and redraws only when something changed;
//! - the sampler thread owns the [`Measurement`] (and the report sink): it samples every interval
//!   and sends each [`Snapshot`] on a bounded channel; at the end it builds and writes the report;
//! - with a profile, the workload runs on a thread of the sampler's, as under `iommutop run`.
//!
//! The terminal is restored by [`Screen`]'s `Drop`, by a panic hook, and after SIGINT, SIGTERM
//! or SIGHUP (they set a flag the loop looks at); while the view is up, stderr goes to a
//! memory file whose contents are printed once the terminal is back, so no log line can land
//! on the screen.

use crate::cli::TopArgs;
use crate::commands::workload::restore_leftovers;
use crate::exit::{Failure, Outcome};
use crate::measurement::{probe_entry, Measurement};
use crate::output::{JsonTarget, ReportSink};
use anyhow::{anyhow, Context};
use iommutop_loader::PointStatus;
use iommutop_model::{DeviceFilter, TaskFilter};
use iommutop_tui::{
    render, update, Action, Column, Effect, HostSummary, Key, OpProbe, State, WorkloadView,
};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod batch;
mod sampler;
mod self_cpu;
mod terminal;

use sampler::{FromSampler, ProfileRun, Sampler, StopOnDrop, ToSampler};
use self_cpu::SelfCpu;
use terminal::Screen;

/// Snapshots in flight between the sampler and the view; the sampler waits when it is full.
const SAMPLE_QUEUE: usize = 8;

/// Longest the view sleeps between looks at keys, samples and signals.
const POLL: Duration = Duration::from_millis(100);

/// The clock, the workload's progress and iommutop's own CPU are refreshed this often.
const TICK: Duration = Duration::from_secs(1);

/// `iommutop` alone: the view on a terminal; elsewhere (a pipe, a script) the help, exit 2.
pub fn without_subcommand() -> Outcome<ExitCode> {
    if std::io::stdout().is_terminal() {
        return run(&TopArgs {
            interval: 1.0,
            profile: None,
            set: Vec::new(),
            duration: None,
            json: None,
            format: crate::cli::OutputFormat::Text,
            points: None,
            batch: false,
            iterations: None,
            sort: None,
            filter: None,
            device: None,
            tasks: Default::default(),
            netdev: crate::cli::NetdevScope::Physical,
        });
    }
    use clap::CommandFactory;
    eprintln!("{}", crate::cli::Cli::command().render_help());
    Ok(ExitCode::from(crate::exit::Code::Usage.value()))
}

pub fn run(args: &TopArgs) -> Outcome<ExitCode> {
    let start = StartView::from_args(args)?;
    if args.batch {
        return batch::run(args, &start, Duration::from_secs_f64(args.interval));
    }
    if args.format != crate::cli::OutputFormat::Text {
        return Err(Failure::usage(anyhow!(
            "`iommutop top` draws the view, which has no {} form: --format text, or \
             `top --batch --format json` for JSON",
            args.format.name()
        )));
    }
    if !std::io::stdout().is_terminal() {
        return Err(Failure::usage(anyhow!(
            "`iommutop top` draws on a terminal and stdout is not one (to record without a \
             view: `iommutop top --batch`, or `iommutop record --json FILE`)"
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
    let measurement = Measurement::start(
        &args.points.clone().unwrap_or_default(),
        start.tasks.clone(),
        start.netdevs,
        false,
    )?
    .with_device_filter(start.device.clone());

    let mut state = State::new(
        HostSummary::from_facts(measurement.facts()).with_scope(measurement.task_filter()),
        op_probes(measurement.probe_statuses()),
        interval,
    )
    .with_sort(start.sort)
    .with_filter(&start.filter)
    .with_device(start.device.as_ref());
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
        measurement,
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
    if !handle.is_finished() {
        eprintln!("iommutop: stopping: writing the report and detaching the probes…");
    }
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

/// How the table starts: `--sort`, `--filter` and `--device`, checked before any probe
/// attaches.
#[derive(Debug, Clone, PartialEq)]
pub struct StartView {
    pub sort: Column,
    pub filter: String,
    pub device: Option<DeviceFilter>,
    /// `--pid`/`--cgroup`.
    pub tasks: Option<TaskFilter>,
    /// `--netdev`.
    pub netdevs: crate::cli::NetdevScope,
}

impl StartView {
    fn from_args(args: &TopArgs) -> Outcome<StartView> {
        let sort = match args.sort.as_deref() {
            Some(name) => {
                Column::parse(name).map_err(|e| Failure::usage(anyhow!("--sort: {e}")))?
            }
            None => Column::MapsPerS,
        };
        Ok(StartView {
            sort,
            filter: args.filter.clone().unwrap_or_default(),
            device: crate::device_filter::resolve(args.device.as_deref())?,
            tasks: crate::task_filter::resolve(&args.tasks)?,
            netdevs: args.netdev,
        })
    }
}

/// The view until the user quits or a signal comes (the sampler, told to stop, finishes behind
/// the restored terminal), or until the sampler ends in a failure, which the sampler thread
/// returns.
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
        // Quitting gives the terminal back at once: the sampler stops the workload, writes the
        // report and detaches the probes behind it (seconds under emulation).
        if signals.load(Ordering::Relaxed) {
            control.stop();
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
                            Effect::Quit => {
                                control.stop();
                                return Ok(());
                            }
                            Effect::SetInterval(interval) => {
                                control.send(ToSampler::Interval(interval))
                            }
                            Effect::None => {}
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
                    update(state, Action::Status(line));
                }
                Ok(FromSampler::Failed) => return Ok(()),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
