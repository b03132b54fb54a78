//! The node-level contracts kube-scheduler keeps that tephra keeps too, since it binds pods
//! itself: scheduling gates, host ports, pod topology spread, and admission that refuses a gang
//! no node could ever take; and the timers a session reports so that a runner that sleeps
//! between changes still wakes for them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use tephra_scheduler::model::{
    Cluster, GroupPhase, HostPort, LabelSelector, PodRules, SpreadTerm, TaskStatus,
    WhenUnsatisfiable,
};
use tephra_scheduler::testing::{GangJob, Role, add_cluster, add_job, add_nodes, apply_binds};
use tephra_scheduler::{Cache, Decisions, Event, SchedulerConfig, schedule};

const CPU16: &[(&str, &str)] = &[("cpu", "16"), ("memory", "64Gi"), ("pods", "110")];

fn run_at(cache: &Cache, config: &str, now: i64) -> Decisions {
    schedule(
        cache.snapshot(),
        Arc::new(SchedulerConfig::parse(config).unwrap()),
        now,
        1,
    )
}

fn run(cache: &Cache) -> Decisions {
    run_at(cache, tephra_scheduler::config::DEFAULT_CONFIG, 0)
}

fn small(name: &str, replicas: u32, rules: PodRules) -> GangJob {
    GangJob::new(
        name,
        vec![Role::new("w", replicas, &[("cpu", "1"), ("memory", "1Gi")]).rules(rules)],
    )
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// One cluster `east` with `per_zone` nodes in each of `zones` zones.
fn zoned(zones: &[&str], per_zone: usize) -> Cache {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    for z in zones {
        add_nodes(
            &mut c,
            "east",
            &format!("node-{z}"),
            per_zone,
            CPU16,
            &[("topology.kubernetes.io/zone", z)],
        )
        .unwrap();
    }
    c
}

fn node_zone(c: &Cache, node: &str) -> String {
    let w = c.world();
    let n = w.nodes.get(w.node_id("east", node).unwrap()).unwrap();
    n.spec.labels["topology.kubernetes.io/zone"].clone()
}

fn zone_spread(max_skew: u32, hard: bool) -> SpreadTerm {
    SpreadTerm {
        max_skew,
        topology_key: "topology.kubernetes.io/zone".into(),
        when_unsatisfiable: if hard {
            WhenUnsatisfiable::DoNotSchedule
        } else {
            WhenUnsatisfiable::ScheduleAnyway
        },
        selector: Some(LabelSelector {
            match_labels: labels(&[("app", "web")]),
            expressions: vec![],
        }),
        min_domains: 1,
        honor_node_affinity: true,
        honor_taints: false,
    }
}

fn web(spread: Vec<SpreadTerm>) -> PodRules {
    PodRules {
        labels: labels(&[("app", "web")]),
        spread,
        ..PodRules::default()
    }
}

fn per_zone(c: &Cache, d: &Decisions, job: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for b in d.binds.iter().filter(|b| b.job == job) {
        *out.entry(node_zone(c, &b.node)).or_insert(0) += 1;
    }
    out
}

#[test]
fn a_gated_pod_is_never_bound_and_its_gang_says_how_many_are_gated() {
    let mut c = zoned(&["a"], 2);
    let gated = PodRules {
        gates: vec!["example.com/quota".into()],
        ..PodRules::default()
    };
    add_job(&mut c, &small("gated", 2, gated)).unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty(), "a gated pod is bound: {:?}", d.binds);
    let ev = d.event_for("default/gated").expect("an explanation");
    assert_eq!(ev.reason, "SchedulingGated");
    assert!(
        ev.message.contains("2/2") && ev.message.contains("example.com/quota"),
        "{}",
        ev.message
    );
    // Sessions after that bind nothing either, and never park the job.
    assert!(d.park.jobs.is_empty());
    assert!(run(&c).binds.is_empty());

    // The gates removed: placed in the next session.
    let w = c.world();
    let specs: Vec<_> = w.tasks.iter().map(|(_, t)| t.spec.clone()).collect();
    for mut spec in specs {
        let mut shape = (*spec.shape).clone();
        shape.rules.gates.clear();
        spec.shape = Arc::new(shape);
        c.apply(Event::PodUpsert(spec)).unwrap();
    }
    assert_eq!(run(&c).binds.len(), 2);
}

