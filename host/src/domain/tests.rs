//! The switch on a fake sysfs: the type and bindings written, restored by `restore`, by `Drop`
//! and by the sweep after a kill; devices in use refused before anything changes.

use super::*;
use crate::change::domain::refusal_hint;
use crate::fake::{Fake, NIC, NVME};
use std::os::unix::fs::symlink;

#[test]
fn a_switch_unbinds_writes_the_type_rebinds_and_restores() {
    let fake = Fake::new();
    let mut switch = DomainSwitch::apply(&fake.root(), NVME, "identity").expect("switched");
    assert_eq!(switch.original_type(), "DMA-FQ");
    assert_eq!(switch.group(), "3");
    assert_eq!(fake.group_type("3"), "identity");
    assert_eq!(fake.read("sys/bus/pci/drivers/nvme/unbind"), NVME);
    assert_eq!(fake.records().len(), 1, "recorded before the change");
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
        let _switch = DomainSwitch::apply(&fake.root(), NIC, "identity").expect("switched");
        assert_eq!(fake.group_type("2"), "identity");
    }
    assert_eq!(fake.group_type("2"), "DMA-FQ");
}

#[test]
fn a_device_that_does_not_bind_again_is_named_and_the_type_still_restored() {
    let fake = Fake::new();
    let mut switch = DomainSwitch::apply(&fake.root(), NVME, "identity").expect("switched");
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
    assert_eq!(fake.read("sys/bus/pci/drivers/nvme/bind"), NVME);
    assert_eq!(fake.records().len(), 1, "kept for the sweep to retry");
    fake.bind(NVME, "nvme");
}

#[test]
fn devices_in_use_are_refused_before_anything_changes() {
    let fake = Fake::new();
    fake.write(
        "proc/self/mountinfo",
        "22 1 0:21 / / rw - overlay overlay rw\n40 22 259:0 / /data rw - ext4 /dev/nvme0n1 rw\n",
    );
    let error = DomainSwitch::apply(&fake.root(), NVME, "identity").expect_err("refused");
    assert_eq!(
        error.to_string(),
        "refusing to unbind 0000:00:04.0: nvme0n1 (259:0) is mounted at /data"
    );
    assert!(error.is_environment());
    assert_eq!(fake.group_type("3"), "DMA-FQ");
    assert!(fake.records().is_empty());

    let fake = Fake::new();
    fake.write(
        "proc/swaps",
        "Filename Type Size Used Priority\n/dev/nvme0n1 partition 1 0 -2\n",
    );
    let error = DomainSwitch::apply(&fake.root(), NVME, "identity").expect_err("swap");
    assert!(
        error.to_string().ends_with("nvme0n1 is in use as swap"),
        "{error}"
    );

    let fake = Fake::new();
    fake.mkdir(&format!(
        "sys/devices/pci0000:00/{NVME}/nvme/nvme0/nvme0n1/holders/dm-0"
    ));
    let error = DomainSwitch::apply(&fake.root(), NVME, "identity").expect_err("held");
    assert!(
        error.to_string().ends_with("nvme0n1 has holders (dm-0)"),
        "{error}"
    );

    let fake = Fake::new();
    fake.write(
        "proc/net/route",
        "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
         eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\n",
    );
    let error = DomainSwitch::apply(&fake.root(), NIC, "identity").expect_err("route");
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
    let root = fake.root();
    let message = |address: &str, domain: &str| {
        DomainSwitch::apply(&root, address, domain)
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
fn a_killed_runs_switch_is_restored_by_the_sweep() {
    let fake = Fake::new();
    let change = DomainChange {
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
    fake.write("sys/kernel/iommu_groups/3/type", "identity\n");
    let record = crate::record::Record {
        format: crate::record::FORMAT,
        // pid_max is at most 2^22: this process cannot be running.
        pid: 4_999_999,
        purpose: "domain switch".into(),
        changes: vec![crate::record::Entry {
            change: Change::Domain(change),
            undone: false,
        }],
    };
    fake.write(
        "run/iommutop/4999999-0.json",
        &serde_json::to_string(&record).expect("json"),
    );
    let lines = crate::sweep(&fake.root());
    assert_eq!(
        lines,
        ["restored what a killed run (pid 4999999) left: IOMMU group 3 back to `DMA-FQ`"]
    );
    assert_eq!(fake.group_type("3"), "DMA-FQ");
    assert!(fake.records().is_empty());
}
