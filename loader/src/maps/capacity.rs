//! How many keys the per-CPU statistics are created with.
//!
//! Each key (a device, a disk, a NIC, the deferred flush timer, unattributed work) holds every
//! operation's counters and log-linear histogram on every CPU: about 16 KiB per key per CPU, all
//! of it taken when the per-CPU array of rows is created. The rows are sized for the machine they
//! run on (the PCI functions with a driver, block devices and network interfaces, plus headroom
//! for devices that appear later and for the processes whose unattributed work gets a row of its
//! own) rather than for the largest machine. A key beyond them is not silently lost: the probes
//! count it as `device_map_full`. `IOMMUTOP_STATS_ROWS=N` sets the number (tests set 1).

use crate::abi::{IOMMUTOP_MAX_DEVICES, IOMMUTOP_MAX_PROCESSES};
use std::fs;
use std::path::Path;

/// Keys beyond those present at start: every process that may get its own unattributed row,
/// and a few for hot-plugged devices, the deferred timer and the shared unattributed row.
const HEADROOM: usize = IOMMUTOP_MAX_PROCESSES as usize + 16;

/// The number of rows for the statistics on this machine.
pub fn stats_capacity() -> u32 {
    stats_capacity_under(Path::new("/sys")) as u32
}

fn stats_capacity_under(sys: &Path) -> usize {
    let entries = |dir: &str| fs::read_dir(sys.join(dir)).map_or(0, |d| d.flatten().count());
    let pci_with_driver = fs::read_dir(sys.join("bus/pci/devices")).map_or(0, |devices| {
        devices
            .flatten()
            .filter(|device| device.path().join("driver").exists())
            .count()
    });
    let present = pci_with_driver + entries("block") + entries("class/net");
    (present + HEADROOM).min(IOMMUTOP_MAX_DEVICES as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch_dir(path: &Path) {
        fs::create_dir_all(path).expect("creates a directory");
    }

    #[test]
    fn counts_drivers_disks_and_interfaces_plus_headroom() {
        let sys = tempfile::tempdir().expect("temporary directory");
        for i in 0..30 {
            let device = sys
                .path()
                .join(format!("bus/pci/devices/0000:00:{i:02x}.0"));
            touch_dir(&device);
            if i % 2 == 0 {
                touch_dir(&device.join("driver"));
            }
        }
        for name in ["vda", "nvme0n1", "loop0"] {
            touch_dir(&sys.path().join("block").join(name));
        }
        for name in ["lo", "eth0"] {
            touch_dir(&sys.path().join("class/net").join(name));
        }
        assert_eq!(stats_capacity_under(sys.path()), 15 + 3 + 2 + HEADROOM);
    }

    #[test]
    fn has_room_for_every_process_row_and_stays_below_the_abi_maximum() {
        let empty = tempfile::tempdir().expect("temporary directory");
        assert_eq!(stats_capacity_under(empty.path()), HEADROOM);
        let big = tempfile::tempdir().expect("temporary directory");
        for i in 0..300 {
            touch_dir(&big.path().join(format!("class/net/veth{i}")));
        }
        assert_eq!(
            stats_capacity_under(big.path()),
            IOMMUTOP_MAX_DEVICES as usize
        );
    }
}
