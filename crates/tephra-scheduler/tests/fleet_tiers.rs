//! The fleet's tiers above its clusters: with `region` configured as a fleet tier, a gang held
//! hard to it (by number or by name) may be split, as its policy allows, over clusters of one
//! region only, and waits rather than span two; growing, it stays in its region. Without fleet
//! tiers a hard gang is never split.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use tephra_scheduler::model::topology::{FleetKey, NetworkTopology, TopologyMode};
use tephra_scheduler::model::*;
use tephra_scheduler::testing::*;
use tephra_scheduler::{Cache, Decisions};

mod topology_fixtures;
use topology_fixtures::*;

/// Four clusters of two 8-GPU nodes, two per region, one node busy in `east-2` and one in
/// `west-1`: each region has three whole nodes free, and the two clusters with the most room
/// (first in candidate order) are in different regions.
fn two_regions(fleet_tiers: bool) -> Cache {
    let mut c = Cache::new();
    for (name, region) in [
        ("east-1", "east"),
        ("west-2", "west"),
        ("east-2", "east"),
        ("west-1", "west"),
    ] {
        let mut cluster = Cluster::named(name);
        cluster.region = Some(region.into());
        add_cluster(&mut c, cluster).unwrap();
        for i in 0..2 {
            c.apply(node(name, &format!("{name}-n{i}"), "8", &[]))
                .unwrap();
        }
    }
    occupy(&mut c, "east-2", "east-2-n0", "8");
    occupy(&mut c, "west-1", "west-1-n0", "8");
    if fleet_tiers {
        c.set_fleet_tiers(vec![FleetKey::Region]);
    }
    c
}

fn splittable(name: &str, pods: u32, t: NetworkTopology) -> GangJob {
    gpu_gang(name, pods, "8").topology(t).policy(JobPolicy {
        splittable: true,
        ..JobPolicy::default()
    })
}

fn clusters_of(d: &Decisions, job: &str) -> BTreeSet<String> {
    d.binds
        .iter()
        .filter(|b| b.job == job)
        .map(|b| b.cluster.clone())
        .collect()
}

fn regions(clusters: &BTreeSet<String>) -> BTreeSet<&str> {
    clusters.iter().map(|c| &c[..4]).collect()
}

#[test]
fn a_gang_held_to_the_region_tier_splits_over_clusters_of_one_region_only() {
    // Clusters have no HyperNodes: the cluster tier is 1, the region tier 2.
    let mut c = two_regions(true);
    add_job(&mut c, &splittable("train", 3, hard(2))).unwrap();
    let d = run(&c);
    let used = clusters_of(&d, "default/train");
    assert_eq!(
        d.binds.iter().filter(|b| b.job == "default/train").count(),
        3
    );
    assert_eq!(used.len(), 2, "{used:?}");
    assert_eq!(regions(&used).len(), 1, "one region: {used:?}");
}

#[test]
fn highest_tier_name_may_name_the_fleet_tier() {
    let mut c = two_regions(true);
    let by_name = NetworkTopology {
        mode: TopologyMode::Hard,
        highest_tier: None,
        highest_tier_name: Some("region".into()),
    };
    add_job(&mut c, &splittable("train", 3, by_name)).unwrap();
    let d = run(&c);
    let used = clusters_of(&d, "default/train");
    assert_eq!(used.len(), 2, "{used:?}");
    assert_eq!(regions(&used).len(), 1, "one region: {used:?}");
}

#[test]
fn a_gang_no_region_can_hold_waits_rather_than_span_two() {
    let mut c = two_regions(true);
    add_job(&mut c, &splittable("train", 4, hard(2))).unwrap();
    let d = run(&c);
    assert!(clusters_of(&d, "default/train").is_empty(), "{:?}", d.binds);
    // Allowed above every fleet tier, the same gang spans regions.
    let mut c = two_regions(true);
    add_job(&mut c, &splittable("train", 4, hard(3))).unwrap();
    let used = clusters_of(&run(&c), "default/train");
    assert_eq!(regions(&used).len(), 2, "{used:?}");
}

#[test]
fn without_fleet_tiers_a_hard_gang_is_never_split() {
    let mut c = two_regions(false);
    add_job(&mut c, &splittable("train", 3, hard(2))).unwrap();
    let d = run(&c);
    assert!(clusters_of(&d, "default/train").is_empty(), "{:?}", d.binds);
}

#[test]
fn a_split_gang_grows_within_the_region_it_runs_in() {
    let mut c = two_regions(true);
    // Two pods already run in west-2; the third may join only a west cluster.
    let mut job = splittable("train", 3, hard(2));
    job.min_member = Some(2);
    add_job(&mut c, &job).unwrap();
    for (i, n) in ["west-2-n0", "west-2-n1"].into_iter().enumerate() {
        run_on(&mut c, &format!("default/train-worker-{i}"), "west-2", n);
    }
    let d = run(&c);
    let used = clusters_of(&d, "default/train");
    assert_eq!(
        used,
        BTreeSet::from(["west-1".to_string()]),
        "{:?}",
        d.binds
    );
}
