//! Karmada mode's planning on fragmented fleets: where a binding's gang goes, why it waits,
//! what is left alone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tephra_scheduler::SchedulerConfig;

use super::*;

const GPU: &str = "nvidia.com/gpu";

fn node(name: &str, gpus: u32) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", GPU: gpus.to_string(),
            "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap()
}

fn member(name: &str, gpus_per_node: &[u32], taints: Value) -> (String, Member) {
    let cluster = cluster_from_value(json!({
        "apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
        "metadata": {"name": name},
        "spec": {"syncMode": "Push", "apiEndpoint": "https://127.0.0.1:1", "taints": taints,
            "zone": "z1"},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "ClusterReady",
            "message": "cluster is healthy and ready to accept workloads",
            "lastTransitionTime": "2026-11-29T00:00:00Z"}],
            "resourceSummary": {"allocatableModelings": [{"grade": 0, "count": 1}]}}
    }))
    .unwrap();
    let nodes = gpus_per_node
        .iter()
        .enumerate()
        .map(|(i, g)| node(&format!("{name}-n{i}"), *g))
        .collect();
    (
        name.to_string(),
        Member {
            cluster,
            synced: true,
            nodes,
            pods: Vec::new(),
        },
    )
}

/// A binding of a Volcano Job with one task of `replicas` pods of `gpus` GPUs each.
fn binding(name: &str, replicas: i32, gpus: u32, placement: Value) -> Value {
    json!({
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": format!("{name}-job"), "namespace": "ml", "generation": 1,
            "creationTimestamp": "2026-11-29T00:00:00Z"},
        "spec": {
            "resource": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                "namespace": "ml", "name": name},
            "components": [{"name": "worker", "replicas": replicas,
                "replicaRequirements": {"resourceRequest": {"cpu": "4", GPU: gpus.to_string()}}}],
            "placement": placement,
            "schedulerName": "tephra",
        }
    })
}

fn bindings(values: &[Value]) -> Vec<Binding> {
    values
        .iter()
        .map(|v| Binding::from_value(v.clone()).unwrap())
        .collect()
}

fn run(members: &[(String, Member)], bindings: &[Binding]) -> Plan {
    run_with_queues(members, bindings, &[], &BTreeMap::new())
}

fn run_with_queues(
    members: &[(String, Member)],
    bindings: &[Binding],
    queues: &[tephra_api::Queue],
    queue_of: &BTreeMap<String, String>,
) -> Plan {
    run_with(members, bindings, queues, queue_of, &BTreeMap::new())
}

fn run_with_plans(
    members: &[(String, Member)],
    bindings: &[Binding],
    plans: &BTreeMap<String, NodePlan>,
) -> Plan {
    run_with(members, bindings, &[], &BTreeMap::new(), plans)
}

fn run_with_groups(
    members: &[(String, Member)],
    bindings: &[Binding],
    pod_groups: &BTreeMap<String, String>,
) -> Plan {
    run_with_all(
        members,
        bindings,
        &[],
        &BTreeMap::new(),
        &BTreeMap::new(),
        pod_groups,
    )
}

fn run_with(
    members: &[(String, Member)],
    bindings: &[Binding],
    queues: &[tephra_api::Queue],
    queue_of: &BTreeMap<String, String>,
    plans: &BTreeMap<String, NodePlan>,
) -> Plan {
    run_with_all(members, bindings, queues, queue_of, plans, &BTreeMap::new())
}

fn run_with_all(
    members: &[(String, Member)],
    bindings: &[Binding],
    queues: &[tephra_api::Queue],
    queue_of: &BTreeMap<String, String>,
    plans: &BTreeMap<String, NodePlan>,
    pod_groups: &BTreeMap<String, String>,
) -> Plan {
    let members: BTreeMap<String, Member> = members.iter().cloned().collect();
    plan(&Input {
        scheduler_names: &["tephra".to_string()],
        members: &members,
        bindings,
        queues,
        queue_of,
        plans,
        pod_groups,
        config: Arc::new(SchedulerConfig::default_config()),
        now: 1_000_000,
        session: 1,
    })
}

