//! `drf`: Dominant Resource Fairness between jobs of a queue: the job with the smallest
//! dominant share of the fleet (its largest share of any resource) goes first. Shares follow
//! the session's allocations as they happen.
//!
//! With `enableHierarchy: true` (Volcano's hdrf) it also orders queues: over the queue tree
//! (`parent`, rooted at `root`), the children of the closest common ancestor are compared by
//! their subtree's dominant share divided by their weight. The tree comes from each queue's
//! `spec.parent` and weight, or from Volcano's `volcano.sh/hierarchy` and
//! `volcano.sh/hierarchy-weights` annotations when it has them. It then cannot be combined with
//! another plugin that orders queues (proportion, capacity).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::plugin::{JobOrder, Plugin, QueueOrder, SessionEvents};
use crate::framework::queues::{ancestry, order_in_tree, queue_parents};
use crate::framework::view::View;
use crate::hash::HashMap;
use crate::model::Id;
use crate::resources::{Resources, dominant_share};

/// The `drf` plugin.
pub struct Drf {
    total: Resources,
    job_alloc: HashMap<Id, Resources>,
    /// With `enableHierarchy`: the queue tree (queue → (parent, weight)) and what each queue's
    /// subtree holds.
    hierarchy: Option<BTreeMap<String, (Option<String>, f64)>>,
    queue_alloc: BTreeMap<String, Resources>,
}

/// The plugin reads no arguments.
pub const ARGS: ArgSpec = ArgSpec::NONE;

/// Builds the plugin from its configuration (`enableHierarchy` makes it order queues).
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    ArgReader::new(&cfg.arguments, &ARGS).finish()?;
    Ok(Box::new(Drf {
        total: Resources::ZERO,
        job_alloc: HashMap::default(),
        hierarchy: (cfg.enables.hierarchy == Some(true)).then(BTreeMap::new),
        queue_alloc: BTreeMap::new(),
    }))
}

/// Adds a queue placed by Volcano's hierarchy annotations: each level of its path above the
/// queue is a node of the tree named by the path so far (`root`, `root/eng`), weighted as the
/// annotation says (the first queue to name a level sets its weight); the queue itself hangs
/// under the last of them with the last weight.
fn add_annotated(
    tree: &mut BTreeMap<String, (Option<String>, f64)>,
    queue: &str,
    h: &crate::model::Hierarchy,
) {
    let weight = |i: usize| {
        h.weights
            .get(i)
            .copied()
            .unwrap_or(1.0)
            .max(f64::MIN_POSITIVE)
    };
    let levels = h.path.len();
    let mut parent: Option<String> = None;
    for i in 0..levels.saturating_sub(1) {
        let node = h.path[..=i].join("/");
        tree.entry(node.clone())
            .or_insert_with(|| (parent.clone(), weight(i)));
        parent = Some(node);
    }
    tree.insert(
        queue.to_string(),
        (parent, weight(levels.saturating_sub(1))),
    );
}

impl Drf {
    /// The queue and its ancestors, leaf first.
    fn chain(&self, queue: &str) -> Vec<String> {
        match &self.hierarchy {
            Some(tree) => ancestry(|q| tree.get(q).and_then(|(p, _)| p.clone()), queue),
            None => vec![queue.to_string()],
        }
    }

    /// A queue subtree's dominant share of the fleet, divided by its weight.
    fn weighted_share(&self, queue: &str) -> f64 {
        let weight = self
            .hierarchy
            .as_ref()
            .and_then(|t| t.get(queue))
            .map_or(1.0, |(_, w)| *w);
        let alloc = self.queue_alloc.get(queue).copied().unwrap_or_default();
        dominant_share(&alloc, &self.total) / weight
    }

    fn adjust_queue(&mut self, queue: &str, amount: &Resources, sign: i64) {
        if self.hierarchy.is_none() {
            return;
        }
        let delta = amount.times(sign);
        for q in self.chain(queue) {
            self.queue_alloc.entry(q).or_default().add(&delta);
        }
    }

