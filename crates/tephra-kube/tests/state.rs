//! The runtime's state without IO: watcher updates in, sessions run, bind results fed back.
//! A gang left below its minimum by failed binds is evicted whole after the deadline, and a
//! gang whose missing pods were placed again is left alone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::json;
use tephra_kube::state::State;
use tephra_kube::watch::{Change, Kind, Obj, Update};
use tephra_scheduler::SchedulerConfig;
use tephra_scheduler::model::TaskStatus;

fn update(kind: Kind, change: Change) -> Update {
    Update {
        cluster: Arc::from("local"),
        kind,
        change,
    }
}

fn node(name: &str, cordoned: bool) -> Obj {
    Obj::Node(Box::new(
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"unschedulable": cordoned},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap(),
    ))
}

fn pod(name: &str, node: Option<&str>) -> Obj {
    let mut spec = json!({"schedulerName": "volcano",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    Obj::Pod(Box::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": name,
                         "annotations": {"scheduling.k8s.io/group-name": "pg"}},
            "spec": spec
        }))
        .unwrap(),
    ))
}

/// One 8-CPU node, a queue, and a PodGroup of two 4-CPU pods (minMember 2).
fn world() -> State {
    let mut s = State::new(vec!["volcano".into()], "default".into());
    s.add_local("local").unwrap();
    let q: tephra_api::Queue = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "default"}, "spec": {"weight": 1}
    }))
    .unwrap();
    let pg: tephra_api::PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "ns", "uid": "pg"},
        "spec": {"minMember": 2, "queue": "default"}
    }))
    .unwrap();
    for u in [
        update(Kind::Node, Change::Relisted(vec![node("n0", false)])),
        update(Kind::Queue, Change::Relisted(vec![Obj::Queue(Box::new(q))])),
        update(
            Kind::PodGroup,
            Change::Relisted(vec![Obj::PodGroup(Box::new(pg))]),
        ),
        update(
            Kind::Pod,
            Change::Relisted(vec![pod("a", None), pod("b", None)]),
        ),
    ] {
        assert!(s.apply(0, u).is_empty());
    }
    s
}

fn session(s: &mut State, now: i64) -> tephra_scheduler::Decisions {
    s.session(
        Arc::new(SchedulerConfig::default_config()),
        now,
        now as u64,
        &mut |_, _| {},
    )
}

fn status(s: &State, key: &str) -> TaskStatus {
    let w = s.cache().world();
    w.tasks.get(w.task_id(key).unwrap()).unwrap().spec.status
}

#[test]
fn a_gang_left_partly_bound_is_evicted_whole_after_the_deadline() {
    let mut s = world();
    let d = session(&mut s, 10);
    assert_eq!(d.binds.len(), 2, "{:?}", d.binds);
    // a's bind succeeded (the watch shows it bound); b's failed, and the node is cordoned
    // before b can be placed again.
    assert!(
        s.apply(11, update(Kind::Pod, Change::Apply(pod("a", Some("n0")))))
            .is_empty()
    );
    s.bind_failed("ns/b", 11);
    assert_eq!(status(&s, "ns/b"), TaskStatus::Pending);
    assert!(
        s.apply(11, update(Kind::Node, Change::Apply(node("n0", true))))
            .is_empty()
    );
    session(&mut s, 12);
    assert!(s.expired_gangs(20, 30).is_empty(), "before the deadline");
    let expired = s.expired_gangs(42, 30);
    assert_eq!(
        expired,
        vec![(
            "ns/pg".to_string(),
            vec![("ns/a".to_string(), "local".to_string())]
        )]
    );
    assert_eq!(status(&s, "ns/a"), TaskStatus::Releasing);
    assert!(s.expired_gangs(100, 30).is_empty(), "evicted once");
}

#[test]
fn a_gang_whose_failed_pods_are_placed_again_is_left_alone() {
    let mut s = world();
    session(&mut s, 10);
    assert!(
        s.apply(11, update(Kind::Pod, Change::Apply(pod("a", Some("n0")))))
            .is_empty()
    );
    s.bind_failed("ns/b", 11);
    let d = session(&mut s, 12);
    assert_eq!(
        d.binds.len(),
        1,
        "the missing pod is placed again: {:?}",
        d.binds
    );
    assert_eq!(d.binds[0].task, "ns/b");
    assert_eq!(d.binds[0].node, "n0");
    assert!(s.expired_gangs(100, 30).is_empty());
}

