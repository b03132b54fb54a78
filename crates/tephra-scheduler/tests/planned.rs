//! Planned nodes (`tephra.io/planned-node`): a plan a fleet scheduler made for a member's pods
//! is followed where it still fits, and is only a first choice: a pod whose planned node cannot
//! take it is placed like any other, and a gang stays all-or-nothing either way.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use tephra_scheduler::model::Cluster;
use tephra_scheduler::testing::{GangJob, Role, add_cluster, add_job, add_nodes, apply_binds};
use tephra_scheduler::{Cache, Decisions, SchedulerConfig, schedule};

const GPU_NODE: &[(&str, &str)] = &[
    ("cpu", "16"),
    ("memory", "64Gi"),
    ("pods", "110"),
    ("nvidia.com/gpu", "4"),
];

/// One cluster `east` with four identical GPU nodes `g-0` .. `g-3`.
fn fleet() -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(&mut c, "east", "g", 4, GPU_NODE, &[]).unwrap();
    c
}

fn run(c: &Cache) -> Decisions {
    schedule(
        c.snapshot(),
        Arc::new(SchedulerConfig::default_config()),
        0,
        1,
    )
}

/// `(pod, node)` of the job's binds, by pod name.
fn binds_of(d: &Decisions, job: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = d
        .binds
        .iter()
        .filter(|b| b.job == job)
        .map(|b| (b.task.clone(), b.node.clone()))
        .collect();
    out.sort();
    out
}

fn gpus(n: &str) -> Vec<(&'static str, String)> {
    vec![("nvidia.com/gpu", n.to_string())]
}

fn role(name: &str, replicas: u32, gpu: &str) -> Role {
    let req = gpus(gpu);
    let list: Vec<(&str, &str)> = req.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut all = vec![("cpu", "1"), ("memory", "1Gi")];
    all.extend(list);
    Role::new(name, replicas, &all)
}

#[test]
fn pods_go_to_the_nodes_their_plan_names_rather_than_where_the_scan_would_put_them() {
    let mut c = fleet();
    add_job(&mut c, &GangJob::new("free", vec![role("w", 2, "2")])).unwrap();
    add_job(
        &mut c,
        &GangJob::new("plan", vec![role("w", 2, "2").planned(&["g-3", "g-1"])]),
    )
    .unwrap();
    let d = run(&c);
    assert_eq!(
        binds_of(&d, "default/plan"),
        vec![
            ("default/plan-w-0".to_string(), "g-3".to_string()),
            ("default/plan-w-1".to_string(), "g-1".to_string()),
        ]
    );
    // Without a plan, the same pods go elsewhere: the plan is what put them there.
    let mut c = fleet();
    add_job(&mut c, &GangJob::new("free", vec![role("w", 2, "2")])).unwrap();
    add_job(&mut c, &GangJob::new("plan", vec![role("w", 2, "2")])).unwrap();
    assert_ne!(
        binds_of(&run(&c), "default/plan")
            .into_iter()
            .map(|(_, n)| n)
            .collect::<Vec<_>>(),
        vec!["g-3".to_string(), "g-1".to_string()]
    );
}

#[test]
fn a_pod_whose_planned_node_is_full_or_unknown_is_placed_elsewhere_and_the_gang_stays_whole() {
    let mut c = fleet();
    // g-0 is full before the planned gang comes.
    let d = run(&{
        add_job(
            &mut c,
            &GangJob::new("first", vec![role("w", 1, "4").planned(&["g-0"])]),
        )
        .unwrap();
        c.clone()
    });
    assert_eq!(
        binds_of(&d, "default/first"),
        vec![("default/first-w-0".to_string(), "g-0".to_string())]
    );
    apply_binds(&mut c, &d).unwrap();
    add_job(
        &mut c,
        &GangJob::new(
            "late",
            vec![role("w", 3, "4").planned(&["g-0", "nowhere", "g-2"])],
        ),
    )
    .unwrap();
    let binds = binds_of(&run(&c), "default/late");
    assert_eq!(binds.len(), 3, "{binds:?}");
    let nodes: Vec<&str> = binds.iter().map(|(_, n)| n.as_str()).collect();
    assert!(!nodes.contains(&"g-0"), "{nodes:?}");
    assert_eq!(binds[2].1, "g-2", "the plan that still fits is kept");
}

#[test]
fn a_planned_gang_that_cannot_fit_whole_binds_none_of_its_planned_pods() {
    let mut c = fleet();
    // Five pods of 4 GPUs on four nodes of 4: the four planned ones would fit, the gang not.
    add_job(
        &mut c,
        &GangJob::new(
            "big",
            vec![role("w", 5, "4").planned(&["g-0", "g-1", "g-2", "g-3"])],
        ),
    )
    .unwrap();
    let d = run(&c);
    assert!(binds_of(&d, "default/big").is_empty(), "{:?}", d.binds);
}
