//! Failover through the chain on a devcluster fleet: the member a gang runs in stops; the
//! cluster status controller turns it Unknown and taints it, the taint manager takes the job off
//! it, and the scheduler places the whole gang in the other member while the old copy still
//! counts where it was; when the member answers again, the old copy is deleted. A member that
//! comes back before the NoExecute grace keeps its gangs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use kube::api::Api;
use tephra_api::ResourceBinding;
use tephra_kube::cluster_status::{self, ClusterStatusOptions, Thresholds};
use tephra_kube::leader::Leadership;

async fn fleet(backend: Backend) -> Option<TestFleet> {
    fleet_on(backend, &[("east", 0), ("west", 0)]).await
}

/// The scheduler, the cluster status controller (NoExecute after `grace`) and the taint
/// manager on the fleet's control plane.
async fn start_chain(
    cp: &kube::Client,
    grace: Duration,
) -> (tephra_kube::Running, Vec<tokio::task::JoinHandle<()>>) {
    let sched = tephra_kube::start(
        cp.clone(),
        tephra_kube::Options {
            members: tephra_kube::MemberSource::Clusters,
            ..scheduler_options()
        },
    )
    .await
    .unwrap();
    let mut ctl = cluster_status::start(
        cp.clone(),
        ClusterStatusOptions {
            period: Duration::from_millis(100),
            thresholds: Thresholds {
                failure_ms: 300,
                success_ms: 300,
            },
            no_execute_after: Some(grace),
        },
        Leadership::always(),
    );
    ctl.extend(tephra_kube::failover::start(
        cp.clone(),
        Default::default(),
        Leadership::always(),
    ));
    (sched, ctl)
}

/// Places a gang of three and returns the member it runs in.
async fn placed_gang(dev: &TestFleet, cp: &kube::Client) -> String {
    gang(cp, "default", "llm", "default", 3, 3, 0).await;
    let rbs: Api<ResourceBinding> = Api::namespaced(cp.clone(), "default");
    let first = eventually(20, "the gang placed", || async {
        let rb = rbs.get("llm").await.ok()?;
        rb.spec.clusters.first().map(|c| c.name.clone())
    })
    .await;
    let there = dev.client(&first).await.unwrap();
    all_bound(&there, "default", "llm-", 3, 20).await;
    first
}

/// The member each gang's binding names (a gang runs in one member).
async fn placements(cp: &kube::Client, gangs: &[&str]) -> Option<BTreeMap<String, String>> {
    let rbs: Api<ResourceBinding> = Api::namespaced(cp.clone(), "default");
    let mut out = BTreeMap::new();
    for g in gangs {
        let rb = rbs.get(g).await.ok()?;
        let [one] = rb.spec.clusters.as_slice() else {
            return None;
        };
        out.insert(g.to_string(), one.name.clone());
    }
    Some(out)
}

on_both!(
    every_gang_on_a_member_that_stops_runs_whole_in_another_of_three,
    every_gang_on_a_member_that_stops_runs_whole_in_another_of_three
);
async fn every_gang_on_a_member_that_stops_runs_whole_in_another_of_three(backend: Backend) {
    logs();
    let Some(dev) = fleet_on(backend, &[("east", 0), ("west", 0), ("south", 0)]).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let (sched, ctl) = start_chain(&cp, Duration::from_millis(300)).await;
    let gangs = ["llm", "bert", "vit"];
    for g in gangs {
        gang(&cp, "default", g, "default", 3, 3, 0).await;
    }
    let before = eventually(20, "every gang placed", || placements(&cp, &gangs)).await;
    for (g, m) in &before {
        all_bound(
            &dev.client(m).await.unwrap(),
            "default",
            &format!("{g}-"),
            3,
            20,
        )
        .await;
    }
    let down = before["llm"].clone();
    let hit: Vec<&String> = before
        .iter()
        .filter(|(_, m)| **m == down)
        .map(|(g, _)| g)
        .collect();

    dev.stop_member(&down).await.unwrap();
    let after = eventually(
        30,
        "every gang of the stopped member placed elsewhere",
        || async {
            let now = placements(&cp, &gangs).await?;
            now.values().all(|m| *m != down).then_some(now)
        },
    )
    .await;
    for (g, m) in &after {
        if before[g] != down {
            assert_eq!(*m, before[g], "{g} ran elsewhere and stays");
        }
        // Whole, in one member.
        let placed = all_bound(
            &dev.client(m).await.unwrap(),
            "default",
            &format!("{g}-"),
            3,
            30,
        )
        .await;
        assert!(
            placed.values().flatten().all(|n| n.starts_with(m.as_str())),
            "{g}: {placed:?}"
        );
    }
    // The member answers again: the old copies go, since the new ones run whole, and no
    // gang is left with two.
    dev.restore_member(&down).await.unwrap();
    let there = dev.client(&down).await.unwrap();
    let rbs: Api<ResourceBinding> = Api::namespaced(cp.clone(), "default");
    for g in &hit {
        eventually(30, "the old copy deleted and the task done", || async {
            let left = nodes_of(&there, "default", &format!("{g}-")).await;
            let rb = rbs.get(g).await.ok()?;
            (left.is_empty() && rb.spec.graceful_eviction_tasks.is_empty()).then_some(())
        })
        .await;
    }
    assert_eq!(
        placements(&cp, &gangs).await,
        Some(after),
        "nothing moved again or was lost"
    );
    for t in ctl {
        t.abort();
    }
    sched.stop().await;
}

