//! The devcluster refuses what a real cluster refuses, so that a scheduler that ignores a
//! contract fails a test: kube-apiserver's rules for scheduling gates (no binding while gated,
//! the `SchedulingGated` condition, gates may only be removed) and the kubelet's admission
//! (host ports, node affinity, NoExecute taints), with their status codes and wording.

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn pod(name: &str, spec: Value) -> Pod {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "main", "image": "busybox",
        "resources": {"requests": {"cpu": "100m"}},
        "ports": spec.get("ports").cloned().unwrap_or(json!([]))}]);
    if let Some(s) = spec.as_object_mut() {
        s.remove("ports");
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

async fn bind(c: &kube::Client, name: &str, node: &str) -> Result<(), kube::Error> {
    let req = http::Request::post(format!("/api/v1/namespaces/default/pods/{name}/binding"))
        .header("content-type", "application/json")
        .body(
            serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name}, "target": {"kind": "Node", "name": node}}))
            .unwrap(),
        )
        .unwrap();
    c.request::<Value>(req).await.map(|_| ())
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test]
async fn a_gated_pod_cannot_be_bound_and_says_why() {
    let h = common::single_with(vec![common::node("n1", "4", 0)]).await;
    let c = common::client(&h, "local").await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    pods.create(
        &PostParams::default(),
        &pod(
            "gated",
            json!({"schedulingGates": [{"name": "example.com/quota"}]}),
        ),
    )
    .await
    .unwrap();
    let p = pods.get("gated").await.unwrap();
    let cond = p
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .expect("the API server marks a gated pod");
    assert_eq!(
        (
            cond.status.as_str(),
            cond.reason.as_deref(),
            cond.message.as_deref()
        ),
        (
            "False",
            Some("SchedulingGated"),
            Some("Scheduling is blocked due to non-empty scheduling gates")
        )
    );
    let e = api_error(bind(&c, "gated", "n1").await.unwrap_err());
    assert_eq!(e.code, 409);
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on pods/binding \"gated\": pod gated has non-empty .spec.schedulingGates"
    );
    // A gate may not be added, only removed.
    let add =
        json!({"spec": {"schedulingGates": [{"name": "example.com/quota"}, {"name": "more"}]}});
    let e = api_error(
        pods.patch("gated", &PatchParams::default(), &Patch::Merge(&add))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert!(
        e.message
            .contains("only deletion is allowed, but found new scheduling gate 'more'"),
        "{}",
        e.message
    );
    let clear = json!({"spec": {"schedulingGates": null}});
    pods.patch("gated", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    bind(&c, "gated", "n1").await.unwrap();
    // A pod created bound cannot carry gates.
    let e = api_error(
        pods.create(
            &PostParams::default(),
            &pod(
                "both",
                json!({"nodeName": "n1", "schedulingGates": [{"name": "g"}]}),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert!(
        e.message
            .contains("cannot be set until all schedulingGates have been cleared"),
        "{}",
        e.message
    );
}

async fn refused(pods: &Api<Pod>, name: &str) -> (String, String) {
    common::eventually(10, &format!("the kubelet refuses {name}"), || async {
        let s = pods.get(name).await.ok()?.status?;
        (s.phase.as_deref() == Some("Failed"))
            .then(|| (s.reason.unwrap_or_default(), s.message.unwrap_or_default()))
    })
    .await
}

async fn running(pods: &Api<Pod>, name: &str) {
    common::eventually(10, &format!("{name} running"), || async {
        let s = pods.get(name).await.ok()?.status?;
        (s.phase.as_deref() == Some("Running")).then_some(())
    })
    .await
}

#[tokio::test]
async fn the_kubelet_refuses_a_second_pod_on_a_host_port_and_records_why() {
    let h = common::single_with(vec![common::node("n1", "4", 0)]).await;
    let c = common::client(&h, "local").await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let port = json!([{"containerPort": 8080, "hostPort": 8080}]);
    pods.create(
        &PostParams::default(),
        &pod("first", json!({"nodeName": "n1", "ports": port})),
    )
    .await
    .unwrap();
    running(&pods, "first").await;
    // Another protocol on the same port is fine.
    let udp = json!([{"containerPort": 8080, "hostPort": 8080, "protocol": "UDP"}]);
    pods.create(
        &PostParams::default(),
        &pod("udp", json!({"nodeName": "n1", "ports": udp})),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &pod("second", json!({"nodeName": "n1", "ports": port})),
    )
    .await
    .unwrap();
    let (reason, message) = refused(&pods, "second").await;
    assert_eq!(reason, "NodePorts");
    assert_eq!(
        message,
        "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
    );
    running(&pods, "udp").await;
    let events: Api<Event> = Api::default_namespaced(c.clone());
    let e = common::eventually(10, "a NodePorts Event", || async {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.involved_object.name.as_deref() == Some("second"))
    })
    .await;
    assert_eq!(
        (e.type_.as_deref(), e.reason.as_deref()),
        (Some("Warning"), Some("NodePorts"))
    );
}

#[tokio::test]
async fn the_kubelet_refuses_a_pod_its_node_does_not_match_or_whose_taint_it_does_not_tolerate() {
    let mut n1 = common::node("n1", "4", 0);
    n1.labels.insert("disk".into(), "hdd".into());
    n1.taints = vec![json!({"key": "drain", "value": "now", "effect": "NoExecute"})];
    let h = common::single_with(vec![n1]).await;
    let pods: Api<Pod> = Api::default_namespaced(common::client(&h, "local").await);
    let tolerate = json!([{"key": "drain", "operator": "Exists"}]);
    pods.create(
        &PostParams::default(),
        &pod(
            "wants-ssd",
            json!({"nodeName": "n1", "nodeSelector": {"disk": "ssd"}, "tolerations": tolerate}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        refused(&pods, "wants-ssd").await,
        (
            "NodeAffinity".into(),
            "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector".into()
        )
    );
    pods.create(
        &PostParams::default(),
        &pod("intolerant", json!({"nodeName": "n1"})),
    )
    .await
    .unwrap();
    assert_eq!(refused(&pods, "intolerant").await.0, "TaintToleration");
    pods.create(
        &PostParams::default(),
        &pod(
            "fine",
            json!({"nodeName": "n1", "nodeSelector": {"disk": "hdd"}, "tolerations": tolerate}),
        ),
    )
    .await
    .unwrap();
    running(&pods, "fine").await;
}
