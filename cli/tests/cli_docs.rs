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

/// `run <TAB>` and `--profile <TAB>` offered files only: the script now names every profile
/// `iommutop profiles` lists, the built-in ones and those of IOMMUTOP_PROFILES.
#[test]
fn bash_completion_offers_the_profile_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("my-own-profile.toml"),
        "description = \"mine\"\nworkload = \"tlb\"\n",
    )
    .expect("write");
    let output = iommutop()
        .args(["completions", "bash"])
        .env("IOMMUTOP_PROFILES", dir.path())
        .output()
        .expect("runs");
    assert_succeeded(&output, "completions bash");
    let script = String::from_utf8_lossy(&output.stdout);
    let profiles = support::project_root().join("profiles");
    let mut names: Vec<String> = std::fs::read_dir(&profiles)
        .expect("profiles/")
        .filter_map(|e| {
            let name = e.expect("entry").file_name().to_string_lossy().into_owned();
            name.strip_suffix(".toml").map(str::to_string)
        })
        .collect();
    assert!(!names.is_empty(), "no profiles in {}", profiles.display());
    names.push("my-own-profile".to_string());
    for name in &names {
        assert!(
            script.contains(name.as_str()),
            "bash completion lacks {name}"
        );
    }
    // Offered where a profile goes: `run`'s positional and --profile of diagnose and top.
    let offered = script
        .lines()
        .filter(|l| l.contains("my-own-profile"))
        .count();
    assert!(offered >= 3, "offered {offered} times: {script}");
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

/// The pages lacked EXAMPLES, EXIT STATUS and ENVIRONMENT; ENVIRONMENT names every `IOMMUTOP_*`
/// setting the code reads (found in the sources here, not copied from the page).
#[test]
fn the_manual_says_exit_status_environment_and_examples() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let page = std::fs::read_to_string(root.join("docs/man/iommutop.1")).expect("iommutop.1");
    for section in [".SH \"EXIT STATUS\"", ".SH ENVIRONMENT", ".SH EXAMPLES"] {
        assert!(page.contains(section), "iommutop.1 has no {section}");
    }
    let record = std::fs::read_to_string(root.join("docs/man/iommutop-record.1")).expect("page");
    assert!(record.contains(".SH \"EXIT STATUS\""));
    let mut settings = std::collections::BTreeSet::new();
    let mut dirs = vec![
        root.join("cli/src"),
        root.join("loader/src"),
        root.join("workloads/runner/src"),
    ];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("source");
                for (at, _) in text.match_indices("\"IOMMUTOP_") {
                    let piece = &text[at + "\"IOMMUTOP_".len()..];
                    let name: String = piece
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                        .collect();
                    // `env!` reads build.rs's variables when iommutop is built, not the user's.
                    let when_built = text[..at].ends_with("env!(");
                    if piece[name.len()..].starts_with('"') && !when_built {
                        settings.insert(format!("IOMMUTOP_{name}"));
                    }
                }
            }
        }
    }
    assert!(settings.len() >= 5, "{settings:?}");
    for setting in &settings {
        assert!(page.contains(setting), "iommutop.1 does not name {setting}");
    }
}

/// `--device <TAB>` offered files: bash now completes it with the PCI functions present when
/// completing (the script lists /sys/bus/pci/devices then, so a packaged script fits any
/// machine), on every command that takes --device.
#[test]
fn bash_completion_offers_the_pci_devices_present_for_device() {
    let output = iommutop()
        .args(["completions", "bash"])
        .output()
        .expect("runs");
    assert_succeeded(&output, "completions bash");
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("iommutop.bash");
    std::fs::write(&script, &output.stdout).expect("write");
    let mut present: Vec<String> = std::fs::read_dir("/sys/bus/pci/devices")
        .map(|d| {
            d.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    present.sort();
    for command in ["record", "run tcp-rr-1k", "top", "serve", "diagnose"] {
        let words = format!("iommutop {command} --device");
        let completing = format!(
            "source {script}; COMP_WORDS=({words} ''); COMP_CWORD=${{#COMP_WORDS[@]}}; \
             COMP_CWORD=$((COMP_CWORD - 1)); COMP_LINE='{words} '; COMP_POINT=${{#COMP_LINE}}; \
             _iommutop iommutop '' --device; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script = script.display()
        );
        let completed = std::process::Command::new("bash")
            .args(["--norc", "--noprofile", "-c", &completing])
            .output()
            .expect("bash runs");
        assert_succeeded(&completed, "bash completing --device");
        let mut offered: Vec<String> = String::from_utf8_lossy(&completed.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        offered.sort();
        assert_eq!(offered, present, "`{words} <TAB>`");
    }
}

/// The crates of ours a manifest names under `[dependencies]`, without the `iommutop-` prefix.
fn workspace_dependencies(manifest: &str) -> Vec<String> {
    let mut in_dependencies = false;
    let mut found = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
        } else if in_dependencies {
            let name = line.split(['=', '.', ' ']).next().unwrap_or("");
            if let Some(ours) = name.strip_prefix("iommutop-") {
                found.push(ours.to_string());
            }
        }
    }
    found.sort();
    found
}

/// docs/architecture.md's `crates` block: each crate, its folder, and what its manifest names,
/// as the manifests say; and every path it names in backticks exists, so that a newcomer who
/// follows it finds each file.
#[test]
fn the_architecture_names_each_crate_and_its_dependencies() {
    let root = support::project_root();
    let page = std::fs::read_to_string(root.join("docs/architecture.md")).expect("the page");
    let block = page
        .split("```crates\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a ```crates block in docs/architecture.md");
    let members = std::fs::read_to_string(root.join("Cargo.toml")).expect("the workspace");
    let mut drawn = 0;
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let (left, right) = line.split_once("->").expect("CRATE FOLDER -> DEPENDENCIES");
        let mut words = left.split_whitespace();
        let (name, folder) = (
            words.next().expect("a crate"),
            words.next().expect("a folder"),
        );
        let manifest = std::fs::read_to_string(root.join(folder).join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("{folder}Cargo.toml: {e}"));
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "{folder}Cargo.toml is not the crate {name}"
        );
        assert!(
            members.contains(&format!("\"{}\"", folder.trim_end_matches('/'))),
            "{folder} is not a workspace member"
        );
        let mut named: Vec<String> = right
            .split(',')
            .map(|d| d.trim().to_string())
            .filter(|d| !d.is_empty() && d != "(none)")
            .collect();
        named.sort();
        assert_eq!(
            named,
            workspace_dependencies(&manifest),
            "{name}'s line in docs/architecture.md against {folder}Cargo.toml"
        );
        drawn += 1;
    }
    let member_count = members
        .lines()
        .find(|l| l.starts_with("members"))
        .expect("members")
        .matches('"')
        .count()
        / 2;
    assert_eq!(drawn, member_count, "a line for every workspace member");

    let tops = [
        "abi/",
        "bench/",
        "cli/",
        "docs/",
        "ebpf/",
        "examples/",
        "host/",
        "lab/",
        "loader/",
        "model/",
        "profiles/",
        "scripts/",
        "tui/",
        "workloads/",
    ];
    let missing: Vec<&str> = page
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|quoted| !quoted.contains(' ') && tops.iter().any(|t| quoted.starts_with(t)))
        .filter(|path| !root.join(path.trim_end_matches('/')).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md names paths that do not exist: {missing:?}"
    );
}