fn write_for<'a>(plan: &'a Plan, name: &str) -> Option<&'a BindingWrite> {
    plan.writes.iter().find(|w| w.name == name)
}

fn placed_in(plan: &Plan, name: &str) -> Option<Vec<String>> {
    let w = write_for(plan, name)?;
    let clusters = w.patch.as_ref()?["spec"]["clusters"].as_array()?.clone();
    Some(
        clusters
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect(),
    )
}

fn scheduled(plan: &Plan, name: &str) -> Option<(String, String, String)> {
    let w = write_for(plan, name)?;
    let conditions = w.status.as_ref()?["status"]["conditions"]
        .as_array()?
        .clone();
    let c = conditions.iter().find(|c| c["type"] == "Scheduled")?;
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str()?.to_string(),
        c["message"].as_str()?.to_string(),
    ))
}

/// Four members each with 8 GPUs in all, only one of which has a node with 4 free.
fn fragmented() -> Vec<(String, Member)> {
    vec![
        member("east", &[2, 2, 2, 2], json!([])),
        member("north", &[1, 1, 3, 3], json!([])),
        member("south", &[3, 3, 2], json!([])),
        member("west", &[4, 4], json!([])),
    ]
}

#[test]
fn a_gang_goes_whole_to_the_only_member_whose_nodes_hold_each_of_its_pods() {
    let b = bindings(&[binding("llama", 2, 4, json!({}))]);
    let plan = run(&fragmented(), &b);
    assert_eq!(
        placed_in(&plan, "llama-job"),
        Some(vec!["west".to_string()])
    );
    let (status, reason, _) = scheduled(&plan, "llama-job").unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("True", REASON_SUCCESS));
    let w = write_for(&plan, "llama-job").unwrap();
    assert_eq!(
        w.status.as_ref().unwrap()["status"]["schedulerObservedGeneration"],
        1
    );
    let applied = &w.patch.as_ref().unwrap()["metadata"]["annotations"][APPLIED_PLACEMENT];
    assert_eq!(
        applied, "{}",
        "the placement it was scheduled with is recorded"
    );
}

#[test]
fn a_gang_no_member_can_hold_waits_with_a_reason_and_is_placed_nowhere() {
    // Three pods of 4 GPUs: west holds two.
    let b = bindings(&[binding("big", 3, 4, json!({}))]);
    let plan = run(&fragmented(), &b);
    assert_eq!(placed_in(&plan, "big-job"), None);
    let (status, reason, message) = scheduled(&plan, "big-job").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", REASON_UNSCHEDULABLE)
    );
    assert!(
        message.contains("cluster west: needs 12 nvidia.com/gpu"),
        "{message}"
    );
    assert!(!message.is_empty());
    assert!(
        plan.decisions.binds.is_empty()
            || plan.decisions.binds.iter().all(|b| b.job != "ml/big-job")
    );
}

#[test]
fn two_gangs_that_fit_one_member_only_once_are_not_both_sent_there() {
    let b = bindings(&[
        binding("first", 2, 4, json!({})),
        binding("second", 2, 4, json!({})),
    ]);
    let plan = run(&fragmented(), &b);
    let placed: Vec<_> = ["first-job", "second-job"]
        .iter()
        .filter_map(|n| placed_in(&plan, n))
        .collect();
    assert_eq!(placed, vec![vec!["west".to_string()]]);
}

/// `first` as Karmada shows it once tephra placed it in west.
fn placed_first(in_cluster: &str) -> Value {
    let mut v = binding("first", 2, 4, json!({}));
    v["metadata"]["annotations"] = json!({APPLIED_PLACEMENT: "{}"});
    v["spec"]["clusters"] = json!([{"name": in_cluster}]);
    v["status"] = json!({"schedulerObservedGeneration": 1});
    v
}

