//! The BPF library is built in floors (ebpf/lib): maps and counters at the bottom, then stacks
//! and frames, then charging, then the tracker, and the programs (`ebpf/progs`, `ebpf/selftest`)
//! on top. A file may include and call what its own floor or a lower one defines, never what a
//! floor above it defines, and no circle of includes or calls may form anywhere in `ebpf/`.
//!
//! The C is read by a small tokenizer, not a compiler: comments and string literals are dropped,
//! `#include "..."` lines give the includes, `#define NAME(` a function-like macro (whose body
//! is its calls), a name followed by `(...)` and `{` at the top level a function definition
//! (`BPF_PROG(name, ...)` and its kin define `name`), and inside a body a name followed by `(` a
//! call. Calls of names nothing in `ebpf/` defines (helpers, keywords, libbpf's macros) are left
//! out; preprocessor conditionals are read through, so every branch counts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The floor of each header, lowest first. A header not named here fails the test: give it one.
const FLOORS: &[(&str, usize)] = &[
    ("include/iommutop/abi.h", 0),
    ("lib/bits.bpf.h", 1),
    ("lib/cast.bpf.h", 1),
    ("lib/sizes.bpf.h", 1),
    ("lib/maps.bpf.h", 1),
    ("lib/hist.bpf.h", 1),
    ("lib/names.bpf.h", 1),
    ("lib/frame.bpf.h", 2),
    ("lib/state.bpf.h", 2),
    ("lib/context.bpf.h", 2),
    ("lib/stacks.bpf.h", 2),
    ("lib/position.bpf.h", 2),
    ("lib/filter.bpf.h", 3),
    ("lib/charge.bpf.h", 3),
    ("lib/role.bpf.h", 4),
    ("lib/track.bpf.h", 4),
    ("lib/exit.bpf.h", 4),
    ("lib/calls.bpf.h", 4),
    ("lib/common.bpf.h", 4),
];

/// The floors' names, as each header's opening comment says them ("Floor 2, stacks and frames").
const FLOOR_NAMES: &[&str] = &[
    "the ABI",
    "maps and counters",
    "stacks and frames",
    "charging",
    "the tracker",
    "programs",
];

/// Every `.c` file: a program, above every header.
const PROGRAMS: usize = 5;

/// Macros of libbpf whose first argument is the name of the function they define.
const DEFINING_MACROS: &[&str] = &["BPF_PROG", "BPF_KPROBE", "BPF_KRETPROBE", "BPF_KSYSCALL"];

/// What one file says: its includes, what it defines and what each definition calls.
#[derive(Default)]
struct Parsed {
    includes: Vec<String>,
    /// Functions and function-like macros defined here.
    functions: BTreeSet<String>,
    macros: BTreeSet<String>,
    /// (caller, callee): the caller is a function or macro of this file, or "" at file scope
    /// (a macro used there, as `IOMMUTOP_SEC(...)` before a program).
    calls: Vec<(String, String)>,
}

/// The text without comments and with string and character literals emptied, line breaks kept.
fn strip(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for d in chars.by_ref() {
                    if d == '\n' {
                        out.push('\n');
                    }
                    if last == '*' && d == '/' {
                        break;
                    }
                    last = d;
                }
                out.push(' ');
            }
            '/' if chars.peek() == Some(&'/') => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '"' | '\'' => {
                out.push(c);
                let mut escaped = false;
                for d in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if d == '\\' {
                        escaped = true;
                    } else if d == c {
                        break;
                    } else if c == '"' {
                        // An include's path is the one string the checker reads.
                        out.push(d);
                        continue;
                    }
                }
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Identifiers and single punctuation characters.
fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_alphanumeric() || c == '_' {
            let mut word = String::new();
            while let Some(&d) = chars.peek() {
                if !(d.is_alphanumeric() || d == '_') {
                    break;
                }
                word.push(d);
                chars.next();
            }
            out.push(word);
        } else if c == '"' {
            // A string literal, whole: never a name.
            chars.next();
            for d in chars.by_ref() {
                if d == '"' {
                    break;
                }
            }
            out.push("\"\"".into());
        } else {
            chars.next();
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
        }
    }
    out
}