#[test]
fn a_gang_with_one_gated_member_is_not_bound_in_part() {
    let mut c = zoned(&["a"], 2);
    add_job(&mut c, &small("g", 3, PodRules::default())).unwrap();
    // Gate one of the three pods.
    let w = c.world();
    let mut spec = w
        .tasks
        .get(w.task_id("default/g-w-2").unwrap())
        .unwrap()
        .spec
        .clone();
    let mut shape = (*spec.shape).clone();
    shape.rules.gates = vec!["hold".into()];
    spec.shape = Arc::new(shape);
    c.apply(Event::PodUpsert(spec)).unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty(), "{:?}", d.binds);
    let ev = d.event_for("default/g").unwrap();
    assert_eq!(ev.reason, "SchedulingGated", "{}", ev.message);
}

fn with_port(port: u16) -> PodRules {
    PodRules {
        host_ports: vec![HostPort::new(port, "TCP", "")],
        ..PodRules::default()
    }
}

#[test]
fn two_pods_asking_for_one_host_port_never_share_a_node() {
    let mut c = zoned(&["a"], 2);
    add_job(&mut c, &small("p", 2, with_port(8080))).unwrap();
    let d = run(&c);
    let nodes: std::collections::BTreeSet<_> = d.binds.iter().map(|b| &b.node).collect();
    assert_eq!((d.binds.len(), nodes.len()), (2, 2), "{:?}", d.binds);
    apply_binds(&mut c, &d).unwrap();
    // A third pod with the port has no node left; another port or protocol does.
    add_job(&mut c, &small("third", 1, with_port(8080))).unwrap();
    let udp = PodRules {
        host_ports: vec![HostPort::new(8080, "UDP", "")],
        ..PodRules::default()
    };
    add_job(&mut c, &small("udp", 1, udp)).unwrap();
    let d = run(&c);
    assert!(d.binds.iter().all(|b| b.job != "default/third"));
    assert_eq!(d.binds.iter().filter(|b| b.job == "default/udp").count(), 1);
    let ev = d.event_for("default/third").unwrap();
    assert!(
        ev.message
            .contains("2 node(s) didn't have free ports for the requested pod ports"),
        "{}",
        ev.message
    );
}

#[test]
fn a_gang_that_needs_more_nodes_than_have_its_port_free_is_not_bound_in_part() {
    let mut c = zoned(&["a"], 2);
    add_job(&mut c, &small("p", 3, with_port(80))).unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty(), "{:?}", d.binds);
}

#[test]
fn six_pods_with_a_zone_spread_of_one_land_two_in_each_of_three_zones() {
    let mut c = zoned(&["a", "b", "c"], 2);
    add_job(&mut c, &small("web", 6, web(vec![zone_spread(1, true)]))).unwrap();
    let d = run(&c);
    let zones = per_zone(&c, &d, "default/web");
    assert_eq!(
        zones.values().copied().collect::<Vec<_>>(),
        vec![2, 2, 2],
        "{zones:?}"
    );
}

#[test]
fn pods_already_running_count_towards_the_spread() {
    let mut c = zoned(&["a", "b"], 2);
    add_job(&mut c, &small("first", 2, web(vec![]))).unwrap();
    let d = run(&c);
    // Without constraints the scheduler is free to pack them; make sure both ran in zone a.
    apply_binds(&mut c, &d).unwrap();
    let in_a = d
        .binds
        .iter()
        .filter(|b| node_zone(&c, &b.node) == "a")
        .count();
    add_job(&mut c, &small("next", 2, web(vec![zone_spread(1, true)]))).unwrap();
    let d2 = run(&c);
    let zones = per_zone(&c, &d2, "default/next");
    // Whatever the first two did, after the next two the zones differ by at most one.
    let a = in_a + zones.get("a").copied().unwrap_or(0);
    let b = (2 - in_a) + zones.get("b").copied().unwrap_or(0);
    assert_eq!(a + b, 4);
    assert!(a.abs_diff(b) <= 1, "a={a} b={b}");
}

#[test]
fn a_node_without_the_topology_key_is_no_domain_and_says_so() {
    let mut c = Cache::new();
    add_cluster(&mut c, Cluster::named("east")).unwrap();
    add_nodes(&mut c, "east", "bare", 3, CPU16, &[]).unwrap();
    add_job(&mut c, &small("web", 1, web(vec![zone_spread(1, true)]))).unwrap();
    let d = run(&c);
    assert!(d.binds.is_empty());
    let ev = d.event_for("default/web").unwrap();
    assert_eq!(ev.reason, "NotInqueueable", "{}", ev.message);
    assert!(
        ev.message.contains("missing required label"),
        "{}",
        ev.message
    );
}

#[test]
fn min_domains_keeps_pods_out_of_the_zones_there_are_until_more_exist() {
    let mut c = zoned(&["a", "b"], 2);
    let mut term = zone_spread(1, true);
    term.min_domains = 3;
    // With 2 of 3 wanted domains the emptiest counts as 0: at most one pod per zone.
    add_job(&mut c, &small("web", 3, web(vec![term])).min_member(1)).unwrap();
    let d = run(&c);
    let zones = per_zone(&c, &d, "default/web");
    assert_eq!(zones.values().sum::<usize>(), 2, "{zones:?}");
    assert!(zones.values().all(|n| *n == 1), "{zones:?}");
}

