//! Sub-group gangs (`subGroupPolicy`): a job made of partitions, each placed whole within its
//! own tier (one rack) while the job spans racks, the job started only once `minSubGroups`
//! partitions are whole, and no partition ever partly bound, checked on random fleets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use tephra_scheduler::model::topology::SubGroupPolicy;
use tephra_scheduler::model::*;
use tephra_scheduler::testing::*;
use tephra_scheduler::{Cache, Decisions};

mod topology_fixtures;
use topology_fixtures::*;

const TASK: &str = "volcano.sh/task-spec";
const PARTITION: &str = "volcano.sh/partition-id";

/// A job of `partitions` partitions of `size` pods, each pod asking `gpus` GPUs, made as
/// Volcano's job controller makes it: one sub-group policy selecting the task's pods, split by
/// partition id, each partition hard within tier `tier`, `min` of them needed to start.
fn partitioned(name: &str, partitions: u32, size: u32, gpus: &str, min: u32, tier: u32) -> GangJob {
    let roles = (0..partitions)
        .map(|p| {
            let labels: Labels = [
                (TASK.to_string(), "worker".to_string()),
                (PARTITION.to_string(), p.to_string()),
            ]
            .into();
            Role::new(
                &format!("p{p}"),
                size,
                &[("cpu", "1"), ("nvidia.com/gpu", gpus)],
            )
            .rules(PodRules {
                labels,
                ..PodRules::default()
            })
        })
        .collect();
    GangJob::new(name, roles)
        .min_member(min * size)
        .sub_group(SubGroupPolicy {
            name: "worker".into(),
            size,
            min_sub_groups: min,
            selector: Some(LabelSelector {
                match_labels: [(TASK.to_string(), "worker".to_string())].into(),
                expressions: vec![],
            }),
            match_label_keys: vec![PARTITION.into()],
            topology: Some(hard(tier)),
        })
}

/// The racks (tier-1 domains) each partition of `job` was bound into, and how many pods of
/// each partition were bound.
fn partitions_bound(
    c: &Cache,
    d: &Decisions,
    job: &str,
) -> BTreeMap<String, (BTreeSet<String>, usize)> {
    let t = topology(c, "east");
    let mut out: BTreeMap<String, (BTreeSet<String>, usize)> = BTreeMap::new();
    for b in d.binds.iter().filter(|b| b.job == job) {
        let id = c.world().node_id(&b.cluster, &b.node).unwrap();
        let rack = t
            .domains
            .iter()
            .find(|dom| dom.tier == 1 && dom.nodes.contains(&id))
            .map(|dom| dom.name.clone())
            .unwrap_or_else(|| "outside every rack".into());
        let e = out.entry(b.role.clone()).or_default();
        e.0.insert(rack);
        e.1 += 1;
    }
    out
}

#[test]
fn each_partition_is_kept_within_one_rack_while_the_job_spans_racks() {
    let mut c = Cache::new();
    racked(&mut c, "east", 4, 2);
    // Half of one node in each of three racks is taken: a partition of two 4-GPU pods still
    // fits in any rack, but filling nodes in order would split partitions across racks.
    for r in 0..3 {
        occupy(&mut c, "east", &format!("r{r}-n0"), "4");
    }
    add_job(&mut c, &partitioned("train", 4, 2, "4", 4, 1)).unwrap();
    let d = run(&c);
    let bound = partitions_bound(&c, &d, "default/train");
    assert_eq!(bound.len(), 4, "every partition placed: {bound:?}");
    for (p, (racks, n)) in &bound {
        assert_eq!((racks.len(), *n), (1, 2), "partition {p}: {racks:?}");
    }
    let racks: BTreeSet<&String> = bound.values().flat_map(|(r, _)| r).collect();
    assert!(racks.len() > 1, "the job spans racks: {racks:?}");
}