fn job_pod(job: &str, name: &str, node: Option<&str>, gpus: u32) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "labels": {"volcano.sh/job-name": job}},
        "spec": {"nodeName": node, "schedulerName": "volcano", "containers": [{"name": "c",
            "resources": {"requests": {GPU: gpus.to_string()}}}]},
        "status": {"phase": if node.is_some() { "Running" } else { "Pending" }}
    }))
    .unwrap()
}

#[test]
fn a_placed_gang_keeps_its_room_until_its_pods_hold_their_nodes() {
    let b = bindings(&[placed_first("west"), binding("second", 2, 4, json!({}))]);
    // first's Job has not reached west yet: its room is kept.
    let plan = run(&fragmented(), &b);
    assert_eq!(
        placed_in(&plan, "first-job"),
        None,
        "a placed binding stays"
    );
    assert_eq!(placed_in(&plan, "second-job"), None);
    // Its pods exist but wait for the member's scheduler: still kept.
    let mut fleet = fragmented();
    let west = &mut fleet.iter_mut().find(|(n, _)| n == "west").unwrap().1;
    west.pods = vec![
        job_pod("first", "first-worker-0", None, 4),
        job_pod("first", "first-worker-1", None, 4),
    ];
    assert_eq!(reservation(&b[0], "west", west), 2);
    let plan = run(&fleet, &b);
    assert_eq!(placed_in(&plan, "second-job"), None);
    // Bound: they hold the nodes themselves, and the reservation is gone.
    let west = &mut fleet.iter_mut().find(|(n, _)| n == "west").unwrap().1;
    west.pods = vec![
        job_pod("first", "first-worker-0", Some("west-n0"), 4),
        job_pod("first", "first-worker-1", Some("west-n1"), 4),
    ];
    assert_eq!(reservation(&b[0], "west", west), 0);
    let plan = run(&fleet, &b);
    assert_eq!(placed_in(&plan, "second-job"), None);
    // Finished: the room is free again.
    let west = &mut fleet.iter_mut().find(|(n, _)| n == "west").unwrap().1;
    for p in &mut west.pods {
        p.status.as_mut().unwrap().phase = Some("Succeeded".into());
    }
    let plan = run(&fleet, &b);
    assert_eq!(
        placed_in(&plan, "second-job"),
        Some(vec!["west".to_string()])
    );
    // And once its pods are removed, Karmada's aggregated status says the Job completed.
    let west = &mut fleet.iter_mut().find(|(n, _)| n == "west").unwrap().1;
    west.pods.clear();
    let mut done = placed_first("west");
    done["status"]["aggregatedStatus"] = json!([{"clusterName": "west", "applied": true,
        "health": "Healthy", "status": {"state": {"phase": "Completed"}}}]);
    let b = bindings(&[done, binding("second", 2, 4, json!({}))]);
    let plan = run(&fleet, &b);
    assert_eq!(
        placed_in(&plan, "second-job"),
        Some(vec!["west".to_string()])
    );
}

#[test]
fn a_cluster_a_graceful_eviction_task_names_is_never_chosen() {
    let mut fleet = fragmented();
    fleet.push(member("west2", &[4, 4], json!([])));
    let mut v = binding("llama", 2, 4, json!({}));
    v["spec"]["gracefulEvictionTasks"] = json!([{"fromCluster": "west", "reason": "TaintUntolerated",
        "producer": "TaintManager"}]);
    let plan = run(&fleet, &bindings(&[v.clone()]));
    assert_eq!(
        placed_in(&plan, "llama-job"),
        Some(vec!["west2".to_string()])
    );
    // With west2 gone too, it waits rather than go back.
    let plan = run(&fragmented(), &bindings(&[v]));
    assert_eq!(placed_in(&plan, "llama-job"), None);
}

