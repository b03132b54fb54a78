//! Failover in the simulator: cluster faults go through the same controllers as on a fleet
//! (probes and thresholds, taints, the taint manager, graceful eviction), and `report.json`'s
//! `failover` section measures each fault.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::assert_clean;

use tephra_sim::{Record, Report, Scenario};

/// Two members of two 8-GPU nodes each, and one gang of two 8-GPU pods running for 2 hours
/// from time 0, with `policy` (YAML, may be empty) and `faults` (a YAML list).
fn scenario(policy: &str, faults: &str) -> Scenario {
    gang(
        r#"{name: worker, replicas: 2, resources: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "8"}, duration: 2h}"#,
        policy,
        faults,
    )
}

/// The fleet of [`scenario`] and a gang of minimum 2 submitted at time 0 whose `tasks` are
/// given (YAML flow mappings, one per line).
fn gang(tasks: &str, policy: &str, faults: &str) -> Scenario {
    let tasks: String = tasks
        .lines()
        .map(|t| format!("        - {}\n", t.trim()))
        .collect();
    let text = format!(
        r#"
fleet:
  clusters:
    - name: east
      nodePools: [{{name: gpu, count: 2, capacity: {{cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}}}]
    - name: west
      nodePools: [{{name: gpu, count: 2, capacity: {{cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}}}]
queues: [{{name: ml, weight: 1}}]
workload:
  jobs:
    - name: train
      queue: ml
      submitAt: 0s
      minAvailable: 2
      tasks:
{tasks}{policy}
faults: {faults}
run: {{seed: 1}}
"#
    );
    Scenario::parse(&text, "failover.yaml", &common::repo_root()).unwrap()
}

fn run(s: &Scenario) -> (Report, Vec<Record>) {
    let (report, events) = common::simulate(s, None);
    assert_clean(&report);
    (report, events)
}

/// Where the gang first runs, with no fault: the member the faults below hit.
fn home(policy: &str) -> String {
    let (_, events) = run(&scenario(policy, "[]"));
    events
        .iter()
        .find(|e| e.kind == "bind")
        .and_then(|e| e.cluster.clone())
        .unwrap()
}

fn first(events: &[Record], kind: &str, what: &str) -> Option<f64> {
    events
        .iter()
        .find(|e| e.kind == kind && e.reason.as_deref().is_some_and(|r| r.contains(what)))
        .map(|e| e.t)
}

fn bind_clusters(events: &[Record]) -> Vec<(f64, String)> {
    events
        .iter()
        .filter(|e| e.kind == "bind")
        .map(|e| (e.t, e.cluster.clone().unwrap()))
        .collect()
}

/// Both pods of the gang were bound again at 940 s (the NoExecute taint), away from `home`.
fn assert_moved_whole_at_940(events: &[Record], home: &str) {
    let moved: Vec<(f64, String)> = bind_clusters(events)
        .into_iter()
        .filter(|(t, _)| *t > 0.0)
        .collect();
    assert_eq!(moved.len(), 2, "the whole gang is placed again: {moved:?}");
    assert!(moved.iter().all(|(t, c)| *t == 940.0 && *c != home));
}

#[test]
fn a_cut_off_member_loses_its_gang_to_another_after_the_grace_and_gets_it_back_clean() {
    let home = home("");
    let (r, events) = run(&scenario(
        "",
        &format!("[{{at: 10m, cluster: {home}, kind: unreachable, for: 1h}}]"),
    ));
    // Probes every 10 s, 30 s failure threshold: Unknown at 640 s, NoExecute 300 s later.
    assert_eq!(first(&events, "ready", "Unknown"), Some(640.0));
    assert_eq!(first(&events, "taint", "NoExecute"), Some(940.0));
    assert_eq!(first(&events, "evict", "TaintManager"), Some(940.0));
    assert_moved_whole_at_940(&events, &home);
    let f = &r.failover.faults[0];
    assert_eq!(f.detection_delay_s, Some(40.0));
    assert_eq!(f.jobs_moved, 1);
    // Bound at 940 s, running 5 s later (the pod start delay).
    assert_eq!(f.all_running_again_s, Some(345.0));
    // The old copy ran on unheard while its member was cut off, and is deleted once it
    // answers (at 70 m), over the 30 s grace, while the new copy runs.
    let deleted = first(&events, "delete", "graceful eviction").unwrap();
    assert_eq!(deleted, 4200.0 + 30.0);
    assert_eq!(f.cut_off_overlap_s, 4200.0 - 945.0);
    assert_eq!(f.duplicate_gang_s, 30.0);
    assert_eq!(f.duplicate_beyond_grace_s, 0.0);
    assert_eq!((r.jobs.completed, r.failover.lost_jobs), (1, 0));
}

#[test]
fn a_member_back_before_the_no_execute_grace_keeps_its_gang() {
    let home = home("");
    let (r, events) = run(&scenario(
        "",
        &format!("[{{at: 10m, cluster: {home}, kind: unreachable, for: 3m}}]"),
    ));
    assert_eq!(first(&events, "taint", "NoSchedule"), Some(640.0));
    assert_eq!(first(&events, "taint", "NoExecute"), None);
    assert_eq!(bind_clusters(&events).len(), 2, "bound once, never moved");
    assert_eq!(r.pods.evicted, 0);
    assert_eq!(r.failover.faults[0].jobs_moved, 0);
    // What the member did while cut off is heard when it answers: the gang still finishes.
    assert_eq!(r.jobs.completed, 1);
    assert_eq!(first(&events, "ready", "True"), Some(780.0 + 30.0 + 10.0));
}

#[test]
fn a_gang_that_tolerates_the_taint_stays_and_one_with_toleration_seconds_leaves_after_them() {
    let tolerate = |secs: &str| {
        format!(
            "      policy:\n        clusterTolerations:\n          - {{key: cluster.tephra.io/unreachable, operator: Exists, effect: NoExecute{secs}}}"
        )
    };
    let stays = tolerate("");
    let home = home(&stays);
    let fault = format!("[{{at: 10m, cluster: {home}, kind: unreachable, for: 1h}}]");
    let (r, events) = run(&scenario(&stays, &fault));
    assert_eq!(first(&events, "taint", "NoExecute"), Some(940.0));
    assert_eq!(first(&events, "evict", "TaintManager"), None);
    assert_eq!(r.failover.faults[0].jobs_moved, 0);

    let leaves = tolerate(", tolerationSeconds: 120");
    let (r, events) = run(&scenario(&leaves, &fault));
    assert_eq!(first(&events, "evict", "TaintManager"), Some(940.0 + 120.0));
    assert_eq!(r.failover.faults[0].jobs_moved, 1);
}

#[test]
fn a_not_ready_member_keeps_reporting_and_its_old_copy_goes_once_the_new_one_runs() {
    let home = home("");
    let (r, events) = run(&scenario(
        "",
        &format!("[{{at: 10m, cluster: {home}, kind: notready, for: 1h}}]"),
    ));
    assert_eq!(first(&events, "ready", "False"), Some(640.0));
    assert_eq!(first(&events, "taint", "not-ready:NoExecute"), Some(940.0));
    // The member answers: its old copy is deleted as soon as the new one runs whole (945 s),
    // and terminates over the grace period.
    assert_eq!(
        first(&events, "delete", "graceful eviction"),
        Some(945.0 + 30.0)
    );
    let f = &r.failover.faults[0];
    assert_eq!(
        (f.duplicate_gang_s, f.duplicate_beyond_grace_s),
        (30.0, 0.0)
    );
    assert_eq!(f.cut_off_overlap_s, 0.0);
}

#[test]
fn a_gang_moves_whole_and_starts_over_its_finished_pods_included() {
    // A gang of a short `prep` pod and a long `worker`, both in the member that goes away
    // after `prep` has finished.
    let tasks = r#"{name: prep, replicas: 1, resources: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "8"}, duration: 5m}
        {name: worker, replicas: 1, resources: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "8"}, duration: 2h}"#;
    let (_, calm) = run(&gang(tasks, "", "[]"));
    let home = calm
        .iter()
        .find(|e| e.kind == "bind")
        .and_then(|e| e.cluster.clone())
        .unwrap();
    let (r, events) = run(&gang(
        tasks,
        "",
        &format!("[{{at: 10m, cluster: {home}, kind: unreachable, for: 1h}}]"),
    ));
    let finished = |pod: &str| {
        events
            .iter()
            .filter(|e| e.kind == "finish" && e.pod.as_deref() == Some(pod))
            .count()
    };
    assert_eq!(
        finished("default/train-prep-0"),
        2,
        "prep runs again in the new copy"
    );
    assert_moved_whole_at_940(&events, &home);
    // Only the worker held a node when the gang moved: one pod evicted.
    assert_eq!(r.pods.evicted, 1);
    assert_eq!((r.jobs.completed, r.failover.lost_jobs), (1, 0));
}
