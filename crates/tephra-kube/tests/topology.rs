//! Network-topology-aware gangs on the devcluster over real HTTP: HyperNodes written as a Volcano
//! user writes them (by name, by pattern, a spine over racks), and a Volcano Job with
//! `networkTopology: {mode: hard, highestTierAllowed: 1}` placed whole within one rack; when no
//! rack has room it waits, and its PodGroup says which tier and the best rack's shortfall. A
//! Job with a partitioned task has each partition placed whole within one rack; a `soft` one
//! runs across racks when no rack holds it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use common::*;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tephra_api::scheduling::PodGroupConditionType;
use tephra_api::{HyperNode, Job};

fn hypernode(doc: Value) -> HyperNode {
    serde_json::from_value(doc).expect("a HyperNode as Volcano's guide writes it")
}

/// A Job of `replicas` pods of 4 CPUs, all needed, within one tier-1 HyperNode.
fn job(name: &str, replicas: u32) -> Job {
    job_in(name, replicas, "hard")
}

/// [`job`] with `networkTopology.mode` `mode`.
fn job_in(name: &str, replicas: u32, mode: &str) -> Job {
    let mut job = cpu_job(name, replicas, "4");
    job.spec.network_topology =
        Some(serde_json::from_value(json!({"mode": mode, "highestTierAllowed": 1})).unwrap());
    job
}

/// Creates [`job`] `name` of `replicas` pods and waits until all are bound: their nodes.
async fn run_job(c: &kube::Client, jobs: &Api<Job>, name: &str, replicas: u32) -> BTreeSet<String> {
    jobs.create(&PostParams::default(), &job(name, replicas))
        .await
        .unwrap();
    let bound = all_bound(c, "default", &format!("{name}-t0-"), replicas as usize, 30).await;
    bound.into_values().flatten().collect()
}

/// Tier-1 HyperNodes, each `(name, pattern)` holding the nodes whose names match.
async fn racks_by_pattern(hns: &Api<HyperNode>, racks: &[(&str, &str)]) {
    for (name, pattern) in racks {
        hns.create(
            &PostParams::default(),
            &hypernode(json!({"apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode", "metadata": {"name": name},
                "spec": {"tier": 1, "members": [
                    {"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}]}})),
        )
        .await
        .expect("HyperNode created");
    }
}

/// Racks s0 (n0 and n1, by name) and s1 (n2 and n3, by pattern) under the spine s2, as
/// Volcano's guide writes them.
async fn racks_under_a_spine(hns: &Api<HyperNode>) {
    for doc in [
        json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": "s0"},
            "spec": {"tier": 1, "members": [
                {"type": "Node", "selector": {"exactMatch": {"name": "n0"}}},
                {"type": "Node", "selector": {"exactMatch": {"name": "n1"}}}]}}),
        json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": "s1"},
            "spec": {"tier": 1, "members": [
                {"type": "Node", "selector": {"regexMatch": {"pattern": "^n[23]$"}}}]}}),
        json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": "s2"},
            "spec": {"tier": 2, "members": [
                {"type": "HyperNode", "selector": {"exactMatch": {"name": "s0"}}},
                {"type": "HyperNode", "selector": {"exactMatch": {"name": "s1"}}}]}}),
    ] {
        hns.create(&PostParams::default(), &hypernode(doc))
            .await
            .expect("HyperNode created");
    }
}