#[test]
fn cluster_affinity_and_cluster_taints_are_honoured() {
    let only_east = json!({"clusterAffinity": {"clusterNames": ["east"]}});
    let plan = run(&fragmented(), &bindings(&[binding("a", 2, 4, only_east)]));
    assert_eq!(
        placed_in(&plan, "a-job"),
        None,
        "east has no node with 4 GPUs"
    );
    let tainted = vec![
        member("east", &[2, 2, 2, 2], json!([])),
        member(
            "west",
            &[4, 4],
            json!([{"key": "maintenance", "effect": "NoSchedule"}]),
        ),
    ];
    let plan = run(&tainted, &bindings(&[binding("b", 2, 4, json!({}))]));
    assert_eq!(
        placed_in(&plan, "b-job"),
        None,
        "west's taint is not tolerated"
    );
    let tolerates = json!({"clusterTolerations": [{"key": "maintenance", "operator": "Exists"}]});
    let plan = run(&tainted, &bindings(&[binding("c", 2, 4, tolerates)]));
    assert_eq!(placed_in(&plan, "c-job"), Some(vec!["west".to_string()]));
    let labels = json!({"clusterAffinity": {"fieldSelector": {"matchExpressions": [
        {"key": "zone", "operator": "NotIn", "values": ["z1"]}]}}});
    let plan = run(&fragmented(), &bindings(&[binding("d", 1, 1, labels)]));
    assert_eq!(
        placed_in(&plan, "d-job"),
        None,
        "every member is in zone z1"
    );
}

#[test]
fn a_binding_for_another_scheduler_is_left_alone() {
    let mut v = binding("theirs", 2, 4, json!({}));
    v["spec"]["schedulerName"] = json!("default-scheduler");
    let plan = run(&fragmented(), &bindings(&[v]));
    assert!(plan.writes.is_empty());
}

#[test]
fn a_placed_binding_stays_and_only_its_observed_generation_catches_up() {
    let mut v = placed_first("west");
    v["metadata"]["generation"] = json!(3);
    let plan = run(&fragmented(), &bindings(std::slice::from_ref(&v)));
    assert_eq!(placed_in(&plan, "first-job"), None);
    let w = write_for(&plan, "first-job").unwrap();
    assert_eq!(
        w.status,
        Some(json!({"status": {"schedulerObservedGeneration": 3}}))
    );
    // A changed placement is scheduled again.
    v["spec"]["placement"] = json!({"clusterAffinity": {"exclude": ["west"]}});
    let b = Binding::from_value(v).unwrap();
    assert_eq!(b.needs_scheduling(), Some("its placement changed"));
}

#[test]
fn a_non_workload_goes_to_every_ready_cluster_its_placement_allows() {
    let v = json!({
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": "settings-configmap", "namespace": "ml", "generation": 1},
        "spec": {"resource": {"apiVersion": "v1", "kind": "ConfigMap", "name": "settings"},
            "placement": {"clusterAffinity": {"exclude": ["north"]}},
            "schedulerName": "tephra"}
    });
    let plan = run(&fragmented(), &bindings(&[v]));
    assert_eq!(
        placed_in(&plan, "settings-configmap"),
        Some(vec![
            "east".to_string(),
            "south".to_string(),
            "west".to_string()
        ])
    );
}

#[test]
fn the_same_waiting_reason_is_not_written_twice() {
    let v = binding("big", 3, 4, json!({}));
    let plan = run(&fragmented(), &bindings(std::slice::from_ref(&v)));
    let (_, _, message) = scheduled(&plan, "big-job").unwrap();
    let mut again = v;
    again["status"] = json!({"conditions": [{"type": "Scheduled", "status": "False",
        "reason": REASON_UNSCHEDULABLE, "message": message,
        "lastTransitionTime": "2026-11-29T00:00:00Z"}]});
    let plan = run(&fragmented(), &bindings(&[again]));
    assert!(write_for(&plan, "big-job").is_none(), "{:?}", plan.writes);
}

