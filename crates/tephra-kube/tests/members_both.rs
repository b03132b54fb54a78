//! `--members both`: the scheduler's own cluster is member `local` and the control plane, and
//! the Cluster objects in it add members. Pods created in the local cluster are bound there
//! (they cannot move to another cluster), with a PodGroup or without, while the other members'
//! nodes are known.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use base64::Engine;
use common::*;
use kube::api::{Api, PostParams};
use serde_json::json;
use tephra_devcluster::{DevCluster, Options};

/// `local` (2 nodes, 2 GPUs each, tephra's CRDs) and `east` (2 nodes, 8 GPUs each), with
/// `east` registered in `local` as a Cluster and its Secret.
async fn two_clusters() -> tephra_devcluster::Handle {
    let member = |name: &str, gpus| tephra_devcluster::fleet::MemberSpec {
        name: name.into(),
        nodes: vec![
            node(&format!("{name}-0"), "16", gpus),
            node(&format!("{name}-1"), "16", gpus),
        ],
        ..Default::default()
    };
    let dev = DevCluster::start(Options {
        members: vec![member("local", 2), member("east", 8)],
        queues: vec![queue_json("default", 1)],
        kubelet: fast_kubelet(),
        ..Options::default()
    })
    .await
    .expect("devcluster starts");
    let local = dev.client("local").await.unwrap();
    let east = dev.server("east").unwrap().entry();
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(local.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "east-credentials"},
                "data": {"token": b64(&east.token), "caBundle": b64(&east.ca_pem)}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let clusters: Api<tephra_api::Cluster> = Api::all(local.clone());
    clusters
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "cluster.tephra.io/v1alpha1",
                "kind": "Cluster", "metadata": {"name": "east"},
                "spec": {"syncMode": "Push", "apiEndpoint": east.server,
                         "secretRef": {"namespace": "default", "name": "east-credentials"}}}))
            .unwrap(),
        )
        .await
        .unwrap();
    dev
}

async fn no_pods_in_east(dev: &tephra_devcluster::Handle) {
    let east = dev.client("east").await.unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(east, "default");
    let list = pods.list(&Default::default()).await.unwrap();
    assert!(list.items.is_empty(), "pods in east");
}

/// Waits until `count` pods named `prefix*` are bound, each on one of local's nodes.
async fn bound_in_local(local: &kube::Client, prefix: &str, count: usize) {
    let placed = all_bound(local, "default", prefix, count, 30).await;
    assert!(
        placed.values().flatten().all(|n| n.starts_with("local-")),
        "{placed:?}"
    );
}

async fn scheduler(local: &kube::Client) -> tephra_kube::Running {
    let options = tephra_kube::Options {
        members: tephra_kube::MemberSource::Both,
        ..scheduler_options()
    };
    tephra_kube::start(local.clone(), options).await.unwrap()
}

#[tokio::test]
async fn local_pods_are_bound_in_the_local_cluster_even_when_another_member_has_more_room() {
    logs();
    let dev = two_clusters().await;
    let local = dev.client("local").await.unwrap();
    let _sched = scheduler(&local).await;
    // Two pods of 2 GPUs fit only in local's two nodes; east has room for far more.
    gang(&local, "default", "fits", "default", 2, 2, 2).await;
    bound_in_local(&local, "fits-", 2).await;
    no_pods_in_east(&dev).await;
}

#[tokio::test]
async fn a_gang_too_big_for_the_local_cluster_waits_there_instead_of_binding_elsewhere() {
    logs();
    let dev = two_clusters().await;
    let local = dev.client("local").await.unwrap();
    let _sched = scheduler(&local).await;
    // Four pods of 2 GPUs need 8: local has 4, east has 16, but the pods live in local.
    gang(&local, "default", "big", "default", 4, 4, 2).await;
    eventually(20, "an Unschedulable condition", || async {
        let pg = podgroup(&local, "default", "big").await;
        pg.status.and_then(|s| {
            s.conditions.into_iter().find(|c| {
                c.type_ == tephra_api::scheduling::PodGroupConditionType::Unschedulable
                    && c.status == "True"
            })
        })
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let nodes = nodes_of(&local, "default", "big-").await;
    assert!(nodes.values().all(Option::is_none), "{nodes:?}");
    no_pods_in_east(&dev).await;
}

#[tokio::test]
async fn a_pod_without_a_podgroup_is_bound_in_the_local_cluster_too() {
    logs();
    let dev = two_clusters().await;
    let local = dev.client("local").await.unwrap();
    let _sched = scheduler(&local).await;
    // Its implicit job is pinned as a PodGroup's gang is.
    create_pod(&local, "default", "solo", None, 2, "volcano").await;
    bound_in_local(&local, "solo", 1).await;
    no_pods_in_east(&dev).await;
}
