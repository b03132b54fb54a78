//! `conformance`: never evict critical pods: those in `kube-system` or with the
//! `system-cluster-critical` / `system-node-critical` priority classes.

use super::{ArgError, ArgReader};
use crate::config::Args;
use crate::framework::{Plugin, View};
use crate::model::Id;

pub struct Conformance;

impl Conformance {
    pub fn new(args: &Args) -> Result<Self, ArgError> {
        ArgReader::new(args, &[], &[])?;
        Ok(Self)
    }
}

/// Whether a pod is protected from eviction.
pub fn critical(namespace: &str, priority_class: Option<&str>) -> bool {
    namespace == "kube-system"
        || matches!(
            priority_class,
            Some("system-cluster-critical" | "system-node-critical")
        )
}

impl Plugin for Conformance {
    fn name(&self) -> &'static str {
        "conformance"
    }

    fn has_predicate(&self) -> bool {
        false
    }

    fn has_node_score(&self) -> bool {
        false
    }

    fn victim_allowed(&self, view: &View, victim: Id) -> bool {
        view.task(victim).is_some_and(|t| {
            let shape = &t.spec.shape;
            !critical(&shape.namespace, shape.priority_class.as_deref())
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn system_pods_are_protected() {
        assert!(super::critical("kube-system", None));
        assert!(super::critical("ml", Some("system-node-critical")));
        assert!(!super::critical("ml", Some("high")));
    }
}
