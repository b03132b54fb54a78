//! Helpers for the environment's own tests: a node with a given CPU, and waiting for a
//! condition.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tephra_envtest::kubelet::NodeSpec;

/// A node with `cpu` cores, 16Gi of memory and room for 110 pods.
pub fn node(name: &str, cpu: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        capacity: BTreeMap::from([
            ("cpu".to_string(), cpu.to_string()),
            ("memory".to_string(), "16Gi".to_string()),
            ("pods".to_string(), "110".to_string()),
        ]),
        ..NodeSpec::default()
    }
}

/// Polls `check` every 100 ms until it gives a value, failing the test after `secs` seconds
/// with `what` it waited for.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
