//! Network-topology-aware gangs: HyperNodes resolved into domains, hard gangs kept within one
//! domain of their allowed tier (or waiting with a reason), soft gangs falling back, domains
//! bin-packed, and the cluster as the tier above its HyperNodes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use tephra_scheduler::model::topology::{
    HyperNodeSpec, Member, MemberKind, MemberSelector, NetworkTopology, TopologyMode,
};
use tephra_scheduler::model::*;
use tephra_scheduler::testing::*;
use tephra_scheduler::{Cache, Decisions, Event, SchedulerConfig, schedule};

mod topology_fixtures;
use topology_fixtures::*;

#[test]
fn hypernodes_resolve_by_name_pattern_labels_and_through_lower_hypernodes() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    for (n, rack) in [("a-1", "x"), ("a-2", "x"), ("b-1", "y"), ("c-1", "z")] {
        c.apply(node("east", n, "8", &[("rack", rack)])).unwrap();
    }
    c.apply(hypernode(
        "east",
        "by-name",
        1,
        vec![
            exact(MemberKind::Node, "a-1"),
            exact(MemberKind::Node, "nope"),
        ],
    ))
    .unwrap();
    c.apply(hypernode(
        "east",
        "by-pattern",
        1,
        vec![Member {
            kind: MemberKind::Node,
            selector: MemberSelector::Regex("^b-".into()),
        }],
    ))
    .unwrap();
    c.apply(hypernode(
        "east",
        "by-label",
        1,
        vec![Member {
            kind: MemberKind::Node,
            selector: MemberSelector::Labels(LabelSelector {
                match_labels: BTreeMap::from([("rack".to_string(), "z".to_string())]),
                expressions: vec![],
            }),
        }],
    ))
    .unwrap();
    c.apply(hypernode(
        "east",
        "top",
        2,
        vec![
            Member {
                kind: MemberKind::HyperNode,
                selector: MemberSelector::Regex("^by-".into()),
            },
            // Not below `top`: ignored, and said.
            exact(MemberKind::HyperNode, "peer"),
        ],
    ))
    .unwrap();
    c.apply(hypernode(
        "east",
        "peer",
        2,
        vec![exact(MemberKind::Node, "a-2")],
    ))
    .unwrap();
    let t = topology(&c, "east");
    let of = |name: &str| {
        let d = t.domains.iter().find(|d| d.name == name).unwrap();
        names(&c, &d.nodes)
    };
    assert_eq!(of("by-name"), ["a-1"]);
    assert_eq!(of("by-pattern"), ["b-1"]);
    assert_eq!(of("by-label"), ["c-1"]);
    assert_eq!(of("top"), ["a-1", "b-1", "c-1"]);
    assert_eq!(of("peer"), ["a-2"]);
    assert_eq!(t.top_tier(), 2);
    assert!(
        t.problems
            .iter()
            .any(|p| p.contains("member peer is of tier 2")),
        "{:?}",
        t.problems
    );
    // A node's labels change: the label member follows.
    c.apply(node("east", "a-2", "8", &[("rack", "z")])).unwrap();
    let t = topology(&c, "east");
    let d = t.domains.iter().find(|d| d.name == "by-label").unwrap();
    assert_eq!(names(&c, &d.nodes), ["a-2", "c-1"]);
    // A HyperNode goes: its domain goes.
    c.apply(Event::HyperNodeDelete {
        cluster: "east".into(),
        name: "by-name".into(),
    })
    .unwrap();
    assert!(
        !topology(&c, "east")
            .domains
            .iter()
            .any(|d| d.name == "by-name")
    );
}

