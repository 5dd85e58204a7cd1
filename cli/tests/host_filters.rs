//! Filters on the build machine's own kernel: `--points` attaches only the named points,
//! `--device` keeps one device's rows, `--pid` and `--cgroup` one task's work, `--netdev all` adds
//! virtual netdevs' rows, and a filter that
//! names nothing is a one-line usage error. They need root, like host_probes.rs.

mod support;

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;
use support::{
    assert_named_shortfall, assert_one_line_error, assert_success, assert_valid,
    assert_valid_report, ndjson_lines, op_count, pci_disk_of_build_dir, require_root, scratch_file,
};

fn iommutop() -> Command {
    Command::cargo_bin("iommutop").expect("binary built")
}

/// `--points`: only the named points attach (with the DMA API points an IOMMU-side one needs for
/// attribution), the report says which were left out, and a wrong name is refused before any
/// program is loaded.
#[test]
fn points_option_attaches_only_those_points_and_what_they_need() {
    let _bpf = require_root();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("points.json");
    let output = iommutop()
        .args(["record", "--points", "iommu_map,block_complete", "--json"])
        .arg(&path)
        .args(["--", "true"])
        .output()
        .expect("runs");
    assert_success(&output);
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("report")).expect("JSON");
    assert_valid_report(&report);
    let attached: Vec<&str> = report["probes"]
        .as_array()
        .expect("probes")
        .iter()
        .filter_map(|p| p["point"].as_str())
        .collect();
    assert_eq!(
        attached,
        ["dma_map", "dma_unmap", "iommu_map", "block_complete"]
    );
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("points not attached (--points): iommu_unmap"),
        "{warnings}"
    );

    let refused = iommutop()
        .args(["record", "--points", "dma_mapp", "--", "true"])
        .output()
        .expect("runs");
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("no point `dma_mapp`: use a comma-separated list of dma_map,"),
        "{stderr}"
    );
}

/// Whether a report or interval row is kept by a filter to `address`.
fn kept_row(key: &str, address: &str) -> bool {
    key == address || key.starts_with("deferred") || key == "unattributed"
}

/// `record --device DISK -- dd` of the disk under the build: the report keeps the disk's row
/// (with its completions) and work of no device, and says which filter it applied.
#[test]
fn record_device_keeps_the_disks_row_and_records_the_filter() {
    let _bpf = require_root();
    let input = scratch_file("device-input", 8);
    let (disk, address) = pci_disk_of_build_dir(&input);
    let report_path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("host-device.json");
    let _ = std::fs::remove_file(&report_path);
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    iommutop()
        .args(["record", "--device", &disk, "--json"])
        .arg(&report_path)
        .args(["--", "dd"])
        .arg(format!("if={}", input.display()))
        .args(["of=/dev/null", "bs=4k", "count=1000", "iflag=direct"])
        .assert()
        .success();
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).expect("report"))
            .expect("JSON");
    assert_valid_report(&report);
    assert_eq!(
        report["run"]["device_filter"],
        serde_json::json!({"device": disk, "pci_address": address})
    );
    let devices = report["devices"].as_array().expect("devices");
    for device in devices {
        let key = device["key"].as_str().expect("key");
        assert!(kept_row(key, &address), "{key} kept by --device {disk}");
    }
    let disk_row = devices
        .iter()
        .find(|d| d["key"] == address.as_str())
        .expect("the disk's row");
    let completions = op_count(disk_row, "completion");
    assert_named_shortfall(&report, completions, 1000, &disk_row.to_string());
}

/// `--device` naming another PCI function drops the disk's row from every NDJSON interval and
/// from the report, while dd reads that disk.
#[test]
fn record_device_drops_other_devices_rows_from_the_stream() {
    let _bpf = require_root();
    let input = scratch_file("device-other-input", 8);
    let (_, address) = pci_disk_of_build_dir(&input);
    let other = std::fs::read_dir("/sys/bus/pci/devices")
        .expect("PCI devices")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .find(|a| *a != address)
        .expect("a second PCI function");
    let script = format!(
        "dd if={} of=/dev/null bs=4k count=1000 iflag=direct 2>/dev/null; sleep 1",
        input.display()
    );
    let output = iommutop()
        .args([
            "record",
            "--device",
            &other,
            "--interval",
            "0.4",
            "--json",
            "-",
        ])
        .args(["--", "sh", "-c", &script])
        .output()
        .expect("runs");
    assert_success(&output);
    let lines = ndjson_lines(&output.stdout);
    let intervals: Vec<&Value> = lines.iter().filter(|l| l["type"] == "interval").collect();
    assert!(intervals.len() >= 2, "{lines:#?}");
    for line in &lines {
        assert_valid("stream.schema.json", line);
    }
    for line in &intervals {
        for device in line["devices"].as_array().expect("devices") {
            let key = device["key"].as_str().expect("key");
            assert!(
                kept_row(key, &other),
                "{key} in an interval of --device {other}"
            );
        }
    }
    let report = &lines.last().expect("the report line")["report"];
    assert_valid_report(report);
    assert_eq!(
        report["run"]["device_filter"]["pci_address"],
        other.as_str()
    );
    assert!(
        !report["devices"].to_string().contains(&address),
        "{address} left in: {report}"
    );
}

