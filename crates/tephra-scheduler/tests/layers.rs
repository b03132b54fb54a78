//! The scheduler core's layers, checked from its own source: every `crate::` and `super::` path
//! in `src/` (test modules aside) is an arrow from one file to another, and
//!
//! - no file reaches a layer above its own (bottom → framework → placement → plugins and
//!   actions → the registry in `lib.rs`);
//! - a plugin never names another plugin, an action never names another action, and plugins and
//!   actions never name each other;
//! - no files import each other in a circle.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layer of a module, by its first path segment (`""` is the crate root).
fn layer(module: &[String]) -> u8 {
    match module.first().map(String::as_str) {
        Some(
            "model" | "resources" | "quantity" | "duration" | "cache" | "config" | "decisions",
        ) => 0,
        Some("framework" | "testing") => 1,
        Some("placement") => 2,
        Some("plugins" | "actions") => 3,
        _ => 4,
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every source file with its module path (`src/a/b.rs` and `src/a/b/mod.rs` are `a::b`).
fn files(dir: &Path, out: &mut BTreeMap<Vec<String>, PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = path.strip_prefix(src()).unwrap();
        let mut module: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
            module.pop();
        }
        out.insert(module, path);
    }
}

/// The code of a file without comments and without its test modules.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let line = match line.find("//") {
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn ident_len(s: &str) -> usize {
    s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len())
}

/// The paths a piece of code names after `crate::` or `super::`, made absolute from `module`,
/// with `{a, b::c}` groups expanded one level.
fn paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(['c', 's']) {
        let here = &rest[i..];
        let before_ok = i == 0 || {
            let prev = rest[..i].chars().last().unwrap_or(' ');
            !(prev.is_ascii_alphanumeric() || prev == '_' || prev == ':')
        };
        let (mut base, mut tail) = if before_ok && here.starts_with("crate::") {
            (Vec::new(), &here["crate::".len()..])
        } else if before_ok && here.starts_with("super::") {
            let mut base = module.to_vec();
            let mut t = here;
            while let Some(r) = t.strip_prefix("super::") {
                base.pop();
                t = r;
            }
            (base, t)
        } else {
            rest = &rest[i + 1..];
            continue;
        };
        loop {
            let n = ident_len(tail);
            if n == 0 {
                break;
            }
            base.push(tail[..n].to_string());
            tail = &tail[n..];
            match tail.strip_prefix("::") {
                Some(t) => tail = t,
                None => break,
            }
        }
        if let Some(group) = tail.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let item = item.trim();
                let mut p = base.clone();
                p.extend(
                    item.split("::")
                        .map(|s| s[..ident_len(s)].to_string())
                        .filter(|s| !s.is_empty()),
                );
                out.push(p);
            }
        } else {
            out.push(base);
        }
        rest = &here[1..];
    }
    out
}

/// The file a path names: its longest prefix that is a module with a file.
fn target(path: &[String], files: &BTreeMap<Vec<String>, PathBuf>) -> Vec<String> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| files.contains_key(p))
        .unwrap_or_default()
}

fn name(module: &[String]) -> String {
    if module.is_empty() {
        "lib.rs".into()
    } else {
        module.join("::")
    }
}

#[test]
fn dependencies_point_one_way_and_no_file_is_in_a_circle() {
    let mut all = BTreeMap::new();
    files(&src(), &mut all);
    let mut arrows: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let mut wrong = Vec::new();
    for (module, path) in &all {
        for p in paths(&code(path), module) {
            let to = target(&p, &all);
            if &to == module {
                continue;
            }
            let (from_layer, to_layer) = (layer(module), layer(&to));
            if to_layer > from_layer {
                wrong.push(format!(
                    "{} (layer {from_layer}) names {} (layer {to_layer})",
                    name(module),
                    name(&to)
                ));
            }
            let top = |m: &[String]| m.first().cloned().unwrap_or_default();
            let is_leaf = |m: &[String]| m.len() > 1;
            if from_layer == 3 && to_layer == 3 && is_leaf(module) && is_leaf(&to) {
                let rule = if top(module) == top(&to) {
                    format!("one of {} never names another", top(module))
                } else {
                    "plugins and actions never name each other".to_string()
                };
                wrong.push(format!("{} names {}: {rule}", name(module), name(&to)));
            }
            arrows.entry(module.clone()).or_default().insert(to);
        }
    }
    // A circle is an arrow back into a file still on the walk.
    fn walk(
        at: &Vec<String>,
        arrows: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        on_walk: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
        circles: &mut Vec<String>,
    ) {
        if done.contains(at) {
            return;
        }
        if let Some(i) = on_walk.iter().position(|m| m == at) {
            let ring: Vec<String> = on_walk[i..].iter().map(|m| name(m)).collect();
            circles.push(format!("{} -> {}", ring.join(" -> "), name(at)));
            return;
        }
        on_walk.push(at.clone());
        for next in arrows.get(at).into_iter().flatten() {
            walk(next, arrows, on_walk, done, circles);
        }
        on_walk.pop();
        done.insert(at.clone());
    }
    let mut circles = Vec::new();
    let mut done = BTreeSet::new();
    for module in all.keys() {
        walk(module, &arrows, &mut Vec::new(), &mut done, &mut circles);
    }
    assert!(
        wrong.is_empty(),
        "arrows against the layers:\n{}",
        wrong.join("\n")
    );
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
    assert!(
        arrows.values().map(BTreeSet::len).sum::<usize>() > 100,
        "the check reads the crate's imports"
    );
}