fn is_name(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// The index of the closer that matches the opener at `open` (`(` and `)`, or `{` and `}`).
fn matching(tokens: &[String], open: usize, opener: &str, closer: &str) -> usize {
    let mut depth = 0;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        if token == opener {
            depth += 1;
        } else if token == closer {
            depth -= 1;
            if depth == 0 {
                return i;
            }
        }
    }
    tokens.len() - 1
}

/// The index of the `)` that closes the `(` at `open`.
fn closing(tokens: &[String], open: usize) -> usize {
    matching(tokens, open, "(", ")")
}

/// Reads one file: directives line by line, then the code's definitions and calls.
fn parse(source: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let joined = strip(source).replace("\\\n", " ");
    let mut code = String::new();
    for line in joined.lines() {
        let trimmed = line.trim_start();
        let Some(directive) = trimmed.strip_prefix('#') else {
            code.push_str(line);
            code.push('\n');
            continue;
        };
        let directive = directive.trim_start();
        if let Some(rest) = directive.strip_prefix("include") {
            if let Some(path) = rest.trim().strip_prefix('"') {
                parsed.includes.push(path.trim_end_matches('"').to_string());
            }
        } else if let Some(rest) = directive.strip_prefix("define") {
            let rest = rest.trim_start();
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // Only a function-like macro is called: its name is followed by `(` at once.
            if rest[name.len()..].starts_with('(') {
                let body = tokens(&rest[name.len()..]);
                let after = closing(&body, 0) + 1;
                calls_in(&body[after..], &name, &mut parsed.calls);
                parsed.macros.insert(name);
            }
        }
    }
    definitions(&tokens(&code), &mut parsed);
    parsed
}

/// Every `name(` of a stretch of code, as calls from caller.
fn calls_in(tokens: &[String], caller: &str, calls: &mut Vec<(String, String)>) {
    for pair in tokens.windows(2) {
        if is_name(&pair[0]) && pair[1] == "(" {
            calls.push((caller.to_string(), pair[0].clone()));
        }
    }
}

/// Function definitions at the top level and the calls in their bodies.
fn definitions(tokens: &[String], parsed: &mut Parsed) {
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        if token == "{" {
            // A struct, enum or initializer at the top level: skipped whole.
            i = block_end(tokens, i) + 1;
            continue;
        }
        if !(is_name(token) && tokens.get(i + 1).is_some_and(|t| t == "(")) {
            i += 1;
            continue;
        }
        let close = closing(tokens, i + 1);
        if tokens.get(close + 1).is_some_and(|t| t == "{") {
            let name = if DEFINING_MACROS.contains(&token.as_str()) {
                tokens[i + 2].clone()
            } else {
                token.clone()
            };
            let end = block_end(tokens, close + 1);
            calls_in(&tokens[close + 1..end], &name, &mut parsed.calls);
            parsed.functions.insert(name);
            i = end + 1;
        } else {
            // A prototype or a macro used at file scope (resolved later: only macros count).
            calls_in(&tokens[i..=close], "", &mut parsed.calls);
            i = close + 1;
        }
    }
}

/// The index of the `}` that closes the `{` at `open`.
fn block_end(tokens: &[String], open: usize) -> usize {
    matching(tokens, open, "{", "}")
}

/// `path` made plain: `a/b/../c` is `a/c`.
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            ".." => {
                parts.pop();
            }
            "." | "" => {}
            _ => parts.push(part),
        }
    }
    parts.join("/")
}

/// The file an `#include "name"` of `from` reads: beside it, else in `lib/` or `include/` (the
/// compiler's -I order). None for what is not ours (vmlinux.h).
fn resolve_include(from: &str, name: &str, files: &BTreeMap<String, String>) -> Option<String> {
    let dir = from.rsplit_once('/').map_or("", |(d, _)| d);
    [
        format!("{dir}/{name}"),
        format!("lib/{name}"),
        format!("include/{name}"),
    ]
    .into_iter()
    .map(|p| normalize(&p))
    .find(|p| files.contains_key(p))
}

fn floor_of(file: &str, floors: &BTreeMap<&str, usize>) -> Option<usize> {
    if file.ends_with(".c") {
        return Some(PROGRAMS);
    }
    floors.get(file).copied()
}

