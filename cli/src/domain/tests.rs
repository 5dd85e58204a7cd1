//! The switch on a fake sysfs: the type and bindings written, restored by `restore`, by `Drop`
//! and by the next run after a kill; devices in use refused before anything changes.

use super::*;
use std::os::unix::fs::symlink;

const NVME: &str = "0000:00:04.0";
const NIC: &str = "0000:00:05.0";

/// A tree with an NVMe (group 3, DMA-FQ, disk nvme0n1 259:0) and an e1000e (group 2, eth0).
struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn new() -> Fake {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = Fake { dir };
        fake.device(NVME, "nvme", "3", "DMA-FQ");
        fake.device(NIC, "e1000e", "2", "DMA-FQ");
        let nvme = fake.path(&format!("sys/devices/pci0000:00/{NVME}"));
        let disk = nvme.join("nvme/nvme0/nvme0n1");
        std::fs::create_dir_all(disk.join("holders")).expect("disk");
        std::fs::write(disk.join("dev"), "259:0\n").expect("dev");
        std::fs::create_dir_all(fake.path("sys/block")).expect("block");
        symlink(&disk, fake.path("sys/block/nvme0n1")).expect("block link");
        let nic = fake.path(&format!("sys/devices/pci0000:00/{NIC}"));
        std::fs::create_dir_all(nic.join("net/eth0")).expect("net");
        std::fs::create_dir_all(fake.path("sys/class/net")).expect("class net");
        symlink(nic.join("net/eth0"), fake.path("sys/class/net/eth0")).expect("net link");
        std::fs::write(nic.join("net/eth0/flags"), "0x1002\n").expect("flags");
        std::fs::create_dir_all(fake.path("proc/self")).expect("proc");
        fake.write(
            "proc/self/mountinfo",
            "22 1 0:21 / / rw - overlay overlay rw\n",
        );
        fake.write("proc/swaps", "Filename Type Size Used Priority\n");
        fake.write(
            "proc/net/route",
            "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n",
        );
        fake.write("sys/bus/pci/drivers_probe", "");
        fake
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
        std::fs::write(path, text).expect("write");
    }

    fn device(&self, address: &str, driver: &str, group: &str, domain: &str) {
        let dir = self.path(&format!("sys/devices/pci0000:00/{address}"));
        let group_dir = self.path(&format!("sys/kernel/iommu_groups/{group}"));
        let driver_dir = self.path(&format!("sys/bus/pci/drivers/{driver}"));
        for d in [&dir, &group_dir.join("devices"), &driver_dir] {
            std::fs::create_dir_all(d).expect("dirs");
        }
        std::fs::create_dir_all(self.path("sys/bus/pci/devices")).expect("devices");
        std::fs::write(group_dir.join("type"), format!("{domain}\n")).expect("type");
        symlink(&group_dir, dir.join("iommu_group")).expect("group link");
        symlink(&driver_dir, dir.join("driver")).expect("driver link");
        symlink(self.path("sys/bus/pci"), dir.join("subsystem")).expect("subsystem");
        symlink(&dir, self.path(&format!("sys/bus/pci/devices/{address}"))).expect("bus link");
        symlink(&dir, group_dir.join("devices").join(address)).expect("member link");
    }

    fn host(&self) -> Host {
        Host {
            root: self.dir.path().to_path_buf(),
            state_dir: Some(self.path("run/iommutop")),
            manage_addresses: false,
            bind_timeout: Duration::from_millis(300),
        }
    }

    fn group_type(&self, group: &str) -> String {
        std::fs::read_to_string(self.path(&format!("sys/kernel/iommu_groups/{group}/type")))
            .expect("type")
            .trim()
            .to_string()
    }

    fn records(&self) -> Vec<String> {
        entry_names(&self.path("run/iommutop"))
    }
}

#[test]
fn a_switch_unbinds_writes_the_type_rebinds_and_restores() {
    let fake = Fake::new();
    let mut switch = DomainSwitch::apply(&fake.host(), NVME, "identity").expect("switched");
    assert_eq!(switch.original_type(), "DMA-FQ");
    assert_eq!(switch.group(), "3");
    assert_eq!(fake.group_type("3"), "identity");
    let unbound = std::fs::read_to_string(fake.path("sys/bus/pci/drivers/nvme/unbind"));
    assert_eq!(unbound.expect("unbind written"), NVME);
    assert_eq!(
        fake.records(),
        [format!("domain-{}.json", std::process::id())],
        "recorded before the change"
    );
    switch.restore().expect("restored");
    assert_eq!(fake.group_type("3"), "DMA-FQ");
    assert!(fake.records().is_empty(), "the record goes once restored");
    switch.restore().expect("a second restore does nothing");
    assert_eq!(fake.group_type("2"), "DMA-FQ", "other groups untouched");
}

#[test]
fn dropping_a_switch_restores_the_group() {
    let fake = Fake::new();
    {
        let _switch = DomainSwitch::apply(&fake.host(), NIC, "identity").expect("switched");
        assert_eq!(fake.group_type("2"), "identity");
    }
    assert_eq!(fake.group_type("2"), "DMA-FQ");
}