#[test]
fn a_relist_forgets_what_is_gone_and_keeps_what_is_there() {
    let mut s = world();
    assert!(
        s.apply(5, update(Kind::Pod, Change::Relisted(vec![pod("a", None)])))
            .is_empty()
    );
    let w = s.cache().world();
    assert!(w.task_id("ns/a").is_some());
    assert!(w.task_id("ns/b").is_none(), "b was not in the relist");
}

#[test]
fn a_propagation_policy_gives_the_podgroups_it_selects_their_placement() {
    let mut s = world();
    let pp: tephra_api::PropagationPolicy = serde_json::from_value(json!({
        "apiVersion": "policy.tephra.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"resourceSelectors": [{"apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup", "name": "pg"}],
                 "placement": {"clusterAffinity": {"clusterNames": ["east"]}}}
    }))
    .unwrap();
    let policy = |s: &State| {
        let w = s.cache().world();
        let j = w.jobs.get(w.job_id("ns/pg").unwrap()).unwrap();
        j.group.as_ref().unwrap().policy.cluster_names.clone()
    };
    assert!(policy(&s).is_empty());
    assert!(
        s.apply(
            1,
            update(
                Kind::Policy,
                Change::Apply(Obj::Policy(Box::new(pp.clone())))
            )
        )
        .is_empty()
    );
    assert_eq!(
        policy(&s),
        vec!["east".to_string()],
        "applied to a PodGroup seen before it"
    );
    assert!(
        s.apply(
            2,
            update(Kind::Policy, Change::Delete(Obj::Policy(Box::new(pp))))
        )
        .is_empty()
    );
    assert!(policy(&s).is_empty(), "gone with the policy");
}

#[test]
fn a_declared_pod_reports_how_its_member_copy_runs_and_waits_again_when_it_is_gone() {
    let mut s = State::new(vec!["volcano".into()], "default".into());
    s.declare_from(Arc::from("control-plane"));
    s.add_local("east").unwrap();
    let at = |cluster: &str, kind, change| Update {
        cluster: Arc::from(cluster),
        kind,
        change,
    };
    let mut running = pod("a", Some("n0"));
    if let Obj::Pod(p) = &mut running {
        p.status = Some(serde_json::from_value(json!({"phase": "Running"})).unwrap());
    }
    assert!(
        s.apply(
            0,
            at("control-plane", Kind::Pod, Change::Apply(pod("a", None)))
        )
        .is_empty()
    );
    assert!(s.declared("ns/a").is_some());
    assert!(
        s.apply(1, at("east", Kind::Node, Change::Apply(node("n0", false))))
            .is_empty()
    );
    assert!(
        s.apply(1, at("east", Kind::Pod, Change::Apply(running)))
            .is_empty()
    );
    assert!(s.declared("ns/a").is_none(), "east has it now");
    assert_eq!(status(&s, "ns/a"), TaskStatus::Running);
    let said = format!("{:?}", s.take_status_writes());
    assert!(
        said.contains("Running") && said.contains("member cluster east on node n0"),
        "{said}"
    );
    assert!(s.take_status_writes().is_empty(), "once per change");
    assert!(
        s.apply(
            2,
            at("east", Kind::Pod, Change::Delete(pod("a", Some("n0"))))
        )
        .is_empty()
    );
    assert_eq!(
        status(&s, "ns/a"),
        TaskStatus::Pending,
        "declared again, to be placed anew"
    );
    let said = format!("{:?}", s.take_status_writes());
    assert!(said.contains("MemberCopyGone"), "{said}");
}