#[test]
fn schedule_anyway_prefers_the_emptier_zone_but_never_refuses() {
    let mut c = zoned(&["a", "b"], 1);
    add_job(&mut c, &small("web", 4, web(vec![zone_spread(1, false)]))).unwrap();
    let d = run(&c);
    let zones = per_zone(&c, &d, "default/web");
    assert_eq!(zones.values().copied().collect::<Vec<_>>(), vec![2, 2]);
    // One zone only: all four still land.
    let mut c = zoned(&["a"], 1);
    add_job(&mut c, &small("web", 4, web(vec![zone_spread(1, false)]))).unwrap();
    assert_eq!(run(&c).binds.len(), 4);
}

#[test]
fn a_gang_whose_node_selector_matches_no_node_is_never_admitted_and_holds_no_budget() {
    let mut c = zoned(&["a"], 2);
    // Six gangs asking for a node label no node has, ahead of a valid one.
    for i in 0..6 {
        let role = Role::new("w", 2, &[("cpu", "1")]).select("gpu.example.com/product", "H100");
        add_job(
            &mut c,
            &GangJob::new(&format!("bad{i}"), vec![role])
                .phase(GroupPhase::Pending)
                .created(i),
        )
        .unwrap();
    }
    add_job(
        &mut c,
        &small("good", 2, PodRules::default())
            .phase(GroupPhase::Pending)
            .created(10),
    )
    .unwrap();
    let d = run(&c);
    for i in 0..6 {
        let key = format!("default/bad{i}");
        let ev = d.event_for(&key).unwrap();
        assert_eq!(ev.reason, "NotInqueueable", "{}", ev.message);
        assert!(
            ev.message
                .contains("didn't match Pod's node affinity/selector"),
            "{}",
            ev.message
        );
        assert_eq!(d.group(&key).unwrap().phase, GroupPhase::Pending);
        assert!(d.park.jobs.contains(&key));
    }
    // The valid gang behind them is admitted and placed at once.
    assert_eq!(
        d.binds.iter().filter(|b| b.job == "default/good").count(),
        2
    );
}

#[test]
fn an_admitted_job_whose_pods_arrive_and_fit_no_node_goes_back_to_pending_and_is_parked() {
    let mut c = zoned(&["a"], 2);
    // Admitted before its pods existed, as a Volcano Job's PodGroup is.
    let role = Role::new("w", 1, &[("cpu", "1")]).select("disk", "nvme");
    add_job(&mut c, &GangJob::new("late", vec![role])).unwrap();
    let d = run(&c);
    let g = d.group("default/late").unwrap();
    assert_eq!(g.phase, GroupPhase::Pending);
    assert_eq!(g.conditions[0].reason, "NotInqueueable");
    apply_binds(&mut c, &d).unwrap();
    // The next session parks it.
    let d = run(&c);
    apply_binds(&mut c, &d).unwrap();
    let w = c.world();
    assert!(w.parked.contains(&w.job_id("default/late").unwrap()));
}

#[test]
fn a_session_reports_when_an_admitted_jobs_inqueue_timeout_falls_due() {
    let mut c = zoned(&["a"], 1);
    // Fills the node; the second job waits, admitted.
    add_job(
        &mut c,
        &GangJob::new("big", vec![Role::new("w", 1, &[("cpu", "16")])]),
    )
    .unwrap();
    let d = run_at(&c, tephra_scheduler::config::DEFAULT_CONFIG, 1000);
    apply_binds(&mut c, &d).unwrap();
    add_job(
        &mut c,
        &GangJob::new("waits", vec![Role::new("w", 1, &[("cpu", "8")])]).created(1000),
    )
    .unwrap();
    let d = run_at(&c, tephra_scheduler::config::DEFAULT_CONFIG, 1000);
    assert!(d.binds.is_empty());
    // Admitted at 1000 with the default 5m timeout.
    assert_eq!(d.wake_at, Some(1300));
}

