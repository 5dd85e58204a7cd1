//! `--version` names the build: the package version and the git commit it was built from.

mod support;

use assert_cmd::Command;
use support::assert_success;

#[test]
fn version_names_the_commit() {
    let output = Command::cargo_bin("iommutop")
        .expect("built")
        .arg("--version")
        .output()
        .expect("runs");
    assert_success(&output);
    let line = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let commit = line
        .strip_prefix(concat!("iommutop ", env!("CARGO_PKG_VERSION"), " ("))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not `iommutop VERSION (COMMIT)`: {line}"));
    let in_checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../.git")
        .exists();
    if in_checkout {
        assert!(
            commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit()),
            "{line}"
        );
    } else {
        assert_eq!(commit, "unknown", "{line}");
    }
}
