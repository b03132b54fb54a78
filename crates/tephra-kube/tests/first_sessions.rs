//! A scheduler that starts on a backlog binds its first gangs from a small first session and
//! works the rest off in growing sessions run one after the other, without waiting for its
//! period; sessions run before storage, DRA and PodDisruptionBudget objects are listed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;

/// How many sessions the scheduler has run, from its own `/metrics`.
async fn sessions(sched: &tephra_kube::Running) -> u64 {
    metric(sched, "volcano_e2e_scheduling_latency_milliseconds_count").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_is_bound_in_growing_sessions_that_do_not_wait_for_the_period() {
    let nodes = (0..8).map(|i| node(&format!("n{i}"), "64", 0)).collect();
    let dev = cluster(nodes).await;
    let c = client(&dev).await;
    // 40 gangs of 8: more than the first session's budget, less than the second's.
    for g in 0..40 {
        gang(&c, "default", &format!("g{g}"), "default", 8, 8, 0).await;
    }
    let total = 40 * 8;
    assert!(tephra_kube::run::FIRST_BUDGET < total as u64);
    let sched = tephra_kube::start(
        c.clone(),
        tephra_kube::Options {
            // Only the first session and those it chains run within the test.
            period: Duration::from_secs(3600),
            ..scheduler_options()
        },
    )
    .await
    .unwrap();
    all_bound(&c, "default", "g", total, 60).await;
    // The first session stopped at its budget, and the second, run at once, placed the rest.
    assert_eq!(sessions(&sched).await, 2);
    sched.stop().await;
}
