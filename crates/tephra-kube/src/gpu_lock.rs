//! The node lock for shared GPUs (`deviceshare.NodeLockEnable`), as Volcano's scheduler and
//! the volcano-vgpu device plugin keep it: before a vGPU pod is bound, the node's
//! [`NODE_LOCK`] annotation is set to the time (RFC 3339); the device plugin removes it once it
//! has allocated that pod's GPUs. A lock younger than [`LOCK_EXPIRY`] refuses the bind; an
//! older one is taken over. The write carries the node's `resourceVersion`, so that of two
//! schedulers taking one lock at once only one succeeds (Volcano's Update retries on a
//! conflict without looking at the lock again; here every try looks again).

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tephra_scheduler::model::vgpu::{LOCK_EXPIRY, NODE_LOCK};

/// The reason of the error a standing lock refuses a bind with (not retried).
pub const LOCKED: &str = "NodeLocked";

/// How many times the lock is looked at again when the node changed under the write.
const TRIES: usize = 5;

fn locked(node: &str, since: &str) -> kube::Error {
    kube::Error::Api(
        kube::core::Status::failure(
            &format!(
                "node {node} is locked for shared GPUs since {since} ({NODE_LOCK}): the device \
                 plugin has not allocated the vGPU pod bound there last"
            ),
            LOCKED,
        )
        .with_code(409)
        .boxed(),
    )
}

/// Whether a lock taken at `at` (RFC 3339) still stands at `now`. A time that does not parse
/// counts as long ago (as the index reads it).
pub fn stands(at: &str, now: Timestamp) -> bool {
    at.parse::<Timestamp>()
        .is_ok_and(|t| now.as_second().saturating_sub(t.as_second()) < LOCK_EXPIRY)
}

/// Takes the lock of `node`, or says why not.
pub async fn take(client: kube::Client, node: &str) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client);
    let mut last = None;
    for _ in 0..TRIES {
        let n = nodes.get(node).await?;
        let now = Timestamp::now();
        if let Some(at) = n
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(NODE_LOCK))
            .filter(|at| stands(at, now))
        {
            return Err(locked(node, at));
        }
        // Whole seconds, as Go's RFC 3339 writes them.
        let at = Timestamp::from_second(now.as_second()).unwrap_or(now);
        let patch = json!({"metadata": {
            "resourceVersion": n.metadata.resource_version,
            "annotations": {NODE_LOCK: at.to_string()},
        }});
        match nodes
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            // The node changed since it was read: look at its lock again.
            Err(e) if crate::gone::is_conflict(&e) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| locked(node, "unknown")))
}

/// Releases the lock of `node` (a bind that took it failed: no pod will be allocated there).
pub async fn release(client: kube::Client, node: &str) {
    let nodes: Api<Node> = Api::all(client);
    let patch = json!({"metadata": {"annotations": {NODE_LOCK: null}}});
    if let Err(e) = nodes
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        tracing::warn!(node, error = %e, "node lock for shared GPUs not released; it expires in five minutes");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_stands_for_five_minutes_and_one_that_does_not_parse_does_not() {
        let now: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap_or_default();
        assert!(stands("2026-11-30T11:55:01Z", now));
        // Volcano writes the local offset.
        assert!(stands("2026-11-30T19:59:30+08:00", now));
        assert!(!stands("2026-11-30T11:55:00Z", now));
        assert!(!stands("yesterday", now));
    }
}
