//! What the API server authorizes beyond a request's own verb, for a service account under
//! RBAC, as kube-apiserver does: an apply that creates needs `create`; changing an object's
//! owner references needs `delete` on it; a reference that blocks its owner's deletion needs
//! `update` on the owner's `finalizers` (OwnerReferencesPermissionEnforcement), and one whose
//! kind cannot be mapped is refused. Each refusal is a 403 worded as kube-apiserver words it.

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const SA: &str = "system:serviceaccount:default:app";

/// A client for the service account `default/app`, bound to a Role with `rules`.
async fn app_with(h: &tephra_devcluster::Handle, rules: Value) -> kube::Client {
    let admin = h.client("local").await.unwrap();
    let role: Value = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "app", "namespace": "default"}, "rules": rules});
    let binding: Value = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "app", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "app"},
        "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": "default"}]});
    for (plural, obj) in [("roles", role), ("rolebindings", binding)] {
        let ar = kube::api::ApiResource {
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            api_version: "rbac.authorization.k8s.io/v1".into(),
            kind: obj["kind"].as_str().unwrap().into(),
            plural: plural.into(),
        };
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(admin.clone(), "default", &ar);
        let o: kube::api::DynamicObject = serde_json::from_value(obj).unwrap();
        api.patch(
            o.metadata.name.as_deref().unwrap(),
            &PatchParams::apply("test").force(),
            &Patch::Apply(&o),
        )
        .await
        .unwrap();
    }
    let yaml = h
        .service_account_kubeconfig("local", "default", "app")
        .unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn refused(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("not an API error: {other}"),
    }
}

fn cm(name: &str, owners: Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "ownerReferences": owners},
        "data": {"k": "v"}}))
    .unwrap()
}

fn owned_by(api_version: &str, kind: &str, block: bool) -> Value {
    json!([{"apiVersion": api_version, "kind": kind, "name": "web", "uid": "u-1",
            "controller": true, "blockOwnerDeletion": block}])
}

#[tokio::test]
async fn an_apply_that_creates_needs_create_not_only_patch() {
    let h = common::single().await;
    let app = app_with(
        &h,
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["patch"]}]),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(app, "default");
    let apply = PatchParams::apply("app");
    let err = cms
        .patch("cfg", &apply, &Patch::Apply(cm("cfg", json!([]))))
        .await
        .unwrap_err();
    assert_eq!(
        refused(err),
        (
            403,
            format!(
                "configmaps \"cfg\" is forbidden: User \"{SA}\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
            )
        )
    );
    // Once the object exists, the same apply is an update, which `patch` allows.
    let admin: Api<ConfigMap> = Api::namespaced(h.client("local").await.unwrap(), "default");
    admin
        .create(&PostParams::default(), &cm("cfg", json!([])))
        .await
        .unwrap();
    cms.patch("cfg", &apply, &Patch::Apply(cm("cfg", json!([]))))
        .await
        .unwrap();
}

#[tokio::test]
async fn blocking_an_owners_deletion_needs_update_on_its_finalizers() {
    let h = common::single().await;
    let app = app_with(
        &h,
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(app.clone(), "default");
    let pp = PostParams::default();
    // A ReplicaSet owner (served by every real cluster, if not by this one).
    let err = cms
        .create(&pp, &cm("a", owned_by("apps/v1", "ReplicaSet", true)))
        .await
        .unwrap_err();
    assert_eq!(
        refused(err),
        (
            403,
            "configmaps \"a\" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: , <nil>".to_string()
        )
    );
    // Without blockOwnerDeletion, a create needs nothing more.
    cms.create(&pp, &cm("b", owned_by("apps/v1", "ReplicaSet", false)))
        .await
        .unwrap();
    // A kind no discovery maps is refused outright.
    let err = cms
        .create(&pp, &cm("c", owned_by("example.com/v1", "Widget", true)))
        .await
        .unwrap_err();
    let (code, message) = refused(err);
    assert_eq!(code, 403);
    assert!(
        message.contains("cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion example.com/v1 Kind Widget"),
        "{message}"
    );
    // With update on replicasets/finalizers, the blocking reference is allowed.
    let app = app_with(
        &h,
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
               {"apiGroups": ["apps"], "resources": ["replicasets/finalizers"], "verbs": ["update"]}]),
    )
    .await;
    Api::<ConfigMap>::namespaced(app, "default")
        .create(&pp, &cm("a", owned_by("apps/v1", "ReplicaSet", true)))
        .await
        .unwrap();
}

