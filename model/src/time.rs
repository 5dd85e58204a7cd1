//! RFC 3339 timestamps in UTC (jiff formats them).

use std::time::{SystemTime, UNIX_EPOCH};

/// `2025-03-01T12:34:56Z`: whole seconds, UTC. Times before 1970 are written as the epoch.
pub fn rfc3339_utc(time: SystemTime) -> String {
    let seconds = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since_epoch| since_epoch.as_secs());
    // Whole seconds print without a fraction. Beyond jiff's range (year 9999) is not a time
    // this tool meets; it is written as the last second jiff knows.
    let instant = i64::try_from(seconds)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    jiff::Timestamp::from_second(instant.as_second())
        .unwrap_or(instant)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(seconds: u64) -> String {
        rfc3339_utc(UNIX_EPOCH + Duration::from_secs(seconds))
    }

    #[test]
    fn known_instants() {
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_709_251_199), "2024-02-29T23:59:59Z");
        assert_eq!(at(1_735_689_600), "2025-01-01T00:00:00Z");
        assert_eq!(at(4_107_542_400), "2100-03-01T00:00:00Z");
        assert_eq!(at(1_234_567_890), "2009-02-13T23:31:30Z");
    }

    #[test]
    fn fractions_are_dropped_and_the_past_is_the_epoch() {
        assert_eq!(
            rfc3339_utc(UNIX_EPOCH + Duration::from_millis(1_999)),
            "1970-01-01T00:00:01Z"
        );
        assert_eq!(
            rfc3339_utc(UNIX_EPOCH - Duration::from_secs(5)),
            "1970-01-01T00:00:00Z"
        );
    }
}