#[test]
fn a_malformed_binding_is_refused_with_the_field_named() {
    let mut v = binding("bad", 1, 1, json!({}));
    v["spec"]["components"][0]["replicas"] = json!("two");
    let e = Binding::from_value(v).unwrap_err().to_string();
    assert!(e.contains("ml/bad-job"), "{e}");
    let mut v = binding(
        "bad",
        1,
        1,
        json!({"clusterTolerations": [{"key": "a",
        "operator": "Sometimes"}]}),
    );
    v["spec"]["schedulerName"] = json!("tephra");
    let plan = run(&fragmented(), &bindings(&[v]));
    let (status, reason, message) = scheduled(&plan, "bad-job").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "SchedulerError")
    );
    assert!(message.contains("clusterTolerations"), "{message}");
}

fn queue(name: &str, gpus: u32) -> tephra_api::Queue {
    serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "capability": {GPU: gpus.to_string()}}
    }))
    .unwrap()
}

#[test]
fn a_queue_at_its_capability_holds_its_next_gang_back_and_others_go_on() {
    // small may hold 8 GPUs; first (2 × 4) runs in west under it, its pods bound.
    let mut fleet = fragmented();
    fleet.push(member("west2", &[4, 4], json!([])));
    let west = &mut fleet.iter_mut().find(|(n, _)| n == "west").unwrap().1;
    west.pods = vec![
        job_pod("first", "first-worker-0", Some("west-n0"), 4),
        job_pod("first", "first-worker-1", Some("west-n1"), 4),
    ];
    let b = bindings(&[
        placed_first("west"),
        binding("second", 1, 4, json!({})),
        binding("other", 1, 4, json!({})),
    ]);
    let queues = [queue("small", 8), queue("default", 64)];
    let queue_of = BTreeMap::from([
        ("ml/first-job".to_string(), "small".to_string()),
        ("ml/second-job".to_string(), "small".to_string()),
    ]);
    let plan = run_with_queues(&fleet, &b, &queues, &queue_of);
    assert_eq!(placed_in(&plan, "second-job"), None, "{:?}", plan.writes);
    let (status, reason, message) = scheduled(&plan, "second-job").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", REASON_UNSCHEDULABLE)
    );
    assert!(message.contains("queue"), "{message}");
    assert_eq!(
        placed_in(&plan, "other-job"),
        Some(vec!["west2".to_string()])
    );
    // Once first's pods finished, small has room again.
    let west = &mut fleet.iter_mut().find(|(n, _)| n == "west").unwrap().1;
    for p in &mut west.pods {
        p.status.as_mut().unwrap().phase = Some("Succeeded".into());
    }
    let plan = run_with_queues(&fleet, &b, &queues, &queue_of);
    assert!(
        placed_in(&plan, "second-job").is_some(),
        "{:?}",
        plan.writes
    );
}

#[test]
fn a_template_names_its_queue_as_volcano_reads_it() {
    let job = json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "a"}, "spec": {"queue": "research"}});
    assert_eq!(template_queue(&job).as_deref(), Some("research"));
    let pg = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "a"}, "spec": {"queue": "prod"}});
    assert_eq!(template_queue(&pg).as_deref(), Some("prod"));
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "a", "annotations": {QUEUE_ANNOTATION: "infer"}},
        "spec": {"queue": "ignored"}});
    assert_eq!(template_queue(&deploy).as_deref(), Some("infer"));
    let none = json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "a"}, "spec": {"queue": ""}});
    assert_eq!(template_queue(&none), None);
}

