//! The tool's own CPU use, from /proc/self/stat, for the footer.

use std::time::{Duration, Instant};

/// iommutop's CPU is averaged over this window (`/proc/self/stat` counts in clock ticks).
const CPU_WINDOW: Duration = Duration::from_secs(10);

/// iommutop's own CPU (all threads) over the last [`CPU_WINDOW`], as a share of one CPU,
/// from `/proc/self/stat`.
pub(super) struct SelfCpu {
    pub(super) ticks_per_s: f64,
    pub(super) readings: std::collections::VecDeque<(Instant, u64)>,
}

impl SelfCpu {
    pub(super) fn new() -> SelfCpu {
        SelfCpu {
            ticks_per_s: crate::proc_stat::ticks_per_second().unwrap_or(100.0),
            readings: std::collections::VecDeque::new(),
        }
    }

    /// Takes a reading; the share since the oldest reading in the window, once there are two.
    pub(super) fn sample(&mut self) -> Option<f64> {
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
pub(super) fn cpu_ticks(stat: &str) -> Option<u64> {
    let fields = crate::proc_stat::fields_after_name(stat)?;
    // Field 3 (state) is fields[0]; utime is field 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

// ---------------------------------------------------------------------------------------------
// The sampler

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
}
