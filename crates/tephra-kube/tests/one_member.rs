//! `tephra scheduler` against a one-member devcluster over real HTTP: gangs are bound all or
//! nothing, a gang too big waits with Volcano's Unschedulable condition and an Event, another
//! scheduler's pods still hold their capacity, and `/metrics` carries Volcano's names.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use tephra_api::scheduling::{PodGroupConditionType, PodGroupPhase};

on_both!(
    a_gang_that_fits_is_bound_whole_and_its_podgroup_runs,
    a_gang_that_fits_is_bound_whole_and_its_podgroup_runs
);
async fn a_gang_that_fits_is_bound_whole_and_its_podgroup_runs(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 4), node("n1", "8", 4)]).await else {
        return;
    };
    let c = cl.client.clone();
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    gang(&c, "default", "train", "default", 3, 3, 2).await;
    let bound = eventually(20, "all three pods bound", || async {
        let nodes = nodes_of(&c, "default", "train-").await;
        (nodes.len() == 3 && nodes.values().all(Option::is_some)).then_some(nodes)
    })
    .await;
    // 2 GPUs each on 4-GPU nodes: no node holds more than two of them.
    for n in ["n0", "n1"] {
        assert!(
            bound.values().filter(|v| v.as_deref() == Some(n)).count() <= 2,
            "{bound:?}"
        );
    }
    eventually(20, "the PodGroup Running with 3 running", || async {
        let pg = podgroup(&c, "default", "train").await;
        let s = pg.status?;
        (s.phase == Some(PodGroupPhase::Running) && s.running == 3).then_some(())
    })
    .await;
    // Each bound pod says where it went, as kube-scheduler's `Scheduled` Event says it.
    let events: Api<Event> = Api::namespaced(c.clone(), "default");
    for (pod, node) in &bound {
        let node = node.clone().unwrap();
        let want = format!("Successfully assigned default/{pod} to {node}");
        eventually(20, &format!("{pod}'s Scheduled Event"), || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("Scheduled")
                        && e.involved_object.name.as_deref() == Some(pod.as_str())
                        && e.message.as_deref() == Some(want.as_str())
                        && e.type_.as_deref() == Some("Normal")
                })
                .then_some(())
        })
        .await;
    }
    sched.stop().await;
}

on_both!(
    a_gang_too_big_for_the_cluster_binds_nothing_and_says_why,
    a_gang_too_big_for_the_cluster_binds_nothing_and_says_why
);
async fn a_gang_too_big_for_the_cluster_binds_nothing_and_says_why(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 4), node("n1", "8", 4)]).await else {
        return;
    };
    let c = cl.client.clone();
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    // Five pods of 2 GPUs need 10 GPUs; the cluster has 8.
    gang(&c, "default", "big", "default", 5, 5, 2).await;
    let cond = eventually(20, "an Unschedulable condition", || async {
        let pg = podgroup(&c, "default", "big").await;
        pg.status.and_then(|s| {
            s.conditions
                .into_iter()
                .find(|c| c.type_ == PodGroupConditionType::Unschedulable && c.status == "True")
        })
    })
    .await;
    let message = cond.message.unwrap_or_default();
    assert!(
        message.contains("nvidia.com/gpu") || message.contains("gang"),
        "{message}"
    );
    // Several more sessions: still nothing bound (all or nothing).
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    let nodes = nodes_of(&c, "default", "big-").await;
    assert_eq!(nodes.len(), 5);
    assert!(
        nodes.values().all(Option::is_none),
        "part of a gang was bound: {nodes:?}"
    );
    let events: Api<Event> = Api::namespaced(c.clone(), "default");
    let said: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some("big")
                && e.reason.as_deref() == Some("NotEnoughResources")
        })
        .collect();
    // (A session may first see the PodGroup with only some of its pods created, and say so
    // once: on a real API server the pods arrive one request at a time.)
    assert_eq!(
        said.len(),
        1,
        "one Event while the reason stays the same: {said:?}"
    );
    // Each waiting pod says why too, as Volcano and kube-scheduler say it: PodScheduled False,
    // Unschedulable, and one FailedScheduling Event each with the gang's reason.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.clone(), "default");
    for i in 0..5 {
        let name = format!("big-worker-{i}");
        let cond = eventually(20, &format!("{name} Unschedulable"), || async {
            let p = pods.get(&name).await.ok()?;
            p.status?.conditions?.into_iter().find(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
                    && c.message
                        .as_deref()
                        .is_some_and(|m| m.contains("nvidia.com/gpu"))
            })
        })
        .await;
        assert!(cond.message.unwrap().contains("gang"));
    }
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let failed: Vec<Event> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some("FailedScheduling")
                && e.involved_object.kind.as_deref() == Some("Pod")
                && e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("nvidia.com/gpu"))
        })
        .collect();
    assert_eq!(
        failed.len(),
        5,
        "one FailedScheduling Event a pod: {failed:?}"
    );
    sched.stop().await;
}