#[test]
fn a_job_waits_until_min_sub_groups_partitions_fit_and_names_the_partition_that_does_not() {
    let mut c = Cache::new();
    racked(&mut c, "east", 2, 2);
    // Partitions of two 4-GPU pods. Rack 0 has room for one (4 GPUs free on each node); rack 1
    // has as many GPUs free (2 and 6) but room for one pod only.
    for (n, busy) in [
        ("r0-n0", "4"),
        ("r0-n1", "4"),
        ("r1-n0", "6"),
        ("r1-n1", "2"),
    ] {
        occupy(&mut c, "east", n, busy);
    }
    add_job(&mut c, &partitioned("train", 2, 2, "4", 2, 1)).unwrap();
    let d = run(&c);
    assert!(
        d.binds.iter().all(|b| b.job != "default/train"),
        "nothing of the job is bound: {:?}",
        d.binds
    );
    let e = d.event_for("default/train").unwrap();
    assert!(e.message.contains("sub-group worker[1]"), "{}", e.message);
    assert!(
        e.message.contains("no HyperNode of tier 1 or below"),
        "{}",
        e.message
    );
}

#[test]
fn once_min_sub_groups_are_whole_the_job_starts_and_the_rest_wait_whole() {
    let mut c = Cache::new();
    racked(&mut c, "east", 3, 2);
    // Rack 2 has one node left: its partition of two 8-GPU pods cannot be made whole.
    occupy(&mut c, "east", "r2-n0", "8");
    add_job(&mut c, &partitioned("train", 3, 2, "8", 2, 1)).unwrap();
    let d = run(&c);
    let bound = partitions_bound(&c, &d, "default/train");
    assert_eq!(bound.len(), 2, "two whole partitions start: {bound:?}");
    assert!(
        bound.values().all(|(r, n)| r.len() == 1 && *n == 2),
        "{bound:?}"
    );
}

#[test]
fn partitions_without_a_topology_are_still_placed_whole_or_not_at_all() {
    let mut c = Cache::new();
    racked(&mut c, "east", 1, 3);
    // 3 nodes of 8 GPUs; partitions of two 8-GPU pods: one whole partition fits, the second
    // would get one pod of two.
    let mut job = partitioned("train", 2, 2, "8", 1, 1);
    job.sub_groups[0].topology = None;
    add_job(&mut c, &job).unwrap();
    let d = run(&c);
    let bound = partitions_bound(&c, &d, "default/train");
    assert_eq!(bound.len(), 1, "{bound:?}");
    assert!(bound.values().all(|(_, n)| *n == 2), "{bound:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// On random racked fleets with random occupancy, random partitioned jobs: every partition
    /// is bound whole (all its pods or none), within one rack, and a job with anything bound
    /// has at least its `minSubGroups` partitions whole.
    #[test]
    fn no_partition_is_ever_partly_bound_or_spread_over_racks(
        racks in 1usize..5,
        per_rack in 1usize..4,
        busy in proptest::collection::vec((0usize..16, 0u32..3), 0..8),
        jobs in proptest::collection::vec((1u32..4, 1u32..4, 0u32..3, 0u32..4), 1..4),
    ) {
        let mut c = Cache::new();
        racked(&mut c, "east", racks, per_rack);
        let nodes = racks * per_rack;
        let mut seen = BTreeSet::new();
        for (n, q) in busy {
            let n = n % nodes;
            if q > 0 && seen.insert(n) {
                let name = format!("r{}-n{}", n / per_rack, n % per_rack);
                occupy(&mut c, "east", &name, &(q * 2).to_string());
            }
        }
        let mut mins = BTreeMap::new();
        for (j, (parts, size, gpu_step, min)) in jobs.into_iter().enumerate() {
            let gpus = [2, 4, 8][gpu_step as usize].to_string();
            let min = min.min(parts).max(1);
            let name = format!("job-{j}");
            add_job(&mut c, &partitioned(&name, parts, size, &gpus, min, 1)).unwrap();
            mins.insert(format!("default/{name}"), (min, size));
        }
        let d = run(&c);
        for (job, (min, size)) in &mins {
            let bound = partitions_bound(&c, &d, job);
            for (p, (racks, n)) in &bound {
                prop_assert_eq!(*n, *size as usize, "{} partition {} partly bound", job, p);
                prop_assert_eq!(racks.len(), 1, "{} partition {} spans {:?}", job, p, racks);
                prop_assert!(!racks.contains("outside every rack"));
            }
            prop_assert!(
                bound.is_empty() || bound.len() as u32 >= *min,
                "{} started with {} partitions, needs {}", job, bound.len(), min
            );
        }
    }
}
