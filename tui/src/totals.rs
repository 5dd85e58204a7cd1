//! The table's last line: what the shown rows add up to, in the columns where a sum means
//! something (rates and the share of a CPU). Latencies and translation per I/O are left blank:
//! a median does not add, and each device's I/O is in its own unit (reads, packets).

use crate::columns::{Column, SortValue};
use crate::format;
use iommutop_model::derive::is_translation_time;
use iommutop_model::sample::Op;
use iommutop_model::snapshot::Device;

/// What the totals line shows in the device column.
pub const LABEL: &str = "total";

/// The totals line's cell for `column` over `rows` (the rows the table shows).
pub fn cell(column: Column, rows: &[&Device]) -> String {
    match column {
        Column::Device => LABEL.to_string(),
        Column::MapsPerS | Column::SyncsPerS | Column::FlushesPerS => {
            format::rate(sum(column, rows))
        }
        Column::MbPerS => format::mb_per_s(sum(column, rows)),
        Column::Cpu => format::cpu(cpu_share(rows)),
        _ => String::new(),
    }
}

/// Whether `column` has a total (the others' totals cells are blank).
pub fn is_summed(column: Column) -> bool {
    matches!(
        column,
        Column::MapsPerS | Column::MbPerS | Column::SyncsPerS | Column::FlushesPerS | Column::Cpu
    )
}

fn sum(column: Column, rows: &[&Device]) -> f64 {
    rows.iter()
        .map(|d| match column.sort_value(d) {
            SortValue::Number(Some(value)) => value,
            _ => 0.0,
        })
        .sum()
}

/// The shown rows' translation time as a share of one CPU; none when a row did translation work
/// it could not time (a counted-only tier), since a sum without it would read as the whole.
fn cpu_share(rows: &[&Device]) -> Option<f64> {
    let untimed_work = |d: &Device| {
        d.derived.cpu_share.is_none()
            && Op::ALL
                .into_iter()
                .any(|op| is_translation_time(op) && d.op(op).count > 0)
    };
    if rows.iter().any(|d| untimed_work(d)) {
        return None;
    }
    Some(rows.iter().filter_map(|d| d.derived.cpu_share).sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use iommutop_model::snapshot::{OpStats, RowKey, RowKind};
    use iommutop_model::Derived;

    fn row(ops: &[(Op, OpStats)], cpu_share: Option<f64>) -> Device {
        Device {
            key: RowKey::Unnamed { kind: "dev", id: 1 },
            kind: RowKind::Device,
            pci_address: None,
            driver: None,
            names: Vec::new(),
            iommu_group: None,
            domain_type: None,
            iommu_unit: None,
            physfn: None,
            ops: ops.iter().cloned().collect(),
            completions: 0,
            derived: Derived {
                cpu_share,
                ..Derived::default()
            },
            pid: None,
            dma_map_directions: None,
        }
    }

    /// 100 maps of `mapped_bytes` together at `maps_per_s`.
    fn device(maps_per_s: f64, mapped_bytes: u64, cpu_share: Option<f64>) -> Device {
        let maps = OpStats {
            count: 100,
            bytes: mapped_bytes,
            rate_per_s: maps_per_s,
            ..OpStats::default()
        };
        row(&[(Op::DmaMap, maps)], cpu_share)
    }

    #[test]
    fn rates_and_cpu_add_up_and_latencies_stay_blank() {
        let a = device(9_000.0, 100 * 4096, Some(0.25));
        let b = device(1_500.0, 100 * 1500, Some(0.05));
        let rows = [&a, &b];
        assert_eq!(cell(Column::Device, &rows), "total");
        assert_eq!(cell(Column::MapsPerS, &rows), "10.5k");
        // 9,000 × 4,096 B + 1,500 × 1,500 B a second = 39.1 MB/s.
        assert_eq!(cell(Column::MbPerS, &rows), "39.1");
        assert_eq!(cell(Column::Cpu, &rows), "30.0%");
        for column in [
            Column::MapP50,
            Column::MapP99,
            Column::NsPerIo,
            Column::Driver,
        ] {
            assert_eq!(cell(column, &rows), "", "{column:?}");
        }
    }

    #[test]
    fn a_row_with_untimed_translation_work_leaves_the_cpu_total_unknown() {
        let timed = device(9_000.0, 4096, Some(0.25));
        let counted_only = device(1_500.0, 1500, None);
        assert_eq!(cell(Column::Cpu, &[&timed, &counted_only]), "-");
        let idle = row(&[], None);
        assert_eq!(cell(Column::Cpu, &[&timed, &idle]), "25.0%");
    }

    #[test]
    fn only_summed_columns_have_totals() {
        let a = device(9_000.0, 4096, Some(0.25));
        for &column in Column::ALL {
            let blank = cell(column, &[&a]).is_empty();
            assert_eq!(
                blank,
                !is_summed(column) && column != Column::Device,
                "{column:?}"
            );
        }
    }
}
