//! The web UI in a real browser (issue 33): `tests/ui/browser.mjs` drives Debian's Chromium,
//! headless, with playwright-core against a running `tephra dev`: every page loads, a job that
//! runs and one that can never fit show with the right state and reason, a link leads to the
//! filtered jobs, a job applied while the page is open appears without a reload, a job waiting
//! behind jobs expected to run 30 minutes is expected in about 30 minutes (and on its own page,
//! with its history), a queue's GPUs are charted over time from the replica's start, a member's
//! outage shows on the failover timeline, jobs are keyed by the Volcano Job's own name, and a
//! finished job stays listed with the member it ran in.
//! Screenshots go to `target/ui-screenshots/` (CI keeps them as artefacts).
//!
//! Needs `chromium`, `node` and `tests/ui/node_modules` (`npm ci --prefix tests/ui`); `.ci/run`
//! installs them. Without them the test prints a `SKIPPED` line and passes, except under CI
//! (`CI` set), where it fails.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether `program` runs (`--version`).
fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// What is missing to run the browser test, if anything.
fn missing(repo: &Path) -> Vec<&'static str> {
    let mut out = Vec::new();
    if !Path::new(&std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()))
        .exists()
    {
        out.push("chromium (apt-get install chromium)");
    }
    if !runs("node") {
        out.push("node");
    }
    if !repo.join("tests/ui/node_modules/playwright-core").exists() {
        out.push("playwright-core (npm ci --prefix tests/ui)");
    }
    out
}

#[test]
fn the_ui_pages_show_a_running_job_and_one_that_cannot_fit_in_chromium() {
    let repo = repo();
    let missing = missing(&repo);
    if !missing.is_empty() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the browser test needs {}",
            missing.join(", ")
        );
        tephra_envtest::skip(&format!("the browser test needs {}", missing.join(", ")));
        return;
    }
    let shots = repo.join("target/ui-screenshots");
    let out = Command::new("node")
        .arg(repo.join("tests/ui/browser.mjs"))
        .arg(env!("CARGO_BIN_EXE_tephra"))
        .arg(&shots)
        .current_dir(&repo)
        .output()
        .expect("node runs");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    println!("{text}");
    assert!(out.status.success(), "browser checks failed:\n{text}");
    for page in [
        "jobs",
        "jobs-dark",
        "queues",
        "clusters",
        "jobs-eta",
        "job",
        "queue-chart",
        "failover",
    ] {
        assert!(
            shots.join(format!("{page}.png")).exists(),
            "no screenshot of {page}"
        );
    }
}
