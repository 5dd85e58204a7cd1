//! Profiles and workloads on the build machine: the listing, every bad profile's one-line error,
//! the workloads run alone with the real tools (netperf on loopback, fio on a file, the TLB chase
//! without root), and one profile run under the probes with its report checked against the
//! schema. The lab tests (`lab/workloads.rs`) run them against real devices.

mod support;

use support::assert_success;

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};
use support::*;

/// Tests that create network namespaces run one at a time: each checks that no `iommutop-`
/// namespace is left, and a run restores what any dead run left.
static NETNS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn netns_lock() -> std::sync::MutexGuard<'static, ()> {
    NETNS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn iommutop() -> Command {
    Command::cargo_bin("iommutop").expect("binary built")
}

fn bad_profiles() -> Vec<PathBuf> {
    let dir = project_root().join("workloads/runner/tests/bad-profiles");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("bad profiles")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths
}

const SHIPPED: [&str; 10] = [
    "tcp-rr-1k",
    "fio-randread-4k-qd32x4",
    "fio-randwrite-4k-qd32x4",
    "fio-read-128k-qd128",
    "fio-write-128k-qd128",
    "dma-contention",
    "tlb-sweep",
    "vfio-nvme-qd1",
    "vfio-nvme-qd32x4",
    "vfio-nvme-iotlb-sweep",
];

#[test]
fn profiles_lists_every_shipped_profile_with_its_workload() {
    let output = iommutop().arg("profiles").output().expect("runs");
    assert_success(&output);
    let text = String::from_utf8_lossy(&output.stdout);
    for name in SHIPPED {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} not listed:\n{text}"));
        assert!(line.split_whitespace().count() > 3, "{line}");
    }
    let output = iommutop()
        .args(["profiles", "--json"])
        .output()
        .expect("runs");
    let listed: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let tcp = listed
        .as_array()
        .and_then(|a| a.iter().find(|p| p["name"] == "tcp-rr-1k"))
        .expect("tcp-rr-1k");
    assert_eq!(tcp["workload"], "netperf");
    assert_eq!(tcp["params"]["request_size"], 1024);
}

#[test]
fn each_bad_profile_is_one_line_naming_file_line_and_key_and_exits_2() {
    let paths = bad_profiles();
    assert!(paths.len() >= 15);
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("read");
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .expect("# expect: line");
        let output = iommutop().arg("run").arg(&path).output().expect("runs");
        let want = format!("iommutop: {}:{expect}", path.display());
        assert_one_line_error(&output, 2, &[&want]);
    }
}

#[test]
fn run_refuses_before_attaching_anything() {
    // No target for a write: a usage error naming what to do.
    let output = iommutop()
        .args(["run", "fio-randwrite-4k-qd32x4"])
        .output()
        .expect("runs");
    assert_one_line_error(
        &output,
        2,
        &[
            "fio-randwrite-4k-qd32x4",
            "overwrites data",
            "--set filename=",
        ],
    );
    // vfio-nvme on a machine without an NVMe controller: refused before the probes attach.
    let output = iommutop()
        .args(["run", "vfio-nvme-qd1"])
        .output()
        .expect("runs");
    if is_root() {
        assert_one_line_error(&output, 2, &["no NVMe controller found"]);
    } else {
        assert_one_line_error(&output, 3, &["run as root"]);
    }
    // Unknown profile, bad --set, --duration on a workload without one.
    let output = iommutop().args(["run", "nope"]).output().expect("runs");
    assert_one_line_error(&output, 2, &["nope: no such profile", "iommutop profiles"]);
    let output = iommutop()
        .args(["run", "tcp-rr-1k", "--set", "iodepth=3"])
        .output()
        .expect("runs");
    assert_one_line_error(
        &output,
        2,
        &["--set iodepth=3", "unknown parameter for workload netperf"],
    );
    let output = iommutop()
        .args(["run", "tlb-sweep", "--duration", "3"])
        .output()
        .expect("runs");
    assert_one_line_error(&output, 2, &["--duration", "takes no duration"]);
}

#[test]
fn a_missing_tool_is_one_line_saying_how_to_install_it() {
    let output = iommutop()
        .args(["workload", "netperf", "mode=loopback"])
        .env("PATH", "/nonexistent")
        .output()
        .expect("runs");
    assert_one_line_error(
        &output,
        3,
        &["`netperf` not found in PATH", "apt-get install netperf"],
    );
}

fn temp_dir_for_everyone() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    dir
}

