//! No function grows past what one reader follows at once: a function over 120 lines does more
//! than one thing, and is split by meaning into named helpers rather than cut at the limit.
//!
//! The check reads the `src/` folder of every crate in the workspace. Test code is left out: an
//! item under `#[cfg(test)]` (a `mod tests { … }`, a test helper) and the file of a
//! `#[cfg(test)] mod name;`, with the folder beside it. The `tests/` folders are not read.
//!
//! A function is measured from the line of its `fn` to the line of its closing brace, by a small
//! scan ([`code_only`] then [`functions`]) that is not a Rust parser but is right for the code
//! here: comments, strings (raw and byte strings too) and char literals are blanked first, so
//! that the braces left are the code's.

use super::file_sizes::sources;
use crate::CRATES;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The most lines a function may have.
const LIMIT: usize = 120;

/// `text` with every comment, string literal and char literal replaced by spaces (line breaks
/// kept, so that line numbers still hold); lifetimes (`'a`) are left as they are.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, cs: &[char]| {
        out.extend(cs.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    };
    let mut i = 0;
    while i < chars.len() {
        let end = literal_end(&chars, i);
        if end > i {
            blank(&mut out, &chars[i..end]);
            i = end;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Where the comment or literal starting at `i` ends (one past it), or `i` if none starts there.
fn literal_end(chars: &[char], i: usize) -> usize {
    let at = |k: usize| chars.get(k).copied().unwrap_or('\0');
    let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
    match (at(i), at(i + 1)) {
        ('/', '/') => (i..chars.len())
            .find(|&k| chars[k] == '\n')
            .unwrap_or(chars.len()),
        ('/', '*') => block_comment_end(chars, i),
        ('"', _) => string_end(chars, i + 1),
        ('b', '"') if !ident_before => string_end(chars, i + 2),
        ('r' | 'b', '#' | '"') | ('b', 'r') if !ident_before => raw_string_end(chars, i),
        ('\'', '\\') => (i + 3..chars.len())
            .find(|&k| chars[k] == '\'')
            .map_or(chars.len(), |k| k + 1),
        ('\'', c) if c != '\'' && at(i + 2) == '\'' => i + 3,
        _ => i,
    }
}

/// One past the `*/` that closes the comment opened at `i` (they nest).
fn block_comment_end(chars: &[char], i: usize) -> usize {
    let (mut depth, mut k) = (0usize, i);
    while k + 1 < chars.len() {
        match (chars[k], chars[k + 1]) {
            ('/', '*') => (depth, k) = (depth + 1, k + 2),
            ('*', '/') => {
                (depth, k) = (depth - 1, k + 2);
                if depth == 0 {
                    return k;
                }
            }
            _ => k += 1,
        }
    }
    chars.len()
}

/// One past the `"` that closes a string whose text starts at `k` (escapes skipped).
fn string_end(chars: &[char], mut k: usize) -> usize {
    while k < chars.len() {
        match chars[k] {
            '\\' => k += 2,
            '"' => return k + 1,
            _ => k += 1,
        }
    }
    chars.len()
}

/// One past a raw string `r#"…"#` (or `br…`) starting at `i`; `i` if it is not one (`r#ident`).
fn raw_string_end(chars: &[char], i: usize) -> usize {
    let mut k = i + if chars[i] == 'b' { 2 } else { 1 };
    let hashes = chars[k..].iter().take_while(|&&c| c == '#').count();
    k += hashes;
    if chars.get(k) != Some(&'"') {
        return i;
    }
    let close: Vec<char> = std::iter::once('"')
        .chain(std::iter::repeat_n('#', hashes))
        .collect();
    (k + 1..chars.len())
        .find(|&j| chars[j..].starts_with(&close[..]))
        .map_or(chars.len(), |j| j + close.len())
}

/// A function found in a file: its name, the line of its `fn` (from 1) and its length in lines.
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// The functions with a body in `code` (from [`code_only`]), outside `#[cfg(test)]` items, and
/// the names of the `#[cfg(test)] mod name;` it declares.
fn functions(code: &str) -> (Vec<Function>, Vec<String>) {
    let chars: Vec<char> = code.chars().collect();
    let line_of = |at: usize| 1 + chars[..at].iter().filter(|&&c| c == '\n').count();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let (mut found, mut test_mods) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < chars.len() {
        if chars[i..].starts_with(&['#', '[', 'c', 'f', 'g', '(', 't', 'e', 's', 't', ')', ']']) {
            let (end, body) = item_end(&chars, i);
            if !body {
                let item: String = chars[i..end].iter().collect();
                let words: Vec<&str> = item.split_whitespace().collect();
                if let Some(at) = words.iter().position(|w| *w == "mod") {
                    if let Some(name) = words.get(at + 1) {
                        test_mods.push(name.trim_end_matches(';').to_string());
                    }
                }
            }
            i = end;
            continue;
        }
        let starts_fn = chars[i..].starts_with(&['f', 'n'])
            && (i == 0 || !ident(chars[i - 1]))
            && chars.get(i + 2).is_some_and(|c| c.is_whitespace());
        if starts_fn {
            let name: String = chars[i + 2..]
                .iter()
                .skip_while(|c| c.is_whitespace())
                .take_while(|&&c| ident(c))
                .collect();
            let (end, body) = item_end(&chars, i);
            if body && !name.is_empty() {
                let (first, last) = (line_of(i), line_of(end - 1));
                found.push(Function {
                    name,
                    line: first,
                    lines: last - first + 1,
                });
            }
            i += 2; // into the body: the functions inside it are measured too
            continue;
        }
        i += 1;
    }
    (found, test_mods)
}

/// The end (one past) of the item starting at `i`, and whether it has a body: the `}` matching
/// its first `{`, or the first `;` before any (outside `(…)` and `[…]`, so not `[u8; 4]`).
fn item_end(chars: &[char], i: usize) -> (usize, bool) {
    let mut depth = 0usize; // ( and [
    let mut k = i;
    while k < chars.len() {
        match chars[k] {
            '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            ';' if depth == 0 => return (k + 1, false),
            '{' if depth == 0 => return (block_end(chars, k), true),
            _ => {}
        }
        k += 1;
    }
    (chars.len(), false)
}

/// One past the `}` that closes the `{` at `open`.
fn block_end(chars: &[char], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, &c) in chars.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    chars.len()
}

/// Where the file of `mod name;` declared in `file` lives (`name.rs` or `name/mod.rs`, beside a
/// `lib.rs`, `main.rs` or `mod.rs`, else in the folder named after `file`), and that folder.
fn module_paths(file: &Path, name: &str) -> [PathBuf; 2] {
    let dir = file.parent().unwrap_or(Path::new("."));
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let base = if matches!(stem, "lib" | "main" | "mod") {
        dir.to_path_buf()
    } else {
        dir.join(stem)
    };
    [base.join(format!("{name}.rs")), base.join(name)]
}

#[test]
fn no_function_is_longer_than_the_limit() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for krate in CRATES {
        sources(&workspace.join(krate).join("src"), &["rs"], &mut files);
    }
    assert!(files.len() >= 50, "only {} Rust sources", files.len());
    let mut test_code: Vec<PathBuf> = Vec::new();
    let mut long = BTreeSet::new();
    let mut read = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable");
        let (found, test_mods) = functions(&code_only(&text));
        for name in test_mods {
            test_code.extend(module_paths(path, &name));
        }
        read.push((path, found));
    }
    let mut measured = 0;
    for (path, found) in read {
        if test_code.iter().any(|t| path.starts_with(t)) {
            continue;
        }
        let relative = path.strip_prefix(&workspace).unwrap_or(path);
        let relative = relative.to_string_lossy().replace('\\', "/");
        measured += found.len();
        for f in found.into_iter().filter(|f| f.lines > LIMIT) {
            long.insert((relative.clone(), f.name, f.line, f.lines));
        }
    }
    assert!(measured > 500, "only {measured} functions found");
    let problems: Vec<String> = long
        .iter()
        .map(|(file, name, line, lines)| {
            format!(
                "{file}:{line}: fn {name} has {lines} lines (limit {LIMIT}): split it by meaning"
            )
        })
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_scan_measures_functions_and_leaves_out_literals_comments_and_tests() {
    let source = r###"
/// A doc with a brace {
fn one(x: [u8; 4]) -> u8 {
    let s = "}}} \" {";
    let r = r#"{ "quoted" }"#;
    let c = '}';
    let e = '\'';
    /* a { /* nested } */ comment */
    fn inner<'a>(y: &'a str) -> &'a str { y }
    x[0] // }
}
trait T {
    fn declared(&self);
}
#[cfg(test)]
mod tests {
    fn hidden() {}
}
#[cfg(test)]
mod fake;
fn two() {}
"###;
    let code = code_only(source);
    assert_eq!(code.lines().count(), source.lines().count());
    let (found, test_mods) = functions(&code);
    let seen: Vec<(&str, usize, usize)> = found
        .iter()
        .map(|f| (f.name.as_str(), f.line, f.lines))
        .collect();
    assert_eq!(seen, [("one", 3, 9), ("inner", 9, 1), ("two", 21, 1)]);
    assert_eq!(test_mods, ["fake"]);
    let [file, dir] = module_paths(Path::new("src/lib.rs"), "fake");
    assert_eq!((file, dir), ("src/fake.rs".into(), "src/fake".into()));
    let [file, _] = module_paths(Path::new("src/a.rs"), "tests");
    assert_eq!(file, PathBuf::from("src/a/tests.rs"));
}
