//! Shared by the integration tests: running the lab, reading reports, checking how a command
//! ended.

#![allow(dead_code)] // each test binary uses its own part

pub mod exact;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The project root (the lab's working directory inside the guest).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A fresh directory under target/lab-out/, visible to the guest at the same path.
pub fn lab_out_dir(name: &str) -> PathBuf {
    let dir = project_root().join("target/lab-out").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create lab output dir");
    dir.canonicalize().expect("canonical lab output dir")
}

/// Whether the lab tests were asked to skip (`IOMMUTOP_SKIP_LAB=1`); says so, and names the test
/// in `target/tmp/lab-skipped`, which `scripts/test` counts at its end, so a skip is never
/// silent. Without that variable a lab test runs, and fails saying why when the lab cannot.
pub fn lab_skipped(test: &str) -> bool {
    if std::env::var_os("IOMMUTOP_SKIP_LAB").is_none_or(|v| v != "1") {
        return false;
    }
    eprintln!(
        "skipped {test}: IOMMUTOP_SKIP_LAB=1 (lab tests need root, qemu and the cached kernels)"
    );
    let list = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lab-skipped");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&list)
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{test}\n").as_bytes()));
    if let Err(e) = written {
        eprintln!("cannot name the skipped test in {}: {e}", list.display());
    }
    true
}

/// `field` (`count`, `bytes`) of `op` in a report row. Every row has every op, so an op it lacks
/// is a name this test got wrong (an op renamed in the report): that fails here, where reading it
/// as 0 would pass an `assert_eq!(…, 0)`.
#[track_caller]
pub fn op_field(row: &serde_json::Value, op: &str, field: &str) -> u64 {
    let ops = row["ops"]
        .as_object()
        .unwrap_or_else(|| panic!("row {} has no ops: {row}", row["key"]));
    let stats = ops.get(op).unwrap_or_else(|| {
        panic!(
            "row {} has no op `{op}` (renamed?); its ops: {:?}",
            row["key"],
            ops.keys().collect::<Vec<_>>()
        )
    });
    stats[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{op}.{field} of row {} is no count: {stats}", row["key"]))
}

/// How many `op` calls a report row counted; fails on an op the row does not have.
#[track_caller]
pub fn op_count(row: &serde_json::Value, op: &str) -> u64 {
    op_field(row, op, "count")
}

/// The bytes of a report row's `op` calls; fails on an op the row does not have.
#[track_caller]
pub fn op_bytes(row: &serde_json::Value, op: &str) -> u64 {
    op_field(row, op, "bytes")
}

/// The disk that holds `path` and its PCI function, failing the test, saying so, when there is
/// none: the host tests that read through a PCI disk need the build directory on one.
#[track_caller]
pub fn pci_disk_of_build_dir(path: &Path) -> (String, String) {
    pci_disk_of(path).unwrap_or_else(|| {
        panic!(
            "{} is on no PCI disk here: this test reads a file of the build directory through the \
             disk's PCI function; put the target directory on a PCI disk (CARGO_TARGET_DIR)",
            path.display()
        )
    })
}

/// Our BPF programs loaded now, by `bpftool prog show` (names are `<family>__<hook>__<tier>`,
/// cut to 15 characters). Fails the test when bpftool is missing or fails: no answer is not
/// zero programs.
#[track_caller]
pub fn loaded_iommutop_programs() -> Vec<String> {
    let output = Command::new("bpftool")
        .args(["prog", "show"])
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run bpftool to count the programs left ({e}): install bpftool (scripts/install-deps)")
        });
    assert!(
        output.status.success(),
        "bpftool prog show exited {:?}: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| {
            [
                "dma__",
                "iommu__",
                "iova__",
                "iotlb__",
                "completion__",
                "track__",
            ]
            .iter()
            .any(|family| l.contains(&format!(" name {family}")))
        })
        .map(str::to_string)
        .collect()
}

