//! Behaviour of one scheduling session: gangs, two-level placement, GPU packing, policies,
//! queues and explanations. Cluster selection (`session/clusters.rs`) and queues
//! (`session/queues.rs`) have files of their own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use tephra_scheduler::model::{
    Cluster, Dequeue, GroupPhase, JobPolicy, QueueSpec, QueueState, Requirement, SelectorOp, Taint,
    TaintEffect, Toleration,
};
use tephra_scheduler::testing::{GangJob, Role, add_cluster, add_job, add_nodes, apply_binds};
use tephra_scheduler::{Cache, Decisions, Event, SchedulerConfig, schedule};

const GPU8: &[(&str, &str)] = &[
    ("cpu", "96"),
    ("memory", "1Ti"),
    ("pods", "110"),
    ("nvidia.com/gpu", "8"),
];
const CPU64: &[(&str, &str)] = &[("cpu", "64"), ("memory", "256Gi"), ("pods", "110")];

/// One cluster `east` with `n` 8-GPU nodes named `gpu-<i>`.
fn gpu_cluster(n: usize) -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(&mut c, "east", "gpu", n, GPU8, &[]).unwrap();
    c
}

fn run(cache: &Cache) -> Decisions {
    schedule(
        cache.snapshot(),
        Arc::new(SchedulerConfig::default_config()),
        0,
        1,
    )
}

fn gpu_role(name: &str, replicas: u32, gpus: &str) -> Role {
    Role::new(
        name,
        replicas,
        &[("cpu", "8"), ("memory", "64Gi"), ("nvidia.com/gpu", gpus)],
    )
}

/// Runs a job of `nodes` whole 8-GPU pods and binds it, so that it holds that many nodes.
fn occupy(cache: &mut Cache, name: &str, nodes: u32) {
    add_job(cache, &GangJob::new(name, vec![gpu_role("w", nodes, "8")])).unwrap();
    let d = run(cache);
    assert_eq!(
        binds_of(&d, &format!("default/{name}")).len(),
        nodes as usize
    );
    apply_binds(cache, &d).unwrap();
}

fn binds_of<'a>(d: &'a Decisions, job: &str) -> Vec<&'a tephra_scheduler::decisions::Bind> {
    d.binds.iter().filter(|b| b.job == job).collect()
}

#[test]
fn a_gang_that_fits_is_bound_whole_and_its_podgroup_runs() {
    let mut c = gpu_cluster(4);
    let job = GangJob::new("train", vec![gpu_role("worker", 4, "8")]);
    add_job(&mut c, &job).unwrap();
    let d = run(&c);
    assert_eq!(binds_of(&d, "default/train").len(), 4);
    assert_eq!(d.group("default/train").unwrap().phase, GroupPhase::Running);
    let cond = &d.group("default/train").unwrap().conditions[0];
    assert_eq!((cond.kind, cond.status), ("Scheduled", true));
}

#[test]
fn a_gang_that_does_not_fit_binds_nothing_and_says_why() {
    // Three nodes could hold it, but one is busy.
    let mut c = gpu_cluster(3);
    occupy(&mut c, "busy", 1);
    add_job(
        &mut c,
        &GangJob::new("big", vec![gpu_role("worker", 3, "8")]),
    )
    .unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty(), "no partial gang: {:?}", d.binds);
    let ev = d.event_for("default/big").expect("an explanation");
    assert!(
        ev.message
            .starts_with("3/3 tasks in gang unschedulable: cluster east:"),
        "{}",
        ev.message
    );
    assert!(ev.message.contains("nvidia.com/gpu"), "{}", ev.message);
    let cond = &d.group("default/big").unwrap().conditions[0];
    assert_eq!(
        (cond.kind, cond.reason.as_str()),
        ("Unschedulable", "NotEnoughResources")
    );
}

#[test]
fn one_jobs_gpu_tasks_are_packed_onto_few_nodes() {
    let mut c = gpu_cluster(4);
    add_job(
        &mut c,
        &GangJob::new("small", vec![gpu_role("worker", 4, "2")]),
    )
    .unwrap();
    let d = run(&c);
    let binds = binds_of(&d, "default/small");
    assert_eq!(binds.len(), 4);
    let nodes: std::collections::BTreeSet<_> = binds.iter().map(|b| b.node.as_str()).collect();
    assert_eq!(
        nodes.len(),
        1,
        "4 x 2 GPUs fit on one 8-GPU node: {nodes:?}"
    );
}

#[test]
fn cpu_only_tasks_stay_off_gpu_nodes_while_cpu_nodes_can_take_them() {
    let mut c = gpu_cluster(3);
    add_nodes(&mut c, "east", "cpu", 1, CPU64, &[]).unwrap();
    add_job(
        &mut c,
        &GangJob::new(
            "etl",
            vec![Role::new("w", 3, &[("cpu", "16"), ("memory", "32Gi")])],
        ),
    )
    .unwrap();
    let d = run(&c);
    let binds = binds_of(&d, "default/etl");
    assert_eq!(binds.len(), 3);
    assert!(
        binds.iter().all(|b| b.node.starts_with("cpu-")),
        "{binds:?}"
    );

    // When the CPU node is full, a CPU task may still use a GPU node.
    add_job(
        &mut c,
        &GangJob::new(
            "more",
            vec![Role::new("w", 2, &[("cpu", "16"), ("memory", "32Gi")])],
        )
        .created(1),
    )
    .unwrap();
    let d = run(&c);
    let more = binds_of(&d, "default/more");
    assert_eq!(more.len(), 2);
    assert_eq!(
        more.iter().filter(|b| b.node.starts_with("gpu-")).count(),
        1,
        "{more:?}"
    );
}

