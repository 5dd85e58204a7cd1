//! Every crate's modules import one another in layers, with no circle: this
//! test reads each crate's `src/`, takes every module's `crate::`, `super::` and `self::` paths
//! (in `use` and in code; comments, strings and `#[cfg(test)]` items left out) and fails on a
//! cycle, naming it. A module naming its own submodules is not an edge (they are its parts); a
//! submodule naming its parent is.

use crate::circles::circles;
use crate::CRATES;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path inside the crate (`change::domain`; empty for the root).
pub(crate) type Module = Vec<String>;

/// Who imports whom, each module with the modules it names.
pub(crate) type Graph = BTreeMap<Module, BTreeSet<Module>>;

#[test]
fn the_modules_import_one_another_without_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/src");
    let (graph, _) = import_graph(&src);
    assert!(
        graph[&module("pci")].contains(&module("journal")),
        "the parser finds imports (pci records in a journal): {graph:?}"
    );
}

#[test]
fn every_crate_imports_its_modules_without_a_circle() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut problems = Vec::new();
    for krate in CRATES {
        let (graph, from_root) = import_graph(&workspace.join(krate).join("src"));
        assert!(graph.len() > 1, "{krate}: no modules found");
        if !from_root.is_empty() {
            problems.push(format!(
                "{krate}: import these from the module that defines them, not from the crate \
                 root (which re-exports them), so that the graph sees the edge: {from_root:?}"
            ));
        }
        for circle in circles(&graph) {
            let modules: Vec<String> = circle.iter().map(show).collect();
            problems.push(format!(
                "{krate}: an import circle among {}",
                modules.join(", ")
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_circle_is_found_and_named() {
    let mut graph = Graph::new();
    graph.insert(module("a"), [module("b")].into());
    graph.insert(module("b"), [module("c::d")].into());
    graph.insert(module("c::d"), [module("a")].into());
    assert_eq!(
        circles(&graph),
        [vec![module("a"), module("b"), module("c::d")]]
    );
    let files = BTreeMap::from([
        (module(""), String::new()),
        (module("a"), "use crate::b::{self, X};\n".to_string()),
        (
            module("b"),
            "#[cfg(test)]\nmod tests { use crate::a; }\n// crate::a\nfn f() { super::a::g(\"crate::a\") }\n"
                .to_string(),
        ),
    ]);
    let (graph, _) = graph_of(&files);
    assert_eq!(graph[&module("a")], [module("b")].into());
    assert_eq!(
        graph[&module("b")],
        [module("a")].into(),
        "code paths count, comments, strings and tests do not"
    );
}

fn module(path: &str) -> Module {
    path.split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn show(module: &Module) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

/// The import graph of the crate at `src`, and the paths that name an item through the crate
/// root's re-exports (`crate::Journal`).
fn import_graph(src: &Path) -> (Graph, Vec<String>) {
    let mut files = BTreeMap::new();
    read_tree(src, src, &mut files);
    graph_of(&files)
}

fn read_tree(src: &Path, dir: &Path, files: &mut BTreeMap<Module, String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("src is readable")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            read_tree(src, &path, files);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let relative = path
            .strip_prefix(src)
            .expect("under src")
            .with_extension("");
        let mut name: Module = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(name.last().map(String::as_str), Some("mod" | "lib")) || name == ["main"] {
            name.pop();
        }
        files.insert(name, std::fs::read_to_string(&path).expect("source"));
    }
}

fn graph_of(files: &BTreeMap<Module, String>) -> (Graph, Vec<String>) {
    let mut code = BTreeMap::new();
    let mut tests: Vec<Module> = Vec::new();
    for (name, text) in files {
        let (kept, test_children) = without_tests(&tokens(text));
        tests.extend(test_children.into_iter().map(|child| {
            let mut path = name.clone();
            path.push(child);
            path
        }));
        code.insert(name.clone(), kept);
    }
    let is_test = |m: &Module| tests.iter().any(|t| m.starts_with(t));
    let known: BTreeSet<Module> = files.keys().cloned().collect();
    let in_root = code
        .get(&Module::new())
        .map(|t| defined(t))
        .unwrap_or_default();
    let mut graph = Graph::new();
    let mut from_root = Vec::new();
    for (here, tokens) in code.iter().filter(|(m, _)| !is_test(m)) {
        let edges = graph.entry(here.clone()).or_default();
        for path in paths(tokens, here, &known) {
            let target = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|prefix| known.contains(prefix))
                .unwrap_or_default();
            if target.is_empty() && !here.is_empty() {
                if !path.first().is_some_and(|item| in_root.contains(item)) {
                    from_root.push(format!("{}: crate::{}", show(here), path.join("::")));
                }
            } else if !target.starts_with(here) {
                edges.insert(target);
            }
        }
    }
    (graph, from_root)
}

/// The names of the items a module's own code defines (`struct Workload`, `fn run`).
fn defined(tokens: &[String]) -> BTreeSet<String> {
    const KINDS: [&str; 8] = [
        "struct", "enum", "trait", "fn", "type", "const", "static", "union",
    ];
    tokens
        .windows(2)
        .filter(|pair| KINDS.contains(&pair[0].as_str()))
        .map(|pair| pair[1].clone())
        .collect()
}

/// Identifiers and punctuation (`::` as one token), without comments, string and character
/// literals or lifetimes.
fn tokens(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == 'r' && (at(i + 1) == '"' || (at(i + 1) == '#' && at(i + 2) != '[')) {
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            i += 2 + hashes;
            while i < chars.len() && !(chars[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#')) {
                i += 1;
            }
            i += 1 + hashes;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '\'' {
            if at(i + 1) == '\\' {
                i += 3;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
                while at(i).is_alphanumeric() || at(i) == '_' {
                    i += 1;
                }
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while at(i).is_alphanumeric() || at(i) == '_' {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && at(i + 1) == ':' {
            out.push("::".to_string());
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
            i += 1;
        }
    }
    out
}

/// The tokens without `#[cfg(test)]` items, and the names of the test modules declared out of
/// line (`#[cfg(test)] mod tests;`).
fn without_tests(tokens: &[String]) -> (Vec<String>, Vec<String>) {
    const CFG_TEST: [&str; 7] = ["#", "[", "cfg", "(", "test", ")", "]"];
    let mut kept = Vec::new();
    let mut test_modules = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if !tokens[i..].starts_with(&CFG_TEST.map(str::to_string)) {
            kept.push(tokens[i].clone());
            i += 1;
            continue;
        }
        i += CFG_TEST.len();
        if tokens.get(i).is_some_and(|t| t == "mod") && tokens.get(i + 2).is_some_and(|t| t == ";")
        {
            test_modules.extend(tokens.get(i + 1).cloned());
        }
        let mut depth = 0;
        while let Some(t) = tokens.get(i) {
            i += 1;
            match t.as_str() {
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ";" if depth == 0 => break,
                _ => {}
            }
        }
    }
    (kept, test_modules)
}

/// Every path into this crate that `tokens` name, made absolute (`["block", "disks_of"]`).
fn paths(tokens: &[String], here: &Module, known: &BTreeSet<Module>) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let first = tokens[i].as_str();
        let after_use = i > 0 && tokens[i - 1] == "use";
        let child = {
            let mut m = here.clone();
            m.push(first.to_string());
            after_use && known.contains(&m)
        };
        let anchored = matches!(first, "crate" | "super" | "self")
            && tokens.get(i + 1).is_some_and(|t| t == "::");
        if !anchored && !child {
            i += 1;
            continue;
        }
        let mut leaves = Vec::new();
        i = tree(tokens, i, Vec::new(), &mut leaves);
        for leaf in leaves {
            if let Some(path) = absolute(&leaf, here) {
                found.push(path);
            }
        }
    }
    found
}

/// Reads a path or use tree from `tokens[i]`, pushing each full path onto `leaves`; returns the
/// index after it.
fn tree(
    tokens: &[String],
    mut i: usize,
    mut prefix: Vec<String>,
    leaves: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        match tokens.get(i).map(String::as_str) {
            Some("{") => {
                i += 1;
                while tokens.get(i).is_some_and(|t| t != "}") {
                    i = tree(tokens, i, prefix.clone(), leaves);
                    if tokens.get(i).is_some_and(|t| t == ",") {
                        i += 1;
                    }
                }
                return i + 1;
            }
            Some("*") => {
                leaves.push(prefix);
                return i + 1;
            }
            Some(name) if name.starts_with(|c: char| c.is_alphanumeric() || c == '_') => {
                prefix.push(name.to_string());
                i += 1;
                if tokens.get(i).is_some_and(|t| t == "::") {
                    i += 1;
                    continue;
                }
                if tokens.get(i).is_some_and(|t| t == "as") {
                    i += 2;
                }
                leaves.push(prefix);
                return i;
            }
            _ => {
                leaves.push(prefix);
                return i;
            }
        }
    }
}

/// `leaf` (`super::x`, `crate::a::b`, `child::c`) from the crate root; `None` for the root itself.
fn absolute(leaf: &[String], here: &Module) -> Option<Vec<String>> {
    let (mut base, mut rest) = match leaf.first().map(String::as_str)? {
        "crate" => (Vec::new(), &leaf[1..]),
        "self" => (here.clone(), &leaf[1..]),
        "super" => (here.clone(), leaf),
        _ => (here.clone(), leaf),
    };
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    (!base.is_empty() || here.is_empty()).then_some(base)
}

#[test]
fn a_module_naming_its_parts_is_no_edge() {
    let files = BTreeMap::from([
        (module(""), "pub struct Root;\n".to_string()),
        (
            module("a"),
            "use self::inner::X;\nfn f() -> crate::Root { Root }\n".to_string(),
        ),
        (module("a::inner"), "use super::Y;\n".to_string()),
    ]);
    let (graph, from_root) = graph_of(&files);
    assert!(graph[&module("a")].is_empty(), "{graph:?}");
    assert_eq!(graph[&module("a::inner")], [module("a")].into());
    assert!(
        from_root.is_empty(),
        "an item the root defines is not a re-export: {from_root:?}"
    );
}