#[test]
fn a_declared_pod_being_deleted_orphans_its_copy_and_is_not_placed_again() {
    let mut s = State::new(vec!["volcano".into()], "default".into());
    s.declare_from(Arc::from("control-plane"));
    s.add_local("east").unwrap();
    let copy = |deleting: bool| {
        let mut p = pod("a", Some("n0"));
        if let Obj::Pod(p) = &mut p {
            let a = p.metadata.annotations.get_or_insert_default();
            a.insert(
                tephra_api::well_known::PLANNED_CLUSTER.into(),
                "east".into(),
            );
            a.insert(tephra_api::well_known::DECLARED_UID.into(), "a".into());
            p.status = Some(serde_json::from_value(json!({"phase": "Running"})).unwrap());
            if deleting {
                p.metadata.deletion_timestamp =
                    serde_json::from_value(json!("2026-11-30T10:00:00Z")).unwrap();
            }
        }
        p
    };
    // Bound to the virtual node and being deleted: the API server waits for its kubelet.
    let mut deleting = pod("a", Some("tephra"));
    if let Obj::Pod(p) = &mut deleting {
        p.metadata.deletion_timestamp =
            serde_json::from_value(json!("2026-11-30T10:00:00Z")).unwrap();
    }
    applied(
        &mut s,
        vec![
            (
                0,
                "control-plane",
                Kind::Pod,
                Change::Relisted(vec![pod("a", None)]),
            ),
            (
                0,
                "east",
                Kind::Node,
                Change::Relisted(vec![node("n0", false)]),
            ),
            (1, "east", Kind::Pod, Change::Relisted(vec![copy(false)])),
        ],
    );
    assert!(s.declared("ns/a").is_none(), "east has it");
    s.take_status_writes();
    applied(
        &mut s,
        vec![(2, "control-plane", Kind::Pod, Change::Apply(deleting))],
    );
    let purges = s.orphan_deletions(3).unwrap();
    assert!(
        format!("{purges:?}").contains("Purge") && format!("{purges:?}").contains("east"),
        "the copy of a pod being deleted goes: {purges:?}"
    );
    applied(
        &mut s,
        vec![
            (4, "east", Kind::Pod, Change::Apply(copy(true))),
            (5, "east", Kind::Pod, Change::Delete(copy(true))),
        ],
    );
    assert!(
        s.declared("ns/a").is_none(),
        "not offered to a session again"
    );
    let said = format!("{:?}", s.take_status_writes());
    assert!(
        !said.contains("MemberCopyGone"),
        "no \"placed again\": {said}"
    );
    assert!(
        s.cache().world().task_id("ns/a").is_none(),
        "nothing of it is left to schedule"
    );
}

/// The member label writes among `writes`: `Some(member)` set, `None` removed.
fn member_labels(writes: &[tephra_kube::writes::Write]) -> Vec<Option<String>> {
    writes
        .iter()
        .filter_map(|w| match w {
            tephra_kube::writes::Write::DeclaredMember { member, .. } => Some(member.clone()),
            _ => None,
        })
        .collect()
}

/// Applies each `(t, cluster, kind, change)`, which must be taken without an error.
fn applied(s: &mut State, steps: Vec<(i64, &str, Kind, Change)>) {
    for (t, cluster, kind, change) in steps {
        let cluster = Arc::from(cluster);
        let errors = s.apply(
            t,
            Update {
                cluster,
                kind,
                change,
            },
        );
        assert!(errors.is_empty(), "{errors:?}");
    }
}

#[test]
fn a_declared_pod_is_labelled_with_its_member_once_per_move_and_not_again_after_a_restart() {
    let fresh = || {
        let mut s = State::new(vec!["volcano".into()], "default".into());
        s.declare_from(Arc::from("control-plane"));
        s.add_local("east").unwrap();
        s.add_local("west").unwrap();
        s
    };
    let running = |node: &str, phase: &str| {
        let mut p = pod("a", Some(node));
        if let Obj::Pod(p) = &mut p {
            p.status = Some(serde_json::from_value(json!({"phase": phase})).unwrap());
        }
        Change::Apply(p)
    };
    let labelled = |member: &str| {
        let mut p = pod("a", None);
        if let Obj::Pod(p) = &mut p {
            p.metadata.labels = Some([("tephra.io/member".to_string(), member.to_string())].into());
        }
        Change::Apply(p)
    };
    let member = |m: &str| vec![Some(m.to_string())];
    let (cp, pod_, node_) = ("control-plane", Kind::Pod, Kind::Node);
    let mut s = fresh();
    applied(
        &mut s,
        vec![
            (0, cp, pod_, Change::Apply(pod("a", None))),
            (1, "east", node_, Change::Apply(node("e0", false))),
            (1, "west", node_, Change::Apply(node("w0", false))),
            (2, "east", pod_, running("e0", "Pending")),
        ],
    );
    assert_eq!(member_labels(&s.take_status_writes()), member("east"));
    // The label's echo, then a phase change: the status is reported, the label not again.
    applied(
        &mut s,
        vec![
            (3, cp, pod_, labelled("east")),
            (3, "east", pod_, running("e0", "Running")),
        ],
    );
    let writes = s.take_status_writes();
    assert!(
        !writes.is_empty() && member_labels(&writes).is_empty(),
        "{writes:?}"
    );
    // The copy is gone: the label goes; the pod lands in west: the label says west.
    let gone = Change::Delete(pod("a", Some("e0")));
    applied(&mut s, vec![(4, "east", pod_, gone)]);
    assert_eq!(member_labels(&s.take_status_writes()), vec![None]);
    applied(&mut s, vec![(5, "west", pod_, running("w0", "Running"))]);
    assert_eq!(member_labels(&s.take_status_writes()), member("west"));
    // A restarted scheduler that finds the label right writes none, only the phase.
    let mut s = fresh();
    applied(
        &mut s,
        vec![
            (0, cp, pod_, labelled("west")),
            (1, "west", node_, Change::Apply(node("w0", false))),
            (2, "west", pod_, running("w0", "Running")),
        ],
    );
    let writes = s.take_status_writes();
    assert!(
        !writes.is_empty() && member_labels(&writes).is_empty(),
        "{writes:?}"
    );
}

