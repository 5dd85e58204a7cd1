//! The project's own scripts, on the host, with no guest: `.ci/run`'s refusal to skip the lab,
//! and how `lab/run` reads a guest's kernel console (lab/lib/console.sh) on the logs in
//! `cli/tests/fixtures/console/`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::{assert_one_line_error, project_root};

/// CI runs every lab test: `.ci/run` with `IOMMUTOP_SKIP_LAB` set, to any value, exits 2 with one
/// line naming the variable and the fix, before it runs any other command. Its PATH here leads
/// nowhere, so any command it tried to run (an install, a build, the README's test command)
/// would add a "command not found" line and another status.
#[test]
fn ci_refuses_to_run_with_the_lab_skipped() {
    let nowhere = tempfile::tempdir().expect("tempdir");
    for value in ["1", "0", ""] {
        let output = Command::new("/bin/bash")
            .arg(project_root().join(".ci/run"))
            .env_clear()
            .env("PATH", nowhere.path())
            .env("IOMMUTOP_SKIP_LAB", value)
            .current_dir(nowhere.path())
            .output()
            .expect("bash runs .ci/run");
        assert_one_line_error(
            &output,
            2,
            &["IOMMUTOP_SKIP_LAB is set", "unset IOMMUTOP_SKIP_LAB"],
        );
        assert!(
            output.stdout.is_empty(),
            "IOMMUTOP_SKIP_LAB={value:?}: .ci/run printed {:?}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
}

fn console_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/console")
}

/// `console_verdict LOG` of lab/lib/console.sh: its first line, then the trouble lines.
fn console_verdict(log: &Path) -> (String, Vec<String>) {
    let output = Command::new("bash")
        .arg("-c")
        .arg(r#"set -euo pipefail; . "$1"; console_verdict "$2""#)
        .arg("console_verdict")
        .arg(project_root().join("lab/lib/console.sh"))
        .arg(log)
        .output()
        .expect("bash runs lab/lib/console.sh");
    support::assert_succeeded(&output, &format!("console_verdict {}", log.display()));
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut lines = text.lines().map(str::to_string);
    let verdict = lines.next().unwrap_or_default();
    (verdict, lines.collect())
}

/// Each console log of a real or realistic guest, what lab/run makes of it: whose the first
/// trouble is (`clean`; `emulator`, a crash that lab/run boots again after while booting and a
/// test runs its command once more after; `trouble`, which fails the run), and every trouble line
/// with when the kernel printed it, before or during the command.
#[test]
fn lab_reads_the_guest_console_for_trouble_and_whose_it_is() {
    type Case = (
        &'static str,
        &'static str,
        &'static [(&'static str, &'static str)],
    );
    let cases: &[Case] = &[
        // A 6.12 boot on 2 vCPUs and `true`, as lab/run kept it (trimmed): the init's "command
        // exited" line comes before a kernel line stamped earlier.
        ("clean.log", "clean", &[]),
        // The emulator's int3 at "sched_clock: Marking stable", killing the idle task: lab/run
        // boots again (boot_oopsed), up to three boots.
        (
            "boot-int3.log",
            "emulator [    2.741022] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI",
            &[
                ("before", "Oops: int3: 0000 [#1]"),
                (
                    "before",
                    "Kernel panic - not syncing: Attempted to kill the idle task!",
                ),
            ],
        ),
        // Before 6.7 a trap's die line has no "Oops: " in front.
        (
            "int3-during-6.1.log",
            "emulator [   21.530411] int3: 0000 [#1] PREEMPT SMP NOPTI",
            &[("during", "int3: 0000 [#1]")],
        ),
        (
            "double-fault-impossible-eflags.log",
            "emulator [   17.118410] traps: PANIC: double fault, error_code: 0x0",
            &[
                ("during", "traps: PANIC: double fault"),
                ("during", "double fault: 0000 [#1]"),
                (
                    "during",
                    "Kernel panic - not syncing: Fatal exception in interrupt",
                ),
            ],
        ),
        (
            "warning-during.log",
            "trouble",
            &[(
                "during",
                "WARNING: CPU: 1 PID: 412 at drivers/iommu/iova.c:697",
            )],
        ),
        (
            "rcu-stall-during.log",
            "trouble",
            &[(
                "during",
                "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
            )],
        ),
        // Trouble while booting that is not the emulator's: the command ran, the run fails.
        (
            "warning-before.log",
            "trouble",
            &[(
                "before",
                "WARNING: CPU: 0 PID: 1 at drivers/iommu/intel/dmar.c:1102",
            )],
        ),
        // A crash while booting that is the kernel's: not booted again (its EFLAGS is one a CPU
        // holds), the run fails.
        (
            "null-dereference-at-boot.log",
            "trouble",
            &[
                ("before", "BUG: kernel NULL pointer dereference"),
                ("before", "Oops: Oops: 0000 [#1]"),
                ("before", "Kernel panic - not syncing: Fatal exception"),
            ],
        ),
    ];
    for (name, verdict, expected) in cases {
        let (got, lines) = console_verdict(&console_fixtures().join(name));
        assert_eq!(&got, verdict, "{name}: {lines:#?}");
        assert_eq!(lines.len(), expected.len(), "{name}: {lines:#?}");
        for (line, (when, needle)) in lines.iter().zip(expected.iter()) {
            assert!(
                line.starts_with(&format!("{when} [")) && line.contains(needle),
                "{name}: expected `{when} … {needle}`, got `{line}`"
            );
        }
    }
    // Every fixture is checked: a new one comes with its verdict.
    let mut fixtures: Vec<String> = std::fs::read_dir(console_fixtures())
        .expect("fixtures/console")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    fixtures.sort();
    let mut checked: Vec<String> = cases.iter().map(|(n, _, _)| n.to_string()).collect();
    checked.sort();
    assert_eq!(fixtures, checked);
}

/// What a lab test makes of lab/run's stderr: the emulator's crashes it counts (each boot made
/// again, and the crash that ended the run), and the kernel's lines it fails with.
#[test]
fn lab_tests_count_the_emulator_crashes_and_name_the_kernel_lines() {
    let stderr = "\
lab: the guest kernel oopsed while booting (Oops: int3: 0000 [#1] PREEMPT SMP NOPTI): the emulator's crash; boot 2 of 3
lab: the emulator aborted while booting (system/physmem.c:2678: iotlb_to_section: Assertion `section_index < d->map.sections_nb' failed.): the emulator's crash; boot 3 of 3
lab: the guest kernel reported trouble (lines: 1 while the command ran, 0 before it started):
lab: while the command ran: [   21.530411] int3: 0000 [#1] PREEMPT SMP NOPTI
lab: the kernel's messages around them:
lab: | [   21.530411] int3: 0000 [#1] PREEMPT SMP NOPTI
lab: the emulator crashed the guest: int3: 0000 [#1] PREEMPT SMP NOPTI
lab: the guest kernel reported trouble while the command ran (the command exited 1); kernel log: /var/tmp/iommutop-lab.x/console.log
";
    assert_eq!(
        support::emulator_crashes(stderr),
        [
            "Oops: int3: 0000 [#1] PREEMPT SMP NOPTI, while booting",
            "QEMU aborted (system/physmem.c:2678: iotlb_to_section: Assertion `section_index \
             < d->map.sections_nb' failed.), while booting",
            "int3: 0000 [#1] PREEMPT SMP NOPTI"
        ]
    );
    let message = support::kernel_trouble_message(stderr);
    assert!(
        message.starts_with(
            "the guest kernel reported trouble (lab/run exit 123), which fails the test whatever the command did:\n\
             lab: while the command ran: [   21.530411] int3: 0000 [#1] PREEMPT SMP NOPTI\n"
        ),
        "{message}"
    );
    assert_eq!(
        support::kernel_log_path(stderr),
        Some(PathBuf::from("/var/tmp/iommutop-lab.x/console.log"))
    );
    assert!(support::emulator_crashes("lab: nothing of the emulator's\n").is_empty());
}

/// The matrix's load verdict decides which operations a warning names from its own list of
/// their report names: the list is every operation, and a warning naming only an operation the
/// verdict did not compare does not fail an exact cell, while one naming a compared operation,
/// or none, does.
#[test]
fn the_load_verdict_knows_every_operation_and_which_warnings_contradict_exact_counts() {
    let verdict = project_root().join("scripts/lib/load_verdict.py");
    let source = std::fs::read_to_string(&verdict).expect("load_verdict.py");
    let ops = source
        .split_once("OPS = (")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(list, _)| list)
        .expect("an OPS tuple");
    let listed: Vec<&str> = ops
        .split(',')
        .map(|name| name.trim().trim_matches('"'))
        .filter(|name| !name.is_empty())
        .collect();
    let every: Vec<&str> = iommutop_model::sample::Op::ALL
        .iter()
        .map(|op| op.name())
        .collect();
    assert_eq!(listed, every, "OPS in {}", verdict.display());
    let check = "import sys; sys.path.insert(0, sys.argv[1]); import load_verdict as v; \
                 print([v.contradicts(w, ('dma_map', 'completion')) for w in sys.argv[2:]])";
    let output = Command::new("python3")
        .args(["-c", check])
        .arg(verdict.parent().expect("scripts/lib"))
        .args([
            "2 iotlb_flush calls were seen by no probe program: the counts are short by that many",
            "3 dma_map calls were seen by no probe program: the counts are short by that many",
            "the numbers may be incomplete",
            "20 sampled call paths could not be recorded",
        ])
        .output()
        .expect("python3 runs");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "[False, True, True, False]",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
