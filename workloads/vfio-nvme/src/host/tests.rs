use super::*;
use crate::changes::HugeChange;
use std::os::unix::fs::symlink;

/// A fake /sys, /proc and /dev with one NVMe controller at 0000:00:04.0 bound to nvme, its
/// namespace nvme0n1 (259:0), and 2 MiB huge pages.
fn fake_host() -> (tempfile::TempDir, NvmeHost) {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    let mk = |p: &str| fs::create_dir_all(r.join(p)).unwrap();
    let put = |p: &str, s: &str| fs::write(r.join(p), s).unwrap();
    let dev = "sys/devices/pci0000:00/0000:00:04.0";
    mk(&format!("{dev}/nvme/nvme0/nvme0n1"));
    mk(&format!("{dev}/nvme/nvme0/ng0n1"));
    mk("sys/bus/pci/devices");
    mk("sys/bus/pci/drivers/nvme");
    mk("sys/kernel/iommu_groups/4");
    mk("sys/class/nvme");
    mk("sys/class/block");
    mk("sys/block/nvme0n1/holders");
    mk("sys/kernel/mm/hugepages/hugepages-2048kB");
    mk("proc/self");
    mk("dev");
    put(&format!("{dev}/class"), "0x010802\n");
    put(&format!("{dev}/driver_override"), "(null)\n");
    symlink(r.join(dev), r.join("sys/bus/pci/devices/0000:00:04.0")).unwrap();
    symlink(
        r.join("sys/bus/pci/drivers/nvme"),
        r.join(format!("{dev}/driver")),
    )
    .unwrap();
    symlink(
        r.join("sys/kernel/iommu_groups/4"),
        r.join(format!("{dev}/iommu_group")),
    )
    .unwrap();
    symlink(
        r.join(format!("{dev}/nvme/nvme0")),
        r.join("sys/class/nvme/nvme0"),
    )
    .unwrap();
    symlink(
        r.join(format!("{dev}/nvme/nvme0/nvme0n1")),
        r.join("sys/class/block/nvme0n1"),
    )
    .unwrap();
    put("sys/block/nvme0n1/dev", "259:0\n");
    put(
        "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
        "0\n",
    );
    put(
        "sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
        "0\n",
    );
    put(
        "proc/self/mountinfo",
        "22 1 0:21 / / rw - overlay overlay rw\n",
    );
    put("proc/swaps", "Filename Type Size Used Priority\n");
    let host = NvmeHost::at(HostRoot::at(r));
    (t, host)
}

#[test]
fn devices_resolve_from_every_kind_of_name() {
    let (_t, host) = fake_host();
    for name in [
        "0000:00:04.0",
        "00:04.0",
        "nvme0",
        "nvme0n1",
        "/dev/nvme0n1",
    ] {
        assert_eq!(
            host.resolve_device(Some(name)).unwrap().to_string(),
            "0000:00:04.0",
            "{name}"
        );
    }
    assert_eq!(
        host.resolve_device(None).unwrap().to_string(),
        "0000:00:04.0",
        "the only controller"
    );
    let e = host.resolve_device(Some("nvme7")).unwrap_err().to_string();
    assert!(
        e.contains("no NVMe controller or namespace called nvme7"),
        "{e}"
    );
    let e = host.resolve_device(Some("sda")).unwrap_err().to_string();
    assert!(e.contains("give a PCI address"), "{e}");
}

#[test]
fn a_non_nvme_device_is_refused() {
    let (t, host) = fake_host();
    fs::write(
        t.path().join("sys/devices/pci0000:00/0000:00:04.0/class"),
        "0x020000\n",
    )
    .unwrap();
    let e = host
        .resolve_device(Some("0000:00:04.0"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("not an NVMe controller (PCI class 0x020000)"),
        "{e}"
    );
    let e = host.resolve_device(None).unwrap_err().to_string();
    assert!(e.contains("no NVMe controller found"), "{e}");
}

#[test]
fn state_and_namespaces_are_read() {
    let (_t, host) = fake_host();
    let s = host.device_state("0000:00:04.0").unwrap();
    assert_eq!(s.driver.as_deref(), Some("nvme"));
    assert_eq!(s.driver_override, None, "(null) means none");
    assert_eq!(s.iommu_group, Some(4));
    assert_eq!(host.namespaces("0000:00:04.0"), vec!["nvme0n1".to_string()]);
    assert!(host.namespace_uses(&["nvme0n1".into()]).is_empty());
}

#[test]
fn a_partitioned_namespace_is_refused_in_one_line() {
    let (t, host) = fake_host();
    let r = t.path();
    let disk = r.join("sys/devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1");
    fs::create_dir_all(disk.join("nvme0n1p1")).unwrap();
    fs::write(disk.join("nvme0n1p1/partition"), "1\n").unwrap();
    let target = Target {
        device: Some("nvme0n1".into()),
        bind: true,
        ..Target::default()
    };
    let e = HostGuard::prepare(&host, &target, &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("refusing 0000:00:04.0: nvme0n1 has partitions (nvme0n1p1)"),
        "{e}"
    );
    assert!(!e.contains('\n'), "one line: {e}");
    assert!(!r.join("run/iommutop").exists(), "nothing recorded");
}

#[test]
fn a_bound_controller_needs_bind() {
    let (_t, host) = fake_host();
    let e = HostGuard::prepare(&host, &Target::default(), &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("bound to nvme: pass --bind"), "{e}");
}

#[test]
fn missing_huge_pages_say_how_to_reserve_them() {
    let (t, host) = fake_host();
    let mut journal = Journal::new(&host.root, "test");
    let e = host
        .ensure_hugepages(&mut journal, PageSize::Size2M, 3, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs 3 free 2m huge pages, 0 are free"), "{e}");
    assert!(
        e.contains("echo 3 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
        "{e}"
    );
    let e = host
        .ensure_hugepages(&mut journal, PageSize::Size1G, 1, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("hugepagesz=1G hugepages=1"), "{e}");
    // With --reserve-hugepages the count is raised (the fake file reads back what we wrote),
    // and put back with the journal.
    let nr = || {
        fs::read_to_string(
            t.path()
                .join("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
        )
        .unwrap()
        .trim()
        .to_string()
    };
    host.ensure_hugepages(&mut journal, PageSize::Size2M, 3, true)
        .unwrap();
    assert_eq!(nr(), "3");
    journal.undo().unwrap();
    assert_eq!(nr(), "0");
    let changes = crate::changes::from_journal(&journal, None);
    assert_eq!(
        changes.hugepages,
        [HugeChange {
            page_size: PageSize::Size2M,
            from: 0,
            to: 3,
            restored: true
        }]
    );
}
