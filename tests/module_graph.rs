//! No import circles between modules: at every level of the module tree, the sibling
//! modules' `crate::…` / `super::…` references form a graph without a cycle. And no
//! source file of the programs over [`MAX_LINES`] lines.
//!
//! A circle means neither side can be read, tested or moved without the other; the arrows
//! should point one way, into the core (`admission` → `mutation`, `pod` → `containers`).
//!
//! How it reads the source: it follows `mod` declarations from `lib.rs` (with `#[path]`),
//! skips comments, strings and everything under `#[cfg(test)]` (a test may look at its
//! neighbours), and resolves every path that starts with `crate`, `super` or `self`,
//! `use` groups included. A reference from module `a::b::c` to `a::x::y` is an edge
//! `b → x` among the children of `a`; a reference to an item of `a` itself (its `mod.rs`)
//! is no edge. Re-exports are not followed: `use super::Thing` where the parent re-exports
//! `Thing` from a sibling is not seen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Punct(&'static str),
    Str(String),
}

/// Tokens with their line numbers; comments dropped, string contents kept only so that
/// `#[path = "…"]` can be read.
fn tokens(text: &str) -> Vec<(Tok, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if i >= chars.len() {
                    break;
                }
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
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && at(i + 1) == 'r'))
            && matches!(at(i + 1 + usize::from(c == 'b')), '"' | '#')
            && {
                // A raw string: r"…", r#"…"#, br"…"; not the identifier `r#type`.
                let mut j = i + 1 + usize::from(c == 'b');
                while at(j) == '#' {
                    j += 1;
                }
                at(j) == '"'
            }
        {
            i += 1 + usize::from(c == 'b');
            let mut hashes = 0;
            while chars[i] == '#' {
                hashes += 1;
                i += 1;
            }
            i += 1;
            let start = i;
            loop {
                if i >= chars.len() {
                    break;
                }
                if chars[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                    break;
                }
                if chars[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            out.push((
                Tok::Str(chars[start..i.min(chars.len())].iter().collect()),
                line,
            ));
            i += 1 + hashes;
        } else if c == '"' || (c == 'b' && at(i + 1) == '"') {
            i += if c == 'b' { 2 } else { 1 };
            let start = i;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if at(i) == '\n' {
                    line += 1;
                }
                i += 1;
            }
            out.push((
                Tok::Str(chars[start..i.min(chars.len())].iter().collect()),
                line,
            ));
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{1F600}') or a lifetime ('a, 'static).
            if at(i + 1) == '\\' {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let mut word: String = chars[start..i].iter().collect();
            if word == "r" && at(i) == '#' {
                i += 1;
                let s = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                word = chars[s..i].iter().collect();
            }
            out.push((Tok::Ident(word), line));
        } else if c == ':' && at(i + 1) == ':' {
            out.push((Tok::Punct("::"), line));
            i += 2;
        } else {
            let p = match c {
                '{' => "{",
                '}' => "}",
                '(' => "(",
                ')' => ")",
                '[' => "[",
                ']' => "]",
                ';' => ";",
                ',' => ",",
                '#' => "#",
                '=' => "=",
                '*' => "*",
                _ => "?",
            };
            out.push((Tok::Punct(p), line));
            i += 1;
        }
    }
    out
}

/// One reference: from the module it is written in to an absolute path.
#[derive(Debug)]
struct Reference {
    from: Vec<String>,
    to: Vec<String>,
    place: String,
}

#[derive(Default)]
struct Crate {
    modules: BTreeSet<Vec<String>>,
    references: Vec<Reference>,
}

fn ident(tokens: &[(Tok, usize)], i: usize) -> Option<&str> {
    match tokens.get(i) {
        Some((Tok::Ident(s), _)) => Some(s),
        _ => None,
    }
}

fn punct(tokens: &[(Tok, usize)], i: usize, p: &str) -> bool {
    matches!(tokens.get(i), Some((Tok::Punct(q), _)) if *q == p)
}

