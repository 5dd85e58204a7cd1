//! Completions and manual pages come from the parser's own definition: `completions` prints a
//! script that names the commands, and docs/man/ is exactly what `iommutop man` writes (rerun
//! `iommutop man docs/man` after changing a flag or its help).

mod support;

use assert_cmd::Command;
use std::path::Path;
use support::{assert_succeeded, assert_success};

fn iommutop() -> Command {
    Command::cargo_bin("iommutop").expect("built")
}

#[test]
fn completions_name_every_command_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let output = iommutop()
            .args(["completions", shell])
            .output()
            .expect("runs");
        assert_succeeded(&output, &format!("completions {shell}"));
        let script = String::from_utf8_lossy(&output.stdout);
        for command in ["record", "diagnose", "compare", "top", "probes"] {
            assert!(script.contains(command), "{shell}: no {command}");
        }
    }
    let refused = iommutop()
        .args(["completions", "tcsh"])
        .output()
        .expect("runs");
    assert_eq!(refused.status.code(), Some(2));
}

#[test]
fn checked_in_manual_pages_are_current() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = iommutop()
        .arg("man")
        .arg(dir.path())
        .output()
        .expect("runs");
    assert_success(&output);
    let checked_in = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/man");
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("pages")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.contains(&"iommutop.1".to_string()), "{names:?}");
    assert!(
        names.contains(&"iommutop-record.1".to_string()),
        "{names:?}"
    );
    for name in &names {
        let fresh = std::fs::read(dir.path().join(name)).expect("fresh page");
        let kept = std::fs::read(checked_in.join(name)).unwrap_or_default();
        assert!(
            fresh == kept,
            "docs/man/{name} is stale: run `iommutop man docs/man` and commit it"
        );
    }
    let kept_count = std::fs::read_dir(&checked_in).expect("docs/man").count();
    assert_eq!(
        kept_count,
        names.len(),
        "docs/man holds pages of removed commands"
    );
}