#[test]
fn tlb_runs_without_root_and_gives_a_curve_per_page_size() {
    let dir = temp_dir_for_everyone();
    let json = dir.path().join("tlb.json");
    let root = is_root();
    let mut command = if root {
        // Drop to nobody: the workload must not need privileges.
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
        c.arg(iommutop_bin());
        c
    } else {
        std::process::Command::new(iommutop_bin())
    };
    let output = command
        .args([
            "workload",
            "tlb",
            "max_size=4m",
            "sizes_per_octave=1",
            "time_per_size_ms=5",
            "--json",
        ])
        .arg(&json)
        .output()
        .expect("runs");
    assert_success(&output);
    let result = read_json(&json);
    let curve = result["results"]["curve"].as_array().expect("curve");
    for page in ["4k", "2m"] {
        let points: Vec<&Value> = curve.iter().filter(|p| p["page_size"] == page).collect();
        // 4k, 8k, … 4m: 11 working sets (2m: on hugetlb, THP, or absent with a warning).
        if page == "2m" && points.is_empty() {
            let warnings = result["warnings"].to_string();
            assert!(warnings.contains("2 MiB pages not measured"), "{warnings}");
            continue;
        }
        assert_eq!(points.len(), 11, "{page}: {points:?}");
        assert!(points
            .iter()
            .all(|p| p["ns_per_access"].as_f64().unwrap_or(0.0) > 0.0));
    }
}

#[test]
fn netperf_on_loopback_reports_transactions_and_latency_percentiles() {
    // As root it also restores what dead runs left: not while another test kills one.
    let _netns = netns_lock();
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("netperf.json");
    let output = iommutop()
        .args([
            "workload",
            "netperf",
            "mode=loopback",
            "--duration",
            "2",
            "--json",
        ])
        .arg(&json)
        .output()
        .expect("runs");
    assert_success(&output);
    let r = &read_json(&json)["results"];
    assert!(r["transactions_per_s"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
    assert!(r["transactions"].as_u64().unwrap_or(0) > 0, "{r}");
    for key in [
        "mean_latency_us",
        "p50_latency_us",
        "p90_latency_us",
        "p99_latency_us",
    ] {
        assert!(r[key].as_f64().is_some(), "{key}: {r}");
    }
    assert!(r["local_cpu_percent"].as_f64().is_some(), "{r}");
}

#[test]
fn fio_on_a_file_reports_iops_and_percentiles_and_creates_it_at_the_given_size() {
    // As root it also restores what dead runs left: not while another test kills one.
    let _netns = netns_lock();
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("data");
    let output = iommutop()
        .args([
            "workload",
            "fio",
            "rw=randread",
            "iodepth=4",
            "duration_s=1",
            "size=16m",
        ])
        .arg(format!("filename={}", file.display()))
        .output()
        .expect("runs");
    assert_success(&output);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.starts_with(&format!("fio on {}:", file.display())),
        "{text}"
    );
    assert!(text.contains("completion latency µs"), "{text}");
    assert_eq!(
        std::fs::metadata(&file).map(|m| m.len()).ok(),
        Some(16 << 20)
    );
}

/// Under the probes on the host (tracepoint tier): one report with fio's numbers beside the
/// devices', valid against the schema. Needs root, as every probe test here.
#[test]
fn run_writes_one_report_with_the_workloads_numbers_valid_against_the_schema() {
    // As root it also restores what dead runs left: not while another test kills one.
    let _netns = netns_lock();
    assert!(is_root(), "run the host tests as root (scripts/test does)");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("data");
    std::fs::write(&file, vec![0u8; 8 << 20]).expect("data file");
    let json = dir.path().join("r.json");
    let output = iommutop()
        .args(["run", "fio-read-128k-qd128", "--duration", "2", "--json"])
        .arg(&json)
        .arg("--set")
        .arg(format!("filename={}", file.display()))
        .output()
        .expect("runs");
    assert_success(&output);
    let report = read_json(&json);
    assert_valid_report(&report);
    assert_eq!(report["run"]["profile"], "fio-read-128k-qd128");
    let workload = &report["run"]["workload"];
    assert_eq!(workload["name"], "fio");
    assert_eq!(workload["params"]["bs"], 131072);
    assert_eq!(workload["params"]["iodepth"], 128);
    assert!(workload["results"]["read_iops"].as_f64().unwrap_or(0.0) > 0.0);
    assert!(workload["results"]["read_clat_p99_us"].as_f64().is_some());
    let live: Vec<&Value> = report["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .filter(|i| i["workload"]["iops"].is_number())
        .collect();
    assert!(
        !live.is_empty(),
        "fio's per-second IOPS are in the intervals"
    );
    assert!(Path::new(&json).exists());
}

/// A veth pair standing in for two cabled NICs; deleted on drop.
struct VethPair {
    a: String,
    b: String,
}

impl VethPair {
    fn new(tag: &str) -> VethPair {
        let a = format!("iot{tag}{}a", std::process::id() % 10000);
        let b = format!("iot{tag}{}b", std::process::id() % 10000);
        ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
        // A state to come back to: a up with an address, b down without.
        ip(&["addr", "add", "10.99.77.1/30", "dev", &a]);
        ip(&["link", "set", "dev", &a, "up"]);
        VethPair { a, b }
    }

    /// (up, global addresses) of a NIC in this namespace; None if it is not here.
    fn state(name: &str) -> Option<(bool, Vec<String>)> {
        let out = std::process::Command::new("ip")
            .args(["-j", "addr", "show", "dev", name])
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let links: Value = serde_json::from_slice(&out.stdout).ok()?;
        let link = links.get(0)?;
        let up = link["flags"].as_array()?.iter().any(|f| f == "UP");
        let addresses = link["addr_info"]
            .as_array()?
            .iter()
            .filter(|a| a["scope"] == "global")
            .map(|a| format!("{}/{}", a["local"].as_str().unwrap_or(""), a["prefixlen"]))
            .collect();
        Some((up, addresses))
    }

    fn assert_as_before(&self) {
        assert_eq!(
            VethPair::state(&self.a),
            Some((true, vec!["10.99.77.1/30".to_string()])),
            "{} not restored",
            self.a
        );
        assert_eq!(
            VethPair::state(&self.b),
            Some((false, vec![])),
            "{} not restored",
            self.b
        );
        let namespaces = std::process::Command::new("ip")
            .args(["netns", "list"])
            .output()
            .expect("ip netns list");
        let namespaces = String::from_utf8_lossy(&namespaces.stdout);
        assert!(
            !namespaces.contains("iommutop-"),
            "namespaces left: {namespaces}"
        );
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.a])
            .output();
    }
}

