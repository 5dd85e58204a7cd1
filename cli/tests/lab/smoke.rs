//! The lab itself (`lab/run`, docs/lab.md): what a user checks first in each guest (IOMMU groups
//! and their domain type, NVMe and the two e1000e bound to their drivers, the file systems the
//! probes need), and what `lab/run` promises: COMMAND's exit status, stdout without kernel
//! messages, argv passed exactly, a writable project root, a killed hung guest, one-line errors.
//!
//! Each boot costs 7–15 s under TCG, so each booting test batches its checks into one guest
//! command. The tests that boot fail (never pass silently) when the lab cannot run here; with
//! `IOMMUTOP_SKIP_LAB=1` they say they are skipped and return.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("project root")
}

fn lab_script() -> PathBuf {
    project_root().join("lab/run")
}

use crate::support;

/// Whether the booting tests were asked to skip; says so, and names the test for scripts/test.
fn skipped(test: &str) -> bool {
    support::lab_skipped(test)
}

/// `lab/run ARGS` as it is, whatever it exits with.
fn lab_command(args: &[&str], env: &[(&str, &str)]) -> Output {
    let lab = lab_script();
    assert!(lab.exists(), "{} is missing", lab.display());
    let started = std::time::Instant::now();
    let output = Command::new(&lab)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(project_root())
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", lab.display()));
    let options = args.split(|a| *a == "--").next().unwrap_or_default();
    support::record_lab_time(options, started, &output);
    output
}

/// The tail of the kernel log that lab/run names in its last line, if it names one.
fn kernel_log_tail(stderr: &str) -> String {
    let Some(path) = support::kernel_log_path(stderr) else {
        return String::new();
    };
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// `lab/fetch --kernel KERNEL` (see `support::lab_fetch`).
fn fetched(kernel: &str) {
    support::lab_fetch(&["--kernel", kernel]);
}

/// Runs `lab/run ARGS` (ARGS include `-- COMMAND...`) for a test that needs the lab: fails the
/// test, saying what is missing, when the lab cannot run here (exit 3), with the end of the
/// kernel log when the guest failed or hung (125, 124), and with the kernel's lines when it
/// reported trouble (123).
fn lab_run(args: &[&str]) -> Output {
    let output = lab_command(args, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        Some(3) => panic!(
            "the lab cannot run here (lab/run exit 3; set IOMMUTOP_SKIP_LAB=1 to skip the lab tests): {stderr}"
        ),
        Some(support::LAB_KERNEL_TROUBLE) => panic!("{}", support::kernel_trouble_message(&stderr)),
        Some(code @ (124 | 125)) => panic!(
            "lab/run {args:?} failed in the guest (exit {code}): {stderr}\n--- kernel log (end) ---\n{}",
            kernel_log_tail(&stderr)
        ),
        _ => output,
    }
}

fn assert_one_line(output: &Output, code: i32, needle: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "stderr: {stderr}");
    assert!(
        output.stdout.is_empty(),
        "stdout must be empty: {:?}",
        String::from_utf8_lossy(&output.stdout)
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line on stderr: {stderr}");
    assert!(lines[0].starts_with("lab: "), "{stderr}");
    assert!(
        stderr.contains(needle),
        "`{}` lacks `{needle}`",
        stderr.trim()
    );
}

/// What the guest checks, printed as `key=value` lines (a key may repeat); exits 7.
/// $1: a directory (relative to the project root) to write a file into; $2: an argument echoed back.
const GUEST_CHECKS: &str = r#"
echo "kernel=$(uname -r)"
echo "pwd=$(pwd)"
echo "env=$IOMMUTOP_LAB,$IOMMUTOP_LAB_KERNEL,$IOMMUTOP_LAB_IOMMU,$HOME"
echo "arg=$2"
for t in /sys/kernel/iommu_groups/*/type; do [ -r "$t" ] && echo "group_type=$(cat "$t")"; done
for d in /sys/bus/pci/drivers/nvme/0000:*; do [ -e "$d" ] && echo "nvme_bound=${d##*/}"; done
[ -b /dev/nvme0n1 ] && echo "nvme0n1=block"
for n in /sys/class/net/*; do
  [ -e "$n/device/driver" ] && echo "netdev=${n##*/}:$(basename "$(readlink "$n/device/driver")")"
