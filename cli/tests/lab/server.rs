//! The server machine (`lab/run --machine server`, docs/lab.md): 8 vCPUs, two NVMe controllers
//! with 8 I/O queues each, an igb PF whose SR-IOV virtual functions the guest's init enables and
//! brings up, each a PCI function and an IOMMU group of its own, and the e1000e pair; and the
//! one-line errors of its options. The guest side is `cli/tests/lab/server.sh facts`.

use crate::support::*;
use std::collections::BTreeMap;
use std::process::{Command, Output};

/// The server machine's devices (pinned PCI addresses, docs/lab.md).
const NVME: [&str; 2] = ["0000:00:04.0", "0000:00:07.0"];
const E1000E: [&str; 2] = ["0000:00:05.0", "0000:00:06.0"];
const IGB_PF: &str = "0000:00:0c.0";
/// Where QEMU puts the igb's first four VFs (the PF's devfn + 0x80 + 2N).
const IGB_VFS: [&str; 4] = [
    "0000:00:1c.0",
    "0000:00:1c.2",
    "0000:00:1c.4",
    "0000:00:1c.6",
];

/// `lab/run ARGS` as it is, whatever it exits with.
fn lab_command(args: &[&str]) -> Output {
    Command::new(project_root().join("lab/run"))
        .args(args)
        .current_dir(project_root())
        .output()
        .expect("lab/run starts")
}

/// One `nic=ADDRESS DRIVER NAME OPERSTATE GROUP` line of `server.sh facts`.
struct Nic {
    driver: String,
    operstate: String,
    group: String,
}

/// The key=value lines of `server.sh facts`, each key's values in order.
fn facts(stdout: &str) -> BTreeMap<String, Vec<String>> {
    let mut facts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in stdout.lines() {
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not key=value: {line:?}\n{stdout}"));
        facts
            .entry(key.to_string())
            .or_default()
            .push(value.to_string());
    }
    facts
}

fn nics(facts: &BTreeMap<String, Vec<String>>) -> BTreeMap<String, Nic> {
    facts
        .get("nic")
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(
                f.len(),
                5,
                "nic=ADDRESS DRIVER NAME OPERSTATE GROUP: {line}"
            );
            let nic = Nic {
                driver: f[1].to_string(),
                operstate: f[3].to_string(),
                group: f[4].to_string(),
            };
            (f[0].to_string(), nic)
        })
        .collect()
}

#[test]
fn lab_server_machine_has_its_cpus_queues_and_virtual_functions() {
    if lab_skipped("lab_server_machine_has_its_cpus_queues_and_virtual_functions") {
        return;
    }
    lab_fetch(&["--kernel", "6.12", "--machine", "server"]);
    let started = std::time::Instant::now();
    let output = lab_run(
        &["--machine", "server", "--kernel", "6.12"],
        &[
            "sh",
            "-c",
            "echo machine=$IOMMUTOP_LAB_MACHINE; exec sh cli/tests/lab/server.sh target/lab-out/server facts",
        ],
    );
    eprintln!(
        "the server machine booted and ran its checks in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    assert_success(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let facts = facts(&stdout);
    let one = |key: &str| -> &str {
        match facts.get(key).map(Vec::as_slice) {
            Some([v]) => v,
            other => panic!("expected one {key}=…, got {other:?}\n{stdout}"),
        }
    };
    assert_eq!(one("machine"), "server", "IOMMUTOP_LAB_MACHINE");
    assert_eq!(one("cpus_online"), "8", "8 vCPUs online");

    // Two NVMe controllers, named in address order, 8 blk-mq queues each (one per CPU, as many
    // as max_ioqpairs gives), each in an IOMMU group of its own.
    let nvme: Vec<Vec<&str>> = facts["nvme"]
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(nvme.len(), 2, "two NVMe controllers: {nvme:?}");
    for (i, (controller, address)) in nvme.iter().zip(NVME).enumerate() {
        assert_eq!(
            controller[..3],
            [format!("nvme{i}").as_str(), address, "8"],
            "nvme{i} at {address} with 8 I/O queues: {nvme:?}"
        );
    }
    assert_ne!(
        nvme[0][3], "none",
        "the NVMe controllers are behind the IOMMU"
    );
    assert_ne!(nvme[0][3], nvme[1][3], "an IOMMU group each: {nvme:?}");

    // The e1000e pair as on the default machine; the igb PF and its VFs up, each VF a PCI
    // function and an IOMMU group of its own, none shared with the PF or another device.
    let nics = nics(&facts);
    for address in E1000E {
        assert_eq!(
            nics.get(address).map(|n| n.driver.as_str()),
            Some("e1000e"),
            "{address}"
        );
    }
    let pf = nics
        .get(IGB_PF)
        .expect("the igb PF has a network interface");
    assert_eq!((pf.driver.as_str(), pf.operstate.as_str()), ("igb", "up"));
    assert_eq!(one("igb_pf"), format!("{IGB_PF} 4 7"), "4 of 7 VFs enabled");
    let vfs: Vec<&str> = facts["igb_vf"]
        .iter()
        .map(|l| l.split_whitespace().last().unwrap_or_default())
        .collect();
    assert_eq!(vfs, IGB_VFS, "the VFs at their pinned addresses");
    let mut groups: Vec<&str> = nics.values().map(|n| n.group.as_str()).collect();
    groups.extend(nvme.iter().map(|c| c[3]));
    for address in IGB_VFS {
        let vf = nics
            .get(address)
            .unwrap_or_else(|| panic!("VF {address} has no network interface"));
        assert_eq!(
            (vf.driver.as_str(), vf.operstate.as_str()),
            ("igbvf", "up"),
            "VF {address}"
        );
        assert_ne!(vf.group, "none", "VF {address} is behind the IOMMU");
        assert_eq!(
            groups.iter().filter(|g| **g == vf.group).count(),
            1,
            "VF {address}'s group {} is its own: {stdout}",
            vf.group
        );
    }
}

#[test]
fn lab_server_bad_input_is_one_line_and_exit_2() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--machine", "mainframe", "--", "true"],
            &["unknown machine 'mainframe'", "lab", "server"],
        ),
        (
            &["--smp", "17", "--", "true"],
            &["--smp takes a number of CPUs from 1 to 16"],
        ),
        (
            &["--machine", "server", "--smp", "64", "--", "true"],
            &["--smp takes a number of CPUs from 1 to 16"],
        ),
        (
            &["--vfs", "2", "--", "true"],
            &["--vfs", "igb", "add --machine server"],
        ),
        (
            &["--machine", "default", "--vfs", "1", "--", "true"],
            &["--vfs", "add --machine server"],
        ),
        (
            &["--machine", "server", "--vfs", "8", "--", "true"],
            &["--vfs takes a number of igb virtual functions from 0 to 7"],
        ),
        (
            &["--machine", "server", "--mem", "4096", "--", "true"],
            &["--mem", "at most 2815 MiB"],
        ),
        (
            &["--machine", "server", "--arch", "arm64", "--", "true"],
            &["--machine server is an x86_64 machine"],
        ),
    ];
    for (args, needles) in cases {
        let output = lab_command(args);
        assert!(output.stdout.is_empty(), "{args:?}: stdout must be empty");
        assert_one_line_error(&output, 2, needles);
    }
    let output = Command::new(project_root().join("lab/fetch"))
        .args(["--machine", "mainframe"])
        .output()
        .expect("lab/fetch starts");
    assert_one_line_error(&output, 2, &["unknown machine 'mainframe'"]);
}
