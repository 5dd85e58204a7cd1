//! Numbers in at most six characters, so that table columns stay narrow and aligned.
//! Durations reuse the model's [`human_ns`]; `-` stands for "not measured".

use iommutop_model::units::{human_ns, three_digits};
use iommutop_model::waiting::DmaWaiting;

/// What a cell shows when the number does not exist (not timed, nothing to divide by).
pub const NONE: &str = "-";

/// A per-second rate: `0`, `0.5`, `950`, `12.3k`, `4.57M`.
pub fn rate(per_s: f64) -> String {
    if !per_s.is_finite() || per_s <= 0.0 {
        return "0".to_string();
    }
    const UNITS: [(f64, &str); 3] = [(1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (scale, unit) in UNITS {
        if per_s >= scale {
            return format!("{}{unit}", three_digits(per_s / scale));
        }
    }
    if per_s < 10.0 {
        format!("{per_s:.1}")
    } else {
        format!("{per_s:.0}")
    }
}

/// Bytes per second as MB/s (10^6): `0.00`, `4.10`, `12.3`, `850`, `12.3k`.
pub fn mb_per_s(bytes_per_s: f64) -> String {
    let mb = bytes_per_s / 1e6;
    if !mb.is_finite() || mb <= 0.0 {
        return "0".to_string();
    }
    if mb >= 1e3 {
        format!("{}k", three_digits(mb / 1e3))
    } else {
        three_digits(mb)
    }
}

/// A latency in ns, or `-` when not measured.
pub fn ns(value: Option<u64>) -> String {
    value.map_or_else(|| NONE.to_string(), human_ns)
}

/// A fractional number of ns (a mean, a per-I/O figure), or `-`.
pub fn ns_f64(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() && v >= 0.0 => human_ns(v.round() as u64),
        _ => NONE.to_string(),
    }
}

/// A share of one CPU as a percentage: `0.16%`, `12.3%`, `112%`; `-` when not measured.
pub fn cpu(share: Option<f64>) -> String {
    match share {
        Some(s) if s.is_finite() && s >= 0.0 => percent(s),
        _ => NONE.to_string(),
    }
}

/// A fraction as a percentage in at most six characters: `0.16%`, `12.3%`, `100%`.
pub fn percent(share: f64) -> String {
    let p = share * 100.0;
    if p < 10.0 {
        format!("{p:.2}%")
    } else if p < 100.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

/// `0000:00:04.0 75.0% of DMA time switched out`: a device whose DMA map and unmap calls waited
/// enough for it to be a finding (see [`iommutop_model::waiting`]), a share of their measured
/// time; CPU% and NS/IO leave it out.
pub fn waiting(key: &str, waiting: &DmaWaiting) -> String {
    format!(
        "{key} {} of DMA time switched out",
        percent(waiting.share())
    )
}

/// A ratio (maps per I/O, flushes per I/O): `0.02`, `1.00`, `12.5`; `-` when undefined.
pub fn ratio(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() => three_digits(v),
        _ => NONE.to_string(),
    }
}

/// A duration as `45s`, `2m03s`, `1h02m`.
pub fn clock(seconds: u64) -> String {
    if seconds < 60 {
        format!("{seconds}s")
    } else if seconds < 3600 {
        format!("{}m{:02}s", seconds / 60, seconds % 60)
    } else {
        format!("{}h{:02}m", seconds / 3600, (seconds % 3600) / 60)
    }
}

/// A JSON number from a workload's live numbers: integers exact below 100,000, else three
/// significant digits with a unit (`12.3k`).
pub fn number(value: f64) -> String {
    if !value.is_finite() {
        return NONE.to_string();
    }
    if value.fract() == 0.0 && value.abs() < 1e5 {
        return format!("{value:.0}");
    }
    if value.abs() >= 1e3 {
        return rate(value.abs()).to_string();
    }
    three_digits(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_fit_six_characters() {
        assert_eq!(rate(0.0), "0");
        assert_eq!(rate(f64::NAN), "0");
        assert_eq!(rate(0.5), "0.5");
        assert_eq!(rate(950.4), "950");
        assert_eq!(rate(12_345.0), "12.3k");
        assert_eq!(rate(4_567_890.0), "4.57M");
        assert_eq!(rate(999_999.0), "1000k");
        for v in [0.1, 9.99, 99.9, 999.0, 99_999.0, 123_456_789.0] {
            assert!(rate(v).len() <= 6, "{v}: {}", rate(v));
        }
    }

    #[test]
    fn megabytes_and_shares() {
        assert_eq!(mb_per_s(0.0), "0");
        assert_eq!(mb_per_s(4_096_000.0), "4.10");
        assert_eq!(mb_per_s(850e6), "850");
        assert_eq!(mb_per_s(1.5e9), "1.50k");
        assert_eq!(cpu(Some(0.0016)), "0.16%");
        assert_eq!(cpu(Some(0.123)), "12.3%");
        assert_eq!(cpu(Some(1.125)), "112%");
        assert_eq!(cpu(None), "-");
    }

    #[test]
    fn durations_and_ratios() {
        assert_eq!(ns(None), "-");
        assert_eq!(ns(Some(1_536)), "1.54us");
        assert_eq!(ns_f64(Some(1_600.4)), "1.60us");
        assert_eq!(ratio(Some(1.0)), "1.00");
        assert_eq!(ratio(None), "-");
        assert_eq!(clock(5), "5s");
        assert_eq!(clock(123), "2m03s");
        assert_eq!(clock(3_720), "1h02m");
        assert_eq!(number(42.0), "42");
        assert_eq!(number(1234.5), "1.23k");
        assert_eq!(number(0.25), "0.25");
    }
}
