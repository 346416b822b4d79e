//! No import cycles between the crate's modules: a test that reads the `crate::`, `super::` and
//! `$crate::` paths of every file under `src/` and fails when sibling modules import one
//! another, directly or around a ring (CONTRIBUTING.md, "No import cycles", says why a test and
//! not a tool).
//!
//! The rule, at every level of the tree: the children of one module (`client`'s `http1`,
//! `transport`, `reply`...; the crate's `client`, `limits`, `campaign`...) must not form a
//! cycle, counting a path into a child's descendants as a path into that child. A module using
//! its parent or its own children is not a cycle (a `mod.rs` re-exporting its files, a file
//! naming `super::Thing`). Test code (`#[cfg(test)]` items and test-only modules) is left out:
//! a test may import what it checks from anywhere.
//!
//! It reads paths as text, after comments and string literals are blanked, so it sees the
//! `use` lines and the paths written inline (`crate::masking::mask_phone(..)`); a name reached
//! through a re-export counts as the module that re-exports it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module path (`["client", "http1"]`) -> its source, comments and strings blanked.
type Sources = BTreeMap<Vec<String>, String>;

#[test]
fn sibling_modules_never_import_each_other_in_a_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let sources = read_tree(&root);
    let found: BTreeMap<String, Vec<String>> = cycles(&sources);
    let complaints: Vec<String> = found
        .iter()
        .map(|(cycle, edges)| {
            format!(
                "a cycle between sibling modules: {cycle}\n    {}",
                edges.join("\n    ")
            )
        })
        .collect();
    assert!(
        complaints.is_empty(),
        "move the item that closes each cycle to the module it belongs in (a leaf, or the \
         lower of the two):\n\n{}",
        complaints.join("\n\n")
    );
}

#[test]
fn the_reader_sees_use_trees_inline_paths_and_test_code_as_such() {
    let text = blank(
        "use super::{a::X, b::{self, Y}};\n// crate::c::Z\nfn f() { crate::d::g(\"crate::e\"); }\n\
         #[cfg(test)]\nmod tests { use crate::f::W; }\n#[cfg(test)]\nmod helpers;\n",
    );
    let (kept, test_modules) = without_test_code(&text);
    assert_eq!(test_modules, vec!["helpers".to_owned()]);
    let paths: Vec<String> = paths(&kept).iter().map(|p| p.join("::")).collect();
    assert_eq!(
        paths,
        [
            "super::a::X",
            "super::b::self",
            "super::b::Y",
            "crate::d::g"
        ]
    );
}

/// Every module of the tree under `root`, test-only ones left out.
fn read_tree(root: &Path) -> Sources {
    let mut files = Vec::new();
    walk(root, &mut files);
    let mut sources = Sources::new();
    let mut test_only = BTreeSet::new();
    for file in files {
        let relative = file.strip_prefix(root).unwrap().with_extension("");
        let mut module: Vec<String> = relative
            .iter()
            .map(|part| part.to_string_lossy().into_owned())
            .collect();
        if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
            module.pop();
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let (kept, tests) = without_test_code(&blank(&text));
        for name in tests {
            let mut path = module.clone();
            path.push(name);
            test_only.insert(path);
        }
        sources.insert(module, kept);
    }
    sources.retain(|module, _| !test_only.iter().any(|test| module.starts_with(test)));
    sources
}

