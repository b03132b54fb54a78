//! `network-topology-aware`: bin-packing at the HyperNode level, with Volcano's arguments.
//!
//! - **Domains** (HyperNodeOrder): a gang or sub-group held to a tier tries the domains it may
//!   go to best score first. A domain's score is, over the weighted resources the gang asks
//!   for, the weighted mean of `(used + request) / allocatable`; a domain the request would
//!   over-fill scores 0. The fullest domain that still holds the gang goes first, so whole
//!   racks stay free for later large gangs.
//! - **Nodes of jobs without a `networkTopology`** (`hypernode.binpack.normal-pod.enable`):
//!   a node scores, for each tier from the cluster's lowest to its highest, the same fill of
//!   the tier's domain that holds it (1 when none does), weighted `fading^(tier-1)`; their
//!   weighted mean, times 100.
//!
//! Scores are scaled by `weight`. Arguments: `weight` (1), `hypernode.binpack.cpu` (1),
//! `hypernode.binpack.memory` (1), `hypernode.binpack.resources` (extra resource names, comma
//! separated), `hypernode.binpack.resources.<name>` (their weights, 1),
//! `hypernode.binpack.normal-pod.enable` (true), `hypernode.binpack.normal-pod.fading` (0.8; a
//! negative one is taken as 0.8, as in Volcano).

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::plugin::{DomainScorer, NodeScorer, Plugin, SessionEvents};
use crate::framework::view::View;
use crate::model::{Id, Task};
use crate::resources::Resources;

/// The `network-topology-aware` plugin.
pub struct NetworkTopologyAware {
    weight: f64,
    /// (resource name, weight)
    resources: Vec<(String, f64)>,
    /// (slot, weight), resolved when the session opens.
    slots: Vec<(usize, f64)>,
    normal_pods: bool,
    fading: f64,
}

/// What the plugin reads (Volcano's keys).
pub const ARGS: ArgSpec = ArgSpec {
    keys: &[
        "weight",
        "hypernode.binpack.cpu",
        "hypernode.binpack.memory",
        "hypernode.binpack.resources",
        "hypernode.binpack.normal-pod.enable",
        "hypernode.binpack.normal-pod.fading",
    ],
    prefixes: &["hypernode.binpack.resources."],
    inert: &[],
};

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    let r = ArgReader::new(&cfg.arguments, &ARGS);
    let resources = r.resource_weights(
        "hypernode.binpack.cpu",
        "hypernode.binpack.memory",
        "hypernode.binpack.resources",
    );
    let weight = r.f64_or("weight", 1.0);
    let normal_pods = r.bool_or("hypernode.binpack.normal-pod.enable", true);
    let fading = r.f64_or("hypernode.binpack.normal-pod.fading", 0.8);
    r.finish()?;
    Ok(Box::new(NetworkTopologyAware {
        weight,
        resources,
        slots: Vec::new(),
        normal_pods,
        fading: if fading < 0.0 { 0.8 } else { fading },
    }))
}

impl NetworkTopologyAware {
    /// How full domain `d` of cluster `c` would be with `request` added: the weighted mean over
    /// the weighted resources `request` asks for, 0 when it would over-fill one, `None` when it
    /// asks for none of them.
    fn fill(&self, view: &View, c: usize, d: usize, request: &Resources) -> Option<f64> {
        let alloc = view.state.domain_allocatable.get(c)?.get(d)?;
        let free = view.state.domain_future_idle.get(c)?.get(d)?;
        let mut total = 0.0;
        let mut weights = 0.0;
        for &(slot, w) in &self.slots {
            let req = request.get(slot);
            if req == 0 {
                continue;
            }
            let cap = alloc.get(slot);
            let used = cap - free.get(slot).max(0) + req;
            if cap <= 0 || used > cap {
                return Some(0.0);
            }
            total += w * used as f64 / cap as f64;
            weights += w;
        }
        (weights > 0.0).then(|| total / weights)
    }
}

impl Plugin for NetworkTopologyAware {
    fn name(&self) -> &'static str {
        "network-topology-aware"
    }

    fn domain_scorer(&self) -> Option<&dyn DomainScorer> {
        Some(self)
    }

    fn node_scorer(&self) -> Option<&dyn NodeScorer> {
        Some(self)
    }

    fn events(&mut self) -> Option<&mut dyn SessionEvents> {
        Some(self)
    }
}

impl SessionEvents for NetworkTopologyAware {
    fn opened(&mut self, view: &View) {
        self.slots = view.snap.names.weighted_slots(&self.resources);
    }
}

impl DomainScorer for NetworkTopologyAware {
    fn score(&self, view: &View, cluster: Id, domain: usize, request: &Resources) -> f64 {
        let fill = self
            .fill(view, cluster as usize, domain, request)
            .unwrap_or(0.0);
        self.weight * 100.0 * fill
    }
}

impl NodeScorer for NetworkTopologyAware {
    fn score(&self, view: &View, task: &Task, node: Id) -> f64 {
        if !self.normal_pods || self.weight == 0.0 {
            return 0.0;
        }
        let held = view
            .job(task.job)
            .and_then(|j| j.group.as_ref())
            .is_some_and(|g| g.topology.is_some());
        let Some(n) = view.node(node).filter(|_| !held) else {
            return 0.0;
        };
        let c = n.cluster as usize;
        let Some(Some(t)) = view.state.topologies.get(c) else {
            return 0.0;
        };
        let (Some(low), Some(high)) = (t.domains.first(), t.domains.last()) else {
            return 0.0;
        };
        let mine = t
            .node_domains
            .get(&node)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let request = &task.spec.shape.request;
        let mut total = 0.0;
        let mut weights = 0.0;
        for tier in low.tier..=high.tier {
            let w = self
                .fading
                .powi(i32::try_from(tier).unwrap_or(i32::MAX) - 1);
            // A node under no domain of this tier scores full: pods go there first.
            let fill = mine
                .iter()
                .map(|&d| d as usize)
                .find(|&d| t.domains.get(d).is_some_and(|dom| dom.tier == tier))
                .map_or(1.0, |d| self.fill(view, c, d, request).unwrap_or(0.0));
            total += w * fill;
            weights += w;
        }
        if weights <= 0.0 {
            return 0.0;
        }
        self.weight * 100.0 * total / weights
    }
}
