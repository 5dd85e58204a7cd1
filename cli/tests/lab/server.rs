//! The server machine (`lab/run --machine server`, docs/lab.md): 8 vCPUs, two NVMe controllers
//! with 8 I/O queues each, an igb PF whose SR-IOV virtual functions the guest's init enables and
//! brings up, each a PCI function and an IOMMU group of its own, and the e1000e pair; the one-line
//! errors of its options; its load cell, every device busy at once under
//! `record --cross-check`. The guest side is `cli/tests/lab/server.sh`.

use crate::support::exact::*;
use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

/// The server machine's devices (pinned PCI addresses, docs/lab.md), each NVMe with its disk.
const NVME: [(&str, &str); 2] = [("0000:00:04.0", "nvme0n1"), ("0000:00:07.0", "nvme1n1")];
const E1000E: [&str; 2] = ["0000:00:05.0", "0000:00:06.0"];
/// The NVMe counts held exactly against the block layer's reads.
const COMPARED_EXACTLY: [&str; 3] = ["dma_map", "dma_unmap", "completion"];
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
    let out = run_guest_script(
        "server-facts",
        &["--machine", "server", "--kernel", "6.12"],
        "server.sh",
        &["facts"],
    );
    let stdout = read(&out.join("facts"));
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
    for (i, (controller, (address, _))) in nvme.iter().zip(NVME).enumerate() {
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

/// QEMU 10.0 aborted on its own assertion in some server boots, as the guest sized its PCI BARs
/// with every vCPU up (docs/lab.md): the emulator's crash, which lab/run boots again after (three
/// boots in all), saying so, and names as the emulator's when it ends the run.
#[test]
fn lab_boots_again_when_the_emulator_aborts() {
    if lab_skipped("lab_boots_again_when_the_emulator_aborts") {
        return;
    }
    let qemu = Path::new(env!("CARGO_TARGET_TMPDIR")).join("qemu-that-aborts");
    std::fs::write(
        &qemu,
        "#!/bin/sh\necho \"qemu-system-x86_64: system/physmem.c:2678: iotlb_to_section: \
         Assertion \\`section_index < d->map.sections_nb' failed.\" >&2\nkill -ABRT $$\n",
    )
    .expect("write the fake QEMU");
    std::fs::set_permissions(&qemu, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("make the fake QEMU executable");
    let output = Command::new(project_root().join("lab/run"))
        .args(["--machine", "server", "--", "true"])
        .env("IOMMUTOP_QEMU_SERVER", &qemu)
        .current_dir(project_root())
        .output()
        .expect("lab/run starts");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(125), "{stderr}");
    let assertion =
        "system/physmem.c:2678: iotlb_to_section: Assertion `section_index < d->map.sections_nb' failed.";
    for boot in [2, 3] {
        assert!(
            stderr.contains(&format!(
                "lab: the emulator aborted while booting ({assertion}): the emulator's crash; boot {boot} of 3\n"
            )),
            "boot {boot}: {stderr}"
        );
    }
    assert_eq!(
        emulator_crashes(&stderr).len(),
        3,
        "two boots again and the crash that ended the run: {stderr}"
    );
    assert!(
        stderr.contains("the guest stopped before the command finished (qemu exit 134)"),
        "{stderr}"
    );
    // lab/run keeps a failed run's directory for its logs: nothing to read in this one.
    if let Some(run) = kernel_log_path(&stderr).as_deref().and_then(Path::parent) {
        let _ = std::fs::remove_dir_all(run);
    }
}

/// The server's load cell: at once, fio 4 KiB random reads at QD32 × 4 jobs
/// on each NVMe controller, TCP_RR between the e1000e pair and TCP_RR between two igb VFs (each
/// pair in two network namespaces), recorded with `--cross-check` (`server.sh load`). Every count
/// against an independent one within 0.5%, with no allowance for what the report admits: each
/// NVMe's DMA maps, unmaps, page-table maps and completions against its disk's block-layer reads;
/// each NIC's and VF's maps against its unmaps, and its packets against its interface counters.
/// Each PCI function is a row of its own (a VF's work is not its PF's), the report warns of no
/// loss when the counts are exact, and the kernel's own events agree with the probes.
fn server_load_cell_counts_exactly(kernel: &str, understudies: bool) {
    lab_fetch(&["--kernel", kernel, "--machine", "server"]);
    let out = run_guest_script(
        &format!("server-load-{kernel}"),
        &["--machine", "server", "--kernel", kernel],
        "server.sh",
        &["load"],
    );
    for workload in ["nvme0n1.fio", "nvme1n1.fio", "e1000e.netperf", "vf.netperf"] {
        assert_eq!(
            read(&out.join(format!("load.{workload}.rc"))).trim(),
            "0",
            "{workload} failed: {}",
            read(&out.join(format!("load.{workload}.out")))
        );
    }
    let report = read_report(&out, "load");
    assert_server_load_cell(kernel, &out, &report, understudies);
}

/// What [`server_load_cell_counts_exactly`] checks of its report.
fn assert_server_load_cell(kernel: &str, out: &Path, report: &Value, understudies: bool) {
    let what = format!("{kernel} server under load");
    assert_nothing_untracked(report);
    let rows: Vec<&str> = report["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .map(|row| row["key"].as_str().expect("a row's key"))
        .collect();
    eprintln!("{what}: rows {rows:?}");
    let (vf_a, vf_b) = (IGB_VFS[0], IGB_VFS[1]);
    let mut busy: Vec<&str> = NVME.iter().map(|(address, _)| *address).collect();
    busy.extend(E1000E);
    busy.extend([vf_a, vf_b]);
    for key in &busy {
        assert_eq!(
            rows.iter().filter(|row| *row == key).count(),
            1,
            "{what}: {key} is one row of its own: {rows:?}"
        );
    }
    let unique: std::collections::BTreeSet<&str> = rows.iter().copied().collect();
    assert_eq!(unique.len(), rows.len(), "{what}: a row per key: {rows:?}");

    let (mut maps, mut reads_in_all) = (0, 0);
    let mut exact = true;
    for (address, disk) in NVME {
        let name = format!("load.{disk}");
        let reads = block_reads(out, &name);
        assert_close(
            &format!("{what}: {disk}'s block-layer reads vs fio's"),
            reads,
            fio_reads(out, &name, "total_ios"),
            0.5,
        );
        let row = device(report, address);
        for op in ["dma_map", "dma_unmap", "completion", "iommu_map"] {
            assert_counted(
                &format!("{what}: {address} {op} vs {disk}'s block-layer reads"),
                count(row, op),
                reads,
            );
        }
        exact &= COMPARED_EXACTLY.iter().all(|op| count(row, op) == reads);
        maps += count(row, "dma_map");
        reads_in_all += reads;
    }
    assert_loss_figure_true(&what, report, "dma_map", maps, reads_in_all);
    if exact {
        assert_no_loss_warning(&format!("{what}, counts exact"), report, &COMPARED_EXACTLY);
    }

    for nic in busy.iter().skip(NVME.len()) {
        let row = device(report, nic);
        assert_maps_match_unmaps(&format!("{what}: {nic}"), row);
        let (packets, counters) = (
            count(row, "tx_packets") + count(row, "completion"),
            nic_packets(out, "load", nic),
        );
        eprintln!("{what}: {nic} {packets} packets sent and received, {counters} by its counters");
        assert_close(
            &format!("{what}: {nic} packets sent and received vs its interface counters"),
            packets,
            counters,
            0.5,
        );
    }
    for workload in ["load.e1000e", "load.vf"] {
        eprintln!(
            "{what}: {workload} {} transactions",
            transactions(out, workload)
        );
    }

    assert_cross_check_agrees(&what, report, &busy, true, true);
    assert_eq!(
        report["self_overhead"]["understudies"]["on"], understudies,
        "{what}: understudies: {}",
        report["self_overhead"]["understudies"]
    );
    if understudies {
        assert_untimed_within_target(&what, report);
    }
}

#[test]
fn server_load_cell_counts_exactly_on_6_12() {
    if lab_skipped("server_load_cell_counts_exactly_on_6_12") {
        return;
    }
    server_load_cell_counts_exactly("6.12", false);
}

/// scripts/matrix runs it (`cargo test -- --ignored`): CI keeps one boot of the server machine,
/// which takes both of its cores while it runs (docs/lab.md says for how long).
#[test]
#[ignore]
fn server_load_cell_counts_exactly_on_7_3() {
    if lab_skipped("server_load_cell_counts_exactly_on_7_3") {
        return;
    }
    server_load_cell_counts_exactly("7.3", true);
}

/// The device rows of one table as text lines: those after the line starting with `DEVICE`
/// (border characters trimmed) up to the `total` line, which is returned apart.
fn table_rows(text: &str) -> Option<(Vec<String>, String)> {
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            l.trim_matches(|c: char| c == '│' || c.is_whitespace())
                .to_string()
        })
        .collect();
    let header = lines.iter().position(|l| l.starts_with("DEVICE"))?;
    let total = header
        + lines[header..]
            .iter()
            .position(|l| l.starts_with("total"))?;
    Some((lines[header + 1..total].to_vec(), lines[total].clone()))
}

