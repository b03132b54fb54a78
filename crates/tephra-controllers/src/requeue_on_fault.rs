//! `RequeueGangOnFault`: the stand-in for the failover chain (cluster taints, the taint manager
//! and graceful eviction), until that chain lands and replaces it.
//!
//! The rule: a fault that takes away a cluster (unreachable, not ready) or nodes fails the pods
//! bound or running there, and every gang that lost a pod is re-queued whole: all its pods are
//! evicted and go back to Pending, and its PodGroup is Inqueue again (see
//! [`crate::podgroup::requeue`]), so that the scheduler places the gang anew.

use std::collections::BTreeSet;

/// The rule's name, as events and reports show it.
pub const RULE: &str = "RequeueGangOnFault";

/// The gangs to re-queue: every job with a pod placed on a lost node, each once, in name order.
/// `pods` gives each bound or running pod's job and node (cluster, node name).
pub fn gangs_to_requeue<'a>(
    pods: impl IntoIterator<Item = (&'a str, &'a (String, String))>,
    lost: impl Fn(&(String, String)) -> bool,
) -> Vec<String> {
    pods.into_iter()
        .filter(|(_, node)| lost(node))
        .map(|(job, _)| job.to_string())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Why each pod of a re-queued gang is evicted, given what the fault took away.
pub fn reason(fault: &str) -> String {
    format!("{fault}; gang re-queued ({RULE})")
}

/// What a report says about the rule.
pub fn note() -> String {
    format!(
        "faults use the stand-in rule {RULE}: gangs that lose a pod to a fault are re-queued whole"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_gang_with_a_pod_on_a_lost_node_is_requeued_once() {
        let a = ("c1".to_string(), "n1".to_string());
        let b = ("c2".to_string(), "n1".to_string());
        let pods = [("ns/x", &a), ("ns/x", &a), ("ns/y", &b), ("ns/w", &a)];
        let lost = |n: &(String, String)| n.0 == "c1";
        assert_eq!(gangs_to_requeue(pods, lost), ["ns/w", "ns/x"]);
        assert_eq!(
            reason("cluster c1 unreachable"),
            "cluster c1 unreachable; gang re-queued (RequeueGangOnFault)"
        );
    }
}
