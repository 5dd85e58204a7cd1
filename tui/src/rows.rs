//! Which rows the device table shows, and in what order: the filter and the sort that the live
//! view and `top --batch` share.

use crate::columns::{self, Column};
use iommutop_model::snapshot::Device;
use iommutop_model::waiting::DmaWaiting;

/// The devices that match `filter` (see [`matches_filter`]), sorted by `sort`.
pub fn shown<'a>(
    devices: &'a [Device],
    sort: Column,
    descending: bool,
    filter: &str,
) -> Vec<&'a Device> {
    let needle = filter.to_lowercase();
    let mut rows: Vec<&Device> = devices
        .iter()
        .filter(|d| matches_filter(d, &needle))
        .collect();
    rows.sort_by(|a, b| columns::compare(sort, descending, a, b));
    rows
}

/// Whether a row mentions `needle` (lower case; empty matches every row) in its key, driver,
/// names or domain type.
pub fn matches_filter(device: &Device, needle: &str) -> bool {
    let hit = |text: &str| text.to_lowercase().contains(needle);
    needle.is_empty()
        || hit(&device.key.to_string())
        || device.driver.as_deref().is_some_and(hit)
        || device.names.iter().any(|n| hit(n))
        || device.domain_type.as_deref().is_some_and(hit)
}

/// The rows whose DMA calls waited enough for it to be a finding, most waiting first.
pub fn waiting<'a>(rows: &[&'a Device]) -> Vec<(&'a Device, DmaWaiting)> {
    let mut waiting: Vec<_> = rows
        .iter()
        .filter_map(|&d| Some((d, DmaWaiting::finding(d)?)))
        .collect();
    waiting.sort_by(|a, b| b.1.share().total_cmp(&a.1.share()));
    waiting
}