#[test]
fn hypernodes_are_discovered_from_node_labels_lowest_tier_first() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    c.discover_topology_from(vec!["example.com/tor".into(), "example.com/spine".into()]);
    // Nodes arrive after discovery is switched on; one carries no label.
    for (n, tor, spine) in [
        ("a", "t1", "s1"),
        ("b", "t1", "s1"),
        ("c", "t2", "s1"),
        ("d", "t3", "s2"),
    ] {
        c.apply(node(
            "east",
            n,
            "8",
            &[("example.com/tor", tor), ("example.com/spine", spine)],
        ))
        .unwrap();
    }
    c.apply(node("east", "bare", "8", &[])).unwrap();
    let t = topology(&c, "east");
    let got: Vec<(String, u32, Vec<String>)> = t
        .domains
        .iter()
        .map(|d| (d.name.clone(), d.tier, names(&c, &d.nodes)))
        .collect();
    let want = |n: &str, tier: u32, nodes: &[&str]| {
        (
            n.to_string(),
            tier,
            nodes.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        got,
        [
            want("example.com/tor=t1", 1, &["a", "b"]),
            want("example.com/tor=t2", 1, &["c"]),
            want("example.com/tor=t3", 1, &["d"]),
            want("example.com/spine=s1", 2, &["a", "b", "c"]),
            want("example.com/spine=s2", 2, &["d"]),
        ]
    );
    // A hard tier-1 gang of two lands under one switch: t1.
    add_job(&mut c, &gpu_gang("pair", 2, "8").topology(hard(1))).unwrap();
    let d = run(&c);
    let mut nodes: Vec<&str> = d.binds.iter().map(|b| b.node.as_str()).collect();
    nodes.sort();
    assert_eq!(nodes, ["a", "b"]);
}

#[test]
fn a_bad_pattern_selects_nothing_and_says_so() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    c.apply(node("east", "a", "8", &[])).unwrap();
    c.apply(hypernode(
        "east",
        "broken",
        1,
        vec![Member {
            kind: MemberKind::Node,
            selector: MemberSelector::Regex("(".into()),
        }],
    ))
    .unwrap();
    let t = topology(&c, "east");
    assert!(t.domains[0].nodes.is_empty());
    assert!(
        t.problems[0].contains("not a valid pattern"),
        "{:?}",
        t.problems
    );
}

#[test]
fn a_hard_tier_1_gang_goes_whole_into_the_one_rack_with_room() {
    let mut c = Cache::new();
    racked(&mut c, "east", 3, 2);
    // Racks 0 and 2 have one free node each; rack 1 has both free. Over the cluster, the
    // gang of two would fit on any two free nodes.
    occupy(&mut c, "east", "r0-n0", "8");
    occupy(&mut c, "east", "r2-n1", "8");
    add_job(&mut c, &gpu_gang("train", 2, "8").topology(hard(1))).unwrap();
    let d = run(&c);
    assert_eq!(
        d.binds.iter().filter(|b| b.job == "default/train").count(),
        2
    );
    assert_eq!(domains_of(&c, &d, "default/train", "east", 1), ["rack-1"]);
}

#[test]
fn while_hypernodes_are_not_listed_only_gangs_with_a_network_topology_wait() {
    // Sessions run before the HyperNodes are listed: the cluster's nodes are known, its
    // HyperNodes not yet (none have arrived). A hard gang, a soft one and one without a
    // topology arrive.
    let mut c = Cache::new();
    c.apply(Event::HyperNodesDeferred).unwrap();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    for r in 0..2 {
        for i in 0..2 {
            c.apply(node("east", &format!("r{r}-n{i}"), "8", &[]))
                .unwrap();
        }
    }
    let soft = NetworkTopology {
        mode: TopologyMode::Soft,
        highest_tier: Some(1),
        highest_tier_name: None,
    };
    add_job(&mut c, &gpu_gang("hard", 2, "8").topology(hard(1))).unwrap();
    add_job(&mut c, &gpu_gang("soft", 1, "8").topology(soft)).unwrap();
    add_job(&mut c, &gpu_gang("plain", 1, "8")).unwrap();
    let d = run(&c);
    let bound = |d: &Decisions, job: &str| d.binds.iter().filter(|b| b.job == job).count();
    assert_eq!(bound(&d, "default/plain"), 1, "{:?}", d.binds);
    assert_eq!(bound(&d, "default/hard"), 0);
    assert_eq!(bound(&d, "default/soft"), 0);
    for job in ["default/hard", "default/soft"] {
        let e = d.event_for(job).unwrap();
        assert!(
            e.message
                .contains("the HyperNodes of cluster east are not listed yet"),
            "{job}: {}",
            e.message
        );
    }
    apply_binds(&mut c, &d).unwrap();
    // The list arrives with the racks: the hard gang goes into one rack, whole.
    for r in 0..2 {
        let members = (0..2)
            .map(|i| exact(MemberKind::Node, &format!("r{r}-n{i}")))
            .collect();
        c.apply(hypernode("east", &format!("rack-{r}"), 1, members))
            .unwrap();
    }
    c.apply(Event::HyperNodesListed {
        cluster: "east".into(),
    })
    .unwrap();
    let d = run(&c);
    assert_eq!(bound(&d, "default/hard"), 2, "{:?}", d.binds);
    assert_eq!(bound(&d, "default/soft"), 1, "{:?}", d.binds);
    let racks = domains_of(&c, &d, "default/hard", "east", 1);
    assert_eq!(racks.len(), 1, "{racks:?}");
}

