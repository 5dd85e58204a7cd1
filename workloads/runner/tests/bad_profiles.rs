//! Every file in `tests/bad-profiles/` is a profile that must not load; its first line,
//! `# expect: LINE: KEY: MESSAGE`, is the error it must produce after `FILE:`.

use iommutop_workloads::Profile;
use std::path::{Path, PathBuf};

fn bad_profiles() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad-profiles");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/bad-profiles exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn each_bad_profile_fails_with_its_message() {
    let paths = bad_profiles();
    assert!(paths.len() >= 15, "only {} bad profiles", paths.len());
    let mut wrong = Vec::new();
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{}: first line must be `# expect: ...`", path.display()));
        let got = match Profile::load(path) {
            Ok(_) => "(loaded)".to_string(),
            Err(e) => e.to_string(),
        };
        let want = format!("{}:{expect}", path.display());
        if got != want {
            wrong.push(format!("{}\n  want: {want}\n  got:  {got}", path.display()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
