//! The history follows views: queues sampled once a minute over six hours, a job's changes,
//! and failover events from clusters' health and taints and from gangs evicted and moved.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use super::*;
use crate::view::{ClusterView, JobView, QueueView};

fn queue(cpu: &str) -> QueueView {
    QueueView {
        name: "q".into(),
        allocated: BTreeMap::from([("cpu".into(), cpu.into()), ("memory".into(), "1Gi".into())]),
        running: 1,
        ..QueueView::default()
    }
}

fn job(phase: &str, reason: Option<&str>, clusters: &[&str], evicting: &[&str]) -> JobView {
    JobView {
        namespace: "ns".into(),
        name: "j".into(),
        phase: phase.into(),
        reason: reason.map(String::from),
        clusters: clusters.iter().map(|c| c.to_string()).collect(),
        evicting: evicting.iter().map(|c| c.to_string()).collect(),
        ..JobView::default()
    }
}

fn cluster(name: &str, ready: bool, taints: &[&str]) -> ClusterView {
    ClusterView {
        name: name.into(),
        ready,
        taints: taints.iter().map(|t| t.to_string()).collect(),
        ..ClusterView::default()
    }
}

fn fleet(queues: Vec<QueueView>, jobs: Vec<JobView>, clusters: Vec<ClusterView>) -> FleetView {
    FleetView {
        queues,
        jobs,
        clusters,
        ..FleetView::default()
    }
}

#[test]
fn queues_are_sampled_once_a_minute_in_numbers_for_six_hours() {
    let mut h = History::new();
    h.observe(&fleet(vec![queue("2500m")], vec![], vec![]), 0);
    h.observe(&fleet(vec![queue("3")], vec![], vec![]), 30);
    h.observe(&fleet(vec![queue("4")], vec![], vec![]), 60);
    let v = h.view();
    let samples = &v.queues["q"];
    assert_eq!(samples.iter().map(|s| s.at).collect::<Vec<_>>(), [0, 60]);
    assert_eq!(samples[0].allocated["cpu"], 2.5);
    assert_eq!(samples[0].allocated["memory"], 1_073_741_824.0);
    assert_eq!(samples[1].allocated["cpu"], 4.0);
    // Six hours on, the first samples are gone.
    h.observe(&fleet(vec![queue("1")], vec![], vec![]), KEEP_S + 61);
    let at: Vec<i64> = h.view().queues["q"].iter().map(|s| s.at).collect();
    assert_eq!(at, [KEEP_S + 61]);
}

#[test]
fn a_jobs_changes_of_phase_and_reason_are_kept_once_each() {
    let mut h = History::new();
    let steps = [
        job("Pending", Some("NotInqueueable"), &[], &[]),
        job("Pending", Some("NotInqueueable"), &[], &[]),
        job("Inqueue", Some("NotEnoughResources"), &[], &[]),
        job("Running", None, &["east"], &[]),
    ];
    for (t, j) in steps.into_iter().enumerate() {
        h.observe(&fleet(vec![], vec![j], vec![]), t as i64 * 10);
    }
    let changes = h.job("ns/j").changes;
    let seen: Vec<(i64, &str, Option<&str>)> = changes
        .iter()
        .map(|c| (c.at, c.phase.as_str(), c.reason.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            (0, "Pending", Some("NotInqueueable")),
            (20, "Inqueue", Some("NotEnoughResources")),
            (30, "Running", None)
        ]
    );
    // Bounded: only the last JOB_CHANGES.
    for t in 0..(JOB_CHANGES as i64 * 2) {
        let phase = if t % 2 == 0 { "Pending" } else { "Inqueue" };
        h.observe(
            &fleet(vec![], vec![job(phase, None, &[], &[])], vec![]),
            100 + t,
        );
    }
    assert_eq!(h.job("ns/j").changes.len(), JOB_CHANGES);
    assert!(h.job("ns/other").changes.is_empty());
}

