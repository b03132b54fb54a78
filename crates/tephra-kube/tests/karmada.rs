//! tephra as the scheduler of a real Karmada (v1.18, built from its Go module): Volcano Jobs on
//! Karmada's API server, propagated by PropagationPolicies that name tephra, go whole to the
//! one member whose nodes hold every pod of the gang (where Karmada's own scheduler would count
//! free GPUs in total), and Karmada's binding and execution controllers carry them there, where
//! the member's own tephra runs them, each pod on the node tephra planned for it (or the
//! member's kube-scheduler does, through tephra's extender); a gang no member can hold waits
//! with the reason; a binding for karmada-scheduler is left to it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::{Value, json};
use tephra_envtest::karmada::{KARMADA, karmada_fleet};
use tephra_envtest::{KarmadaOptions, Release, objects};

/// A Volcano Job of one task of `replicas` pods asking `gpus` GPUs each, all needed.
fn volcano_job(name: &str, replicas: u32, gpus: u32) -> Value {
    json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default",
            "annotations": {"tephra.io/sim-duration": "1h"}},
        "spec": {"minAvailable": replicas, "schedulerName": "volcano", "queue": "default",
            "tasks": [{"name": "worker", "replicas": replicas, "minAvailable": replicas,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{
                    "name": "train", "image": "busybox",
                    "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus.to_string()},
                        "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}}}]}
    })
}

/// A PropagationPolicy sending the Volcano Job `job` to east or west, scheduled by `scheduler`.
fn policy(job: &str, scheduler: &str) -> Value {
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": job, "namespace": "default"},
        "spec": {"schedulerName": scheduler,
            "resourceSelectors": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                "name": job}],
            "placement": {"clusterAffinity": {"clusterNames": ["east", "west"]},
                "replicaScheduling": {"replicaSchedulingType": "Divided"},
                "spreadConstraints": [{"spreadByField": "cluster", "minGroups": 1,
                    "maxGroups": 1}]}}
    })
}