#[test]
fn a_device_that_does_not_bind_again_is_named_and_the_type_still_restored() {
    let fake = Fake::new();
    let mut switch = DomainSwitch::apply(&fake.host(), NVME, "identity").expect("switched");
    // The device loses its driver and the fake kernel never binds it again.
    std::fs::remove_file(fake.path(&format!("sys/devices/pci0000:00/{NVME}/driver")))
        .expect("unlink");
    let error = switch.restore().expect_err("no driver comes back");
    assert_eq!(
        error.to_string(),
        "restoring IOMMU group 3 to `DMA-FQ`: 0000:00:04.0 did not bind to nvme again within 0 s"
    );
    assert_eq!(
        fake.group_type("3"),
        "DMA-FQ",
        "the type is written all the same"
    );
    let bound = std::fs::read_to_string(fake.path("sys/bus/pci/drivers/nvme/bind"));
    assert_eq!(bound.expect("bind written"), NVME);
    assert_eq!(fake.records().len(), 1, "kept for the next run to retry");
}

#[test]
fn devices_in_use_are_refused_before_anything_changes() {
    let fake = Fake::new();
    fake.write(
        "proc/self/mountinfo",
        "22 1 0:21 / / rw - overlay overlay rw\n40 22 259:0 / /data rw - ext4 /dev/nvme0n1 rw\n",
    );
    let error = DomainSwitch::apply(&fake.host(), NVME, "identity")
        .err()
        .expect("refused");
    assert_eq!(
        error.to_string(),
        "refusing to unbind 0000:00:04.0: /dev/nvme0n1 has a mounted file system"
    );
    assert!(error.is_environment());
    assert_eq!(fake.group_type("3"), "DMA-FQ");
    assert!(fake.records().is_empty());

    let fake = Fake::new();
    fake.write(
        "proc/swaps",
        "Filename Type Size Used Priority\n/dev/nvme0n1 partition 1 0 -2\n",
    );
    let error = DomainSwitch::apply(&fake.host(), NVME, "identity")
        .err()
        .expect("swap");
    assert!(
        error
            .to_string()
            .ends_with("/dev/nvme0n1 is in use as swap"),
        "{error}"
    );

    let fake = Fake::new();
    fake.write("sys/block/nvme0n1/holders/dm-0", "");
    let error = DomainSwitch::apply(&fake.host(), NVME, "identity")
        .err()
        .expect("held");
    assert!(
        error.to_string().ends_with("/dev/nvme0n1 is held by dm-0"),
        "{error}"
    );

    let fake = Fake::new();
    fake.write(
        "proc/net/route",
        "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
         eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\n",
    );
    let error = DomainSwitch::apply(&fake.host(), NIC, "identity")
        .err()
        .expect("route");
    assert!(
        error
            .to_string()
            .contains("its interface eth0 carries this host's default route"),
        "{error}"
    );
}

#[test]
fn bad_requests_say_what_is_wrong() {
    let fake = Fake::new();
    let host = fake.host();
    let message = |address: &str, domain: &str| {
        DomainSwitch::apply(&host, address, domain)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert_eq!(
        message(NVME, "passthrough"),
        "`passthrough` is not a domain type (one of: identity, DMA, DMA-FQ, auto)"
    );
    assert!(message("0000:ff:00.0", "identity").starts_with("no PCI device 0000:ff:00.0"));
    let lonely = fake.path("sys/devices/pci0000:00/0000:00:06.0");
    std::fs::create_dir_all(&lonely).expect("dir");
    symlink(&lonely, fake.path("sys/bus/pci/devices/0000:00:06.0")).expect("link");
    assert_eq!(
        message("0000:00:06.0", "identity"),
        "0000:00:06.0 is in no IOMMU group: no IOMMU translates it, so it has no domain to switch"
    );
    use std::os::unix::fs::PermissionsExt;
    let type_file = fake.path("sys/kernel/iommu_groups/3/type");
    std::fs::set_permissions(&type_file, std::fs::Permissions::from_mode(0o444)).expect("chmod");
    assert!(
        message(NVME, "identity")
            .starts_with("this kernel cannot change IOMMU group 3's domain type"),
        "{}",
        message(NVME, "identity")
    );
}

#[test]
fn the_kernels_refusals_are_explained() {
    for errno in [libc::EPERM, libc::EBUSY] {
        let (name, hint) = refusal_hint(&std::io::Error::from_raw_os_error(errno));
        assert!(name == "EPERM" || name == "EBUSY");
        assert!(
            hint.starts_with("a device of the group is still bound"),
            "{hint}"
        );
    }
    let (name, hint) = refusal_hint(&std::io::Error::from_raw_os_error(libc::EINVAL));
    assert_eq!(name, "EINVAL");
    assert!(hint.contains("may require translation"), "{hint}");
    let refused = DomainError::Refused {
        group: "2".into(),
        wanted: "identity".into(),
        errno: "EBUSY".into(),
        hint: "h",
    };
    assert_eq!(
        refused.to_string(),
        "the kernel refused `identity` for IOMMU group 2 (EBUSY): h"
    );
}

#[test]
fn a_killed_runs_switch_is_restored_by_the_next_run() {
    let fake = Fake::new();
    let record = Record {
        group: "3".into(),
        original_type: "DMA-FQ".into(),
        members: vec![Member {
            name: NVME.into(),
            bus: "pci".into(),
            driver: Some("nvme".into()),
            netdevs: 0,
            disks: 1,
            links: vec![],
        }],
    };
    std::fs::write(fake.path("sys/kernel/iommu_groups/3/type"), "identity\n").expect("type");
    fake.write(
        // pid_max is at most 2^22: this process cannot be running.
        "run/iommutop/domain-4999999.json",
        &serde_json::to_string(&record).expect("json"),
    );
    let lines = restore_leftovers(&fake.host());
    assert_eq!(
        lines,
        ["restored IOMMU group 3 to `DMA-FQ` (left switched by a killed run)"]
    );
    assert_eq!(fake.group_type("3"), "DMA-FQ");
    assert!(fake.records().is_empty());
}