#[test]
fn a_cluster_resource_binding_of_tephra_is_placed_as_karmada_would_and_written_without_namespace() {
    let v = json!({
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ClusterResourceBinding",
        "metadata": {"name": "small-queue", "generation": 1},
        "spec": {"resource": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "name": "small"},
            "placement": {"clusterAffinity": {"clusterNames": ["east", "west"]}},
            "schedulerName": "tephra"}
    });
    let b = Binding::from_value(v).unwrap();
    assert!(b.cluster_scoped());
    assert_eq!(b.key(), "/small-queue");
    let plan = run(&fragmented(), &[b]);
    let w = write_for(&plan, "small-queue").unwrap();
    assert_eq!(w.namespace, "");
    assert_eq!(
        placed_in(&plan, "small-queue"),
        Some(vec!["east".to_string(), "west".to_string()])
    );
}

fn status_of(plan: &Plan, name: &str) -> Value {
    write_for(plan, name)
        .and_then(|w| w.status.clone())
        .map(|s| s["status"].clone())
        .unwrap_or(Value::Null)
}

#[test]
fn a_gang_no_cluster_of_its_first_affinity_group_holds_goes_to_the_next_group_and_says_which() {
    let groups = json!({"clusterAffinities": [
        {"affinityName": "primary", "clusterNames": ["east"]},
        {"affinityName": "backup", "clusterNames": ["west"]}]});
    let plan = run(&fragmented(), &bindings(&[binding("a", 2, 4, groups)]));
    assert_eq!(
        placed_in(&plan, "a-job"),
        Some(vec!["west".to_string()]),
        "east has no node with 4 GPUs; west, of the backup group, has two"
    );
    assert_eq!(
        status_of(&plan, "a-job")["schedulerObservingAffinityName"],
        "backup"
    );
    let event = &write_for(&plan, "a-job").unwrap().event.as_ref().unwrap().2;
    assert!(event.contains("cluster affinity group backup"), "{event}");
    let policy = Binding::from_value(binding(
        "b",
        1,
        1,
        json!({"clusterAffinities": [
        {"affinityName": "primary", "clusterNames": ["east"]}]}),
    ))
    .unwrap()
    .policy()
    .unwrap();
    assert_eq!(policy.cluster_names, vec!["east".to_string()]);
}

#[test]
fn a_gang_that_fits_its_first_affinity_group_stays_there() {
    let groups = json!({"clusterAffinities": [
        {"affinityName": "primary", "clusterNames": ["east", "north"]},
        {"affinityName": "backup", "clusterNames": ["west"]}]});
    // One GPU per pod fits east and north.
    let plan = run(&fragmented(), &bindings(&[binding("a", 2, 1, groups)]));
    let placed = placed_in(&plan, "a-job").unwrap();
    assert!(placed == ["east"] || placed == ["north"], "{placed:?}");
    assert_eq!(
        status_of(&plan, "a-job")["schedulerObservingAffinityName"],
        "primary"
    );
}

#[test]
fn scheduling_starts_from_the_affinity_group_last_used_as_karmada_does() {
    let mut b = binding(
        "a",
        1,
        1,
        json!({"clusterAffinities": [
            {"affinityName": "primary", "clusterNames": ["east"]},
            {"affinityName": "backup", "clusterNames": ["west"]}]}),
    );
    b["status"] = json!({"schedulerObservingAffinityName": "backup"});
    let plan = run(&fragmented(), &bindings(&[b]));
    assert_eq!(
        placed_in(&plan, "a-job"),
        Some(vec!["west".to_string()]),
        "east would fit, but the last scheduling used backup"
    );
}

#[test]
fn a_gang_no_affinity_group_holds_waits_and_a_fallback_never_takes_the_room_of_one_placed_earlier()
{
    let groups = json!({"clusterAffinities": [
        {"affinityName": "primary", "clusterNames": ["east"]},
        {"affinityName": "backup", "clusterNames": ["west"]}]});
    // west holds one gang of 2 × 4 GPUs. b goes there directly; a falls back to west too,
    // where b has taken the room, and waits.
    let plan = run(
        &fragmented(),
        &bindings(&[
            binding("a", 2, 4, groups),
            binding(
                "b",
                2,
                4,
                json!({"clusterAffinity": {"clusterNames": ["west"]}}),
            ),
        ]),
    );
    assert_eq!(placed_in(&plan, "b-job"), Some(vec!["west".to_string()]));
    assert_eq!(placed_in(&plan, "a-job"), None);
    let (status, reason, _) = scheduled(&plan, "a-job").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "Unschedulable")
    );
}

