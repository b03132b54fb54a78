//! A real Karmada control plane on the real components: what it propagates reaches the member
//! its scheduler chose, and a member whose API server stops is soon not Ready (what the
//! failover tests rely on) until it is restarted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Instant;

use common::{eventually, node};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use serde_json::json;
use tephra_envtest::{KarmadaOptions, Release, karmada_fleet, objects};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_propagated_by_karmada_reaches_the_member_karmada_scheduler_chose() {
    let started = Instant::now();
    let Some(fleet) = karmada_fleet(
        &Release::Oldest,
        &[
            ("member-a", vec![node("a0", "8")]),
            ("member-b", vec![node("b0", "8")]),
        ],
        KarmadaOptions::default(),
    )
    .await
    .unwrap() else {
        return;
    };
    eprintln!(
        "karmada fleet up in {:?} ({})",
        started.elapsed(),
        fleet.env.dir().display()
    );
    let karmada = fleet.karmada_client.clone();
    objects::create(
        &karmada,
        &json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}}),
    )
    .await
    .unwrap();
    let policy = fleet
        .propagation_policy(json!({"apiVersion": "policy.karmada.io/v1alpha1",
            "kind": "PropagationPolicy",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"schedulerName": "default-scheduler",
                "resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                    "name": "web"}],
                "placement": {"clusterAffinity": {"clusterNames": ["member-b"]}}}}))
        .await
        .unwrap();
    assert!(
        policy
            .pointer("/metadata/labels/propagationpolicy.karmada.io~1permanent-id")
            .is_some(),
        "the webhook labelled the policy: {policy}"
    );
    let placed = Instant::now();
    let in_b: Api<Deployment> = Api::namespaced(fleet.client("member-b").unwrap(), "default");
    let in_a: Api<Deployment> = Api::namespaced(fleet.client("member-a").unwrap(), "default");
    let copy = eventually(60, "the Deployment in member-b", || async {
        in_b.get_opt("web").await.ok().flatten()
    })
    .await;
    let labels = copy.metadata.labels.unwrap_or_default();
    assert!(
        labels.contains_key("work.karmada.io/permanent-id"),
        "the execution controller applied Karmada's Work: {labels:?}"
    );
    let clusters = eventually(30, "the binding scheduled", || async {
        let rb = fleet
            .resource_binding("default", "Deployment", "web")
            .await
            .ok()??;
        let clusters: Vec<String> = rb
            .pointer("/spec/clusters")?
            .as_array()?
            .iter()
            .filter_map(|c| c["name"].as_str().map(str::to_string))
            .collect();
        (!clusters.is_empty()).then_some(clusters)
    })
    .await;
    assert_eq!(clusters, ["member-b"]);
    assert!(
        in_a.get_opt("web").await.unwrap().is_none(),
        "not in member-a"
    );
    eprintln!("propagated in {:?}", placed.elapsed());

    fleet.stop_member("member-b").unwrap();
    let stopped = Instant::now();
    let status = eventually(30, "member-b not Ready", || async {
        let s = fleet.cluster_ready("member-b").await.ok()??;
        (s != "True").then_some(s)
    })
    .await;
    eprintln!(
        "member-b Ready={status} {:?} after its API server stopped",
        stopped.elapsed()
    );
    assert_eq!(
        fleet.cluster_ready("member-a").await.unwrap().as_deref(),
        Some("True")
    );

    // Back on its port and data, it is Ready again.
    fleet.restore_member("member-b").await.unwrap();
    let restored = Instant::now();
    eventually(30, "member-b Ready again", || async {
        let s = fleet.cluster_ready("member-b").await.ok()??;
        (s == "True").then_some(())
    })
    .await;
    eprintln!(
        "member-b Ready again {:?} after its API server restarted",
        restored.elapsed()
    );
    eprintln!("total {:?}", started.elapsed());
}
