//! The workspace's layers, checked from the source: every `crate::` and `super::` path in a
//! crate's `src/` (test modules aside) is an arrow from one file to another, and
//!
//! - in no crate do files import each other in a circle (`tephra-api`, `-scheduler`,
//!   `-controllers`, `-kube`, `-sim`, `-devcluster`, `-extender` and the binary alike);
//! - in the scheduler core, no file reaches a layer above its own (bottom → framework →
//!   placement → plugins and actions → the registry in `lib.rs`), a plugin never names another
//!   plugin, an action never names another action, and plugins and actions never name each
//!   other;
//! - in the job controller, a job plugin never names another plugin, nor the controller's pass;
//! - `tephra-index`, the runtime's pure index and planner, builds no async runtime, no
//!   Kubernetes client and no network crate (read from `cargo tree`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layer of a scheduler module, by its first path segment (`""` is the crate root).
fn layer(module: &[String]) -> u8 {
    match module.first().map(String::as_str) {
        Some(
            "model" | "resources" | "quantity" | "duration" | "cache" | "config" | "decisions"
            | "hash",
        ) => 0,
        Some("framework" | "testing") => 1,
        Some("placement") => 2,
        Some("plugins" | "actions") => 3,
        _ => 4,
    }
}

/// Every crate of the workspace with its `src/` (the root package has none).
fn crates() -> Vec<(String, PathBuf)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src").is_dir())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                p.join("src"),
            )
        })
        .collect();
    out.sort();
    out
}

/// Every source file under `src` with its module path (`src/a/b.rs` and `src/a/b/mod.rs`
/// are `a::b`; `main.rs` is the root as `lib.rs` is). A binary's `main.rs` beside a `lib.rs`
/// is a crate of its own, and left out.
fn files(src: &Path, dir: &Path, out: &mut BTreeMap<Vec<String>, PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if dir == src && path.file_name().is_some_and(|n| n == "bin") {
                continue;
            }
            files(src, &path, out);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        if dir == src
            && path.file_name().is_some_and(|n| n == "main.rs")
            && src.join("lib.rs").exists()
        {
            continue;
        }
        let rel = path.strip_prefix(src).unwrap();
        let mut module: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        if matches!(
            module.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
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

/// A crate's files and the arrows between them (a file naming itself is no arrow).
type Graph = (
    BTreeMap<Vec<String>, PathBuf>,
    BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
);

fn graph(src: &Path) -> Graph {
    let mut all = BTreeMap::new();
    files(src, src, &mut all);
    let mut arrows: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, path) in &all {
        for p in paths(&code(path), module) {
            let to = target(&p, &all);
            if &to != module {
                arrows.entry(module.clone()).or_default().insert(to);
            }
        }
    }
    (all, arrows)
}

/// Every circle: an arrow back into a file still on the walk.
fn circles(
    all: &BTreeMap<Vec<String>, PathBuf>,
    arrows: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
) -> Vec<String> {
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
    let mut out = Vec::new();
    let mut done = BTreeSet::new();
    for module in all.keys() {
        walk(module, arrows, &mut Vec::new(), &mut done, &mut out);
    }
    out
}

fn src_of(krate: &str) -> PathBuf {
    crates()
        .into_iter()
        .find(|(n, _)| n == krate)
        .map(|(_, p)| p)
        .unwrap_or_else(|| panic!("no crate {krate}"))
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut found = Vec::new();
    let mut read = 0;
    for (krate, src) in crates() {
        let (all, arrows) = graph(&src);
        read += arrows.values().map(BTreeSet::len).sum::<usize>();
        found.extend(
            circles(&all, &arrows)
                .into_iter()
                .map(|c| format!("{krate}: {c}")),
        );
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
    assert!(
        read > 500,
        "the check reads the crates' imports ({read} arrows)"
    );
}

#[test]
fn the_scheduler_cores_dependencies_point_one_way() {
    let (_, arrows) = graph(&src_of("tephra-scheduler"));
    let mut wrong = Vec::new();
    for (module, targets) in &arrows {
        for to in targets {
            let (from_layer, to_layer) = (layer(module), layer(to));
            if to_layer > from_layer {
                wrong.push(format!(
                    "{} (layer {from_layer}) names {} (layer {to_layer})",
                    name(module),
                    name(to)
                ));
            }
            let top = |m: &[String]| m.first().cloned().unwrap_or_default();
            let is_leaf = |m: &[String]| m.len() > 1;
            if from_layer == 3 && to_layer == 3 && is_leaf(module) && is_leaf(to) {
                let rule = if top(module) == top(to) {
                    format!("one of {} never names another", top(module))
                } else {
                    "plugins and actions never name each other".to_string()
                };
                wrong.push(format!("{} names {}: {rule}", name(module), name(to)));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "arrows against the layers:\n{}",
        wrong.join("\n")
    );
    assert!(
        arrows.values().map(BTreeSet::len).sum::<usize>() > 100,
        "the check reads the crate's imports"
    );
}

#[test]
fn a_job_plugin_names_no_other_plugin_nor_the_controllers_pass() {
    let (all, arrows) = graph(&src_of("tephra-controllers"));
    let plugins: Vec<&Vec<String>> = all
        .keys()
        .filter(|m| m.len() == 3 && m[0] == "job" && m[1] == "plugins")
        .collect();
    // What every plugin may use: the trait and what plugins share.
    let vocabulary = ["plugin", "shared", "ssh_key"];
    assert!(plugins.len() >= 5, "{plugins:?}");
    let mut wrong = Vec::new();
    for p in &plugins {
        for to in arrows.get(*p).into_iter().flatten() {
            let other_plugin =
                to.len() == 3 && to[..2] == p[..2] && !vocabulary.contains(&to[2].as_str());
            let pass = to.len() >= 2 && to[0] == "job" && to[1] == "reconcile";
            let registry = to.len() == 2 && to[..2] == p[..2];
            if other_plugin || pass || registry {
                wrong.push(format!("{} names {}", name(p), name(to)));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The packages a build of `krate` alone compiles (normal dependencies, features as that
/// build resolves them), by name, as `cargo tree` lists them from the lock file.
fn build_closure(krate: &str) -> BTreeSet<String> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            krate,
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(String::from)
        .collect()
}

#[test]
fn the_index_reaches_no_async_runtime_no_kubernetes_client_and_no_network() {
    let built = build_closure("tephra-index");
    assert!(
        built.contains("tephra-scheduler"),
        "the closure is read: {built:?}"
    );
    let io: Vec<&String> = built
        .iter()
        .filter(|name| {
            matches!(
                name.as_str(),
                "tokio"
                    | "futures"
                    | "kube-client"
                    | "kube-runtime"
                    | "hyper"
                    | "hyper-util"
                    | "reqwest"
                    | "rustls"
                    | "mio"
                    | "tephra-kube"
            )
        })
        .collect();
    assert!(
        io.is_empty(),
        "tephra-index must stay pure (no IO, no async runtime, no client); it builds {io:?}"
    );
    // The runtime does reach them: the check can fail.
    assert!(build_closure("tephra-kube").contains("tokio"));
}
