//! Network-topology-aware gangs on the devcluster over real HTTP: HyperNodes written as a Volcano
//! user writes them (by name, by pattern, a spine over racks), and a Volcano Job with
//! `networkTopology: {mode: hard, highestTierAllowed: 1}` placed whole within one rack; when no
//! rack has room it waits, and its PodGroup says which tier and the best rack's shortfall.

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
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default",
            "annotations": {"tephra.io/sim-duration": "1h"}},
        "spec": {"schedulerName": "volcano", "minAvailable": replicas,
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
            "tasks": [{"name": "t0", "replicas": replicas, "template": {"spec": {"containers": [
                {"name": "c0", "image": "nginx:latest",
                 "resources": {"requests": {"cpu": "4"}, "limits": {"cpu": "4"}}}]}}}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn a_hard_topology_job_runs_within_one_rack_and_the_next_waits_saying_why() {
    logs();
    // Four 8-CPU nodes: racks s0 (n0, n1) and s1 (n2, n3) under spine s2.
    let dev = cluster((0..4).map(|i| node(&format!("n{i}"), "8", 0)).collect()).await;
    let c = client(&dev).await;
    let hns: Api<HyperNode> = Api::all(c.clone());
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
        jobs.create(&PostParams::default(), &job(name, 3))
            .await
            .unwrap();
        let bound = all_bound(&c, "default", &format!("{name}-t0-"), 3, 30).await;
        let nodes: BTreeSet<String> = bound.into_values().flatten().collect();
        racks.push(rack(&nodes));
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
    stop_everything(sched, ctl).await;
}