/// Three racks of two, each with one node busy (the last one half): a gang of two 8-GPU pods,
/// held to `tier`, arrives.
fn one_free_node_per_rack(tier: u32) -> Cache {
    let mut c = Cache::new();
    racked(&mut c, "east", 3, 2);
    occupy(&mut c, "east", "r0-n0", "8");
    occupy(&mut c, "east", "r1-n0", "8");
    occupy(&mut c, "east", "r2-n0", "4");
    add_job(&mut c, &gpu_gang("train", 2, "8").topology(hard(tier))).unwrap();
    c
}

#[test]
fn a_hard_gang_that_no_rack_can_hold_waits_naming_the_tier_and_the_best_rack() {
    let c = one_free_node_per_rack(1);
    let d = run(&c);
    assert!(
        d.binds.iter().all(|b| b.job != "default/train"),
        "{:?}",
        d.binds
    );
    let e = d.event_for("default/train").unwrap();
    assert!(
        e.message.contains("no HyperNode of tier 1 or below"),
        "{}",
        e.message
    );
    assert!(e.message.contains("best: rack-"), "{}", e.message);
    // Allowed up to the spine (tier 2), the same gang spans two racks.
    let c2 = one_free_node_per_rack(2);
    let d = run(&c2);
    assert_eq!(
        d.binds.iter().filter(|b| b.job == "default/train").count(),
        2
    );
    assert_eq!(domains_of(&c2, &d, "default/train", "east", 2), ["spine"]);
}

#[test]
fn a_soft_gang_takes_the_lowest_tier_that_fits_and_falls_back_to_the_cluster() {
    let soft = NetworkTopology {
        mode: TopologyMode::Soft,
        highest_tier: Some(1),
        highest_tier_name: None,
    };
    let mut c = Cache::new();
    racked(&mut c, "east", 2, 2);
    occupy(&mut c, "east", "r0-n0", "8");
    add_job(&mut c, &gpu_gang("fits", 2, "8").topology(soft.clone())).unwrap();
    let d = run(&c);
    assert_eq!(domains_of(&c, &d, "default/fits", "east", 1), ["rack-1"]);
    // One free node in each rack: no rack holds the gang, so soft spans them and hard waits.
    let mut c = Cache::new();
    racked(&mut c, "east", 2, 2);
    occupy(&mut c, "east", "r0-n0", "8");
    occupy(&mut c, "east", "r1-n0", "8");
    add_job(&mut c, &gpu_gang("soft", 2, "8").topology(soft)).unwrap();
    let d = run(&c);
    assert_eq!(
        domains_of(&c, &d, "default/soft", "east", 1),
        ["rack-0", "rack-1"]
    );
    let mut c = Cache::new();
    racked(&mut c, "east", 2, 2);
    occupy(&mut c, "east", "r0-n0", "8");
    occupy(&mut c, "east", "r1-n0", "8");
    add_job(&mut c, &gpu_gang("hard", 2, "8").topology(hard(1))).unwrap();
    assert!(run(&c).binds.iter().all(|b| b.job != "default/hard"));
}

