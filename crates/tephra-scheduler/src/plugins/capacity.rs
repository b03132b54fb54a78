//! `capacity`: explicit per-queue `deserved`, `guarantee` and `capability`, over a queue tree
//! built from `parent` and rooted at the queue named `root`.
//!
//! - A queue never holds more than its capability, nor more than any ancestor's: a child's
//!   share never breaks its parent's limits.
//! - Guarantees are not fenced off: a queue that does not use its guarantee lends it to the
//!   others, and takes it back through reclaim when it needs it (a queue may reclaim up to the
//!   larger of its deserved share and its guarantee).
//! - Queues are ordered by their share of what they deserve, compared at the first level where
//!   their paths from the root part, so siblings are balanced before their children.
//! - A queue may borrow beyond its deserved share, up to its capability, while others do not
//!   need it; it then gives resources back through reclaim, only while it holds more than it
//!   deserves of them, and never below its guarantee.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::plugin::{
    EnqueueVote, Entitlement, Plugin, QueueFigures, QueueOrder, QueueShare, SessionEvents, Vote,
};
use crate::framework::queues::{
    VictimQueue, ancestry, order_in_tree, queue_parents, victims_keep_floors,
};
use crate::framework::view::View;
use crate::model::{GroupPhase, Id, TaskStatus};
use crate::placement::gang::job_needs;
use crate::resources::{MAX_RESOURCES, PODS, Resources};

#[derive(Clone, Debug, Default)]
struct Attr {
    parent: Option<String>,
    deserved: Resources,
    guarantee: Resources,
    capability: Option<Resources>,
    allocated: Resources,
    inqueue: Resources,
    /// What the queue's jobs (and its children's) ask for: held plus pending, at session open
    /// (for status and metrics).
    request: Resources,
}

/// The `capacity` plugin.
pub struct Capacity {
    total: Resources,
    queues: BTreeMap<String, Attr>,
}

/// The plugin reads no arguments; Volcano's are accepted without effect.
pub const ARGS: ArgSpec = ArgSpec {
    keys: &[],
    prefixes: &[],
    inert: &[
        (
            "ancestorReclaimLevel",
            "reclaim already keeps every queue at or above its guarantee and takes only from queues above their deserved share; ancestors are not checked level by level",
        ),
        (
            "capacity.DynamicResourceAllocationEnable",
            "dynamic resource allocation is not part of tephra's model",
        ),
        (
            "capacity.DRAConsumableCapacityEnable",
            "dynamic resource allocation is not part of tephra's model",
        ),
    ],
};

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    ArgReader::new(&cfg.arguments, &ARGS).finish()?;
    Ok(Box::new(Capacity {
        total: Resources::ZERO,
        queues: BTreeMap::new(),
    }))
}

impl Capacity {
    /// Adds (`sign` 1) or removes (-1) a job's minResources from what its queue and its
    /// ancestors have admitted.
    fn count_inqueue(&mut self, view: &View, job: Id, sign: i64) {
        let Some(j) = view.job(job) else { return };
        let Some(min) = j.group.as_ref().and_then(|g| g.min_resources) else {
            return;
        };
        let delta = min.times(sign);
        for name in self.chain(j.queue()) {
            if let Some(q) = self.queues.get_mut(&name) {
                q.inqueue.add(&delta);
            }
        }
    }

    /// The queue and its ancestors, leaf first (cycles are cut).
    fn chain(&self, queue: &str) -> Vec<String> {
        ancestry(|q| self.queues.get(q).and_then(|a| a.parent.clone()), queue)
    }

    fn share(&self, queue: &str) -> f64 {
        let Some(q) = self.queues.get(queue) else {
            return 0.0;
        };
        let mut share: f64 = 0.0;
        for i in 0..MAX_RESOURCES {
            if i == PODS {
                continue;
            }
            let (a, d) = (q.allocated.0[i], q.deserved.0[i]);
            let s = if d > 0 {
                a as f64 / d as f64
            } else if a > 0 {
                f64::INFINITY
            } else {
                0.0
            };
            share = share.max(s);
        }
        share
    }