on_both!(
    a_member_back_before_the_no_execute_grace_keeps_its_gang,
    a_member_back_before_the_no_execute_grace_keeps_its_gang
);
async fn a_member_back_before_the_no_execute_grace_keeps_its_gang(backend: Backend) {
    logs();
    let Some(dev) = fleet(backend).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let (sched, ctl) = start_chain(&cp, Duration::from_secs(30)).await;
    let first = placed_gang(&dev, &cp).await;
    let clusters: Api<tephra_api::Cluster> = Api::all(cp.clone());
    dev.stop_member(&first).await.unwrap();
    eventually(20, "the member tainted NoSchedule", || async {
        let c = clusters.get(&first).await.ok()?;
        c.spec
            .taints
            .iter()
            .any(|t| t.key == "cluster.tephra.io/unreachable")
            .then_some(())
    })
    .await;
    dev.restore_member(&first).await.unwrap();
    eventually(20, "the member untainted", || async {
        let c = clusters.get(&first).await.ok()?;
        c.spec.taints.is_empty().then_some(())
    })
    .await;
    let rbs: Api<ResourceBinding> = Api::namespaced(cp.clone(), "default");
    let rb = rbs.get("llm").await.unwrap();
    assert_eq!(rb.spec.clusters[0].name, first, "no pointless move");
    assert!(rb.spec.graceful_eviction_tasks.is_empty());
    let there = dev.client(&first).await.unwrap();
    all_bound(&there, "default", "llm-", 3, 10).await;
    for t in ctl {
        t.abort();
    }
    sched.stop().await;
}

on_both!(
    purge_mode_never_keeps_the_old_copy,
    purge_mode_never_keeps_the_old_copy
);
async fn purge_mode_never_keeps_the_old_copy(backend: Backend) {
    logs();
    let Some(dev) = fleet(backend).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let never: tephra_api::PropagationPolicy = serde_json::from_value(serde_json::json!({
        "apiVersion": "policy.tephra.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "keep", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup", "name": "llm"}],
                 "placement": {},
                 "failover": {"cluster": {"purgeMode": "Never"}}}
    }))
    .unwrap();
    let policies: Api<tephra_api::PropagationPolicy> = Api::namespaced(cp.clone(), "default");
    policies.create(&Default::default(), &never).await.unwrap();
    let (sched, ctl) = start_chain(&cp, Duration::from_millis(300)).await;
    let first = placed_gang(&dev, &cp).await;
    let other = if first == "east" { "west" } else { "east" };
    let there = dev.client(&first).await.unwrap();
    dev.stop_member(&first).await.unwrap();
    let elsewhere = dev.client(other).await.unwrap();
    all_bound(&elsewhere, "default", "llm-", 3, 30).await;
    dev.restore_member(&first).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        nodes_of(&there, "default", "llm-").await.len(),
        3,
        "the old copy stays"
    );
    let rbs: Api<ResourceBinding> = Api::namespaced(cp.clone(), "default");
    let rb = rbs.get("llm").await.unwrap();
    assert_eq!(
        rb.spec.graceful_eviction_tasks.len(),
        1,
        "and so does its task"
    );
    for t in ctl {
        t.abort();
    }
    sched.stop().await;
}

on_both!(
    a_job_that_keeps_failing_in_a_member_moves_to_the_other,
    a_job_that_keeps_failing_in_a_member_moves_to_the_other
);
async fn a_job_that_keeps_failing_in_a_member_moves_to_the_other(backend: Backend) {
    logs();
    let Some(dev) = fleet(backend).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let policy: tephra_api::PropagationPolicy = serde_json::from_value(serde_json::json!({
        "apiVersion": "policy.tephra.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "move-on-failure", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup", "name": "crashy"}],
                 "placement": {},
                 "failover": {"application": {"decisionConditions": {"tolerationSeconds": 2},
                                              "purgeMode": "Directly"}}}
    }))
    .unwrap();
    let policies: Api<tephra_api::PropagationPolicy> = Api::namespaced(cp.clone(), "default");
    policies.create(&Default::default(), &policy).await.unwrap();
    let (sched, ctl) = start_chain(&cp, Duration::from_secs(60)).await;
    // Two pods that exit 1 shortly after they start.
    let objects = vec![
        serde_json::json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "crashy", "namespace": "default"},
            "spec": {"minMember": 2, "queue": "default"}}),
    ]
    .into_iter()
    .chain((0..2).map(|i| {
        serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("crashy-{i}"), "namespace": "default",
                "annotations": {"scheduling.k8s.io/group-name": "crashy",
                    "tephra.io/sim-duration": "200ms", "tephra.io/sim-exit-code": "1"}},
            "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "1"}}}]}})
    }))
    .collect::<Vec<_>>();
    for o in &objects {
        tephra_envtest::objects::create(&cp, o).await.unwrap();
    }
    let rbs: Api<ResourceBinding> = Api::namespaced(cp.clone(), "default");
    let first = eventually(20, "the gang placed", || async {
        let rb = rbs.get("crashy").await.ok()?;
        rb.spec.clusters.first().map(|c| c.name.clone())
    })
    .await;
    let other = if first == "east" { "west" } else { "east" };
    let moved = eventually(20, "moved off the member where it fails", || async {
        let rb = rbs.get("crashy").await.ok()?;
        let task = rb
            .spec
            .graceful_eviction_tasks
            .iter()
            .find(|t| t.from_cluster == first)?
            .clone();
        let now: Vec<String> = rb.spec.clusters.iter().map(|c| c.name.clone()).collect();
        (now == [other.to_string()]).then_some(task)
    })
    .await;
    assert_eq!(moved.producer, "ApplicationFailover");
    assert_eq!(moved.reason, "ApplicationFailure");
    for t in ctl {
        t.abort();
    }
    sched.stop().await;
}