#[test]
fn racks_are_bin_packed_so_that_a_whole_rack_stays_free_for_a_large_gang() {
    let mut c = Cache::new();
    racked(&mut c, "east", 2, 4);
    // Rack 0 has 3 free nodes, rack 1 all 4: a gang of 2 goes into rack 0.
    occupy(&mut c, "east", "r0-n0", "8");
    add_job(&mut c, &gpu_gang("small", 2, "8").topology(hard(1))).unwrap();
    let d = run(&c);
    assert_eq!(domains_of(&c, &d, "default/small", "east", 1), ["rack-0"]);
    apply_binds(&mut c, &d).unwrap();
    add_job(&mut c, &gpu_gang("large", 4, "8").topology(hard(1))).unwrap();
    let d = run(&c);
    assert_eq!(domains_of(&c, &d, "default/large", "east", 1), ["rack-1"]);
}

#[test]
fn a_gang_allowed_the_cluster_tier_goes_anywhere_in_it_and_a_cluster_without_hypernodes_is_tier_1()
{
    let mut c = Cache::new();
    racked(&mut c, "east", 2, 1);
    // Tier 3 is the cluster's own (its highest HyperNode is tier 2).
    add_job(&mut c, &gpu_gang("anywhere", 2, "8").topology(hard(3))).unwrap();
    let d = run(&c);
    assert_eq!(
        d.binds
            .iter()
            .filter(|b| b.job == "default/anywhere")
            .count(),
        2
    );
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("flat")).unwrap();
    c.apply(node("flat", "a", "8", &[])).unwrap();
    c.apply(node("flat", "b", "8", &[])).unwrap();
    add_job(&mut c, &gpu_gang("t1", 2, "8").topology(hard(1))).unwrap();
    let d = run(&c);
    assert_eq!(d.binds.iter().filter(|b| b.job == "default/t1").count(), 2);
}

#[test]
fn a_hard_gang_below_the_cluster_tier_never_splits_across_clusters() {
    let mut c = Cache::new();
    racked(&mut c, "east", 1, 1);
    racked(&mut c, "west", 1, 1);
    let policy = JobPolicy {
        splittable: true,
        ..JobPolicy::default()
    };
    add_job(
        &mut c,
        &gpu_gang("wide", 2, "8")
            .policy(policy.clone())
            .topology(hard(2)),
    )
    .unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty(), "{:?}", d.binds);
    // Without the constraint, the same splittable gang spans both clusters.
    add_job(&mut c, &gpu_gang("free", 2, "8").policy(policy)).unwrap();
    let d = run(&c);
    let clusters: std::collections::BTreeSet<&str> =
        d.binds.iter().map(|b| b.cluster.as_str()).collect();
    assert_eq!(clusters.len(), 2, "{:?}", d.binds);
}

#[test]
fn a_tier_named_by_tiername_is_resolved_per_cluster_and_an_unknown_name_says_so() {
    let mut c = Cache::new();
    racked(&mut c, "east", 2, 2);
    c.apply(Event::HyperNodeUpsert(HyperNodeSpec {
        cluster: "east".into(),
        name: "rack-0".into(),
        tier: 1,
        tier_name: Some("rack".into()),
        members: vec![
            exact(MemberKind::Node, "r0-n0"),
            exact(MemberKind::Node, "r0-n1"),
        ],
    }))
    .unwrap();
    let by_name = |n: &str| NetworkTopology {
        mode: TopologyMode::Hard,
        highest_tier: None,
        highest_tier_name: Some(n.into()),
    };
    occupy(&mut c, "east", "r1-n0", "8");
    add_job(&mut c, &gpu_gang("named", 2, "8").topology(by_name("rack"))).unwrap();
    add_job(
        &mut c,
        &gpu_gang("unknown", 1, "8").topology(by_name("pod")),
    )
    .unwrap();
    let d = run(&c);
    assert_eq!(domains_of(&c, &d, "default/named", "east", 1), ["rack-0"]);
    let e = d.event_for("default/unknown").unwrap();
    assert!(e.message.contains("has tierName pod"), "{}", e.message);
}

