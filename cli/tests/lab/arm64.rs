//! The arm64 lab (`lab/run --arch arm64`, docs/lab.md): an arm64 6.12 guest whose NVMe and two
//! e1000e sit behind QEMU's SMMUv3, running an arm64 userland built from Debian packages. One
//! boot checks what the machine is (an aarch64 kernel, one SMMUv3 unit, each device in its own
//! IOMMU group of type `DMA`, strict invalidation) and that a real workload runs through the
//! SMMU: fio's 1,024 direct 4 KiB reads of the NVMe, counted three ways that do not depend on
//! each other (fio's own report, the block layer's `/sys/block/nvme0n1/stat`, the kernel's
//! `iommu:map`/`iommu:unmap` tracepoints), and netperf TCP_RR between the two NICs, 6 maps a
//! transaction.
//!
//! The boot costs 15–20 s under TCG. The test fails (never passes silently) when the lab cannot
//! run here; with `IOMMUTOP_SKIP_LAB=1` it says it is skipped and returns.

use std::collections::BTreeMap;
use std::process::Command;

use crate::support;

/// Reads of 4 KiB that fio makes: 4 MiB, sequential, one at a time, O_DIRECT.
const READS: u64 = 1024;

/// What the guest reports, as `key=value` lines on stdout (a key may repeat); exits 5, which
/// lab/run must pass on. $1: the directory (relative to the project root, which the guest shares
/// writable) for fio's JSON report.
const GUEST_SCRIPT: &str = r#"
echo "arch=$(uname -m)"
echo "env=$IOMMUTOP_LAB_ARCH,$IOMMUTOP_LAB_KERNEL,$IOMMUTOP_LAB_IOMMU"
for u in /sys/class/iommu/*; do [ -e "$u" ] && echo "unit=${u##*/}"; done
for dev in /sys/bus/pci/devices/*; do
  drv=$(readlink "$dev/driver") || continue
  unit=$(readlink "$dev/iommu") || unit=none
  group=$(readlink "$dev/iommu_group") || group=none
  echo "device=${dev##*/} ${drv##*/} ${unit##*/} ${group##*/} $(cat "$dev/iommu_group/type" 2>/dev/null) $(ls "$dev/iommu_group/devices" 2>/dev/null | tr '\n' ',')"
done
dmesg | grep -q 'TLB invalidation policy: strict mode' && echo "policy=strict"
t=/sys/kernel/tracing
echo 1 >$t/events/iommu/map/enable && echo 1 >$t/events/iommu/unmap/enable
echo "stat_before=$(cat /sys/block/nvme0n1/stat)"
fio --name=arm64 --filename=/dev/nvme0n1 --direct=1 --ioengine=psync --rw=read --bs=4k \
  --size=4M --output-format=json --output="$1/fio.json"
echo "fio_rc=$?"
echo "stat_after=$(cat /sys/block/nvme0n1/stat)"
echo 0 >$t/tracing_on
echo "maps=$(grep -c ' map: ' $t/trace)"
echo "unmaps=$(grep -c ' unmap: ' $t/trace)"
# netperf TCP_RR between the two NICs, each in a network namespace of its own (iproute2's ip).
ip netns add a && ip netns add b
ip link set eth0 netns a && ip link set eth1 netns b
ip -n a addr add 10.9.0.1/24 dev eth0 && ip -n a link set eth0 up
ip -n b addr add 10.9.0.2/24 dev eth1 && ip -n b link set eth1 up
ip netns exec b netserver >/dev/null 2>&1
i=0
until ip netns exec a ping -c1 -W1 10.9.0.2 >/dev/null 2>&1 || [ $i -ge 20 ]; do i=$((i + 1)); done
: >$t/trace
echo 1 >$t/tracing_on
set -- $(ip netns exec a netperf -H 10.9.0.2 -t TCP_RR -l 3 -P 0 -- -r 1024,1024 | head -n1)
echo 0 >$t/tracing_on
echo "rr_seconds=$5"
echo "rr_rate=$6"
echo "rr_maps=$(grep -c ' map: ' $t/trace)"
exit 5
"#;

/// `path` (under the project root) as the arm64 guest names it: it starts in the project root
/// and has its own root file system, so host paths mean nothing there.
fn relative_to_project(path: &std::path::Path) -> String {
    let root = support::project_root()
        .canonicalize()
        .expect("project root");
    path.strip_prefix(&root)
        .expect("lab-out is under the project root")
        .to_str()
        .expect("utf-8 path")
        .to_string()
}

/// Field `index` (0: reads completed, 2: sectors read) of a `/sys/block/*/stat` line.
fn stat_field(line: &str, index: usize) -> u64 {
    line.split_whitespace()
        .nth(index)
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("no field {index} in /sys/block/nvme0n1/stat: {line:?}"))
}

