//! DMA maps by direction: to the device (a NIC's transmits, an NVMe's writes), from the device (a
//! NIC's receive buffers, an NVMe's reads), both ways, or not known.
//!
//! The kernel counts, beside each row's `dma_map` operation, the maps whose direction the probe
//! read (`struct iommutop_map_directions` in ebpf/include/iommutop/abi.h): count and bytes only,
//! where the map is counted. A map whose direction no probe read (a count-only tracepoint, a
//! kretprobe whose kprobe the kernel skipped, the IOVA API, whose first step takes no direction)
//! is in none of them: here it is the `not_known` part, the map count less the others.
//!
//! For a NIC the split reads per packet: maps to the device per packet sent (the `tx_packets`
//! operation), maps from the device per packet received (its `completion`s: a NIC's completions
//! are the packets its NAPI polls received).

use crate::derive::IoBasis;
pub use crate::map_directions::{Counted, MapDirections};
use crate::op_stats::OpStats;
use iommutop_abi::op::Op;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A row's DMA maps by direction, as a report gives them (`devices[].dma_map_directions`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionSplit {
    pub to_device: Counted,
    pub from_device: Counted,
    pub bidirectional: Counted,
    /// Maps whose direction no probe read: the `dma_map` count (and bytes) less the three above.
    pub not_known: Counted,
    /// For a NIC (`io_basis` `packets`): maps to the device per packet it sent (`tx_packets`);
    /// `null` for any other row, or when it sent none.
    pub to_device_per_packet_sent: Option<f64>,
    /// For a NIC: maps from the device per packet it received (its `completion`s); `null` for
    /// any other row, or when it received none.
    pub from_device_per_packet_received: Option<f64>,
}

impl DirectionSplit {
    /// The split of a row with these operations, whose maps by direction were `directions`;
    /// None for a row that made no DMA map.
    pub fn of(
        directions: &MapDirections,
        ops: &BTreeMap<Op, OpStats>,
        io_basis: Option<IoBasis>,
    ) -> Option<DirectionSplit> {
        let count = |op: Op| ops.get(&op).map_or(0, |s| s.count);
        let maps = ops.get(&Op::DmaMap)?;
        if maps.count == 0 {
            return None;
        }
        let known = directions.known();
        let per = |maps: u64, packets: u64| {
            (io_basis == Some(IoBasis::Packets) && packets > 0)
                .then(|| maps as f64 / packets as f64)
        };
        Some(DirectionSplit {
            to_device: directions.to_device,
            from_device: directions.from_device,
            bidirectional: directions.bidirectional,
            not_known: Counted {
                count: maps.count.saturating_sub(known.count),
                bytes: maps.bytes.saturating_sub(known.bytes),
            },
            to_device_per_packet_sent: per(directions.to_device.count, count(Op::TxPackets)),
            from_device_per_packet_received: per(
                directions.from_device.count,
                count(Op::Completion),
            ),
        })
    }

    /// One line for people: `maps by direction: 1,234 to the device (2.00 per packet sent), …`.
    pub fn sentence(&self) -> String {
        use iommutop_abi::units::human_count;
        let mut parts = vec![
            format!(
                "{} to the device{}",
                human_count(self.to_device.count),
                self.to_device_per_packet_sent
                    .map(|p| format!(" ({p:.2} per packet sent)"))
                    .unwrap_or_default()
            ),
            format!(
                "{} from the device{}",
                human_count(self.from_device.count),
                self.from_device_per_packet_received
                    .map(|p| format!(" ({p:.2} per packet received)"))
                    .unwrap_or_default()
            ),
        ];
        if self.bidirectional.count > 0 {
            parts.push(format!(
                "{} both ways",
                human_count(self.bidirectional.count)
            ));
        }
        if self.not_known.count > 0 {
            parts.push(format!(
                "{} of no known direction",
                human_count(self.not_known.count)
            ));
        }
        format!("DMA maps by direction: {}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(maps: u64, map_bytes: u64, tx: u64, rx: u64) -> BTreeMap<Op, OpStats> {
        let stats = |count: u64, bytes: u64| OpStats {
            count,
            bytes,
            ..OpStats::default()
        };
        BTreeMap::from([
            (Op::DmaMap, stats(maps, map_bytes)),
            (Op::TxPackets, stats(tx, 0)),
            (Op::Completion, stats(rx, 0)),
        ])
    }

    fn counted(count: u64, bytes: u64) -> Counted {
        Counted { count, bytes }
    }

    #[test]
    fn the_kernels_slots_are_indexed_by_dma_data_direction() {
        let d = MapDirections::from_slots([1, 2, 3, 0], [10, 20, 30, 0]);
        assert_eq!(d.bidirectional, counted(1, 10));
        assert_eq!(d.to_device, counted(2, 20));
        assert_eq!(d.from_device, counted(3, 30));
    }

    /// TCP_RR on an e1000e: a transaction's request is a header and a 1-byte fragment mapped to
    /// the device, its response one receive buffer refilled from the device.
    #[test]
    fn a_nic_reads_per_packet_sent_and_received() {
        let directions = MapDirections {
            to_device: counted(2000, 2000 * 67),
            from_device: counted(1000, 1000 * 1522),
            bidirectional: Counted::default(),
        };
        let split = DirectionSplit::of(
            &directions,
            &ops(3000, 2000 * 67 + 1000 * 1522, 1000, 1000),
            Some(IoBasis::Packets),
        )
        .expect("maps were made");
        assert_eq!(split.to_device_per_packet_sent, Some(2.0));
        assert_eq!(split.from_device_per_packet_received, Some(1.0));
        assert_eq!(split.not_known, Counted::default());
        assert_eq!(
            split.sentence(),
            "DMA maps by direction: 2000 to the device (2.00 per packet sent), \
             1000 from the device (1.00 per packet received)"
        );
    }

    #[test]
    fn maps_of_no_read_direction_are_the_rest_and_other_rows_have_no_per_packet_figure() {
        let directions = MapDirections {
            from_device: counted(90, 90 * 4096),
            ..MapDirections::default()
        };
        let split = DirectionSplit::of(
            &directions,
            &ops(100, 100 * 4096, 0, 100),
            Some(IoBasis::Completions),
        )
        .expect("maps were made");
        assert_eq!(split.not_known, counted(10, 10 * 4096));
        assert_eq!(split.from_device_per_packet_received, None);
        assert_eq!(split.to_device_per_packet_sent, None);
        assert!(split.sentence().ends_with("10 of no known direction"));
    }

    #[test]
    fn a_row_without_maps_has_no_split_and_a_nic_that_sent_nothing_no_ratio() {
        assert_eq!(
            DirectionSplit::of(&MapDirections::default(), &ops(0, 0, 5, 5), None),
            None
        );
        let split = DirectionSplit::of(
            &MapDirections {
                from_device: counted(3, 0),
                ..MapDirections::default()
            },
            &ops(3, 0, 0, 3),
            Some(IoBasis::Packets),
        )
        .expect("maps were made");
        assert_eq!(split.to_device_per_packet_sent, None);
        assert_eq!(split.from_device_per_packet_received, Some(1.0));
    }

    #[test]
    fn a_counter_that_went_backwards_counts_from_its_reset() {
        let later = MapDirections {
            to_device: counted(5, 50),
            ..MapDirections::default()
        };
        let earlier = MapDirections {
            to_device: counted(7, 70),
            ..MapDirections::default()
        };
        assert_eq!(later.since(&earlier), later);
        assert_eq!(
            earlier.since(&later).to_device,
            counted(2, 20),
            "an interval's delta"
        );
    }
}
