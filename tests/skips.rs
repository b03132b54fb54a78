//! A test that cannot run says so where the runner shows it. `cargo test` captures what a
//! passing test prints with `eprintln!`, so a skip printed that way reports a plain `ok`;
//! skips go through `tephra_envtest::skip` (or write `SKIPPED` to standard error directly),
//! and `.ci/run` fails when a test it installs tools for printed one.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if p.is_dir() && !matches!(name, "target" | "node_modules" | ".git") {
            sources(&p, out);
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_test_prints_its_skip_where_the_runner_hides_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("crates"), &mut files);
    sources(&root.join("tests"), &mut files);
    assert!(files.len() > 100, "{} files", files.len());
    let mut hidden = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for (i, line) in text.lines().enumerate() {
            let l = line.to_lowercase();
            let printed = l.trim_start().starts_with("eprintln!(");
            if printed && (l.contains("\"skip") || l.contains("; skipped")) {
                hidden.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        hidden.is_empty(),
        "skips printed with eprintln! (hidden for a passing test):\n{}",
        hidden.join("\n")
    );
}

#[test]
fn ci_fails_when_a_test_it_installs_tools_for_skipped() {
    let run = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run"))
        .unwrap_or_default();
    assert!(
        run.contains("grep -E '^SKIPPED' \"$log\""),
        ".ci/run must read the SKIPPED lines of the test run"
    );
    let skip = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/tephra-envtest/src/components.rs"),
    )
    .unwrap_or_default();
    assert!(
        skip.contains("\"SKIPPED (passes without running): {why}\""),
        "tephra_envtest::skip prints the line .ci/run looks for"
    );
}
