//! The PodGroup controller against a one-member devcluster over real HTTP, with the scheduler
//! running: pods that come without a PodGroup (a Deployment's, through its ReplicaSet; a bare
//! pod) get one as Volcano's controller makes it, and run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use tephra_api::PodGroup;
use tephra_kube::bare_pods::{self, BarePodOptions};
use tephra_kube::leader::Leadership;

fn pod(name: &str, owner: Option<&str>, scheduler: &str) -> Pod {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
            "annotations": {"scheduling.volcano.sh/queue-name": "default",
                "tephra.io/sim-duration": "1h"}},
        "spec": {"schedulerName": scheduler, "priorityClassName": "",
            "containers": [{"name": "web", "image": "nginx",
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}
    });
    if let Some(uid) = owner {
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "name": "web-5d8f", "uid": uid, "controller": true, "blockOwnerDeletion": true}]);
    }
    serde_json::from_value(p).unwrap()
}

fn group_of(p: &Pod) -> Option<String> {
    p.metadata
        .annotations
        .as_ref()?
        .get("scheduling.k8s.io/group-name")
        .cloned()
}

on_both!(
    a_replica_sets_pods_get_one_podgroup_and_run,
    a_replica_sets_pods_get_one_podgroup_and_run
);
async fn a_replica_sets_pods_get_one_podgroup_and_run(backend: Backend) {
    logs();
    // On kube-apiserver the owner must exist, or the garbage collector deletes its pods;
    // without its controller, so that nothing but this test makes or removes its pods. The
    // devcluster serves no ReplicaSets and collects nothing for an owner it does not know.
    let options = tephra_envtest::ClusterOptions {
        controllers: Some("*,-replicaset-controller".into()),
        ..Default::default()
    };
    let Some(cl) = cluster_on_with(backend, vec![node("n0", "4", 0)], options).await else {
        return;
    };
    let c = cl.client.clone();
    let owner_uid = match backend {
        Backend::Devcluster => "rs-1".to_string(),
        Backend::KubeApiserver => {
            let rs: Api<k8s_openapi::api::apps::v1::ReplicaSet> =
                Api::namespaced(c.clone(), "default");
            let rs = rs
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(json!({
                        "apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "metadata": {"name": "web-5d8f", "namespace": "default"},
                        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                            "template": {"metadata": {"labels": {"app": "web"}},
                                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}
                    }))
                    .unwrap(),
                )
                .await
                .unwrap();
            rs.metadata.uid.unwrap()
        }
    };
    let pg_name = format!("podgroup-{owner_uid}");
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    let ctl = bare_pods::start(c.clone(), BarePodOptions::default(), Leadership::always());
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    for name in ["web-5d8f-a", "web-5d8f-b"] {
        pods.create(
            &PostParams::default(),
            &pod(name, Some(&owner_uid), "volcano"),
        )
        .await
        .unwrap();
    }
    pods.create(
        &PostParams::default(),
        &pod("other", None, "default-scheduler"),
    )
    .await
    .unwrap();
    let pgs: Api<PodGroup> = Api::namespaced(c.clone(), "default");
    let pg = eventually(20, "the ReplicaSet's PodGroup", || async {
        pgs.get(&pg_name).await.ok()
    })
    .await;
    assert_eq!(pg.spec.min_member, Some(1));
    assert_eq!(pg.spec.queue, "default");
    let owner = &pg.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("ReplicaSet", owner_uid.as_str())
    );
    assert_eq!(pg.spec.min_resources.unwrap()["cpu"].0, "500m");
    eventually(20, "both pods running in the PodGroup", || async {
        let mut ok = true;
        for name in ["web-5d8f-a", "web-5d8f-b"] {
            let p = pods.get(name).await.ok()?;
            let running = p.status.as_ref()?.phase.as_deref() == Some("Running");
            ok &= running && group_of(&p).as_deref() == Some(pg_name.as_str());
        }
        ok.then_some(())
    })
    .await;
    let other = pods.get("other").await.unwrap();
    assert_eq!(
        group_of(&other),
        None,
        "another scheduler's pod is left alone"
    );
    for t in ctl {
        t.abort();
    }
    sched.stop().await;
}

on_both!(
    a_bare_pod_owns_its_podgroup_and_takes_it_along_when_deleted,
    a_bare_pod_owns_its_podgroup_and_takes_it_along_when_deleted
);
async fn a_bare_pod_owns_its_podgroup_and_takes_it_along_when_deleted(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "4", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let ctl = bare_pods::start(c.clone(), BarePodOptions::default(), Leadership::always());
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let created = pods
        .create(&PostParams::default(), &pod("solo", None, "volcano"))
        .await
        .unwrap();
    let want = format!("podgroup-{}", created.metadata.uid.unwrap());
    let pgs: Api<PodGroup> = Api::namespaced(c.clone(), "default");
    eventually(20, "the pod's PodGroup, named in the pod", || async {
        let p = pods.get("solo").await.ok()?;
        let named = group_of(&p)?;
        pgs.get(&named).await.ok()?;
        (named == want).then_some(())
    })
    .await;
    pods.delete("solo", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    // The garbage collector of a real controller manager finds a new CRD's objects at its next
    // discovery resync (every 30 s), so it may take that long there.
    eventually(60, "the PodGroup gone with its pod", || async {
        pgs.get(&want).await.is_err().then_some(())
    })
    .await;
    for t in ctl {
        t.abort();
    }
}

on_both!(
    a_pod_naming_a_podgroup_that_does_not_exist_is_told_and_runs_once_it_does,
    a_pod_naming_a_podgroup_that_does_not_exist_is_told_and_runs_once_it_does
);
async fn a_pod_naming_a_podgroup_that_does_not_exist_is_told_and_runs_once_it_does(
    backend: Backend,
) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_everything(&c).await;
    create_pod(&c, "default", "lost-0", Some("nowhere"), 0, "volcano").await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let condition = eventually(20, "the pod told why it waits", || async {
        let p = pods.get("lost-0").await.ok()?;
        p.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("PodGroupNotFound"))
    })
    .await;
    assert_eq!(condition.status, "False");
    let message = condition.message.unwrap_or_default();
    assert!(
        message.contains("scheduling.k8s.io/group-name") && message.contains("\"nowhere\""),
        "{message}"
    );
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(c.clone(), "default");
    let told = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("PodGroupNotFound"))
        .count();
    assert_eq!(told, 1, "one Event, not one a session");
    let pgs: Api<tephra_api::PodGroup> = Api::namespaced(c.clone(), "default");
    pgs.create(
        &Default::default(),
        &serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "nowhere", "namespace": "default"},
            "spec": {"minMember": 1, "queue": "default"}}))
        .unwrap(),
    )
    .await
    .unwrap();
    all_bound(&c, "default", "lost-", 1, 20).await;
    stop_everything(sched, ctl).await;
}
