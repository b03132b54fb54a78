//! The node-level contracts kube-scheduler keeps that tephra keeps too, since it binds pods
//! itself: scheduling gates, host ports, pod topology spread, and admission that refuses a gang
//! no node could ever take; and the timers a session reports so that a runner that sleeps
//! between changes still wakes for them. Volumes (`contracts/volumes.rs`), DRA devices
//! (`contracts/devices.rs`) and DRA devices shared by partitions or by capacity
//! (`contracts/device_sharing.rs`) have files of their own.
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

#[path = "contracts/volumes.rs"]
mod volumes;

#[path = "contracts/devices.rs"]
mod devices;

#[path = "contracts/device_sharing.rs"]
mod device_sharing;
