//! netperf's keyval output (`-k SELECTORS`, one `NAME=VALUE` per line) and its demo-mode interim
//! results (`-D 1`: `NETPERF_INTERIM_RESULT[n]=...`), as netperf 2.7 writes them.

use std::collections::BTreeMap;

/// The output selectors iommutop asks netperf for (`-k`).
pub const SELECTORS: &[&str] = &[
    "THROUGHPUT",
    "THROUGHPUT_UNITS",
    "MEAN_LATENCY",
    "P50_LATENCY",
    "P90_LATENCY",
    "P99_LATENCY",
    "MIN_LATENCY",
    "MAX_LATENCY",
    "STDDEV_LATENCY",
    "LOCAL_CPU_UTIL",
    "REMOTE_CPU_UTIL",
    "LOCAL_SD",
    "REMOTE_SD",
    "REQUEST_SIZE",
    "RESPONSE_SIZE",
    "ELAPSED_TIME",
    "PROTOCOL",
    "LOCAL_TRANSPORT_RETRANS",
];

/// One line of netperf's output.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// A demo-mode interim result (`NETPERF_INTERIM_RESULT[2]=37047.98`).
    Interim { index: u32, value: f64 },
    /// `NAME=VALUE` (interim units, intervals and endings included).
    KeyValue(String, String),
    /// Anything else (netperf's error messages go to stdout too).
    Other(String),
}

pub fn parse_line(line: &str) -> Line {
    let line = line.trim_end();
    let Some((key, value)) = line.split_once('=') else {
        return Line::Other(line.to_string());
    };
    let valid_key = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || matches!(c, '_' | '[' | ']'));
    if !valid_key {
        return Line::Other(line.to_string());
    }
    if let Some(index) = key
        .strip_prefix("NETPERF_INTERIM_RESULT[")
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|n| n.parse().ok())
    {
        if let Ok(value) = value.trim().parse() {
            return Line::Interim { index, value };
        }
    }
    Line::KeyValue(key.to_string(), value.trim().trim_matches('"').to_string())
}

/// What one netperf request/response test measured. Latencies in µs, as netperf gives them.
#[derive(Debug, Clone, PartialEq)]
pub struct RrResult {
    pub transactions_per_s: f64,
    pub elapsed_s: f64,
    pub mean_latency_us: Option<f64>,
    pub p50_latency_us: Option<f64>,
    pub p90_latency_us: Option<f64>,
    pub p99_latency_us: Option<f64>,
    pub min_latency_us: Option<f64>,
    pub max_latency_us: Option<f64>,
    pub stddev_latency_us: Option<f64>,
    /// Percent of all CPUs; `None` when not measured (netperf says -1).
    pub local_cpu_percent: Option<f64>,
    pub remote_cpu_percent: Option<f64>,
    /// Service demand: µs of CPU per transaction.
    pub local_service_demand_us: Option<f64>,
    pub remote_service_demand_us: Option<f64>,
    pub request_size: Option<u64>,
    pub response_size: Option<u64>,
    pub retransmissions: Option<u64>,
    /// Demo-mode interim results (transactions/s), one per interval.
    pub interim: Vec<f64>,
}

impl RrResult {
    /// Transactions completed (rate × time).
    pub fn transactions(&self) -> u64 {
        (self.transactions_per_s * self.elapsed_s).round().max(0.0) as u64
    }
}

/// What netperf's `-k` output lacks to be a request/response result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RrError {
    /// No throughput: netperf's own words where it printed any (a failed run), else that.
    #[error("{}", netperf_said(.said))]
    NoThroughput { said: Vec<String> },
    /// A throughput in other units than transactions: a stream test.
    #[error("throughput is in {units}, not Trans/s: not a request/response test")]
    NotRequestResponse { units: String },
}

fn netperf_said(said: &[String]) -> String {
    if said.is_empty() {
        "no THROUGHPUT in its output".to_string()
    } else {
        said.join(" / ")
    }
}

