//! `scripts/deb`, the Debian package recipe, on the binary under test (`--binary`, so that the
//! test builds nothing): the package is named for the crate version and commit, and holds the
//! binary, the man pages, the completions and the systemd unit where Debian looks for them.
//! Needs dpkg-deb, not root.

mod support;

use std::path::Path;
use std::process::Command;
use support::{assert_success, project_root};

fn dpkg_deb(args: &[&str], deb: &Path) -> String {
    let output = Command::new("dpkg-deb")
        .args(args)
        .arg(deb)
        .output()
        .expect("dpkg-deb runs (apt install dpkg)");
    assert_success(&output);
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_package_holds_the_binary_man_pages_completions_and_unit() {
    let out = tempfile::tempdir().expect("tempdir");
    let output = Command::new(project_root().join("scripts/deb"))
        .args([
            "--profile",
            "debug",
            "--binary",
            env!("CARGO_BIN_EXE_iommutop"),
            "--out",
        ])
        .arg(out.path())
        .output()
        .expect("scripts/deb runs");
    assert_success(&output);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let deb = Path::new(stdout.lines().last().expect("the package's path"));
    assert!(deb.starts_with(out.path()), "{stdout}");

    let version = Command::new(env!("CARGO_BIN_EXE_iommutop"))
        .arg("--version")
        .output()
        .expect("runs");
    let version = String::from_utf8_lossy(&version.stdout);
    let commit = version.trim().rsplit(['(', ')']).nth(1).expect("a commit");
    // The file is named for the crate version, the commit and this machine's architecture.
    let arch = Command::new("dpkg")
        .arg("--print-architecture")
        .output()
        .expect("dpkg runs");
    let arch = String::from_utf8_lossy(&arch.stdout);
    let name = format!(
        "iommutop_{}+git.{commit}_{}.deb",
        env!("CARGO_PKG_VERSION"),
        arch.trim()
    );
    assert_eq!(
        deb.file_name().map(|n| n.to_string_lossy()),
        Some(name.as_str().into()),
        "{stdout}"
    );
    let info = dpkg_deb(&["--info"], deb);
    assert!(info.contains(" Package: iommutop\n"), "{info}");
    let expected = format!(" Version: {}+git.{commit}\n", env!("CARGO_PKG_VERSION"));
    assert!(info.contains(&expected), "{expected} in {info}");
    assert!(info.contains(" Depends: libc6"), "{info}");

    let contents = dpkg_deb(&["--contents"], deb);
    for path in [
        "./usr/bin/iommutop",
        "./usr/share/man/man1/iommutop.1.gz",
        "./usr/share/man/man1/iommutop-run.1.gz",
        "./usr/share/bash-completion/completions/iommutop",
        "./usr/share/zsh/vendor-completions/_iommutop",
        "./usr/share/fish/vendor_completions.d/iommutop.fish",
        "./lib/systemd/system/iommutop.service",
        "./usr/share/doc/iommutop/copyright",
        "./usr/share/doc/iommutop/report.schema.json",
        "./usr/share/doc/iommutop/compare.schema.json",
        "./usr/share/doc/iommutop/diagnose.schema.json",
    ] {
        assert!(
            contents.lines().any(|l| l.ends_with(&format!(" {path}"))),
            "{path} missing: {contents}"
        );
    }
    assert!(
        contents
            .lines()
            .any(|l| l.starts_with("-rwxr-xr-x root/root") && l.ends_with(" ./usr/bin/iommutop")),
        "the binary is root's and executable: {contents}"
    );

    // The unit runs the packaged binary, not cargo install's.
    let tree = out.path().join("tree");
    let extracted = Command::new("dpkg-deb")
        .arg("--extract")
        .arg(deb)
        .arg(&tree)
        .output()
        .expect("extracts");
    assert_success(&extracted);
    let unit = support::read(&tree.join("lib/systemd/system/iommutop.service"));
    assert!(
        unit.contains("\nExecStart=/usr/bin/iommutop serve "),
        "{unit}"
    );
    let completion = support::read(&tree.join("usr/share/bash-completion/completions/iommutop"));
    assert!(completion.contains("iommutop"), "{completion}");
}

/// A mistyped option is refused before anything is built.
#[test]
fn an_unknown_profile_is_refused() {
    let output = Command::new(project_root().join("scripts/deb"))
        .args(["--profile", "fast"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--profile is release or debug, not fast"),
        "{stderr}"
    );
}
