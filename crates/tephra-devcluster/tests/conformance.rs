//! A conformance-style suite through kube-rs `Api` calls over HTTPS: CRUD, conflicts, every
//! patch type, selectors, pagination, binding and eviction, CRD admission, finalizers, the
//! status subresource, discovery, auth, and watches (resumed from a resourceVersion, and a 410
//! followed by a relist). Watches, CRDs and objects' lives (binding, eviction, finalizers,
//! garbage collection) have files of their own under `conformance/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;
#[path = "conformance/crds.rs"]
mod crds;
#[path = "conformance/lifecycle.rs"]
mod lifecycle;
#[path = "conformance/watches.rs"]
mod watches;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, EvictParams, GroupVersionKind, ListParams,
    Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::discovery::Discovery;
use serde_json::{Value, json};
use tephra_devcluster::{ApiServer, DevCluster, Options, ServerOptions};

fn api_err(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn pod(name: &str, labels: Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .unwrap()
}

fn cm(name: &str, labels: Value) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}),
    )
    .unwrap()
}

fn jobs(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("batch.volcano.sh", "v1alpha1", "Job"),
        "jobs",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn queues(client: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", "Queue"),
        "queues",
    );
    Api::all_with(client.clone(), &ar)
}

fn manifest(path: &str) -> Value {
    let file = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&file).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

#[tokio::test]
async fn create_get_list_replace_delete_with_server_set_metadata() {
    let h = common::single().await;
    let pods: Api<Pod> = Api::default_namespaced(common::client(&h, "local").await);
    let created = pods
        .create(&PostParams::default(), &pod("a", json!({"app": "x"})))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.generation, Some(1));
    assert_eq!(
        created.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    let rv: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();

    let mut generated = pod("", json!({}));
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("gen-".into());
    let g = pods
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let gname = g.metadata.name.unwrap();
    assert!(gname.starts_with("gen-") && gname.len() == 9, "{gname}");
    assert!(g.metadata.resource_version.unwrap().parse::<u64>().unwrap() > rv);

    let err = api_err(
        pods.create(&PostParams::default(), &pod("a", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(err.message, "pods \"a\" already exists");

    let got = pods.get("a").await.unwrap();
    let mut changed = got.clone();
    changed.metadata.labels = Some([("app".to_string(), "y".to_string())].into());
    let replaced = pods
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(replaced.metadata.labels.unwrap()["app"], "y");
    assert_eq!(replaced.metadata.uid, got.metadata.uid);

    assert_eq!(
        pods.list(&ListParams::default()).await.unwrap().items.len(),
        2
    );
    // An unbound pod goes at once; the deleted object comes back.
    let deleted = pods.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_left());
    let err = api_err(pods.get("a").await.unwrap_err());
    assert_eq!(
        (err.code, err.message.as_str()),
        (404, "pods \"a\" not found")
    );
}

#[tokio::test]
async fn a_stale_resource_version_is_a_conflict() {
    let h = common::single().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(common::client(&h, "local").await);
    let v1 = cms
        .create(&PostParams::default(), &cm("c", json!({})))
        .await
        .unwrap();
    let mut first = v1.clone();
    first.data = Some([("k".to_string(), "first".to_string())].into());
    cms.replace("c", &PostParams::default(), &first)
        .await
        .unwrap();
    let mut second = v1.clone();
    second.data = Some([("k".to_string(), "second".to_string())].into());
    let err = api_err(
        cms.replace("c", &PostParams::default(), &second)
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert!(
        err.message.contains("the object has been modified"),
        "{}",
        err.message
    );
    // A write that changes nothing keeps the resourceVersion.
    let now = cms.get("c").await.unwrap();
    let same = cms
        .replace("c", &PostParams::default(), &now)
        .await
        .unwrap();
    assert_eq!(
        same.metadata.resource_version,
        now.metadata.resource_version
    );
}

#[tokio::test]
async fn every_patch_type_applies() {
    let h = common::single().await;
    let client = common::client(&h, "local").await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let mut p = pod("p", json!({"a": "1"}));
    p.spec
        .as_mut()
        .unwrap()
        .containers
        .push(serde_json::from_value(json!({"name": "d", "image": "i0"})).unwrap());
    pods.create(&PostParams::default(), &p).await.unwrap();

    let merged = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": null, "b": "2"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        merged.metadata.labels.unwrap(),
        [("b".to_string(), "2".to_string())].into()
    );

    let ops: json_patch::Patch =
        serde_json::from_value(json!([{"op": "add", "path": "/metadata/labels/c", "value": "3"}]))
            .unwrap();
    let jp = pods
        .patch("p", &PatchParams::default(), &Patch::Json::<()>(ops))
        .await
        .unwrap();
    assert_eq!(jp.metadata.labels.unwrap()["c"], "3");
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/metadata/name", "value": "other"}]))
            .unwrap();
    let err = api_err(
        pods.patch("p", &PatchParams::default(), &Patch::Json::<()>(failing))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);

    // Strategic: containers merge by name.
    let smp = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"containers": [{"name": "d", "image": "i1"}]}})),
        )
        .await
        .unwrap();
    let containers = smp.spec.unwrap().containers;
    assert_eq!(containers.len(), 2);
    assert_eq!(containers[1].image.as_deref(), Some("i1"));
    assert_eq!(containers[0].image.as_deref(), Some("busybox"));

    // Custom resources take no strategic merge patch.
    let q = queues(&client);
    q.create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q1"}, "spec": {}})).unwrap())
        .await
        .unwrap();
    let err = api_err(
        q.patch(
            "q1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"weight": 2}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 415);

    // Server-side apply: creates, merges, records managers, and conflicts on another's field.
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let applied = cms
        .patch("cfg", &PatchParams::apply("alice"), &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}})))
        .await
        .unwrap();
    let managers = applied.metadata.managed_fields.unwrap();
    assert_eq!(managers[0].manager.as_deref(), Some("alice"));
    assert_eq!(managers[0].operation.as_deref(), Some("Apply"));
    let both = cms
        .patch("cfg", &PatchParams::apply("bob"), &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"b": "2"}})))
        .await
        .unwrap();
    assert_eq!(both.data.unwrap().len(), 2);
    let err = api_err(
        cms.patch("cfg", &PatchParams::apply("bob"), &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "changed"}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 409);
    assert!(
        err.message.contains("conflict with \"alice\"") && err.message.contains(".data.a"),
        "{}",
        err.message
    );
    let forced = cms
        .patch("cfg", &PatchParams::apply("bob").force(), &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "changed", "b": "2"}})))
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["a"], "changed");
}