/// The plan a write hands to its member, read back from its policy.
fn plan_written(plan: &Plan, name: &str) -> Option<NodePlan> {
    read_plan_policy(write_for(plan, name)?.policy.as_ref()?).map(|(_, p)| p)
}

#[test]
fn a_placed_volcano_job_comes_with_the_plan_of_its_nodes_in_its_member() {
    let b = bindings(&[binding("llama", 2, 4, json!({}))]);
    let plan = run(&fragmented(), &b);
    assert_eq!(
        placed_in(&plan, "llama-job"),
        Some(vec!["west".to_string()])
    );
    let handed = plan_written(&plan, "llama-job").expect("a plan policy");
    assert_eq!(handed.cluster, "west");
    let mut nodes = handed.nodes["worker"].clone();
    nodes.sort();
    assert_eq!(nodes, vec!["west-n0".to_string(), "west-n1".to_string()]);
    // The same plan already in place is not written again.
    let plans = BTreeMap::from([("ml/llama-job".to_string(), handed)]);
    let again = run_with_plans(&fragmented(), &b, &plans);
    assert_eq!(
        placed_in(&again, "llama-job"),
        Some(vec!["west".to_string()])
    );
    assert!(write_for(&again, "llama-job").unwrap().policy.is_none());
    // A kind whose pods cannot be named ahead carries none.
    let mut deploy = binding("web", 1, 1, json!({}));
    deploy["spec"]["resource"] = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "namespace": "ml", "name": "web"});
    let plan = run(&fragmented(), &bindings(&[deploy]));
    assert!(placed_in(&plan, "web-job").is_some());
    assert!(write_for(&plan, "web-job").unwrap().policy.is_none());
}

#[test]
fn a_placed_gangs_room_is_kept_on_the_nodes_its_plan_names_until_its_pods_arrive() {
    // west: two nodes of 8 GPUs. first (one pod of 4) is placed there, planned on one node;
    // second (one pod of 8) can only have the other.
    let fleet = vec![member("west", &[8, 8], json!([]))];
    let mut first = binding("first", 1, 4, json!({}));
    first["metadata"]["annotations"] = json!({APPLIED_PLACEMENT: "{}"});
    first["spec"]["clusters"] = json!([{"name": "west"}]);
    first["status"] = json!({"schedulerObservedGeneration": 1});
    let b = bindings(&[first, binding("second", 1, 8, json!({}))]);
    for (planned, free) in [("west-n0", "west-n1"), ("west-n1", "west-n0")] {
        let plans = BTreeMap::from([(
            "ml/first-job".to_string(),
            NodePlan {
                cluster: "west".into(),
                nodes: BTreeMap::from([("worker".to_string(), vec![planned.to_string()])]),
            },
        )]);
        let plan = run_with_plans(&fleet, &b, &plans);
        let second = plan_written(&plan, "second-job").expect("second placed with a plan");
        assert_eq!(
            second.nodes["worker"],
            vec![free.to_string()],
            "first planned on {planned}"
        );
    }
    // Once first's pod holds a node (wherever the member put it), the plan keeps nothing.
    let mut fleet = fleet;
    fleet[0].1.pods = vec![job_pod("first", "first-worker-0", Some("west-n1"), 4)];
    let plans = BTreeMap::from([(
        "ml/first-job".to_string(),
        NodePlan {
            cluster: "west".into(),
            nodes: BTreeMap::from([("worker".to_string(), vec!["west-n0".to_string()])]),
        },
    )]);
    let plan = run_with_plans(&fleet, &b, &plans);
    let second = plan_written(&plan, "second-job").expect("second placed");
    assert_eq!(second.nodes["worker"], vec!["west-n0".to_string()]);
}

