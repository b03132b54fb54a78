//! The first level of placement: which cluster a gang goes to (never a fragmented one that only
//! adds up, region affinity, cluster taints, one cluster unless the gang may be split, and a
//! split gang within its spread constraint's maxGroups).

use super::*;

#[test]
fn a_fragmented_cluster_with_more_free_gpus_in_total_is_never_chosen() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("fragmented")).unwrap();
    add_cluster(&mut c, Cluster::named("whole")).unwrap();
    // 16 nodes with one free GPU each: 16 free GPUs, but no node can take an 8-GPU pod.
    add_nodes(
        &mut c,
        "fragmented",
        "f",
        16,
        &[("cpu", "96"), ("memory", "1Ti"), ("nvidia.com/gpu", "1")],
        &[],
    )
    .unwrap();
    // 2 nodes with 8 free GPUs each: fewer in total, but the gang fits.
    add_nodes(&mut c, "whole", "w", 2, GPU8, &[]).unwrap();
    add_job(
        &mut c,
        &GangJob::new("train", vec![gpu_role("worker", 2, "8")]),
    )
    .unwrap();
    let d = run(&c);
    let binds = binds_of(&d, "default/train");
    assert_eq!(binds.len(), 2);
    assert!(binds.iter().all(|b| b.cluster == "whole"), "{binds:?}");
}

#[test]
fn the_fragmented_cluster_alone_is_refused_with_a_node_level_reason() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("fragmented")).unwrap();
    add_nodes(
        &mut c,
        "fragmented",
        "f",
        16,
        &[("cpu", "96"), ("memory", "1Ti"), ("nvidia.com/gpu", "1")],
        &[],
    )
    .unwrap();
    add_job(
        &mut c,
        &GangJob::new("train", vec![gpu_role("worker", 2, "8")]),
    )
    .unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty());
    let ev = d.event_for("default/train").unwrap();
    // No node of the cluster could ever hold one pod: the job is refused admission, naming the
    // resource, and parked until the fleet changes.
    assert_eq!(ev.reason, "NotInqueueable", "{}", ev.message);
    assert!(
        ev.message.contains("never") && ev.message.contains("nvidia.com/gpu"),
        "{}",
        ev.message
    );
    assert_eq!(d.park.jobs, vec!["default/train".to_string()]);
}

pub(crate) fn regional_fleet() -> Cache {
    let mut c = Cache::new();
    let mut east = Cluster::named("east");
    east.region = Some("us-east-1".into());
    let mut west = Cluster::named("west");
    west.region = Some("us-west-2".into());
    add_cluster(&mut c, east).unwrap();
    add_cluster(&mut c, west).unwrap();
    add_nodes(&mut c, "east", "e", 2, GPU8, &[]).unwrap();
    add_nodes(&mut c, "west", "w", 2, GPU8, &[]).unwrap();
    c
}

#[test]
fn region_affinity_is_honored() {
    let mut c = regional_fleet();
    let policy = JobPolicy {
        field_requirements: vec![Requirement {
            key: "region".into(),
            op: SelectorOp::In,
            values: vec!["us-west-2".into()],
        }],
        ..JobPolicy::default()
    };
    add_job(
        &mut c,
        &GangJob::new("pinned", vec![gpu_role("w", 2, "8")]).policy(policy),
    )
    .unwrap();
    let d = run(&c);
    let binds = binds_of(&d, "default/pinned");
    assert_eq!(binds.len(), 2);
    assert!(binds.iter().all(|b| b.cluster == "west"));
}

#[test]
fn a_tainted_cluster_is_skipped_unless_the_job_tolerates_the_taint() {
    let mut c = regional_fleet();
    let mut west = Cluster::named("west");
    west.region = Some("us-west-2".into());
    west.taints = vec![Taint {
        key: "cluster.tephra.io/unreachable".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    }];
    c.apply(Event::ClusterUpsert(west)).unwrap();
    // Fill east so that only west could take the job.
    add_job(&mut c, &GangJob::new("filler", vec![gpu_role("w", 2, "8")])).unwrap();
    let d = run(&c);
    apply_binds(&mut c, &d).unwrap();
    assert!(
        binds_of(&d, "default/filler")
            .iter()
            .all(|b| b.cluster == "east")
    );

    add_job(
        &mut c,
        &GangJob::new("blocked", vec![gpu_role("w", 1, "8")]).created(1),
    )
    .unwrap();
    let d = run(&c);
    assert!(binds_of(&d, "default/blocked").is_empty());
    let msg = &d.event_for("default/blocked").unwrap().message;
    assert!(msg.contains("cluster west: cluster has untolerated taint {cluster.tephra.io/unreachable: }:NoSchedule"), "{msg}");

    let tolerant = JobPolicy {
        tolerations: vec![Toleration {
            key: "cluster.tephra.io/unreachable".into(),
            exists: true,
            ..Default::default()
        }],
        ..JobPolicy::default()
    };
    add_job(
        &mut c,
        &GangJob::new("tolerant", vec![gpu_role("w", 1, "8")])
            .created(2)
            .policy(tolerant),
    )
    .unwrap();
    let d = run(&c);
    assert_eq!(binds_of(&d, "default/tolerant").len(), 1);
    assert_eq!(binds_of(&d, "default/tolerant")[0].cluster, "west");
}