on_both!(
    a_hard_topology_job_runs_within_one_rack_and_the_next_waits_saying_why,
    a_hard_topology_job_runs_within_one_rack_and_the_next_waits_saying_why
);
async fn a_hard_topology_job_runs_within_one_rack_and_the_next_waits_saying_why(backend: Backend) {
    logs();
    // Four 8-CPU nodes: racks s0 (n0, n1) and s1 (n2, n3) under spine s2.
    let nodes = (0..4).map(|i| node(&format!("n{i}"), "8", 0)).collect();
    let Some(cl) = cluster_on(backend, nodes).await else {
        return;
    };
    let c = cl.client.clone();
    let hns: Api<HyperNode> = Api::all(c.clone());
    racks_under_a_spine(&hns).await;
    // Volcano's CRD refuses a selector with two matches, naming the rule.
    let both = hypernode(json!({"apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode", "metadata": {"name": "bad"},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {
            "exactMatch": {"name": "n0"}, "regexMatch": {"pattern": "n"}}}]}}));
    let refused = hns.create(&PostParams::default(), &both).await.unwrap_err();
    assert!(
        refused.to_string().contains("Only one of ExactMatch"),
        "{refused}"
    );
    let (sched, ctl) = start_everything(&c).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let rack = |nodes: &BTreeSet<String>| -> &'static str {
        if nodes.iter().all(|n| n == "n0" || n == "n1") {
            "s0"
        } else if nodes.iter().all(|n| n == "n2" || n == "n3") {
            "s1"
        } else {
            "across racks"
        }
    };
    let mut racks = Vec::new();
    for name in ["a", "b"] {
        racks.push(rack(&run_job(&c, &jobs, name, 3).await));
    }
    racks.sort();
    assert_eq!(racks, ["s0", "s1"], "each gang within one rack");
    // Each rack has 4 CPUs left, 8 in all: a gang of two 4-CPU pods is admitted by its queue
    // but fits no one rack, so it waits, and says why.
    jobs.create(&PostParams::default(), &job("c", 2))
        .await
        .unwrap();
    let message = eventually(30, "c's PodGroup Unschedulable", || async {
        let pgs: Api<tephra_api::PodGroup> = Api::namespaced(c.clone(), "default");
        let pg = pgs
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|p| {
                p.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("c-"))
            })?;
        pg.status?
            .conditions
            .into_iter()
            .find(|k| k.type_ == PodGroupConditionType::Unschedulable && k.status == "True")?
            .message
    })
    .await;
    assert!(
        message.contains("no HyperNode of tier 1 or below has 8 cpu free"),
        "{message}"
    );
    assert!(
        nodes_of(&c, "default", "c-t0-")
            .await
            .values()
            .all(Option::is_none)
    );
    // The UI shows each running gang's rack, and the racks under the spine.
    let addr = sched.metrics_addr.unwrap();
    let (domains, tree) = eventually(30, "the UI shows a's and b's racks", || async {
        let (_, body) = http_get(addr, "/ui/api/v1/fleet").await;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let mut d: Vec<String> = v["jobs"]
            .as_array()?
            .iter()
            .filter_map(|j| j["domain"].as_str().map(String::from))
            .collect();
        d.sort();
        let tree: Vec<(String, Option<String>)> = v["clusters"][0]["hypernodes"]
            .as_array()?
            .iter()
            .map(|h| {
                let name = h["name"].as_str().unwrap_or_default().to_string();
                (name, h["parent"].as_str().map(String::from))
            })
            .collect();
        (d.len() == 2).then_some((d, tree))
    })
    .await;
    assert_eq!(domains, ["s0", "s1"]);
    let spine = Some("s2".to_string());
    assert_eq!(
        tree,
        [
            ("s0".to_string(), spine.clone()),
            ("s1".to_string(), spine),
            ("s2".to_string(), None)
        ]
    );
    stop_everything(sched, ctl).await;
}

#[tokio::test]
async fn with_topology_labels_a_hard_job_runs_under_one_switch_of_its_nodes_labels() {
    logs();
    // No HyperNode objects: the racks are the nodes' `example.com/tor` label.
    let nodes = (0..4)
        .map(|i| {
            let mut n = node(&format!("n{i}"), "8", 0);
            n.labels
                .insert("example.com/tor".into(), format!("tor-{}", i / 2));
            n
        })
        .collect();
    let dev = cluster(nodes).await;
    let c = client(&dev).await;
    let options = tephra_kube::run::Options {
        topology_labels: vec!["example.com/tor".into()],
        ..scheduler_options()
    };
    let sched = tephra_kube::start(c.clone(), options).await.unwrap();
    let ctl = tephra_kube::jobs::start(
        c.clone(),
        Default::default(),
        tephra_kube::leader::Leadership::always(),
    );
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    // Two gangs of three 4-CPU pods: after the first, only the other switch holds the second
    // whole (over the cluster it would take the first switch's last 4 CPUs).
    for name in ["a", "b"] {
        let nodes = run_job(&c, &jobs, name, 3).await;
        assert!(
            nodes.iter().all(|n| n == "n0" || n == "n1")
                || nodes.iter().all(|n| n == "n2" || n == "n3"),
            "{name}: {nodes:?}"
        );
    }
    stop_everything(sched, ctl).await;
}