    /// Whether `amount` more fits every capability along the queue's chain (and the fleet).
    fn fits_capabilities(&self, queue: &str, amount: &Resources) -> bool {
        self.chain(queue).iter().all(|name| {
            let Some(q) = self.queues.get(name) else {
                return true;
            };
            let after = q.allocated.plus(amount);
            (0..MAX_RESOURCES).all(|i| {
                if amount.0[i] <= 0 || i == PODS {
                    return true;
                }
                let cap = q.capability.map_or(self.total.0[i], |c| {
                    if c.0[i] > 0 { c.0[i] } else { self.total.0[i] }
                });
                after.0[i] <= cap
            })
        })
    }

    fn entitled_share(q: &Attr) -> Resources {
        q.deserved.max(&q.guarantee)
    }

    fn adjust(&mut self, queue: &str, amount: &Resources, sign: i64) {
        let delta = amount.times(sign);
        for name in self.chain(queue) {
            if let Some(q) = self.queues.get_mut(&name) {
                q.allocated.add(&delta);
            }
        }
    }
}

/// Whether a queue holding `after` (after taking `need`) stays within its entitlement (the
/// larger of deserved and guarantee) on every resource the queue declares one for, and needs
/// at least one such resource.
fn within_entitlement(q: &Attr, need: &Resources, after: &Resources) -> bool {
    let ent = Capacity::entitled_share(q);
    let declared: Vec<usize> = (0..MAX_RESOURCES)
        .filter(|&r| r != PODS && ent.0[r] > 0 && need.0[r] > 0)
        .collect();
    !declared.is_empty() && declared.iter().all(|&r| after.0[r] <= ent.0[r])
}

impl Plugin for Capacity {
    fn name(&self) -> &'static str {
        "capacity"
    }

    fn queue_order(&self) -> Option<&dyn QueueOrder> {
        Some(self)
    }

    fn queue_share(&self) -> Option<&dyn QueueShare> {
        Some(self)
    }

    fn enqueue_vote(&self) -> Option<&dyn EnqueueVote> {
        Some(self)
    }

    fn entitlement(&self) -> Option<&dyn Entitlement> {
        Some(self)
    }

    fn events(&mut self) -> Option<&mut dyn SessionEvents> {
        Some(self)
    }
}

impl SessionEvents for Capacity {
    fn opened(&mut self, view: &View) {
        self.total = view.fleet_total();
        let parents = queue_parents(view);
        for (name, q) in &view.snap.queues {
            let parent = parents.get(name).cloned().flatten();
            self.queues.insert(
                name.clone(),
                Attr {
                    parent,
                    deserved: q.deserved.or(q.guarantee).unwrap_or_default(),
                    guarantee: q.guarantee.unwrap_or_default(),
                    capability: q.capability,
                    ..Attr::default()
                },
            );
        }
        if let Some(root) = self.queues.get_mut(tephra_api::defaults::ROOT_QUEUE)
            && root.deserved.is_zero()
        {
            root.deserved = self.total;
        }
        let held: Vec<(String, Resources)> = view
            .state
            .queue_allocated
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        for (name, amount) in held {
            if self.queues.contains_key(&name) {
                self.adjust(&name, &amount, 1);
            }
        }
        for q in self.queues.values_mut() {
            q.request = q.allocated;
        }
        let mut inqueue: Vec<(String, Resources)> = Vec::new();
        for &job in &view.snap.active_jobs {
            let Some(j) = view.job(job) else { continue };
            let mut pending = Resources::ZERO;
            for &t in &j.tasks {
                if view.status(t) == TaskStatus::Pending
                    && let Some(task) = view.task(t)
                {
                    pending.add(&task.spec.shape.request);
                }
            }
            if !pending.is_zero() {
                // A parent asks for what its children ask for, as it holds what they hold.
                for name in self.chain(j.queue()) {
                    if let Some(q) = self.queues.get_mut(&name) {
                        q.request.add(&pending);
                    }
                }
            }
            if view.state.phase(view.snap, job) == Some(GroupPhase::Inqueue)
                && let Some(min) = j.group.as_ref().and_then(|g| g.min_resources)
            {
                inqueue.push((j.queue().to_string(), min));
            }
        }
        // The backlog's jobs hold nothing and are Pending: what they ask, the cache keeps by
        // queue.
        for (name, b) in view.snap.backlog.queues() {
            for n in self.chain(name) {
                if let Some(q) = self.queues.get_mut(&n) {
                    q.request.add(&b.request);
                }
            }
        }
        for (name, min) in inqueue {
            for n in self.chain(&name) {
                if let Some(q) = self.queues.get_mut(&n) {
                    q.inqueue.add(&min);
                }
            }
        }
    }