done
for i in /sys/class/iommu/*; do [ -e "$i" ] && echo "iommu_unit=${i##*/}"; done
echo "fs=$(stat -f -c %T /sys/kernel/tracing),$(stat -f -c %T /sys/kernel/debug),$(stat -f -c %T /sys/fs/bpf)"
grep -q '^CONFIG_IOMMU_API=y' "/boot/config-$(uname -r)" && echo "boot_config=readable"
modprobe tun && [ -d /sys/module/tun ] && echo "modprobe=ok"
mkdir -p "$1" && echo "written by the guest" >"$1/from-guest.txt" && echo "wrote=$1/from-guest.txt"
echo "to stderr" >&2
exit 7
"#;

/// An argument that survives no shell quoting done wrong.
const TRICKY_ARG: &str = "it's \"quoted\" $HOME `id` \\ * ;\nsecond line";

struct Guest {
    facts: BTreeMap<String, Vec<String>>,
    out_dir: PathBuf,
}

impl Guest {
    fn all(&self, key: &str) -> &[String] {
        self.facts.get(key).map(Vec::as_slice).unwrap_or(&[])
    }

    fn one(&self, key: &str) -> &str {
        match self.all(key) {
            [v] => v,
            other => panic!("expected one {key}=…, got {other:?}"),
        }
    }
}

/// Boots a guest with LAB_ARGS, runs GUEST_CHECKS, checks what every boot must show (exit
/// status 7 propagated, clean stdout, the stderr line, argv and environment, the file written
/// to the project root), and returns the facts for the caller's own checks.
fn boot_and_check(name: &str, kernel: &str, iommu: &str, lab_args: &[&str]) -> Guest {
    let rel_out = format!("target/lab-out/smoke-{name}");
    let out_dir = project_root().join(&rel_out);
    let _ = std::fs::remove_dir_all(&out_dir);
    fetched(kernel);

    let mut args: Vec<&str> = vec!["--kernel", kernel, "--iommu", iommu];
    args.extend_from_slice(lab_args);
    args.extend_from_slice(&["--", "sh", "-c", GUEST_CHECKS, "sh", &rel_out, TRICKY_ARG]);
    let output = lab_run(&args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();

    assert_eq!(
        output.status.code(),
        Some(7),
        "the command's exit status comes out\nstdout: {stdout}\nstderr: {stderr}"
    );
    assert_eq!(
        stderr, "to stderr\n",
        "stderr carries the command's stderr only"
    );

    // stdout is the command's output and nothing else: no kernel messages, no lab chatter.
    let mut facts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut lines = stdout.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        let line = line.strip_suffix('\n').unwrap_or(line);
        assert!(
            !line.starts_with('['),
            "kernel message on stdout: {line}\n{stdout}"
        );
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not key=value on stdout: {line:?}\n{stdout}"));
        assert!(
            !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "unexpected line on stdout: {line:?}\n{stdout}"
        );
        let mut value = value.to_string();
        if key == "arg" {
            // TRICKY_ARG spans two lines.
            if let Some(next) = lines.next() {
                value.push('\n');
                value.push_str(next.strip_suffix('\n').unwrap_or(next));
            }
        }
        facts.entry(key.to_string()).or_default().push(value);
    }
    let guest = Guest { facts, out_dir };

    assert!(
        guest.one("kernel").starts_with(&format!("{kernel}.")),
        "kernel {}",
        guest.one("kernel")
    );
    assert_eq!(
        guest.one("pwd"),
        project_root().to_string_lossy(),
        "COMMAND runs in the project root"
    );
    assert_eq!(
        guest.one("env"),
        format!("1,{kernel},{iommu},/root"),
        "IOMMUTOP_LAB, _KERNEL, _IOMMU, HOME"
    );
    assert_eq!(
        guest.one("arg"),
        TRICKY_ARG,
        "argv reaches the command exactly"
    );

    // The devices under test, bound to their drivers.
    // The PCI addresses are pinned, the same with every IOMMU (docs/lab.md).
    assert_eq!(
        guest.all("nvme_bound"),
        ["0000:00:04.0"],
        "one NVMe, at 00:04.0, bound to nvme: {:?}",
        guest.facts
    );
    assert_eq!(
        guest.one("nvme0n1"),
        "block",
        "/dev/nvme0n1 is a block device"
    );
    let netdevs = guest.all("netdev");
    assert_eq!(netdevs.len(), 2, "two NICs with a driver: {netdevs:?}");
    assert!(
        netdevs.iter().all(|n| n.ends_with(":e1000e")),
        "both driven by e1000e: {netdevs:?}"
    );

    // What the probes and tools need inside.
    assert_eq!(
        guest.one("fs"),
        "tracefs,debugfs,bpf_fs",
        "tracefs, debugfs, bpffs mounted"
    );
    assert_eq!(
        guest.one("boot_config"),
        "readable",
        "/boot/config-$(uname -r) is the guest kernel's"
    );
    assert_eq!(
        guest.one("modprobe"),
        "ok",
        "modprobe loads from the guest kernel's modules"
    );

    // The project root is writable from the guest, and the host sees the file.
    let written = guest.out_dir.join("from-guest.txt");
    assert_eq!(
        std::fs::read_to_string(&written).unwrap_or_else(|e| panic!("{}: {e}", written.display())),
        "written by the guest\n"
    );
    guest
}