#[test]
fn a_session_reports_when_a_waiting_jobs_sla_runs_out() {
    let text = tephra_scheduler::config::DEFAULT_CONFIG.replace(
        "  - name: gang\n",
        "  - name: sla\n    arguments:\n      sla-waiting-time: 2m\n  - name: gang\n",
    );
    let mut c = zoned(&["a"], 1);
    add_job(
        &mut c,
        &GangJob::new("big", vec![Role::new("w", 1, &[("cpu", "16")])]),
    )
    .unwrap();
    let d = run_at(&c, &text, 100);
    apply_binds(&mut c, &d).unwrap();
    add_job(
        &mut c,
        &GangJob::new("waits", vec![Role::new("w", 1, &[("cpu", "8")])]).created(100),
    )
    .unwrap();
    let d = run_at(&c, &text, 100);
    assert!(d.binds.is_empty());
    // Created at 100 with a 2m SLA: due at 220, before its inqueue timeout at 400.
    assert_eq!(d.wake_at, Some(220));
    let w = c.world();
    let t = w
        .tasks
        .get(w.task_id("default/waits-w-0").unwrap())
        .unwrap();
    assert_eq!(t.spec.status, TaskStatus::Pending);
}

mod volumes {
    use super::*;
    use tephra_scheduler::cache::StorageChange;
    use tephra_scheduler::model::{
        AccessModes, ClaimRef, PersistentVolume, Requirement, SelectorOp, StorageClass, VolumeClaim,
    };

    fn storage(c: &mut Cache, change: StorageChange) {
        c.apply(Event::Storage {
            cluster: "east".into(),
            change,
        })
        .unwrap();
    }

    fn class(c: &mut Cache, name: &str, wffc: bool, provisioner: &str, zones: &[&str]) {
        let allowed = if zones.is_empty() {
            vec![]
        } else {
            vec![vec![(
                "topology.kubernetes.io/zone".to_string(),
                zones.iter().map(|z| z.to_string()).collect(),
            )]]
        };
        storage(
            c,
            StorageChange::ClassUpsert(StorageClass {
                name: name.into(),
                provisioner: provisioner.into(),
                wait_for_first_consumer: wffc,
                allowed_topologies: allowed,
            }),
        );
    }

    /// A local volume of `gi` GiB on node `node`.
    fn local_pv(c: &mut Cache, name: &str, node: &str, gi: i64, claim: Option<&str>) {
        storage(
            c,
            StorageChange::VolumeUpsert(PersistentVolume {
                name: name.into(),
                labels: Default::default(),
                class: "local".into(),
                capacity: gi << 30,
                access_modes: AccessModes::RWO,
                block: false,
                node_affinity: vec![vec![Requirement {
                    key: "kubernetes.io/hostname".into(),
                    op: SelectorOp::In,
                    values: vec![node.into()],
                }]],
                claim: claim.map(|n| ClaimRef {
                    namespace: "default".into(),
                    name: n.into(),
                }),
                available: claim.is_none(),
                deleting: false,
                csi: Some(("local.csi".into(), name.into())),
            }),
        );
    }

    fn pvc(c: &mut Cache, name: &str, class: &str, modes: AccessModes, bound_to: Option<&str>) {
        storage(
            c,
            StorageChange::ClaimUpsert(VolumeClaim {
                namespace: "default".into(),
                name: name.into(),
                class: class.into(),
                request: 1 << 30,
                access_modes: modes,
                block: false,
                volume: bound_to.map(String::from),
                bound: bound_to.is_some(),
                selected_node: None,
                selector: None,
                lost: false,
                deleting: false,
            }),
        );
    }

    /// One node per zone a, b, c, each labelled with its hostname.
    fn fleet() -> Cache {
        let mut c = Cache::new();
        add_cluster(&mut c, Cluster::named("east")).unwrap();
        for z in ["a", "b", "c"] {
            let host = format!("node-{z}-0");
            add_nodes(
                &mut c,
                "east",
                &format!("node-{z}"),
                1,
                CPU16,
                &[
                    ("topology.kubernetes.io/zone", z),
                    ("kubernetes.io/hostname", &host),
                ],
            )
            .unwrap();
        }
        c
    }

    fn mounting(name: &str, claims: &[&str]) -> GangJob {
        let rules = PodRules {
            claims: claims.iter().map(|c| c.to_string()).collect(),
            ..PodRules::default()
        };
        small(name, 1, rules)
    }

    #[test]
    fn a_pod_whose_claim_is_bound_to_a_local_volume_runs_on_that_volumes_node_only() {
        let mut c = fleet();
        local_pv(&mut c, "pv-c", "node-c-0", 10, Some("data"));
        pvc(&mut c, "data", "local", AccessModes::RWO, Some("pv-c"));
        add_job(&mut c, &mounting("app", &["data"])).unwrap();
        let d = run(&c);
        assert_eq!(d.binds.len(), 1);
        assert_eq!(d.binds[0].node, "node-c-0");
        assert!(
            d.prebinds.is_empty(),
            "a bound claim needs no write: {:?}",
            d.prebinds
        );
    }