// A Volcano Job whose task has a `partitionPolicy`, as Volcano's network-topology guide writes
// it: the job controller fills the PodGroup's `subGroupPolicy` and labels each pod with its
// partition, and the scheduler places each partition whole within one rack. The racks
// interleave the nodes (s0: n0, n2; s1: n1, n3), so filling nodes in order would split both
// partitions.
on_both!(
    each_partition_of_a_partitioned_job_runs_within_one_rack,
    each_partition_of_a_partitioned_job_runs_within_one_rack
);
async fn each_partition_of_a_partitioned_job_runs_within_one_rack(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(
        backend,
        (0..4).map(|i| node(&format!("n{i}"), "8", 0)).collect(),
    )
    .await
    else {
        return;
    };
    let c = cl.client.clone();
    racks_by_pattern(
        &Api::all(c.clone()),
        &[("s0", "^n[02]$"), ("s1", "^n[13]$")],
    )
    .await;
    let (sched, ctl) = start_everything(&c).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    // Four 6-CPU pods: one per node; two partitions of two.
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "llm", "namespace": "default",
            "annotations": {"tephra.io/sim-duration": "1h"}},
        "spec": {"schedulerName": "volcano", "minAvailable": 4,
            "tasks": [{"name": "t0", "replicas": 4,
                "partitionPolicy": {"totalPartitions": 2, "partitionSize": 2, "minPartitions": 2,
                    "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
                "template": {"spec": {"containers": [{"name": "c0", "image": "nginx:latest",
                    "resources": {"requests": {"cpu": "6"}, "limits": {"cpu": "6"}}}]}}}]}
    }))
    .unwrap();
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let bound = all_bound(&c, "default", "llm-t0-", 4, 30).await;
    let rack = |n: &str| if n == "n0" || n == "n2" { "s0" } else { "s1" };
    // Pods 0 and 1 are partition 0, pods 2 and 3 partition 1.
    let racks: Vec<(&str, &str)> = (0..2)
        .map(|p| {
            let a = bound[&format!("llm-t0-{}", 2 * p)].as_deref().unwrap();
            let b = bound[&format!("llm-t0-{}", 2 * p + 1)].as_deref().unwrap();
            (rack(a), rack(b))
        })
        .collect();
    assert!(
        racks.iter().all(|(a, b)| a == b),
        "each partition within one rack: {bound:?}"
    );
    assert_ne!(racks[0].0, racks[1].0, "the partitions in different racks");
    stop_everything(sched, ctl).await;
}