fn group_types(guest: &Guest) -> Vec<&str> {
    guest.all("group_type").iter().map(String::as_str).collect()
}

fn assert_all_groups(guest: &Guest, expected: &str) {
    let types = group_types(guest);
    assert!(!types.is_empty(), "no IOMMU groups: {:?}", guest.facts);
    assert!(
        types.iter().all(|t| *t == expected),
        "every group {expected}: {types:?}"
    );
}

fn intel_lazy_and_strict(kernel: &str) {
    if skipped(&format!("lab_{kernel}_intel_devices_groups_and_plumbing")) {
        return;
    }
    let lazy = boot_and_check(&format!("{kernel}-intel"), kernel, "intel", &[]);
    assert_all_groups(&lazy, "DMA-FQ");
    assert_eq!(lazy.all("iommu_unit"), ["dmar0"], "one VT-d unit");

    let strict = boot_and_check(
        &format!("{kernel}-intel-strict"),
        kernel,
        "intel",
        &["--append", "iommu.strict=1"],
    );
    assert_all_groups(&strict, "DMA");
}

#[test]
fn lab_6_1_intel_devices_groups_and_plumbing() {
    intel_lazy_and_strict("6.1");
}

#[test]
fn lab_6_12_intel_devices_groups_and_plumbing() {
    intel_lazy_and_strict("6.12");
}

#[test]
fn lab_without_iommu_has_no_groups() {
    if skipped("lab_without_iommu_has_no_groups") {
        return;
    }
    let guest = boot_and_check("6.12-none", "6.12", "none", &[]);
    assert!(
        group_types(&guest).is_empty(),
        "no IOMMU groups: {:?}",
        guest.facts
    );
    assert!(
        guest.all("iommu_unit").is_empty(),
        "no IOMMU unit: {:?}",
        guest.facts
    );
}

#[test]
fn lab_amd_iommu_boots_with_groups() {
    if skipped("lab_amd_iommu_boots_with_groups") {
        return;
    }
    let guest = boot_and_check("6.12-amd", "6.12", "amd", &[]);
    // QEMU's AMD-Vi makes the guest driver use strict invalidation.
    assert_all_groups(&guest, "DMA");
    assert_eq!(guest.all("iommu_unit"), ["ivhd0"], "one AMD-Vi unit");
}

#[test]
fn lab_virtio_iommu_boots_with_groups() {
    if skipped("lab_virtio_iommu_boots_with_groups") {
        return;
    }
    let guest = boot_and_check("6.12-virtio", "6.12", "virtio", &[]);
    assert_all_groups(&guest, "DMA-FQ");
}

#[test]
fn lab_virtio_iommu_needs_6_12() {
    if skipped("lab_virtio_iommu_needs_6_12") {
        return;
    }
    fetched("6.1");
    let output = lab_command(&["--kernel", "6.1", "--iommu", "virtio", "--", "true"], &[]);
    assert_one_line(&output, 2, "kernel 6.1 has no virtio-iommu driver");
}

