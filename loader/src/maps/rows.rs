//! Statistics rows over a long run: which sources can count no more, and the book of rows being
//! given back to the kernel (ebpf/lib/maps.bpf.h says how the kernel takes them again).
//!
//! A source has ended when no event can reach its key any more: its PCI device is gone or bound
//! to another driver (a device's generation is its binding), its disk or netdev gone or replaced
//! (another diskseq or ifindex), its process exited. Only a source that counted nothing over the
//! last interval is judged, so that a view of the host read a moment late (a driver that has
//! just come back) never ends a source still counting. A source ended wrongly is not lost: its
//! key's next event takes a fresh row, which the totals add under the same labels.

use crate::abi::{iommutop_dev_key, iommutop_key_kind};
use iommutop_model::facts::DeviceFacts;
use iommutop_model::pci::PciAddress;
use iommutop_model::sample::{RawSample, RawSource, SourceKind};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A statistics row's key: kind, id and generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SourceId {
    pub kind: SourceKind,
    pub id: u64,
    pub generation: u32,
}

impl SourceId {
    pub fn of(source: &RawSource) -> SourceId {
        SourceId {
            kind: source.kind,
            id: source.id,
            generation: source.generation,
        }
    }

    pub(crate) fn of_key(key: &iommutop_dev_key) -> SourceId {
        SourceId {
            kind: super::convert::source_kind(key.kind).unwrap_or(SourceKind::Device),
            id: key.id,
            generation: key.generation,
        }
    }

    pub(crate) fn key(&self) -> iommutop_dev_key {
        iommutop_dev_key {
            id: self.id,
            kind: match self.kind {
                SourceKind::Device => iommutop_key_kind::IOMMUTOP_KEY_DEVICE,
                SourceKind::Deferred => iommutop_key_kind::IOMMUTOP_KEY_DEFERRED,
                SourceKind::Disk => iommutop_key_kind::IOMMUTOP_KEY_DISK,
                SourceKind::Netdev => iommutop_key_kind::IOMMUTOP_KEY_NETDEV,
                SourceKind::Unattributed => iommutop_key_kind::IOMMUTOP_KEY_UNATTRIBUTED,
            },
            generation: self.generation,
        }
    }
}

/// What one [`super::probe_maps::ProbeMaps::give_back`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GivenBack {
    /// Sources whose rows left the kernel's lookups (read once more by the next sample).
    pub retired: Vec<SourceId>,
    /// Sources whose rows were zeroed and queued for new keys.
    pub freed: Vec<SourceId>,
}

/// The rows on their way back, and names user space gave keys of its own.
#[derive(Debug, Default)]
pub struct RowBook {
    /// Rows retired, with the number of samples taken when they were.
    retiring: Vec<(iommutop_dev_key, u32, u64)>,
    samples: AtomicU64,
    owned_names: BTreeMap<u64, String>,
    /// How often each row was given back.
    frees: BTreeMap<u32, u32>,
}

impl RowBook {
    /// Rows retired and not yet freed.
    pub fn retiring(&self) -> impl Iterator<Item = (&iommutop_dev_key, u32)> {
        self.retiring.iter().map(|(key, row, _)| (key, *row))
    }

    /// The rows a sample reads: the live ones, and each retired one once more unless its key
    /// took a row again meanwhile (a device rebound to the driver it had, within a scrape): one
    /// source per key in a sample, so that the new row reads as the key's counters restarting,
    /// not as a second source of the same key. What the retired row counted since the sample
    /// that judged it idle (the microseconds before it left the lookups) is then not read.
    pub fn rows_to_read(&self, live: Vec<(iommutop_dev_key, u32)>) -> Vec<(iommutop_dev_key, u32)> {
        let same = |a: &iommutop_dev_key, b: &iommutop_dev_key| {
            a.id == b.id && a.kind == b.kind && a.generation == b.generation
        };
        let again: Vec<(iommutop_dev_key, u32)> = self
            .retiring()
            .filter(|(key, _)| !live.iter().any(|(taken, _)| same(taken, key)))
            .map(|(key, row)| (*key, row))
            .collect();
        live.into_iter().chain(again).collect()
    }