    #[test]
    fn an_unbound_immediate_claim_makes_the_pod_wait_and_says_so() {
        let mut c = fleet();
        class(&mut c, "fast", false, "csi.example.com", &[]);
        pvc(&mut c, "data", "fast", AccessModes::RWO, None);
        add_job(&mut c, &mounting("app", &["data"])).unwrap();
        let d = run(&c);
        assert!(d.binds.is_empty());
        let ev = d.event_for("default/app").unwrap();
        assert!(
            ev.message
                .contains("pod has unbound immediate PersistentVolumeClaims"),
            "{}",
            ev.message
        );
        // A missing claim is named.
        add_job(&mut c, &mounting("lost", &["nowhere"])).unwrap();
        let ev = run(&c).event_for("default/lost").cloned().unwrap();
        assert!(
            ev.message
                .contains("persistentvolumeclaim \"nowhere\" not found"),
            "{}",
            ev.message
        );
    }

    #[test]
    fn wait_for_first_consumer_claims_take_the_volumes_of_the_nodes_their_pods_get() {
        let mut c = fleet();
        class(&mut c, "local", true, "kubernetes.io/no-provisioner", &[]);
        local_pv(&mut c, "pv-a", "node-a-0", 10, None);
        local_pv(&mut c, "pv-b", "node-b-0", 10, None);
        pvc(&mut c, "d0", "local", AccessModes::RWO, None);
        pvc(&mut c, "d1", "local", AccessModes::RWO, None);
        let rules = |claim: &str| PodRules {
            claims: vec![claim.to_string()],
            ..PodRules::default()
        };
        let job = GangJob::new(
            "g",
            vec![
                Role::new("r0", 1, &[("cpu", "1")]).rules(rules("d0")),
                Role::new("r1", 1, &[("cpu", "1")]).rules(rules("d1")),
            ],
        );
        add_job(&mut c, &job).unwrap();
        let d = run(&c);
        assert_eq!(d.binds.len(), 2);
        let mut seen = BTreeMap::new();
        for p in &d.prebinds {
            let v = p.volumes[0].volume.clone().expect("a static volume");
            // Each claim's volume is on the node its pod was bound to.
            let b = d.binds.iter().find(|b| b.task == p.task).unwrap();
            assert_eq!(v, format!("pv-{}", &b.node[5..6]), "{p:?} {b:?}");
            seen.insert(p.volumes[0].claim.clone(), v);
        }
        assert_eq!(seen.len(), 2, "{:?}", d.prebinds);
    }

    #[test]
    fn a_gang_that_runs_out_of_volumes_binds_nothing_and_takes_no_volume() {
        let mut c = fleet();
        class(&mut c, "local", true, "kubernetes.io/no-provisioner", &[]);
        local_pv(&mut c, "pv-a", "node-a-0", 10, None);
        local_pv(&mut c, "pv-b", "node-b-0", 10, None);
        for i in 0..3 {
            pvc(&mut c, &format!("d{i}"), "local", AccessModes::RWO, None);
        }
        let roles = (0..3)
            .map(|i| {
                Role::new(&format!("r{i}"), 1, &[("cpu", "1")]).rules(PodRules {
                    claims: vec![format!("d{i}")],
                    ..PodRules::default()
                })
            })
            .collect();
        add_job(&mut c, &GangJob::new("three", roles)).unwrap();
        // A single pod after it can still have a volume: the gang gave its back.
        add_job(&mut c, &mounting("one", &["d0"]).created(5)).unwrap();
        let d = run(&c);
        assert!(
            d.binds.iter().all(|b| b.job != "default/three"),
            "{:?}",
            d.binds
        );
        assert_eq!(d.binds.iter().filter(|b| b.job == "default/one").count(), 1);
    }

    #[test]
    fn a_provisioned_claim_is_placed_within_its_classes_allowed_topologies() {
        let mut c = fleet();
        class(&mut c, "zonal", true, "csi.example.com", &["b"]);
        pvc(&mut c, "data", "zonal", AccessModes::RWO, None);
        add_job(&mut c, &mounting("app", &["data"])).unwrap();
        let d = run(&c);
        assert_eq!(d.binds[0].node, "node-b-0");
        assert_eq!(d.prebinds.len(), 1);
        assert_eq!(
            d.prebinds[0].volumes[0].volume, None,
            "provisioned, not a static volume"
        );
    }

    #[test]
    fn a_read_write_once_pod_claim_serves_one_pod_only() {
        let mut c = fleet();
        class(&mut c, "fast", true, "csi.example.com", &[]);
        pvc(&mut c, "solo", "fast", AccessModes::RWOP, None);
        add_job(&mut c, &mounting("first", &["solo"])).unwrap();
        add_job(&mut c, &mounting("second", &["solo"]).created(5)).unwrap();
        let d = run(&c);
        assert_eq!(d.binds.len(), 1, "{:?}", d.binds);
        let ev = d.event_for("default/second").unwrap();
        assert!(ev.message.contains("ReadWriteOncePod"), "{}", ev.message);
    }