/// The guest's nanoseconds a busy loop takes under `lab/run --icount SHIFT`.
fn busy_loop_ns(shift: &str) -> f64 {
    let output = lab_run(&[
        "--icount",
        shift,
        "--",
        "sh",
        "-c",
        "a=$(date +%s%N); i=0; while [ $i -lt 200000 ]; do i=$((i + 1)); done; \
         b=$(date +%s%N); echo $((b - a))",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("the busy loop printed no time: {stdout:?}"))
}

/// `--icount SHIFT`: the guest's clock counts instructions, 2^SHIFT ns each, so the same busy
/// loop takes four times the guest's nanoseconds at shift 2 as at shift 0, whatever the host does.
#[test]
fn lab_icount_clocks_the_guest_by_instructions() {
    if skipped("lab_icount_clocks_the_guest_by_instructions") {
        return;
    }
    fetched("6.12");
    let one_ns = busy_loop_ns("0");
    let four_ns = busy_loop_ns("2");
    let ratio = four_ns / one_ns;
    assert!(
        (3.6..4.4).contains(&ratio),
        "a busy loop took {one_ns} guest ns at --icount 0 and {four_ns} at --icount 2: {ratio:.2}x, not 4x"
    );
}

#[test]
fn lab_kills_a_hanging_guest_at_the_timeout() {
    if skipped("lab_kills_a_hanging_guest_at_the_timeout") {
        return;
    }
    fetched("6.12");
    let output = lab_command(&["--timeout", "5", "--", "sleep", "600"], &[]);
    assert_one_line(
        &output,
        124,
        "lab: guest did not finish within 5 s; kernel log: ",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let log = PathBuf::from(
        stderr
            .trim()
            .rsplit_once("kernel log: ")
            .unwrap_or_default()
            .1,
    );
    assert!(log.is_file(), "the kernel log {} is kept", log.display());
    if let Some(run_dir) = log.parent() {
        let _ = std::fs::remove_dir_all(run_dir);
    }
}

#[test]
fn lab_bad_input_is_one_line_and_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--kernel", "5.4", "--", "true"],
            "lab: unknown kernel '5.4': use one of 5.10 6.1 6.12 6.12-rt 6.18 7.3",
        ),
        (
            &["--iommu", "arm", "--", "true"],
            "lab: unknown iommu 'arm': use intel, amd, virtio or none",
        ),
        (&["true"], "missing '--' before the command 'true'"),
        (&["--kernel", "6.1"], "no COMMAND after --"),
        (&["--"], "no COMMAND after --"),
        (
            &["--frobnicate", "--", "true"],
            "unknown argument '--frobnicate'",
        ),
        (&["--kernel"], "--kernel needs a value"),
        (
            &["--smp", "0", "--", "true"],
            "--smp takes a number of CPUs",
        ),
        (&["--mem", "lots", "--", "true"], "--mem takes MiB"),
        (
            &["--icount", "11", "--", "true"],
            "--icount takes a shift from 0 to 10",
        ),
        (
            &["--timeout", "-1", "--", "true"],
            "--timeout takes a whole number of seconds",
        ),
    ];
    for (args, needle) in cases {
        let output = lab_command(args, &[]);
        assert_one_line(&output, 2, needle);
    }
    let fetch = project_root().join("lab/fetch");
    for (args, needle) in [
        (
            &["--kernel", "5.4"][..],
            "lab: unknown kernel '5.4': use one of 5.10 6.1 6.12 6.12-rt 6.18 7.3, or all",
        ),
        (&["--frobnicate"][..], "unknown argument '--frobnicate'"),
    ] {
        let output = Command::new(&fetch)
            .args(args)
            .output()
            .expect("lab/fetch starts");
        assert_one_line(&output, 2, needle);
    }
}

#[test]
fn lab_without_qemu_says_which_package_to_install() {
    let output = lab_command(
        &["--", "true"],
        &[("IOMMUTOP_QEMU", "/nonexistent/qemu-system-x86_64")],
    );
    assert_one_line(&output, 3, "apt-get install qemu-system-x86");
}

#[test]
fn lab_without_root_says_so() {
    if skipped("lab_without_root_says_so") {
        return;
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let output = if is_root {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(lab_script())
            .args(["--", "true"])
            .current_dir("/")
            .output()
            .expect("setpriv runs")
    } else {
        lab_command(&["--", "true"], &[])
    };
    assert_one_line(&output, 3, "needs root");
}
