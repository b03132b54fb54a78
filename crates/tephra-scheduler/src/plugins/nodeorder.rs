//! `nodeorder`: kube-scheduler's node scores with Volcano's weight arguments:
//! `leastrequested.weight` (default 1), `mostrequested.weight` (0), `balancedresource.weight`
//! (1) and `tainttoleration.weight` (1). Each score is 0–100 over cpu and memory.

use crate::config::{ArgError, ArgReader, PluginConfig};
use crate::framework::plugin::{NodeScorer, Plugin};
use crate::framework::view::View;
use crate::model::{Id, TaintEffect, Task, tolerated};
use crate::resources::{CPU, MEMORY};

/// The `nodeorder` plugin.
pub struct NodeOrder {
    least: f64,
    most: f64,
    balanced: f64,
    taint: f64,
}

const KEYS: &[&str] = &[
    "leastrequested.weight",
    "mostrequested.weight",
    "balancedresource.weight",
    "tainttoleration.weight",
];

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgError> {
    let r = ArgReader::new(&cfg.arguments, KEYS, &[])?;
    Ok(Box::new(NodeOrder {
        least: r.f64_or(KEYS[0], 1.0)?,
        most: r.f64_or(KEYS[1], 0.0)?,
        balanced: r.f64_or(KEYS[2], 1.0)?,
        taint: r.f64_or(KEYS[3], 1.0)?,
    }))
}

/// Fraction of `slot` in use on `node` once `task` is placed there.
fn used_fraction(view: &View, task: &Task, node: Id, slot: usize) -> Option<f64> {
    let n = view.node(node)?;
    let alloc = n.allocatable().get(slot);
    if alloc <= 0 {
        return None;
    }
    let used =
        alloc - view.state.nodes[node as usize].idle.get(slot) + task.spec.shape.request.get(slot);
    Some((used as f64 / alloc as f64).clamp(0.0, 1.0))
}

impl Plugin for NodeOrder {
    fn name(&self) -> &'static str {
        "nodeorder"
    }

    fn node_scorer(&self) -> Option<&dyn NodeScorer> {
        Some(self)
    }
}

impl NodeScorer for NodeOrder {
    fn score(&self, view: &View, task: &Task, node: Id) -> f64 {
        let cpu = used_fraction(view, task, node, CPU).unwrap_or(1.0);
        let mem = used_fraction(view, task, node, MEMORY).unwrap_or(1.0);
        let mut score = 0.0;
        if self.least > 0.0 {
            score += self.least * 100.0 * (2.0 - cpu - mem) / 2.0;
        }
        if self.most > 0.0 {
            score += self.most * 100.0 * (cpu + mem) / 2.0;
        }
        if self.balanced > 0.0 {
            // kube-scheduler: one minus the standard deviation of the fractions.
            score += self.balanced * 100.0 * (1.0 - (cpu - mem).abs() / 2.0);
        }
        if self.taint > 0.0
            && let Some(n) = view.node(node)
        {
            let untolerated = n
                .spec
                .taints
                .iter()
                .filter(|t| t.effect == TaintEffect::PreferNoSchedule)
                .filter(|t| !tolerated(&task.spec.shape.tolerations, t))
                .count();
            score += self.taint * (100.0 - 25.0 * untolerated as f64).max(0.0);
        }
        score
    }
}