/// Runs `lab/run ARGS -- COMMAND` and returns its output; fails the test if the lab cannot run
/// (exit 3, 124), and when the guest kernel reported trouble (exit 123: an oops, BUG, WARNING,
/// RCU stall ... while the command ran or before it started), naming the kernel's lines, whatever
/// the command did. A guest the emulator crashed (lab/run says so: an `int3` oops, a register
/// dump no CPU can hold; lab/lib/console.sh) is booted once more for the command, saying so and
/// counting it ([`record_lab_time`]); a crash that is not the emulator's is never retried.
pub fn lab_run(lab_args: &[&str], command: &[&str]) -> Output {
    let mut output = lab_run_once(lab_args, command);
    if let Some(crash) = emulator_crash(&output) {
        eprintln!("lab: the emulator crashed the guest ({crash}): running the command once more in a fresh guest");
        output = lab_run_once(lab_args, command);
    }
    fail_on_kernel_trouble(&output);
    output
}

/// lab/run's status when the command finished but the guest kernel reported trouble.
pub const LAB_KERNEL_TROUBLE: i32 = 123;

/// Fails the test when lab/run exited [`LAB_KERNEL_TROUBLE`], with the kernel's lines lab/run
/// printed first (`lab: while the command ran: …`, `lab: before it started: …`), then the rest of
/// its stderr.
#[track_caller]
pub fn fail_on_kernel_trouble(output: &Output) {
    if output.status.code() != Some(LAB_KERNEL_TROUBLE) {
        return;
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    panic!("{}", kernel_trouble_message(&stderr));
}

/// What a test says when lab/run reported kernel trouble: the kernel's lines, then lab/run's and
/// the command's stderr.
pub fn kernel_trouble_message(stderr: &str) -> String {
    let kernel_lines: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            l.starts_with("lab: while the command ran: ")
                || l.starts_with("lab: before it started: ")
        })
        .collect();
    format!(
        "the guest kernel reported trouble (lab/run exit {LAB_KERNEL_TROUBLE}), which fails the test whatever the command did:\n{}\n--- lab/run's stderr ---\n{stderr}",
        kernel_lines.join("\n")
    )
}

/// The kernel log lab/run names in its last line when its guest failed or hung.
pub fn kernel_log_path(stderr: &str) -> Option<PathBuf> {
    let (_, path) = stderr.rsplit_once("kernel log: ")?;
    Some(PathBuf::from(path.lines().next()?.trim()))
}

/// What lab/run said of the emulator's crashes in one run: each boot it made again (`the guest
/// kernel oopsed while booting (…): the emulator's crash; boot N of 3`, `the emulator aborted
/// while booting (…)` or `the guest stalled while booting (…)`), then the crash that ended the
/// run, if the emulator's (`the emulator crashed the guest: …`).
pub fn emulator_crashes(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| {
            if let Some(rest) = l.strip_prefix("lab: the guest kernel oopsed while booting (") {
                let what = rest.rsplit_once("): ").map_or(rest, |(what, _)| what);
                Some(format!("{what}, while booting"))
            } else if let Some(rest) = l.strip_prefix("lab: the emulator aborted while booting (") {
                let what = rest.rsplit_once("): ").map_or(rest, |(what, _)| what);
                Some(format!("QEMU aborted ({what}), while booting"))
            } else if let Some(rest) = l.strip_prefix("lab: the guest stalled while booting (") {
                let what = rest.rsplit_once("): ").map_or(rest, |(what, _)| what);
                Some(format!("a stall ({what}), while booting"))
            } else {
                l.strip_prefix("lab: the emulator crashed the guest: ")
                    .map(str::to_string)
            }
        })
        .collect()
}

/// The emulator's crash that ended a run (lab/run exit 123 or 125, `the emulator crashed the
/// guest: LINE`): QEMU's multi-threaded TCG running a breakpoint the kernel's text patching (a
/// static key, the probes' attach or detach) had already taken out (`Oops: int3`), or a register
/// dump with an EFLAGS no CPU can hold (seen on a heavily loaded host: a double fault in `ip`'s
/// execve). lab/lib/console.sh decides, from the first trouble the kernel reported; any other
/// crash is the kernel's or ours, and is not retried.
fn emulator_crash(output: &Output) -> Option<String> {
    if !matches!(output.status.code(), Some(LAB_KERNEL_TROUBLE) | Some(125)) {
        return None;
    }
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .find_map(|l| l.strip_prefix("lab: the emulator crashed the guest: "))
        .map(str::to_string)
}

