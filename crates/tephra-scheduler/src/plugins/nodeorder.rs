//! `nodeorder`: kube-scheduler's node scores with Volcano's weight arguments and defaults:
//! `leastrequested.weight` (1), `mostrequested.weight` (0), `balancedresource.weight` (1),
//! `tainttoleration.weight` (3), `nodeaffinity.weight` (2: preferred node affinity),
//! `podaffinity.weight` (2: preferred inter-pod affinity and anti-affinity) and
//! `podtopologyspread.weight` (2: `ScheduleAnyway` topology spread constraints). Each score is
//! 0–100 (pod affinity −100 to 100) before its weight.
//!
//! kube-scheduler normalizes the node-affinity, pod-affinity and spread scores over the nodes
//! it compares; tephra scores one node at a time, so each is taken as the share of the pod's
//! preference weights that the node meets, and spread as how far the node's domain is from the
//! fullest towards the emptiest. `imagelocality.weight` and `selectorspread.weight` are
//! accepted without effect ([`ARGS`]).

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::affinity::{AffinityIndex, Terms};
use crate::framework::plugin::{NodeScorer, Plugin, SessionEvents};
use crate::framework::spread::{Kind, SpreadIndex};
use crate::framework::view::View;
use crate::model::{Id, Node, TaintEffect, Task, tolerated};
use crate::resources::{CPU, MEMORY};

/// The `nodeorder` plugin.
pub struct NodeOrder {
    least: f64,
    most: f64,
    balanced: f64,
    taint: f64,
    node_affinity: f64,
    pod_affinity: f64,
    spread: f64,
    index: AffinityIndex,
    spread_index: SpreadIndex,
}

/// What the plugin reads (Volcano's keys).
pub const ARGS: ArgSpec = ArgSpec {
    keys: &[
        "leastrequested.weight",
        "mostrequested.weight",
        "balancedresource.weight",
        "tainttoleration.weight",
        "nodeaffinity.weight",
        "podaffinity.weight",
        "podtopologyspread.weight",
    ],
    prefixes: &[],
    inert: &[
        (
            "imagelocality.weight",
            "container images on nodes are not part of tephra's model",
        ),
        (
            "selectorspread.weight",
            "Volcano removed the SelectorSpread score in 2024",
        ),
    ],
};

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    let r = ArgReader::new(&cfg.arguments, &ARGS);
    let plugin = NodeOrder {
        least: r.f64_or("leastrequested.weight", 1.0),
        most: r.f64_or("mostrequested.weight", 0.0),
        balanced: r.f64_or("balancedresource.weight", 1.0),
        taint: r.f64_or("tainttoleration.weight", 3.0),
        node_affinity: r.f64_or("nodeaffinity.weight", 2.0),
        pod_affinity: r.f64_or("podaffinity.weight", 2.0),
        spread: r.f64_or("podtopologyspread.weight", 2.0),
        index: AffinityIndex::default(),
        spread_index: SpreadIndex::new(Kind::Soft),
    };
    r.finish()?;
    Ok(Box::new(plugin))
}

/// Fraction of `slot` in use on `node` once `task` is placed there.
fn used_fraction(view: &View, task: &Task, n: &Node, node: Id, slot: usize) -> Option<f64> {
    let alloc = n.allocatable_of(slot);
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

    fn events(&mut self) -> Option<&mut dyn SessionEvents> {
        Some(self)
    }
}

impl SessionEvents for NodeOrder {
    fn opened(&mut self, view: &View) {
        if self.pod_affinity > 0.0 {
            self.index = AffinityIndex::build(view, Terms::Preferred);
        }
    }

    fn allocated(&mut self, view: &View, task: Id) {
        if !self.index.is_empty() {
            self.index.placed(view, task);
        }
        if self.spread > 0.0 {
            self.spread_index.placed(view, task);
        }
    }

    fn deallocated(&mut self, view: &View, task: Id) {
        if !self.index.is_empty() {
            self.index.removed(view, task);
        }
        if self.spread > 0.0 {
            self.spread_index.removed(view, task);
        }
    }
}

impl NodeOrder {
    /// 0–100: the share of the pod's preferred node-affinity weight that the node meets.
    fn node_affinity_score(task: &Task, labels: &crate::model::Labels) -> f64 {
        let prefs = &task.spec.shape.rules.preferred_nodes;
        let total: i64 = prefs.iter().map(|p| i64::from(p.weight.max(0))).sum();
        if total == 0 {
            return 0.0;
        }
        let met: i64 = prefs
            .iter()
            .filter(|p| p.term.iter().all(|r| r.matches(labels)))
            .map(|p| i64::from(p.weight.max(0)))
            .sum();
        100.0 * met as f64 / total as f64
    }

    /// −100–100: preferred affinity terms with a selected pod in the node's domain count for,
    /// preferred anti-affinity terms against, each by its share of the pod's weights.
    fn pod_affinity_score(&self, view: &View, task: &Task, node: Id) -> f64 {
        let rules = &task.spec.shape.rules;
        let ns = task.spec.shape.namespace.as_str();
        let total: i64 = rules
            .preferred_affinity
            .iter()
            .chain(&rules.preferred_anti_affinity)
            .map(|w| i64::from(w.weight.max(0)))
            .sum();
        if total == 0 {
            return 0.0;
        }
        let near = |w: &crate::model::Weighted<crate::model::PodTerm>| {
            self.index
                .count(view, ns, &w.term, node)
                .is_some_and(|n| n > 0)
        };
        let mut raw = 0i64;
        for w in &rules.preferred_affinity {
            if near(w) {
                raw += i64::from(w.weight.max(0));
            }
        }
        for w in &rules.preferred_anti_affinity {
            if near(w) {
                raw -= i64::from(w.weight.max(0));
            }
        }
        100.0 * raw as f64 / total as f64
    }
}

impl NodeScorer for NodeOrder {
    fn score(&self, view: &View, task: &Task, node: Id) -> f64 {
        let n = view.node(node);
        let fraction = |slot| n.and_then(|n| used_fraction(view, task, n, node, slot));
        let cpu = fraction(CPU).unwrap_or(1.0);
        let mem = fraction(MEMORY).unwrap_or(1.0);
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
        let Some(n) = n else {
            return score;
        };
        if self.taint > 0.0 {
            let untolerated = n
                .spec
                .taints
                .iter()
                .filter(|t| t.effect == TaintEffect::PreferNoSchedule)
                .filter(|t| !tolerated(&task.spec.shape.tolerations, t))
                .count();
            score += self.taint * (100.0 - 25.0 * untolerated as f64).max(0.0);
        }
        if self.node_affinity > 0.0 {
            score += self.node_affinity * Self::node_affinity_score(task, &n.spec.labels);
        }
        if self.pod_affinity > 0.0 && !self.index.is_empty() {
            score += self.pod_affinity * self.pod_affinity_score(view, task, node);
        }
        if self.spread > 0.0 && self.spread_index.applies(task) {
            score += self.spread * self.spread_index.score(view, task, node);
        }
        score
    }
}
