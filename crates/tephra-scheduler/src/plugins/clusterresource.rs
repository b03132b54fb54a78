//! `clusterresource`: node-aware cluster fit. Aggregates prune clusters that cannot hold the
//! gang at all (not enough free in total, or no single node with room for its largest task),
//! so that the gang is simulated on few clusters; the simulation itself decides the rest.
//! Clusters with more room left after the gang score higher (load balancing across members).
//!
//! Arguments: `clusterresource.weight` (default 1).

use std::cell::RefCell;
use std::sync::Arc;

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::fit::{ClusterUnfit, Room};
use crate::framework::plugin::{ClusterFilter, ClusterScorer, Plugin};
use crate::framework::view::View;
use crate::hash::HashMap;
use crate::model::{Id, TaskShape, TaskStatus};
use crate::placement::capacity::{Capacity, no_node_for};
use crate::placement::gang::{aggregate_fit, job_needs};
use crate::resources::{Resources, dominant_share};

/// The `clusterresource` plugin.
pub struct ClusterResource {
    weight: f64,
    /// What [`never_here`] found this session, by pod shape (its address in the snapshot)
    /// and cluster: the nodes do not change within a session, so each is walked once.
    never: RefCell<HashMap<(usize, Id), Option<String>>>,
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
    Ok(Box::new(ClusterResource {
        weight,
        never: RefCell::new(HashMap::default()),
    }))
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
        aggregate_fit(view, cluster, &need, &one_node).map_err(|short| {
            // The totals are not the first thing that fails when no node of the cluster could
            // ever take a pod of the gang (its selector, affinity, a taint, a topology label,
            // a node too small): that is the reason, and no eviction changes it.
            never_here(view, job, cluster, &self.never).unwrap_or(short)
        })
    }
}

/// Why no node of `cluster` could ever take some pending pod of `job`, judged node by node on
/// what does not change with what runs there; `None` when each of its pods' shapes has a node.
/// Pods with no selector, affinity, claim or hard spread are not looked at (their first
/// failing check is the totals).
fn never_here(
    view: &View,
    job: Id,
    cluster: Id,
    memo: &RefCell<HashMap<(usize, Id), Option<String>>>,
) -> Option<ClusterUnfit> {
    let j = view.job(job)?;
    let cap = Capacity {
        total: view.state.cluster_allocatable[cluster as usize],
        node_max: view.state.cluster_node_max[cluster as usize],
        plain_node_max: Resources::ZERO,
    };
    let mut seen: Vec<&Arc<TaskShape>> = Vec::new();
    for &t in &j.tasks {
        if view.status(t) != TaskStatus::Pending {
            continue;
        }
        let Some(task) = view.task(t) else { continue };
        let shape = &task.spec.shape;
        let constrained = !(shape.node_selector.is_empty()
            && shape.affinity.is_empty()
            && shape.rules.claims.is_empty()
            && shape.rules.device_claims.is_empty()
            && shape.rules.gpus.is_none()
            && !shape.rules.spread.iter().any(|s| s.is_hard()));
        if !constrained || seen.iter().any(|s| Arc::ptr_eq(s, shape)) {
            continue;
        }
        seen.push(shape);
        let key = (Arc::as_ptr(shape) as usize, cluster);
        let found = memo.borrow().get(&key).cloned();
        let why = found.unwrap_or_else(|| {
            let why = no_node_for(view.snap, shape, cluster, &cap).map(|errs| {
                format!(
                    "no node can ever take a pod of task {}: {}",
                    shape.role,
                    errs.render(&view.snap.names)
                )
            });
            memo.borrow_mut().insert(key, why.clone());
            why
        });
        if let Some(why) = why {
            return Some(ClusterUnfit::unresolvable(why));
        }
    }
    None
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