#[test]
fn arm64_smmuv3_guest_translates_nvme_reads_and_tcp_rr() {
    if support::lab_skipped("arm64_smmuv3_guest_translates_nvme_reads_and_tcp_rr") {
        return;
    }
    // The kernel (~95 MB) and the arm64 userland (~90 packages) on the first run: ~30 s.
    support::lab_fetch(&["--arch", "arm64", "--kernel", "6.12"]);
    let out = support::lab_out_dir("arm64");
    let rel_out = relative_to_project(&out);
    let output = support::lab_run(
        &["--arch", "arm64", "--iommu", "smmuv3", "--kernel", "6.12"],
        &["sh", "-c", GUEST_SCRIPT, "sh", &rel_out],
    );
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(5),
        "the guest command's exit status comes back\nstdout: {stdout}\nstderr: {stderr}"
    );
    let mut facts: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for line in stdout.lines() {
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("not key=value on stdout: {line:?}\n{stdout}"));
        facts.entry(key).or_default().push(value);
    }
    let one = |key: &str| -> &str {
        match facts.get(key).map(Vec::as_slice) {
            Some([v]) => v,
            other => panic!("expected one {key}=…, got {other:?}\n{stdout}"),
        }
    };

    // The machine: an arm64 kernel, the environment lab/run promises, one SMMUv3.
    assert_eq!(one("arch"), "aarch64");
    assert_eq!(one("env"), "arm64,6.12,smmuv3");
    let unit = one("unit");
    assert!(
        unit.starts_with("smmu3."),
        "the IOMMU unit is an SMMUv3: {unit}"
    );
    assert_eq!(
        one("policy"),
        "strict",
        "Debian's arm64 kernels invalidate strictly by default"
    );

    // The devices under test, each behind that SMMUv3 in a group of its own, of type DMA.
    let devices: Vec<Vec<&str>> = facts
        .get("device")
        .map(|d| d.iter().map(|l| l.split(' ').collect()).collect())
        .unwrap_or_default();
    let bound = |driver: &str| -> Vec<&Vec<&str>> {
        devices
            .iter()
            .filter(|d| d.get(1) == Some(&driver))
            .collect()
    };
    let nvme = bound("nvme");
    let nics = bound("e1000e");
    assert_eq!(nvme.len(), 1, "one NVMe bound to nvme: {devices:?}");
    assert_eq!(nics.len(), 2, "two NICs bound to e1000e: {devices:?}");
    let mut groups = Vec::new();
    for d in nvme.iter().chain(&nics) {
        let [addr, driver, dev_unit, group, kind, members] = d[..] else {
            panic!("device line with 6 fields expected: {d:?}");
        };
        assert_eq!(dev_unit, unit, "{addr} ({driver}) is behind the SMMUv3");
        assert_eq!(kind, "DMA", "{addr} ({driver}) translates, strictly");
        assert_eq!(
            members,
            format!("{addr},"),
            "{addr} ({driver}) is alone in group {group}"
        );
        groups.push(group);
    }
    groups.sort_unstable();
    groups.dedup();
    assert_eq!(groups.len(), 3, "three distinct groups: {devices:?}");

    // fio (arm64) read the NVMe: its own count, the block layer's, the IOMMU's.
    assert_eq!(one("fio_rc"), "0", "fio ran in the guest\nstderr: {stderr}");
    let fio = support::read_json(&out.join("fio.json"));
    let read = &fio["jobs"][0]["read"];
    assert_eq!(
        read["total_ios"].as_u64(),
        Some(READS),
        "fio's reads: {read}"
    );
    assert_eq!(read["io_bytes"].as_u64(), Some(READS * 4096), "fio's bytes");
    let (before, after) = (one("stat_before"), one("stat_after"));
    assert_eq!(
        stat_field(after, 0) - stat_field(before, 0),
        READS,
        "reads completed by nvme0n1 (/sys/block/nvme0n1/stat)"
    );
    assert_eq!(
        stat_field(after, 2) - stat_field(before, 2),
        READS * 8,
        "sectors read from nvme0n1"
    );
    // Nothing else maps while fio runs: the 9p shares are virtio without iommu_platform and
    // bypass the SMMU, and the NICs are down. So each read is one map and one unmap.
    assert_eq!(one("maps"), READS.to_string(), "iommu:map events");
    assert_eq!(one("unmaps"), READS.to_string(), "iommu:unmap events");

    // netperf (arm64) TCP_RR between the NICs behind the SMMU: each transaction maps 6 buffers
    // (per side a TX header, a TX fragment, an RX refill), as on x86 (docs/lab.md).
    let number = |key: &str| -> f64 {
        one(key).parse().unwrap_or_else(|e| {
            panic!(
                "{key}={}: {e}
{stdout}",
                one(key)
            )
        })
    };
    let transactions = number("rr_seconds") * number("rr_rate");
    assert!(
        transactions > 100.0,
        "TCP_RR ran: {transactions} transactions
{stdout}"
    );
    let per_transaction = number("rr_maps") / transactions;
    assert!(
        (5.5..6.5).contains(&per_transaction),
        "iommu:map events per TCP_RR transaction: {per_transaction} ({} maps, {transactions} transactions)",
        one("rr_maps")
    );
}

