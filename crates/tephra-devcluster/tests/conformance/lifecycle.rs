//! Objects' lives: binding and eviction under disruption budgets, finalizers, a bound pod's
//! grace period, a pod's immutable spec, and owners and dependents collected as kube's garbage
//! collector collects them.

use super::*;

#[tokio::test]
async fn binding_assigns_once_and_eviction_honours_disruption_budgets() {
    let h = common::single_with(vec![common::node("n1", "8", 0)]).await;
    let client = common::client(&h, "local").await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    for name in ["a", "b"] {
        pods.create(&PostParams::default(), &pod(name, json!({"app": "web"})))
            .await
            .unwrap();
        let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": "n1"}});
        let status: Value = pods
            .create_subresource("binding", name, &PostParams::default(), &binding)
            .await
            .unwrap();
        assert_eq!(status["code"], 201);
    }
    let bound = pods.get("a").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("n1"));
    let conditions = bound.status.unwrap().conditions.unwrap_or_default();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );
    let again = json!({"metadata": {"name": "a"}, "target": {"name": "n1"}});
    let err = api_err(
        pods.create_subresource::<Value, Value>("binding", "a", &PostParams::default(), &again)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
    assert_eq!(
        err.message,
        "Operation cannot be fulfilled on pods/binding \"a\": pod a is already assigned to node \"n1\""
    );

    // Both run (the kubelet starts them); a budget of 2 forbids evicting either.
    common::eventually(10, "pods running", || async {
        let l = pods.list(&ListParams::default()).await.unwrap();
        l.items
            .iter()
            .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .then_some(())
    })
    .await;
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(client.clone());
    pdbs.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})).unwrap())
        .await
        .unwrap();
    let err = api_err(pods.evict("a", &EvictParams::default()).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (429, "TooManyRequests"));
    assert_eq!(
        err.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    assert!(pods.get("a").await.is_ok());
    // With minAvailable 1, one eviction goes through and the pod goes away.
    pdbs.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"minAvailable": 1}})),
    )
    .await
    .unwrap();
    let ok = pods.evict("a", &EvictParams::default()).await.unwrap();
    assert_eq!(ok.code, 201);
    common::eventually(10, "evicted pod gone", || async {
        pods.get_opt("a").await.unwrap().is_none().then_some(())
    })
    .await;
    let err = api_err(pods.evict("b", &EvictParams::default()).await.unwrap_err());
    assert_eq!(err.code, 429);
}

#[tokio::test]
async fn finalizers_hold_a_deletion_until_removed() {
    let h = common::single().await;
    let client = common::client(&h, "local").await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let mut c = cm("held", json!({}));
    c.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &c).await.unwrap();
    let pending = cms.delete("held", &DeleteParams::default()).await.unwrap();
    let obj = pending.left().expect("the object, still there");
    assert!(obj.metadata.deletion_timestamp.is_some());
    let err = api_err(
        cms.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold", "new"]}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(cms.get_opt("held").await.unwrap().is_none());

    // deletecollection by label.
    for i in 0..4 {
        cms.create(
            &PostParams::default(),
            &cm(
                &format!("x{i}"),
                json!({"group": if i < 3 { "a" } else { "b" }}),
            ),
        )
        .await
        .unwrap();
    }
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("group=a"),
    )
    .await
    .unwrap();
    assert_eq!(
        cms.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
}