    pub fn retire(&mut self, key: iommutop_dev_key, row: u32) {
        self.retiring
            .push((key, row, self.samples.load(Ordering::Relaxed)));
    }

    /// A sample has read every row, the retiring ones included.
    pub fn sampled(&self) {
        self.samples.fetch_add(1, Ordering::Relaxed);
    }

    /// The retired rows a sample has read since: out of the book, to be freed.
    pub fn take_read(&mut self) -> Vec<(iommutop_dev_key, u32)> {
        let now = self.samples.load(Ordering::Relaxed);
        let (read, waiting) = std::mem::take(&mut self.retiring)
            .into_iter()
            .partition(|(_, _, retired_at)| *retired_at < now);
        self.retiring = waiting;
        read.into_iter().map(|(key, row, _)| (key, row)).collect()
    }

    /// A row was zeroed and queued for a new key: its next key is another life of it.
    pub fn freed(&mut self, row: u32) {
        *self.frees.entry(row).or_default() += 1;
    }

    /// `RawSource::row` of what `row` holds now.
    pub fn life_of(&self, row: u32) -> u64 {
        (u64::from(row) << 32) | u64::from(self.frees.get(&row).copied().unwrap_or(0))
    }

    pub fn name_owned(&mut self, id: u64, name: &str) {
        self.owned_names.insert(id, name.to_string());
    }

    pub fn owned_name(&self, id: u64) -> Option<String> {
        self.owned_names.get(&id).cloned()
    }
}

/// What the host has now, as far as judging sources goes.
pub trait HostNow {
    /// The PCI functions and their drivers.
    fn devices(&self) -> &[DeviceFacts];
    /// The low half of a disk's sequence number (`None`: no such disk; `Some(0)`: a kernel
    /// without them).
    fn disk_generation(&self, name: &str) -> Option<u32>;
    /// A netdev's ifindex in this network namespace (`None`: no such netdev here).
    fn netdev_ifindex(&self, name: &str) -> Option<u32>;
    fn process_alive(&self, pid: u64) -> bool;
}

/// The sources of `current` that can count no more, judged against the host now. Only those that
/// counted nothing since `previous` (where they were already) are judged.
pub fn ended_sources(
    previous: &RawSample,
    current: &RawSample,
    host: &dyn HostNow,
) -> Vec<SourceId> {
    current
        .sources
        .iter()
        .filter(|source| {
            previous
                .sources
                .iter()
                .any(|before| before.same_as(source) && before.ops == source.ops)
        })
        .filter(|source| has_ended(source, host))
        .map(SourceId::of)
        .collect()
}

/// Where the kernel's own addresses begin, on x86-64 and arm64: keys below are user space's (a
/// device's owner, `owned_device_id`).
const KERNEL_ADDRESSES: u64 = 0xffff_0000_0000_0000;

fn has_ended(source: &RawSource, host: &dyn HostNow) -> bool {
    match source.kind {
        SourceKind::Device if source.id < KERNEL_ADDRESSES => false,
        SourceKind::Device => match source.name.parse::<PciAddress>() {
            Ok(address) => match host.devices().iter().find(|d| d.pci_address == address) {
                None => true,
                Some(device) => device.driver != source.driver,
            },
            // Not a PCI function (a platform device, a key user space made): kept.
            Err(_) => false,
        },
        SourceKind::Disk => match host.disk_generation(&source.name) {
            None => true,
            Some(0) => false, // no sequence numbers: a disk of that name is taken to be it
            Some(generation) => generation != source.generation,
        },
        SourceKind::Netdev => host.netdev_ifindex(&source.name) != Some(source.generation),
        SourceKind::Unattributed => source.id != 0 && !host.process_alive(source.id),
        SourceKind::Deferred => false,
    }
}

/// The host as sysfs and procfs under `root` show it, with the PCI facts already read.
pub struct SysfsHost<'f> {
    pub root: PathBuf,
    pub devices: &'f [DeviceFacts],
}