/// The aarch64 iommutop, built by scripts/build-arm64 (idempotent: cargo rebuilds only what
/// changed), as a path relative to the project root the arm64 guest starts in.
fn arm64_iommutop() -> String {
    let output = Command::new(support::project_root().join("scripts/build-arm64"))
        .current_dir(support::project_root())
        .output()
        .expect("scripts/build-arm64 starts");
    support::assert_succeeded(&output, "scripts/build-arm64");
    let path = "target/aarch64-unknown-linux-gnu/release/iommutop";
    assert!(
        support::project_root().join(path).is_file(),
        "scripts/build-arm64 left no {path}"
    );
    path.to_string()
}

/// Runs cli/tests/lab/arm64.sh MODE in an arm64 6.12 guest behind the SMMUv3, with `append` on
/// the kernel's command line; its key=value lines.
fn arm64_boot(iommutop: &str, out: &str, mode: &str, append: &str) -> BTreeMap<String, String> {
    let mut lab_args = vec!["--arch", "arm64", "--iommu", "smmuv3", "--kernel", "6.12"];
    if !append.is_empty() {
        lab_args.extend(["--append", append]);
    }
    let output = support::lab_run(
        &lab_args,
        &["sh", "cli/tests/lab/arm64.sh", iommutop, out, mode],
    );
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "arm64.sh {mode} failed\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// iommutop built for aarch64 from this tree, in the arm64 lab (6.12, SMMUv3, strict): every
/// program passes the arm64 kernel's verifier; dd's 2,000 direct 4 KiB reads are 2,000 DMA maps,
/// unmaps and completions on the NVMe's row, as the block layer counted them, and each strict
/// unmap one SMMUv3 range invalidation (`__arm_smmu_tlb_inv_range`, on fentry); the report names
/// the SMMUv3 and strict mode. TCP_RR between the two NICs maps 3 buffers per transaction per
/// NIC, as on x86; and `compare` of strict against a boot with `iommu.strict=0` names the
/// invalidation mode, and that command-line parameter, as the cause; `diagnose` names the SMMUv3,
/// strict mode with its source, and IOTLB invalidation among where the time goes.
#[test]
fn arm64_iommutop_counts_smmuv3_work_and_compare_names_strict_mode() {
    if support::lab_skipped("arm64_iommutop_counts_smmuv3_work_and_compare_names_strict_mode") {
        return;
    }
    let iommutop = arm64_iommutop();
    support::lab_fetch(&["--arch", "arm64", "--kernel", "6.12"]);
    let out = support::lab_out_dir("arm64-iommutop");
    let rel_out = relative_to_project(&out);
    let strict = arm64_boot(&iommutop, &rel_out, "strict", "");
    let lazy = arm64_boot(&iommutop, &rel_out, "lazy", "iommu.strict=0");
    let text = |name: &str| support::read(&out.join(name));

    assert_eq!(strict["probes_rc"], "0", "{}", text("probes.txt"));
    let probes = text("probes.txt");
    let tier_of = |point: &str| -> Vec<&str> {
        probes
            .lines()
            .find(|l| l.split_whitespace().next() == Some(point))
            .map(|l| l.split_whitespace().collect())
            .unwrap_or_else(|| panic!("no {point} line in probes:\n{probes}"))
    };
    assert_eq!(tier_of("dma_map")[1], "fentry", "{probes}");
    let flush = tier_of("iotlb_flush");
    assert_eq!(flush[1], "fentry", "{probes}");
    assert!(
        flush.contains(&"__arm_smmu_tlb_inv_range,") && flush.contains(&"arm_smmu_tlb_inv_context"),
        "SMMUv3's range and whole-context invalidations are hooked:\n{probes}"
    );
    assert_eq!(
        strict["verify_rc"],
        "0",
        "every program loads on arm64 6.12:\n{}",
        text("verify.txt")
    );

    assert_eq!(strict["record_rc"], "0", "{}", text("dd.out"));
    assert_eq!(strict["block_reads"], "2000", "the block layer's count");
    let dd = support::read_json(&out.join("dd.json"));
    support::assert_valid_report(&dd);
    assert_eq!(dd["host"]["iommu"]["vendor"], "smmu_v3", "{}", dd["host"]);
    assert_eq!(dd["host"]["iommu"]["dma_mode"], "strict", "{}", dd["host"]);
    let nvme = dd["devices"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["key"] == "0000:00:04.0"))
        .unwrap_or_else(|| panic!("no NVMe row: {dd}"));
    for op in ["dma_map", "dma_unmap", "completion"] {
        assert_eq!(support::op_count(nvme, op), 2000, "{op}: {nvme}");
    }
    let invalidations = support::op_count(nvme, "iotlb_flush");
    assert!(
        invalidations >= 2000,
        "strict: an invalidation per unmap, {invalidations} for 2000: {nvme}"
    );
    assert_eq!(dd["health"]["exit_without_entry"], 0, "{}", dd["health"]);
    assert_eq!(dd["health"]["abandoned_frames"], 0, "{}", dd["health"]);

    // diagnose names the SMMUv3, strict mode and its source, and where a NIC's time goes.
    let diagnosis = text("diagnose.txt");
    assert_eq!(strict["diagnose_rc"], "0", "{diagnosis}");
    for said in [
        "IOMMU: smmu_v3 (smmu3.",
        "an ARM SMMUv3 translates for the devices behind it",
        "default mode strict",
        "CONFIG_IOMMU_DEFAULT_DMA_STRICT=y",
        "where the time goes",
        "IOTLB invalidation and its wait",
    ] {
        assert!(diagnosis.contains(said), "no `{said}` in:\n{diagnosis}");
    }

    for (boot, mode) in [(&strict, "strict"), (&lazy, "lazy")] {
        assert_eq!(boot["rr_rc"], "0", "{}", text(&format!("rr-{mode}.out")));
    }
    let rr = support::read_json(&out.join("rr-strict.json"));
    let transactions = rr["run"]["workload"]["results"]["transactions"]
        .as_u64()
        .unwrap_or_else(|| panic!("TCP_RR transactions in {}", rr["run"]["workload"]));
    assert!(transactions > 100, "TCP_RR ran: {transactions}");
    // Over netperf's own window: the NIC rows' totals also hold the setup around it (the
    // namespaces, ARP, netperf's control connection), ~270 maps, which weigh more the fewer
    // transactions a loaded host lets the guest make (3.35 a transaction at 850).
    for nic in ["0000:00:05.0", "0000:00:06.0"] {
        let per_transaction = rr["run"]["workload"]["results"]["per_transaction"][nic]["dma_map"]
            .as_f64()
            .unwrap_or_else(|| panic!("no per-transaction dma_map for {nic}: {rr}"));
        assert!(
            (2.8..3.3).contains(&per_transaction),
            "{nic}: {per_transaction} DMA maps per TCP_RR transaction (x86: 3)"
        );
    }

    let json = out.join("strict-vs-lazy.json");
    let compared = Command::new(support::lab_iommutop_bin())
        .arg("compare")
        .arg(out.join("rr-strict.json"))
        .arg(out.join("rr-lazy.json"))
        .arg("--json")
        .arg(&json)
        .output()
        .expect("compare runs");
    support::assert_succeeded(&compared, "iommutop compare");
    let said = String::from_utf8_lossy(&compared.stdout).into_owned();
    let findings = support::read_json(&json)["comparison"]["findings"].clone();
    let invalidation = findings
        .as_array()
        .and_then(|f| f.iter().find(|f| f["kind"] == "invalidation"))
        .unwrap_or_else(|| panic!("no invalidation finding:\n{said}"));
    let cause = invalidation["details"][0].as_str().unwrap_or("");
    assert!(
        cause.starts_with("cause: ") && cause.contains("iommu.strict"),
        "the cause is the command line's iommu.strict: {cause}\n{said}"
    );
}

