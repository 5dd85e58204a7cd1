//! `--device DEV`: one PCI function's row, with the rows that are no one device's (`deferred`
//! and `unattributed` work), in snapshots and in the report ([`crate::report::Report::apply_device_filter`]:
//! the report knows the filter, not the other way round).

use crate::snapshot::{Device, RowKind, Snapshot};
use iommutop_abi::pci::PciAddress;
use serde::{Deserialize, Serialize};

/// The filter `--device` asked for, as the report records it (`run.device_filter`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceFilter {
    /// As given: a PCI address, a NIC or a disk name (`nvme0n1`).
    pub device: String,
    /// The PCI function it resolved to.
    pub pci_address: PciAddress,
}

impl DeviceFilter {
    /// How views name it: `eth0 (0000:00:05.0)`, or the address alone when it was given.
    pub fn label(&self) -> String {
        let address = self.pci_address.to_string();
        if self.device == address {
            address
        } else {
            format!("{} ({})", self.device, self.pci_address)
        }
    }

    /// Whether `row` stays: the function's own row (or a row that folds in the name given),
    /// deferred work and unattributed IOMMU work (no device of their own to filter them by).
    pub fn keeps(&self, row: &Device) -> bool {
        let address = self.pci_address.to_string();
        matches!(row.kind, RowKind::Deferred | RowKind::Unattributed)
            || row.key == address
            || row.pci_address == Some(self.pci_address)
            || row.names.contains(&self.device)
    }

    pub fn apply_to_snapshot(&self, snapshot: &mut Snapshot) {
        snapshot.devices.retain(|row| self.keeps(row));
        let address = self.pci_address.to_string();
        let devices = &snapshot.devices;
        snapshot
            .open_calls
            .retain(|open| open.key == address || devices.iter().any(|row| row.key == open.key));
    }

    /// How the summary names it: `vda (0000:00:02.0)`, or the address alone.
    pub fn describe(&self) -> String {
        let address = self.pci_address.to_string();
        if self.device == address {
            address
        } else {
            format!("{} ({})", self.device, self.pci_address)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::StackSample;

    const VDA: &str = "0000:00:02.0";

    fn row(key: &str, kind: RowKind, names: &[&str]) -> Device {
        Device {
            key: key.into(),
            kind,
            pci_address: (kind == RowKind::Pci).then(|| key.parse().expect("address")),
            driver: None,
            names: names.iter().map(|n| n.to_string()).collect(),
            iommu_group: None,
            domain_type: None,
            iommu_unit: None,
            physfn: None,
            ops: Default::default(),
            completions: 0,
            derived: Default::default(),
            pid: None,
            dma_map_directions: Default::default(),
        }
    }

    fn rows() -> Vec<Device> {
        vec![
            row(VDA, RowKind::Pci, &["vda"]),
            row("0000:00:03.0", RowKind::Pci, &["eth0"]),
            row("deferred", RowKind::Deferred, &[]),
            row("deferred:iommu-fq", RowKind::Deferred, &[]),
            row("unattributed", RowKind::Unattributed, &[]),
            row("platform@1", RowKind::Device, &[]),
            row("sdb", RowKind::Disk, &["sdb"]),
        ]
    }

    fn vda() -> DeviceFilter {
        DeviceFilter {
            device: "vda".into(),
            pci_address: VDA.parse().expect("address"),
        }
    }

    #[test]
    fn the_devices_row_and_work_of_no_device_are_kept() {
        let mut snapshot = Snapshot {
            devices: rows(),
            ..Snapshot::default()
        };
        vda().apply_to_snapshot(&mut snapshot);
        let keys: Vec<String> = snapshot.devices.iter().map(|d| d.key.to_string()).collect();
        assert_eq!(keys, [VDA, "deferred", "deferred:iommu-fq", "unattributed"]);
    }

    #[test]
    fn a_row_that_folds_in_the_name_given_is_that_devices() {
        let filter = DeviceFilter {
            device: "sdb".into(),
            pci_address: "0000:00:07.0".parse().expect("address"),
        };
        let kept: Vec<String> = rows()
            .into_iter()
            .filter(|r| filter.keeps(r))
            .map(|r| r.key.to_string())
            .collect();
        assert!(kept.contains(&"sdb".to_string()), "{kept:?}");
        assert!(!kept.contains(&VDA.to_string()), "{kept:?}");
    }

    #[test]
    fn a_filtered_report_keeps_the_rows_their_intervals_and_call_paths_and_says_so() {
        let mut report = crate::report::fixtures::full_report();
        report.devices = rows();
        report.intervals[0].devices = rows()
            .iter()
            .map(|r| {
                let point = crate::report::IntervalDevice {
                    dma_map_per_s: 1.0,
                    translation_ns_per_io: None,
                    completions_per_s: 0.0,
                };
                (r.key.clone(), point)
            })
            .collect();
        let stack = |device: &str| StackSample {
            device: device.into(),
            op: iommutop_abi::Op::DmaMap,
            samples: 1,
            total_ns: 1,
            frames: vec!["dma_map_page_attrs".into()],
        };
        report.stacks = vec![stack(VDA), stack("0000:00:03.0"), stack("unattributed")];
        report.apply_device_filter(&vda());
        assert_eq!(report.devices.len(), 4);
        let interval_keys: Vec<String> = report.intervals[0]
            .devices
            .keys()
            .map(ToString::to_string)
            .collect();
        assert!(!interval_keys.contains(&"0000:00:03.0".to_string()));
        assert_eq!(interval_keys.len(), 4);
        let stack_devices: Vec<String> =
            report.stacks.iter().map(|s| s.device.to_string()).collect();
        assert_eq!(stack_devices, [VDA, "unattributed"]);
        assert_eq!(report.run.device_filter, Some(vda()));
        let json = serde_json::to_value(&report).expect("serializes");
        assert_eq!(
            json["run"]["device_filter"],
            serde_json::json!({"device": "vda", "pci_address": VDA})
        );
    }
}