#[test]
fn new_pods_of_a_running_hard_gang_join_the_rack_it_runs_in_or_wait() {
    let grow = |busy: bool| {
        let mut c = Cache::new();
        racked(&mut c, "east", 2, 2);
        if busy {
            occupy(&mut c, "east", "r1-n0", "8");
        }
        add_job(
            &mut c,
            &gpu_gang("grow", 2, "8").min_member(1).topology(hard(1)),
        )
        .unwrap();
        // One pod already runs in rack 1; the other is pending.
        run_on(&mut c, "default/grow-worker-0", "east", "r1-n1");
        (run(&c), c)
    };
    let (d, c) = grow(false);
    let bound: Vec<&str> = d.binds.iter().map(|b| b.node.as_str()).collect();
    assert_eq!(bound, ["r1-n0"]);
    assert_eq!(domains_of(&c, &d, "default/grow", "east", 1), ["rack-1"]);
    // Rack 1 is full: the pod waits rather than leave it for rack 0's free nodes.
    let (d, _) = grow(true);
    assert!(
        d.binds.iter().all(|b| b.job != "default/grow"),
        "{:?}",
        d.binds
    );
}

/// Every node of two racks of two runs a pod of its own; `keep` names those of high priority.
/// An urgent gang of two, held to one rack, may preempt the rest.
fn preempting(keep: &[&str]) -> (Cache, Arc<SchedulerConfig>) {
    let text = tephra_scheduler::config::DEFAULT_CONFIG.replace(
        "actions: \"enqueue, allocate, backfill\"",
        "actions: \"enqueue, allocate, preempt, backfill\"",
    );
    let config = Arc::new(SchedulerConfig::parse(&text).unwrap());
    let mut c = Cache::new();
    racked(&mut c, "east", 2, 2);
    for node in ["r0-n0", "r0-n1", "r1-n0", "r1-n1"] {
        let name = format!("busy-{node}");
        let p = if keep.contains(&node) { 1000 } else { 0 };
        let mut role = Role::new("worker", 1, &[("cpu", "1"), ("nvidia.com/gpu", "8")]);
        role.priority = p;
        let running = GangJob::new(&name, vec![role])
            .priority(p)
            .phase(GroupPhase::Running);
        add_job(&mut c, &running).unwrap();
        run_on(&mut c, &format!("default/{name}-worker-0"), "east", node);
    }
    let mut urgent = Role::new("worker", 2, &[("cpu", "1"), ("nvidia.com/gpu", "8")]);
    urgent.priority = 100;
    add_job(
        &mut c,
        &GangJob::new("urgent", vec![urgent])
            .priority(100)
            .topology(hard(1)),
    )
    .unwrap();
    (c, config)
}

#[test]
fn a_preemptor_held_to_a_rack_evicts_nothing_when_no_one_rack_can_be_freed() {
    // The low-priority pods sit in different racks: evicting them frees two nodes, but no rack.
    let (c, config) = preempting(&["r0-n0", "r1-n1"]);
    let d = schedule(c.snapshot(), config, 0, 1);
    assert!(d.evictions.is_empty(), "{:?}", d.evictions);
    assert!(d.binds.is_empty() && d.pipelined.is_empty());
}

#[test]
fn a_preemptor_held_to_a_rack_evicts_within_one_rack_and_lands_there_whole() {
    let (c, config) = preempting(&["r0-n0"]);
    let d = schedule(c.snapshot(), config, 0, 1);
    let mut victims: Vec<&str> = d.evictions.iter().map(|e| e.task.as_str()).collect();
    victims.sort();
    assert_eq!(
        victims,
        ["default/busy-r1-n0-worker-0", "default/busy-r1-n1-worker-0"]
    );
    let mut nodes: Vec<&str> = d
        .pipelined
        .iter()
        .chain(&d.binds)
        .filter(|b| b.job == "default/urgent")
        .map(|b| b.node.as_str())
        .collect();
    nodes.sort();
    assert_eq!(nodes, ["r1-n0", "r1-n1"]);
}