    #[test]
    fn a_read_write_once_pod_claim_in_use_by_a_running_pod_serves_no_other() {
        let mut c = fleet();
        class(&mut c, "fast", true, "csi.example.com", &[]);
        pvc(&mut c, "solo", "fast", AccessModes::RWOP, None);
        add_job(&mut c, &mounting("first", &["solo"])).unwrap();
        let d = run(&c);
        assert_eq!(d.binds.len(), 1);
        apply_binds(&mut c, &d).unwrap();
        add_job(&mut c, &mounting("second", &["solo"]).created(5)).unwrap();
        let d = run(&c);
        assert!(d.binds.is_empty(), "{:?}", d.binds);
    }

    #[test]
    fn a_nodes_csi_attach_limit_keeps_more_volumes_off_it() {
        let mut c = Cache::new();
        add_cluster(&mut c, Cluster::named("east")).unwrap();
        add_nodes(&mut c, "east", "n", 1, CPU16, &[]).unwrap();
        class(&mut c, "fast", true, "csi.example.com", &[]);
        storage(
            &mut c,
            StorageChange::AttachLimits {
                node: "n-0".into(),
                limits: [("csi.example.com".to_string(), 1)].into(),
            },
        );
        pvc(&mut c, "v0", "fast", AccessModes::RWO, None);
        pvc(&mut c, "v1", "fast", AccessModes::RWO, None);
        add_job(&mut c, &mounting("p0", &["v0"])).unwrap();
        add_job(&mut c, &mounting("p1", &["v1"]).created(5)).unwrap();
        let d = run(&c);
        assert_eq!(d.binds.len(), 1, "{:?}", d.binds);
        let ev = d.event_for("default/p1").unwrap();
        assert!(
            ev.message.contains("exceed max volume count"),
            "{}",
            ev.message
        );
    }
}

mod devices {
    use super::*;
    use tephra_scheduler::cache::DraChange;
    use tephra_scheduler::model::{
        AllocatedDevice, AllocationMode, Attribute, ClaimAllocation, Device, DeviceClass,
        DeviceRequest, DeviceSelector, PodClaim, ResourceClaim, ResourceSlice, Selector,
        SliceNodes,
    };

    /// `device.attributes[<attr>] == <value>`, standing in for a compiled CEL selector.
    struct AttrIs(String, String, Attribute);

    impl DeviceSelector for AttrIs {
        fn expression(&self) -> &str {
            &self.0
        }
        fn matches(&self, _driver: &str, device: &Device) -> Result<bool, String> {
            Ok(device.attributes.get(&self.1) == Some(&self.2))
        }
    }

    fn attr_is(attr: &str, value: &str) -> Selector {
        Selector(Arc::new(AttrIs(
            format!("device.attributes[{attr}] == {value}"),
            attr.into(),
            Attribute::Str(value.into()),
        )))
    }

    fn dra(c: &mut Cache, change: DraChange) {
        c.apply(Event::Dra {
            cluster: "east".into(),
            change,
        })
        .unwrap();
    }

    /// Node `node-<i>` of `zoned(["a"], n)` publishes `gpus` devices of `model`.
    fn slice(c: &mut Cache, node: &str, models: &[&str]) {
        let devices = models
            .iter()
            .enumerate()
            .map(|(i, m)| Device {
                name: format!("gpu-{i}"),
                attributes: [(
                    "gpu.example.com/model".to_string(),
                    Attribute::Str(m.to_string()),
                )]
                .into(),
                capacity: Default::default(),
            })
            .collect();
        dra(
            c,
            DraChange::SliceUpsert(ResourceSlice {
                name: format!("{node}-gpu"),
                driver: "gpu.example.com".into(),
                pool: node.into(),
                generation: 1,
                nodes: SliceNodes::Node(node.into()),
                devices,
            }),
        );
    }

    fn gpu_class(c: &mut Cache) {
        dra(
            c,
            DraChange::ClassUpsert(DeviceClass {
                name: "gpu".into(),
                selectors: vec![],
            }),
        );
    }

    fn claim(c: &mut Cache, name: &str, mode: AllocationMode, selectors: Vec<Selector>) {
        dra(
            c,
            DraChange::ClaimUpsert(ResourceClaim {
                namespace: "default".into(),
                name: name.into(),
                requests: vec![DeviceRequest {
                    name: "gpu".into(),
                    class: "gpu".into(),
                    selectors,
                    mode,
                }],
                match_attributes: vec![],
                allocation: None,
                reserved_for: vec![],
                unsupported: None,
                deleting: false,
            }),
        );
    }

