//! How long each loader step took (-vv): where attach time goes.

use super::LOADER_LOG;
use std::time::Instant;

/// Runs one loader step, logging how long it took (-vv): where attach time goes.
pub(super) fn timed<T>(program: &str, step: &str, run: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let result = run();
    log::debug!(target: LOADER_LOG, "{program}: {step} in {} ms", start.elapsed().as_millis());
    result
}