/// A binding of a Deployment of `replicas` pods of `gpus` GPUs each.
fn deployment_binding(name: &str, replicas: i32, gpus: u32) -> Value {
    json!({
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": format!("{name}-deployment"), "namespace": "ml", "generation": 1,
            "creationTimestamp": "2026-11-29T00:00:00Z"},
        "spec": {
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ml",
                "name": name},
            "replicas": replicas,
            "replicaRequirements": {"resourceRequest": {"cpu": "4", GPU: gpus.to_string()}},
            "placement": {},
            "schedulerName": "tephra",
        }
    })
}

/// A binding of the Volcano PodGroup `name`.
fn pod_group_binding(name: &str) -> Value {
    json!({
        "apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
        "metadata": {"name": format!("{name}-podgroup"), "namespace": "ml", "generation": 1,
            "creationTimestamp": "2026-11-29T00:00:00Z"},
        "spec": {
            "resource": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "namespace": "ml", "name": name},
            "placement": {},
            "schedulerName": "tephra",
        }
    })
}

#[test]
fn a_podgroup_goes_only_where_the_workload_whose_pods_it_groups_goes() {
    let groups = BTreeMap::from([("ml/serve-deployment".to_string(), "gang".to_string())]);
    let b = bindings(&[deployment_binding("serve", 2, 4), pod_group_binding("gang")]);
    let plan = run_with_groups(&fragmented(), &b, &groups);
    assert_eq!(
        placed_in(&plan, "serve-deployment"),
        Some(vec!["west".to_string()])
    );
    assert_eq!(
        placed_in(&plan, "gang-podgroup"),
        Some(vec!["west".to_string()])
    );
    // Without a workload whose pods name it, it waits, where karmada-scheduler would copy
    // it into every member.
    let plan = run_with_groups(&fragmented(), &b, &BTreeMap::new());
    assert_eq!(placed_in(&plan, "gang-podgroup"), None);
    let (status, _, message) = scheduled(&plan, "gang-podgroup").unwrap();
    assert_eq!(status, "False");
    assert!(message.contains("group-name"), "{message}");
    // A workload no member can hold: the PodGroup waits for it, saying so.
    let b = bindings(&[deployment_binding("serve", 3, 8), pod_group_binding("gang")]);
    let plan = run_with_groups(&fragmented(), &b, &groups);
    assert_eq!(placed_in(&plan, "gang-podgroup"), None);
    let (status, _, message) = scheduled(&plan, "gang-podgroup").unwrap();
    assert_eq!(status, "False");
    assert!(message.contains("deployment serve"), "{message}");
}

#[test]
fn a_podgroup_moves_with_its_workload() {
    let groups = BTreeMap::from([("ml/serve-deployment".to_string(), "gang".to_string())]);
    // The workload was moved to south (failover); its PodGroup is still in west.
    let mut serve = deployment_binding("serve", 1, 2);
    serve["metadata"]["annotations"] = json!({APPLIED_PLACEMENT: "{}"});
    serve["spec"]["clusters"] = json!([{"name": "south", "replicas": 1}]);
    let mut gang = pod_group_binding("gang");
    gang["metadata"]["annotations"] = json!({APPLIED_PLACEMENT: "{}"});
    gang["spec"]["clusters"] = json!([{"name": "west"}]);
    let b = bindings(&[serve, gang]);
    let plan = run_with_groups(&fragmented(), &b, &groups);
    assert_eq!(
        placed_in(&plan, "gang-podgroup"),
        Some(vec!["south".to_string()])
    );
    assert_eq!(
        placed_in(&plan, "serve-deployment"),
        None,
        "the workload stays"
    );
}