/// Where QEMU puts the igb's VFs with `--vfs 7`: the first four, then 00:1d.0, .2 and .4.
const IGB_SEVEN_VFS: [&str; 7] = [
    IGB_VFS[0],
    IGB_VFS[1],
    IGB_VFS[2],
    IGB_VFS[3],
    "0000:00:1d.0",
    "0000:00:1d.2",
    "0000:00:1d.4",
];

/// A table of `what` from the server's views: sorted by MAPS/s (largest first), no figure cut
/// (`…`: the numeric cells, the last ones of a row; a long key may end in `…` in the live view),
/// no line wider than `width`; with `every_function`, a row for each of the machine's twelve
/// PCI functions (NVMe, e1000e, the igb PF and its VFs).
fn assert_server_table(what: &str, text: &str, width: usize, every_function: bool) {
    let (rows, total) = table_rows(text).unwrap_or_else(|| panic!("{what}: no table:\n{text}"));
    if every_function {
        let functions = NVME
            .iter()
            .map(|(pci, _)| *pci)
            .chain(E1000E)
            .chain([IGB_PF])
            .chain(IGB_SEVEN_VFS);
        for pci in functions {
            assert!(
                rows.iter().any(|r| r.starts_with(&format!("{pci} "))),
                "{what}: no row of {pci}:\n{text}"
            );
        }
    }
    let header: Vec<&str> = text
        .lines()
        .find(|l| l.contains("DEVICE"))
        .expect("a header")
        .trim_matches(|c: char| c == '│' || c.is_whitespace())
        .split_whitespace()
        .collect();
    let maps_column = header
        .iter()
        .position(|&t| t == "MAPS/s")
        .unwrap_or_else(|| panic!("{what}: no MAPS/s in {header:?}"));
    // MAPS/s is the first of the numeric cells, counted from a row's end (a text cell may hold
    // no word at all).
    let figures = header.len() - maps_column;
    let rates: Vec<f64> = rows
        .iter()
        .map(|r| {
            let cells: Vec<&str> = r.split_whitespace().collect();
            crate::tui::rate(cells[cells.len().saturating_sub(figures)])
        })
        .collect();
    assert!(
        rates.windows(2).all(|w| w[0] >= w[1]),
        "{what}: not sorted by MAPS/s {rates:?}:\n{text}"
    );
    assert!(total.starts_with("total"), "{what}: {total:?}");
    for line in &rows {
        let cells: Vec<&str> = line.split_whitespace().collect();
        let numbers = &cells[cells.len().saturating_sub(figures)..];
        assert!(
            numbers.iter().all(|c| !c.contains('…')),
            "{what}: a figure cut short: {line:?}"
        );
    }
    assert!(!total.contains('…'), "{what}: a total cut short: {total:?}");
    for line in text.lines() {
        assert!(
            line.chars().count() <= width,
            "{what}: a line over {width} columns: {line:?}"
        );
    }
}

