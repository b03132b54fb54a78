//! `drf`: Dominant Resource Fairness between jobs of a queue: the job with the smallest
//! dominant share of the fleet (its largest share of any resource) goes first. Shares follow
//! the session's allocations as they happen.

use std::cmp::Ordering;
use std::collections::HashMap;

use super::{ArgError, ArgReader};
use crate::config::{Args, Enables};
use crate::framework::{Plugin, View};
use crate::model::Id;
use crate::resources::Resources;

pub struct Drf {
    total: Resources,
    job_alloc: HashMap<Id, Resources>,
}

impl Drf {
    pub fn new(args: &Args, enables: &Enables) -> Result<Self, ArgError> {
        ArgReader::new(args, &[], &[])?;
        if enables.hierarchy == Some(true) {
            return Err((
                "enableHierarchy".into(),
                "hierarchical DRF is not available in this version of tephra; use the proportion plugin for queue fairness".into(),
            ));
        }
        Ok(Self {
            total: Resources::ZERO,
            job_alloc: HashMap::new(),
        })
    }

    fn share(&self, job: Id) -> f64 {
        dominant_share(
            &self.job_alloc.get(&job).copied().unwrap_or_default(),
            &self.total,
        )
    }
}

/// The largest fraction of `total` that `alloc` takes in any resource.
pub fn dominant_share(alloc: &Resources, total: &Resources) -> f64 {
    alloc
        .0
        .iter()
        .zip(total.0.iter())
        .filter(|(_, t)| **t > 0)
        .map(|(a, t)| *a as f64 / *t as f64)
        .fold(0.0, f64::max)
}

/// Sum of allocatable over ready nodes of ready clusters.
pub(crate) fn fleet_total(view: &View) -> Resources {
    let mut total = Resources::ZERO;
    for (_, n) in view.snap.nodes.iter() {
        let cluster_ready = view.snap.clusters.get(n.cluster).is_some_and(|c| c.ready);
        if n.spec.ready && cluster_ready {
            total.add(&super::allocatable(n));
        }
    }
    total
}

impl Plugin for Drf {
    fn name(&self) -> &'static str {
        "drf"
    }

    fn has_predicate(&self) -> bool {
        false
    }

    fn has_node_score(&self) -> bool {
        false
    }

    fn on_session_open(&mut self, view: &View) {
        self.total = fleet_total(view);
        for &job in &view.snap.active_jobs {
            let Some(j) = view.job(job) else { continue };
            let mut alloc = Resources::ZERO;
            for &t in &j.tasks {
                if view.status(t).holds_node()
                    && let Some(task) = view.task(t)
                {
                    alloc.add(&task.spec.shape.request);
                }
            }
            self.job_alloc.insert(job, alloc);
        }
    }

    fn job_order(&self, _view: &View, a: Id, b: Id) -> Ordering {
        self.share(a).total_cmp(&self.share(b))
    }

    fn on_allocate(&mut self, view: &View, task: Id) {
        if let Some(t) = view.task(task) {
            self.job_alloc
                .entry(t.job)
                .or_default()
                .add(&t.spec.shape.request);
        }
    }

    fn on_deallocate(&mut self, view: &View, task: Id) {
        if let Some(t) = view.task(task) {
            self.job_alloc
                .entry(t.job)
                .or_default()
                .sub(&t.spec.shape.request);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dominant_share_is_the_largest_fraction() {
        let total = Resources::of(0, 100).plus(&Resources::of(3, 10));
        let alloc = Resources::of(0, 10).plus(&Resources::of(3, 5));
        assert_eq!(dominant_share(&alloc, &total), 0.5);
        assert_eq!(dominant_share(&Resources::ZERO, &total), 0.0);
    }
}
