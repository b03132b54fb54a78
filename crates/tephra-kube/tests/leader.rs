//! Two scheduler replicas on one cluster: only the Lease holder binds; when it dies the other
//! takes over within the lease duration; no pod is ever bound twice (a second Binding gets a
//! 409 from the API server, which both replicas would count).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use tephra_kube::leader::LeaderOptions;

fn replica(identity: &str) -> tephra_kube::Options {
    let mut lease = LeaderOptions::new("default", "tephra-scheduler", identity);
    lease.lease_duration = Duration::from_secs(2);
    lease.renew_deadline = Duration::from_millis(1500);
    lease.retry_period = Duration::from_millis(200);
    tephra_kube::Options {
        leader: Some(lease),
        identity: identity.into(),
        ..scheduler_options()
    }
}

fn conflicts(m: &tephra_kube::metrics::Metrics) -> u64 {
    m.api_errors
        .with_label_values(&["local", "bind", "409"])
        .get()
}

#[tokio::test]
async fn only_the_leader_binds_and_a_standby_takes_over_when_it_dies() {
    logs();
    let dev = cluster(vec![node("n0", "16", 8), node("n1", "16", 8)]).await;
    let c = client(&dev).await;
    let a = tephra_kube::start(c.clone(), replica("a")).await.unwrap();
    let b = tephra_kube::start(c.clone(), replica("b")).await.unwrap();
    let (first, second) = eventually(10, "one leader", || async {
        match (a.leadership.is_leader(), b.leadership.is_leader()) {
            (true, false) => Some(("a", "b")),
            (false, true) => Some(("b", "a")),
            _ => None,
        }
    })
    .await;
    gang(&c, "default", "one", "default", 4, 4, 2).await;
    all_bound(&c, "default", "one-", 4, 20).await;
    let (leader, standby) = if first == "a" { (a, b) } else { (b, a) };
    assert!(
        !standby.leadership.is_leader(),
        "{second} must not lead while {first} does"
    );
    let standby_writes: u64 = ["bind"]
        .iter()
        .map(|v| {
            standby
                .metrics
                .write_latency
                .with_label_values(&[v])
                .get_sample_count()
        })
        .sum();
    assert_eq!(standby_writes, 0, "the standby bound pods");
    assert_eq!(conflicts(&leader.metrics), 0);
    leader.kill();
    let killed_at = tokio::time::Instant::now();
    gang(&c, "default", "two", "default", 4, 4, 2).await;
    all_bound(&c, "default", "two-", 4, 20).await;
    let took = killed_at.elapsed();
    assert!(standby.leadership.is_leader());
    assert_eq!(conflicts(&standby.metrics), 0, "a pod was bound twice");
    // The lease is 2 s; the standby notices within a retry period after it expires.
    assert!(took < Duration::from_secs(10), "takeover took {took:?}");
    standby.stop().await;
}
