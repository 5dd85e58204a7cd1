//! Numbers for people: durations, counts and shares in a few characters, the same on every screen;
//! and sizes as people write them (`4k`, `256MiB`), read and written back.

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

/// A size that is not bytes with an optional binary suffix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected bytes with an optional k, m or g suffix (4096, 4k, 256m), got `{0}`")]
pub struct SizeError(pub String);

/// Parses a byte count: `4096`, `4k`, `128K`, `1m`, `256MiB`, `2g` (binary units, any case, an
/// optional `b` or `ib` after the unit).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let bad = || SizeError(text.to_string());
    let lower = text.trim().to_ascii_lowercase();
    let unit_free = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, shift) = match unit_free.char_indices().last() {
        Some((i, 'k')) => (&unit_free[..i], 10),
        Some((i, 'm')) => (&unit_free[..i], 20),
        Some((i, 'g')) => (&unit_free[..i], 30),
        _ => (unit_free, 0),
    };
    let count: u64 = digits.trim().parse().map_err(|_| bad())?;
    count.checked_mul(1u64 << shift).ok_or_else(bad)
}

/// `4096` → `4k`, `268435456` → `256m`; sizes that are not a whole number of units stay bytes.
/// [`parse_size`] reads it back.
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(30, "g"), (20, "m"), (10, "k")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// `4096` → `4 KiB`, `268435456` → `256 MiB`, for sentences; sizes that are not a whole number
/// of units stay bytes (`1536 B`).
pub fn iec_size(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} B")
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

    #[test]
    fn sizes_in_sentences_carry_their_unit() {
        assert_eq!(iec_size(4096), "4 KiB");
        assert_eq!(iec_size(256 << 20), "256 MiB");
        assert_eq!(iec_size(2 << 30), "2 GiB");
        assert_eq!(iec_size(1536), "1536 B");
    }

    #[test]
    fn sizes_are_read_in_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("128K"), Ok(128 << 10));
        assert_eq!(parse_size("128KiB"), Ok(128 << 10));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("512b"), Ok(512));
        for bad in ["4x", "", "four", "k", "99999999999g"] {
            assert_eq!(parse_size(bad), Err(SizeError(bad.to_string())), "{bad}");
        }
    }

    #[test]
    fn sizes_are_written_back_in_the_largest_whole_unit() {
        for bytes in [4096, 128 << 10, 256 << 20, 2 << 30, 1000, 3 << 20] {
            assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
        }
        assert_eq!(format_size(4096), "4k");
        assert_eq!(format_size(1000), "1000");
    }
}