/// `--fleet-tiers region`: a PodGroup held hard to the region tier (by name), whose
/// PropagationPolicy allows splitting, is split over two members of one region, though after
/// the roomiest member the next candidate is in the other region.
#[tokio::test]
async fn a_gang_held_to_the_region_tier_is_split_within_one_region() {
    logs();
    let member = |name: &str, region: &str, nodes: u32| tephra_devcluster::fleet::MemberSpec {
        name: name.into(),
        region: Some(region.into()),
        nodes: (0..nodes)
            .map(|i| node(&format!("{name}-{i}"), "16", 8))
            .collect(),
        ..tephra_devcluster::fleet::MemberSpec::default()
    };
    let dev = tephra_devcluster::DevCluster::start(tephra_devcluster::Options {
        members: vec![
            member("a-east", "east", 2),
            member("b-west", "west", 1),
            member("c-east", "east", 1),
            member("d-west", "west", 1),
        ],
        control_plane: true,
        queues: vec![queue_json("default", 1)],
        kubelet: fast_kubelet(),
        ..tephra_devcluster::Options::default()
    })
    .await
    .expect("devcluster starts");
    let cp = dev.client("control-plane").await.unwrap();
    let policies: Api<tephra_api::PropagationPolicy> = Api::namespaced(cp.clone(), "default");
    let pp: tephra_api::PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.tephra.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "split", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup", "name": "llm"}],
                 "placement": {"allowGangSplit": true}}
    }))
    .unwrap();
    policies.create(&PostParams::default(), &pp).await.unwrap();
    let options = tephra_kube::Options {
        members: tephra_kube::MemberSource::Clusters,
        fleet_tiers: vec!["region".into()],
        ..scheduler_options()
    };
    let sched = tephra_kube::start(cp.clone(), options).await.unwrap();
    let pgs: Api<tephra_api::PodGroup> = Api::namespaced(cp.clone(), "default");
    let pg: tephra_api::PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "llm", "namespace": "default"},
        "spec": {"minMember": 3, "queue": "default",
            "networkTopology": {"mode": "hard", "highestTierName": "region"}}
    }))
    .unwrap();
    pgs.create(&PostParams::default(), &pg).await.unwrap();
    for i in 0..3 {
        create_pod(
            &cp,
            "default",
            &format!("llm-{i}"),
            Some("llm"),
            8,
            "volcano",
        )
        .await;
    }
    let mut placed: BTreeSet<String> = BTreeSet::new();
    eventually(40, "the gang's 3 pods bound in members", || async {
        let mut found = BTreeSet::new();
        let mut bound = 0;
        for m in ["a-east", "b-west", "c-east", "d-west"] {
            let c = dev.client(m).await.ok()?;
            let n = nodes_of(&c, "default", "llm-").await;
            let here = n.values().filter(|v| v.is_some()).count();
            if here > 0 {
                found.insert(m.to_string());
            }
            bound += here;
        }
        (bound == 3).then_some(found)
    })
    .await
    .clone_into(&mut placed);
    let regions: BTreeSet<&str> = placed.iter().map(|m| &m[2..]).collect();
    assert_eq!(placed.len(), 2, "split over two members: {placed:?}");
    assert_eq!(regions.len(), 1, "within one region: {placed:?}");
    sched.stop().await;
}

// Each HyperNode's `status.nodeCount` is kept as Volcano's HyperNode controller keeps it: the
// nodes it holds with its lower HyperNodes', and again when a node goes.
on_both!(
    hypernode_status_counts_the_nodes_each_holds,
    hypernode_status_counts_the_nodes_each_holds
);
async fn hypernode_status_counts_the_nodes_each_holds(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(
        backend,
        (0..4).map(|i| node(&format!("n{i}"), "8", 0)).collect(),
    )
    .await
    else {
        return;
    };
    let c = cl.client.clone();
    let hns: Api<HyperNode> = Api::all(c.clone());
    racks_under_a_spine(&hns).await;
    let (sched, ctl) = start_everything(&c).await;
    let counts = |want: [i64; 3]| {
        let hns = hns.clone();
        async move {
            eventually(20, &format!("nodeCount {want:?}"), || async {
                let mut got = [0i64; 3];
                for (i, name) in ["s0", "s1", "s2"].iter().enumerate() {
                    got[i] = hns.get(name).await.ok()?.status?.node_count?;
                }
                (got == want).then_some(())
            })
            .await
        }
    };
    counts([2, 2, 4]).await;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(c.clone());
    nodes.delete("n3", &Default::default()).await.unwrap();
    counts([2, 1, 3]).await;
    stop_everything(sched, ctl).await;
}