#[tokio::test]
async fn changing_an_objects_owner_references_needs_delete_on_it() {
    let h = common::single().await;
    let rules =
        |verbs: Value| json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]);
    let app = app_with(&h, rules(json!(["create", "patch"]))).await;
    let cms: Api<ConfigMap> = Api::namespaced(app, "default");
    cms.create(&PostParams::default(), &cm("cfg", json!([])))
        .await
        .unwrap();
    let adopt =
        Patch::Merge(json!({"metadata": {"ownerReferences": owned_by("v1", "ConfigMap", false)}}));
    let err = cms
        .patch("cfg", &PatchParams::default(), &adopt)
        .await
        .unwrap_err();
    assert_eq!(
        refused(err),
        (
            403,
            "configmaps \"cfg\" is forbidden: cannot set an ownerRef on a resource you can't delete: , <nil>".to_string()
        )
    );
    // A patch that leaves the references as they are needs nothing more.
    cms.patch(
        "cfg",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "w"}})),
    )
    .await
    .unwrap();
    let app = app_with(&h, rules(json!(["create", "patch", "delete"]))).await;
    Api::<ConfigMap>::namespaced(app, "default")
        .patch("cfg", &PatchParams::default(), &adopt)
        .await
        .unwrap();
}

/// As on kube-apiserver with kube-controller-manager, whose garbage collector works from its
/// informers: an object whose owner was deleted outlives it until the collector gets to it. A
/// client writing it meanwhile with a new owner of the same name (a PodGroup made anew)
/// changes its owner references, which needs `delete` on it; allowed, the object then stays,
/// since its owner exists when the collector looks.
#[tokio::test]
async fn moving_a_dependent_to_its_owners_successor_before_the_collector_ran_needs_delete() {
    let mut options = tephra_devcluster::Options::single();
    options.server.collector_lag = std::time::Duration::from_millis(500);
    let h = tephra_devcluster::DevCluster::start(options).await.unwrap();
    let admin: Api<ConfigMap> = Api::namespaced(h.client("local").await.unwrap(), "default");
    let pp = PostParams::default();
    let owner = |uid: &str| {
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "group", "uid": uid,
                "controller": true}])
    };
    let first = admin.create(&pp, &cm("group", json!([]))).await.unwrap();
    let first_uid = first.metadata.uid.unwrap();
    admin
        .create(&pp, &cm("binding", owner(&first_uid)))
        .await
        .unwrap();
    admin.delete("group", &Default::default()).await.unwrap();
    let second = admin.create(&pp, &cm("group", json!([]))).await.unwrap();
    let second_uid = second.metadata.uid.unwrap();
    let rules =
        |verbs: Value| json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]);
    let apply = PatchParams::apply("app").force();
    let moved = Patch::Apply(cm("binding", owner(&second_uid)));
    let app = app_with(&h, rules(json!(["create", "patch"]))).await;
    let err = Api::<ConfigMap>::namespaced(app, "default")
        .patch("binding", &apply, &moved)
        .await
        .unwrap_err();
    assert_eq!(
        refused(err),
        (
            403,
            "configmaps \"binding\" is forbidden: cannot set an ownerRef on a resource you can't delete: , <nil>".to_string()
        ),
        "the dependent is still there, owned by the deleted group"
    );
    let app = app_with(&h, rules(json!(["create", "patch", "delete"]))).await;
    Api::<ConfigMap>::namespaced(app, "default")
        .patch("binding", &apply, &moved)
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let kept = admin.get("binding").await.unwrap();
    assert_eq!(
        kept.metadata.owner_references.unwrap()[0].uid,
        second_uid,
        "the collector keeps a dependent whose owner exists"
    );
}