fn clusters_of(rb: &Value) -> Vec<String> {
    rb["spec"]["clusters"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn scheduled_condition(rb: &Value) -> Option<(String, String, String)> {
    let c = rb["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Scheduled")?
        .clone();
    Some((
        c["status"].as_str()?.to_string(),
        c["reason"].as_str()?.to_string(),
        c["message"].as_str().unwrap_or_default().to_string(),
    ))
}

/// A Karmada fleet whose members each run tephra for one cluster (the job controller and the
/// scheduler), and tephra scheduling Karmada's bindings that name `tephra`.
struct Setup {
    fleet: tephra_envtest::KarmadaFleet,
    inside: Vec<(tephra_kube::Running, Vec<tokio::task::JoinHandle<()>>)>,
    sched: tephra_kube::karmada::KarmadaRunning,
}

/// Members `(name, GPUs of each node)`, with 16-CPU nodes `<name>-<i>`; `None` when the real
/// components are not built (outside CI).
async fn start(members: &[(&str, &[u32])]) -> Option<Setup> {
    start_with(members, KarmadaOptions::default()).await
}

/// [`start`], with Karmada run as `options` says.
async fn start_with(members: &[(&str, &[u32])], options: KarmadaOptions) -> Option<Setup> {
    start_planning_with(
        members,
        options,
        tephra_scheduler::SchedulerConfig::default_config(),
    )
    .await
}

/// [`start_with`], the Karmada mode planning with `config`.
async fn start_planning_with(
    members: &[(&str, &[u32])],
    options: KarmadaOptions,
    config: tephra_scheduler::SchedulerConfig,
) -> Option<Setup> {
    let specs: Vec<(&str, Vec<_>)> = members
        .iter()
        .map(|(name, gpus)| {
            let nodes = gpus
                .iter()
                .enumerate()
                .map(|(i, g)| node(&format!("{name}-{i}"), "16", *g))
                .collect();
            (*name, nodes)
        })
        .collect();
    let fleet = karmada_fleet(&Release::tier(), &specs, options)
        .await
        .expect("Karmada and its members start")?;
    let mut inside = Vec::new();
    for m in &fleet.members {
        inside.push(start_everything(&m.client).await);
    }
    let sched = tephra_kube::karmada::start(
        fleet.client(KARMADA).unwrap(),
        tephra_kube::karmada::KarmadaOptions {
            scheduler_names: vec!["tephra".into()],
            period: Duration::from_millis(200),
            config: Arc::new(config),
            identity: "test".into(),
            listen: Some("127.0.0.1:0".parse().unwrap()),
            leader: None,
        },
    )
    .await
    .expect("the Karmada mode starts");
    Some(Setup {
        fleet,
        inside,
        sched,
    })
}

impl Setup {
    /// Creates a resource template and its PropagationPolicy on Karmada.
    async fn submit(&self, template: Value, policy: Value) {
        objects::create(&self.fleet.client(KARMADA).unwrap(), &template)
            .await
            .unwrap();
        self.fleet.propagation_policy(policy).await.unwrap();
    }

    /// The ResourceBinding of the Volcano Job `job` in `default`, once Karmada made it.
    async fn binding(&self, job: &str) -> Option<Value> {
        self.fleet
            .resource_binding("default", "job", job)
            .await
            .ok()?
    }

    async fn stop(self) {
        self.sched.stop().await;
        for (s, ctl) in self.inside {
            stop_everything(s, ctl).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volcano_jobs_through_karmada_go_whole_where_their_nodes_fit_or_wait_saying_why() {
    logs();
    // east: 8 GPUs on four nodes of 2; west: 8 GPUs on two nodes of 4.
    let Some(setup) = start(&[("east", &[2, 2, 2, 2]), ("west", &[4, 4])]).await else {
        return;
    };
    let fleet = &setup.fleet;
    let karmada = fleet.client(KARMADA).unwrap();

    // Two pods of 4 GPUs: only west has nodes with 4.
    setup
        .submit(volcano_job("llama", 2, 4), policy("llama", "tephra"))
        .await;
    let rb = eventually(60, "llama's binding placed", || async {
        let rb = setup.binding("llama").await?;
        // The placement is written first, then the status.
        let scheduled = scheduled_condition(&rb).is_some();
        (!clusters_of(&rb).is_empty() && scheduled).then_some(rb)
    })
    .await;
    assert_eq!(clusters_of(&rb), vec!["west".to_string()], "{rb:#}");
    let (status, reason, _) = scheduled_condition(&rb).unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Success"));
    // Karmada's controllers carry the Job to west, whose tephra runs its pods there.
    let west = fleet.client("west").unwrap();
    let placed = all_bound(&west, "default", "llama-", 2, 90).await;
    assert!(
        placed.values().flatten().all(|n| n.starts_with("west-")),
        "{placed:?}"
    );
    let jobs_in_east: Api<tephra_api::Job> =
        Api::namespaced(fleet.client("east").unwrap(), "default");
    assert!(jobs_in_east.get_opt("llama").await.unwrap().is_none());

    // Three pods of 4 GPUs: no member can hold them (west's nodes are taken anyway).
    setup
        .submit(volcano_job("big", 3, 4), policy("big", "tephra"))
        .await;
    let rb = eventually(60, "big's binding waiting with a reason", || async {
        let rb = setup.binding("big").await?;
        let (status, reason, message) = scheduled_condition(&rb)?;
        (status == "False").then_some((rb, reason, message))
    })
    .await;
    assert!(clusters_of(&rb.0).is_empty(), "{:#}", rb.0);
    assert_eq!(rb.1, "Unschedulable");
    assert!(!rb.2.is_empty());

    // A Volcano Queue on Karmada, propagated to every member (the members' schedulers need it
    // too) through a ClusterResourceBinding tephra places, holding 4 GPUs at most: its first gang runs (in east: west is full), its next waits
    // for the queue, saying so, though east has room for it.
    objects::create(
        &karmada,
        &json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "small"},
            "spec": {"weight": 1, "capability": {"nvidia.com/gpu": "4"}}}),
    )
    .await
    .unwrap();
    fleet
        .propagation_policy(json!({
            "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterPropagationPolicy",
            "metadata": {"name": "queues"},
            "spec": {"schedulerName": "tephra", "resourceSelectors": [{"apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue"}],
                "placement": {"clusterAffinity": {"clusterNames": ["east", "west"]}}}
        }))
        .await
        .unwrap();
    let east = fleet.client("east").unwrap();
    let queues_in_east: Api<tephra_api::Queue> = Api::all(east.clone());
    eventually(60, "queue small propagated to east", || async {
        queues_in_east.get_opt("small").await.ok()?
    })
    .await;
    let in_small = |name: &str, pods, gpus| {
        let mut job = volcano_job(name, pods, gpus);
        job["spec"]["queue"] = json!("small");
        job
    };
    setup
        .submit(in_small("capped", 2, 2), policy("capped", "tephra"))
        .await;
    let placed = all_bound(&east, "default", "capped-", 2, 90).await;
    assert!(placed.values().flatten().all(|n| n.starts_with("east-")));
    setup
        .submit(in_small("capped2", 1, 2), policy("capped2", "tephra"))
        .await;
    let (rb, message) = eventually(60, "capped2 held back by its queue", || async {
        let rb = setup.binding("capped2").await?;
        let (status, _, message) = scheduled_condition(&rb)?;
        (status == "False").then_some((rb, message))
    })
    .await;
    assert!(clusters_of(&rb).is_empty(), "{rb:#}");
    assert!(message.contains("queue"), "{message}");

    // A binding for Karmada's own scheduler is placed by it; tephra records nothing on it.
    setup
        .submit(
            volcano_job("theirs", 1, 1),
            policy("theirs", "default-scheduler"),
        )
        .await;
    eventually(60, "theirs placed by karmada-scheduler", || async {
        let rb = setup.binding("theirs").await?;
        (!clusters_of(&rb).is_empty()).then_some(())
    })
    .await;
    let events: Api<Event> = Api::namespaced(karmada.clone(), "default");
    let ours: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reporting_component.as_deref() == Some(tephra_kube::karmada::COMPONENT))
        .filter_map(|e| e.involved_object.name)
        .collect();
    assert!(ours.iter().any(|n| n == "llama-job"), "{ours:?}");
    assert!(!ours.iter().any(|n| n == "theirs-job"), "{ours:?}");
    // Volcano's metric names: placements and waits counted, the pass timed.
    let (code, body) = http_get(setup.sched.metrics_addr.unwrap(), "/metrics").await;
    assert_eq!(code, 200);
    let count = |series: &str| {
        body.lines()
            .find(|l| l.starts_with(series))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert!(
        count("volcano_schedule_attempts_total{result=\"scheduled\"}") >= 2.0,
        "{body}"
    );
    assert!(
        count("volcano_schedule_attempts_total{result=\"unschedulable\"}") >= 1.0,
        "{body}"
    );
    assert!(
        count("volcano_e2e_scheduling_latency_milliseconds_count") >= 1.0,
        "{body}"
    );
    let (code, _) = http_get(setup.sched.metrics_addr.unwrap(), "/readyz").await;
    assert_eq!(code, 200);
    setup.stop().await;
}

/// Karmada's ClusterTaintPolicy that taints a member `NoExecute` while its Ready condition is
/// not True (since v1.18 the cluster controller no longer does it itself).
fn not_ready_taints() -> Value {
    json!({
        "apiVersion": "policy.karmada.io/v1alpha1", "kind": "ClusterTaintPolicy",
        "metadata": {"name": "not-ready"},
        "spec": {
            "addOnConditions": [{"conditionType": "Ready", "operator": "In",
                "statusValues": ["False", "Unknown"]}],
            "removeOnConditions": [{"conditionType": "Ready", "operator": "In",
                "statusValues": ["True"]}],
            "taints": [{"key": "cluster.karmada.io/not-ready", "effect": "NoExecute"}]}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_karmada_evicts_a_gang_from_a_failed_member_tephra_places_it_whole_where_it_fits() {
    logs();
    // east: 8 GPUs on four nodes of 2 (karmada-scheduler's choice after a failure, where the
    // gang cannot run); west and south: two nodes of 4 each.
    let Some(setup) = start(&[
        ("east", &[2, 2, 2, 2]),
        ("south", &[4, 4]),
        ("west", &[4, 4]),
    ])
    .await
    else {
        return;
    };
    let fleet = &setup.fleet;
    let karmada = fleet.client(KARMADA).unwrap();
    objects::create(&karmada, &not_ready_taints())
        .await
        .unwrap();
    objects::create(&karmada, &volcano_job("llama", 2, 4))
        .await
        .unwrap();
    let mut pp = policy("llama", "tephra");
    pp["spec"]["placement"]["clusterAffinity"] = json!({});
    fleet.propagation_policy(pp).await.unwrap();
    let first = eventually(60, "llama's binding placed", || async {
        let rb = setup.binding("llama").await?;
        clusters_of(&rb).first().cloned()
    })
    .await;
    assert_ne!(first, "east");
    let other = if first == "west" { "south" } else { "west" };
    let first_client = fleet.client(&first).unwrap();
    all_bound(&first_client, "default", "llama-", 2, 90).await;

    // The member fails: Karmada marks it not Ready, taints it, and its taint manager evicts
    // the binding from it; tephra places the gang again, whole, where its nodes fit.
    fleet.stop_member(&first).unwrap();
    // Karmada's taint manager evicts it (a graceful-eviction task), and tephra, seeing the
    // binding without a cluster, places it again; the task stays until the new copy is healthy,
    // seconds later, so every poll of the binding until then sees the task.
    let evicted = std::sync::atomic::AtomicBool::new(false);
    let rb = eventually(
        90,
        "llama's binding moved off the failed member",
        || async {
            let rb = fleet
                .resource_binding("default", "job", "llama")
                .await
                .ok()??;
            let tasks = rb["spec"]["gracefulEvictionTasks"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if tasks.iter().any(|t| t["fromCluster"] == first.as_str()) {
                evicted.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            let clusters = clusters_of(&rb);
            (!clusters.is_empty() && !clusters.contains(&first)).then_some(rb)
        },
    )
    .await;
    assert_eq!(clusters_of(&rb), vec![other.to_string()], "{rb:#}");
    assert!(
        evicted.load(std::sync::atomic::Ordering::Relaxed),
        "Karmada's taint manager evicted it: {rb:#}"
    );
    let other_client = fleet.client(other).unwrap();
    let placed = all_bound(&other_client, "default", "llama-", 2, 90).await;
    assert!(
        placed.values().flatten().all(|n| n.starts_with(other)),
        "{placed:?}"
    );
    let east = fleet.client("east").unwrap();
    let jobs_in_east: Api<tephra_api::Job> = Api::namespaced(east, "default");
    assert!(jobs_in_east.get_opt("llama").await.unwrap().is_none());

    // Once the new copy is healthy, Karmada's graceful eviction ends the task; when the failed
    // member answers again, its old copy is removed, and the gang stays where it runs.
    eventually(120, "the graceful eviction task gone", || async {
        let rb = setup.binding("llama").await?;
        let tasks = rb["spec"]["gracefulEvictionTasks"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        tasks.is_empty().then_some(())
    })
    .await;
    fleet.restore_member(&first).await.unwrap();
    let jobs_in_first: Api<tephra_api::Job> = Api::namespaced(first_client, "default");
    eventually(
        120,
        "the old copy removed from the member that failed",
        || async {
            jobs_in_first
                .get_opt("llama")
                .await
                .ok()?
                .is_none()
                .then_some(())
        },
    )
    .await;
    let rb = fleet
        .resource_binding("default", "job", "llama")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(clusters_of(&rb), vec![other.to_string()], "{rb:#}");
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_podgroup_and_the_deployment_whose_pods_it_groups_go_together_to_the_member_that_fits() {
    logs();
    let Some(setup) = start(&[("east", &[2, 2, 2, 2]), ("west", &[4, 4])]).await else {
        return;
    };
    let fleet = &setup.fleet;
    let karmada = fleet.client(KARMADA).unwrap();
    objects::create(
        &karmada,
        &json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "gang", "namespace": "default"},
            "spec": {"minMember": 2, "queue": "default"}}),
    )
    .await
    .unwrap();
    let request = json!({"cpu": "1", "nvidia.com/gpu": "4"});
    objects::create(
        &karmada,
        &json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "serve", "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "serve"}},
                "template": {"metadata": {"labels": {"app": "serve"},
                    "annotations": {"scheduling.k8s.io/group-name": "gang"}},
                    "spec": {"schedulerName": "volcano", "containers": [{"name": "serve",
                        "image": "busybox",
                        "resources": {"requests": request, "limits": request}}]}}}}),
    )
    .await
    .unwrap();
    let mut pp = policy("serve", "tephra");
    pp["spec"]["resourceSelectors"] = json!([
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "serve"},
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "name": "gang"}
    ]);
    fleet.propagation_policy(pp).await.unwrap();
    let placed = |kind: &'static str, name: &'static str| async move {
        let rb = fleet.resource_binding("default", kind, name).await.ok()??;
        let clusters = clusters_of(&rb);
        (!clusters.is_empty()).then_some(clusters)
    };
    let serve = eventually(60, "serve placed", || placed("deployment", "serve")).await;
    assert_eq!(serve, vec!["west".to_string()]);
    let gang = eventually(60, "gang placed", || placed("podgroup", "gang")).await;
    assert_eq!(
        gang,
        vec!["west".to_string()],
        "the PodGroup goes where its pods go"
    );
    let west = fleet.client("west").unwrap();
    let bound = all_bound(&west, "default", "serve-", 2, 90).await;
    assert!(
        bound.values().flatten().all(|n| n.starts_with("west-")),
        "{bound:?}"
    );
    let groups_in_west: Api<tephra_api::PodGroup> = Api::namespaced(west, "default");
    assert!(groups_in_west.get_opt("gang").await.unwrap().is_some());
    let groups_in_east: Api<tephra_api::PodGroup> =
        Api::namespaced(fleet.client("east").unwrap(), "default");
    assert!(groups_in_east.get_opt("gang").await.unwrap().is_none());
    setup.stop().await;
}

/// A configuration that spreads a gang's pods over the emptiest nodes, where tephra's default
/// (the members' here) packs them.
const SPREADING: &str = r#"
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
- plugins: [{name: clusteraffinity}, {name: clustertaint}, {name: clusterresource}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_members_pods_land_on_the_nodes_tephra_planned_across_the_fleet() {
    logs();
    // west: three nodes of 8 GPUs. The Karmada mode spreads; west's own tephra packs.
    let Some(setup) = start_planning_with(
        &[("west", &[8, 8, 8])],
        KarmadaOptions::default(),
        tephra_scheduler::SchedulerConfig::parse(SPREADING).unwrap(),
    )
    .await
    else {
        return;
    };
    let fleet = &setup.fleet;
    let karmada = fleet.client(KARMADA).unwrap();
    let west = fleet.client("west").unwrap();

    // What west's own scheduler does with a pair of 2-GPU pods: both on one node.
    let mut local = volcano_job("local", 2, 2);
    local["metadata"]["name"] = json!("local");
    objects::create(&west, &local).await.unwrap();
    let packed = all_bound(&west, "default", "local-", 2, 90).await;
    let packed: std::collections::BTreeSet<_> = packed.into_values().flatten().collect();
    assert_eq!(packed.len(), 1, "west packs: {packed:?}");

    // The same pair through Karmada: tephra plans it on two nodes, hands the plan over with an
    // OverridePolicy, and west's pods land there.
    setup
        .submit(volcano_job("pair", 2, 2), policy("pair", "tephra"))
        .await;
    let overrides = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("policy.karmada.io", "v1alpha1", "OverridePolicy"),
        "overridepolicies",
    );
    let policies: Api<DynamicObject> = Api::namespaced_with(karmada.clone(), "default", &overrides);
    let handed = eventually(60, "pair's plan policy written", || async {
        let p = policies.get_opt("tephra-plan-pair-job").await.ok()??;
        tephra_index::karmada::read_plan_policy(&serde_json::to_value(p).ok()?)
    })
    .await
    .1;
    assert_eq!(handed.cluster, "west");
    let planned: Vec<String> = handed.nodes["worker"].clone();
    assert_eq!(planned.len(), 2);
    assert_ne!(planned[0], planned[1], "the plan spreads: {planned:?}");
    let bound = all_bound(&west, "default", "pair-", 2, 90).await;
    for (i, node) in planned.iter().enumerate() {
        assert_eq!(
            bound
                .get(&format!("pair-worker-{i}"))
                .cloned()
                .flatten()
                .as_ref(),
            Some(node),
            "pod {i} on its planned node: {bound:?}, plan {planned:?}"
        );
    }
    // The member's Job carries the plan; each pod its node.
    let jobs: Api<tephra_api::Job> = Api::namespaced(west.clone(), "default");
    let job = jobs.get("pair").await.unwrap();
    assert!(
        job.metadata
            .annotations
            .unwrap_or_default()
            .contains_key(tephra_api::well_known::PLANNED_NODES)
    );

    // The other path: west's own kube-scheduler, with tephra's extender, binds a Job whose
    // pods name it (`schedulerName: default-scheduler`); the extender passes each pod only on
    // its planned node and binds the gang whole.
    let ext = tephra_extender::Extender::new(west.clone(), &Default::default()).unwrap();
    tephra_extender::watch::start(ext.clone(), west.clone());
    let (addr, _) = tephra_extender::serve(ext, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    fleet
        .member("west")
        .unwrap()
        .cluster
        .start_scheduler(
            tephra_envtest::tier::shipped_extender_config(&format!("http://{addr}")).unwrap(),
            &[],
        )
        .unwrap();
    let mut through = volcano_job("through", 2, 2);
    through["spec"]["schedulerName"] = json!("default-scheduler");
    setup.submit(through, policy("through", "tephra")).await;
    let handed = eventually(60, "through's plan policy written", || async {
        let p = policies.get_opt("tephra-plan-through-job").await.ok()??;
        tephra_index::karmada::read_plan_policy(&serde_json::to_value(p).ok()?)
    })
    .await
    .1;
    let planned = handed.nodes["worker"].clone();
    let bound = all_bound(&west, "default", "through-", 2, 90).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(west.clone(), "default");
    for (i, node) in planned.iter().enumerate() {
        let name = format!("through-worker-{i}");
        let pod = pods.get(&name).await.unwrap();
        assert_eq!(
            pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()),
            Some("default-scheduler")
        );
        assert_eq!(
            pod.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(tephra_api::well_known::PLANNED_NODE)),
            Some(node),
            "{name} carries its planned node"
        );
        assert_eq!(
            bound.get(&name).cloned().flatten().as_ref(),
            Some(node),
            "{name} on its planned node: {bound:?}, plan {planned:?}"
        );
    }

    // The plan goes with its binding.
    let jobs_on_karmada: Api<tephra_api::Job> = Api::namespaced(karmada.clone(), "default");
    jobs_on_karmada
        .delete("pair", &Default::default())
        .await
        .unwrap();
    eventually(
        90,
        "pair's plan policy removed with its binding",
        || async {
            policies
                .get_opt("tephra-plan-pair-job")
                .await
                .ok()?
                .is_none()
                .then_some(())
        },
    )
    .await;
    setup.stop().await;
}