// `soft`: the lowest tier that holds the gang, else anywhere. Another scheduler's pods hold
// 4 of n1's and n3's 8 CPUs, so each rack has one node with room for a 6-CPU pod: a soft gang
// of two runs across the racks (n0 and n2) where a hard one would wait.
on_both!(
    a_soft_topology_job_runs_across_racks_when_no_rack_holds_it,
    a_soft_topology_job_runs_across_racks_when_no_rack_holds_it
);
async fn a_soft_topology_job_runs_across_racks_when_no_rack_holds_it(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(
        backend,
        (0..4).map(|i| node(&format!("n{i}"), "8", 0)).collect(),
    )
    .await
    else {
        return;
    };
    let c = cl.client.clone();
    racks_under_a_spine(&Api::all(c.clone())).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.clone(), "default");
    for n in ["n1", "n3"] {
        let busy = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("busy-{n}"), "namespace": "default"},
            "spec": {"nodeName": n, "containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "4"}, "limits": {"cpu": "4"}}}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &busy).await.unwrap();
    }
    let (sched, ctl) = start_everything(&c).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let mut soft = job_in("soft", 2, "soft");
    soft.spec.tasks[0]
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .resources =
        serde_json::from_value(json!({"requests": {"cpu": "6"}, "limits": {"cpu": "6"}})).unwrap();
    jobs.create(&PostParams::default(), &soft).await.unwrap();
    let nodes: BTreeSet<String> = all_bound(&c, "default", "soft-t0-", 2, 30)
        .await
        .into_values()
        .flatten()
        .collect();
    assert_eq!(nodes, BTreeSet::from(["n0".to_string(), "n2".to_string()]));
    stop_everything(sched, ctl).await;
}

