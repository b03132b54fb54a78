//! Helpers shared by the cross-crate tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The repository root (the workspace root package's directory).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `*.yaml` files directly inside `dir`, sorted.
pub fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// Every YAML document in a file, as JSON values (what kubectl sends to the API server).
pub fn yaml_documents(path: &Path) -> Vec<Value> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text)
        .unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// The `# expect: <text>` lines of a manifest meant to be refused: what the refusal must say.
pub fn expectations(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let expected: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# expect: "))
        .map(str::to_string)
        .collect();
    assert!(
        !expected.is_empty(),
        "{} has no `# expect:` line",
        path.display()
    );
    expected
}

/// Runs `s` (with `seed`, else its own) to its end: the report and every event.
pub fn simulate(
    s: &tephra_sim::Scenario,
    seed: Option<u64>,
) -> (tephra_sim::Report, Vec<tephra_sim::Record>) {
    let mut events = Vec::new();
    let report = tephra_sim::run(
        s,
        tephra_sim::RunOptions {
            seed,
            ..tephra_sim::RunOptions::default()
        },
        &mut |r| events.push(r.clone()),
        &mut |_| {},
    )
    .unwrap();
    (report, events)
}

/// A simulation's checker found nothing wrong and no job was lost.
pub fn assert_clean(r: &tephra_sim::Report) {
    let i = &r.invariants;
    assert_eq!(
        (
            i.node_overcommits,
            i.partial_gangs,
            i.gangs_split_across_clusters,
            i.policy_violations,
            i.gpu_overcommits
        ),
        (0, 0, 0, 0, 0),
        "checker found violations: {:?}",
        r.violations
    );
    assert_eq!(r.jobs.lost, 0, "jobs lost");
    let f = &r.failover;
    assert_eq!(f.lost_jobs, 0, "jobs lost to failover: {:?}", f.faults);
    assert_eq!(
        f.duplicate_beyond_grace_s, 0.0,
        "two copies of a gang ran beyond the grace period: {:?}",
        f.faults
    );
}