/// `scripts/deb --arch arm64` packages the aarch64 build: the package is for arm64, named for the
/// commit this machine's build of the same tree names, and its /usr/bin/iommutop is an aarch64
/// ELF executable (e_machine 183). Needs the arm64 lab's kernel (for the build), not a boot.
#[test]
fn arm64_package_holds_the_aarch64_binary() {
    if support::lab_skipped("arm64_package_holds_the_aarch64_binary") {
        return;
    }
    let iommutop = support::project_root().join(arm64_iommutop());
    let out = tempfile::tempdir().expect("tempdir");
    let output = Command::new(support::project_root().join("scripts/deb"))
        .args(["--arch", "arm64", "--profile", "debug", "--binary"])
        .arg(&iommutop)
        .args(["--host-binary", &support::lab_iommutop_bin(), "--out"])
        .arg(out.path())
        .output()
        .expect("scripts/deb runs");
    support::assert_succeeded(&output, "scripts/deb --arch arm64");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let deb = stdout
        .lines()
        .last()
        .expect("the package's path")
        .to_string();
    assert!(deb.ends_with("_arm64.deb"), "{stdout}");
    let info = Command::new("dpkg-deb")
        .args(["--field", &deb, "Architecture", "Version"])
        .output()
        .expect("dpkg-deb runs");
    let info = String::from_utf8_lossy(&info.stdout).into_owned();
    assert!(info.contains("Architecture: arm64\n"), "{info}");
    let version = Command::new(support::lab_iommutop_bin())
        .arg("--version")
        .output()
        .expect("runs");
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    let commit = version.trim().rsplit(['(', ')']).nth(1).expect("a commit");
    assert!(info.contains(&format!("+git.{commit}\n")), "{info}");

    let tar = Command::new("dpkg-deb")
        .args(["--fsys-tarfile", &deb])
        .output()
        .expect("dpkg-deb runs");
    let unpacked = out.path().join("root");
    std::fs::create_dir_all(&unpacked).expect("mkdir");
    let mut untar = Command::new("tar")
        .args(["-x", "-C"])
        .arg(&unpacked)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("tar runs");
    std::io::Write::write_all(untar.stdin.as_mut().expect("stdin"), &tar.stdout).expect("write");
    drop(untar.stdin.take());
    assert!(untar.wait().expect("tar ends").success(), "tar -x");
    let packaged = std::fs::read(unpacked.join("usr/bin/iommutop")).expect("usr/bin/iommutop");
    const EM_AARCH64: u16 = 183;
    assert_eq!(&packaged[..4], b"\x7fELF", "an ELF file");
    assert_eq!(
        u16::from_le_bytes([packaged[18], packaged[19]]),
        EM_AARCH64,
        "an aarch64 executable"
    );
    assert_eq!(
        packaged,
        std::fs::read(&iommutop).expect("the build"),
        "the package holds the aarch64 build itself"
    );
}