/// Index just past the bracketed group that opens at `i`.
fn skip_group(tokens: &[(Tok, usize)], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < tokens.len() {
        match &tokens[i].0 {
            Tok::Punct("{") | Tok::Punct("(") | Tok::Punct("[") => depth += 1,
            Tok::Punct("}") | Tok::Punct(")") | Tok::Punct("]") => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// Index just past the item starting at `i`: up to a `;` or the end of its first `{…}`.
fn skip_item(tokens: &[(Tok, usize)], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < tokens.len() {
        match &tokens[i].0 {
            Tok::Punct("{") | Tok::Punct("(") | Tok::Punct("[") => depth += 1,
            Tok::Punct("}") | Tok::Punct(")") | Tok::Punct("]") => {
                depth = depth.saturating_sub(1);
                if depth == 0 && tokens[i].0 == Tok::Punct("}") {
                    return i + 1;
                }
            }
            Tok::Punct(";") if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// A path tree after `crate`/`super`/`self` (already resolved to `prefix`), `use` groups
/// included; returns the absolute paths and the index past the tree.
fn path_tree(
    tokens: &[(Tok, usize)],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        match ident(tokens, i) {
            Some("self") => {}
            Some(name) => prefix.push(name.to_owned()),
            None if punct(tokens, i, "{") => {
                i += 1;
                while i < tokens.len() && !punct(tokens, i, "}") {
                    if punct(tokens, i, ",") || punct(tokens, i, "*") {
                        i += 1;
                        continue;
                    }
                    i = path_tree(tokens, i, prefix.clone(), out);
                }
                return i + 1;
            }
            None => {
                out.push(prefix);
                return i;
            }
        }
        i += 1;
        if !punct(tokens, i, "::") {
            out.push(prefix);
            return i;
        }
        i += 1;
    }
}

/// Reads one module's tokens from `start` to a closing `}` (or the end), recording
/// modules, references, and the files of `mod x;` declarations.
fn read_module(
    krate: &mut Crate,
    tokens: &[(Tok, usize)],
    mut i: usize,
    module: &[String],
    child_dir: &Path,
    file: &Path,
) -> usize {
    krate.modules.insert(module.to_vec());
    let mut path_attr: Option<String> = None;
    let mut test_only = false;
    let mut depth = 0usize;
    while i < tokens.len() {
        match &tokens[i].0 {
            Tok::Punct("}") if depth == 0 => return i + 1,
            Tok::Punct("}") => depth -= 1,
            Tok::Punct("#") if punct(tokens, i + 1, "[") || punct(tokens, i + 2, "[") => {
                let open = if punct(tokens, i + 1, "[") {
                    i + 1
                } else {
                    i + 2
                };
                let end = skip_group(tokens, open);
                let attr: Vec<&Tok> = tokens[open..end].iter().map(|(t, _)| t).collect();
                if attr.len() >= 5
                    && attr[1] == &Tok::Ident("cfg".into())
                    && attr[3] == &Tok::Ident("test".into())
                    && attr[4] == &Tok::Punct(")")
                {
                    test_only = true;
                }
                if attr.get(1) == Some(&&Tok::Ident("path".into())) {
                    if let Some(Tok::Str(p)) = attr.get(3) {
                        path_attr = Some(p.clone());
                    }
                }
                i = end;
                continue;
            }
            _ if test_only => {
                i = skip_item(tokens, i);
                test_only = false;
                path_attr = None;
                continue;
            }
            Tok::Ident(word) if word == "mod" => {
                if let Some(name) = ident(tokens, i + 1) {
                    let mut child = module.to_vec();
                    child.push(name.to_owned());
                    if punct(tokens, i + 2, ";") {
                        let path = match path_attr.take() {
                            Some(p) => file.parent().unwrap().join(p),
                            None if child_dir.join(format!("{name}.rs")).exists() => {
                                child_dir.join(format!("{name}.rs"))
                            }
                            None => child_dir.join(name).join("mod.rs"),
                        };
                        read_file(krate, &path, &child);
                        i += 3;
                        continue;
                    }
                    if punct(tokens, i + 2, "{") {
                        i = read_module(krate, tokens, i + 3, &child, &child_dir.join(name), file);
                        continue;
                    }
                }
            }
            Tok::Ident(word)
                if matches!(word.as_str(), "crate" | "super" | "self")
                    && punct(tokens, i + 1, "::")
                    && !(i > 0 && punct(tokens, i - 1, "::")) =>
            {
                let line = tokens[i].1;
                let mut prefix = if word == "crate" {
                    vec![]
                } else {
                    module.to_vec()
                };
                i += 2;
                if word == "super" {
                    prefix.pop();
                    while ident(tokens, i) == Some("super") && punct(tokens, i + 1, "::") {
                        prefix.pop();
                        i += 2;
                    }
                }
                let mut found = Vec::new();
                i = path_tree(tokens, i, prefix, &mut found);
                for to in found {
                    krate.references.push(Reference {
                        from: module.to_vec(),
                        to,
                        place: format!("{}:{line}", file.display()),
                    });
                }
                continue;
            }
            // An attribute lasts until its item: `#[path = "…"] pub mod x;`.
            Tok::Punct(";") => path_attr = None,
            Tok::Punct("{") => {
                path_attr = None;
                depth += 1;
            }
            _ => {}
        }
        i += 1;
    }
    i
}

fn read_file(krate: &mut Crate, path: &Path, module: &[String]) {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (a `mod` without its file?)", path.display()));
    let name = path.file_name().unwrap().to_str().unwrap();
    let dir = path.parent().unwrap();
    let child_dir = if matches!(name, "lib.rs" | "main.rs" | "mod.rs") {
        dir.to_path_buf()
    } else {
        dir.join(name.trim_end_matches(".rs"))
    };
    read_module(krate, &tokens(&text), 0, module, &child_dir, path);
}

/// Every cycle among sibling modules, as `level: a -> b -> a (where)` sentences.
fn cycles(lib_rs: &Path) -> Vec<String> {
    let mut krate = Crate::default();
    read_file(&mut krate, lib_rs, &[]);
    // level -> from -> to -> one place that makes the edge
    let mut graph: BTreeMap<Vec<String>, BTreeMap<String, BTreeMap<String, String>>> =
        BTreeMap::new();
    for r in &krate.references {
        let common = r.from.iter().zip(&r.to).take_while(|(a, b)| a == b).count();
        if common >= r.from.len() || common >= r.to.len() {
            continue; // into itself, a child, or an ancestor's own items
        }
        let level = r.from[..common].to_vec();
        let mut target = level.clone();
        target.push(r.to[common].clone());
        if !krate.modules.contains(&target) {
            continue; // an item of the parent module, not a sibling module
        }
        graph
            .entry(level)
            .or_default()
            .entry(r.from[common].clone())
            .or_default()
            .entry(r.to[common].clone())
            .or_insert_with(|| r.place.clone());
    }
    let mut found = Vec::new();
    for (level, edges) in &graph {
        let mut reported = BTreeSet::new();
        for start in edges.keys() {
            // Shortest way back to `start`, breadth first.
            let mut back: BTreeMap<&str, &str> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([start.as_str()]);
            let mut closed = None;
            while let Some(node) = queue.pop_front() {
                for next in edges.get(node).into_iter().flat_map(|e| e.keys()) {
                    if next == start {
                        closed = Some(node);
                        break;
                    }
                    if !back.contains_key(next.as_str()) {
                        back.insert(next, node);
                        queue.push_back(next);
                    }
                }
                if closed.is_some() {
                    break;
                }
            }
            let Some(mut node) = closed else { continue };
            let mut ring = vec![start.as_str()];
            let mut tail = vec![];
            while node != start {
                tail.push(node);
                node = back[node];
            }
            ring.extend(tail.into_iter().rev());
            let members: BTreeSet<&str> = ring.iter().copied().collect();
            if !reported.insert(members) {
                continue;
            }
            ring.push(start);
            let steps: Vec<String> = ring
                .windows(2)
                .map(|w| format!("{} -> {} ({})", w[0], w[1], edges[w[0]][w[1]]))
                .collect();
            let at = if level.is_empty() {
                "crate".to_owned()
            } else {
                level.join("::")
            };
            found.push(format!("in {at}: {}", steps.join(", ")));
        }
    }
    found
}

fn manifest(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

#[test]
fn no_import_circles_in_src() {
    let found = cycles(&manifest("src/lib.rs"));
    assert!(
        found.is_empty(),
        "import circles in src/:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_import_circles_in_the_cleaner() {
    let found = cycles(&manifest("cleaner/src/lib.rs"));
    assert!(
        found.is_empty(),
        "import circles in cleaner/src/:\n{}",
        found.join("\n")
    );
}

/// A file a reader takes in at one sitting (issue 40). One that grows past it is split
/// along a seam its readers will recognise, not trimmed of comments.
const MAX_LINES: usize = 400;

/// Test code is exempt: everything under `tests/`, and a module's tests in a file of
/// their own (`tests.rs`, or any file below a `tests` directory of `src/`).
fn is_test_file(path: &Path) -> bool {
    path.file_name().is_some_and(|name| name == "tests.rs")
        || path.components().any(|part| part.as_os_str() == "tests")
}

/// Every `.rs` file below `dir` with its line count, as `wc -l` counts them.
fn line_counts(dir: &Path, found: &mut Vec<(PathBuf, usize)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            line_counts(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            found.push((path, text.matches('\n').count()));
        }
    }
}

#[test]
fn no_program_source_file_over_the_limit() {
    let root = manifest("");
    let mut files = Vec::new();
    for dir in ["src", "cleaner/src", "allocator/src"] {
        line_counts(&manifest(dir), &mut files);
    }
    assert!(
        files.len() > 100,
        "read only {} files: the walk is broken",
        files.len()
    );
    let over: Vec<String> = files
        .iter()
        .filter(|(path, lines)| {
            *lines > MAX_LINES && !is_test_file(path.strip_prefix(&root).unwrap())
        })
        .map(|(path, lines)| format!("{} {lines}", path.strip_prefix(&root).unwrap().display()))
        .collect();
    assert!(
        over.is_empty(),
        "source files over {MAX_LINES} lines (split each along a seam):\n{}",
        over.join("\n")
    );
    // The exemption is for test files only: a program file of any name counts.
    assert!(is_test_file(Path::new("src/mutation/hook/tests.rs")));
    assert!(is_test_file(Path::new(
        "src/mutation/shell_fix/portable/tests/attacker_values.rs"
    )));
    assert!(!is_test_file(Path::new("src/mutation/inject/delivery.rs")));
    assert!(!is_test_file(Path::new("src/mutation/tests_of_scope.rs")));
}

/// The checker itself: a circle through a `use` group, `super::super`, a `#[path]` module
/// and a nested inline module is found, while test-only code, comments, strings and
/// references to the parent's own items are not edges.
#[test]
fn import_circle_is_found_and_test_code_is_not_one() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "pub mod a;\npub mod b;\n#[path = \"elsewhere.rs\"]\nmod c;\n",
    );
    write("a/mod.rs", "pub mod x;\npub mod y;\npub struct Item;\n");
    write("a/x.rs", "use super::{y::Thing, Item};\n");
    write(
        "a/y.rs",
        "pub struct Thing;\nmod deep { fn f() { let _ = super::super::x::g; } }\n",
    );
    write(
        "b.rs",
        "// crate::c::f\nconst S: &str = \"crate::c::f\";\n\
         #[cfg(test)]\nmod tests { use crate::c::f; }\npub fn g() {}\n",
    );
    write(
        "elsewhere.rs",
        "pub fn f() { crate::b::g(); let _ = r#\"crate::a::Item\"#; }\n",
    );
    let found = cycles(&dir.path().join("lib.rs"));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].starts_with("in a: x -> y ("), "{}", found[0]);
    assert!(found[0].contains(", y -> x ("), "{}", found[0]);

    // Outside test code, the same `use` closes a circle between b and c.
    write("b.rs", "use crate::c::f;\npub fn g() {}\n");
    let found = cycles(&dir.path().join("lib.rs"));
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].starts_with("in crate: b -> c ("), "{}", found[0]);
    assert!(found[1].starts_with("in a: x -> y ("), "{}", found[1]);
}
