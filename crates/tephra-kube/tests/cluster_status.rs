//! The cluster status and taint controllers against a devcluster fleet over real HTTP: every
//! member's Cluster gets a Ready condition, its version and its node and resource summaries; a
//! member whose API server stops turns Unknown once the failure threshold has passed, takes
//! the unreachable NoSchedule taint and then its NoExecute variant, and is Ready and untainted
//! again after it comes back; a Pull-mode Cluster is refused with a condition saying why.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use kube::api::{Api, PostParams};
use tephra_api::Cluster;
use tephra_controllers::cluster_health::Thresholds;
use tephra_kube::cluster_status::{self, ClusterStatusOptions};
use tephra_kube::leader::Leadership;

async fn fleet(backend: Backend) -> Option<TestFleet> {
    fleet_on(backend, &[("east", 0), ("west", 0)]).await
}

fn options() -> ClusterStatusOptions {
    ClusterStatusOptions {
        period: Duration::from_millis(100),
        thresholds: Thresholds {
            failure_ms: 400,
            success_ms: 400,
        },
        no_execute_after: Some(Duration::from_millis(800)),
    }
}

fn ready_of(c: &Cluster) -> Option<String> {
    c.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

fn taints_of(c: &Cluster) -> Vec<String> {
    c.spec
        .taints
        .iter()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect()
}

async fn cluster_where(
    clusters: &Api<Cluster>,
    name: &str,
    what: &str,
    check: impl Fn(&Cluster) -> bool,
) -> Cluster {
    eventually(20, &format!("{name}: {what}"), || async {
        let c = clusters.get(name).await.ok()?;
        check(&c).then_some(c)
    })
    .await
}

on_both!(
    a_stopped_member_turns_unknown_is_tainted_and_recovers,
    a_stopped_member_turns_unknown_is_tainted_and_recovers
);
async fn a_stopped_member_turns_unknown_is_tainted_and_recovers(backend: Backend) {
    logs();
    let Some(dev) = fleet(backend).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let ctl = cluster_status::start(cp.clone(), options(), Leadership::always());
    let clusters: Api<Cluster> = Api::all(cp.clone());
    let east = cluster_where(&clusters, "east", "Ready with summaries", |c| {
        ready_of(c).as_deref() == Some("True")
            && c.status
                .as_ref()
                .and_then(|s| s.node_summary.as_ref())
                .is_some_and(|n| n.total_num == 2 && n.ready_num == 2)
    })
    .await;
    let status = east.status.clone().unwrap();
    assert!(status.kubernetes_version.is_some());
    let summary = status.resource_summary.unwrap();
    assert_eq!(summary.allocatable["cpu"].0, "32");
    assert!(taints_of(&east).is_empty());

    dev.stop_member("east").await.unwrap();
    let down = cluster_where(&clusters, "east", "Unknown and tainted", |c| {
        ready_of(c).as_deref() == Some("Unknown")
            && taints_of(c) == ["cluster.tephra.io/unreachable:NoSchedule"]
    })
    .await;
    let reason = &down.status.unwrap().conditions[0];
    assert_eq!(reason.reason, "ClusterNotReachable");
    cluster_where(
        &clusters,
        "east",
        "the NoExecute taint after its grace",
        |c| taints_of(c).contains(&"cluster.tephra.io/unreachable:NoExecute".to_string()),
    )
    .await;
    let west = clusters.get("west").await.unwrap();
    assert_eq!(
        ready_of(&west).as_deref(),
        Some("True"),
        "the other member is untouched"
    );

    dev.restore_member("east").await.unwrap();
    cluster_where(&clusters, "east", "Ready and untainted again", |c| {
        ready_of(c).as_deref() == Some("True") && taints_of(c).is_empty()
    })
    .await;
    for t in ctl {
        t.abort();
    }
}

on_both!(
    a_pull_mode_cluster_is_refused_with_a_condition_saying_why,
    a_pull_mode_cluster_is_refused_with_a_condition_saying_why
);
async fn a_pull_mode_cluster_is_refused_with_a_condition_saying_why(backend: Backend) {
    logs();
    let Some(dev) = fleet(backend).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let clusters: Api<Cluster> = Api::all(cp.clone());
    let pull: Cluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "cluster.tephra.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": "edge"}, "spec": {"syncMode": "Pull"}
    }))
    .unwrap();
    clusters
        .create(&PostParams::default(), &pull)
        .await
        .unwrap();
    let ctl = cluster_status::start(cp.clone(), options(), Leadership::always());
    // The condition and the taint are two writes: wait for both.
    let edge = cluster_where(&clusters, "edge", "refused and tainted", |c| {
        ready_of(c).as_deref() == Some("False") && !taints_of(c).is_empty()
    })
    .await;
    let cond = edge.status.clone().unwrap().conditions[0].clone();
    assert!(
        cond.message.contains("syncMode Pull is not supported"),
        "{}",
        cond.message
    );
    assert_eq!(taints_of(&edge), ["cluster.tephra.io/not-ready:NoSchedule"]);
    for t in ctl {
        t.abort();
    }
}