on_both!(
    another_schedulers_pods_keep_their_capacity,
    another_schedulers_pods_keep_their_capacity
);
async fn another_schedulers_pods_keep_their_capacity(backend: Backend) {
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 4)]).await else {
        return;
    };
    let c = cl.client.clone();
    // A pod of the default scheduler already holds 4 GPUs on the only node.
    create_pod(&c, "default", "theirs", None, 4, "default-scheduler").await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(c.clone(), "default");
    let binding = serde_json::json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "theirs"}, "target": {"kind": "Node", "name": "n0"}});
    pods.create_subresource::<_, serde_json::Value>(
        "binding",
        "theirs",
        &Default::default(),
        &binding,
    )
    .await
    .unwrap();
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    gang(&c, "default", "ours", "default", 1, 1, 1).await;
    eventually(20, "an Unschedulable condition", || async {
        let pg = podgroup(&c, "default", "ours").await;
        pg.status.and_then(|s| {
            s.conditions
                .into_iter()
                .find(|c| c.type_ == PodGroupConditionType::Unschedulable)
        })
    })
    .await;
    let nodes = nodes_of(&c, "default", "ours-").await;
    assert!(nodes.values().all(Option::is_none), "{nodes:?}");
    sched.stop().await;
}

on_both!(
    metrics_carry_volcanos_names_and_labels,
    metrics_carry_volcanos_names_and_labels
);
async fn metrics_carry_volcanos_names_and_labels(backend: Backend) {
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 4)]).await else {
        return;
    };
    let c = cl.client.clone();
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    let addr = sched.metrics_addr.unwrap();
    gang(&c, "default", "fits", "default", 1, 1, 1).await;
    gang(&c, "default", "waits", "default", 1, 1, 8).await;
    all_bound(&c, "default", "fits-", 1, 20).await;
    eventually(20, "ready", || async {
        (http_get(addr, "/readyz").await.0 == 200).then_some(())
    })
    .await;
    let body = eventually(20, "an unschedulable job counted", || async {
        let (code, body) = http_get(addr, "/metrics").await;
        (code == 200 && body.contains("volcano_unschedule_task_count{job_id=\"default/waits\"}"))
            .then_some(body)
    })
    .await;
    let samples = parse(&body);
    for (name, labels) in [
        ("volcano_e2e_scheduling_latency_milliseconds_count", vec![]),
        (
            "volcano_e2e_job_scheduling_latency_milliseconds_count",
            vec![],
        ),
        (
            "volcano_action_scheduling_latency_milliseconds_count",
            vec!["action"],
        ),
        (
            "volcano_plugin_scheduling_latency_milliseconds_count",
            vec!["plugin", "OnSession"],
        ),
        ("volcano_task_scheduling_latency_milliseconds_count", vec![]),
        ("volcano_schedule_attempts_total", vec!["result"]),
        ("volcano_pod_preemption_victims", vec![]),
        ("volcano_total_preemption_attempts", vec![]),
        ("volcano_unschedule_task_count", vec!["job_id"]),
        ("volcano_unschedule_job_count", vec![]),
        ("volcano_queue_allocated_milli_cpu", vec!["queue_name"]),
        ("volcano_queue_allocated_memory_bytes", vec!["queue_name"]),
        (
            "volcano_queue_allocated_scalar_resources",
            vec!["queue_name", "resource"],
        ),
        ("volcano_queue_request_milli_cpu", vec!["queue_name"]),
        ("volcano_queue_deserved_milli_cpu", vec!["queue_name"]),
        ("volcano_queue_share", vec!["queue_name"]),
        ("volcano_queue_weight", vec!["queue_name"]),
        ("volcano_queue_overused", vec!["queue_name"]),
        ("volcano_queue_pod_group_inqueue_count", vec!["queue_name"]),
        ("volcano_queue_pod_group_pending_count", vec!["queue_name"]),
        ("volcano_queue_pod_group_running_count", vec!["queue_name"]),
        ("volcano_queue_pod_group_unknown_count", vec!["queue_name"]),
        (
            "volcano_queue_pod_group_completed_count",
            vec!["queue_name"],
        ),
        ("tephra_cluster_ready", vec!["cluster"]),
        ("tephra_cluster_nodes", vec!["cluster"]),
        ("tephra_cluster_allocatable", vec!["cluster", "resource"]),
        ("tephra_cluster_allocated", vec!["cluster", "resource"]),
        (
            "tephra_session_phase_duration_milliseconds_count",
            vec!["phase"],
        ),
        ("tephra_executor_queue_depth", vec![]),
        (
            "tephra_executor_write_latency_milliseconds_count",
            vec!["verb"],
        ),
        ("tephra_leader", vec![]),
        ("tephra_config_last_reload_successful", vec![]),
    ] {
        let found = samples.iter().find(|(n, _, _)| n == name);
        let (_, l, _) = found.unwrap_or_else(|| panic!("{name} missing from /metrics:\n{body}"));
        for want in labels {
            assert!(
                l.iter().any(|(k, _)| k == want),
                "{name} lacks label {want}: {l:?}"
            );
        }
    }
    let value = |name: &str, label: (&str, &str)| {
        samples
            .iter()
            .find(|(n, l, _)| n == name && l.iter().any(|(k, v)| k == label.0 && v == label.1))
            .map(|(_, _, v)| *v)
    };
    assert_eq!(
        value(
            "volcano_queue_allocated_milli_cpu",
            ("queue_name", "default")
        ),
        Some(1000.0)
    );
    assert_eq!(
        value("volcano_schedule_attempts_total", ("result", "scheduled")),
        Some(1.0)
    );
    assert_eq!(
        value("tephra_cluster_nodes", ("cluster", "local")),
        Some(1.0)
    );
    // One latency series per plugin that does work when a session opens.
    let proportion = value(
        "volcano_plugin_scheduling_latency_milliseconds_count",
        ("plugin", "proportion"),
    );
    assert!(proportion.is_some_and(|v| v >= 1.0), "{proportion:?}");
    sched.stop().await;
}

