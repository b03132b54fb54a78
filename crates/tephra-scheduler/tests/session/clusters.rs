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

/// A100 and H100 members: `a100` has 4 A100 nodes, all but one full; `h100` has 2 free H100
/// nodes. 16 free GPUs in `h100`, 8 in `a100`.
fn a100_and_h100() -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("a100")).unwrap();
    add_cluster(&mut c, Cluster::named("h100")).unwrap();
    let product = "nvidia.com/gpu.product";
    add_nodes(&mut c, "a100", "a", 4, GPU8, &[(product, "A100")]).unwrap();
    add_nodes(&mut c, "h100", "h", 2, GPU8, &[(product, "H100")]).unwrap();
    let full = GangJob::new("full", vec![gpu_role("w", 3, "8").select(product, "A100")]);
    add_job(&mut c, &full).unwrap();
    let d = run(&c);
    assert_eq!(binds_of(&d, "default/full").len(), 3);
    apply_binds(&mut c, &d).unwrap();
    c
}

#[test]
fn a_cluster_whose_nodes_its_pods_do_not_select_is_refused_for_the_selector_not_the_totals() {
    let mut c = a100_and_h100();
    let job = GangJob::new(
        "train",
        vec![gpu_role("worker", 3, "8").select("nvidia.com/gpu.product", "A100")],
    )
    .phase(GroupPhase::Inqueue);
    add_job(&mut c, &job).unwrap();
    let d = run(&c);
    assert!(binds_of(&d, "default/train").is_empty());
    let ev = d.event_for("default/train").unwrap();
    // Each cluster's reason is the check that fails first there: h100's nodes are not
    // selected at all (its 16 free GPUs are beside the point); a100 is short of free GPUs.
    assert!(
        ev.message.contains(
            "cluster h100: no node can ever take a pod of task worker: 0/2 nodes are available: \
             2 node(s) didn't match Pod's node affinity/selector"
        ),
        "{}",
        ev.message
    );
    assert!(
        ev.message
            .contains("cluster a100: needs 24 nvidia.com/gpu in total, 8 free"),
        "{}",
        ev.message
    );
    assert!(!ev.message.contains("16 free"), "{}", ev.message);
}

/// [`a100_and_h100`] with a job `train` of `pods` 8-GPU pods selecting A100 nodes.
fn with_a100_job(pods: u32) -> Cache {
    let mut c = a100_and_h100();
    let role = gpu_role("worker", pods, "8").select("nvidia.com/gpu.product", "A100");
    add_job(&mut c, &GangJob::new("train", vec![role])).unwrap();
    c
}

/// The verdict on a job does not change while a member is down: one that can never be placed
/// stays "never" (the down member could not hold it either), one that only the down member
/// could hold is "not yet".
#[test]
fn a_member_outage_changes_neither_never_nor_not_yet() {
    let verdict = |c: &Cache| {
        let d = run(c);
        let ev = d.event_for("default/train").unwrap();
        (
            ev.reason.to_string(),
            ev.message.contains("never"),
            ev.message.clone(),
        )
    };
    let down = |c: &mut Cache, name: &str| {
        let mut cl = c
            .world()
            .clusters
            .iter()
            .find(|(_, x)| x.name == name)
            .unwrap()
            .1
            .clone();
        cl.ready = false;
        c.apply(Event::ClusterUpsert(cl)).unwrap();
    };
    // 40 A100 GPUs asked: the fleet has 32 A100s and 16 H100s, so never.
    let c = with_a100_job(5);
    let (reason, never, message) = verdict(&c);
    assert!(never, "{reason}: {message}");
    for member in ["h100", "a100"] {
        let mut c = c.clone();
        down(&mut c, member);
        let (r, n, m) = verdict(&c);
        assert!(n, "with {member} down: {r}: {m}");
        assert_eq!(r, reason, "with {member} down: {m}");
    }
    // 16 A100 GPUs asked: only a100 could ever hold it, and a100 is down: not yet.
    let mut c = with_a100_job(2);
    down(&mut c, "a100");
    let (r, n, m) = verdict(&c);
    assert!(!n, "the down member could hold it: {r}: {m}");
}