/// Every breach of the floors in `files` (path under ebpf/ -> text): upward includes and calls,
/// headers without a floor, and circles of includes or calls between files or functions.
fn check(files: &BTreeMap<String, String>, floors: &[(&str, usize)]) -> Vec<String> {
    let floors: BTreeMap<&str, usize> = floors.iter().copied().collect();
    let parsed: BTreeMap<&str, Parsed> = files
        .iter()
        .map(|(path, text)| (path.as_str(), parse(text)))
        .collect();
    let mut errors = Vec::new();
    let mut file_edges: BTreeSet<(String, String)> = BTreeSet::new();
    for file in parsed.keys() {
        if floor_of(file, &floors).is_none() {
            errors.push(format!("{file}: a header with no floor (add it to FLOORS)"));
        }
    }
    let floor = |file: &str| floor_of(file, &floors).unwrap_or(PROGRAMS);
    for (file, p) in &parsed {
        for name in &p.includes {
            let Some(target) = resolve_include(file, name, files) else {
                continue;
            };
            if floor(&target) > floor(file) {
                errors.push(format!(
                    "{file} includes {target}, a floor above it ({} over {})",
                    FLOOR_NAMES[floor(&target)],
                    FLOOR_NAMES[floor(file)]
                ));
            }
            file_edges.insert((file.to_string(), target));
        }
    }
    let definers = definers(&parsed);
    let mut function_edges: BTreeSet<(String, String)> = BTreeSet::new();
    for (file, p) in &parsed {
        for (caller, callee) in &p.calls {
            let Some(target) = resolve_call(file, callee, caller.is_empty(), &definers) else {
                continue;
            };
            if !caller.is_empty() {
                function_edges.insert((format!("{file}:{caller}"), format!("{target}:{callee}")));
            }
            if target == *file {
                continue;
            }
            if floor(&target) > floor(file) {
                let at = if caller.is_empty() {
                    "file scope"
                } else {
                    caller
                };
                errors.push(format!(
                    "{file}: {at} calls {callee}, which {target} defines a floor above it ({} over {})",
                    FLOOR_NAMES[floor(&target)],
                    FLOOR_NAMES[floor(file)]
                ));
            }
            file_edges.insert((file.to_string(), target));
        }
    }
    for circle in circles(&file_edges) {
        errors.push(format!(
            "a circle of includes and calls between files: {circle}"
        ));
    }
    for circle in circles(&function_edges) {
        errors.push(format!("a circle of calls: {circle}"));
    }
    // A function that calls another twice is one breach.
    let mut seen = BTreeSet::new();
    errors.retain(|e| seen.insert(e.clone()));
    errors
}

/// name -> (file, whether it is a macro) for every definition.
fn definers<'a>(parsed: &BTreeMap<&'a str, Parsed>) -> BTreeMap<String, Vec<(&'a str, bool)>> {
    let mut definers: BTreeMap<String, Vec<(&str, bool)>> = BTreeMap::new();
    for (file, p) in parsed {
        for name in &p.functions {
            definers
                .entry(name.clone())
                .or_default()
                .push((file, false));
        }
        for name in &p.macros {
            definers.entry(name.clone()).or_default().push((file, true));
        }
    }
    definers
}

/// The file whose definition a call of `callee` in `file` reaches: its own, else the one header
/// (or file) that defines it. At file scope only macros are called (a function's name followed
/// by `(` there is its prototype).
fn resolve_call(
    file: &str,
    callee: &str,
    file_scope: bool,
    definers: &BTreeMap<String, Vec<(&str, bool)>>,
) -> Option<String> {
    let found: Vec<&(&str, bool)> = definers
        .get(callee)?
        .iter()
        .filter(|(_, macro_)| *macro_ || !file_scope)
        .collect();
    if found.iter().any(|(f, _)| *f == file) {
        return Some(file.to_string());
    }
    let headers: Vec<&&(&str, bool)> = found.iter().filter(|(f, _)| f.ends_with(".h")).collect();
    match (headers.first(), found.first()) {
        (Some((f, _)), _) => Some(f.to_string()),
        (None, Some((f, _))) if !file.ends_with(".c") => Some(f.to_string()),
        // A .c file's own functions are out of other .c files' sight.
        _ => None,
    }
}

