//! A conformance-style suite through kube-rs `Api` calls over HTTPS: CRUD, conflicts, every
//! patch type, selectors, pagination, binding and eviction, CRD admission, finalizers, the
//! status subresource, discovery, auth, and watches (resumed from a resourceVersion, and a 410
//! followed by a relist).

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

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
async fn crd_admission_refuses_a_broken_manifest_naming_the_field() {
    let h = common::single().await;
    let client = common::client(&h, "local").await;
    let jobs = jobs(&client, "default");
    let broken: DynamicObject =
        serde_json::from_value(manifest("tests/broken/job-negative-replicas.yaml")).unwrap();
    let err = api_err(
        jobs.create(&PostParams::default(), &broken)
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert!(
        err.message
            .starts_with("Job.batch.volcano.sh \"broken\" is invalid: spec.tasks[0].replicas"),
        "{}",
        err.message
    );
    let details = err.details.unwrap();
    assert_eq!(details.causes[0].field, "spec.tasks[0].replicas");

    // Unknown fields: refused with Strict field validation, pruned otherwise.
    let misspelled = manifest("tests/broken/job-misspelled-field.yaml");
    let strict = PatchParams::apply("test").validation_strict();
    let err = api_err(
        jobs.patch("broken", &strict, &Patch::Apply(misspelled.clone()))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 400);
    assert!(
        err.message.contains("unknown field \"spec.minAvailble\""),
        "{}",
        err.message
    );
    let pruned = jobs
        .create(
            &PostParams::default(),
            &serde_json::from_value(misspelled).unwrap(),
        )
        .await
        .unwrap();
    assert!(pruned.data["spec"].get("minAvailble").is_none());
    // Schema defaults apply.
    assert_eq!(pruned.data["spec"]["queue"], "default");
}

#[tokio::test]
async fn custom_resources_follow_generation_and_the_status_subresource() {
    let h = common::single().await;
    let q = queues(&common::client(&h, "local").await);
    let created = q
        .create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}, "spec": {}, "status": {"state": "Bogus"}})).unwrap())
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["weight"], 1, "schema default");
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create"
    );
    assert_eq!(created.metadata.generation, Some(1));
    let labelled = q
        .patch(
            "q",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1));
    let spec = q
        .patch(
            "q",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"weight": 4}, "status": {"state": "Ignored"}})),
        )
        .await
        .unwrap();
    assert_eq!(spec.metadata.generation, Some(2));
    assert!(
        spec.data.get("status").is_none(),
        "the main resource ignores status"
    );
    let status = q
        .patch_status(
            "q",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"state": "Open"}, "spec": {"weight": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(status.data["status"]["state"], "Open");
    assert_eq!(
        status.data["spec"]["weight"], 4,
        "the status subresource ignores spec"
    );
    assert_eq!(status.metadata.generation, Some(2));
    // A status replace that leaves out the spec and adds a field of its own changes only
    // the status.
    let body = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "q", "resourceVersion": status.metadata.resource_version,
                     "labels": {"ignored": "yes"}},
        "extra": true, "status": {"state": "Closed"}});
    let replaced = q
        .replace_status(
            "q",
            &PostParams::default(),
            &serde_json::from_value(body).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(replaced.data["status"]["state"], "Closed");
    assert_eq!(replaced.data["spec"]["weight"], 4, "spec kept");
    assert!(
        replaced.data.get("extra").is_none(),
        "no new top-level field"
    );
    assert_eq!(replaced.metadata.labels, labelled.metadata.labels);
    assert_eq!(replaced.metadata.generation, Some(2));
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
async fn a_watch_resumes_from_a_resource_version_without_gaps_or_repeats() {
    let h = common::single().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(common::client(&h, "local").await);
    cms.create(&PostParams::default(), &cm("w0", json!({})))
        .await
        .unwrap();
    let list = cms.list(&ListParams::default()).await.unwrap();
    let start = list.metadata.resource_version.unwrap();
    for i in 1..=3 {
        cms.create(&PostParams::default(), &cm(&format!("w{i}"), json!({})))
            .await
            .unwrap();
    }
    let wp = WatchParams::default().timeout(2);
    let mut stream = cms.watch(&wp, &start).await.unwrap().boxed();
    let mut seen = Vec::new();
    while let Some(ev) = stream.try_next().await.unwrap() {
        if let WatchEvent::Added(c) = ev {
            seen.push(c.metadata.name.unwrap());
            if seen.len() == 2 {
                break;
            }
        }
    }
    assert_eq!(seen, vec!["w1", "w2"]);
    // Resume after w2: exactly w3, then a change made now.
    let w2_rv = cms
        .get("w2")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    cms.delete("w1", &DeleteParams::default()).await.unwrap();
    let mut resumed = cms.watch(&wp, &w2_rv).await.unwrap().boxed();
    let mut events = Vec::new();
    while let Some(ev) = resumed.try_next().await.unwrap() {
        match ev {
            WatchEvent::Added(c) => events.push(format!("ADDED {}", c.metadata.name.unwrap())),
            WatchEvent::Deleted(c) => events.push(format!("DELETED {}", c.metadata.name.unwrap())),
            _ => {}
        }
        if events.len() == 2 {
            break;
        }
    }
    assert_eq!(events, vec!["ADDED w3", "DELETED w1"]);
}

#[tokio::test]
async fn a_too_old_resource_version_gets_410_and_a_relist_recovers() {
    let mut options = Options::single();
    options.server = ServerOptions {
        history_limit: 5,
        ..ServerOptions::default()
    };
    let h = DevCluster::start(options).await.unwrap();
    let client = common::client(&h, "local").await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let first = cms
        .create(&PostParams::default(), &cm("old", json!({})))
        .await
        .unwrap();
    for i in 0..10 {
        cms.create(&PostParams::default(), &cm(&format!("n{i}"), json!({})))
            .await
            .unwrap();
    }
    let old_rv = first.metadata.resource_version.unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(2), &old_rv)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Error(e)) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert!(
                e.message.starts_with("too old resource version"),
                "{}",
                e.message
            );
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    // kube-rs's watcher re-lists on the 410 and ends up with every object.
    let relist = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(relist.items.len(), 11);
    let watcher = kube::runtime::watcher(cms.clone(), kube::runtime::watcher::Config::default());
    let objects = kube::runtime::reflector::store::<ConfigMap>();
    let (reader, writer) = objects;
    let reflector = kube::runtime::reflector(writer, watcher);
    let task = tokio::spawn(reflector.for_each(|_| async {}));
    cms.create(&PostParams::default(), &cm("late", json!({})))
        .await
        .unwrap();
    common::eventually(10, "the reflector sees every object", || {
        let n = reader.state().len();
        async move { (n == 12).then_some(()) }
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn bookmarks_carry_a_resource_version_to_resume_from() {
    let mut options = Options::single();
    options.server = ServerOptions {
        bookmark_interval: Duration::from_millis(100),
        ..ServerOptions::default()
    };
    let h = DevCluster::start(options).await.unwrap();
    let cms: Api<ConfigMap> = Api::default_namespaced(common::client(&h, "local").await);
    cms.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    let nodes: Api<Node> = Api::all(common::client(&h, "local").await);
    let _ = nodes.list(&ListParams::default()).await.unwrap();
    loop {
        if let Some(WatchEvent::Bookmark(b)) = stream.try_next().await.unwrap() {
            assert!(
                b.metadata.resource_version.parse::<u64>().unwrap() >= rv.parse::<u64>().unwrap()
            );
            break;
        }
    }
}

#[tokio::test]
async fn discovery_serves_built_in_kinds_and_crds_with_short_names() {
    let h = common::single().await;
    let client = common::client(&h, "local").await;
    for discovery in [
        Discovery::new(client.clone()).run().await.unwrap(),
        Discovery::new(client.clone())
            .run_aggregated()
            .await
            .unwrap(),
    ] {
        let (ar, caps) = discovery
            .resolve_gvk(&GroupVersionKind::gvk(
                "batch.volcano.sh",
                "v1alpha1",
                "Job",
            ))
            .expect("jobs served");
        assert_eq!(ar.plural, "jobs");
        assert!(
            caps.subresources
                .iter()
                .any(|(s, _)| s.plural == "jobs/status" || s.plural == "status")
        );
        assert!(
            discovery
                .resolve_gvk(&GroupVersionKind::gvk(
                    "policy",
                    "v1",
                    "PodDisruptionBudget"
                ))
                .is_some()
        );
        assert!(
            discovery
                .resolve_gvk(&GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"))
                .is_some()
        );
    }
}

#[tokio::test]
async fn a_crd_applied_at_run_time_is_served_and_a_bad_rule_is_refused() {
    let h = common::single().await;
    let client = common::client(&h, "local").await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = |rule: &str| -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 3}},
                                 "x-kubernetes-validations": [{"rule": rule, "message": "size must be below 10"}]}}}}}]}
        }))
        .unwrap()
    };
    let err = api_err(
        crds.create(&PostParams::default(), &crd("self.size <"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("compilation failed"),
        "{}",
        err.message
    );
    crds.create(&PostParams::default(), &crd("self.size < 10"))
        .await
        .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let w = widgets
        .create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}})).unwrap())
        .await
        .unwrap();
    assert_eq!(w.data["spec"]["size"], 3);
    let err = api_err(
        widgets
            .create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "big"}, "spec": {"size": 12}})).unwrap())
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("size must be below 10"),
        "{}",
        err.message
    );
    // Deleting the CRD stops serving its resources.
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let err = api_err(widgets.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(err.code, 404);
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
async fn health_checks_answer_and_streaming_lists_end_with_the_initial_events_bookmark() {
    let h = common::single().await;
    let client = common::client(&h, "local").await;
    for path in ["/healthz", "/readyz", "/livez"] {
        let req = http::Request::get(path).body(Vec::new()).unwrap();
        assert_eq!(client.request_text(req).await.unwrap(), "ok");
    }
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    for i in 0..3 {
        cms.create(&PostParams::default(), &cm(&format!("s{i}"), json!({})))
            .await
            .unwrap();
    }
    let config = kube::runtime::watcher::Config::default().streaming_lists();
    let mut events = kube::runtime::watcher(cms, config).boxed();
    let mut initial = 0;
    loop {
        match events.try_next().await.unwrap().unwrap() {
            kube::runtime::watcher::Event::InitApply(_) => initial += 1,
            kube::runtime::watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(initial, 3);
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