#[test]
fn a_job_that_can_never_be_placed_is_parked_until_a_node_or_the_config_changes() {
    let mut s = world();
    let big: tephra_api::PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "big", "namespace": "ns", "uid": "big"},
        "spec": {"minMember": 1, "queue": "default"}
    }))
    .unwrap();
    let huge = Obj::Pod(Box::new(
        serde_json::from_value(json!({
            "metadata": {"name": "huge", "namespace": "ns", "uid": "huge",
                         "annotations": {"scheduling.k8s.io/group-name": "big"}},
            "spec": {"schedulerName": "volcano",
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "16"}}}]}
        }))
        .unwrap(),
    ));
    s.apply(
        0,
        update(
            Kind::PodGroup,
            Change::Apply(Obj::PodGroup(Box::new(big.clone()))),
        ),
    );
    s.apply(0, update(Kind::Pod, Change::Apply(huge)));
    let parked = |s: &State| {
        let w = s.cache().world();
        w.parked.contains(&w.job_id("ns/big").unwrap())
    };
    let d = session(&mut s, 10);
    assert_eq!(d.event_for("ns/big").unwrap().reason, "NotInqueueable");
    assert!(parked(&s));
    // The PodGroup's status write comes back unchanged in spec: still parked.
    s.apply(
        11,
        update(Kind::PodGroup, Change::Apply(Obj::PodGroup(Box::new(big)))),
    );
    assert!(parked(&s));
    let d = session(&mut s, 20);
    assert!(d.event_for("ns/big").is_none(), "{:?}", d.events);
    // A new configuration may change the verdict.
    s.config_changed();
    assert!(!parked(&s));
    session(&mut s, 30);
    assert!(parked(&s));
    // So may a node.
    s.apply(31, update(Kind::Node, Change::Apply(node("n1", false))));
    assert!(!parked(&s));
}

#[test]
fn a_gang_evicted_from_a_member_is_declared_again_while_its_old_copy_holds_the_node() {
    let mut s = State::new(vec!["volcano".into()], "default".into());
    s.declare_from(Arc::from("control-plane"));
    s.add_local("east").unwrap();
    let at = |cluster: &str, kind, change| Update {
        cluster: Arc::from(cluster),
        kind,
        change,
    };
    let pg: tephra_api::PodGroup = serde_json::from_value(json!({
        "metadata": {"name": "pg", "namespace": "ns", "uid": "pg"},
        "spec": {"minMember": 1, "queue": "default"}
    }))
    .unwrap();
    let mut running = pod("a", Some("n0"));
    if let Obj::Pod(p) = &mut running {
        p.status = Some(serde_json::from_value(json!({"phase": "Running"})).unwrap());
    }
    for u in [
        at(
            "control-plane",
            Kind::PodGroup,
            Change::Apply(Obj::PodGroup(Box::new(pg))),
        ),
        at("control-plane", Kind::Pod, Change::Apply(pod("a", None))),
        at("east", Kind::Node, Change::Apply(node("n0", false))),
        at("east", Kind::Pod, Change::Apply(running.clone())),
    ] {
        assert!(s.apply(0, u).is_empty());
    }
    assert_eq!(status(&s, "ns/a"), TaskStatus::Running);
    let rb: tephra_api::ResourceBinding = serde_json::from_value(json!({
        "metadata": {"name": "pg", "namespace": "ns"},
        "spec": {"resource": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                              "name": "pg"},
                 "gracefulEvictionTasks": [{"fromCluster": "east", "reason": "TaintUntolerated",
                                            "producer": "TaintManager"}]}
    }))
    .unwrap();
    assert!(
        s.apply(
            1,
            at(
                "control-plane",
                Kind::Binding,
                Change::Apply(Obj::Binding(Box::new(rb)))
            )
        )
        .is_empty()
    );
    assert_eq!(s.evicted_from("ns/pg").map(|c| c.len()), Some(1));
    assert_eq!(
        status(&s, "ns/a"),
        TaskStatus::Pending,
        "the declared pod waits to be placed again"
    );
    let w = s.cache().world();
    let ghost = w.task_id("ns/a~east").expect("the old copy is kept aside");
    let g = &w.tasks.get(ghost).unwrap().spec;
    assert_eq!(g.status, TaskStatus::Running);
    assert_eq!(g.group, None, "it belongs to no job any more");
    assert!(!g.shape.preemptable);
    let said = format!("{:?}", s.take_status_writes());
    assert!(said.contains("EvictedFromMember"), "{said}");
    // East reports the old pod again: it stays a ghost; its deletion takes the ghost away.
    assert!(
        s.apply(2, at("east", Kind::Pod, Change::Apply(running)))
            .is_empty()
    );
    assert_eq!(status(&s, "ns/a"), TaskStatus::Pending);
    assert!(
        s.apply(
            3,
            at("east", Kind::Pod, Change::Delete(pod("a", Some("n0"))))
        )
        .is_empty()
    );
    assert!(s.cache().world().task_id("ns/a~east").is_none());
    assert_eq!(
        status(&s, "ns/a"),
        TaskStatus::Pending,
        "the declared pod is untouched"
    );
}

