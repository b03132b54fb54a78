//! `clusterresource`: node-aware cluster fit. Aggregates prune clusters that cannot hold the
//! gang at all (not enough free in total, or no single node with room for its largest task),
//! so that the gang is simulated on few clusters; the simulation itself decides the rest.
//! Clusters with more room left after the gang score higher (load balancing across members).
//!
//! Arguments: `clusterresource.weight` (default 1).

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::fit::{ClusterUnfit, Room};
use crate::framework::plugin::{ClusterFilter, ClusterScorer, Plugin};
use crate::framework::view::View;
use crate::model::Id;
use crate::placement::gang::{aggregate_fit, job_needs};
use crate::resources::dominant_share;

/// The `clusterresource` plugin.
pub struct ClusterResource {
    weight: f64,
}

/// The plugin reads `clusterresource.weight` (default 1.0).
pub const ARGS: ArgSpec = ArgSpec {
    keys: &["clusterresource.weight"],
    prefixes: &[],
    inert: &[],
};

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    let r = ArgReader::new(&cfg.arguments, &ARGS);
    let weight = r.f64_or("clusterresource.weight", 1.0);
    r.finish()?;
    Ok(Box::new(ClusterResource { weight }))
}

impl Plugin for ClusterResource {
    fn name(&self) -> &'static str {
        "clusterresource"
    }

    fn cluster_filter(&self) -> Option<&dyn ClusterFilter> {
        Some(self)
    }

    fn cluster_scorer(&self) -> Option<&dyn ClusterScorer> {
        Some(self)
    }
}

impl ClusterFilter for ClusterResource {
    /// A cluster short of free resources is refused with a resolvable failure: preempt and
    /// reclaim free resources, so while they make room it does not rule the cluster out.
    fn filter(&self, view: &View, job: Id, cluster: Id, room: Room) -> Result<(), ClusterUnfit> {
        if room == Room::Making {
            // Whatever this finds would be resolvable: nothing to check.
            return Ok(());
        }
        let (mut need, one_node) = job_needs(view, job);
        let splittable = view
            .job(job)
            .and_then(|j| j.group.as_ref())
            .is_some_and(|g| g.policy.splittable);
        if splittable {
            // A split gang needs room for its largest task here, not for all of it.
            need = one_node;
        }
        aggregate_fit(view, cluster, &need, &one_node)
    }
}

impl ClusterScorer for ClusterResource {
    fn score(&self, view: &View, job: Id, clusters: &[Id], scores: &mut [f64]) {
        let (need, _) = job_needs(view, job);
        for (i, &c) in clusters.iter().enumerate() {
            let free = view.state.cluster_future_idle[c as usize];
            let alloc = view.state.cluster_allocatable[c as usize];
            let used_after = alloc.minus(&free).plus(&need);
            let share = dominant_share(&used_after, &alloc);
            scores[i] += self.weight * 100.0 * (1.0 - share.min(1.0));
        }
    }
}