#[tokio::test]
async fn a_bound_pod_is_deleted_after_its_grace_period() {
    let h = common::single_with(vec![common::node("n1", "8", 0)]).await;
    let pods: Api<Pod> = Api::default_namespaced(common::client(&h, "local").await);
    let mut p = pod("g", json!({}));
    p.spec.as_mut().unwrap().node_name = Some("n1".into());
    pods.create(&PostParams::default(), &p).await.unwrap();
    common::eventually(10, "running", || async {
        (pods
            .get("g")
            .await
            .unwrap()
            .status
            .and_then(|s| s.phase)
            .as_deref()
            == Some("Running"))
        .then_some(())
    })
    .await;
    let dp = DeleteParams {
        grace_period_seconds: Some(5),
        ..DeleteParams::default()
    };
    let terminating = pods.delete("g", &dp).await.unwrap().left().unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(5));
    common::eventually(10, "the kubelet removes the pod", || async {
        pods.get_opt("g").await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_pods_spec_is_immutable_but_for_images_and_nodes_come_through_binding() {
    let h = common::single().await;
    let pods: Api<Pod> = Api::default_namespaced(common::client(&h, "local").await);
    pods.create(&PostParams::default(), &pod("fixed", json!({})))
        .await
        .unwrap();
    let err = api_err(
        pods.patch(
            "fixed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nodeName": "n1"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("pod updates may not change fields"),
        "{}",
        err.message
    );
    let image = pods
        .patch(
            "fixed",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        image.spec.unwrap().containers[0].image.as_deref(),
        Some("busybox:2")
    );
}

#[tokio::test]
async fn an_object_created_for_owners_that_are_all_gone_is_collected() {
    let h = common::single().await;
    let c = h.client("local").await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(c);
    let owner = cms
        .create(&PostParams::default(), &cm("owner", json!({})))
        .await
        .unwrap();
    let owned_by = |name: &str, refs: Value| -> ConfigMap {
        let mut c = cm(name, json!({}));
        c.metadata.owner_references = Some(serde_json::from_value(refs).unwrap());
        c
    };
    let alive = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                        "uid": owner.metadata.uid.clone().unwrap()}]);
    let gone =
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "old-uid"}]);
    let unserved =
        json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u"}]);
    for (name, refs) in [("a", alive), ("b", gone), ("c", unserved)] {
        cms.create(&PostParams::default(), &owned_by(name, refs))
            .await
            .unwrap();
    }
    assert!(
        cms.get_opt("a").await.unwrap().is_some(),
        "its owner exists"
    );
    assert!(
        cms.get_opt("b").await.unwrap().is_none(),
        "its owner (that uid) is gone"
    );
    assert!(
        cms.get_opt("c").await.unwrap().is_some(),
        "a kind this server does not serve is taken to exist"
    );
}

#[tokio::test]
async fn a_dependent_of_two_owners_goes_only_with_the_last_and_loses_the_reference_to_the_first() {
    let h = common::single().await;
    let c = h.client("local").await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(c);
    let mut uids = Vec::new();
    for name in ["first", "second"] {
        let o = cms
            .create(&PostParams::default(), &cm(name, json!({})))
            .await
            .unwrap();
        uids.push(o.metadata.uid.unwrap());
    }
    let mut shared = cm("shared", json!({}));
    shared.metadata.owner_references = Some(
        serde_json::from_value(json!([
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "first", "uid": uids[0]},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "second", "uid": uids[1]}]))
        .unwrap(),
    );
    cms.create(&PostParams::default(), &shared).await.unwrap();
    cms.delete("first", &DeleteParams::default()).await.unwrap();
    let left = cms
        .get_opt("shared")
        .await
        .unwrap()
        .expect("an owner remains: the dependent stays");
    let refs: Vec<String> = left
        .metadata
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(
        refs,
        ["second"],
        "the reference to the absent owner is removed"
    );
    cms.delete("second", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        cms.get_opt("shared").await.unwrap().is_none(),
        "its last owner went"
    );
}

/// Any object may own any other, as kube-controller-manager's collector sees it: a Lease owned
/// by a pod goes with the pod, and a pod owned by a Lease goes with the Lease.
#[tokio::test]
async fn a_lease_owned_by_a_pod_goes_with_it_and_a_pod_owned_by_a_lease_with_that() {
    let h = common::single().await;
    let client = common::client(&h, "local").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "default");
    let owner = pods
        .create(&PostParams::default(), &pod("owner", json!({})))
        .await
        .unwrap();
    let owned_by = |kind: &str, name: &str, uid: Option<String>| {
        json!([{"apiVersion": if kind == "Pod" { "v1" } else { "coordination.k8s.io/v1" },
            "kind": kind, "name": name, "uid": uid}])
    };
    let lease = leases
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "held",
                "ownerReferences": owned_by("Pod", "owner", owner.metadata.uid.clone())},
                "spec": {"holderIdentity": "a"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let mut dependent = pod("dependent", json!({}));
    dependent.metadata.owner_references =
        serde_json::from_value(owned_by("Lease", "held", lease.metadata.uid.clone())).unwrap();
    pods.create(&PostParams::default(), &dependent)
        .await
        .unwrap();
    pods.delete("owner", &DeleteParams::default())
        .await
        .unwrap();
    for _ in 0..100 {
        let lease_gone = leases.get_opt("held").await.unwrap().is_none();
        let pod_gone = pods.get_opt("dependent").await.unwrap().is_none();
        if lease_gone && pod_gone {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the lease and its pod were not collected after their owner went");
}
