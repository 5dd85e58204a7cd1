//! What one frame of the view costs: update with a new interval, then a full render of the busy
//! NVMe screen at 120×40 into ratatui's TestBackend (the terminal write is not included; ratatui
//! only writes the cells that changed). `cargo bench -p iommutop-tui`.
//!
//! At a 1 s refresh the view draws about twice a second (the sample and the clock tick), so its
//! CPU share from rendering is about 2 × the time per frame per second.

#[path = "../tests/fixtures/mod.rs"]
mod fixtures;

use iommutop_tui::{render, update, Action};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let snapshots = fixtures::busy_nvme(200);
    let (history, fresh) = snapshots.split_at(60);
    let mut state = fixtures::state_after(fixtures::lab_probes(), history.to_vec());
    let mut terminal = match Terminal::new(TestBackend::new(120, 40)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("render bench: no test terminal: {e}");
            return ExitCode::FAILURE;
        }
    };
    let frames = 2_000;
    let time = |f: &mut dyn FnMut(usize)| {
        let started = Instant::now();
        for i in 0..frames {
            f(i);
        }
        started.elapsed().as_secs_f64() / frames as f64 * 1e6
    };
    let update_us = time(&mut |i| {
        update(
            &mut state,
            Action::Sample(Box::new(fresh[i % fresh.len()].clone())),
        );
    });
    // A draw that failed drew no frame: timing it as one would make the figure look better the
    // more draws fail. The first failure is said and ends the bench with a failure.
    let mut failed = None;
    let render_us = time(&mut |_| {
        if failed.is_none() {
            if let Err(e) = terminal.draw(|frame| render(&state, frame)) {
                failed = Some(e);
            }
        }
    });
    if let Some(e) = failed {
        eprintln!("render bench: a draw failed, so no frame time is measured: {e}");
        return ExitCode::FAILURE;
    }
    let frame_us = update_us + render_us;
    println!("busy NVMe, 120x40, {frames} frames:");
    println!("  update (a new interval): {update_us:8.1} us");
    println!("  render (whole screen):   {render_us:8.1} us");
    println!(
        "  at 2 frames/s (1 s refresh + clock): {:.3}% of one core",
        frame_us * 2.0 / 1e6 * 100.0
    );
    ExitCode::SUCCESS
}