    fn using(name: &str, claims: &[&str]) -> GangJob {
        let rules = PodRules {
            device_claims: claims
                .iter()
                .map(|c| PodClaim {
                    name: "gpu".into(),
                    claim: Some(c.to_string()),
                })
                .collect(),
            ..PodRules::default()
        };
        small(name, 1, rules)
    }

    fn fleet() -> Cache {
        let mut c = zoned(&["a"], 3);
        gpu_class(&mut c);
        c
    }

    #[test]
    fn a_gang_whose_pods_each_take_one_device_lands_where_devices_are_and_carries_its_allocations()
    {
        let mut c = fleet();
        slice(&mut c, "node-a-0", &["h100"]);
        slice(&mut c, "node-a-2", &["h100"]);
        claim(&mut c, "c0", AllocationMode::Exact(1), vec![]);
        claim(&mut c, "c1", AllocationMode::Exact(1), vec![]);
        let job = GangJob::new(
            "g",
            vec![
                Role::new("r0", 1, &[("cpu", "1")]).rules(PodRules {
                    device_claims: vec![PodClaim {
                        name: "gpu".into(),
                        claim: Some("c0".into()),
                    }],
                    ..PodRules::default()
                }),
                Role::new("r1", 1, &[("cpu", "1")]).rules(PodRules {
                    device_claims: vec![PodClaim {
                        name: "gpu".into(),
                        claim: Some("c1".into()),
                    }],
                    ..PodRules::default()
                }),
            ],
        );
        add_job(&mut c, &job).unwrap();
        let d = run(&c);
        let nodes: std::collections::BTreeSet<_> = d.binds.iter().map(|b| b.node.clone()).collect();
        assert_eq!(
            nodes,
            ["node-a-0".to_string(), "node-a-2".to_string()].into()
        );
        assert_eq!(d.prebinds.len(), 2);
        for p in &d.prebinds {
            let a = p.devices[0]
                .allocation
                .as_ref()
                .expect("allocated this session");
            assert_eq!(a.nodes, SliceNodes::Node(p.node.clone()));
            assert_eq!(a.devices[0].pool, p.node, "the device of its own node");
        }
    }

    #[test]
    fn a_claim_whose_devices_are_all_held_waits_and_one_no_node_has_is_never_admitted() {
        let mut c = fleet();
        slice(&mut c, "node-a-0", &["h100"]);
        // The only device is held by an allocated claim.
        dra(
            &mut c,
            DraChange::ClaimUpsert(ResourceClaim {
                namespace: "default".into(),
                name: "held".into(),
                requests: vec![],
                match_attributes: vec![],
                allocation: Some(ClaimAllocation {
                    devices: vec![AllocatedDevice {
                        request: "gpu".into(),
                        driver: "gpu.example.com".into(),
                        pool: "node-a-0".into(),
                        device: "gpu-0".into(),
                    }],
                    nodes: SliceNodes::Node("node-a-0".into()),
                }),
                reserved_for: vec!["other".into()],
                unsupported: None,
                deleting: false,
            }),
        );
        claim(&mut c, "wants", AllocationMode::Exact(1), vec![]);
        claim(
            &mut c,
            "a100",
            AllocationMode::Exact(1),
            vec![attr_is("gpu.example.com/model", "a100")],
        );
        add_job(&mut c, &using("waits", &["wants"])).unwrap();
        add_job(&mut c, &using("never", &["a100"]).created(5)).unwrap();
        let d = run(&c);
        assert!(d.binds.is_empty(), "{:?}", d.binds);
        let waits = d.event_for("default/waits").unwrap();
        assert_eq!(waits.reason, "NotEnoughResources");
        assert!(
            waits.message.contains("cannot allocate all claims"),
            "{}",
            waits.message
        );
        let never = d.event_for("default/never").unwrap();
        assert_eq!(never.reason, "NotInqueueable", "{}", never.message);
        assert!(!d.park.jobs.contains(&"default/waits".to_string()));
    }

    #[test]
    fn an_allocated_claim_pins_its_pod_to_the_node_its_devices_are_on() {
        let mut c = fleet();
        slice(&mut c, "node-a-1", &["h100"]);
        dra(
            &mut c,
            DraChange::ClaimUpsert(ResourceClaim {
                namespace: "default".into(),
                name: "mine".into(),
                requests: vec![DeviceRequest {
                    name: "gpu".into(),
                    class: "gpu".into(),
                    selectors: vec![],
                    mode: AllocationMode::Exact(1),
                }],
                match_attributes: vec![],
                allocation: Some(ClaimAllocation {
                    devices: vec![AllocatedDevice {
                        request: "gpu".into(),
                        driver: "gpu.example.com".into(),
                        pool: "node-a-1".into(),
                        device: "gpu-0".into(),
                    }],
                    nodes: SliceNodes::Node("node-a-1".into()),
                }),
                reserved_for: vec![],
                unsupported: None,
                deleting: false,
            }),
        );
        add_job(&mut c, &using("app", &["mine"])).unwrap();
        let d = run(&c);
        assert_eq!(d.binds[0].node, "node-a-1");
        // Allocated before: only its reservation is written.
        assert_eq!(d.prebinds[0].devices[0].allocation, None);
    }