/// A server's views (`server.sh views`, `--vfs 7`: twelve PCI functions, each
/// doing DMA) from a real run with light traffic on every function: `top --batch` at 80 and 200
/// columns and the live view in 200×50 and 80×40 tmux panes, each sorted, totalled, with every
/// figure whole and a row for every function; the view's report lists each VF under its PF and
/// the HTML page marks it. scripts/views copies what it saw into docs/views/.
#[test]
fn lab_server_views_stay_whole_at_80_and_200_columns() {
    if lab_skipped("lab_server_views_stay_whole_at_80_and_200_columns") {
        return;
    }
    lab_fetch(&["--kernel", "6.12", "--machine", "server"]);
    let out = run_guest_script(
        "server-views",
        &[
            "--machine",
            "server",
            "--vfs",
            "7",
            "--kernel",
            "6.12",
            "--timeout",
            "900",
        ],
        "server.sh",
        &["views"],
    );
    for width in [80, 200] {
        let batch = read(&out.join(format!("views.batch-{width}.txt")));
        let blocks: Vec<&str> = batch
            .split("\n\n")
            .filter(|b| !b.trim().is_empty())
            .collect();
        assert_eq!(
            blocks.len(),
            3,
            "three intervals at {width} columns:\n{batch}"
        );
        for (i, block) in blocks.iter().enumerate() {
            let what = format!("top --batch at {width} columns, interval {}", i + 1);
            assert_server_table(&what, block, width, i == blocks.len() - 1);
        }
    }
    assert_eq!(read(&out.join("views.top.rc")).trim(), "0", "top's exit");
    for (width, height) in [(200, 50), (80, 40)] {
        let pane = read(&out.join(format!("views.top-{width}x{height}.txt")));
        let what = format!("the live view at {width}x{height}");
        assert_server_table(&what, &pane, width, true);
    }
    // The live view's report, as `report` prints it on the host at each width, and its page.
    let views = out.join("views.json");
    let report_of = |args: &[&str], columns: &str| {
        let output = Command::new(lab_iommutop_bin())
            .arg("report")
            .arg(&views)
            .args(args)
            .env("COLUMNS", columns)
            .output()
            .expect("iommutop report runs");
        assert_succeeded(&output, "iommutop report");
        String::from_utf8(output.stdout).expect("UTF-8")
    };
    for width in [80, 200] {
        let report = report_of(&[], &width.to_string());
        std::fs::write(out.join(format!("views.report-{width}.txt")), &report)
            .expect("write the report text");
        let lines: Vec<&str> = report.lines().collect();
        let pf = lines
            .iter()
            .position(|l| l.starts_with(IGB_PF))
            .unwrap_or_else(|| panic!("report at {width}: no PF row:\n{report}"));
        for (i, vf) in IGB_SEVEN_VFS.iter().enumerate() {
            assert!(
                lines[pf + 1 + i].starts_with(&format!("  {vf}")),
                "report at {width}: VF {vf} not under its PF:\n{report}"
            );
        }
    }
    let html = report_of(&["--format", "html"], "200");
    for vf in IGB_SEVEN_VFS {
        assert!(html.contains(vf), "the HTML page has no {vf}");
    }
    assert!(
        html.contains(&format!("VF of {IGB_PF}")),
        "the HTML page marks no VF as its PF's"
    );
}