fn ip(args: &[&str]) {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .expect("ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// netperf's local mode with a veth pair for the two NICs: both move into namespaces, TCP_RR
/// runs between them, and they come back as they were: after a normal end, after Ctrl-C, and
/// (through the next run) after SIGKILL.
#[test]
fn netperf_local_mode_moves_two_nics_and_restores_them_on_every_exit() {
    assert!(is_root(), "run the host tests as root (scripts/test does)");
    let _netns = netns_lock();
    let pair = VethPair::new("n");
    let nics = format!("nics={},{}", pair.a, pair.b);

    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("n.json");
    let output = iommutop()
        .args(["workload", "netperf", &nics, "duration_s=2", "--json"])
        .arg(&json)
        .output()
        .expect("runs");
    assert_success(&output);
    let r = &read_json(&json)["results"];
    assert_eq!(r["mode"], "local");
    assert!(r["transactions_per_s"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
    assert_eq!(r["nics"][0]["name"], pair.a.as_str());
    pair.assert_as_before();

    // Ctrl-C mid-run: netperf stops, the NICs come back, exit 1 says interrupted.
    let child = std::process::Command::new(iommutop_bin())
        .args(["workload", "netperf", &nics, "duration_s=30"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    wait_for_namespace();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().expect("ends");
    assert!(!output.status.success());
    pair.assert_as_before();

    // SIGKILL mid-run: nothing can restore then; the next run does, from the record.
    let mut child = std::process::Command::new(iommutop_bin())
        .args(["workload", "netperf", &nics, "duration_s=30"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    wait_for_namespace();
    std::thread::sleep(std::time::Duration::from_millis(500));
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    // The orphaned netperf/netserver die with their namespaces' NICs gone; the next run restores.
    assert!(
        VethPair::state(&pair.a).is_none(),
        "{} should still be away",
        pair.a
    );
    let output = iommutop()
        .args(["workload", "netperf", "mode=loopback", "duration_s=1"])
        .output()
        .expect("runs");
    assert_success(&output);
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("restored what a killed run"), "{said}");
    pair.assert_as_before();
    assert_eq!(
        live_tools_serving("10.77.0.2"),
        0,
        "netserver or netperf left running"
    );
}

/// Processes (not zombies) whose command line holds `needle`.
fn live_tools_serving(needle: &str) -> usize {
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let zombie = stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'));
            !zombie
                && String::from_utf8_lossy(&cmdline)
                    .replace('\0', " ")
                    .contains(needle)
                && (String::from_utf8_lossy(&cmdline).starts_with("netserver")
                    || String::from_utf8_lossy(&cmdline).starts_with("netperf"))
        })
        .count()
}

/// Waits for the workload's network namespace; the 20 s only keep a run that never makes one
/// from blocking the test.
fn wait_for_namespace() {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        let out = std::process::Command::new("ip")
            .args(["netns", "list"])
            .output();
        if out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("iommutop-")) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("no iommutop namespace appeared");
}

/// Ctrl-C during `iommutop run`: the workload stops, the NICs come back, the report is written
/// and says the run was interrupted; exit 1.
#[test]
fn an_interrupted_run_restores_and_still_writes_its_report() {
    assert!(is_root(), "run the host tests as root (scripts/test does)");
    let _netns = netns_lock();
    let pair = VethPair::new("r");
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("r.json");
    let child = std::process::Command::new(iommutop_bin())
        .args(["run", "tcp-rr-1k", "--duration", "60", "--set"])
        .arg(format!("nics={},{}", pair.a, pair.b))
        .arg("--json")
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    wait_for_namespace();
    std::thread::sleep(std::time::Duration::from_secs(2));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().expect("ends");
    assert_eq!(output.status.code(), Some(1));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("interrupted (the report covers the run up to then)"),
        "{said}"
    );
    let report = read_json(&json);
    assert_valid_report(&report);
    assert_eq!(report["run"]["workload"]["results"]["interrupted"], true);
    pair.assert_as_before();
}

#[test]
fn vfio_nvme_bad_parameters_are_one_line_usage_errors_before_anything_changes() {
    for (args, needles) in [
        (&["--page-size", "8k"][..], &["page_size", "8k"][..]),
        (&["--pattern", "randwrite"][..], &["add --allow-write"][..]),
        (
            &["--pattern", "write", "--allow-write"][..],
            &["add --device"][..],
        ),
        (
            &["--qd", "32", "--pages", "2"][..],
            &["give --pages 32 or more"][..],
        ),
        (&["--bs", "100"][..], &["bs", "100"][..]),
        (&["--frobnicate", "1"][..], &["frobnicate"][..]),
        (&["--qd"][..], &["--qd needs a value"][..]),
    ] {
        let output = iommutop()
            .args(["workload", "vfio-nvme"])
            .args(args)
            .output()
            .expect("runs");
        assert_one_line_error(&output, 2, needles);
    }
}

#[test]
fn vfio_nvme_on_a_machine_without_that_controller_names_the_address() {
    let output = iommutop()
        .args([
            "workload",
            "vfio-nvme",
            "--device",
            "0000:ff:1f.7",
            "--ios",
            "1",
        ])
        .output()
        .expect("runs");
    if is_root() {
        assert_one_line_error(&output, 2, &["0000:ff:1f.7"]);
    } else {
        assert_one_line_error(&output, 3, &["run as root"]);
    }
}

/// The driver's worker is iommutop itself started again: a bad request gets a failure reply.
#[test]
fn iommutop_answers_as_the_vfio_nvme_worker() {
    let output = iommutop()
        .arg(iommutop_vfio_nvme::worker::WORKER_ARG)
        .write_stdin("not json")
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(1));
    let reply = String::from_utf8_lossy(&output.stdout);
    assert!(
        reply.starts_with("{\"Failed\":\"bad request from the parent"),
        "{reply}"
    );
}

/// `--json -`: the results alone on stdout, the summary on stderr, no file named `-`.
/// The help said "vfio-nvme: not yet" and `Usage: workload`, without the program's name.
#[test]
fn workload_help_names_the_program_and_lists_every_workload() {
    let output = iommutop()
        .args(["workload", "--help"])
        .output()
        .expect("runs");
    assert_success(&output);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("Usage: iommutop workload "), "{text}");
    assert!(text.contains("  vfio-nvme "), "{text}");
    assert!(!text.contains("not yet"), "{text}");
}

#[test]
fn workload_json_dash_is_standard_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = std::process::Command::new(iommutop_bin())
        .current_dir(dir.path())
        .args([
            "workload",
            "tlb",
            "max_size=1m",
            "sizes_per_octave=1",
            "time_per_size_ms=5",
            "--json",
            "-",
        ])
        .output()
        .expect("runs");
    assert_success(&output);
    let value: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("stdout is the JSON alone");
    assert_eq!(value["name"], "tlb");
    assert!(!dir.path().join("-").exists(), "no file named `-`");
}