/// The queue's status and the fleet view count a moving gang once: its PodGroup once, each pod
/// by the copy that holds the room (the old one until the new one is placed), in its own queue.
#[test]
fn a_gang_moving_between_members_counts_once_in_its_queue_and_the_fleet_view() {
    let mut s = State::new(vec!["volcano".into()], "default".into());
    s.declare_from(Arc::from("control-plane"));
    s.add_local("east").unwrap();
    s.add_local("west").unwrap();
    let at = |cluster: &str, kind, change| Update {
        cluster: Arc::from(cluster),
        kind,
        change,
    };
    let q = Obj::Queue(object(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "ml"}, "spec": {"weight": 1}
    })));
    let pg = Obj::PodGroup(object(json!({
        "metadata": {"name": "pg", "namespace": "ns", "uid": "pg"},
        "spec": {"minMember": 2, "queue": "ml"},
        "status": {"phase": "Running"}
    })));
    let running = |name: &str| {
        let mut p = pod(name, Some("n0"));
        if let Obj::Pod(p) = &mut p {
            p.status = Some(serde_json::from_value(json!({"phase": "Running"})).unwrap());
        }
        p
    };
    for u in [
        at("control-plane", Kind::Queue, Change::Apply(q)),
        at("control-plane", Kind::PodGroup, Change::Apply(pg)),
        at("control-plane", Kind::Pod, Change::Apply(pod("a", None))),
        at("control-plane", Kind::Pod, Change::Apply(pod("b", None))),
        at("east", Kind::Node, Change::Apply(node("n0", false))),
        at("west", Kind::Node, Change::Apply(node("n0", false))),
        at("east", Kind::Pod, Change::Apply(running("a"))),
        at("east", Kind::Pod, Change::Apply(running("b"))),
    ] {
        s.apply(0, u);
    }
    let counted = |s: &mut State, now: i64| {
        let d = session(s, now);
        let q = |name: &str| d.queues.iter().find(|q| q.name == name).cloned();
        let ml = q("ml").expect("queue ml");
        let groups = ml.pending + ml.inqueue + ml.running + ml.unknown + ml.completed;
        assert_eq!(groups, 1, "one PodGroup, counted once: {ml:?}");
        let default = q("default").expect("the default queue");
        assert!(
            default.allocated.is_empty() || default.allocated.values().all(|v| v == "0"),
            "nothing of the gang in the default queue: {default:?}"
        );
        assert_eq!(default.running, 0, "{default:?}");
        let view = s.view("scheduler");
        let jobs: Vec<&str> = view.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(
            jobs,
            ["pg"],
            "the old copy is shown with its job, not as jobs of its own"
        );
        let v = view.queues.iter().find(|q| q.name == "ml").unwrap();
        assert_eq!(v.pending + v.inqueue + v.running, 1, "{v:?}");
        ml.allocated.get("cpu").cloned().unwrap_or_default()
    };
    assert_eq!(counted(&mut s, 1), "8", "two 4-CPU pods in east");
    let rb: tephra_api::ResourceBinding = serde_json::from_value(json!({
        "metadata": {"name": "pg", "namespace": "ns"},
        "spec": {"resource": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                              "name": "pg"},
                 "clusters": [{"name": "west"}],
                 "gracefulEvictionTasks": [{"fromCluster": "east", "reason": "TaintUntolerated",
                                            "producer": "TaintManager"}]}
    }))
    .unwrap();
    s.apply(
        2,
        at(
            "control-plane",
            Kind::Binding,
            Change::Apply(Obj::Binding(Box::new(rb))),
        ),
    );
    assert!(s.cache().world().task_id("ns/a~east").is_some());
    // The session places the gang again in west while east's copy still runs: 8 CPU, not 16.
    assert_eq!(
        counted(&mut s, 3),
        "8",
        "each pod once while both copies hold nodes"
    );
    assert!(
        s.cache()
            .task("ns/a")
            .is_some_and(|t| t.placement.is_some()),
        "the gang is placed again"
    );
    // East's copy goes: still 8.
    for name in ["a", "b"] {
        s.apply(
            4,
            at("east", Kind::Pod, Change::Delete(pod(name, Some("n0")))),
        );
    }
    assert!(s.cache().world().task_id("ns/a~east").is_none());
    assert_eq!(counted(&mut s, 5), "8");
}