/// `--arch` and `--iommu` are checked together: each IOMMU only with the architecture QEMU
/// emulates it for; a bad combination is one line and exit 2, before anything is fetched.
#[test]
fn arm64_bad_input_is_one_line_and_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--iommu", "smmuv3", "--", "true"],
            "lab: --iommu smmuv3 is an arm64 IOMMU: add --arch arm64",
        ),
        (
            &["--arch", "arm64", "--iommu", "intel", "--", "true"],
            "lab: --iommu intel is not emulated on arm64: use --iommu smmuv3 or none",
        ),
        (
            &["--arch", "arm64", "--kernel", "5.10", "--", "true"],
            "lab: unknown kernel '5.10': use one of 6.1 6.12 7.3 with --arch arm64",
        ),
        (
            &["--arch", "riscv64", "--", "true"],
            "lab: unknown arch 'riscv64': use x86_64 or arm64",
        ),
        (&["--arch"], "--arch needs a value"),
    ];
    for (args, needle) in cases {
        let output = Command::new(support::project_root().join("lab/run"))
            .args(*args)
            .output()
            .expect("lab/run starts");
        support::assert_one_line_error(&output, 2, &[needle]);
    }
    let output = Command::new(support::project_root().join("lab/fetch"))
        .args(["--arch", "arm64", "--kernel", "6.18"])
        .output()
        .expect("lab/fetch starts");
    support::assert_one_line_error(
        &output,
        2,
        &["lab: unknown kernel '6.18': use one of 6.1 6.12 7.3, or all"],
    );
}

/// Without qemu-system-aarch64, lab/run names the Debian package that has it (exit 3).
#[test]
fn arm64_without_qemu_says_which_package_to_install() {
    let output = Command::new(support::project_root().join("lab/run"))
        .args(["--arch", "arm64", "--", "true"])
        .env("IOMMUTOP_QEMU_ARM64", "/nonexistent/qemu-system-aarch64")
        .output()
        .expect("lab/run starts");
    support::assert_one_line_error(&output, 3, &["apt-get install qemu-system-arm"]);
}