/// The `network-topology-aware` plugin from the scheduler's config file: a hard gang goes to
/// the fullest rack that holds it (s0, four nodes, one taken by another scheduler's pod) rather
/// than the tightest fit (s1, two empty nodes), which it takes without the plugin.
#[tokio::test]
async fn with_the_network_topology_aware_plugin_a_hard_gang_goes_to_the_fullest_rack() {
    logs();
    for (plugin, want) in [(true, "s0"), (false, "s1")] {
        let dev = cluster((0..6).map(|i| node(&format!("n{i}"), "8", 0)).collect()).await;
        let c = client(&dev).await;
        racks_by_pattern(
            &Api::all(c.clone()),
            &[("s0", "^n[0-3]$"), ("s1", "^n[45]$")],
        )
        .await;
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.clone(), "default");
        let busy = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "busy", "namespace": "default"},
            "spec": {"nodeName": "n0", "containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "8"}, "limits": {"cpu": "8"}}}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &busy).await.unwrap();
        let dir = std::env::temp_dir().join(format!("tephra-nta-{}-{plugin}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("scheduler.conf");
        let extra = if plugin {
            "  - name: network-topology-aware\n    arguments: {weight: 10}\n"
        } else {
            ""
        };
        std::fs::write(
            &config,
            format!(
                "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n- plugins:\n  - name: drf\n  - name: predicates\n  - name: proportion\n{extra}"
            ),
        )
        .unwrap();
        let options = tephra_kube::run::Options {
            config_path: Some(config),
            ..scheduler_options()
        };
        let sched = tephra_kube::start(c.clone(), options).await.unwrap();
        let ctl = tephra_kube::jobs::start(
            c.clone(),
            Default::default(),
            tephra_kube::leader::Leadership::always(),
        );
        let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
        let nodes = run_job(&c, &jobs, "one", 1).await;
        let rack = if nodes
            .iter()
            .all(|n| ["n1", "n2", "n3"].contains(&n.as_str()))
        {
            "s0"
        } else {
            "s1"
        };
        assert_eq!(rack, want, "plugin {plugin}: {nodes:?}");
        stop_everything(sched, ctl).await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}

// Preempt keeps a preemptor held to a rack within one rack: four low-priority pods fill both
// racks (s0: n0, n1; s1: n2, n3), the lowest two on n0 and n2, and a high-priority gang of two
// whole nodes held to tier 1 evicts the two pods of one rack and runs there (taking the two
// lowest would split it); the other rack's pods are untouched.
on_both!(
    preempt_frees_one_rack_for_a_gang_held_to_a_rack,
    preempt_frees_one_rack_for_a_gang_held_to_a_rack
);
async fn preempt_frees_one_rack_for_a_gang_held_to_a_rack(backend: Backend) {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    logs();
    let nodes = (0..4).map(|i| node(&format!("n{i}"), "8", 0)).collect();
    let Some(cl) = cluster_on(backend, nodes).await else {
        return;
    };
    let c = cl.client.clone();
    racks_by_pattern(
        &Api::all(c.clone()),
        &[("s0", "^n[01]$"), ("s1", "^n[23]$")],
    )
    .await;
    let classes: Api<PriorityClass> = Api::all(c.clone());
    for (name, value) in [
        ("low1", 1),
        ("low2", 2),
        ("low3", 3),
        ("low4", 4),
        ("high", 1000),
    ] {
        let pc = serde_json::from_value(json!({"apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass", "metadata": {"name": name}, "value": value}))
        .unwrap();
        classes.create(&PostParams::default(), &pc).await.unwrap();
    }
    let dir = std::env::temp_dir().join(format!("tephra-preempt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("scheduler.conf");
    std::fs::write(
        &config,
        "actions: \"enqueue, allocate, preempt, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n- plugins:\n  - name: drf\n  - name: predicates\n  - name: proportion\n",
    )
    .unwrap();
    let options = tephra_kube::run::Options {
        config_path: Some(config),
        ..scheduler_options()
    };
    let sched = tephra_kube::start(c.clone(), options).await.unwrap();
    let ctl = tephra_kube::jobs::start(
        c.clone(),
        Default::default(),
        tephra_kube::leader::Leadership::always(),
    );
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let with_class = |mut j: Job, class: &str| {
        j.spec.priority_class_name = Some(class.into());
        if let Some(spec) = j.spec.tasks[0].template.spec.as_mut() {
            spec.priority_class_name = Some(class.into());
        }
        j
    };
    for (i, (node, class)) in [
        ("n0", "low1"),
        ("n2", "low2"),
        ("n1", "low3"),
        ("n3", "low4"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut low = with_class(cpu_job(&format!("low{i}"), 1, "8"), class);
        if let Some(spec) = low.spec.tasks[0].template.spec.as_mut() {
            spec.node_selector =
                Some([("kubernetes.io/hostname".to_string(), node.to_string())].into());
        }
        jobs.create(&PostParams::default(), &low).await.unwrap();
    }
    let before = all_bound(&c, "default", "low", 4, 30).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
    let mut high = with_class(cpu_job("high", 2, "8"), "high");
    high.spec.network_topology =
        Some(serde_json::from_value(json!({"mode": "hard", "highestTierAllowed": 1})).unwrap());
    let low_before: Vec<Pod> = pods.list(&Default::default()).await.unwrap().items;
    jobs.create(&PostParams::default(), &high).await.unwrap();
    let nodes: BTreeSet<String> = all_bound(&c, "default", "high-t0-", 2, 40)
        .await
        .into_values()
        .flatten()
        .collect();
    let s0 = nodes.iter().all(|n| n == "n0" || n == "n1");
    let s1 = nodes.iter().all(|n| n == "n2" || n == "n3");
    assert!(
        s0 || s1,
        "the gang within one rack: {nodes:?} (low pods were on {before:?})"
    );
    // The other rack's low pods are the same pods, still there.
    let other: [&str; 2] = if s0 { ["n2", "n3"] } else { ["n0", "n1"] };
    let now: Vec<Pod> = pods.list(&Default::default()).await.unwrap().items;
    for p in low_before.iter().filter(|p| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| other.contains(&n))
    }) {
        assert!(
            now.iter().any(|q| uid(q) == uid(p)),
            "{} on the other rack was evicted",
            p.metadata.name.clone().unwrap_or_default()
        );
    }
    stop_everything(sched, ctl).await;
    let _ = std::fs::remove_dir_all(&dir);
}