/// Side by side on one real Karmada (`--ignored`; README's "Running with Karmada" records its
/// table): the same workloads on a fragmented fleet, each alone, placed once by
/// karmada-scheduler (its default estimator) and once by tephra; then, on a fresh fleet whose
/// karmada-scheduler calls karmada-scheduler-estimator in each member (when it is built:
/// `bash .ci/real-components --with-karmada-estimator`), by karmada-scheduler again. Where
/// each lands, whether its pods can all run there, and how long placement took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: cargo test -p tephra-kube --test karmada -- --ignored --nocapture"]
async fn karmada_scheduler_and_tephra_side_by_side_on_a_fragmented_fleet() {
    logs();
    // 16 GPUs each: east on eight nodes of 2, west on two nodes of 8.
    let fleet: [(&str, &[u32]); 2] = [("east", &[2; 8]), ("west", &[8, 8])];
    let Some(setup) = start(&fleet).await else {
        return;
    };
    let mut rows = side_by_side_rounds(
        &setup,
        &[
            ("karmada-scheduler", "default-scheduler"),
            ("tephra", "tephra"),
        ],
        &SHAPES,
    )
    .await;
    setup.stop().await;
    let options = KarmadaOptions {
        estimator: true,
        ..KarmadaOptions::default()
    };
    match tephra_envtest::components::Components::locate()
        .and_then(|c| c.karmada())
        .map(|k| k.dir.join("karmada-scheduler-estimator").is_file())
    {
        Ok(true) => {
            let setup = start_with(&fleet, options).await.unwrap();
            rows.extend(
                side_by_side_rounds(
                    &setup,
                    &[("karmada-scheduler + estimator", "default-scheduler")],
                    &SHAPES,
                )
                .await,
            );
            setup.stop().await;
        }
        _ => println!(
            "karmada-scheduler-estimator is not built (bash .ci/real-components \
             --with-karmada-estimator): its rows are left out"
        ),
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    println!("| workload | scheduler | placed in | all pods run there | time to placement |");
    println!("| --- | --- | --- | --- | --- |");
    for (_, r) in rows {
        println!("{r}");
    }
}

/// The side-by-side's workloads: (kind, pods, GPUs of each).
const SHAPES: [(&str, u32, u32); 6] = [
    ("Job", 1, 8),
    ("Job", 4, 4),
    ("Job", 2, 8),
    ("Job", 8, 2),
    ("Deployment", 4, 4),
    ("Deployment", 2, 8),
];

/// A Deployment of `replicas` pods asking `gpus` GPUs each, its pods for the members' tephra.
fn deployment(name: &str, replicas: u32, gpus: u32) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"schedulerName": "volcano", "containers": [{
                    "name": "serve", "image": "busybox",
                    "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus.to_string()},
                        "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}}}
    })
}