    fn share(&self, job: Id) -> f64 {
        dominant_share(
            &self.job_alloc.get(&job).copied().unwrap_or_default(),
            &self.total,
        )
    }
}

impl Plugin for Drf {
    fn name(&self) -> &'static str {
        "drf"
    }

    fn job_order(&self) -> Option<&dyn JobOrder> {
        Some(self)
    }

    fn queue_order(&self) -> Option<&dyn QueueOrder> {
        // Only hierarchical DRF orders queues.
        self.hierarchy.is_some().then_some(self as &dyn QueueOrder)
    }

    fn events(&mut self) -> Option<&mut dyn SessionEvents> {
        Some(self)
    }
}

impl SessionEvents for Drf {
    fn opened(&mut self, view: &View) {
        self.total = view.fleet_total();
        if let Some(tree) = &mut self.hierarchy {
            let parents = queue_parents(view);
            for (name, q) in &view.snap.queues {
                match &q.hierarchy {
                    Some(h) => add_annotated(tree, name, h),
                    None => {
                        let parent = parents.get(name).cloned().flatten();
                        tree.insert(name.clone(), (parent, f64::from(q.weight.max(1))));
                    }
                }
            }
            let held: Vec<(String, Resources)> = view
                .state
                .queue_allocated
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            for (q, amount) in held {
                self.adjust_queue(&q, &amount, 1);
            }
        }
        for &job in &view.snap.active_jobs {
            let Some(j) = view.job(job) else { continue };
            // A job with nothing ready holds nothing that counts (a missing entry is zero):
            // a backlog of waiting jobs costs no walk and no entry.
            if view.state.tally(j, job).ready <= 0 {
                continue;
            }
            let mut alloc = Resources::ZERO;
            for &t in &j.tasks {
                let s = view.status(t);
                if s.holds_node()
                    && s != crate::model::TaskStatus::Releasing
                    && let Some(task) = view.task(t)
                {
                    alloc.add(&task.spec.shape.request);
                }
            }
            self.job_alloc.insert(job, alloc);
        }
    }

    fn allocated(&mut self, view: &View, task: Id) {
        if let Some(t) = view.task(task) {
            self.job_alloc
                .entry(t.job)
                .or_default()
                .add(&t.spec.shape.request);
            if let Some(j) = view.job(t.job) {
                let q = j.queue().to_string();
                self.adjust_queue(&q, &t.spec.shape.request, 1);
            }
        }
    }

    fn deallocated(&mut self, view: &View, task: Id) {
        if let Some(t) = view.task(task) {
            self.job_alloc
                .entry(t.job)
                .or_default()
                .sub(&t.spec.shape.request);
            if let Some(j) = view.job(t.job) {
                let q = j.queue().to_string();
                self.adjust_queue(&q, &t.spec.shape.request, -1);
            }
        }
    }
}

impl JobOrder for Drf {
    fn compare(&self, _view: &View, a: Id, b: Id) -> Ordering {
        self.share(a).total_cmp(&self.share(b))
    }

    /// A job that holds nothing has a share of nothing.
    fn ties_waiting(&self) -> bool {
        true
    }
}

impl QueueOrder for Drf {
    fn compare(&self, _view: &View, a: &str, b: &str) -> Ordering {
        if self.hierarchy.is_none() {
            return Ordering::Equal;
        }
        // Hierarchical DRF: weighted dominant shares, compared between the children of the
        // closest common ancestor.
        order_in_tree(&self.chain(a), &self.chain(b), |q| self.weighted_share(q))
    }
}

#[cfg(test)]
mod tests {
    use crate::resources::{Resources, dominant_share};

    #[test]
    fn dominant_share_is_the_largest_fraction() {
        let total = Resources::of(0, 100).plus(&Resources::of(3, 10));
        let alloc = Resources::of(0, 10).plus(&Resources::of(3, 5));
        assert_eq!(dominant_share(&alloc, &total), 0.5);
        assert_eq!(dominant_share(&Resources::ZERO, &total), 0.0);
    }
}
