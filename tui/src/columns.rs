//! The device table's columns: what each shows, how it sorts, how wide it is, and which ones go
//! first when the terminal is too narrow for all of them.

use crate::format;
use iommutop_model::sample::Op;
use iommutop_model::snapshot::Device;
use std::cmp::Ordering;

/// One column of the device table, in display order. Its name (`maps-per-s`, `ns-per-io`, ...)
/// is what `--sort` takes; the header title is accepted too.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    strum::EnumCount,
    strum::VariantArray,
    strum::IntoStaticStr,
)]
#[strum(serialize_all = "kebab-case")]
pub enum Column {
    /// PCI address (or the row's key: `deferred`, a disk name, ...).
    Device,
    Driver,
    /// Disks and netdevs folded into the row.
    Names,
    /// IOMMU domain type of the device's group (`DMA`, `DMA-FQ`, `identity`).
    Domain,
    MapsPerS,
    MbPerS,
    MapP50,
    MapP99,
    UnmapP50,
    UnmapP99,
    /// IOVA allocation latency, p50.
    IovaP50,
    SyncsPerS,
    FlushesPerS,
    /// ns of translation per completed I/O.
    NsPerIo,
    /// Translation time over wall time.
    Cpu,
}

/// A `--sort` value that names no column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown column `{given}`{}: one of {}", suggestion(*.nearest), Column::names().join(", "))]
pub struct UnknownColumn {
    pub given: String,
    /// The column whose name or title is closest to what was given, if one is close.
    pub nearest: Option<Column>,
}

fn suggestion(nearest: Option<Column>) -> String {
    nearest
        .map(|c| format!(" (did you mean `{}`?)", c.name()))
        .unwrap_or_default()
}

/// How alike a typed name must be to a column's (Jaro-Winkler) to be suggested.
const SUGGESTION_SIMILARITY: f64 = 0.8;

/// How a column's values compare.
#[derive(Debug, Clone, PartialEq, PartialOrd)]
pub enum SortValue {
    Text(String),
    /// `None` (not measured) always sorts last, whatever the direction.
    Number(Option<f64>),
}

impl Column {
    /// Every column, in display order.
    pub const ALL: &[Column] = <Column as strum::VariantArray>::VARIANTS;

    /// Which columns stay when the terminal is narrow: earlier ones first.
    const PRIORITY: [Column; <Column as strum::EnumCount>::COUNT] = [
        Column::Device,
        Column::MapsPerS,
        Column::NsPerIo,
        Column::Cpu,
        Column::Names,
        Column::MapP99,
        Column::MbPerS,
        Column::Driver,
        Column::MapP50,
        Column::FlushesPerS,
        Column::UnmapP99,
        Column::IovaP50,
        Column::SyncsPerS,
        Column::Domain,
        Column::UnmapP50,
    ];

