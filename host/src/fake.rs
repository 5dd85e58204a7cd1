//! A fake machine for tests: sysfs, procfs, /dev and /run under a temporary directory, with an
//! NVMe controller (group 3, DMA-FQ, namespace nvme0n1 259:0) bound to nvme, an e1000e NIC
//! (group 2, eth0) and a 2 MiB huge page pool.

use crate::root::HostRoot;
use std::os::unix::fs::symlink;
use std::path::PathBuf;

pub const NVME: &str = "0000:00:04.0";
pub const NIC: &str = "0000:00:05.0";

pub struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    pub fn new() -> Fake {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = Fake { dir };
        fake.device(NVME, "nvme", "3", "DMA-FQ", "0x010802");
        fake.device(NIC, "e1000e", "2", "DMA-FQ", "0x020000");
        fake.mkdir("sys/bus/pci/drivers/vfio-pci");
        let nvme = fake.path(&format!("sys/devices/pci0000:00/{NVME}"));
        let disk = nvme.join("nvme/nvme0/nvme0n1");
        std::fs::create_dir_all(disk.join("holders")).expect("disk");
        std::fs::create_dir_all(nvme.join("nvme/nvme0/ng0n1")).expect("char dev");
        std::fs::write(disk.join("dev"), "259:0\n").expect("dev");
        fake.mkdir("sys/block");
        fake.mkdir("sys/class/block");
        symlink(&disk, fake.path("sys/block/nvme0n1")).expect("block link");
        symlink(&disk, fake.path("sys/class/block/nvme0n1")).expect("class link");
        fake.write("dev/nvme0n1", "");
        let nic = fake.path(&format!("sys/devices/pci0000:00/{NIC}"));
        std::fs::create_dir_all(nic.join("net/eth0")).expect("net");
        fake.mkdir("sys/class/net");
        symlink(nic.join("net/eth0"), fake.path("sys/class/net/eth0")).expect("net link");
        symlink(&nic, nic.join("net/eth0/device")).expect("device link");
        std::fs::write(nic.join("net/eth0/flags"), "0x1003\n").expect("flags");
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
        fake.write(
            "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
            "2\n",
        );
        fake.write(
            "sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
            "2\n",
        );
        fake
    }

    pub fn root(&self) -> HostRoot {
        HostRoot::at(self.dir.path())
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    pub fn mkdir(&self, relative: &str) {
        std::fs::create_dir_all(self.path(relative)).expect("mkdir");
    }

    pub fn write(&self, relative: &str, text: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
        std::fs::write(path, text).expect("write");
    }

    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    fn device(&self, address: &str, driver: &str, group: &str, domain: &str, class: &str) {
        let dir = self.path(&format!("sys/devices/pci0000:00/{address}"));
        let group_dir = self.path(&format!("sys/kernel/iommu_groups/{group}"));
        let driver_dir = self.path(&format!("sys/bus/pci/drivers/{driver}"));
        for d in [&dir, &group_dir.join("devices"), &driver_dir] {
            std::fs::create_dir_all(d).expect("dirs");
        }
        self.mkdir("sys/bus/pci/devices");
        std::fs::write(group_dir.join("type"), format!("{domain}\n")).expect("type");
        std::fs::write(dir.join("class"), format!("{class}\n")).expect("class");
        std::fs::write(dir.join("driver_override"), "(null)\n").expect("override");
        symlink(&group_dir, dir.join("iommu_group")).expect("group link");
        symlink(&driver_dir, dir.join("driver")).expect("driver link");
        symlink(self.path("sys/bus/pci"), dir.join("subsystem")).expect("subsystem");
        symlink(&dir, self.path(&format!("sys/bus/pci/devices/{address}"))).expect("bus link");
        symlink(&dir, group_dir.join("devices").join(address)).expect("member link");
    }

    /// Points a device's `driver` link at another driver, as the kernel does on a bind.
    pub fn bind(&self, address: &str, driver: &str) {
        let link = self.path(&format!("sys/devices/pci0000:00/{address}/driver"));
        let _ = std::fs::remove_file(&link);
        symlink(self.path(&format!("sys/bus/pci/drivers/{driver}")), link).expect("bind");
    }

    pub fn driver(&self, address: &str) -> Option<String> {
        crate::sysfs::link_name(&self.path(&format!("sys/devices/pci0000:00/{address}/driver")))
    }

    pub fn group_type(&self, group: &str) -> String {
        self.read(&format!("sys/kernel/iommu_groups/{group}/type"))
    }

    /// The record files in `/run/iommutop`.
    pub fn records(&self) -> Vec<String> {
        crate::sysfs::entry_names(&self.path("run/iommutop"))
    }
}

/// A thread that plays the kernel's part of a rebind: a write of an address to `drivers_probe`
/// binds it to its `driver_override`, or to `default_driver` when that is clear.
pub struct FakeKernel {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeKernel {
    pub fn start(fake: &Fake, address: &str, default_driver: &str) -> FakeKernel {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let root = fake.dir.path().to_path_buf();
        let address = address.to_string();
        let default_driver = default_driver.to_string();
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let probe = root.join("sys/bus/pci/drivers_probe");
            let device = root.join(format!("sys/devices/pci0000:00/{address}"));
            while !flag.load(Ordering::Relaxed) {
                let asked = std::fs::read_to_string(&probe).unwrap_or_default();
                if asked.trim() == address {
                    let wanted = std::fs::read_to_string(device.join("driver_override"))
                        .unwrap_or_default()
                        .trim()
                        .to_string();
                    let driver = if wanted.is_empty() || wanted == "(null)" {
                        default_driver.clone()
                    } else {
                        wanted
                    };
                    let link = device.join("driver");
                    let _ = std::fs::remove_file(&link);
                    let _ = symlink(root.join(format!("sys/bus/pci/drivers/{driver}")), &link);
                    let _ = std::fs::write(&probe, "");
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        });
        FakeKernel {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeKernel {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
