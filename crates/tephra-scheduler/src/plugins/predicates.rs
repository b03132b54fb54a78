//! `predicates`: whether a pod can run on a node: node Ready and not cordoned, nodeSelector and
//! required node affinity, NoSchedule/NoExecute taints against tolerations, pod slots, and
//! resource fit against what the node will have free (idle plus releasing, less pipelined).

use crate::config::{ArgError, ArgReader, PluginConfig};
use crate::framework::fit::Unfit;
use crate::framework::plugin::{Plugin, Predicate};
use crate::framework::view::View;
use crate::model::{Id, TaintEffect, Task, affinity_matches, selector_matches, tolerated};
use crate::resources::PODS;

/// The `predicates` plugin.
pub struct Predicates;

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgError> {
    ArgReader::new(&cfg.arguments, &[], &[])?;
    Ok(Box::new(Predicates))
}

impl Plugin for Predicates {
    fn name(&self) -> &'static str {
        "predicates"
    }

    fn predicate(&self) -> Option<&dyn Predicate> {
        Some(self)
    }
}

impl Predicate for Predicates {
    #[inline]
    fn check(&self, view: &View, task: &Task, node: Id) -> Result<(), Unfit> {
        let Some(n) = view.node(node) else {
            return Err(Unfit::NotReady);
        };
        if !n.spec.ready {
            return Err(Unfit::NotReady);
        }
        if n.spec.unschedulable {
            return Err(Unfit::Unschedulable);
        }
        let shape = &task.spec.shape;
        if !selector_matches(&shape.node_selector, &n.spec.labels)
            || !affinity_matches(&shape.affinity, &n.spec.labels)
        {
            return Err(Unfit::Selector);
        }
        for t in &n.spec.taints {
            if t.effect != TaintEffect::PreferNoSchedule && !tolerated(&shape.tolerations, t) {
                return Err(Unfit::Taint(format!("{}: {}", t.key, t.value)));
            }
        }
        let free = view.state.nodes[node as usize].future_idle();
        match shape.request.fits_in(&free) {
            Ok(()) => Ok(()),
            Err(PODS) => Err(Unfit::TooManyPods),
            Err(slot) => Err(Unfit::Insufficient(slot)),
        }
    }
}