    /// The name to type in a shell (`maps-per-s`).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Every column's name, in display order.
    pub fn names() -> Vec<&'static str> {
        Column::ALL.iter().map(|c| c.name()).collect()
    }

    /// The column named `text`: its name or its header title, ignoring case (`_` for `-` too).
    pub fn parse(text: &str) -> Result<Column, UnknownColumn> {
        let typed = text.trim().to_lowercase().replace('_', "-");
        let spelled_as = |c: &Column| [c.name().to_string(), c.title().to_lowercase()];
        if let Some(&column) = Column::ALL.iter().find(|c| spelled_as(c).contains(&typed)) {
            return Ok(column);
        }
        let nearest = Column::ALL
            .iter()
            .map(|&c| {
                let likeness = spelled_as(&c)
                    .iter()
                    .map(|spelling| strsim::jaro_winkler(&typed, spelling))
                    .fold(0.0, f64::max);
                (likeness, c)
            })
            .filter(|&(likeness, _)| likeness >= SUGGESTION_SIMILARITY)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, c)| c);
        Err(UnknownColumn {
            given: text.to_string(),
            nearest,
        })
    }

    /// The header text.
    pub fn title(self) -> &'static str {
        match self {
            Column::Device => "DEVICE",
            Column::Driver => "DRIVER",
            Column::Names => "NAMES",
            Column::Domain => "DOMAIN",
            Column::MapsPerS => "MAPS/s",
            Column::MbPerS => "MB/s",
            Column::MapP50 => "MAP50",
            Column::MapP99 => "MAP99",
            Column::UnmapP50 => "UNMAP50",
            Column::UnmapP99 => "UNMAP99",
            Column::IovaP50 => "IOVA50",
            Column::SyncsPerS => "SYNC/s",
            Column::FlushesPerS => "FLUSH/s",
            Column::NsPerIo => "NS/IO",
            Column::Cpu => "CPU%",
        }
    }

    /// What the column means, for the help overlay and the footer's sort indicator.
    pub fn description(self) -> &'static str {
        match self {
            Column::Device => "PCI address, or deferred work",
            Column::Driver => "bound driver",
            Column::Names => "its disks and netdevs",
            Column::Domain => "IOMMU domain type",
            Column::MapsPerS => "DMA API maps per second",
            Column::MbPerS => "MB mapped per second",
            Column::MapP50 => "dma_map latency, median",
            Column::MapP99 => "dma_map latency, p99",
            Column::UnmapP50 => "dma_unmap latency, median",
            Column::UnmapP99 => "dma_unmap latency, p99",
            Column::IovaP50 => "IOVA allocation, median",
            Column::SyncsPerS => "IOTLB syncs per second",
            Column::FlushesPerS => "IOTLB flushes per second",
            Column::NsPerIo => "translation ns per I/O",
            Column::Cpu => "translation, share of a CPU",
        }
    }

    /// Width in cells (the widest value or the title, whichever is wider).
    pub fn width(self) -> u16 {
        match self {
            Column::Device => 12,
            Column::Driver => 7,
            Column::Names => 8,
            Column::Domain => 8,
            Column::UnmapP50 | Column::UnmapP99 | Column::FlushesPerS => 7,
            _ => 6,
        }
    }

    /// Text columns are left-aligned, numbers right-aligned.
    pub fn is_text(self) -> bool {
        matches!(
            self,
            Column::Device | Column::Driver | Column::Names | Column::Domain
        )
    }

    /// Numbers sort largest first by default, text A to Z.
    pub fn descending_by_default(self) -> bool {
        !self.is_text()
    }

    /// The column after this one (wrapping), for cycling the sort.
    pub fn next(self) -> Column {
        let i = Column::ALL.iter().position(|&c| c == self).unwrap_or(0);
        Column::ALL[(i + 1) % Column::ALL.len()]
    }

    /// The column before this one (wrapping).
    pub fn previous(self) -> Column {
        let i = Column::ALL.iter().position(|&c| c == self).unwrap_or(0);
        Column::ALL[(i + Column::ALL.len() - 1) % Column::ALL.len()]
    }

    /// The value a row sorts by.
    pub fn sort_value(self, device: &Device) -> SortValue {
        let p = |op: Op, q: fn(&iommutop_model::Latency) -> u64| {
            SortValue::Number(device.op(op).latency.as_ref().map(|l| q(l) as f64))
        };
        match self {
            Column::Device => SortValue::Text(device.key.to_string()),
            Column::Driver => SortValue::Text(device.driver.clone().unwrap_or_default()),
            Column::Names => SortValue::Text(device.names.join(",")),
            Column::Domain => SortValue::Text(device.domain_type.clone().unwrap_or_default()),
            Column::MapsPerS => SortValue::Number(Some(device.op(Op::DmaMap).rate_per_s)),
            Column::MbPerS => SortValue::Number(Some(mapped_bytes_per_s(device))),
            Column::MapP50 => p(Op::DmaMap, |l| l.p50_ns),
            Column::MapP99 => p(Op::DmaMap, |l| l.p99_ns),
            Column::UnmapP50 => p(Op::DmaUnmap, |l| l.p50_ns),
            Column::UnmapP99 => p(Op::DmaUnmap, |l| l.p99_ns),
            Column::IovaP50 => p(Op::IovaAlloc, |l| l.p50_ns),
            Column::SyncsPerS => SortValue::Number(Some(device.op(Op::IotlbSync).rate_per_s)),
            Column::FlushesPerS => SortValue::Number(Some(device.op(Op::IotlbFlush).rate_per_s)),
            Column::NsPerIo => SortValue::Number(device.derived.translation_ns_per_io),
            Column::Cpu => SortValue::Number(device.derived.cpu_share),
        }
    }

    /// The cell text.
    pub fn cell(self, device: &Device) -> String {
        let latency = |op: Op, q: fn(&iommutop_model::Latency) -> u64| {
            format::ns(device.op(op).latency.as_ref().map(q))
        };
        match self {
            Column::Device => device.key.to_string(),
            Column::Driver => text(device.driver.as_deref()),
            Column::Names => {
                if device.names.is_empty() {
                    format::NONE.to_string()
                } else {
                    device.names.join(",")
                }
            }
            Column::Domain => text(device.domain_type.as_deref()),
            Column::MapsPerS => format::rate(device.op(Op::DmaMap).rate_per_s),
            Column::MbPerS => format::mb_per_s(mapped_bytes_per_s(device)),
            Column::MapP50 => latency(Op::DmaMap, |l| l.p50_ns),
            Column::MapP99 => latency(Op::DmaMap, |l| l.p99_ns),
            Column::UnmapP50 => latency(Op::DmaUnmap, |l| l.p50_ns),
            Column::UnmapP99 => latency(Op::DmaUnmap, |l| l.p99_ns),
            Column::IovaP50 => latency(Op::IovaAlloc, |l| l.p50_ns),
            Column::SyncsPerS => format::rate(device.op(Op::IotlbSync).rate_per_s),
            Column::FlushesPerS => format::rate(device.op(Op::IotlbFlush).rate_per_s),
            Column::NsPerIo => format::ns_f64(device.derived.translation_ns_per_io),
            Column::Cpu => format::cpu(device.derived.cpu_share),
        }
    }

    /// The columns that fit in `width` cells (with one cell between columns), most important
    /// first, returned in display order.
    pub fn fitting(width: u16) -> Vec<Column> {
        Column::fitting_by(usize::from(width), |c| usize::from(c.width()))
    }

    /// [`Column::fitting`] with each column `width_of` cells wide (`top --batch`: as wide as
    /// its widest cell). The first, DEVICE, is kept even when it alone is wider.
    pub fn fitting_by(width: usize, width_of: impl Fn(Column) -> usize) -> Vec<Column> {
        let mut chosen = Vec::new();
        let mut used = 0;
        for column in Column::PRIORITY {
            let gap = usize::from(!chosen.is_empty());
            let needed = width_of(column) + gap;
            if used + needed <= width || chosen.is_empty() {
                used += needed;
                chosen.push(column);
            }
        }
        chosen.sort();
        chosen
    }
}

