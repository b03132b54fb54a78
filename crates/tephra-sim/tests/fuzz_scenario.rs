//! Fuzzing of the scenario reader (`Scenario::parse`) with proptest: arbitrary text, and
//! byte-level mutations of the seed corpus in `tests/fuzz-seeds/scenarios/` (shipped scenarios,
//! sizes past the limits, exponentially expanding aliases). The property: the reader returns
//! a scenario or an error, never panics, and a scenario it returns is within the size limits.
//!
//! `TEPHRA_FUZZ_CASES` sets the cases per property (default 256); README's Development section
//! records the long runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use tephra_scheduler::testing::{Edit, mutate};
use tephra_sim::Scenario;
use tephra_sim::scenario::check::MAX_NODES;

fn config() -> ProptestConfig {
    let cases = std::env::var("TEPHRA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn seeds_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-seeds/scenarios")
}

fn seeds() -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(seeds_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// Reads a scenario; one that is accepted must be within the size limits.
fn reads(text: &[u8]) {
    let text = String::from_utf8_lossy(text);
    if let Ok(s) = Scenario::parse(&text, "fuzz.yaml", &seeds_dir()) {
        let nodes: u64 = s
            .fleet
            .clusters
            .iter()
            .flat_map(|c| &c.node_pools)
            .map(|p| p.count as u64)
            .sum();
        assert!(nodes <= MAX_NODES, "{nodes} nodes accepted");
    }
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..16)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_is_a_scenario_or_an_error(text in any::<Vec<u8>>()) {
        reads(&text);
    }

    #[test]
    fn mutated_seed_scenarios_are_a_scenario_or_an_error(
        pick in any::<prop::sample::Index>(), edits in edits()
    ) {
        let seeds = seeds();
        reads(&mutate(&seeds[pick.index(seeds.len())].1, &edits));
    }

    #[test]
    fn scenario_shaped_numbers_are_read_or_refused(
        count in any::<u64>(), replicas in any::<u64>(), qty in "[0-9]{1,20}(|Ki|Pi|Ei|e[0-9]{1,3})"
    ) {
        let text = format!(
            "fleet:\n  clusters:\n    - name: a\n      nodePools:\n        - {{name: p, count: {count}, capacity: {{cpu: \"{qty}\", memory: {qty}}}}}\nworkload:\n  jobs:\n    - {{name: j, tasks: [{{name: w, replicas: {replicas}, resources: {{memory: {qty}}}, duration: 1h}}]}}\n"
        );
        reads(text.as_bytes());
    }
}

#[test]
fn every_seed_is_read_without_panicking() {
    for (path, bytes) in seeds() {
        let start = std::time::Instant::now();
        reads(&bytes);
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "{}",
            path.display()
        );
    }
}

#[test]
fn shipped_scenarios_in_the_seed_corpus_still_parse() {
    for (path, bytes) in seeds() {
        let name = path.file_name().unwrap().to_string_lossy();
        if name == "limits.yaml" || name == "aliases.yaml" {
            continue;
        }
        Scenario::parse(&String::from_utf8_lossy(&bytes), &name, &seeds_dir())
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
