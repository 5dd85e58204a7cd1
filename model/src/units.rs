//! Numbers for people: durations, counts and shares in a few characters, the same on every screen.

/// `850ns`, `1.5us`, `23.4ms`, `2.1s` (ASCII `us`, so that columns line up in any terminal).
pub fn human_ns(ns: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")];
    for (scale, unit) in UNITS {
        if ns >= scale {
            return format!("{}{unit}", three_digits(ns as f64 / scale as f64));
        }
    }
    format!("{ns}ns")
}

/// `950`, `98765`, `123k`, `4.57M`, `1.20G`: exact below 100,000, else 3 significant digits.
pub fn human_count(count: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000_000, "T"),
        (1_000_000_000, "G"),
        (1_000_000, "M"),
        (1_000, "k"),
    ];
    if count < 100_000 {
        return count.to_string();
    }
    for (scale, unit) in UNITS {
        if count >= scale {
            return format!("{}{unit}", three_digits(count as f64 / scale as f64));
        }
    }
    count.to_string()
}

/// A share as a percentage with two decimals: `0.60%`, `112.50%`.
pub fn percent(share: f64) -> String {
    format!("{:.2}%", share * 100.0)
}

/// `1.23`, `12.3`, `123`: three significant digits for values from 1 to 999 (below 1, two
/// decimals: `0.02`).
pub fn three_digits(value: f64) -> String {
    if value < 10.0 {
        format!("{value:.2}")
    } else if value < 100.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(human_ns(0), "0ns");
        assert_eq!(human_ns(999), "999ns");
        assert_eq!(human_ns(1_536), "1.54us");
        assert_eq!(human_ns(23_400_000), "23.4ms");
        assert_eq!(human_ns(2_147_483_648), "2.15s");
        assert_eq!(human_ns(512_000), "512us");
    }

    #[test]
    fn counts() {
        assert_eq!(human_count(0), "0");
        assert_eq!(human_count(99_999), "99999");
        assert_eq!(human_count(123_456), "123k");
        assert_eq!(human_count(4_567_890), "4.57M");
        assert_eq!(human_count(1_200_000_000), "1.20G");
    }

    #[test]
    fn shares() {
        assert_eq!(percent(0.006), "0.60%");
        assert_eq!(percent(1.125), "112.50%");
    }
}
