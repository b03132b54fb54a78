//! The PodGroups and pods that Kubeflow's training-operator, KubeRay, the Spark operator and
//! the MPI operator create (tests/volcano/integrations), applied unchanged to a one-member
//! devcluster: the scheduler binds every gang whole.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use tephra_devcluster::{DevCluster, Options};

fn manifests() -> Vec<Value> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/volcano/integrations");
    let mut out = Vec::new();
    for file in [
        "training-operator-pytorchjob",
        "kuberay-raycluster",
        "spark-operator-sparkapplication",
        "mpi-operator-mpijob",
    ] {
        let text = std::fs::read_to_string(dir.join(format!("{file}.yaml"))).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        out.extend(docs.into_iter().filter(|d| !d.is_null()));
    }
    out
}

#[tokio::test]
async fn the_integrations_podgroups_and_pods_are_bound_whole() {
    logs();
    let mut options = Options::single();
    options.members[0].nodes = vec![
        node("a100-0", "64", 8),
        node("a100-1", "64", 8),
        node("cpu-0", "32", 0),
        node("cpu-1", "32", 0),
    ];
    options.queues = ["research", "batch", "hpc", "default"]
        .map(|q| queue_json(q, 1))
        .to_vec();
    let objects = manifests();
    let namespaces: BTreeSet<&str> = objects
        .iter()
        .filter_map(|o| o.pointer("/metadata/namespace")?.as_str())
        .collect();
    let mut setup: Vec<Value> = namespaces
        .iter()
        .map(|ns| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        .collect();
    setup.push(
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "high-priority"}, "value": 1000}),
    );
    let dev = DevCluster::start(options).await.unwrap();
    let api = &dev.server("local").unwrap().api;
    tephra_devcluster::cluster::create_objects(api, &setup).unwrap();
    let c = client(&dev).await;
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    tephra_devcluster::cluster::create_objects(api, &objects).unwrap();
    let groups: BTreeMap<String, usize> = objects
        .iter()
        .filter(|o| o["kind"] == "Pod")
        .filter_map(|o| {
            let ns = o.pointer("/metadata/namespace")?.as_str()?;
            let g = o
                .pointer("/metadata/annotations/scheduling.k8s.io~1group-name")?
                .as_str()?;
            Some(format!("{ns}/{g}"))
        })
        .fold(BTreeMap::new(), |mut m, g| {
            *m.entry(g).or_insert(0) += 1;
            m
        });
    assert_eq!(groups.len(), 4, "{groups:?}");
    let pods: Api<Pod> = Api::all(c.clone());
    eventually(30, "every integration's pods bound", || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        let mut bound: BTreeMap<String, usize> = BTreeMap::new();
        for p in &list.items {
            let g = p
                .metadata
                .annotations
                .as_ref()?
                .get("scheduling.k8s.io/group-name");
            if let (Some(g), Some(_)) = (g, p.spec.as_ref()?.node_name.as_ref()) {
                let ns = p.metadata.namespace.clone().unwrap_or_default();
                *bound.entry(format!("{ns}/{g}")).or_insert(0) += 1;
            }
        }
        (bound == groups).then_some(())
    })
    .await;
    sched.stop().await;
}
