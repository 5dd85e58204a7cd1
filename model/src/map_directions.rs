//! The maps whose direction the probes read, as counted: to the device, from the device and both
//! ways (`struct iommutop_map_directions` in ebpf/include/iommutop/abi.h). What a report makes
//! of them is [`crate::direction`].

use serde::{Deserialize, Serialize};

/// A count of maps and the bytes they mapped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counted {
    pub count: u64,
    pub bytes: u64,
}

impl Counted {
    pub(crate) fn plus(self, other: Counted) -> Counted {
        Counted {
            count: self.count.saturating_add(other.count),
            bytes: self.bytes.saturating_add(other.bytes),
        }
    }

    /// `self − earlier`, or None when either went backwards (the counters were reset).
    pub(crate) fn since(self, earlier: Counted) -> Option<Counted> {
        Some(Counted {
            count: self.count.checked_sub(earlier.count)?,
            bytes: self.bytes.checked_sub(earlier.bytes)?,
        })
    }
}

/// The maps whose direction was read, by direction: cumulative as read from the kernel (summed
/// over CPUs), or over an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapDirections {
    /// `DMA_TO_DEVICE`: the device reads the buffer (a packet to send, a block to write).
    pub to_device: Counted,
    /// `DMA_FROM_DEVICE`: the device writes the buffer (a receive buffer, a block read).
    pub from_device: Counted,
    /// `DMA_BIDIRECTIONAL`.
    pub bidirectional: Counted,
}

impl MapDirections {
    pub fn is_zero(&self) -> bool {
        *self == MapDirections::default()
    }

    /// From the kernel's slots, indexed by `enum dma_data_direction` (counts, then bytes).
    pub fn from_slots(count: [u64; 4], bytes: [u64; 4]) -> MapDirections {
        let slot = |i: usize| Counted {
            count: count[i],
            bytes: bytes[i],
        };
        MapDirections {
            bidirectional: slot(0),
            to_device: slot(1),
            from_device: slot(2),
        }
    }

    pub fn plus(&self, other: &MapDirections) -> MapDirections {
        MapDirections {
            to_device: self.to_device.plus(other.to_device),
            from_device: self.from_device.plus(other.from_device),
            bidirectional: self.bidirectional.plus(other.bidirectional),
        }
    }

    /// What was counted since `earlier`; everything counted, if a counter went backwards (reset).
    pub fn since(&self, earlier: &MapDirections) -> MapDirections {
        let delta = || {
            Some(MapDirections {
                to_device: self.to_device.since(earlier.to_device)?,
                from_device: self.from_device.since(earlier.from_device)?,
                bidirectional: self.bidirectional.since(earlier.bidirectional)?,
            })
        };
        delta().unwrap_or(*self)
    }

    pub(crate) fn known(&self) -> Counted {
        self.to_device
            .plus(self.from_device)
            .plus(self.bidirectional)
    }
}