fn object<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Box<T> {
    Box::new(serde_json::from_value(v).unwrap())
}

fn group(name: &str) -> Obj {
    Obj::PodGroup(object(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": {"minMember": 1, "queue": "default"}
    })))
}

fn pod_of(name: &str, group: &str, volumes: serde_json::Value) -> Obj {
    Obj::Pod(object(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": name,
                     "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {"schedulerName": "volcano", "volumes": volumes,
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    })))
}

#[test]
fn a_pod_is_not_placed_before_the_kinds_its_claims_are_judged_with_are_listed() {
    let mut s = State::new(vec!["volcano".into()], "default".into());
    s.defer_listing();
    s.add_local("local").unwrap();
    let q = Obj::Queue(object(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "default"}, "spec": {"weight": 1}})));
    let claim = json!([{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]);
    // The sessions' kinds are listed; of the storage kinds, all but the attach limits.
    for u in [
        update(Kind::Node, Change::Relisted(vec![node("n0", false)])),
        update(Kind::Queue, Change::Relisted(vec![q])),
        update(
            Kind::PodGroup,
            Change::Relisted(vec![group("pg1"), group("pg2")]),
        ),
        update(
            Kind::Pod,
            Change::Relisted(vec![
                pod_of("plain", "pg1", json!([])),
                pod_of("vol", "pg2", claim),
            ]),
        ),
        update(
            Kind::Pvc,
            Change::Relisted(vec![Obj::Pvc(object(json!({
                "metadata": {"name": "data", "namespace": "ns",
                             "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                "spec": {"volumeName": "pv1", "accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}}},
                "status": {"phase": "Bound"}})))]),
        ),
        update(
            Kind::Pv,
            Change::Relisted(vec![Obj::Pv(object(json!({
                "metadata": {"name": "pv1"},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                         "csi": {"driver": "csi.example.com", "volumeHandle": "h1"},
                         "claimRef": {"namespace": "ns", "name": "data"}},
                "status": {"phase": "Bound"}})))]),
        ),
        update(Kind::StorageClass, Change::Relisted(vec![])),
    ] {
        assert!(s.apply(0, u).is_empty());
    }
    let d = session(&mut s, 1);
    let bound: Vec<&str> = d.binds.iter().map(|b| b.task.as_str()).collect();
    // The pod without claims is placed; the one whose volume's attach limit is not known yet
    // is held back (n0 can attach no volume of its driver, which its CSINode will say).
    assert_eq!(bound, vec!["ns/plain"]);
    assert_eq!(s.held_back(), 1);
    assert_eq!(status(&s, "ns/vol"), TaskStatus::Pending);
    // The attach limits are listed: the pod is judged with them, and n0 cannot take it.
    let csinode = Obj::CsiNode(object(json!({
        "metadata": {"name": "n0"},
        "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n0",
                              "allocatable": {"count": 0}}]}})));
    assert!(
        s.apply(2, update(Kind::CsiNode, Change::Relisted(vec![csinode])))
            .is_empty()
    );
    assert_eq!(s.held_back(), 0);
    let d = session(&mut s, 3);
    assert!(d.binds.is_empty(), "{:?}", d.binds);
    let why = d.event_for("ns/pg2").expect("the gang says why it waits");
    assert!(!why.message.contains("scheduling gates"), "{}", why.message);
}