#[test]
fn failover_shows_the_outage_the_taint_the_eviction_and_the_move() {
    let mut h = History::new();
    let clusters = |east_ready: bool, taints: &[&str]| {
        vec![
            cluster("east", east_ready, taints),
            cluster("west", true, &[]),
        ]
    };
    let steps = [
        (clusters(true, &[]), job("Running", None, &["east"], &[])),
        (clusters(false, &[]), job("Running", None, &["east"], &[])),
        (
            clusters(false, &["cluster.karmada.io/not-ready=:NoExecute"]),
            job("Running", None, &["east"], &["east"]),
        ),
        (
            clusters(false, &["cluster.karmada.io/not-ready=:NoExecute"]),
            job("Running", None, &["east", "west"], &["east"]),
        ),
        (clusters(true, &[]), job("Running", None, &["west"], &[])),
    ];
    for (t, (c, j)) in steps.into_iter().enumerate() {
        h.observe(&fleet(vec![], vec![j], c), 100 * t as i64);
    }
    let mut got: Vec<(i64, String, String)> = h
        .view()
        .failover
        .iter()
        .map(|e| (e.at, e.kind.to_string(), e.cluster.clone()))
        .collect();
    let mut want: Vec<(i64, String, String)> = [
        (100, "ClusterNotReady", "east"),
        (200, "Tainted", "east"),
        (200, "EvictionStarted", "east"),
        (300, "Moved", "west"),
        (400, "ClusterReady", "east"),
        (400, "Untainted", "east"),
        (400, "EvictionEnded", "east"),
    ]
    .into_iter()
    .map(|(a, k, c)| (a, k.to_string(), c.to_string()))
    .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    let moved = h
        .view()
        .failover
        .into_iter()
        .find(|e| e.kind == "Moved")
        .unwrap();
    assert_eq!(moved.detail, "ns/j moved from east to west");
    assert_eq!(moved.job.as_deref(), Some("ns/j"));
}

#[test]
fn a_job_is_kept_under_the_name_the_user_gave_and_where_it_ran_once_it_is_gone() {
    let mut h = History::new();
    // The PodGroup of Volcano Job `train` is named after the Job and its uid.
    let mut j = job("Running", None, &["east"], &[]);
    j.name = "train-1f2e3d4c".into();
    j.job = Some("train".into());
    j.nodes = vec!["east/n1".into()];
    j.running = 2;
    j.pods = 2;
    h.observe(&fleet(vec![], vec![j.clone()], vec![]), 100);
    assert_eq!(
        h.job("ns/train").changes.len(),
        1,
        "keyed by the Job's name"
    );
    assert!(h.job("ns/train-1f2e3d4c").changes.is_empty());
    assert!(h.view().gone.is_empty());
    // The Job finishes: its PodGroup goes, and the job is remembered with where it ran.
    h.observe(&fleet(vec![], vec![], vec![]), 160);
    let gone = h.view().gone;
    assert_eq!(gone.len(), 1);
    let g = &gone[0];
    assert_eq!(
        (g.key.as_str(), g.podgroup.as_str()),
        ("ns/train", "train-1f2e3d4c")
    );
    assert_eq!((g.gone_at, g.last_phase.as_str()), (160, "Running"));
    assert_eq!(
        (g.clusters.clone(), g.nodes.clone()),
        (vec!["east".to_string()], vec!["east/n1".to_string()])
    );
    let last = h.job("ns/train").changes.last().cloned().unwrap();
    assert_eq!(last.phase, "Gone");
    assert!(last.message.unwrap().contains("last ran in east"));
    // Seen again under the same name (made anew): no longer gone.
    h.observe(&fleet(vec![], vec![j], vec![]), 200);
    assert!(h.view().gone.is_empty());
    // Gone jobs are kept for six hours.
    h.observe(&fleet(vec![], vec![], vec![]), 260);
    assert_eq!(h.view().gone.len(), 1);
    h.observe(&fleet(vec![], vec![], vec![]), 260 + KEEP_S + 1);
    assert!(h.view().gone.is_empty());
}

#[test]
fn the_history_says_when_it_starts() {
    let mut h = History::new();
    assert_eq!(h.view().since, None);
    h.observe(&fleet(vec![queue("1")], vec![], vec![]), 1_000);
    h.observe(&fleet(vec![queue("1")], vec![], vec![]), 1_090);
    assert_eq!(
        h.view().since,
        Some(1_000),
        "the replica's first view, not a fixed window"
    );
}
