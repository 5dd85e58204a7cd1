//! sysinfo against fake `/proc` and `/sys` trees.

use super::kernel::{is_lab, kernel_config};
use super::pci::device_facts;
use super::*;
use iommutop_model::facts::{DomainType, IommuVendor};
use std::io::Write;
use std::path::PathBuf;

/// A fake root file system in a temporary directory.
struct FakeRoot {
    dir: tempfile::TempDir,
}

impl FakeRoot {
    fn new() -> FakeRoot {
        FakeRoot {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn file(&self, relative: &str, contents: &str) -> &FakeRoot {
        let path = self.path().join(relative);
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        std::fs::write(path, contents).expect("write");
        self
    }

    fn dir(&self, relative: &str) -> &FakeRoot {
        std::fs::create_dir_all(self.path().join(relative)).expect("mkdir");
        self
    }

    /// A symlink; its target need not exist (sysfs links are read, not followed).
    fn link(&self, relative: &str, target: &str) -> &FakeRoot {
        let path = self.path().join(relative);
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        std::os::unix::fs::symlink(target, path).expect("symlink");
        self
    }

    fn gzip(&self, relative: &str, contents: &str) -> &FakeRoot {
        let path = self.path().join(relative);
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        let file = std::fs::File::create(path).expect("create");
        let mut encoder = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
        encoder.write_all(contents.as_bytes()).expect("compress");
        encoder.finish().expect("finish");
        self
    }
}

const CONFIG: &str = "\
# Automatically generated file; DO NOT EDIT.
CONFIG_CC_VERSION_TEXT=\"gcc (Debian 12.2.0-14) 12.2.0\"
CONFIG_IOMMU_SUPPORT=y
CONFIG_IOMMU_DMA=y
CONFIG_IOMMU_IOVA=y
# CONFIG_IOMMU_DEFAULT_DMA_STRICT is not set
CONFIG_IOMMU_DEFAULT_DMA_LAZY=y
# CONFIG_IOMMU_DEFAULT_PASSTHROUGH is not set
CONFIG_INTEL_IOMMU=y
# CONFIG_INTEL_IOMMU_DEFAULT_ON is not set
CONFIG_AMD_IOMMU=y
CONFIG_VFIO=m
CONFIG_VFIO_PCI=m
CONFIG_NVME_CORE=m
CONFIG_HZ=250
";

/// A q35 guest with VT-d: an NVMe controller, an e1000e, a virtio block device.
fn lab_guest() -> FakeRoot {
    let root = FakeRoot::new();
    root.file("proc/sys/kernel/osrelease", "6.12.95+deb12-amd64\n")
        .file(
            "proc/cmdline",
            "console=ttyS0 intel_iommu=on iommu.strict=0 iommutop.lab=1 init=/init\n",
        )
        .gzip("proc/config.gz", CONFIG)
        .link("sys/class/iommu/dmar0", "../../devices/virtual/iommu/dmar0")
        .file("sys/kernel/iommu_groups/3/type", "DMA-FQ\n")
        .link(
            "sys/kernel/iommu_groups/3/devices/0000:00:02.0",
            "../../../../devices/pci0000:00/0000:00:02.0",
        )
        .file("sys/kernel/iommu_groups/10/type", "identity\n")
        .link(
            "sys/kernel/iommu_groups/10/devices/0000:00:03.0",
            "../../../../devices/pci0000:00/0000:00:03.0",
        )
        .file("sys/kernel/iommu_groups/4/type", "DMA-FQ\n")
        .dir("sys/kernel/iommu_groups/4/devices/0000:00:04.0");
    let nvme = "sys/bus/pci/devices/0000:00:02.0";
    root.file(&format!("{nvme}/vendor"), "0x1b36\n")
        .file(&format!("{nvme}/device"), "0x0010\n")
        .file(&format!("{nvme}/class"), "0x010802\n")
        .link(&format!("{nvme}/driver"), "../../../bus/pci/drivers/nvme")
        .link(
            &format!("{nvme}/iommu_group"),
            "../../../kernel/iommu_groups/3",
        )
        .link(&format!("{nvme}/iommu"), "../../virtual/iommu/dmar0")
        .dir(&format!("{nvme}/nvme/nvme0/nvme0n1"))
        .dir(&format!("{nvme}/nvme/nvme0/power"))
        .dir(&format!("{nvme}/nvme/nvme0/ng0n1"));
    let nic = "sys/bus/pci/devices/0000:00:03.0";
    root.file(&format!("{nic}/vendor"), "0x8086\n")
        .link(&format!("{nic}/driver"), "../../../bus/pci/drivers/e1000e")
        .link(
            &format!("{nic}/iommu_group"),
            "../../../kernel/iommu_groups/10",
        )
        .dir(&format!("{nic}/net/eth0"));
    let virtio = "sys/bus/pci/devices/0000:00:04.0";
    root.link(
        &format!("{virtio}/driver"),
        "../../../bus/pci/drivers/virtio-pci",
    )
    .link(
        &format!("{virtio}/iommu_group"),
        "../../../kernel/iommu_groups/4",
    )
    .dir(&format!("{virtio}/virtio2/block/vda"))
    .dir(&format!("{virtio}/virtio2/driver"))
    .dir("sys/bus/pci/devices/not-a-device");
    // An igb NIC with SR-IOV, two VFs enabled; its first VF (QEMU's devfn + 0x80) bound to igbvf.
    let pf = "sys/bus/pci/devices/0000:00:05.0";
    root.file(&format!("{pf}/vendor"), "0x8086\n")
        .file(&format!("{pf}/device"), "0x10c9\n")
        .link(&format!("{pf}/driver"), "../../../bus/pci/drivers/igb")
        .file(&format!("{pf}/sriov_totalvfs"), "7\n")
        .file(&format!("{pf}/sriov_numvfs"), "2\n")
        .link(&format!("{pf}/virtfn0"), "../0000:00:15.0")
        .dir(&format!("{pf}/net/eth1"));
    let vf = "sys/bus/pci/devices/0000:00:15.0";
    root.file(&format!("{vf}/vendor"), "0x8086\n")
        .file(&format!("{vf}/device"), "0x10ca\n")
        .link(&format!("{vf}/driver"), "../../../bus/pci/drivers/igbvf")
        .link(&format!("{vf}/physfn"), "../0000:00:05.0")
        .dir(&format!("{vf}/net/eth2"));
    root
}

#[test]
fn a_lab_guest_is_described_fully() {
    let root = lab_guest();
    let facts = collect(root.path()).expect("collects");
    assert_eq!(facts.kernel_release.as_deref(), Some("6.12.95+deb12-amd64"));
    assert!(facts.lab);
    assert_eq!(facts.iommu_vendor(), Some(IommuVendor::Intel));
    assert_eq!(facts.dma_mode(), Some(DomainType::DmaFq));
    assert_eq!(facts.cmdline_iommu().iommu_strict.as_deref(), Some("0"));
    let group_ids: Vec<u32> = facts.groups.iter().map(|g| g.id).collect();
    assert_eq!(group_ids, [3, 4, 10]);
    assert_eq!(facts.groups[0].devices, ["0000:00:02.0"]);
    let addresses: Vec<String> = facts
        .devices
        .iter()
        .map(|d| d.pci_address.to_string())
        .collect();
    assert_eq!(
        addresses,
        [
            "0000:00:02.0",
            "0000:00:03.0",
            "0000:00:04.0",
            "0000:00:05.0",
            "0000:00:15.0"
        ]
    );

    let nvme = &facts.devices[0];
    assert_eq!(nvme.driver.as_deref(), Some("nvme"));
    assert_eq!(nvme.vendor_id, Some(0x1b36));
    assert_eq!(nvme.device_id, Some(0x0010));
    assert_eq!(nvme.class, Some(0x010802));
    assert_eq!(nvme.iommu_group, Some(3));
    assert_eq!(nvme.domain_type.as_deref(), Some("DMA-FQ"));
    assert_eq!(nvme.iommu_unit.as_deref(), Some("dmar0"));
    assert_eq!(nvme.disks, ["nvme0n1"]);
    assert_eq!(nvme.children, ["nvme0"]);

    let nic = &facts.devices[1];
    assert_eq!(nic.driver.as_deref(), Some("e1000e"));
    assert_eq!(nic.domain_type.as_deref(), Some("identity"));
    assert_eq!(nic.netdevs, ["eth0"]);
    assert_eq!(nic.iommu_unit, None);

    for function in &facts.devices[..3] {
        assert_eq!(function.physfn, None, "{}", function.pci_address);
        assert_eq!(function.sriov_numvfs, None, "{}", function.pci_address);
    }
    let (pf, vf) = (&facts.devices[3], &facts.devices[4]);
    assert_eq!(pf.sriov_numvfs, Some(2));
    assert_eq!(pf.physfn, None);
    assert_eq!(vf.driver.as_deref(), Some("igbvf"));
    assert_eq!(vf.netdevs, ["eth2"]);
    assert_eq!(vf.physfn, Some(pf.pci_address));
    assert_eq!(vf.sriov_numvfs, None);

    let virtio = &facts.devices[2];
    assert_eq!(virtio.disks, ["vda"]);
    assert_eq!(virtio.children, ["virtio2"]);
    assert_eq!(
        facts
            .owner_of("vda")
            .map(|d| d.pci_address.to_string())
            .as_deref(),
        Some("0000:00:04.0")
    );
}

#[test]
fn kernel_config_keeps_only_iommu_options() {
    let root = lab_guest();
    let config = kernel_config(root.path(), Some("6.12.95+deb12-amd64"));
    let expected: Vec<(&str, &str)> = vec![
        ("AMD_IOMMU", "y"),
        ("INTEL_IOMMU", "y"),
        ("INTEL_IOMMU_DEFAULT_ON", "n"),
        ("IOMMU_DEFAULT_DMA_LAZY", "y"),
        ("IOMMU_DEFAULT_DMA_STRICT", "n"),
        ("IOMMU_DEFAULT_PASSTHROUGH", "n"),
        ("IOMMU_DMA", "y"),
        ("IOMMU_IOVA", "y"),
        ("IOMMU_SUPPORT", "y"),
        ("VFIO", "m"),
        ("VFIO_PCI", "m"),
    ];
    let found: Vec<(&str, &str)> = config
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn kernel_config_falls_back_to_boot() {
    let root = FakeRoot::new();
    root.file(
        "boot/config-6.1.0-56-amd64",
        "CONFIG_INTEL_IOMMU=y\nCONFIG_VIRTIO_IOMMU=m\n",
    );
    let config = kernel_config(root.path(), Some("6.1.0-56-amd64"));
    assert_eq!(config.get("VIRTIO_IOMMU").map(String::as_str), Some("m"));
    assert!(kernel_config(root.path(), Some("6.12.0")).is_empty());
    assert!(kernel_config(root.path(), None).is_empty());
}

#[test]
fn a_corrupt_config_gz_falls_back_too() {
    let root = FakeRoot::new();
    root.file("proc/config.gz", "not gzip at all")
        .file("boot/config-6.1.0", "CONFIG_AMD_IOMMU=y\n");
    let config = kernel_config(root.path(), Some("6.1.0"));
    assert_eq!(config.get("AMD_IOMMU").map(String::as_str), Some("y"));
}

#[test]
fn nvme_multipath_heads_belong_to_their_controller() {
    let root = FakeRoot::new();
    let nvme = "sys/bus/pci/devices/0000:01:00.0";
    root.dir(&format!("{nvme}/nvme/nvme1/nvme1c1n1"))
        .link(
            "sys/class/nvme-subsystem/nvme-subsys1/nvme1",
            "../../../devices/pci0000:00/0000:01:00.0/nvme/nvme1",
        )
        .dir("sys/class/nvme-subsystem/nvme-subsys1/nvme1n1")
        .link("sys/class/nvme-subsystem/nvme-subsys2/nvme2", "elsewhere")
        .dir("sys/class/nvme-subsystem/nvme-subsys2/nvme2n1");
    let facts = device_facts(root.path(), "0000:01:00.0".parse().expect("address"), &[]);
    assert_eq!(facts.disks, ["nvme1c1n1", "nvme1n1"]);
    assert_eq!(facts.children, ["nvme1"]);
}

#[test]
fn an_empty_root_knows_nothing_but_is_no_error() {
    let root = FakeRoot::new();
    let facts = collect(root.path()).expect("collects");
    assert_eq!(facts, iommutop_model::facts::HostFacts::default());
    assert!(!facts.iommu_present());
}

#[test]
fn a_device_with_nothing_readable_degrades_to_none() {
    let root = FakeRoot::new();
    root.dir("sys/bus/pci/devices/0000:00:1f.3")
        .file("sys/bus/pci/devices/0000:00:1f.3/vendor", "garbage\n")
        .file("sys/bus/pci/devices/0000:00:1f.3/device", "0x123456\n")
        .dir("sys/bus/pci/devices/0000:00:1f.3/driver");
    let facts = device_facts(root.path(), "0000:00:1f.3".parse().expect("address"), &[]);
    assert_eq!(facts.pci_address.to_string(), "0000:00:1f.3");
    assert_eq!(
        facts.driver, None,
        "a directory, not a link, names no driver"
    );
    assert_eq!(facts.vendor_id, None);
    assert_eq!(facts.device_id, None, "too wide for a device id");
    assert_eq!(facts.iommu_group, None);
    assert!(facts.disks.is_empty() && facts.netdevs.is_empty() && facts.children.is_empty());
}

#[test]
fn a_missing_root_is_an_error_naming_it() {
    let missing: PathBuf = std::env::temp_dir().join("iommutop-no-such-root-dir");
    let message = collect(&missing).expect_err("no root").to_string();
    assert!(
        message.starts_with(&format!(
            "cannot read system information under {}: ",
            missing.display()
        )),
        "{message}"
    );
}

#[test]
fn the_lab_mark() {
    assert!(is_lab("console=ttyS0 iommutop.lab=1"));
    assert!(is_lab("iommutop.lab"));
    assert!(!is_lab("iommutop.lab=0"));
    assert!(!is_lab("console=ttyS0 iommutop.labx=1"));
}

#[test]
fn the_units_name_their_vendor() {
    let root = FakeRoot::new();
    root.dir("sys/class/iommu/ivhd0")
        .dir("sys/class/iommu/ivhd1");
    let units = iommu_units(root.path());
    assert_eq!(units.len(), 2);
    assert!(units.iter().all(|u| u.vendor == Some(IommuVendor::Amd)));
}

/// virtio-iommu's unit is named after its PCI function; its `device` is the virtio device,
/// bound to `virtio_iommu` (6.12 and 7.3 in the lab).
#[test]
fn a_unit_named_after_its_device_is_told_by_the_devices_driver() {
    let root = FakeRoot::new();
    root.dir("sys/bus/virtio/drivers/virtio_iommu")
        .dir("sys/devices/pci0000:00/0000:00:03.0/virtio0")
        .link(
            "sys/devices/pci0000:00/0000:00:03.0/virtio0/driver",
            "../../../../bus/virtio/drivers/virtio_iommu",
        )
        .dir("sys/class/iommu/0000:00:03.0")
        .link(
            "sys/class/iommu/0000:00:03.0/device",
            "../../../devices/pci0000:00/0000:00:03.0/virtio0",
        )
        .dir("sys/class/iommu/0000:00:04.0");
    let units = iommu_units(root.path());
    let vendor_of = |name: &str| units.iter().find(|u| u.name == name).map(|u| u.vendor);
    assert_eq!(vendor_of("0000:00:03.0"), Some(Some(IommuVendor::Virtio)));
    assert_eq!(
        vendor_of("0000:00:04.0"),
        Some(None),
        "no device: not known"
    );
}