#[tokio::test]
async fn label_and_field_selectors_and_chunked_lists() {
    let h = common::single().await;
    let client = common::client(&h, "local").await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for i in 0..25 {
        let tier = if i % 5 == 0 { "db" } else { "web" };
        cms.create(
            &PostParams::default(),
            &cm(
                &format!("cm-{i:02}"),
                json!({"tier": tier, "i": i.to_string()}),
            ),
        )
        .await
        .unwrap();
    }
    let db = cms
        .list(&ListParams::default().labels("tier=db"))
        .await
        .unwrap();
    assert_eq!(db.items.len(), 5);
    let not_db = cms
        .list(&ListParams::default().labels("tier!=db,i notin (1,2)"))
        .await
        .unwrap();
    assert_eq!(not_db.items.len(), 18);
    let one = cms
        .list(&ListParams::default().fields("metadata.name=cm-07"))
        .await
        .unwrap();
    assert_eq!(one.items.len(), 1);
    let err = api_err(
        cms.list(&ListParams::default().fields("spec.nope=1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 400);

    let mut names = Vec::new();
    let mut lp = ListParams::default().limit(10);
    let mut pages = 0;
    let mut first_rv = None;
    loop {
        let page = cms.list(&lp).await.unwrap();
        pages += 1;
        first_rv.get_or_insert(page.metadata.resource_version.clone());
        assert_eq!(page.metadata.resource_version, *first_rv.as_ref().unwrap());
        names.extend(page.items.iter().map(|c| c.metadata.name.clone().unwrap()));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(names.len(), 25);
    assert!(names.windows(2).all(|w| w[0] < w[1]));

    // Pods select by node, scheduler and phase too.
    let pods: Api<Pod> = Api::default_namespaced(client);
    let mut bound = pod("on-n1", json!({}));
    bound.spec.as_mut().unwrap().node_name = Some("n1".into());
    pods.create(&PostParams::default(), &bound).await.unwrap();
    pods.create(&PostParams::default(), &pod("free", json!({})))
        .await
        .unwrap();
    let on_n1 = pods
        .list(&ListParams::default().fields("spec.nodeName=n1"))
        .await
        .unwrap();
    assert_eq!(on_n1.items.len(), 1);
    let unbound = pods
        .list(
            &ListParams::default()
                .fields("spec.nodeName=,status.phase=Pending,spec.schedulerName=default-scheduler"),
        )
        .await
        .unwrap();
    assert_eq!(unbound.items.len(), 1);
    let all_ns: Api<Pod> = Api::all(common::client(&h, "local").await);
    assert_eq!(
        all_ns
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );
}

#[tokio::test]
async fn anything_but_the_token_is_unauthorized() {
    let h = common::single().await;
    let mut config = h.config("local").await.unwrap();
    config.auth_info.token = Some("wrong".to_string().into());
    config.default_retry = false;
    let pods: Api<Pod> = Api::default_namespaced(kube::Client::try_from(config).unwrap());
    let err = api_err(pods.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (401, "Unauthorized"));
}

#[test]
fn the_store_is_reachable_for_in_process_setup() {
    let api = ApiServer::new("x", ServerOptions::default());
    assert!(api.store.count("/namespaces") >= 4);
}

#[tokio::test]
async fn built_in_kinds_drop_or_refuse_fields_their_type_does_not_have() {
    let h = common::single().await;
    let client = common::client(&h, "local").await;
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Pod"), "pods");
    let pods: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let typo = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "typo"},
        "spec": {"containers": [{"name": "c", "image": "i", "resource": {"requests": {"cpu": "1"}}}]}});
    let err = api_err(
        pods.patch(
            "typo",
            &PatchParams::apply("t").validation_strict(),
            &Patch::Apply(typo.clone()),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 400);
    assert!(
        err.message
            .contains("unknown field \"spec.containers[0].resource\""),
        "{}",
        err.message
    );
    let created = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(typo).unwrap(),
        )
        .await
        .unwrap();
    assert!(
        created.data["spec"]["containers"][0]
            .get("resource")
            .is_none()
    );
    assert_eq!(created.data["spec"]["containers"][0]["image"], "i");
}