/// Each circle of the graph of `edges`, its nodes listed.
fn circles(edges: &BTreeSet<(String, String)>) -> Vec<String> {
    let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (from, to) in edges {
        next.entry(from).or_default().insert(to);
        next.entry(to).or_default();
    }
    crate::circles::circles(&next)
        .into_iter()
        .map(|circle| circle.join(", "))
        .collect()
}

/// Every C file and header under ebpf/, by its path there.
fn ebpf_files() -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ebpf");
    let mut files = BTreeMap::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("reads ebpf/") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "c" || e == "h") {
                let name = path.strip_prefix(&root).expect("under ebpf/");
                let text = std::fs::read_to_string(&path).expect("reads a source");
                files.insert(name.to_string_lossy().replace('\\', "/"), text);
            }
        }
    }
    files
}

#[test]
fn no_file_in_ebpf_reaches_up_a_floor_or_round_a_circle() {
    let files = ebpf_files();
    assert!(files.contains_key("lib/track.bpf.h"), "ebpf/ not found");
    let errors = check(&files, FLOORS);
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// The table above and the headers' own words agree: each header of lib/ opens by naming its
/// floor, "Floor N, <name>".
#[test]
fn each_header_names_its_floor() {
    let files = ebpf_files();
    for (file, floor) in FLOORS.iter().filter(|(f, _)| f.starts_with("lib/")) {
        let text = files.get(*file).unwrap_or_else(|| panic!("{file} is gone"));
        let head: String = text.lines().take(4).collect::<Vec<_>>().join("\n");
        let said = format!("Floor {floor}, {}", FLOOR_NAMES[*floor]);
        assert!(head.contains(&said), "{file} does not open with \"{said}\"");
    }
}

fn example(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    files
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect()
}

const EXAMPLE_FLOORS: &[(&str, usize)] = &[("lib/low.bpf.h", 1), ("lib/high.bpf.h", 3)];

#[test]
fn the_checker_passes_a_library_in_floors() {
    let files = example(&[
        ("lib/low.bpf.h", "static int low(int a)\n{\n\treturn a;\n}\n"),
        (
            "lib/high.bpf.h",
            "#include \"low.bpf.h\"\n#define HIGH(x) low(x)\nstatic int high(void)\n{\n\treturn HIGH(1); /* up(1) */\n}\n",
        ),
        (
            "progs/p.bpf.c",
            "#include \"high.bpf.h\"\nSEC(\"x\")\nint BPF_PROG(p__x__tp, int a)\n{\n\treturn high();\n}\n",
        ),
    ]);
    assert_eq!(check(&files, EXAMPLE_FLOORS), Vec::<String>::new());
}

#[test]
fn the_checker_names_an_upward_call_and_a_circle() {
    let files = example(&[
        (
            "lib/low.bpf.h",
            "int helper(int a);\nstatic int low(int a)\n{\n\treturn helper(a);\n}\n",
        ),
        (
            "lib/high.bpf.h",
            "#include \"low.bpf.h\"\n__noinline int helper(int a)\n{\n\treturn low(a) + 1;\n}\n",
        ),
    ]);
    let errors = check(&files, EXAMPLE_FLOORS);
    assert!(
        errors.iter().any(|e| e.starts_with(
            "lib/low.bpf.h: low calls helper, which lib/high.bpf.h defines a floor above it"
        )),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("between files")
            && e.contains("lib/high.bpf.h")
            && e.contains("lib/low.bpf.h")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("a circle of calls:") && e.contains("helper")),
        "{errors:?}"
    );
}

#[test]
fn the_checker_names_an_upward_include_and_a_header_without_a_floor() {
    let files = example(&[
        ("lib/low.bpf.h", "#include \"high.bpf.h\"\n"),
        ("lib/high.bpf.h", "\n"),
        ("lib/stray.bpf.h", "\n"),
    ]);
    let errors = check(&files, EXAMPLE_FLOORS);
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("lib/low.bpf.h includes lib/high.bpf.h, a floor above it")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("lib/stray.bpf.h: a header with no floor")),
        "{errors:?}"
    );
}