/// Sessions that start before the HyperNodes are listed (a cold API server was seen to end
/// that list last): a gang with a hard `networkTopology` waits, saying why, while a gang
/// without one is placed; once the list names a rack, the gang goes into it.
#[test]
fn a_topology_gang_waits_for_the_hypernodes_to_be_listed_and_others_do_not() {
    let mut s = State::new(vec!["volcano".into()], "default".into());
    s.defer_listing();
    s.add_local("local").unwrap();
    let q = Obj::Queue(object(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "default"}, "spec": {"weight": 1}})));
    let racked = Obj::PodGroup(object(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "racked", "namespace": "ns", "uid": "racked"},
        "spec": {"minMember": 2, "queue": "default",
                 "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    })));
    for u in [
        update(
            Kind::Node,
            Change::Relisted(vec![
                node("n0", false),
                node("n1", false),
                node("n2", false),
            ]),
        ),
        update(Kind::Queue, Change::Relisted(vec![q])),
        update(
            Kind::PodGroup,
            Change::Relisted(vec![group("plain"), racked]),
        ),
        update(
            Kind::Pod,
            Change::Relisted(vec![
                pod_of("p", "plain", json!([])),
                pod_of("r0", "racked", json!([])),
                pod_of("r1", "racked", json!([])),
            ]),
        ),
    ] {
        assert!(s.apply(0, u).is_empty());
    }
    let d = session(&mut s, 1);
    let bound: Vec<&str> = d.binds.iter().map(|b| b.task.as_str()).collect();
    assert_eq!(bound, vec!["ns/p"]);
    let why = d
        .event_for("ns/racked")
        .expect("the gang says why it waits");
    assert!(
        why.message
            .contains("HyperNodes of cluster local are not listed yet"),
        "{}",
        why.message
    );
    // The list names one rack, of n1 and n2: the gang goes there, not beside the plain pod.
    let rack = Obj::HyperNode(object(json!({
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": "rack-a"},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^n[12]$"}}}]}
    })));
    assert!(
        s.apply(2, update(Kind::HyperNode, Change::Relisted(vec![rack])))
            .is_empty()
    );
    let d = session(&mut s, 3);
    let mut nodes: Vec<&str> = d
        .binds
        .iter()
        .filter(|b| b.job == "ns/racked")
        .map(|b| b.node.as_str())
        .collect();
    nodes.sort();
    assert_eq!(nodes.len(), 2, "{:?}", d.binds);
    assert!(nodes.iter().all(|n| *n == "n1" || *n == "n2"), "{nodes:?}");
}

/// A pod naming a Kubernetes PodGroup (`spec.schedulingGroup`) for `scheduler`, on `node`.
fn kube_pod(name: &str, group: &str, scheduler: &str, node: Option<&str>) -> Obj {
    let mut spec = json!({"schedulerName": scheduler,
        "schedulingGroup": {"podGroupName": group},
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    Obj::Pod(object(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": name}, "spec": spec
    })))
}

fn kube_group(name: &str) -> Obj {
    Obj::KubePodGroup(object(json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}
    })))
}

