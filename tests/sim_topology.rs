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

/// Racks from node labels (`scheduler.topologyLabels`, as `tephra scheduler
/// --topology-labels`): three pools of four nodes, one switch label value each, and no
/// HyperNode objects; every hard gang runs under one switch.
#[test]
fn racks_discovered_from_node_labels_keep_hard_gangs_within_one_rack() {
    let pools: Vec<String> = (0..3)
        .map(|r| {
            format!(
                "{{name: r{r}, count: 4, labels: {{example.com/tor: tor-{r}}}, capacity: {{cpu: \"64\", memory: 512Gi, nvidia.com/gpu: \"8\"}}}}"
            )
        })
        .collect();
    let text = format!(
        r#"
fleet:
  clusters:
    - name: east
      nodePools: [{}]
queues: [{{name: ml, weight: 1}}]
scheduler: {{topologyLabels: [example.com/tor]}}
workload:
  generate:
    - count: 60
      arrival: {{poisson: {{perHour: 12}}}}
      queue: {{ml: 1}}
      template:
        name: train
        networkTopology: {{mode: hard, highestTierAllowed: 1}}
        tasks:
          - name: worker
            replicas: {{uniform: [2, 4]}}
            resources: {{cpu: "32", memory: 256Gi, nvidia.com/gpu: "8"}}
            duration: {{exponential: {{mean: 1h}}}}
run: {{seed: 5, podStartDelay: 5s}}
"#,
        pools.join(", ")
    );
    let (report, events) =
        run(&Scenario::parse(&text, "labels.yaml", &common::repo_root()).unwrap());
    assert_eq!(
        report.jobs.completed, 60,
        "{:?}",
        report.jobs.pending_reasons
    );
    let mut racks: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind == "bind") {
        let node = e.node.clone().unwrap();
        let rack = node.split('-').nth(1).unwrap().to_string();
        racks
            .entry(e.job.clone().unwrap())
            .or_default()
            .insert(rack);
    }
    assert_eq!(racks.len(), 60);
    assert!(racks.values().all(|r| r.len() == 1), "{racks:?}");
    let t = report.topology.expect("a topology section");
    assert_eq!(t.within_one_lowest_tier, t.gangs_started);
}

/// Fleet tiers (`scheduler.fleetTiers`, as `tephra scheduler --fleet-tiers`): gangs of three
/// whole nodes on a fleet of two-node clusters, allowed to split but held to one region, each
/// run over two clusters of one region.
#[test]
fn split_gangs_held_to_the_region_tier_stay_within_one_region() {
    let clusters: Vec<String> = [("e1", "east"), ("w1", "west"), ("e2", "east"), ("w2", "west")]
        .iter()
        .map(|(name, region)| {
            format!(
                "{{name: {name}, region: {region}, nodePools: [{{name: gpu, count: 2, capacity: {{cpu: \"64\", memory: 512Gi, nvidia.com/gpu: \"8\"}}}}]}}"
            )
        })
        .collect();
    let text = format!(
        r#"
fleet:
  clusters: [{}]
queues: [{{name: ml, weight: 1}}]
scheduler: {{fleetTiers: [region]}}
workload:
  generate:
    - count: 30
      arrival: {{poisson: {{perHour: 6}}}}
      queue: {{ml: 1}}
      template:
        name: train
        policy: {{splittable: true}}
        networkTopology: {{mode: hard, highestTierName: region}}
        tasks:
          - name: worker
            replicas: 3
            resources: {{cpu: "32", memory: 256Gi, nvidia.com/gpu: "8"}}
            duration: {{exponential: {{mean: 1h}}}}
run: {{seed: 9, podStartDelay: 5s}}
"#,
        clusters.join(", ")
    );
    let (report, events) =
        run(&Scenario::parse(&text, "regions.yaml", &common::repo_root()).unwrap());
    assert_eq!(
        report.jobs.completed, 30,
        "{:?}",
        report.jobs.pending_reasons
    );
    let mut clusters: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind == "bind") {
        let c = e.cluster.clone().unwrap();
        clusters
            .entry(e.job.clone().unwrap())
            .or_default()
            .insert(c);
    }
    for (job, used) in &clusters {
        let regions: BTreeSet<char> = used.iter().map(|c| c.chars().next().unwrap()).collect();
        assert_eq!(used.len(), 2, "{job} split over {used:?}");
        assert_eq!(regions.len(), 1, "{job} spans regions: {used:?}");
    }
}

/// A Volcano Job with a partitioned task, from a manifest: the job controller fills the
/// PodGroup's `subGroupPolicy` and labels each pod with its partition, and each partition runs
/// within one rack (racks of two nodes), though a job already holding the first node would make
/// filling nodes in order split both.
#[test]
fn each_partition_of_a_volcano_job_runs_within_one_rack() {
    let dir = std::env::temp_dir().join(format!("tephra-sim-partitions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let job = |name: &str, replicas: u32, partitions: &str| {
        format!(
            "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata:\n  name: {name}\n  annotations: {{tephra.io/sim-duration: 2h}}\nspec:\n  minAvailable: {replicas}\n  tasks:\n    - name: w\n      replicas: {replicas}\n{partitions}      template:\n        spec:\n          containers:\n            - {{name: c, image: busybox, resources: {{requests: {{cpu: \"8\", nvidia.com/gpu: \"8\"}}}}}}\n"
        )
    };
    let partitioned = "      partitionPolicy: {totalPartitions: 2, partitionSize: 2, minPartitions: 2, networkTopology: {mode: hard, highestTierAllowed: 1}}\n";
    std::fs::write(dir.join("blocker.yaml"), job("blocker", 1, "")).unwrap();
    std::fs::write(dir.join("llm.yaml"), job("llm", 4, partitioned)).unwrap();
    let text = r#"
fleet:
  clusters:
    - name: east
      nodePools: [{name: gpu, count: 8, capacity: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}]
      topology: {tiers: [{name: rack, size: 2}]}
workload: {manifests: [blocker.yaml, llm.yaml]}
run: {seed: 1, podStartDelay: 5s}
"#;
    let (report, events) = run(&Scenario::parse(text, "partitions.yaml", &dir).unwrap());
    assert_eq!(
        report.jobs.completed, 2,
        "{:?}",
        report.jobs.pending_reasons
    );
    // Pods llm-w-0 and llm-w-1 are partition 0, llm-w-2 and llm-w-3 partition 1.
    let mut racks: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind == "bind") {
        let Some(i) = e
            .pod
            .as_deref()
            .and_then(|p| p.strip_prefix("default/llm-w-"))
        else {
            continue;
        };
        let node: usize = e
            .node
            .as_deref()
            .unwrap()
            .strip_prefix("east-gpu-")
            .unwrap()
            .parse()
            .unwrap();
        racks
            .entry(i.parse::<usize>().unwrap() / 2)
            .or_default()
            .insert(node / 2);
    }
    assert_eq!(racks.len(), 2, "{racks:?}");
    assert!(
        racks.values().all(|r| r.len() == 1),
        "a partition spans racks: {racks:?}"
    );
}
