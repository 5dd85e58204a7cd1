//! `IOMMUTOP_GIT_COMMIT` for `--version`. The BPF objects are built by the loader's own build
//! script (loader/build.rs).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    export_git_commit(&manifest);
}

/// `IOMMUTOP_GIT_COMMIT` for `--version`: the commit the binary was built from, or `unknown`
/// outside a git checkout. Rebuilt when HEAD moves (not on every change to the index, which
/// would rebuild for nothing).
fn export_git_commit(manifest: &Path) {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(manifest)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=IOMMUTOP_GIT_COMMIT={commit}");
    // HEAD is the worktree's own, the refs are shared; a path that does not exist would make
    // cargo rerun this script on every build.
    let own = git(&["rev-parse", "--absolute-git-dir"]).map(|d| PathBuf::from(d).join("HEAD"));
    let common = git(&["rev-parse", "--git-common-dir"]).map(|d| manifest.join(d));
    let refs = common
        .iter()
        .flat_map(|dir| [dir.join("refs/heads"), dir.join("packed-refs")]);
    for watched in own.into_iter().chain(refs).filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", watched.display());
    }
}
