//! Fairness under contention, end to end through the simulator: reclaim and preempt free whole
//! nodes for big tasks, never take a queue below its share, admission never holds a queue
//! forever, and impossible jobs cannot starve possible ones.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::assert_clean;
use tephra_sim::{Record, Report, Scenario};

fn run(name: &str) -> (Report, Vec<Record>) {
    let path = common::repo_root()
        .join("tests/scenarios/contention")
        .join(name);
    let s = Scenario::load(&path).unwrap();
    let (report, events) = common::simulate(&s, None);
    assert_clean(&report);
    (report, events)
}

/// Evicted pods per job.
fn evictions(events: &[Record]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind == "evict") {
        *out.entry(e.job.clone().unwrap()).or_default() += 1;
    }
    out
}

fn first_bind(events: &[Record], job: &str) -> Option<f64> {
    events
        .iter()
        .find(|e| e.kind == "bind" && e.job.as_deref() == Some(job))
        .map(|e| e.t)
}

#[test]
fn reclaim_frees_whole_nodes_of_small_tasks_for_a_big_gang() {
    let (_, events) = run("reclaim-whole-nodes.yaml");
    let bound = first_bind(&events, "default/big").expect("b's gang never ran");
    assert!(
        bound <= 600.0 + 120.0,
        "b's gang waited until t={bound}s (submitted at 600s)"
    );
    let evicted: usize = evictions(&events).values().sum();
    assert_eq!(
        evicted,
        32,
        "exactly 8 nodes' worth of a's 2-GPU pods: {:?}",
        evictions(&events)
    );
}

#[test]
fn reclaim_takes_from_the_queue_furthest_above_its_share_never_below_a_share() {
    let (_, events) = run("reclaim-from-the-most-overused.yaml");
    let victims = evictions(&events);
    assert!(
        !victims.contains_key("default/a1"),
        "qa is at its deserved share: {victims:?}"
    );
    assert_eq!(victims.values().sum::<usize>(), 1, "{victims:?}");
    assert!(first_bind(&events, "default/b1").is_some(), "b1 never ran");
}

#[test]
fn a_gang_past_its_sla_holds_its_room_until_it_runs() {
    let (_, events) = run("sla-big-gang.yaml");
    // Submitted at 20m with a one-hour SLA: it must start within two hours of 80m.
    let started = first_bind(&events, "default/llm").expect("the late gang never ran");
    let deadline = 20.0 * 60.0 + 3600.0;
    assert!(
        started >= deadline,
        "started at {started}s, before its SLA ran out: not the SLA's draining"
    );
    assert!(
        started <= deadline + 2.0 * 3600.0,
        "started at {started}s, deadline {deadline}s"
    );
}
