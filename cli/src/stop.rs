//! Ctrl-C and SIGTERM end a recording cleanly: the loop sees the flag, writes the report, and
//! the probes detach when the measurement drops.

use crate::exit::Outcome;
use anyhow::Context;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Clone)]
pub struct StopSignal(Arc<AtomicBool>);

impl StopSignal {
    pub fn install() -> Outcome<StopSignal> {
        let flag = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(signal, Arc::clone(&flag))
                .context("installing the Ctrl-C handler")?;
        }
        Ok(StopSignal(flag))
    }

    pub fn requested(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
