//! The simulated kubelets and the faults: admission against free allocatable (an
//! over-committing scheduler is caught), pods running and finishing as their annotations say,
//! node leases, and members or nodes failing.

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

fn bound_pod(name: &str, node: &str, requests: Value, annotations: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"nodeName": node, "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests}}]}
    }))
    .unwrap()
}

async fn phase(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get_opt(name)
        .await
        .unwrap()
        .and_then(|p| p.status?.phase)
}

#[tokio::test]
async fn a_pod_bound_over_the_nodes_capacity_is_refused() {
    let h = common::single_with(vec![common::node("n1", "4", 2)]).await;
    let pods: Api<Pod> = Api::default_namespaced(common::client(&h, "local").await);
    pods.create(
        &PostParams::default(),
        &bound_pod(
            "fits",
            "n1",
            json!({"cpu": "3", "nvidia.com/gpu": "2"}),
            json!({}),
        ),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &bound_pod("too-much-cpu", "n1", json!({"cpu": "2"}), json!({})),
    )
    .await
    .unwrap();
    let refused = common::eventually(10, "the kubelet refuses the second pod", || async {
        let p = pods.get("too-much-cpu").await.unwrap();
        let s = p.status?;
        (s.phase.as_deref() == Some("Failed")).then_some(s)
    })
    .await;
    assert_eq!(refused.reason.as_deref(), Some("OutOfcpu"));
    assert_eq!(
        refused.message.as_deref(),
        Some(
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000"
        )
    );
    pods.create(
        &PostParams::default(),
        &bound_pod("gpu", "n1", json!({"nvidia.com/gpu": "1"}), json!({})),
    )
    .await
    .unwrap();
    let reason = common::eventually(10, "a GPU over capacity", || async {
        pods.get("gpu").await.unwrap().status?.reason
    })
    .await;
    assert_eq!(reason, "OutOfnvidia.com/gpu");
    common::eventually(10, "the pod that fits runs", || async {
        (phase(&pods, "fits").await.as_deref() == Some("Running")).then_some(())
    })
    .await;
    // A deleted pod gives its room back.
    pods.delete("fits", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    common::eventually(10, "the pod that fit is gone", || async {
        pods.get_opt("fits").await.unwrap().is_none().then_some(())
    })
    .await;
    pods.create(
        &PostParams::default(),
        &bound_pod("after-release", "n1", json!({"cpu": "3"}), json!({})),
    )
    .await
    .unwrap();
    common::eventually(10, "a pod bound into the freed room runs", || async {
        (phase(&pods, "after-release").await.as_deref() == Some("Running")).then_some(())
    })
    .await;
}

#[tokio::test]
async fn pods_run_and_finish_as_their_annotations_say() {
    let h = common::single_with(vec![common::node("n1", "8", 0)]).await;
    let pods: Api<Pod> = Api::default_namespaced(common::client(&h, "local").await);
    let fast = json!({"tephra.io/sim-duration": "300ms"});
    let failing = json!({"tephra.io/sim-duration": "300ms", "tephra.io/sim-exit-code": "3"});
    pods.create(
        &PostParams::default(),
        &bound_pod("ok", "n1", json!({"cpu": "1"}), fast),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &bound_pod("bad", "n1", json!({"cpu": "1"}), failing),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &bound_pod("forever", "n1", json!({"cpu": "1"}), json!({})),
    )
    .await
    .unwrap();
    let running = common::eventually(10, "running", || async {
        let p = pods.get("forever").await.unwrap();
        (p.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(p)
    })
    .await;
    let status = running.status.unwrap();
    assert!(status.pod_ip.is_some() && status.start_time.is_some());
    let cs = &status.container_statuses.unwrap()[0];
    assert!(cs.ready && cs.state.as_ref().unwrap().running.is_some());
    assert!(
        status
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );

    common::eventually(10, "ok succeeds", || async {
        (phase(&pods, "ok").await.as_deref() == Some("Succeeded")).then_some(())
    })
    .await;
    let bad = common::eventually(10, "bad fails", || async {
        let p = pods.get("bad").await.unwrap();
        (p.status.as_ref()?.phase.as_deref() == Some("Failed")).then_some(p)
    })
    .await;
    let terminated = bad.status.unwrap().container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(terminated.exit_code, 3);
    // Without a duration, a pod runs until deleted.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(phase(&pods, "forever").await.as_deref(), Some("Running"));
    // A finished pod's resources are free again: a pod needing 7 of 8 cores fits.
    pods.create(
        &PostParams::default(),
        &bound_pod("big", "n1", json!({"cpu": "7"}), json!({})),
    )
    .await
    .unwrap();
    common::eventually(10, "big runs", || async {
        (phase(&pods, "big").await.as_deref() == Some("Running")).then_some(())
    })
    .await;
}

#[tokio::test]
async fn nodes_heartbeat_and_faults_take_them_away() {
    let h = common::fleet().await;
    let east = common::client(&h, "east").await;
    let nodes: Api<Node> = Api::all(east.clone());
    assert_eq!(
        nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    let leases: Api<Lease> = Api::namespaced(east.clone(), "kube-node-lease");
    let before = leases
        .get("east-0")
        .await
        .unwrap()
        .spec
        .unwrap()
        .renew_time
        .unwrap();
    common::eventually(10, "a lease renewal", || async {
        let now = leases
            .get("east-0")
            .await
            .unwrap()
            .spec
            .unwrap()
            .renew_time
            .unwrap();
        (now.0 > before.0).then_some(())
    })
    .await;

    h.node_not_ready("east", "east-1").unwrap();
    let n = nodes.get("east-1").await.unwrap();
    let ready = n
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "False");
    assert!(
        n.spec
            .unwrap()
            .taints
            .unwrap()
            .iter()
            .any(|t| t.key == "node.kubernetes.io/not-ready")
    );
    h.node_ready("east", "east-1").unwrap();
    assert!(
        nodes
            .get("east-1")
            .await
            .unwrap()
            .spec
            .unwrap()
            .taints
            .is_none()
    );

    let pods: Api<Pod> = Api::default_namespaced(east.clone());
    pods.create(
        &PostParams::default(),
        &bound_pod("p", "east-0", json!({"cpu": "1"}), json!({})),
    )
    .await
    .unwrap();
    common::eventually(10, "running", || async {
        (phase(&pods, "p").await.as_deref() == Some("Running")).then_some(())
    })
    .await;
    h.delete_node("east", "east-0").unwrap();
    assert!(nodes.get_opt("east-0").await.unwrap().is_none());
    common::eventually(10, "the lost node's pod is removed", || async {
        pods.get_opt("p").await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_member_can_stop_answering_or_answer_5xx_and_come_back() {
    let h = common::fleet().await;
    let west: Api<Node> = Api::all(common::client(&h, "west").await);
    assert!(west.list(&ListParams::default()).await.is_ok());

    h.fail_member_with("west", 500).unwrap();
    match west.list(&ListParams::default()).await.unwrap_err() {
        kube::Error::Api(s) => assert_eq!(s.code, 500),
        other => panic!("expected a 500, got {other:?}"),
    }
    h.restore_member("west").await.unwrap();
    assert!(west.list(&ListParams::default()).await.is_ok());

    h.stop_member("west").await.unwrap();
    let addr = h.server("west").unwrap().addr();
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "connection refused"
    );
    let err = west.list(&ListParams::default()).await.unwrap_err();
    assert!(
        !matches!(err, kube::Error::Api(_)),
        "a transport error, got {err:?}"
    );
    // The other member and the control plane are unaffected.
    let east: Api<Node> = Api::all(common::client(&h, "east").await);
    assert!(east.list(&ListParams::default()).await.is_ok());
    h.restore_member("west").await.unwrap();
    let back: Api<Node> = Api::all(common::client(&h, "west").await);
    assert_eq!(
        back.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
}

#[tokio::test]
async fn the_control_plane_holds_a_cluster_and_a_token_secret_per_member() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let h = common::fleet().await;
    let cp = common::client(&h, "control-plane").await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cluster.tephra.io", "v1alpha1", "Cluster"),
        "clusters",
    );
    let clusters: Api<DynamicObject> = Api::all_with(cp.clone(), &ar);
    let east = clusters.get("east").await.unwrap();
    assert_eq!(
        east.data["spec"]["apiEndpoint"],
        h.server("east").unwrap().url()
    );
    let secret_ref = &east.data["spec"]["secretRef"];
    let secrets: Api<Secret> = Api::namespaced(cp, secret_ref["namespace"].as_str().unwrap());
    let secret = secrets
        .get(secret_ref["name"].as_str().unwrap())
        .await
        .unwrap();
    let token = secret.data.unwrap()["token"].0.clone();
    assert_eq!(
        String::from_utf8(token).unwrap(),
        h.server("east").unwrap().token()
    );
}

#[tokio::test]
async fn faults_follow_annotations_for_tephra_dev_users() {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    let h = std::sync::Arc::new(common::fleet().await);
    let watcher = tephra_devcluster::faults::watch_annotations(h.clone());
    let cp = common::client(&h, "control-plane").await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cluster.tephra.io", "v1alpha1", "Cluster"),
        "clusters",
    );
    let clusters: Api<DynamicObject> = Api::all_with(cp, &ar);
    let annotate = |v: Option<&str>| {
        Patch::Merge(json!({"metadata": {"annotations": {"tephra.io/dev-fault": v}}}))
    };
    clusters
        .patch("east", &PatchParams::default(), &annotate(Some("503")))
        .await
        .unwrap();
    let east: Api<Node> = Api::all(common::client(&h, "east").await);
    common::eventually(10, "east answers 503", || async {
        match east.list(&ListParams::default()).await {
            Err(kube::Error::Api(s)) if s.code == 503 => Some(()),
            _ => None,
        }
    })
    .await;
    clusters
        .patch("east", &PatchParams::default(), &annotate(None))
        .await
        .unwrap();
    common::eventually(10, "east answers again", || async {
        east.list(&ListParams::default()).await.ok().map(|_| ())
    })
    .await;

    let west: Api<Node> = Api::all(common::client(&h, "west").await);
    west.patch(
        "west-0",
        &PatchParams::default(),
        &annotate(Some("not-ready")),
    )
    .await
    .unwrap();
    common::eventually(10, "west-0 NotReady", || async {
        let n = west.get("west-0").await.unwrap();
        let ready = n
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Ready")?;
        (ready.status == "False").then_some(())
    })
    .await;
    watcher.abort();
}