    #[test]
    fn all_mode_takes_every_matching_device_of_the_node_and_selectors_filter_them() {
        let mut c = fleet();
        slice(&mut c, "node-a-0", &["h100", "h100", "a100"]);
        claim(
            &mut c,
            "all-h100",
            AllocationMode::All,
            vec![attr_is("gpu.example.com/model", "h100")],
        );
        add_job(&mut c, &using("app", &["all-h100"])).unwrap();
        let d = run(&c);
        let a = d.prebinds[0].devices[0].allocation.clone().unwrap();
        let names: Vec<_> = a.devices.iter().map(|d| d.device.as_str()).collect();
        assert_eq!(names, vec!["gpu-0", "gpu-1"]);
    }

    #[test]
    fn a_claim_using_a_feature_tephra_does_not_allocate_waits_naming_it() {
        let mut c = fleet();
        slice(&mut c, "node-a-0", &["h100"]);
        dra(
            &mut c,
            DraChange::ClaimUpsert(ResourceClaim {
                namespace: "default".into(),
                name: "admin".into(),
                requests: vec![],
                match_attributes: vec![],
                allocation: None,
                reserved_for: vec![],
                unsupported: Some("adminAccess (requests[0])".into()),
                deleting: false,
            }),
        );
        add_job(&mut c, &using("app", &["admin"])).unwrap();
        let d = run(&c);
        assert!(d.binds.is_empty());
        let ev = d.event_for("default/app").unwrap();
        assert!(ev.message.contains("adminAccess"), "{}", ev.message);
    }

    #[test]
    fn devices_every_node_reaches_serve_pods_on_nodes_without_a_slice_of_their_own() {
        let mut c = fleet();
        slice(&mut c, "node-a-0", &["h100"]);
        // Network-attached devices, reachable from every node.
        let devices = (0..3)
            .map(|i| Device {
                name: format!("nic-{i}"),
                attributes: [(
                    "gpu.example.com/model".to_string(),
                    Attribute::Str("net".into()),
                )]
                .into(),
                capacity: Default::default(),
            })
            .collect();
        dra(
            &mut c,
            DraChange::SliceUpsert(ResourceSlice {
                name: "fabric".into(),
                driver: "gpu.example.com".into(),
                pool: "fabric".into(),
                generation: 1,
                nodes: SliceNodes::All,
                devices,
            }),
        );
        let net = || vec![attr_is("gpu.example.com/model", "net")];
        for i in 0..3 {
            claim(&mut c, &format!("n{i}"), AllocationMode::Exact(1), net());
            // Each pod takes a whole node's CPU, so the three need three nodes.
            let rules = PodRules {
                device_claims: vec![PodClaim {
                    name: "gpu".into(),
                    claim: Some(format!("n{i}")),
                }],
                ..PodRules::default()
            };
            let job = GangJob::new(
                &format!("p{i}"),
                vec![Role::new("r", 1, &[("cpu", "12")]).rules(rules)],
            );
            add_job(&mut c, &job).unwrap();
        }
        let d = run(&c);
        let nodes: std::collections::BTreeSet<_> = d.binds.iter().map(|b| b.node.clone()).collect();
        assert_eq!(nodes.len(), 3, "{:?}", d.binds);
        for p in &d.prebinds {
            let a = p.devices[0].allocation.as_ref().expect("allocated");
            assert_eq!(a.nodes, SliceNodes::All);
            assert_eq!(a.devices[0].pool, "fabric");
        }
    }

    #[test]
    fn a_template_claim_not_created_yet_makes_the_pod_wait() {
        let mut c = fleet();
        slice(&mut c, "node-a-0", &["h100"]);
        let rules = PodRules {
            device_claims: vec![PodClaim {
                name: "gpu".into(),
                claim: None,
            }],
            ..PodRules::default()
        };
        add_job(&mut c, &small("app", 1, rules)).unwrap();
        let d = run(&c);
        assert!(d.binds.is_empty());
        let ev = d.event_for("default/app").unwrap();
        assert!(
            ev.message.contains("ResourceClaim not created yet"),
            "{}",
            ev.message
        );
    }
}