/// One round of the side-by-side on `setup`'s fleet: each workload, alone, through each
/// `(label, schedulerName)`. Rows keyed for sorting by workload, then scheduler.
async fn side_by_side_rounds(
    setup: &Setup,
    schedulers: &[(&str, &str)],
    shapes: &[(&str, u32, u32)],
) -> Vec<(String, String)> {
    let fleet = &setup.fleet;
    let karmada = fleet.client(KARMADA).unwrap();
    let mut rows = Vec::new();
    for (n, &(kind, pods, gpus)) in shapes.iter().enumerate() {
        for (s, (label, scheduler)) in schedulers.iter().enumerate() {
            let name = format!(
                "{}{pods}x{gpus}-{}",
                kind[..1].to_lowercase(),
                &scheduler[..3]
            );
            let started = std::time::Instant::now();
            let (template, api_version, resource) = if kind == "Job" {
                (
                    volcano_job(&name, pods, gpus),
                    "batch.volcano.sh/v1alpha1",
                    ("batch.volcano.sh", "v1alpha1", "jobs"),
                )
            } else {
                (
                    deployment(&name, pods, gpus),
                    "apps/v1",
                    ("apps", "v1", "deployments"),
                )
            };
            objects::create(&karmada, &template).await.unwrap();
            let mut pp = policy(&name, scheduler);
            pp["spec"]["resourceSelectors"] =
                json!([{"apiVersion": api_version, "kind": kind, "name": name}]);
            pp["spec"]["placement"]["clusterAffinity"] = json!({});
            fleet.propagation_policy(pp).await.unwrap();
            let suffix = kind.to_lowercase();
            let decided = async {
                loop {
                    let rb = fleet.resource_binding("default", &suffix, &name).await;
                    if let Ok(Some(rb)) = rb {
                        // Each cluster with the replicas it was given (none: the whole gang).
                        let clusters: Vec<String> = rb["spec"]["clusters"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|c| {
                                let name = c["name"].as_str()?;
                                Some(match c["replicas"].as_u64().filter(|r| *r > 0) {
                                    Some(r) => format!("{name} ({r})"),
                                    None => name.to_string(),
                                })
                            })
                            .collect();
                        if !clusters.is_empty() {
                            return clusters.join(", ");
                        }
                        if scheduled_condition(&rb).is_some_and(|(status, _, _)| status == "False")
                        {
                            return "none (waits)".to_string();
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            };
            let Ok(placed) = tokio::time::timeout(Duration::from_secs(60), decided).await else {
                // A scheduler that died says why in its log; nothing more is placed by it.
                let log = fleet.karmada.log_tail("karmada-scheduler", 400);
                let panic = log.lines().find(|l| l.starts_with("panic:"));
                assert!(panic.is_some(), "{name} neither placed nor refused in 60 s");
                rows.push((
                    format!("99{label}"),
                    format!(
                        "| every workload | {label} | none: karmada-scheduler exited at its first \
                         estimator call (`{}`) | - | - |",
                        panic.unwrap_or_default()
                    ),
                ));
                return rows;
            };
            let took = started.elapsed();
            let mut runs = Vec::new();
            for entry in placed.split(", ").filter(|_| !placed.starts_with("none")) {
                let (cluster, want) = match entry.split_once(" (") {
                    Some((c, r)) => (c, r.trim_end_matches(')').parse().unwrap_or(pods)),
                    None => (entry, pods),
                };
                let member = fleet.client(cluster).unwrap();
                let bound = async {
                    loop {
                        let n = nodes_of(&member, "default", &format!("{name}-")).await;
                        if n.len() >= want as usize && n.values().all(Option::is_some) {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                };
                let ok = tokio::time::timeout(Duration::from_secs(20), bound).await;
                runs.push(format!(
                    "{cluster}: {}",
                    if ok.is_ok() {
                        "yes"
                    } else {
                        "no, pods stay Pending"
                    }
                ));
            }
            let runs = if runs.is_empty() {
                "-".to_string()
            } else {
                runs.join("; ")
            };
            let what = if kind == "Job" {
                format!("{pods} × {gpus} GPUs (Volcano Job)")
            } else {
                format!("{pods} × {gpus} GPUs (Deployment)")
            };
            rows.push((
                format!("{n:02}{s:02}{label}"),
                format!(
                    "| {what} | {label} | {placed} | {runs} | {:.1} s |",
                    took.as_secs_f64()
                ),
            ));
            // Gone before the next: the template, its policy, and its pods in the members.
            let (group, version, plural) = resource;
            let api: Api<DynamicObject> = Api::namespaced_with(
                karmada.clone(),
                "default",
                &ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk(group, version, kind),
                    plural,
                ),
            );
            api.delete(&name, &Default::default()).await.unwrap();
            for m in ["east", "west"] {
                let c = fleet.client(m).unwrap();
                eventually(60, &format!("{name}'s pods gone from {m}"), || async {
                    nodes_of(&c, "default", &format!("{name}-"))
                        .await
                        .is_empty()
                        .then_some(())
                })
                .await;
            }
        }
    }
    rows
}

/// The members of the randomized lifecycle, with the GPUs of each node.
const RANDOM_FLEET: [(&str, &[u32]); 3] = [
    ("east", &[2, 2, 2, 2]),
    ("south", &[4, 4]),
    ("west", &[4, 4]),
];

/// The pods of Volcano Job `job` in `member` (namespace `default`): (node, GPUs, finished).
async fn job_pods(member: &kube::Client, job: &str) -> Vec<(Option<String>, u32, bool)> {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(member.clone(), "default");
    let list = pods
        .list(&ListParams::default().labels(&format!("volcano.sh/job-name={job}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    list.into_iter().map(pod_use).collect()
}

/// Where a pod is, what it asks, and whether it finished.
fn pod_use(p: k8s_openapi::api::core::v1::Pod) -> (Option<String>, u32, bool) {
    let gpus = p
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .filter_map(|c| {
            c.resources
                .as_ref()?
                .requests
                .as_ref()?
                .get("nvidia.com/gpu")
        })
        .filter_map(|q| q.0.parse::<u32>().ok())
        .sum();
    let finished = matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    );
    (p.spec.and_then(|s| s.node_name), gpus, finished)
}

/// One seed of the randomized lifecycle: Volcano Jobs of random shapes created and deleted on
/// Karmada, members stopped and restored, with the invariants checked after every step and at
/// quiescence. A failure prints the seed's steps.
async fn karmada_lifecycle(seed: u64, steps: usize) {
    // A graceful eviction whose new placement never comes ends after 20 s, not 10 min.
    let options = KarmadaOptions {
        controller_manager_args: vec!["--graceful-eviction-timeout=20s".into()],
        ..KarmadaOptions::default()
    };
    let Some(setup) = start_with(&RANDOM_FLEET, options).await else {
        return;
    };
    let karmada = setup.fleet.client(KARMADA).unwrap();
    objects::create(&karmada, &not_ready_taints())
        .await
        .unwrap();
    let jobs: Api<tephra_api::Job> = Api::namespaced(karmada.clone(), "default");
    let mut rng = Rng::new(seed);
    let mut live: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    let mut deleted: Vec<String> = Vec::new();
    let mut stopped: Option<&str> = None;
    let mut restored: BTreeMap<&str, std::time::Instant> = BTreeMap::new();
    let mut log: Vec<String> = Vec::new();
    for step in 0..steps {
        let names: Vec<String> = live.keys().cloned().collect();
        let what = match rng.below(10) {
            0..=4 => {
                let name = format!("s{seed}-j{step}");
                let (pods, gpus) = (1 + rng.below(3) as u32, [1, 2, 4][rng.below(3)]);
                let mut pp = policy(&name, "tephra");
                pp["spec"]["placement"]["clusterAffinity"] = json!({});
                setup.submit(volcano_job(&name, pods, gpus), pp).await;
                live.insert(name.clone(), (pods, gpus));
                format!("create {name}: {pods} × {gpus} GPUs")
            }
            5 | 6 if !names.is_empty() => {
                let name = rng.pick(&names).unwrap().clone();
                jobs.delete(&name, &Default::default()).await.unwrap();
                live.remove(&name);
                deleted.push(name.clone());
                format!("delete {name}")
            }
            7 if stopped.is_none() => {
                let (m, _) = *rng.pick(&RANDOM_FLEET).unwrap();
                setup.fleet.stop_member(m).unwrap();
                stopped = Some(m);
                format!("stop {m}")
            }
            8 if stopped.is_some() => {
                let m = stopped.take().unwrap();
                setup.fleet.restore_member(m).await.unwrap();
                restored.insert(m, std::time::Instant::now());
                format!("restore {m}")
            }
            _ => "wait".to_string(),
        };
        log.push(what);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        if let Err(e) = always(&setup, stopped, &restored, &live).await {
            panic!(
                "seed {seed}, after step {step}: {e}\nsteps:\n{}",
                log.join("\n")
            );
        }
    }
    if let Some(m) = stopped.take() {
        setup.fleet.restore_member(m).await.unwrap();
        log.push(format!("restore {m}"));
    }
    let quiet_from = std::time::Instant::now();
    let deadline = quiet_from + Duration::from_secs(180);
    let mut last = String::new();
    loop {
        let checked = match always(&setup, None, &BTreeMap::new(), &live).await {
            Ok(()) => quiescent(&setup, &live, &deleted).await,
            Err(e) => Err(e),
        };
        match checked {
            Ok(()) => break,
            Err(e) if std::time::Instant::now() > deadline => {
                panic!(
                    "seed {seed}, at quiescence: {e}\nsteps:\n{}",
                    log.join("\n")
                )
            }
            Err(e) => {
                if e != last {
                    eprintln!(
                        "seed {seed}: {:.0} s into quiescence: {e}",
                        quiet_from.elapsed().as_secs_f64()
                    );
                    last = e;
                }
                tokio::time::sleep(Duration::from_millis(500)).await
            }
        }
    }
    eprintln!(
        "seed {seed}: quiet {:.0} s after its last step; steps: {}",
        quiet_from.elapsed().as_secs_f64(),
        log.join("; ")
    );
    setup.stop().await;
}

/// How long after a member answers again a copy of a Job that its binding no longer names may
/// still run there: Karmada withdraws it (the Work's deletion, held by its finalizer while the
/// member was away, then the member's garbage collector) only once the member is back, and
/// the graceful eviction task may have ended before that, once the new copy was healthy.
const WITHDRAWAL_GRACE: Duration = Duration::from_secs(45);

/// What holds after every step: no node of a member that answers holds more GPUs than it has;
/// a binding of tephra's names one cluster at most; a Job's pods hold nodes in two members only
/// while Karmada's graceful eviction of one of them lasts, or for [`WITHDRAWAL_GRACE`] after
/// the member holding the copy its binding no longer names answers again.
async fn always(
    setup: &Setup,
    stopped: Option<&str>,
    restored: &BTreeMap<&str, std::time::Instant>,
    live: &BTreeMap<String, (u32, u32)>,
) -> Result<(), String> {
    for (m, gpus) in RANDOM_FLEET.iter().filter(|(m, _)| Some(*m) != stopped) {
        let client = setup.fleet.client(m).unwrap();
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client, "default");
        let Ok(list) = pods.list(&ListParams::default()).await else {
            continue;
        };
        let mut used: BTreeMap<String, u32> = BTreeMap::new();
        for (node, g, finished) in list.items.into_iter().map(pod_use) {
            if let (Some(node), false) = (node, finished) {
                *used.entry(node).or_default() += g;
            }
        }
        for (node, g) in used {
            let i: usize = node
                .rsplit('-')
                .next()
                .and_then(|i| i.parse().ok())
                .unwrap_or(0);
            if g > gpus[i] {
                return Err(format!("node {node} holds {g} GPUs of {}", gpus[i]));
            }
        }
    }
    for name in live.keys() {
        let Some(rb) = setup.binding(name).await else {
            continue;
        };
        let clusters = clusters_of(&rb);
        if clusters.len() > 1 {
            return Err(format!("{name}'s binding names {clusters:?}"));
        }
        let evicting = rb["spec"]["gracefulEvictionTasks"]
            .as_array()
            .is_some_and(|t| !t.is_empty());
        let mut running_in = Vec::new();
        for (m, _) in RANDOM_FLEET.iter().filter(|(m, _)| Some(*m) != stopped) {
            let pods = job_pods(&setup.fleet.client(m).unwrap(), name).await;
            if pods
                .iter()
                .any(|(node, _, finished)| node.is_some() && !finished)
            {
                running_in.push(*m);
            }
        }
        let withdrawing = |m: &&str| {
            !clusters.iter().any(|c| c == m)
                && restored
                    .get(*m)
                    .is_some_and(|at| at.elapsed() < WITHDRAWAL_GRACE)
        };
        if !evicting && running_in.iter().filter(|m| !withdrawing(m)).count() > 1 {
            return Err(format!(
                "{name} runs in {running_in:?} with no eviction under way"
            ));
        }
    }
    Ok(())
}

/// What holds once the world is still: every live Job's binding either names one member, where
/// all its pods run and nowhere else, or none, saying why, with no pod of it running anywhere;
/// a deleted Job has left no pod in any member.
async fn quiescent(
    setup: &Setup,
    live: &BTreeMap<String, (u32, u32)>,
    deleted: &[String],
) -> Result<(), String> {
    for (name, (pods, _)) in live {
        let rb = setup
            .binding(name)
            .await
            .ok_or_else(|| format!("{name} has no binding"))?;
        let target = clusters_of(&rb);
        for (m, _) in RANDOM_FLEET {
            let found = job_pods(&setup.fleet.client(m).unwrap(), name).await;
            let bound = found.iter().filter(|(n, _, _)| n.is_some()).count();
            if target.first().map(String::as_str) == Some(m) {
                if found.len() != *pods as usize || bound != found.len() {
                    let jobs: Api<tephra_api::Job> =
                        Api::namespaced(setup.fleet.client(m).unwrap(), "default");
                    let job = jobs.get_opt(name).await.ok().flatten();
                    let phase = job.as_ref().and_then(|j| j.status.as_ref()?.state.phase);
                    return Err(format!(
                        "{name} in {m}: {} of {pods} pods exist, {bound} bound; the Job {}",
                        found.len(),
                        match (&job, phase) {
                            (None, _) => "is not there".to_string(),
                            (Some(_), p) => format!("is there, phase {p:?}"),
                        }
                    ));
                }
            } else if bound > 0 {
                return Err(format!(
                    "{name} has {bound} pods in {m}, placed in {target:?}"
                ));
            }
        }
        if target.is_empty() {
            match scheduled_condition(&rb) {
                Some((status, _, message)) if status == "False" && !message.is_empty() => {}
                other => return Err(format!("{name} waits without a reason: {other:?}")),
            }
        }
    }
    for name in deleted {
        for (m, _) in RANDOM_FLEET {
            if !job_pods(&setup.fleet.client(m).unwrap(), name)
                .await
                .is_empty()
            {
                return Err(format!("deleted {name} still has pods in {m}"));
            }
        }
    }
    Ok(())
}

/// Seed 1 in the default suite (about 40 s). It was flaky while a restored member's watchers
/// could wait up to a minute to ask again (`retry.rs`); 14 runs since, at load up to 4.8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_lifecycles_through_karmada_keep_gangs_whole_and_leave_nothing_behind() {
    logs();
    karmada_lifecycle(1, 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "more seeds: TEPHRA_KARMADA_SEEDS=20 cargo test -p tephra-kube --test karmada -- --ignored many_random (TEPHRA_KARMADA_FIRST_SEED to start later)"]
async fn many_random_lifecycles_through_karmada() {
    logs();
    let seeds: u64 = std::env::var("TEPHRA_KARMADA_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let first: u64 = std::env::var("TEPHRA_KARMADA_FIRST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    for seed in first..=seeds {
        karmada_lifecycle(seed, 16).await;
        eprintln!("karmada lifecycle: seed {seed} passed");
    }
}