#[test]
fn a_gang_stays_in_one_cluster_unless_it_may_be_split() {
    let mut c = regional_fleet();
    add_job(&mut c, &GangJob::new("wide", vec![gpu_role("w", 3, "8")])).unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty(), "3 x 8 GPUs fit in no single cluster");

    let split = JobPolicy {
        splittable: true,
        ..JobPolicy::default()
    };
    add_job(
        &mut c,
        &GangJob::new("split", vec![gpu_role("w", 3, "8")])
            .created(1)
            .policy(split),
    )
    .unwrap();
    let d = run(&c);
    let binds = binds_of(&d, "default/split");
    assert_eq!(binds.len(), 3, "admitted atomically across clusters");
    let clusters: std::collections::BTreeSet<_> =
        binds.iter().map(|b| b.cluster.as_str()).collect();
    assert_eq!(clusters.len(), 2);
    assert!(binds_of(&d, "default/wide").is_empty());
}

#[test]
fn a_partly_running_gang_places_replacements_in_its_own_cluster() {
    let mut c = regional_fleet();
    add_job(&mut c, &GangJob::new("g", vec![gpu_role("w", 2, "4")])).unwrap();
    let d = run(&c);
    apply_binds(&mut c, &d).unwrap();
    let home = binds_of(&d, "default/g")[0].cluster.clone();
    // Scale up: a third replica arrives.
    let world = c.world();
    let t = world
        .tasks
        .get(world.task_id("default/g-w-0").unwrap())
        .unwrap();
    let mut spec = t.spec.clone();
    spec.name = "g-w-2".into();
    spec.index = 2;
    spec.status = tephra_scheduler::model::TaskStatus::Pending;
    spec.placement = None;
    c.apply(Event::PodUpsert(spec)).unwrap();
    let d = run(&c);
    let binds = binds_of(&d, "default/g");
    assert_eq!(binds.len(), 1);
    assert_eq!(binds[0].cluster, home);
}

#[test]
fn a_split_gang_respects_max_groups_of_its_spread_constraint() {
    use tephra_scheduler::model::{SpreadConstraint, SpreadField};
    let mut c = Cache::new();
    for (name, region) in [("a1", "r1"), ("a2", "r1"), ("b1", "r2")] {
        let mut cl = Cluster::named(name);
        cl.region = Some(region.into());
        add_cluster(&mut c, cl).unwrap();
        add_nodes(&mut c, name, name, 1, GPU8, &[]).unwrap();
    }
    let policy = |max| JobPolicy {
        splittable: true,
        spread: vec![SpreadConstraint {
            field: SpreadField::Region,
            min_groups: 1,
            max_groups: max,
        }],
        ..JobPolicy::default()
    };
    // Three 8-GPU pods need three clusters; with maxGroups 1 only region r1 (two clusters) may
    // be used, so the gang cannot be placed at all.
    add_job(
        &mut c,
        &GangJob::new("one-region", vec![gpu_role("w", 3, "8")]).policy(policy(1)),
    )
    .unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty(), "{:?}", d.binds);
    let mut c2 = c.clone();
    c2.apply(Event::PodGroupDelete {
        namespace: "default".into(),
        name: "one-region".into(),
    })
    .unwrap();
    for i in 0..3 {
        c2.apply(Event::PodDelete {
            namespace: "default".into(),
            name: format!("one-region-w-{i}"),
        })
        .unwrap();
    }
    add_job(
        &mut c2,
        &GangJob::new("two-regions", vec![gpu_role("w", 3, "8")]).policy(policy(2)),
    )
    .unwrap();
    let d = run(&c2);
    assert_eq!(binds_of(&d, "default/two-regions").len(), 3);
}
