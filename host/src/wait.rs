//! Polling until the kernel has done what was asked (bind, disks back, link up).

use std::time::{Duration, Instant};

/// Polls `done` every 50 ms until it holds (`true`) or `timeout` passes (`false`).
pub fn until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