/// Compares two rows by `column`; unmeasured numbers last in either direction.
pub fn compare(column: Column, descending: bool, a: &Device, b: &Device) -> Ordering {
    let ordering = match (column.sort_value(a), column.sort_value(b)) {
        (SortValue::Text(x), SortValue::Text(y)) => directed(x.cmp(&y), descending),
        (SortValue::Number(Some(x)), SortValue::Number(Some(y))) => {
            directed(x.total_cmp(&y), descending)
        }
        (SortValue::Number(Some(_)), SortValue::Number(None)) => Ordering::Less,
        (SortValue::Number(None), SortValue::Number(Some(_))) => Ordering::Greater,
        _ => Ordering::Equal,
    };
    ordering.then_with(|| a.key.to_string().cmp(&b.key.to_string()))
}

fn directed(ordering: Ordering, descending: bool) -> Ordering {
    if descending {
        ordering.reverse()
    } else {
        ordering
    }
}

/// Bytes the DMA API mapped per second over the interval.
pub fn mapped_bytes_per_s(device: &Device) -> f64 {
    let map = device.op(Op::DmaMap);
    if map.count == 0 || map.rate_per_s <= 0.0 {
        return 0.0;
    }
    map.bytes as f64 * map.rate_per_s / map.count as f64
}