fn walk(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// `text` with comments, string literals and character literals blanked (newlines kept), so
/// that only code is read.
fn blank(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&chars, i) {
            // A raw string: r"..." or r#"..."#, closed by the same number of hashes.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            while j < chars.len() {
                if chars[j] == '"' && (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && (chars.get(i + 2) == Some(&'\'') || next == Some('\\')) {
            // A character literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i.checked_sub(1)
        .and_then(|before| chars.get(before))
        .is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

/// `text` without its `#[cfg(test)]` items, and the names of the test-only modules declared
/// by it (`#[cfg(test)] mod name;`).
fn without_test_code(text: &str) -> (String, Vec<String>) {
    const MARK: &str = "#[cfg(test)]";
    let mut kept = String::new();
    let mut modules = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        kept.push_str(&rest[..at]);
        let item = &rest[at + MARK.len()..];
        let semicolon = item.find(';');
        let brace = item.find('{');
        let end = match (semicolon, brace) {
            (Some(s), b) if b.is_none_or(|b| s < b) => {
                let declared = item[..s].trim();
                if let Some(name) = declared.rsplit(' ').next() {
                    if declared.split_whitespace().any(|word| word == "mod") {
                        modules.push(name.to_owned());
                    }
                }
                s + 1
            }
            (_, Some(b)) => {
                let mut depth = 0;
                let mut end = item.len();
                for (offset, c) in item[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + offset + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            _ => item.len(),
        };
        rest = &item[end..];
    }
    kept.push_str(rest);
    (kept, modules)
}

/// Every path that starts at `crate`, `$crate` or `super`, use trees expanded.
fn paths(text: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_path = !ident_before(&chars, i)
            && ["crate::", "super::"]
                .iter()
                .any(|head| chars[i..].iter().take(head.len()).copied().eq(head.chars()));
        if starts_path {
            i = read_path(&chars, i, Vec::new(), &mut found);
        } else {
            i += 1;
        }
    }
    found
}

/// Reads one path (or use tree) from `i`, after the segments in `prefix`; returns where it
/// ended.
fn read_path(
    chars: &[char],
    mut i: usize,
    mut prefix: Vec<String>,
    found: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        while chars.get(i).is_some_and(|c| c.is_whitespace()) {
            i += 1;
        }
        if chars.get(i) == Some(&'{') {
            i += 1;
            loop {
                i = read_path(chars, i, prefix.clone(), found);
                while chars.get(i).is_some_and(|c| c.is_whitespace() || *c == ',') {
                    i += 1;
                }
                match chars.get(i) {
                    Some('}') => return i + 1,
                    None => return i,
                    _ => {}
                }
            }
        }
        let start = i;
        while chars
            .get(i)
            .is_some_and(|c| c.is_alphanumeric() || *c == '_')
        {
            i += 1;
        }
        if i > start {
            prefix.push(chars[start..i].iter().collect());
        }
        if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
            i += 2;
        } else {
            if !prefix.is_empty() {
                found.push(prefix);
            }
            return i;
        }
    }
}

/// The module a path written in `module` names: the longest known module it starts with.
fn target(sources: &Sources, module: &[String], path: &[String]) -> Vec<String> {
    let mut base: Vec<String> = Vec::new();
    let mut segments = path.iter().peekable();
    if segments.peek().is_some_and(|s| *s == "crate") {
        segments.next();
    } else {
        base = module.to_vec();
        while segments.peek().is_some_and(|s| *s == "super") {
            segments.next();
            base.pop();
        }
    }
    for segment in segments {
        let mut deeper = base.clone();
        deeper.push(segment.clone());
        if sources.contains_key(&deeper) {
            base = deeper;
        } else {
            break;
        }
    }
    base
}

/// Each cycle among the children of one module, as `parent: a, b` -> the paths that make it.
fn cycles(sources: &Sources) -> BTreeMap<String, Vec<String>> {
    // parent -> child -> child it imports -> an example ("file: path").
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeMap<String, String>>> =
        BTreeMap::new();
    for (module, text) in sources {
        for path in paths(text) {
            let to = target(sources, module, &path);
            let common = module.iter().zip(&to).take_while(|(a, b)| a == b).count();
            let (Some(from_child), Some(to_child)) = (module.get(common), to.get(common)) else {
                continue; // a parent, a descendant, or itself
            };
            let example = format!("{} uses {}", shown(module), path.join("::"));
            graphs
                .entry(module[..common].to_vec())
                .or_default()
                .entry(from_child.clone())
                .or_default()
                .entry(to_child.clone())
                .or_insert(example);
        }
    }
    let mut found = BTreeMap::new();
    for (parent, graph) in &graphs {
        for component in strongly_connected(graph) {
            let name = format!(
                "{}: {}",
                shown(parent),
                component.iter().cloned().collect::<Vec<_>>().join(", ")
            );
            let edges = component
                .iter()
                .flat_map(|from| {
                    graph[from]
                        .iter()
                        .filter(|(to, _)| component.contains(*to))
                        .map(move |(to, example)| format!("{from} -> {to}: {example}"))
                })
                .collect();
            found.insert(name, edges);
        }
    }
    found
}

fn shown(module: &[String]) -> String {
    std::iter::once("crate")
        .chain(module.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("::")
}

/// The components of more than one node (Kosaraju: small graphs, plain recursion).
fn strongly_connected(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<BTreeSet<String>> {
    fn visit<'a>(
        node: &'a str,
        edges: &BTreeMap<&'a str, Vec<&'a str>>,
        seen: &mut BTreeSet<&'a str>,
        out: &mut Vec<&'a str>,
    ) {
        if !seen.insert(node) {
            return;
        }
        for next in edges.get(node).into_iter().flatten() {
            visit(next, edges, seen, out);
        }
        out.push(node);
    }
    let mut forward: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut backward: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, tos) in graph {
        for to in tos.keys() {
            forward.entry(from).or_default().push(to);
            backward.entry(to).or_default().push(from);
        }
    }
    let nodes: BTreeSet<&str> = forward.keys().chain(backward.keys()).copied().collect();
    let (mut seen, mut order) = (BTreeSet::new(), Vec::new());
    for node in &nodes {
        visit(node, &forward, &mut seen, &mut order);
    }
    let mut assigned = BTreeSet::new();
    let mut components = Vec::new();
    for node in order.into_iter().rev() {
        let mut component = Vec::new();
        visit(node, &backward, &mut assigned, &mut component);
        if component.len() > 1 {
            components.push(component.into_iter().map(str::to_owned).collect());
        }
    }
    components
}