/// A Kubernetes PodGroup names no scheduler: its pods do. One whose pods are kube-scheduler's
/// (its own gang scheduling) is nobody's gang to tephra: no queue counts it, the fleet view
/// does not show it, and no session writes on it, while the room its bound pods hold is still
/// accounted. One that a pod of tephra's names, before or after the group is seen, is a gang
/// of tephra's like a Volcano PodGroup.
#[test]
fn a_kubernetes_podgroup_is_tephras_gang_only_once_a_pod_of_tephras_names_it() {
    let mut s = State::new(vec!["volcano".into()], "default".into());
    s.add_local("local").unwrap();
    let q = Obj::Queue(object(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "default"}, "spec": {"weight": 1}
    })));
    for (kind, obj) in [
        (Kind::Node, node("n0", false)),
        (Kind::Queue, q),
        (Kind::KubePodGroup, kube_group("theirs")),
        (
            Kind::Pod,
            kube_pod("t0", "theirs", "default-scheduler", Some("n0")),
        ),
        (
            Kind::Pod,
            kube_pod("t1", "theirs", "default-scheduler", None),
        ),
    ] {
        assert!(s.apply(0, update(kind, Change::Apply(obj))).is_empty());
    }
    let groups = |s: &mut State, now: i64| {
        let d = session(s, now);
        let q = d.queues.iter().find(|q| q.name == "default").cloned();
        let q = q.expect("the default queue");
        let view = s.view("scheduler");
        let mut jobs: Vec<String> = view.jobs.iter().map(|j| j.name.clone()).collect();
        jobs.sort();
        let counted = q.pending + q.inqueue + q.running + q.unknown + q.completed;
        (counted, jobs, d.binds.len())
    };
    // kube-scheduler's bound pod holds its room and counts in no queue (as any other
    // scheduler's pod); its PodGroup is not a waiting gang of tephra's.
    assert_eq!(
        groups(&mut s, 1),
        (0, vec![], 0),
        "kube-scheduler's gang is not a waiting gang of tephra's"
    );
    assert!(
        s.cache().world().task_id("ns/t0").is_some(),
        "the room kube-scheduler's pod holds is accounted"
    );
    // A pod of tephra's before its group, and a group before its pods.
    for (kind, obj) in [
        (Kind::Pod, kube_pod("a0", "early", "volcano", None)),
        (Kind::KubePodGroup, kube_group("early")),
        (Kind::KubePodGroup, kube_group("late")),
    ] {
        assert!(s.apply(2, update(kind, Change::Apply(obj))).is_empty());
    }
    assert_eq!(
        groups(&mut s, 3).0,
        1,
        "early is tephra's, late nobody's yet"
    );
    for (kind, obj) in [
        (Kind::Pod, kube_pod("a1", "early", "volcano", None)),
        (Kind::Pod, kube_pod("b0", "late", "volcano", None)),
        (Kind::Pod, kube_pod("b1", "late", "volcano", None)),
    ] {
        assert!(s.apply(4, update(kind, Change::Apply(obj))).is_empty());
    }
    let (counted, jobs, binds) = groups(&mut s, 5);
    assert_eq!(counted, 2, "both are tephra's gangs now");
    assert_eq!(jobs, ["early", "late"]);
    // 6 of n0's 8 CPUs are free: one gang of two 2-CPU pods fits, then the other.
    assert!(
        binds >= 2,
        "tephra places its gangs beside kube-scheduler's pod"
    );
    // Deleting a group nobody claimed changes nothing of tephra's.
    assert!(
        s.apply(
            6,
            update(Kind::KubePodGroup, Change::Delete(kube_group("theirs")))
        )
        .is_empty()
    );
    assert_eq!(groups(&mut s, 7).0, 2);
}

/// The device configuration ConfigMap: until listed, no geometries are known (MIG-mode GPUs
/// take nothing); listed absent, there are none (they are shared as any other); listed or
/// changed, its geometries; deleted, none again; a bad one is refused, naming the ConfigMap.
#[test]
fn the_device_config_map_gives_the_mig_geometries_and_its_absence_gives_none() {
    let mut s = State::new(vec!["volcano".into()], "default".into());
    s.add_local("local").unwrap();
    assert!(s.cache().world().mig.is_none());
    assert!(
        s.apply(0, update(Kind::DeviceConfig, Change::Relisted(vec![])))
            .is_empty()
    );
    assert_eq!(s.cache().world().mig.as_deref(), Some(&Default::default()));
    let cm = |text: &str| {
        Obj::DeviceConfig(object(json!({
            "metadata": {"name": "volcano-vgpu-device-config", "namespace": "kube-system"},
            "data": {"device-config.yaml": text}})))
    };
    let text = "nvidia:\n  knownMigGeometries:\n  - models: [A100-PCIE-80GB]\n    allowedGeometries:\n    - {group: group1, geometries: [{name: 1g.10gb, memory: 10240, count: 7}]}\n";
    assert!(
        s.apply(1, update(Kind::DeviceConfig, Change::Apply(cm(text))))
            .is_empty()
    );
    let known = s.cache().world().mig.clone().unwrap();
    assert_eq!(
        known.of("NVIDIA-A100-PCIE-80GB").unwrap()[0].group,
        "group1"
    );
    let errors = s.apply(
        2,
        update(Kind::DeviceConfig, Change::Apply(cm("nvidia: ["))),
    );
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0]
            .to_string()
            .contains("kube-system/volcano-vgpu-device-config"),
        "{}",
        errors[0]
    );
    assert_eq!(
        s.cache().world().mig.as_ref(),
        Some(&known),
        "kept as it was"
    );
    assert!(
        s.apply(3, update(Kind::DeviceConfig, Change::Delete(cm(text))))
            .is_empty()
    );
    assert_eq!(s.cache().world().mig.as_deref(), Some(&Default::default()));
}