    fn job_enqueued(&mut self, view: &View, job: Id) {
        self.count_inqueue(view, job, 1);
    }

    fn job_dequeued(&mut self, view: &View, job: Id) {
        self.count_inqueue(view, job, -1);
    }

    fn allocated(&mut self, view: &View, task: Id) {
        if let Some(t) = view.task(task)
            && let Some(j) = view.job(t.job)
        {
            let queue = j.queue().to_string();
            self.adjust(&queue, &t.spec.shape.request, 1);
        }
    }

    fn deallocated(&mut self, view: &View, task: Id) {
        if let Some(t) = view.task(task)
            && let Some(j) = view.job(t.job)
        {
            let queue = j.queue().to_string();
            self.adjust(&queue, &t.spec.shape.request, -1);
        }
    }
}

impl QueueOrder for Capacity {
    fn compare(&self, _view: &View, a: &str, b: &str) -> Ordering {
        order_in_tree(&self.chain(a), &self.chain(b), |q| self.share(q))
    }
}

impl QueueShare for Capacity {
    fn allocatable(&self, view: &View, queue: &str, task: Id) -> bool {
        let Some(t) = view.task(task) else {
            return true;
        };
        self.fits_capabilities(queue, &t.spec.shape.request)
    }

    fn figures(&self, _view: &View, queue: &str) -> Option<QueueFigures> {
        let q = self.queues.get(queue)?;
        Some(QueueFigures {
            request: q.request,
            deserved: q.deserved,
            share: self.share(queue),
        })
    }

    fn overused(&self, _view: &View, _queue: &str) -> Option<bool> {
        // A queue may borrow beyond its deserved share up to its capability: overuse is not
        // this plugin's rule.
        None
    }

    fn reclaimable(&self, view: &View, victims: &[Id]) -> bool {
        // A victim's queue gives back only while it holds more than it deserves, and never
        // drops below its guarantee.
        victims_keep_floors(view, victims, |q| {
            self.queues.get(q).map(|a| VictimQueue {
                allocated: a.allocated,
                above: a.deserved,
                floor: a.guarantee,
            })
        })
        .unwrap_or(false)
    }

    fn may_reclaim(&self, view: &View, job: Id) -> Option<bool> {
        let j = view.job(job)?;
        let q = self.queues.get(j.queue())?;
        let (need, _) = job_needs(view, job);
        let after = q.allocated.plus(&need);
        Some(within_entitlement(q, &need, &after))
    }
}

impl EnqueueVote for Capacity {
    fn job_enqueueable(&self, view: &View, job: Id) -> Vote {
        let Some(j) = view.job(job) else {
            return Vote::Abstain;
        };
        let Some(min) = j.group.as_ref().and_then(|g| g.min_resources) else {
            return Vote::Permit;
        };
        let Some(q) = self.queues.get(j.queue()) else {
            return Vote::Reject;
        };
        if self.fits_capabilities(j.queue(), &min.plus(&q.inqueue)) {
            Vote::Permit
        } else {
            Vote::Reject
        }
    }
}

impl Entitlement for Capacity {
    fn job_entitled(&self, view: &View, job: Id) -> bool {
        let Some(j) = view.job(job) else { return false };
        let Some(min) = j.group.as_ref().and_then(|g| g.min_resources) else {
            return false;
        };
        let Some(q) = self.queues.get(j.queue()) else {
            return false;
        };
        // Capabilities are not checked here: reclaiming from a sibling frees room under the
        // same parent, and allocation still enforces every capability on the chain.
        let want = min.plus(&q.allocated).plus(&q.inqueue);
        within_entitlement(q, &min, &want)
    }
}
