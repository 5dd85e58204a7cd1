//! What a fio run did, as `run.workload.results` holds it: fio's numbers flat at the top (both
//! directions together, then each direction's under its prefix, `read_iops`), what was run below.

use super::PerUnit;
use iommutop_abi::pci::PciAddress;
use iommutop_abi::workload::Headline;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A direction of fio's I/O, the prefix of its numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Direction {
    Read,
    Write,
}

impl Direction {
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// One direction's numbers, each key prefixed with the direction (`read_iops`,
/// `write_clat_p99_us`) among the results.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectionResults {
    pub direction: Direction,
    pub numbers: DirectionNumbers,
}

/// A direction's numbers under their names without the prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionNumbers {
    pub iops: f64,
    pub bw_bytes_per_s: f64,
    pub ios: u64,
    pub bytes: u64,
    /// Latencies in µs, to 0.01; absent when fio did not give them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lat_mean_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clat_mean_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clat_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clat_p90_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clat_p99_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clat_p99_9_us: Option<f64>,
}

impl DirectionNumbers {
    /// A direction's numbers.
    pub fn new(iops: f64, bw_bytes_per_s: f64, ios: u64, bytes: u64) -> DirectionNumbers {
        DirectionNumbers {
            iops,
            bw_bytes_per_s,
            ios,
            bytes,
            lat_mean_us: None,
            clat_mean_us: None,
            clat_p50_us: None,
            clat_p90_us: None,
            clat_p99_us: None,
            clat_p99_9_us: None,
        }
    }
}

impl Serialize for DirectionResults {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut numbers = serde_json::to_value(&self.numbers)
            .and_then(super::results_object)
            .map_err(serde::ser::Error::custom)?;
        // Written beside the bytes per second it comes from, never read back.
        numbers.insert(
            "bw_mib_per_s".to_string(),
            Value::from(self.numbers.bw_bytes_per_s / f64::from(1 << 20)),
        );
        let mut map = serializer.serialize_map(Some(numbers.len()))?;
        for (name, value) in numbers {
            map.serialize_entry(&format!("{}_{name}", self.direction.name()), &value)?;
        }
        map.end()
    }
}

/// The file or device fio was pointed at, as the results show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetResult {
    pub filename: String,
    pub kind: TargetKind,
    pub disk: Option<String>,
    pub pci_address: Option<PciAddress>,
}

/// What fio's target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    BlockDevice,
    File,
}

/// fio's results; see the module's documentation for the layout.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct FioResults {
    pub iops: f64,
    pub bw_bytes_per_s: f64,
    pub ios: u64,
    #[serde(flatten)]
    pub read: Option<DirectionResults>,
    #[serde(flatten)]
    pub write: Option<DirectionResults>,
    #[serde(flatten)]
    pub run: FioDetails,
}

/// What fio was run on and with, and the probes' figures per I/O.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FioDetails {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usr_cpu_percent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sys_cpu_percent: Option<f64>,
    pub runtime_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fio_version: Option<String>,
    /// fio's per-disk utilisation, as it gave it; absent when it gave none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disk_util: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetResult>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// The target's probe counts per I/O, by PCI address (one entry); absent without probes or
    /// when they saw no DMA work on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_io: Option<BTreeMap<PciAddress, PerUnit>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dma_maps_per_io: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iommu_maps_per_io: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_window_s: Option<f64>,
    pub command: Vec<String>,
    /// The unit of work and headline numbers; absent in reports of builds before they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<Headline>,
}

/// Both directions together, as the top of the results has them.
#[derive(Deserialize)]
struct TotalsJson {
    iops: f64,
    bw_bytes_per_s: f64,
    ios: u64,
}

impl<'de> Deserialize<'de> for FioResults {
    /// The direction's prefixed numbers are taken out first and read without their prefix.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<FioResults, D::Error> {
        let mut rest = Map::deserialize(deserializer)?;
        let mut direction = |direction: Direction| -> Result<Option<DirectionResults>, D::Error> {
            let prefix = format!("{}_", direction.name());
            let keys: Vec<String> = rest
                .keys()
                .filter(|k| k.starts_with(&prefix))
                .cloned()
                .collect();
            if keys.is_empty() {
                return Ok(None);
            }
            let numbers: Map<String, Value> = keys
                .into_iter()
                .filter_map(|k| Some((k[prefix.len()..].to_string(), rest.remove(&k)?)))
                .collect();
            let numbers: DirectionNumbers = serde_json::from_value(Value::Object(numbers))
                .map_err(|e| D::Error::custom(format!("fio's {prefix}* numbers: {e}")))?;
            Ok(Some(DirectionResults { direction, numbers }))
        };
        let read = direction(Direction::Read)?;
        let write = direction(Direction::Write)?;
        let rest = Value::Object(rest);
        let totals = TotalsJson::deserialize(&rest).map_err(D::Error::custom)?;
        let run = FioDetails::deserialize(&rest).map_err(D::Error::custom)?;
        Ok(FioResults {
            iops: totals.iops,
            bw_bytes_per_s: totals.bw_bytes_per_s,
            ios: totals.ios,
            read,
            write,
            run,
        })
    }
}
