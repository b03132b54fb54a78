//! Network topology in the simulator: a fleet declares racks and spines (`topology.tiers`),
//! jobs declare `networkTopology`, and every hard gang's pods land within one rack; the report
//! measures the share of gangs within one rack, which the same stream without networkTopology
//! does not reach.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::assert_clean;
use tephra_sim::{Record, Report, Scenario};

/// One cluster of 24 8-GPU nodes in racks of 4 under spines of 3 racks, and a stream of
/// gangs of 2 to 4 whole nodes with `topology` (a YAML mapping, or empty).
fn scenario(topology: &str) -> Scenario {
    let nt = if topology.is_empty() {
        String::new()
    } else {
        format!("\n        networkTopology: {topology}")
    };
    let text = format!(
        r#"
fleet:
  clusters:
    - name: east
      nodePools: [{{name: gpu, count: 24, capacity: {{cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}}}]
      topology:
        tiers: [{{name: rack, size: 4}}, {{name: spine, size: 3}}]
queues: [{{name: ml, weight: 1}}]
workload:
  generate:
    - count: 120
      arrival: {{poisson: {{perHour: 12}}}}
      queue: {{ml: 1}}
      template:
        name: train{nt}
        tasks:
          - name: worker
            replicas: {{uniform: [2, 4]}}
            resources: {{cpu: "32", memory: 256Gi, nvidia.com/gpu: "8"}}
            duration: {{exponential: {{mean: 1h}}}}
run: {{seed: 3, podStartDelay: 5s}}
"#
    );
    Scenario::parse(&text, "topology.yaml", &common::repo_root()).unwrap()
}

fn run(s: &Scenario) -> (Report, Vec<Record>) {
    let (report, events) = common::simulate(s, None);
    assert_clean(&report);
    (report, events)
}

/// The racks each job's pods were bound in (nodes `east-gpu-<i>`, rack `i / 4`), over the run.
fn racks_by_job(events: &[Record]) -> BTreeMap<String, BTreeSet<usize>> {
    let mut out: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind == "bind") {
        let i: usize = e
            .node
            .as_deref()
            .and_then(|n| n.strip_prefix("east-gpu-"))
            .and_then(|i| i.parse().ok())
            .unwrap();
        out.entry(e.job.clone().unwrap()).or_default().insert(i / 4);
    }
    out
}

#[test]
fn every_hard_gang_runs_within_one_rack_and_the_report_says_so() {
    let (report, events) = run(&scenario("{mode: hard, highestTierAllowed: 1}"));
    assert_eq!(
        report.jobs.completed, 120,
        "{:?}",
        report.jobs.pending_reasons
    );
    for (job, racks) in racks_by_job(&events) {
        assert_eq!(racks.len(), 1, "{job} spans racks {racks:?}");
    }
    let t = report.topology.expect("a topology section");
    assert_eq!(t.gangs_started, 120);
    assert_eq!(t.within_one_lowest_tier, 120);
}

#[test]
fn without_network_topology_the_same_stream_spans_racks() {
    let (report, events) = run(&scenario(""));
    assert_eq!(report.jobs.completed, 120);
    let spread = racks_by_job(&events)
        .values()
        .filter(|r| r.len() > 1)
        .count();
    assert!(
        spread > 0,
        "no gang spanned racks: the check above could not fail"
    );
    let t = report.topology.expect("a topology section");
    assert_eq!(t.gangs_started, 120);
    assert!(t.within_one_lowest_tier < 120, "{t:?}");
}

#[test]
fn a_tier_of_size_zero_is_refused_naming_the_field() {
    let text = r#"
fleet:
  clusters:
    - name: east
      nodePools: [{name: gpu, count: 2, capacity: {cpu: "8"}}]
      topology: {tiers: [{name: rack, size: 0}]}
queues: [{name: ml, weight: 1}]
"#;
    let err = Scenario::parse(text, "bad.yaml", &common::repo_root())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("fleet.clusters[0] (east).topology.tiers[0].size"),
        "{err}"
    );
}

/// The two shipped scenarios README compares are the same stream, with and without
/// networkTopology.
#[test]
fn the_shipped_topology_scenarios_differ_only_in_network_topology() {
    let load = |f: &str| Scenario::load(&common::repo_root().join("examples/sim").join(f)).unwrap();
    let (with, without) = (load("topology.yaml"), load("topology-ignored.yaml"));
    assert_eq!(with.fleet.clusters.len(), 4);
    for c in with.fleet.clusters.iter().chain(&without.fleet.clusters) {
        assert_eq!(c.topology.as_ref().unwrap().tiers.len(), 2, "{}", c.name);
    }
    let gens = |s: &Scenario| s.workload.generate.len();
    assert_eq!(gens(&with), gens(&without));
    for (a, b) in with
        .workload
        .generate
        .iter()
        .zip(&without.workload.generate)
    {
        assert!(a.template.network_topology.is_some());
        assert!(b.template.network_topology.is_none());
        assert_eq!((a.count, &a.queue), (b.count, &b.queue));
    }
}
