//! `nodegroup`: queues to node groups, as Volcano's `nodegroup` plugin does it. A node's group
//! is its `volcano.sh/nodegroup-name` label; a queue's `spec.affinity` names the groups its pods
//! must use (`nodeGroupAffinity.required...`), should use (`preferred...`), and must or should
//! avoid (`nodeGroupAntiAffinity`).
//!
//! A node passes when its group is required or preferred by the queue, unless required
//! anti-affinity names it; preferred anti-affinity names a group the queue may still use (so
//! naming a group only there does not forbid it), as in Volcano. In strict mode (`strict`,
//! default true, as Volcano) a node without the label is never used, and a labelled node is used
//! only by queues that name node groups; with `strict: false` a queue without node-group
//! affinity may use unlabelled nodes. Scores: +100 for a required group, +50 for a preferred one
//! (or, with `enablePreferredOrder`, 50 scaled by its place in the list), −1 for a group the
//! queue prefers to avoid. With `enableHierarchy`, a queue that names no groups inherits those
//! of its nearest ancestor that does.
//!
//! Volcano's `volcano.sh/nodegroup-resource-limits` queue annotation is not read.

use std::collections::BTreeMap;

use tephra_api::well_known::NODE_GROUP_NAME;

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::fit::Unfit;
use crate::framework::plugin::{NodeScorer, Plugin, Predicate, SessionEvents};
use crate::framework::queues::{ancestry, queue_parents};
use crate::framework::view::View;
use crate::model::{Id, NodeGroups, Task};

/// The `nodegroup` plugin.
pub struct NodeGroup {
    strict: bool,
    preferred_order: bool,
    hierarchy: bool,
    /// Each queue's node groups in force (its own or, with hierarchy, inherited).
    groups: BTreeMap<String, NodeGroups>,
}

/// What the plugin reads (Volcano's keys).
pub const ARGS: ArgSpec = ArgSpec {
    keys: &["strict", "enablePreferredOrder"],
    prefixes: &[],
    inert: &[],
};

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    let r = ArgReader::new(&cfg.arguments, &ARGS);
    let strict = r.bool_or("strict", true);
    let preferred_order = r.bool_or("enablePreferredOrder", false);
    r.finish()?;
    Ok(Box::new(NodeGroup {
        strict,
        preferred_order,
        hierarchy: cfg.enables.hierarchy == Some(true),
        groups: BTreeMap::new(),
    }))
}

const NO_LABEL: Unfit = Unfit::Plugin("node group label not found", false);
const NOT_SPECIFIED: Unfit = Unfit::Plugin("node group affinity not specified", false);
const NOT_SATISFIED: Unfit = Unfit::Plugin("node does not satisfy the node group affinity", false);

impl Plugin for NodeGroup {
    fn name(&self) -> &'static str {
        "nodegroup"
    }

    fn predicate(&self) -> Option<&dyn Predicate> {
        Some(self)
    }

    fn node_scorer(&self) -> Option<&dyn NodeScorer> {
        Some(self)
    }

    fn events(&mut self) -> Option<&mut dyn SessionEvents> {
        Some(self)
    }
}

impl SessionEvents for NodeGroup {
    fn opened(&mut self, view: &View) {
        let own: BTreeMap<String, NodeGroups> = view
            .snap
            .queues
            .iter()
            .filter_map(|(name, q)| q.node_groups.clone().map(|g| (name.clone(), g)))
            .collect();
        self.groups = if self.hierarchy {
            let parents = queue_parents(view);
            view.snap
                .queues
                .keys()
                .filter_map(|name| {
                    ancestry(|q| parents.get(q).cloned().flatten(), name)
                        .iter()
                        .find_map(|a| own.get(a))
                        .map(|g| (name.clone(), g.clone()))
                })
                .collect()
        } else {
            own
        };
    }
}

impl NodeGroup {
    fn queue_groups<'a>(&'a self, view: &View, task: &Task) -> Option<&'a NodeGroups> {
        let queue = view.job(task.job)?.queue();
        self.groups.get(queue).filter(|g| !g.is_empty())
    }
}

impl Predicate for NodeGroup {
    fn check(&self, view: &View, task: &Task, node: Id) -> Result<(), Unfit> {
        let groups = self.queue_groups(view, task);
        let label = view
            .node(node)
            .and_then(|n| n.spec.labels.get(NODE_GROUP_NAME));
        let Some(group) = label else {
            return if !self.strict && groups.is_none() {
                Ok(())
            } else {
                Err(NO_LABEL)
            };
        };
        let Some(g) = groups else {
            return Err(NOT_SPECIFIED);
        };
        let mut ok = g.required.contains(group) || g.preferred.contains(group);
        if g.anti_required.contains(group) {
            ok = false;
        }
        if g.anti_preferred.contains(group) {
            ok = true;
        }
        if ok { Ok(()) } else { Err(NOT_SATISFIED) }
    }
}

impl NodeScorer for NodeGroup {
    fn score(&self, view: &View, task: &Task, node: Id) -> f64 {
        let (Some(g), Some(group)) = (
            self.queue_groups(view, task),
            view.node(node)
                .and_then(|n| n.spec.labels.get(NODE_GROUP_NAME)),
        ) else {
            return 0.0;
        };
        if g.anti_preferred.contains(group) {
            return -1.0;
        }
        let mut score = 0.0;
        if g.required.contains(group) {
            score += 100.0;
        }
        if let Some(i) = g.preferred.iter().position(|p| p == group) {
            score += if self.preferred_order {
                let n = g.preferred.len() as f64;
                50.0 * (n - i as f64) / n
            } else {
                50.0
            };
        }
        score
    }
}