/// Reads netperf's whole `-k` output; the error says what is missing, with netperf's own words
/// if it printed any.
pub fn parse_rr(output: &str) -> Result<RrResult, RrError> {
    let mut values: BTreeMap<String, String> = BTreeMap::new();
    let mut interim = Vec::new();
    let mut other = Vec::new();
    for line in output.lines() {
        match parse_line(line) {
            Line::Interim { value, .. } => interim.push(value),
            Line::KeyValue(k, v) => {
                values.insert(k, v);
            }
            Line::Other(text) if !text.trim().is_empty() => other.push(text),
            Line::Other(_) => {}
        }
    }
    let number = |key: &str| values.get(key).and_then(|v| v.parse::<f64>().ok());
    let Some(transactions_per_s) = number("THROUGHPUT") else {
        return Err(RrError::NoThroughput { said: other });
    };
    if let Some(units) = values.get("THROUGHPUT_UNITS") {
        if units != "Trans/s" {
            return Err(RrError::NotRequestResponse {
                units: units.clone(),
            });
        }
    }
    let non_negative = |key: &str| number(key).filter(|v| *v >= 0.0);
    Ok(RrResult {
        transactions_per_s,
        elapsed_s: number("ELAPSED_TIME").unwrap_or(0.0),
        mean_latency_us: non_negative("MEAN_LATENCY"),
        p50_latency_us: non_negative("P50_LATENCY"),
        p90_latency_us: non_negative("P90_LATENCY"),
        p99_latency_us: non_negative("P99_LATENCY"),
        min_latency_us: non_negative("MIN_LATENCY"),
        max_latency_us: non_negative("MAX_LATENCY"),
        stddev_latency_us: non_negative("STDDEV_LATENCY"),
        local_cpu_percent: non_negative("LOCAL_CPU_UTIL"),
        remote_cpu_percent: non_negative("REMOTE_CPU_UTIL"),
        local_service_demand_us: non_negative("LOCAL_SD"),
        remote_service_demand_us: non_negative("REMOTE_SD"),
        request_size: non_negative("REQUEST_SIZE").map(|v| v as u64),
        response_size: non_negative("RESPONSE_SIZE").map(|v| v as u64),
        retransmissions: non_negative("LOCAL_TRANSPORT_RETRANS").map(|v| v as u64),
        interim,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `netperf -H 127.0.0.1 -t TCP_RR -l 3 -P 0 -c -C -D 1 -- -r 1024,1024 -k ...` (2.7.0).
    const TCP_RR: &str = include_str!("../../testdata/netperf-tcp-rr-k.txt");
    /// The same without -c/-C: CPU utilisation is -1.
    const UDP_RR: &str = include_str!("../../testdata/netperf-udp-rr-nocpu.txt");
    /// No netserver listening (netperf writes this to stdout, exit 255).
    const NO_SERVER: &str = include_str!("../../testdata/netperf-no-server.out");

    #[test]
    fn tcp_rr_output_gives_rate_latency_percentiles_and_cpu() {
        let r = parse_rr(TCP_RR).unwrap();
        assert_eq!(r.transactions_per_s, 40839.93);
        assert_eq!(r.elapsed_s, 3.0);
        assert_eq!(r.transactions(), 122520);
        assert_eq!(r.mean_latency_us, Some(24.39));
        assert_eq!(r.p50_latency_us, Some(21.0));
        assert_eq!(r.p90_latency_us, Some(25.0));
        assert_eq!(r.p99_latency_us, Some(116.0));
        assert_eq!(r.local_cpu_percent, Some(96.30));
        assert_eq!(r.remote_cpu_percent, Some(96.30));
        assert_eq!(r.local_service_demand_us, Some(47.161));
        assert_eq!(r.request_size, Some(1024));
        assert_eq!(r.response_size, Some(1024));
        assert_eq!(r.interim, [40365.05, 45116.10, 37047.98]);
    }

    #[test]
    fn unmeasured_cpu_is_none_not_minus_one() {
        let r = parse_rr(UDP_RR).unwrap();
        assert_eq!(r.local_cpu_percent, None);
        assert_eq!(r.remote_cpu_percent, None);
        assert_eq!(r.request_size, Some(64));
        assert!(r.interim.is_empty());
    }

    #[test]
    fn a_failed_run_reports_netperfs_own_words() {
        let err = parse_rr(NO_SERVER).unwrap_err().to_string();
        assert!(
            err.starts_with("establish control: are you sure there is a netserver listening"),
            "{err}"
        );
        assert_eq!(
            parse_rr("").unwrap_err().to_string(),
            "no THROUGHPUT in its output"
        );
    }

    #[test]
    fn lines_are_classified() {
        assert_eq!(
            parse_line("NETPERF_INTERIM_RESULT[2]=37047.98"),
            Line::Interim {
                index: 2,
                value: 37047.98
            }
        );
        assert_eq!(
            parse_line("COMMAND_LINE=\"netperf -H x\""),
            Line::KeyValue("COMMAND_LINE".into(), "netperf -H x".into())
        );
        assert!(matches!(
            parse_line("establish control: x=y"),
            Line::Other(_)
        ));
    }

    #[test]
    fn stream_tests_are_refused() {
        let err = parse_rr("THROUGHPUT=9000\nTHROUGHPUT_UNITS=10^6bits/s\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a request/response test"), "{err}");
    }
}
