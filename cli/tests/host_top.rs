//! `iommutop top` on the build machine: without a terminal it says so (exit 2); in a tmux pane
//! it draws, and every way out — `q`, SIGTERM, a panic — leaves the terminal as it found it
//! (cooked mode, main screen). The tmux tests attach probes, so they need root, like
//! host_probes.rs; they use a tmux server of their own.

mod support;

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{
    assert_one_line_error, assert_success, assert_valid, assert_valid_report,
    pci_disk_of_build_dir, read, read_json, scratch_file,
};

/// One view at a time: they attach probes.
static VIEW: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn iommutop() -> Command {
    Command::cargo_bin("iommutop").expect("binary built")
}

#[test]
fn without_a_terminal_iommutop_alone_prints_help_and_exits_2() {
    let output = iommutop().output().expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("Usage:"), "{stderr}");
    assert!(stderr.contains("top"), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[test]
fn top_without_a_terminal_is_a_usage_error() {
    let output = iommutop().args(["top"]).output().expect("runs");
    assert_one_line_error(
        &output,
        2,
        &[
            "draws on a terminal",
            "iommutop top --batch",
            "iommutop record",
        ],
    );
}

/// `top --batch -n 2` on a pipe: two timestamped tables with the view's columns, then it ends by
/// itself (and writes the report when asked).
#[test]
fn batch_mode_prints_one_table_per_interval_to_a_pipe() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("batch.json");
    let output = iommutop()
        .args(["top", "--batch", "-n", "2", "--interval", "0.5", "--json"])
        .arg(&json)
        .timeout(Duration::from_secs(120))
        .output()
        .expect("runs");
    assert_success(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let times: Vec<&str> = stdout.lines().filter(|l| l.starts_with("time ")).collect();
    assert_eq!(times.len(), 2, "{stdout}");
    assert!(times[0].contains("interval 0.5 s"), "{stdout}");
    let headers = stdout
        .lines()
        .filter(|l| l.starts_with("DEVICE ") && l.contains("MAPS/s") && l.contains("NS/IO"))
        .count();
    assert_eq!(headers, 2, "{stdout}");
    assert_valid_report(&read_json(&json));
}

/// `top --batch --format json` streams what `record --json -` does instead of the table: one
/// object per interval, then the report, each line valid against docs/stream.schema.json.
#[test]
fn batch_mode_with_format_json_streams_the_intervals_then_the_report() {
    let output = iommutop()
        .args(["top", "--batch", "-n", "2", "--interval", "0.5"])
        .args(["--format", "json"])
        .timeout(Duration::from_secs(120))
        .output()
        .expect("runs");
    assert_success(&output);
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect();
    let types: Vec<&str> = lines.iter().filter_map(|l| l["type"].as_str()).collect();
    assert_eq!(types, ["interval", "interval", "report"], "{lines:#?}");
    for line in &lines {
        assert_valid("stream.schema.json", line);
    }
}

/// `--sort` and `--filter` shape every batch block as the view's `s` and `/` would: the block
/// names them, and a filter that matches no row leaves none.
#[test]
fn batch_mode_starts_sorted_and_filtered() {
    let output = iommutop()
        .args(["top", "--batch", "-n", "1", "--interval", "0.5"])
        .args(["--sort", "ns/io", "--filter", "no-such-row"])
        .timeout(Duration::from_secs(120))
        .output()
        .expect("runs");
    assert_success(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines.len(),
        2,
        "the time line and the header only: {stdout}"
    );
    assert!(
        lines[0].ends_with("0 devices  sort NS/IO  filter \"no-such-row\""),
        "{stdout}"
    );
    assert!(lines[1].starts_with("DEVICE "), "{stdout}");
}

/// `--device DISK` keeps that disk's PCI function's row (and `deferred`/`unattributed`) in
/// every batch block, and names it, while a file on the disk is read directly.
#[test]
fn batch_mode_shows_only_the_device_asked_for() {
    let _root = require_root();
    let input = scratch_file("top-device-input", 8);
    let (disk, pci) = pci_disk_of_build_dir(&input);
    // Short direct reads again and again until told to stop: the disk is busy however long the
    // probes take to attach, and every dd is reaped here.
    let reading = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let reader = {
        let (reading, input) = (reading.clone(), input.clone());
        std::thread::spawn(move || {
            while reading.load(std::sync::atomic::Ordering::Relaxed) {
                let read = std::process::Command::new("dd")
                    .arg(format!("if={}", input.display()))
                    .args(["of=/dev/null", "bs=4k", "count=2000", "iflag=direct"])
                    .stderr(std::process::Stdio::null())
                    .status();
                assert!(read.as_ref().is_ok_and(|s| s.success()), "dd: {read:?}");
            }
        })
    };
    let output = iommutop()
        .args([
            "top",
            "--batch",
            "-n",
            "2",
            "--interval",
            "0.5",
            "--device",
            &disk,
        ])
        .timeout(Duration::from_secs(120))
        .output()
        .expect("runs");
    reading.store(false, std::sync::atomic::Ordering::Relaxed);
    reader.join().expect("the reader read");
    assert_success(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let blocks: Vec<&str> = stdout
        .split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .collect();
    assert_eq!(blocks.len(), 2, "{stdout}");
    let mut shown = 0;
    for block in blocks {
        let (totals, rows) = block
            .lines()
            .skip(2)
            .collect::<Vec<&str>>()
            .split_last()
            .map(|(totals, rows)| (totals.to_string(), rows.to_vec()))
            .unwrap_or_default();
        assert!(
            totals.starts_with("total"),
            "the rows' totals close {block}"
        );
        for row in &rows {
            let key = row.split_whitespace().next().unwrap_or_default();
            assert!(
                key == pci || key == disk || key.starts_with("deferred") || key == "unattributed",
                "a row of another device with --device {disk}: {stdout}"
            );
        }
        shown += rows.iter().filter(|r| r.starts_with(&pci)).count();
        let count = format!("  {} devices  ", rows.len());
        let named = format!("  device {disk} ({pci})");
        let time = block.lines().next().unwrap_or_default();
        assert!(time.contains(&count) && time.ends_with(&named), "{block}");
    }
    assert!(
        shown > 0,
        "{disk} ({pci}) was read but never shown: {stdout}"
    );
}

/// A device that is not there is refused before any probe attaches, in one line.
#[test]
fn batch_mode_refuses_a_device_that_does_not_exist() {
    let output = iommutop()
        .args(["top", "--batch", "-n", "2", "--device", "no-such-device0"])
        .output()
        .expect("runs");
    assert_one_line_error(
        &output,
        2,
        &[
            "--device",
            "no PCI device, NIC or disk named `no-such-device0`",
        ],
    );
    assert!(output.stdout.is_empty(), "no table for nothing");
}

/// A mistyped column is caught before any probe attaches, with the nearest name and all of them.
#[test]
fn an_unknown_sort_column_is_a_one_line_usage_error_with_a_suggestion() {
    for batch in [true, false] {
        let mut command = iommutop();
        command.args(["top", "--sort", "ns-per-op"]);
        if batch {
            command.arg("--batch");
        }
        let output = command.output().expect("runs");
        assert_one_line_error(
            &output,
            2,
            &[
                "--sort",
                "unknown column `ns-per-op`",
                "did you mean `ns-per-io`?",
                "maps-per-s",
                "cpu",
            ],
        );
    }
}

#[test]
fn top_refuses_to_stream_json_into_its_own_view() {
    // The terminal check comes first when stdout is a pipe; both are usage errors.
    let output = iommutop()
        .args(["top", "--json", "-"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
}

/// A tmux server of this test's own, with one pane running `command`.
struct Pane {
    socket: String,
    dir: PathBuf,
}

impl Pane {
    /// Starts `iommutop top ARGS` in a `width`×`height` pane; when it exits, its status, the
    /// pane's terminal modes and whether the alternate screen is on are written to files.
    fn start(name: &str, env: &str, args: &str, width: u16, height: u16) -> Pane {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("top-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("test dir");
        let bin = env!("CARGO_BIN_EXE_iommutop");
        let d = dir.display();
        let script = format!(
            "{env} {bin} top {args} 2>{d}/stderr & echo $! >{d}/pid; wait $!; echo $? >{d}/rc; \
             stty -a >{d}/stty; sleep 600"
        );
        let socket = format!("iommutop-test-{}-{name}", std::process::id());
        let status = std::process::Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .args(["sh", "-c", &script])
            .status()
            .expect("tmux runs (apt-get install tmux)");
        assert!(status.success(), "tmux new-session failed");
        Pane { socket, dir }
    }

    fn tmux(&self, args: &[&str]) -> String {
        let output = std::process::Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p"])
    }

    /// Waits until the pane shows `needle`; the screen as last seen. (This timeout and the
    /// others of a pane only keep a hung view from blocking the test: none is a speed.)
    fn wait_for(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let screen = self.screen();
            if screen.contains(needle) || Instant::now() > deadline {
                return screen;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until the pane no longer shows `needle`; the screen as last seen.
    fn wait_for_gone(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let screen = self.screen();
            if !screen.contains(needle) || Instant::now() > deadline {
                return screen;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The exit status, once iommutop has exited.
    fn exit_status(&self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(text) = std::fs::read_to_string(self.dir.join("rc")) {
                if let Ok(code) = text.trim().parse() {
                    // stty runs right after.
                    std::thread::sleep(Duration::from_millis(300));
                    return Some(code);
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }

    /// The terminal is as before: cooked mode with echo, main screen.
    fn assert_restored(&self) {
        let stty = read(&self.dir.join("stty"));
        let words: Vec<&str> = stty.split_whitespace().collect();
        assert!(words.contains(&"icanon"), "raw mode left on: {stty}");
        assert!(words.contains(&"echo"), "echo left off: {stty}");
        assert_eq!(
            self.tmux(&["display", "-p", "#{alternate_on}"]).trim(),
            "0",
            "still on the alternate screen"
        );
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("pid")) {
            if let Ok(pid) = pid.trim().parse::<i32>() {
                // SAFETY: kill only sends a signal; the pid is iommutop's, started by this test.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        self.tmux(&["kill-server"]);
    }
}

fn require_root() -> std::sync::MutexGuard<'static, ()> {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the view attaches probes: run as root (scripts/test does)"
    );
    VIEW.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[test]
fn q_quits_writes_the_report_and_restores_the_terminal() {
    let _view = require_root();
    let report = Path::new(env!("CARGO_TARGET_TMPDIR")).join("top-q.json");
    let _ = std::fs::remove_file(&report);
    let pane = Pane::start("q", "", &format!("--json {}", report.display()), 80, 24);
    let screen = pane.wait_for("up 2s", Duration::from_secs(60));
    assert!(screen.contains("iommutop"), "{screen}");
    assert!(screen.contains("sort MAPS/s"), "{screen}");
    assert!(
        screen.contains("(+/-)") || screen.contains("+/-"),
        "{screen}"
    );
    // Every line fits the 80 columns.
    assert!(screen.lines().all(|l| l.chars().count() <= 80), "{screen}");
    pane.tmux(&["send-keys", "?"]);
    let help = pane.wait_for("iommutop help", Duration::from_secs(5));
    assert!(help.contains("pause"), "{help}");
    // Escape must be read on its own before q: a terminal reader that gets both bytes at once
    // sees Alt+q (what a busy machine did here once).
    pane.tmux(&["send-keys", "Escape"]);
    let closed = pane.wait_for_gone("iommutop help", Duration::from_secs(5));
    assert!(
        !closed.contains("iommutop help"),
        "Escape left the help open:\n{closed}"
    );
    pane.tmux(&["send-keys", "q"]);
    assert_eq!(pane.exit_status(Duration::from_secs(30)), Some(0));
    pane.assert_restored();
    assert_valid_report(&read_json(&report));
    let stderr = read(&pane.dir.join("stderr"));
    assert!(stderr.contains("report written to"), "{stderr}");
}

/// The live view starts with `--sort`'s column marked and `--filter`'s text applied.
#[test]
fn the_view_starts_sorted_and_filtered() {
    let _view = require_root();
    let pane = Pane::start("sort", "", "--sort cpu --filter no-such-row", 120, 30);
    let screen = pane.wait_for("up 2s", Duration::from_secs(60));
    assert!(screen.contains("sort CPU%"), "{screen}");
    assert!(screen.contains("filter \"no-such-row\""), "{screen}");
    pane.tmux(&["send-keys", "q"]);
    assert_eq!(pane.exit_status(Duration::from_secs(30)), Some(0));
    pane.assert_restored();
}

#[test]
fn sigterm_ends_the_view_cleanly() {
    let _view = require_root();
    let pane = Pane::start("term", "", "", 100, 30);
    pane.wait_for("up 1s", Duration::from_secs(60));
    let pid: i32 = read(&pane.dir.join("pid")).trim().parse().expect("pid");
    // SAFETY: kill only sends a signal, to the iommutop this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(pane.exit_status(Duration::from_secs(30)), Some(0));
    pane.assert_restored();
}

#[test]
fn a_panic_gives_the_terminal_back_before_the_message() {
    let _view = require_root();
    let pane = Pane::start("panic", "IOMMUTOP_TOP_TEST_PANIC=1", "", 80, 24);
    assert_eq!(pane.exit_status(Duration::from_secs(60)), Some(101));
    pane.assert_restored();
    let stderr = read(&pane.dir.join("stderr"));
    assert!(stderr.contains("IOMMUTOP_TOP_TEST_PANIC"), "{stderr}");
}
