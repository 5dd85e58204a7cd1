//! The house rules a test can check, over the whole workspace: no Rust module circle in any
//! crate (`layers`), the BPF library in floors with no circle of includes or calls
//! (`bpf_layers`), no file and no function past what one reader follows (`file_sizes`,
//! `fn_lengths`). Run them: `cargo test -p iommutop --test house`.

mod bpf_layers;
mod circles;
mod file_sizes;
mod fn_lengths;
mod layers;

/// Every crate of the workspace, by its folder: the `src/` folders `layers` and `fn_lengths` read.
const CRATES: [&str; 9] = [
    "abi",
    "cli",
    "host",
    "loader",
    "model",
    "tui",
    "workloads/runner",
    "workloads/vfio-nvme",
    "workloads/vfio-nvme/results",
];

#[test]
fn the_crates_read_are_the_workspace_members() {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml"))
        .expect("the workspace's Cargo.toml");
    let members = manifest
        .lines()
        .find_map(|line| line.trim().strip_prefix("members = ["))
        .and_then(|rest| rest.strip_suffix(']'))
        .expect("a one-line `members = [...]`");
    let members: Vec<&str> = members
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .collect();
    assert_eq!(
        members, CRATES,
        "add the crate to CRATES in cli/tests/house/main.rs"
    );
}
