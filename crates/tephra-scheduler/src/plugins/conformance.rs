//! `conformance`: never evict critical pods: those in `kube-system` or with the
//! `system-cluster-critical` / `system-node-critical` priority classes.

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::plugin::{Plugin, VictimFilter};
use crate::framework::view::View;
use crate::model::Id;

/// The `conformance` plugin.
pub struct Conformance;

/// The plugin reads no arguments.
pub const ARGS: ArgSpec = ArgSpec::NONE;

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    ArgReader::new(&cfg.arguments, &ARGS).finish()?;
    Ok(Box::new(Conformance))
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

    fn victim_filter(&self) -> Option<&dyn VictimFilter> {
        Some(self)
    }
}

impl VictimFilter for Conformance {
    fn allows(&self, view: &View, victim: Id) -> bool {
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
