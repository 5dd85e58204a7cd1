//! The BPF sources include one another without a circle, as the Rust modules import
//! one another in layers (`layers.rs`): this test reads every `.c` and `.h` under `ebpf/`, takes
//! each `#include "…"` that names a file of the tree (resolved beside the includer, then in
//! `ebpf/include` and `ebpf/lib`, as `loader/build.rs` passes `-I`), and fails on a cycle, naming it.

use crate::layers::{cycles, Graph, Module};
use std::path::{Path, PathBuf};

/// The directories an `#include "…"` is looked up in after the includer's own.
const INCLUDE_DIRS: [&str; 2] = ["include", "lib"];

#[test]
fn the_bpf_sources_include_one_another_without_a_circle() {
    let ebpf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ebpf");
    let graph = include_graph(&ebpf);
    assert!(
        graph.values().map(|includes| includes.len()).sum::<usize>() > 10,
        "the parser finds the includes under {}: {graph:?}",
        ebpf.display()
    );
    let circles = cycles(&graph);
    assert!(circles.is_empty(), "include circles: {circles:?}");
}

#[test]
fn a_circle_of_includes_is_found_and_named() {
    let dir = std::env::temp_dir().join(format!("iommutop-c-includes-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("lib")).expect("a temporary directory");
    std::fs::write(dir.join("lib/a.bpf.h"), "#include \"b.bpf.h\"\n").expect("write");
    std::fs::write(
        dir.join("lib/b.bpf.h"),
        "#include <vmlinux.h>\n#include \"a.bpf.h\"\n",
    )
    .expect("write");
    std::fs::write(dir.join("p.bpf.c"), "#include \"a.bpf.h\"\n").expect("write");
    let circles = cycles(&include_graph(&dir));
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(circles, ["lib/a.bpf.h → lib/b.bpf.h → lib/a.bpf.h"]);
}

/// Every source under `root` with the sources of the tree it includes, by path from `root`.
fn include_graph(root: &Path) -> Graph {
    let root = &root
        .canonicalize()
        .unwrap_or_else(|e| panic!("cannot find {}: {e}", root.display()));
    let mut sources = Vec::new();
    collect_sources(root, &mut sources);
    let name = |path: &Path| -> Module {
        vec![path
            .strip_prefix(root)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned()]
    };
    let mut graph = Graph::new();
    for source in &sources {
        let text = std::fs::read_to_string(source)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", source.display()));
        let includes = quoted_includes(&text)
            .filter_map(|included| resolve(root, source, included))
            .map(|path| name(&path))
            .collect();
        graph.insert(name(source), includes);
    }
    graph
}

fn collect_sources(dir: &Path, sources: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_sources(&path, sources);
        } else if path.extension().is_some_and(|ext| ext == "c" || ext == "h") {
            sources.push(path);
        }
    }
}

/// The files named by `#include "…"` lines (not `<…>`: the system's and libbpf's headers).
fn quoted_includes(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter_map(|line| {
        let rest = line.trim_start().strip_prefix('#')?.trim_start();
        let quoted = rest
            .strip_prefix("include")?
            .trim_start()
            .strip_prefix('"')?;
        quoted.split('"').next()
    })
}

/// Where the compiler finds `included` from `source`: beside it, then in the include
/// directories; `None` for a file outside the tree (`vmlinux.h`, generated at build time).
fn resolve(root: &Path, source: &Path, included: &str) -> Option<PathBuf> {
    let beside = source.parent().map(|dir| dir.join(included));
    beside
        .into_iter()
        .chain(INCLUDE_DIRS.iter().map(|dir| root.join(dir).join(included)))
        .find(|path| path.is_file())
        .and_then(|path| path.canonicalize().ok())
}