#[test]
fn gpu_model_is_selected_through_node_labels() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(
        &mut c,
        "east",
        "t4",
        4,
        GPU8,
        &[("nvidia.com/gpu.product", "T4")],
    )
    .unwrap();
    add_nodes(
        &mut c,
        "east",
        "a100",
        1,
        GPU8,
        &[("nvidia.com/gpu.product", "A100")],
    )
    .unwrap();
    let role = gpu_role("w", 2, "4").select("nvidia.com/gpu.product", "A100");
    add_job(&mut c, &GangJob::new("llm", vec![role])).unwrap();
    let d = run(&c);
    let binds = binds_of(&d, "default/llm");
    assert_eq!(binds.len(), 2);
    assert!(
        binds.iter().all(|b| b.node.starts_with("a100-")),
        "{binds:?}"
    );
}

#[test]
fn per_role_minimums_are_met_before_extra_replicas() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(
        &mut c,
        "east",
        "cpu",
        1,
        &[("cpu", "10"), ("memory", "64Gi")],
        &[],
    )
    .unwrap();
    // 10 cpus: the driver (4) must be placed; executors (2 each) fill the rest.
    let job = GangJob::new(
        "spark",
        vec![
            Role::new("executor", 5, &[("cpu", "2")]).min(2),
            Role::new("driver", 1, &[("cpu", "4")]).min(1),
        ],
    )
    .min_member(3);
    add_job(&mut c, &job).unwrap();
    let d = run(&c);
    let binds = binds_of(&d, "default/spark");
    assert!(binds.iter().any(|b| b.role == "driver"), "{binds:?}");
    assert_eq!(binds.iter().filter(|b| b.role == "executor").count(), 3);
}

#[test]
fn role_minimums_beyond_min_member_are_ignored_as_volcano_does() {
    // A Volcano Job with dependsOn: the driver runs first, the executors (minTaskMember 10,
    // Volcano's default of all replicas) do not exist yet. minMember 1 is below the roles' sum,
    // so the gang is held to minMember alone and the driver is placed.
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(&mut c, "east", "cpu", 1, CPU64, &[]).unwrap();
    let job = GangJob::new(
        "etl",
        vec![
            Role::new("driver", 1, &[("cpu", "2")]).min(1),
            Role::new("executor", 0, &[("cpu", "4")]).min(10),
        ],
    )
    .min_member(1);
    add_job(&mut c, &job).unwrap();
    let d = run(&c);
    let binds = binds_of(&d, "default/etl");
    assert_eq!(binds.len(), 1, "{:?}", d.group("default/etl"));
    assert_eq!(binds[0].role, "driver");
}

#[test]
fn best_effort_pods_are_backfilled() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(&mut c, "east", "cpu", 1, CPU64, &[]).unwrap();
    add_job(&mut c, &GangJob::new("be", vec![Role::new("w", 2, &[])])).unwrap();
    let d = run(&c);
    assert_eq!(binds_of(&d, "default/be").len(), 2);
}

#[test]
fn the_same_snapshot_and_config_give_the_same_decisions() {
    let mut c = regional_fleet();
    for i in 0..6 {
        add_job(
            &mut c,
            &GangJob::new(&format!("j{i}"), vec![gpu_role("w", 2, "2")]).created(i),
        )
        .unwrap();
    }
    assert_eq!(run(&c), run(&c));
}

/// The summed node score of `job`'s first task on `node` of cluster `east`, as a session
/// opening on `cache` sees it.
fn cpu_task_score_on(cache: &Cache, job: &str, node: &str) -> f64 {
    let ssn =
        tephra_scheduler::open_session(cache.snapshot(), &SchedulerConfig::default_config(), 0, 1);
    let task = ssn.snap.task_id(&format!("default/{job}-w-0")).unwrap();
    let node = ssn.snap.node_id("east", node).unwrap();
    let task = ssn.snap.tasks.get(task).unwrap();
    ssn.hooks().node_score(task, node)
}

#[test]
fn gpu_nodes_discourage_cpu_tasks_only_where_cpu_nodes_could_take_them() {
    let etl = GangJob::new(
        "etl",
        vec![Role::new("w", 1, &[("cpu", "16"), ("memory", "32Gi")])],
    );
    // Mixed: the GPU node scores below zero and below the CPU node.
    let mut mixed = gpu_cluster(1);
    add_nodes(&mut mixed, "east", "cpu", 1, CPU64, &[]).unwrap();
    add_job(&mut mixed, &etl).unwrap();
    let on_gpu = cpu_task_score_on(&mixed, "etl", "gpu-0");
    assert!(on_gpu < 0.0, "{on_gpu}");
    assert!(on_gpu < cpu_task_score_on(&mixed, "etl", "cpu-0"));
    // Only GPU nodes: nothing to prefer, so no penalty that would push every node below
    // zero (and make every scan for a CPU pod widen to the whole cluster).
    let mut gpus = gpu_cluster(2);
    add_job(&mut gpus, &etl).unwrap();
    let only = cpu_task_score_on(&gpus, "etl", "gpu-0");
    assert!(only > 0.0, "{only}");
}

