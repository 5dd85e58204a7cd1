use super::*;
use crate::fake::{Fake, NVME};

#[test]
fn a_free_namespace_has_no_uses() {
    let fake = Fake::new();
    let root = fake.root();
    assert_eq!(disks_of(&root, NVME), ["nvme0n1"]);
    assert!(disk_uses(&root, &["nvme0n1".into()]).is_empty());
}

#[test]
fn partitions_holders_swap_and_mounts_are_each_named() {
    let fake = Fake::new();
    let disk = format!("sys/devices/pci0000:00/{NVME}/nvme/nvme0/nvme0n1");
    fake.mkdir(&format!("{disk}/nvme0n1p1/holders/dm-0"));
    fake.write(&format!("{disk}/nvme0n1p1/partition"), "1\n");
    fake.write(&format!("{disk}/nvme0n1p1/dev"), "259:1\n");
    fake.mkdir(&format!("{disk}/holders/md0"));
    fake.write(
        "proc/self/mountinfo",
        "22 1 0:21 / / rw - overlay overlay rw\n40 22 259:1 / /mnt/data rw,relatime - ext4 /dev/nvme0n1p1 rw\n",
    );
    fake.write(
        "proc/swaps",
        "Filename Type Size Used Priority\n/dev/nvme0n1 partition 1 0 -2\n",
    );
    let uses: Vec<String> = disk_uses(&fake.root(), &["nvme0n1".into()])
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        uses,
        [
            "nvme0n1 has partitions (nvme0n1p1)",
            "nvme0n1 has holders (md0)",
            "nvme0n1p1 has holders (dm-0)",
            "nvme0n1 is in use as swap",
            "nvme0n1p1 (259:1) is mounted at /mnt/data",
        ]
    );
}

#[test]
fn mountinfo_is_matched_by_device_number() {
    let mountinfo = "36 35 98:0 /mnt1 /mnt/a rw - ext3 /dev/root rw\n37 35 259:0 / /data rw - xfs /dev/nvme0n1 rw\n";
    assert_eq!(mounts_of(mountinfo, "259:0"), ["/data"]);
    assert!(mounts_of(mountinfo, "259:1").is_empty());
    let swaps = "Filename\tType\tSize\tUsed\tPriority\n/dev/nvme0n1p2 partition 1048572 0 -2\n";
    assert_eq!(swap_devices(swaps), ["/dev/nvme0n1p2"]);
}