/// One sample: name, labels, value.
type Sample = (String, Vec<(String, String)>, f64);

/// Parses Prometheus text: one sample per line.
fn parse(body: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (head, value) = line.rsplit_once(' ').expect("sample has a value");
        let value: f64 = value.parse().expect("value is a number");
        let (name, labels) = match head.split_once('{') {
            Some((n, rest)) => {
                let inner = rest.strip_suffix('}').expect("labels close");
                let labels = inner
                    .split("\",")
                    .filter(|s| !s.is_empty())
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').expect("label has =");
                        (k.to_string(), v.trim_matches('"').to_string())
                    })
                    .collect();
                (n.to_string(), labels)
            }
            None => (head.to_string(), Vec::new()),
        };
        out.push((name, labels, value));
    }
    out
}

#[tokio::test]
async fn two_queues_of_equal_weight_share_a_full_node_evenly() {
    let mut options = tephra_devcluster::Options::single();
    options.members[0].nodes = vec![node("n0", "16", 8)];
    options.queues = vec![queue_json("a", 1), queue_json("b", 1)];
    let dev = tephra_devcluster::DevCluster::start(options).await.unwrap();
    let c = client(&dev).await;
    // Eight one-GPU jobs in each queue, all waiting before the scheduler starts.
    for q in ["a", "b"] {
        for i in 0..8 {
            gang(&c, "default", &format!("{q}{i}"), q, 1, 1, 1).await;
        }
    }
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    let per_queue = eventually(20, "the node full", || async {
        let nodes = nodes_of(&c, "default", "").await;
        let bound: Vec<&String> = nodes
            .iter()
            .filter(|(_, n)| n.is_some())
            .map(|(p, _)| p)
            .collect();
        (bound.len() == 8).then(|| {
            (
                bound.iter().filter(|p| p.starts_with('a')).count(),
                bound.iter().filter(|p| p.starts_with('b')).count(),
            )
        })
    })
    .await;
    assert_eq!(per_queue, (4, 4), "each queue deserves half of the 8 GPUs");
    sched.stop().await;
}

on_both!(
    a_restarted_scheduler_rebuilds_from_lists_and_binds_nothing_twice,
    a_restarted_scheduler_rebuilds_from_lists_and_binds_nothing_twice
);
async fn a_restarted_scheduler_rebuilds_from_lists_and_binds_nothing_twice(backend: Backend) {
    let Some(cl) = cluster_on(backend, vec![node("n0", "16", 8), node("n1", "16", 8)]).await else {
        return;
    };
    let c = cl.client.clone();
    let first = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    gang(&c, "default", "before", "default", 4, 4, 2).await;
    all_bound(&c, "default", "before-", 4, 20).await;
    first.stop().await;
    gang(&c, "default", "after", "default", 4, 4, 2).await;
    let second = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    all_bound(&c, "default", "after-", 4, 20).await;
    // Let a few more sessions run over the bound pods.
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let m = &second.metrics;
    let binds = m
        .write_latency
        .with_label_values(&["bind"])
        .get_sample_count();
    assert_eq!(binds, 4, "only the new gang's pods are bound");
    assert_eq!(
        m.api_errors
            .with_label_values(&["local", "bind", "409"])
            .get(),
        0
    );
    second.stop().await;
}