#[test]
fn a_cpu_task_spilling_onto_gpu_nodes_takes_the_best_of_the_nodes_searched() {
    // The only CPU node is full, so a CPU task can only go to a GPU node, where gpupack scores
    // it below zero on every one alike. The node it would fit best comes last in scan order.
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(&mut c, "east", "cpu", 1, CPU64, &[]).unwrap();
    add_nodes(&mut c, "east", "gpu", 400, GPU8, &[]).unwrap();
    let roomy = &[
        ("cpu", "192"),
        ("memory", "2Ti"),
        ("pods", "110"),
        ("nvidia.com/gpu", "8"),
    ];
    add_nodes(&mut c, "east", "roomy", 1, roomy, &[]).unwrap();
    let fill = GangJob::new(
        "fill",
        vec![Role::new("w", 1, &[("cpu", "64"), ("memory", "128Gi")])],
    );
    add_job(&mut c, &fill).unwrap();
    let d = run(&c);
    assert_eq!(binds_of(&d, "default/fill")[0].node, "cpu-0");
    apply_binds(&mut c, &d).unwrap();
    let etl = GangJob::new(
        "etl",
        vec![Role::new("w", 1, &[("cpu", "16"), ("memory", "32Gi")])],
    );
    add_job(&mut c, &etl).unwrap();
    // A search of every node finds it...
    let mut everywhere = SchedulerConfig::default_config();
    tephra_scheduler::default_node_search(
        &mut everywhere,
        &tephra_scheduler::placement::SearchArgs {
            percentage: 100,
            ..Default::default()
        },
    );
    let d = schedule(c.snapshot(), Arc::new(everywhere), 0, 1);
    assert_eq!(binds_of(&d, "default/etl")[0].node, "roomy-0");
    // ...the default search stops at the nodes it was asked to find, as Volcano's does,
    // rather than scoring the whole cluster for every CPU gang.
    let d = run(&c);
    let node = &binds_of(&d, "default/etl")[0].node;
    assert!(node.starts_with("gpu-"), "{node}");
}

#[path = "session/clusters.rs"]
mod clusters;

use clusters::regional_fleet;
#[path = "session/queues.rs"]
mod queues;

/// The default configuration with enqueue and allocate only, allocate capped at `budget` pods.
fn capped(budget: i64) -> Arc<SchedulerConfig> {
    let mut config = SchedulerConfig::default_config();
    config.actions.retain(|a| a == "enqueue" || a == "allocate");
    config
        .action_args
        .entry("allocate".into())
        .or_default()
        .insert(
            tephra_scheduler::actions::allocate::POD_BUDGET.into(),
            tephra_scheduler::config::ArgValue::Int(budget),
        );
    Arc::new(config)
}

#[test]
fn a_pod_budget_stops_allocate_after_the_gang_that_reaches_it_leaving_the_rest_untried() {
    let mut cache = Cache::new();
    add_cluster(&mut cache, Cluster::named("east")).unwrap();
    add_nodes(&mut cache, "east", "cpu", 4, CPU64, &[]).unwrap();
    for g in 0..10 {
        let job = GangJob::new(&format!("g{g}"), vec![Role::new("w", 8, &[("cpu", "1")])]);
        add_job(&mut cache, &job).unwrap();
    }
    let mut sessions = 0;
    let mut bound = 0;
    loop {
        sessions += 1;
        let d = schedule(cache.snapshot(), capped(12), 0, sessions);
        // Whole gangs only, and the gang that reaches 12 pods is the last one tried: nothing
        // is said about the gangs left untried (they were not found wanting).
        assert!(d.binds.len() <= 16, "{} binds", d.binds.len());
        assert_eq!(d.binds.len() % 8, 0);
        assert!(d.events.is_empty(), "{:?}", d.events);
        if d.binds.is_empty() {
            break;
        }
        bound += d.binds.len();
        apply_binds(&mut cache, &d).unwrap();
        assert!(sessions < 20);
    }
    // Every gang is placed in the end, two a session.
    assert_eq!(bound, 80);
    assert_eq!(sessions, 6);
}

#[test]
fn a_configuration_file_cannot_cap_allocate() {
    let text = format!(
        "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: gang\nconfigurations:\n- name: allocate\n  arguments:\n    {}: 8\n",
        tephra_scheduler::actions::allocate::POD_BUDGET
    );
    let err = SchedulerConfig::parse_with(
        &text,
        &tephra_scheduler::Registry,
        tephra_scheduler::config::ParseOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(tephra_scheduler::actions::allocate::POD_BUDGET),
        "{err}"
    );
}