fn text(value: Option<&str>) -> String {
    value.unwrap_or(format::NONE).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_columns_fit_in_a_wide_terminal() {
        let total: u16 = Column::ALL.iter().map(|c| c.width() + 1).sum();
        assert_eq!(Column::fitting(total), Column::ALL.to_vec());
    }

    #[test]
    fn narrow_terminals_keep_the_important_columns_in_display_order() {
        let columns = Column::fitting(78);
        assert!(columns.contains(&Column::Device));
        assert!(columns.contains(&Column::MapsPerS));
        assert!(columns.contains(&Column::NsPerIo));
        assert!(columns.contains(&Column::Cpu));
        assert!(!columns.contains(&Column::UnmapP50));
        let mut sorted = columns.clone();
        sorted.sort();
        assert_eq!(columns, sorted);
        let width: u16 = columns.iter().map(|c| c.width()).sum::<u16>() + columns.len() as u16 - 1;
        assert!(width <= 78);
    }

    /// A column left out of the priority list would never be shown.
    #[test]
    fn every_column_has_one_priority() {
        let mut prioritised = Column::PRIORITY.to_vec();
        prioritised.sort();
        assert_eq!(prioritised, Column::ALL);
    }

    /// `top --batch` indexes its cells by a column's discriminant.
    #[test]
    fn a_column_s_discriminant_is_its_index_in_all() {
        for (i, &column) in Column::ALL.iter().enumerate() {
            assert_eq!(column as usize, i, "{column:?}");
        }
    }

    #[test]
    fn the_device_column_is_kept_even_when_nothing_fits() {
        assert_eq!(Column::fitting(3), vec![Column::Device]);
    }

    #[test]
    fn titles_fit_their_columns() {
        for column in Column::ALL {
            assert!(column.title().len() as u16 <= column.width(), "{column:?}");
        }
    }

    /// The names are a command-line interface: scripts type them.
    #[test]
    fn columns_have_names_to_type_in_a_shell() {
        assert_eq!(
            Column::names(),
            [
                "device",
                "driver",
                "names",
                "domain",
                "maps-per-s",
                "mb-per-s",
                "map-p50",
                "map-p99",
                "unmap-p50",
                "unmap-p99",
                "iova-p50",
                "syncs-per-s",
                "flushes-per-s",
                "ns-per-io",
                "cpu",
            ]
        );
    }

    #[test]
    fn every_name_and_title_parses_back_to_its_column() {
        for &column in Column::ALL {
            assert_eq!(Column::parse(column.name()), Ok(column));
            assert_eq!(Column::parse(column.title()), Ok(column));
            assert_eq!(Column::parse(&column.title().to_lowercase()), Ok(column));
        }
        assert_eq!(Column::parse("NS_PER_IO"), Ok(Column::NsPerIo));
        assert_eq!(Column::parse("cpu%"), Ok(Column::Cpu));
    }

    #[test]
    fn an_unknown_column_suggests_the_nearest_and_lists_them_all() {
        let error = Column::parse("ns-per-op").expect_err("unknown");
        assert_eq!(error.nearest, Some(Column::NsPerIo));
        let message = error.to_string();
        assert!(
            message.starts_with(
                "unknown column `ns-per-op` (did you mean `ns-per-io`?): one of device, driver,"
            ),
            "{message}"
        );
        assert!(message.ends_with("ns-per-io, cpu"), "{message}");
        assert!(!message.contains('\n'));
    }

    #[test]
    fn nothing_is_suggested_for_a_name_like_no_column() {
        let error = Column::parse("zzzz").expect_err("unknown");
        assert_eq!(error.nearest, None);
        assert!(error
            .to_string()
            .starts_with("unknown column `zzzz`: one of device"));
        assert!(Column::parse("").is_err());
    }

    #[test]
    fn cycling_visits_every_column() {
        let mut c = Column::Device;
        for _ in 0..Column::ALL.len() {
            c = c.next();
        }
        assert_eq!(c, Column::Device);
        assert_eq!(Column::Device.previous(), Column::Cpu);
        assert_eq!(Column::Cpu.next(), Column::Device);
    }
}