/// A name of nothing is refused before anything attaches, by every command that filters.
#[test]
fn device_naming_nothing_is_a_one_line_usage_error_saying_what_exists() {
    let commands: [&[&str]; 4] = [
        &["record", "--device", "nvme9n1", "--", "true"],
        &["top", "--batch", "--device", "nvme9n1"],
        &["run", "tcp-rr-1k", "--device", "nvme9n1"],
        &["serve", "--device", "nvme9n1", "--listen", "127.0.0.1:0"],
    ];
    for args in commands {
        let output = iommutop().args(args).output().expect("runs");
        assert_one_line_error(
            &output,
            2,
            &[
                "--device: no PCI device, NIC or disk named `nvme9n1` here",
                "lspci -D",
            ],
        );
    }
}

/// `--pid` and `--cgroup` that name nothing are refused before anything attaches, by every
/// command that records, in one line.
#[test]
fn pid_or_cgroup_naming_nothing_is_a_one_line_usage_error() {
    let cases: [(&[&str], &str); 3] = [
        (&["--pid", "4194304"], "--pid 4194304: no such process"),
        (
            &["--cgroup", "/proc"],
            "--cgroup /proc: not a cgroup v2 directory",
        ),
        (
            &["--cgroup", "/nonexistent"],
            "--cgroup /nonexistent: No such file",
        ),
    ];
    for (filter, message) in cases {
        let commands: [Vec<&str>; 4] = [
            [&["record"], filter, &["--", "true"]].concat(),
            [&["top", "--batch"], filter].concat(),
            [&["run", "tcp-rr-1k"], filter].concat(),
            [&["serve", "--listen", "127.0.0.1:0"], filter].concat(),
        ];
        for args in commands {
            let output = iommutop().args(&args).output().expect("runs");
            assert_one_line_error(&output, 2, &[message]);
        }
    }
}

/// `--pid`: the report records the filter and says what a filtered run leaves out (interrupt
/// work); the batch view says whose work it shows. (On the host nothing calls the DMA API: the
/// counts are the lab's to check, cli/tests/lab/tasks.rs.)
#[test]
fn a_pid_filter_is_recorded_and_said() {
    let _bpf = require_root();
    let pid = std::process::id().to_string();
    let output = iommutop()
        .args(["record", "--duration", "1", "--pid", &pid, "--json", "-"])
        .output()
        .expect("runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines = ndjson_lines(&output.stdout);
    let report = &lines.last().expect("a report line")["report"];
    assert_valid_report(report);
    assert_eq!(report["run"]["task_filter"]["pid"], std::process::id());
    assert!(report["run"]["task_filter"]["comm"].is_string());
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains(&format!("only the work process {pid} (")),
        "{warnings}"
    );
    assert!(warnings.contains("interrupt-context work"), "{warnings}");

    let output = iommutop()
        .args(["top", "--batch", "-n", "1", "--pid", &pid])
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.lines().next().is_some_and(
            |l| l.contains(&format!("only process {pid} (")) && l.ends_with("task context")
        ),
        "{stdout}"
    );
}

/// `--netdev`: a veth pair (no parent device) takes no row by default, and one of its own under
/// `--netdev all`, with the packets the kernel sent through it.
#[test]
fn virtual_netdevs_take_rows_only_under_netdev_all() {
    let _bpf = require_root();
    let pid = std::process::id();
    let (near, far) = (format!("iv{pid}a"), format!("iv{pid}b"));
    // Up, without IPv6 (whose neighbour discovery sends at times of its own), with an address;
    // datagrams to a neighbour nobody answers make the kernel send ARP requests. The interface's
    // own count of packets sent is printed before the pair goes.
    let traffic = format!(
        "ip link add {near} type veth peer name {far} && \
         for end in {near} {far}; do \
           echo 1 >/proc/sys/net/ipv6/conf/$end/disable_ipv6 2>/dev/null; \
           ip link set $end up; \
         done && ip addr add 10.231.7.1/24 dev {near} && \
         python3 -c \"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
         [s.sendto(b'x', ('10.231.7.2', 9)) for _ in range(3)]\" && \
         cat /sys/class/net/{near}/statistics/tx_packets; ip link del {near}"
    );
    let record = |netdev: &str| -> (Value, u64) {
        let report_path =
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("host-netdev-{netdev}.json"));
        let _ = std::fs::remove_file(&report_path);
        let output = iommutop()
            .args(["record", "--netdev", netdev, "--json"])
            .arg(&report_path)
            .args(["--", "sh", "-c", &traffic])
            .output()
            .expect("iommutop runs");
        assert_success(&output);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let interface_sent = stdout
            .lines()
            .last()
            .and_then(|line| line.trim().parse().ok())
            .unwrap_or_else(|| panic!("no tx_packets of {near} in {stdout:?}"));
        let report = serde_json::from_str(&std::fs::read_to_string(&report_path).expect("report"))
            .expect("JSON");
        (report, interface_sent)
    };
    let veth_rows = |report: &Value| -> Vec<Value> {
        report["devices"]
            .as_array()
            .expect("devices")
            .iter()
            .filter(|d| d["key"] == near.as_str() || d["key"] == far.as_str())
            .cloned()
            .collect()
    };
    let (physical, _) = record("physical");
    assert_valid_report(&physical);
    assert!(
        veth_rows(&physical).is_empty(),
        "no row for a veth by default: {:?}",
        veth_rows(&physical)
    );
    let (all, interface_sent) = record("all");
    assert_valid_report(&all);
    let rows = veth_rows(&all);
    let row = rows
        .iter()
        .find(|row| row["key"] == near.as_str())
        .unwrap_or_else(|| panic!("--netdev all: no row for {near}: {rows:?}"));
    assert_eq!(row["kind"], "netdev");
    assert!(interface_sent >= 1, "the kernel sent nothing on {near}");
    assert_eq!(
        op_count(row, "tx_packets"),
        interface_sent,
        "{near}'s packets sent, as the interface counted them: {row}"
    );
}
