//! `clusterresource`: node-aware cluster fit. Aggregates prune clusters that cannot hold the
//! gang at all (not enough free in total, or no single node with room for its largest task),
//! so that the gang is simulated on few clusters; the simulation itself decides the rest.
//! Clusters with more room left after the gang score higher (load balancing across members).
//!
//! Arguments: `clusterresource.weight` (default 1).

use super::{ArgError, ArgReader};
use crate::config::Args;
use crate::framework::{Plugin, View};
use crate::model::Id;
use crate::placement::{job_needs, prune_reason};

pub struct ClusterResource {
    weight: f64,
}

impl ClusterResource {
    pub fn new(args: &Args) -> Result<Self, ArgError> {
        let r = ArgReader::new(args, &["clusterresource.weight"], &[])?;
        Ok(Self {
            weight: r.f64_or("clusterresource.weight", 1.0)?,
        })
    }
}

impl Plugin for ClusterResource {
    fn name(&self) -> &'static str {
        "clusterresource"
    }

    fn has_predicate(&self) -> bool {
        false
    }

    fn has_node_score(&self) -> bool {
        false
    }

    fn cluster_filter(&self, view: &View, job: Id, cluster: Id) -> Result<(), String> {
        if view.state.making_room {
            // Preempt and reclaim free resources; what is free now does not rule a cluster out.
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
        match prune_reason(view, cluster, &need, &one_node) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    fn cluster_scores(&self, view: &View, job: Id, clusters: &[Id], scores: &mut [f64]) {
        let (need, _) = job_needs(view, job);
        for (i, &c) in clusters.iter().enumerate() {
            let free = view.state.cluster_future_idle[c as usize];
            let alloc = view.state.cluster_allocatable[c as usize];
            let used_after = alloc.minus(&free).plus(&need);
            let share = super::drf::dominant_share(&used_after, &alloc);
            scores[i] += self.weight * 100.0 * (1.0 - share.min(1.0));
        }
    }
}