fn podgroup_json(name: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": 1, "queue": "default"}})
}

fn binding_json(name: &str, cluster: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "work.tephra.io/v1alpha1", "kind": "ResourceBinding",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"resource": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                              "namespace": "default", "name": name},
                 "clusters": [{"name": cluster, "tasks": {"w": 1}}]}})
}

on_both!(
    the_taint_manager_takes_an_untolerating_job_off_a_dead_member,
    the_taint_manager_takes_an_untolerating_job_off_a_dead_member
);
async fn the_taint_manager_takes_an_untolerating_job_off_a_dead_member(backend: Backend) {
    logs();
    let Some(dev) = fleet(backend).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let tolerant = serde_json::json!({"apiVersion": "policy.tephra.io/v1alpha1",
        "kind": "PropagationPolicy", "metadata": {"name": "patient", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup", "name": "patient"}],
                 "placement": {"clusterTolerations": [{"key": "cluster.tephra.io/unreachable",
                    "operator": "Exists", "effect": "NoExecute"}]}}});
    for o in [
        podgroup_json("hasty"),
        podgroup_json("patient"),
        binding_json("hasty", "east"),
        binding_json("patient", "east"),
        tolerant,
    ] {
        tephra_envtest::objects::create(&cp, &o).await.unwrap();
    }
    let mut ctl = cluster_status::start(cp.clone(), options(), Leadership::always());
    ctl.extend(tephra_kube::failover::start(
        cp.clone(),
        Default::default(),
        Leadership::always(),
    ));
    let clusters: Api<Cluster> = Api::all(cp.clone());
    cluster_where(&clusters, "east", "Ready", |c| {
        ready_of(c).as_deref() == Some("True")
    })
    .await;
    dev.stop_member("east").await.unwrap();
    let rbs: Api<tephra_api::ResourceBinding> = Api::namespaced(cp.clone(), "default");
    let moved = eventually(20, "hasty taken off east", || async {
        let rb = rbs.get("hasty").await.ok()?;
        rb.spec.clusters.is_empty().then_some(rb)
    })
    .await;
    let task = &moved.spec.graceful_eviction_tasks[0];
    assert_eq!(
        (task.from_cluster.as_str(), task.producer.as_str()),
        ("east", "TaintManager")
    );
    let kept = rbs.get("patient").await.unwrap();
    assert_eq!(
        kept.spec.clusters.len(),
        1,
        "a job that tolerates the taint stays"
    );
    assert!(kept.spec.graceful_eviction_tasks.is_empty());
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(cp.clone(), "default");
    let said = events.list(&Default::default()).await.unwrap().items;
    assert!(
        said.iter()
            .any(|e| e.reason.as_deref() == Some("TaintEviction")
                && e.involved_object.name.as_deref() == Some("hasty")),
        "an Event on the PodGroup says why"
    );
    for t in ctl {
        t.abort();
    }
}