/// `racks` racks of `per_rack` nodes, the `busy` ones (rack, node, 2/4/8 GPUs) occupied, and
/// hard gangs `g<i>` of (pods, 4 or 8 GPUs each, tier).
fn random_racks(
    racks: usize,
    per_rack: usize,
    busy: &[(usize, usize, u8)],
    gangs: &[(u32, u8, u32)],
) -> Cache {
    let mut c = Cache::new();
    racked(&mut c, "east", racks, per_rack);
    for &(r, n, g) in busy {
        let node = format!("r{}-n{}", r % racks, n % per_rack);
        if c.world()
            .task_id(&format!("default/busy-{node}-worker-0"))
            .is_none()
        {
            occupy(&mut c, "east", &node, ["2", "4", "8"][g as usize]);
        }
    }
    for (i, &(pods, gpus, tier)) in gangs.iter().enumerate() {
        let gpus = if gpus == 1 { "4" } else { "8" };
        let gang = gpu_gang(&format!("g{i}"), pods, gpus).topology(hard(tier));
        add_job(&mut c, &gang).unwrap();
    }
    c
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// The session's free total of each domain, kept up as gangs are placed, stays the sum of
    /// its nodes' free room: placement prunes domains by it.
    #[test]
    fn each_domains_free_total_stays_the_sum_of_its_nodes(
        racks in 2usize..5,
        per_rack in 1usize..4,
        busy in prop::collection::vec((0usize..5, 0usize..4, 0u8..3), 0..6),
        gangs in prop::collection::vec((1u32..5, 1u8..3, 1u32..3), 1..6),
    ) {
        let c = random_racks(racks, per_rack, &busy, &gangs);
        let config = SchedulerConfig::default_config();
        let mut ssn = tephra_scheduler::open_session(c.snapshot(), &config, 0, 1);
        let mut placer = tephra_scheduler::placement::Placer::new(&ssn);
        tephra_scheduler::actions::allocate::execute(&mut ssn, &mut placer, &config.action_args("allocate"));
        let cluster = c.world().cluster_id("east").unwrap();
        let t = topology(&c, "east");
        for (i, d) in t.domains.iter().enumerate() {
            let mut sum = tephra_scheduler::resources::Resources::ZERO;
            for n in &d.nodes {
                sum.add(&ssn.state.nodes[*n as usize].future_idle());
            }
            prop_assert_eq!(ssn.state.domain_future_idle[cluster as usize][i], sum, "{}", d.name);
        }
    }

    /// Whatever is busy and whatever arrives, no hard gang is ever bound across its allowed
    /// tier, and every gang is all or nothing.
    #[test]
    fn no_hard_gang_is_bound_across_its_allowed_tier(
        racks in 2usize..5,
        per_rack in 1usize..4,
        busy in prop::collection::vec((0usize..5, 0usize..4, 0u8..3), 0..6),
        gangs in prop::collection::vec((1u32..5, 1u8..3, 1u32..3), 1..6),
    ) {
        let mut c = random_racks(racks, per_rack, &busy, &gangs);
        for _ in 0..3 {
            let d = run(&c);
            for (i, (pods, _, tier)) in gangs.iter().enumerate() {
                let job = format!("default/g{i}");
                let bound = d.binds.iter().filter(|b| b.job == job).count();
                prop_assert!(bound == 0 || bound == *pods as usize, "{job}: {bound} of {pods}");
                if bound > 0 {
                    let doms = domains_of(&c, &d, &job, "east", *tier);
                    prop_assert_eq!(doms.len(), 1, "{}: {:?}", job, doms);
                    prop_assert!(!doms[0].starts_with("outside"), "{}: {:?}", job, doms);
                }
            }
            apply_binds(&mut c, &d).unwrap();
        }
    }
}
