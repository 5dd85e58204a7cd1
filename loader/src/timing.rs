//! How long each loader step took, and how much the verifier walked (-vv): where attach time goes.

use crate::LOADER_LOG;
use std::time::Instant;

/// Runs one loader step, logging how long it took (-vv): where attach time goes.
pub(crate) fn timed<T>(program: &str, step: &str, run: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let result = run();
    log::debug!(target: LOADER_LOG, "{program}: {step} in {} ms", start.elapsed().as_millis());
    result
}

/// How many instructions the verifier walked for a program (5.16+; -vv): verification time
/// follows it, and unlike the time it does not vary with the machine's load. Asks the kernel
/// only when the line would be logged.
pub(crate) fn log_verified_size<E>(
    program: &str,
    info: impl FnOnce() -> Result<aya::programs::ProgramInfo, E>,
) {
    if !log::log_enabled!(target: LOADER_LOG, log::Level::Debug) {
        return;
    }
    if let Some(count) = info().ok().and_then(|i| i.verified_instruction_count()) {
        log::debug!(target: LOADER_LOG, "{program}: the verifier walked {count} instructions");
    }
}

/// [`log_verified_size`] of a program loaded outside aya, from its fdinfo (`verified_insns`).
pub(crate) fn log_walked(program: &str, fd: std::os::fd::BorrowedFd<'_>) {
    if !log::log_enabled!(target: LOADER_LOG, log::Level::Debug) {
        return;
    }
    if let Some(count) = crate::maps::fdinfo::read(fd)
        .and_then(|info| crate::maps::fdinfo::field(&info, "verified_insns"))
    {
        log::debug!(target: LOADER_LOG, "{program}: the verifier walked {count} instructions");
    }
}