impl SysfsHost<'_> {
    pub fn has_disk(&self, name: &str) -> bool {
        self.disk_dir(name).exists()
    }

    pub fn has_netdev(&self, name: &str) -> bool {
        self.netdev_dir(name).exists()
    }

    fn disk_dir(&self, name: &str) -> PathBuf {
        self.root.join("sys/block").join(name)
    }

    fn netdev_dir(&self, name: &str) -> PathBuf {
        self.root.join("sys/class/net").join(name)
    }
}

impl HostNow for SysfsHost<'_> {
    fn devices(&self) -> &[DeviceFacts] {
        self.devices
    }

    fn disk_generation(&self, name: &str) -> Option<u32> {
        if !self.has_disk(name) {
            return None;
        }
        let seq = read_number(&self.disk_dir(name).join("diskseq"));
        Some(seq.map_or(0, |seq| seq as u32))
    }

    fn netdev_ifindex(&self, name: &str) -> Option<u32> {
        read_number(&self.netdev_dir(name).join("ifindex")).and_then(|n| u32::try_from(n).ok())
    }

    fn process_alive(&self, pid: u64) -> bool {
        self.root.join("proc").join(pid.to_string()).exists()
    }
}

fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use iommutop_model::sample::{Op, OpCounters};

    struct Host {
        devices: Vec<DeviceFacts>,
        disks: BTreeMap<String, u32>,
        netdevs: BTreeMap<String, u32>,
        processes: Vec<u64>,
    }

    impl HostNow for Host {
        fn devices(&self) -> &[DeviceFacts] {
            &self.devices
        }
        fn disk_generation(&self, name: &str) -> Option<u32> {
            self.disks.get(name).copied()
        }
        fn netdev_ifindex(&self, name: &str) -> Option<u32> {
            self.netdevs.get(name).copied()
        }
        fn process_alive(&self, pid: u64) -> bool {
            self.processes.contains(&pid)
        }
    }

    fn nvme_bound_to(driver: &str) -> Host {
        Host {
            devices: vec![DeviceFacts {
                pci_address: "0000:00:04.0".parse().expect("address"),
                driver: Some(driver.into()),
                ..DeviceFacts::default()
            }],
            disks: BTreeMap::from([("nvme0n1".to_string(), 9)]),
            netdevs: BTreeMap::from([("veth1".to_string(), 41)]),
            processes: vec![227],
        }
    }

    fn source(
        kind: SourceKind,
        id: u64,
        name: &str,
        generation: u32,
        driver: Option<&str>,
        maps: u64,
    ) -> RawSource {
        RawSource {
            kind,
            id,
            name: name.into(),
            generation,
            driver: driver.map(str::to_string),
            row: 0,
            ops: [(
                Op::DmaMap,
                OpCounters {
                    count: maps,
                    ..OpCounters::default()
                },
            )]
            .into_iter()
            .collect(),
            map_directions: Default::default(),
        }
    }

    fn sample(sources: Vec<RawSource>) -> RawSample {
        RawSample {
            sources,
            ..RawSample::default()
        }
    }

    const NVME: u64 = 0xffff_8880_0400_0000;

    fn every_kind(nvme_maps: u64) -> Vec<RawSource> {
        vec![
            source(
                SourceKind::Device,
                NVME,
                "0000:00:04.0",
                0x1000,
                Some("nvme"),
                nvme_maps,
            ),
            source(
                SourceKind::Device,
                NVME,
                "0000:00:04.0",
                0x2000,
                Some("vfio-pci"),
                3,
            ),
            // What a userspace driver's owner charged to the device: user space's own key.
            source(SourceKind::Device, 0x40, "0000:00:04.0", 0, None, 3),
            source(SourceKind::Disk, 0xb0, "nvme0n1", 8, None, 5),
            source(SourceKind::Disk, 0xb8, "nvme0n1", 9, None, 5),
            source(SourceKind::Netdev, 0xc0, "veth1", 40, None, 5),
            source(SourceKind::Netdev, 0xc8, "veth1", 41, None, 5),
            source(SourceKind::Unattributed, 227, "sh", 0, None, 5),
            source(SourceKind::Unattributed, 228, "sh", 0, None, 5),
            source(SourceKind::Unattributed, 0, "", 0, None, 5),
            source(SourceKind::Deferred, 0, "", 0, None, 5),
            source(SourceKind::Device, NVME + 0x800, "ff8000.dma", 0, None, 5),
        ]
    }

    fn names(ended: &[SourceId], current: &RawSample) -> Vec<String> {
        ended
            .iter()
            .map(|id| {
                let s = current
                    .sources
                    .iter()
                    .find(|s| SourceId::of(s) == *id)
                    .expect("a source");
                format!("{}/{}", s.name, s.generation)
            })
            .collect()
    }

    #[test]
    fn sources_end_with_their_binding_disk_netdev_or_process() {
        let (before, now) = (sample(every_kind(7)), sample(every_kind(7)));
        let ended = ended_sources(&before, &now, &nvme_bound_to("nvme"));
        assert_eq!(
            names(&ended, &now),
            ["0000:00:04.0/8192", "nvme0n1/8", "veth1/40", "sh/0"],
            "vfio-pci's binding, the replaced disk and netdev, the exited process"
        );
    }

    #[test]
    fn a_source_that_still_counts_is_never_judged() {
        // The host as read says vfio-pci, but nvme's row counted: the view is late.
        let ended = ended_sources(
            &sample(every_kind(7)),
            &sample(every_kind(9)),
            &nvme_bound_to("vfio-pci"),
        );
        let now = sample(every_kind(9));
        assert!(!names(&ended, &now).contains(&"0000:00:04.0/4096".to_string()));
        // A source new in this sample is not judged either.
        let ended = ended_sources(&sample(Vec::new()), &now, &nvme_bound_to("e1000e"));
        assert!(ended.is_empty(), "{ended:?}");
    }

    #[test]
    fn a_gone_device_ends_every_binding() {
        let mut host = nvme_bound_to("nvme");
        host.devices.clear();
        let (before, now) = (sample(every_kind(7)), sample(every_kind(7)));
        let ended = names(&ended_sources(&before, &now, &host), &now);
        assert!(
            ended.contains(&"0000:00:04.0/4096".to_string()),
            "{ended:?}"
        );
        assert!(
            ended.contains(&"0000:00:04.0/8192".to_string()),
            "{ended:?}"
        );
    }

    #[test]
    fn a_retired_row_is_read_once_more_unless_its_key_took_a_row_again() {
        let key = |generation| {
            SourceId {
                kind: SourceKind::Device,
                id: NVME,
                generation,
            }
            .key()
        };
        let mut book = RowBook::default();
        book.retire(key(1), 5);
        book.retire(key(2), 6);
        let rows: Vec<u32> = book
            .rows_to_read(vec![(key(1), 9), (key(3), 7)])
            .into_iter()
            .map(|(_, row)| row)
            .collect();
        assert_eq!(
            rows,
            [9, 7, 6],
            "key 1 took row 9 again: its old row 5 is not read"
        );
    }

    #[test]
    fn retired_rows_are_freed_only_after_a_sample_read_them() {
        let mut book = RowBook::default();
        let key = SourceId {
            kind: SourceKind::Device,
            id: 1,
            generation: 2,
        }
        .key();
        book.retire(key, 5);
        assert!(book.take_read().is_empty(), "not read yet");
        assert_eq!(book.retiring().count(), 1);
        book.sampled();
        let freed = book.take_read();
        assert_eq!(freed.len(), 1);
        assert_eq!(freed[0].1, 5);
        assert_eq!(SourceId::of_key(&freed[0].0).generation, 2);
        assert_eq!(book.retiring().count(), 0);
        let before = book.life_of(5);
        book.freed(5);
        assert_ne!(
            book.life_of(5),
            before,
            "a row given back holds another life"
        );
        assert_ne!(book.life_of(5), book.life_of(4));
    }
}