fn lab_run_once(lab_args: &[&str], command: &[&str]) -> Output {
    let lab = project_root().join("lab/run");
    assert!(lab.exists(), "lab/run is missing: the lab tests need it");
    let started = std::time::Instant::now();
    let output = Command::new(&lab)
        .args(lab_args)
        .arg("--")
        .args(command)
        .current_dir(project_root())
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", lab.display()));
    record_lab_time(lab_args, started, &output);
    if matches!(output.status.code(), Some(3) | Some(124)) {
        panic!(
            "the lab could not run (exit {:?}): {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    output
}

thread_local! {
    /// The emulator's crashes met by the test running on this thread (libtest runs each test on
    /// a thread of its own).
    static EMULATOR_CRASHES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Appends how long a `lab/run` took to `target/tmp/lab-times` (seconds, the test, lab/run's
/// options, the emulator's crashes in that run and what they were), which `scripts/test` sums
/// and ranks at its end: the lab's share of CI's time budget, and every boot the emulator cost,
/// in plain sight. Each crash is also said here, counted in the test's own tally. A file that
/// cannot be written costs the line, not the test.
pub fn record_lab_time(lab_args: &[&str], started: std::time::Instant, output: &Output) {
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed test)")
        .to_string();
    let crashes = emulator_crashes(&String::from_utf8_lossy(&output.stderr));
    for crash in &crashes {
        let count = EMULATOR_CRASHES.with(|c| {
            c.set(c.get() + 1);
            c.get()
        });
        eprintln!(
            "lab: the emulator crashed the guest ({crash}): emulator crash {count} in {test}"
        );
    }
    let line = format!(
        "{:.0}\t{test}\t{}\t{}\t{}\n",
        started.elapsed().as_secs_f64(),
        lab_args.join(" "),
        crashes.len(),
        crashes.join("; ")
    );
    let times = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lab-times");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&times)
        .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
    if let Err(e) = written {
        eprintln!("cannot record the lab's time in {}: {e}", times.display());
    }
}

/// `lab/fetch ARGS` (`--kernel 6.12`, `--arch arm64 --kernel 6.12`): instant when the runner has
/// fetched already (scripts/test does); otherwise downloads here, so that the download's
/// messages do not land in a test's stderr. Fails the test, saying why, when it cannot.
pub fn lab_fetch(args: &[&str]) {
    let fetch = project_root().join("lab/fetch");
    let output = Command::new(&fetch)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", fetch.display()));
    assert!(
        output.status.success(),
        "the lab cannot run here: lab/fetch {} exited {:?} (set IOMMUTOP_SKIP_LAB=1 to skip the lab tests): {}",
        args.join(" "),
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The report a guest script wrote as OUT/NAME.json, after checking that the command that wrote
/// it succeeded (OUT/NAME.rc, its stderr in OUT/NAME.err) and that it is schema-valid.
pub fn read_guest_report(out: &Path, name: &str) -> serde_json::Value {
    assert_eq!(
        read(&out.join(format!("{name}.rc"))).trim(),
        "0",
        "{name}: {}",
        read(&out.join(format!("{name}.err")))
    );
    let report = read_json(&out.join(format!("{name}.json")));
    assert_valid_report(&report);
    report
}

/// Validates a report against docs/report.schema.json.
pub fn assert_valid_report(report: &serde_json::Value) {
    assert_valid("report.schema.json", report);
}

/// Where `value` breaks `docs/SCHEMA` (a JSON Schema there, which may refer to the others by
/// file name, as stream.schema.json does to report.schema.json's rows), each with its place.
pub fn schema_violations(schema: &str, value: &serde_json::Value) -> Vec<String> {
    let docs = project_root().join("docs");
    let mut options = jsonschema::options();
    for entry in std::fs::read_dir(&docs).expect("docs/") {
        let path = entry.expect("a docs/ entry").path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.ends_with(".schema.json") && name != schema {
            let resource = jsonschema::Resource::from_contents(read_json(&path))
                .unwrap_or_else(|e| panic!("{name} is no schema: {e}"));
            options = options.with_resource(format!("{SCHEMA_BASE}{name}"), resource);
        }
    }
    let validator = options
        .build(&read_json(&docs.join(schema)))
        .unwrap_or_else(|e| panic!("{schema} does not compile: {e}"));
    validator
        .iter_errors(value)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect()
}

/// Where the schemas of docs/ say they are (`$id`), so that they find each other.
const SCHEMA_BASE: &str = "https://example.invalid/iommutop/";

/// Fails the test, listing where, unless `value` is valid against `docs/SCHEMA`.
#[track_caller]
pub fn assert_valid(schema: &str, value: &serde_json::Value) {
    let errors = schema_violations(schema, value);
    assert!(
        errors.is_empty(),
        "invalid against docs/{schema}: {errors:#?}"
    );
}

/// A failure that says one thing: the exit code, one non-empty line on stderr holding every
/// needle, and no panic.
pub fn assert_one_line_error(output: &Output, code: i32, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {stderr}");
    for needle in needles {
        assert!(lines[0].contains(needle), "`{}` lacks `{needle}`", lines[0]);
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// The iommutop binary under test, as cargo built it: what host tests run.
pub fn iommutop_bin() -> String {
    env!("CARGO_BIN_EXE_iommutop").to_string()
}

/// The iommutop binary the lab tests run, by a path the guest sees too (the host root is
/// shared): a copy of the one cargo built, made once per test process and named by the build's
/// size and time, so that a rebuild while guests run (cargo rewrites its output in place) cannot
/// swap pages under them: a guest reads the binary over 9p, page by page as it runs, and a
/// process whose pages came from two builds crashes.
pub fn lab_iommutop_bin() -> String {
    static COPY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    COPY.get_or_init(|| {
        let built = Path::new(env!("CARGO_BIN_EXE_iommutop"));
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lab-bin");
        stable_copy(built, &lab_bin_cache())
            .or_else(|_| stable_copy(built, &tmp))
            .unwrap_or_else(|e| {
                eprintln!(
                    "cannot copy {} for the guests ({e}): they run it in place",
                    built.display()
                );
                built.display().to_string()
            })
    })
    .clone()
}

/// Where the guests' copies live: in the lab's cache, outside the project, which the guest sees
/// through its cached share of the host root (`cache=loose`); the project's own share is
/// uncached, its files changing while guests run, and every page a process faults in from it
/// is a round trip to the host. `record -- true` on 6.12, 2 vCPUs, one boot, three runs each:
/// the debug build from the project's share 12.2-13.9 s, from the host root 6.7-7.5 s. One
/// folder per project checkout, so that two checkouts' tests do not remove each other's copies.
fn lab_bin_cache() -> PathBuf {
    let cache = std::env::var_os("IOMMUTOP_LAB_CACHE")
        .map_or_else(|| PathBuf::from("/var/cache/iommutop-lab"), PathBuf::from);
    let root = project_root();
    let checkout = root.canonicalize().unwrap_or(root);
    let checkout = checkout.display().to_string().replace('/', "_");
    cache.join("lab-bin").join(checkout)
}

/// `COPIES/SIZE-MTIME/iommutop` (named as built: tests and people read process names), made
/// once; older builds' copies are removed (a guest still running one keeps reading it).
fn stable_copy(built: &Path, copies: &Path) -> std::io::Result<String> {
    let meta = built.metadata()?;
    let stamp = meta
        .modified()?
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = copies.join(format!("{}-{stamp}", meta.len()));
    let copy = dir.join("iommutop");
    if !copy.exists() {
        for older in std::fs::read_dir(copies).into_iter().flatten().flatten() {
            if older.path() != dir {
                let _ = std::fs::remove_dir_all(older.path());
            }
        }
        std::fs::create_dir_all(&dir)?;
        let partial = dir.join(format!(".partial-{}", std::process::id()));
        std::fs::copy(built, &partial)?;
        std::fs::rename(&partial, &copy)?;
    }
    Ok(copy.display().to_string())
}

/// Boots the lab with `lab_args` and runs `cli/tests/lab/SCRIPT IOMMUTOP OUT ARGS...` in it, OUT
/// being a fresh `target/lab-out/NAME`; fails the test unless the script succeeded. Returns OUT.
pub fn run_guest_script(name: &str, lab_args: &[&str], script: &str, args: &[&str]) -> PathBuf {
    let out = lab_out_dir(name);
    let script = project_root().join("cli/tests/lab").join(script);
    let (script, out_arg) = (script.to_string_lossy(), out.to_string_lossy());
    let bin = lab_iommutop_bin();
    let mut command = vec!["sh", &script, &bin, &out_arg];
    command.extend_from_slice(args);
    let started = std::time::Instant::now();
    let output = lab_run(lab_args, &command);
    eprintln!(
        "{name}: the guest script ran {:.0} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        output.status.success(),
        "guest script failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// Fails the test with the command's exit code, stderr and stdout unless it exited 0.
#[track_caller]
pub fn assert_success(output: &Output) {
    assert_succeeded(output, "the command");
}

/// [`assert_success`] for the command described by `what` (`compare a b`, a workload's name).
#[track_caller]
pub fn assert_succeeded(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} exited {:?}\nstderr: {}\nstdout: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
}

/// A file of `mebibytes` MiB under the test target's tmp directory, for direct reads (on the
/// disk of the build directory).
pub fn scratch_file(name: &str, mebibytes: usize) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(name);
    std::fs::write(&path, vec![0x5au8; mebibytes << 20]).expect("scratch file");
    path
}

/// The disk that holds `path` and its PCI function, from `/sys/dev/block/MAJ:MIN`; `None` when
/// the file system is on no PCI disk.
pub fn pci_disk_of(path: &std::path::Path) -> Option<(String, String)> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let sys = std::fs::canonicalize(format!(
        "/sys/dev/block/{}:{}",
        libc::major(dev),
        libc::minor(dev)
    ))
    .ok()?;
    let parts: Vec<&str> = sys.iter().filter_map(|c| c.to_str()).collect();
    let disk = parts
        .iter()
        .position(|&c| c == "block")
        .map(|i| parts[i + 1])?;
    let is_pci = |c: &&&str| {
        c.len() == 12
            && c.as_bytes()[4] == b':'
            && c.as_bytes()[7] == b':'
            && c.as_bytes()[10] == b'.'
    };
    let address = parts.iter().rfind(is_pci)?;
    Some((disk.to_string(), address.to_string()))
}

/// Tests that attach probes run one at a time: "nothing left attached" is checked by counting
/// our programs in the kernel, which another test's run would disturb.
static BPF: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn require_root() -> std::sync::MutexGuard<'static, ()> {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "these tests load BPF programs: run them as root (scripts/test does)"
    );
    BPF.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A `--json -` stream: one JSON object a line.
pub fn ndjson_lines(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON object"))
        .collect()
}

/// `completions` reach `expected`, or the report names the rest as `completions_unseen` (the
/// block layer's count of requests the kernel did not run the completion probe for) and says so
/// in a warning.
pub fn assert_named_shortfall(
    report: &serde_json::Value,
    completions: u64,
    expected: u64,
    context: &str,
) {
    let unseen = report["health"]["completions_unseen"].as_u64().unwrap_or(0);
    assert!(
        completions + unseen >= expected,
        "completions {completions} + unseen {unseen} < {expected}: {context}"
    );
    if unseen > 0 {
        let warned = report["warnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .any(|w| {
                w.as_str()
                    .is_some_and(|w| w.contains("did not run the completion probe"))
            });
        assert!(
            warned,
            "completions_unseen {unseen} without a warning: {context}"
        );
    }
}
