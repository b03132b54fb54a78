//! `proportion`: each queue deserves a share of the whole fleet (across all clusters), water-
//! filled by weight, capped by its `capability` and by what it asks for, and floored by its
//! `guarantee`. Queues with the smallest share of what they deserve go first; a queue at or over
//! its deserved share is overused and waits; a queue never takes more than its capability; a
//! Pending job is admitted only if its minResources fit the queue's capability.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::plugin::{
    EnqueueVote, Entitlement, Plugin, QueueFigures, QueueOrder, QueueShare, SessionEvents, Vote,
};
use crate::framework::queues::{VictimQueue, victims_keep_floors};
use crate::framework::view::View;
use crate::model::{GroupPhase, Id};
use crate::placement::gang::job_needs;
use crate::resources::{MAX_RESOURCES, PODS, Resources};

#[derive(Clone, Debug, Default)]
struct QueueAttr {
    weight: i64,
    capability: Option<Resources>,
    guarantee: Resources,
    request: Resources,
    allocated: Resources,
    inqueue: Resources,
    deserved: Resources,
}

impl QueueAttr {
    fn real_capability(&self, total: &Resources) -> Resources {
        match &self.capability {
            Some(c) => {
                let mut r = *total;
                for i in 0..MAX_RESOURCES {
                    if c.0[i] > 0 {
                        r.0[i] = c.0[i];
                    }
                }
                r
            }
            None => *total,
        }
    }
}

/// The `proportion` plugin.
pub struct Proportion {
    total: Resources,
    queues: BTreeMap<String, QueueAttr>,
}

/// The plugin reads no arguments.
pub const ARGS: ArgSpec = ArgSpec::NONE;

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    ArgReader::new(&cfg.arguments, &ARGS).finish()?;
    Ok(Box::new(Proportion {
        total: Resources::ZERO,
        queues: BTreeMap::new(),
    }))
}

impl Proportion {
    /// Adds (`sign` 1) or removes (-1) a job's minResources from what its queue admitted.
    fn count_inqueue(&mut self, view: &View, job: Id, sign: i64) {
        let Some(j) = view.job(job) else { return };
        if let (Some(q), Some(min)) = (
            self.queues.get_mut(j.queue()),
            j.group.as_ref().and_then(|g| g.min_resources),
        ) {
            q.inqueue.add(&min.times(sign));
        }
    }

    /// Share of a queue: its largest allocated/deserved ratio.
    fn share(&self, name: &str) -> f64 {
        let Some(q) = self.queues.get(name) else {
            return 0.0;
        };
        let mut share: f64 = 0.0;
        for i in 0..MAX_RESOURCES {
            let (a, d) = (q.allocated.0[i], q.deserved.0[i]);
            let s = if d > 0 {
                a as f64 / d as f64
            } else if a > 0 {
                1.0
            } else {
                0.0
            };
            share = share.max(s);
        }
        share
    }
}

/// Water-fills `total` over the queues by weight.
fn water_fill(total: &Resources, queues: &mut BTreeMap<String, QueueAttr>) {
    let mut met: Vec<String> = Vec::new();
    let mut remaining = *total;
    for _ in 0..64 {
        let weight: i64 = queues
            .iter()
            .filter(|(n, _)| !met.contains(n))
            .map(|(_, q)| q.weight)
            .sum();
        if weight == 0 {
            break;
        }
        let before = remaining;
        for (name, q) in queues.iter_mut() {
            if met.contains(name) {
                continue;
            }
            let mut inc = Resources::ZERO;
            for i in 0..MAX_RESOURCES {
                inc.0[i] = ((i128::from(remaining.0[i].max(0)) * i128::from(q.weight))
                    / i128::from(weight)) as i64;
            }
            let mut d = q.deserved.plus(&inc).min(&q.request);
            if let Some(cap) = &q.capability {
                for i in 0..MAX_RESOURCES {
                    if cap.0[i] > 0 {
                        d.0[i] = d.0[i].min(cap.0[i]);
                    }
                }
            }
            d = d.max(&q.guarantee);
            let capped = q
                .capability
                .is_some_and(|c| (0..MAX_RESOURCES).all(|i| c.0[i] == 0 || d.0[i] >= c.0[i]));
            q.deserved = d;
            if q.request.le(&q.deserved) || capped {
                met.push(name.clone());
            }
        }
        let mut used = Resources::ZERO;
        for q in queues.values() {
            used.add(&q.deserved);
        }
        remaining = total.minus(&used).max(&Resources::ZERO);
        if remaining == before || remaining.is_zero() {
            break;
        }
    }
}

impl Plugin for Proportion {
    fn name(&self) -> &'static str {
        "proportion"
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

impl SessionEvents for Proportion {
    fn opened(&mut self, view: &View) {
        self.total = view.fleet_total();
        for (name, q) in &view.snap.queues {
            self.queues.insert(
                name.clone(),
                QueueAttr {
                    weight: i64::from(q.weight.max(1)),
                    capability: q.capability,
                    guarantee: q.guarantee.unwrap_or_default(),
                    allocated: view
                        .state
                        .queue_allocated
                        .get(name)
                        .copied()
                        .unwrap_or_default(),
                    ..QueueAttr::default()
                },
            );
        }
        for &job in &view.snap.active_jobs {
            let Some(j) = view.job(job) else { continue };
            let Some(q) = self.queues.get_mut(j.queue()) else {
                continue;
            };
            // The session has changed no task yet: what the cache keeps of each job's Pending
            // tasks is what they ask for.
            q.request.add(&j.pending_request);
            if view.state.phase(view.snap, job) == Some(GroupPhase::Inqueue)
                && let Some(min) = j.group.as_ref().and_then(|g| g.min_resources)
            {
                q.inqueue.add(&min);
            }
        }
        // The backlog's jobs hold nothing and are Pending: what they ask, the cache keeps by
        // queue.
        for (name, b) in view.snap.backlog.queues() {
            if let Some(q) = self.queues.get_mut(name) {
                q.request.add(&b.request);
            }
        }
        for q in self.queues.values_mut() {
            q.request.add(&q.allocated);
        }
        water_fill(&self.total, &mut self.queues);
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
            && let Some(q) = self.queues.get_mut(j.queue())
        {
            q.allocated.add(&t.spec.shape.request);
        }
    }

    fn deallocated(&mut self, view: &View, task: Id) {
        if let Some(t) = view.task(task)
            && let Some(j) = view.job(t.job)
            && let Some(q) = self.queues.get_mut(j.queue())
        {
            q.allocated.sub(&t.spec.shape.request);
        }
    }
}
impl QueueOrder for Proportion {
    fn compare(&self, _view: &View, a: &str, b: &str) -> Ordering {
        self.share(a).total_cmp(&self.share(b))
    }
}

impl QueueShare for Proportion {
    fn allocatable(&self, view: &View, queue: &str, task: Id) -> bool {
        let (Some(q), Some(t)) = (self.queues.get(queue), view.task(task)) else {
            return true;
        };
        // Only an explicit capability caps a queue here; without one, node fit decides (the
        // fleet total can be below what is held when nodes shrink under running pods).
        let Some(cap) = &q.capability else {
            return true;
        };
        let req = &t.spec.shape.request;
        let after = q.allocated.plus(req);
        (0..MAX_RESOURCES).all(|i| cap.0[i] <= 0 || req.0[i] <= 0 || after.0[i] <= cap.0[i])
    }

    fn figures(&self, _view: &View, queue: &str) -> Option<QueueFigures> {
        let q = self.queues.get(queue)?;
        Some(QueueFigures {
            request: q.request,
            deserved: q.deserved,
            share: self.share(queue),
        })
    }

    fn overused(&self, _view: &View, queue: &str) -> Option<bool> {
        Some(
            self.queues
                .get(queue)
                .is_some_and(|q| !q.allocated.is_zero() && q.deserved.le(&q.allocated)),
        )
    }

    fn reclaimable(&self, view: &View, victims: &[Id]) -> bool {
        // A victim's queue gives back only what it holds above its deserved share, and never
        // drops below that share of a resource it competes for. Where a queue deserves all it
        // asks for of a resource, no one competes for it: freeing it is no loss to the queue,
        // but it is never a reason to take from the queue either (`above` is the full share).
        victims_keep_floors(view, victims, |q| {
            self.queues.get(q).map(|a| {
                let mut floor = a.deserved;
                for r in 0..MAX_RESOURCES {
                    if a.deserved.0[r] >= a.request.0[r] {
                        floor.0[r] = 0;
                    }
                }
                VictimQueue {
                    allocated: a.allocated,
                    above: a.deserved,
                    floor,
                }
            })
        })
        .unwrap_or(false)
    }

    fn may_reclaim(&self, view: &View, job: Id) -> Option<bool> {
        // A queue reclaims only what it deserves: with the job's remaining need it must stay
        // within its deserved share.
        let j = view.job(job)?;
        let q = self.queues.get(j.queue())?;
        let (need, _) = job_needs(view, job);
        let after = q.allocated.plus(&need);
        Some(
            (0..MAX_RESOURCES)
                .filter(|&r| need.0[r] > 0 && r != PODS)
                .all(|r| after.0[r] <= q.deserved.0[r]),
        )
    }
}

impl EnqueueVote for Proportion {
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
        let want = min.plus(&q.allocated).plus(&q.inqueue);
        if want.fits_in(&q.real_capability(&self.total)).is_ok() {
            Vote::Permit
        } else {
            Vote::Reject
        }
    }

    fn headroom(&self, _view: &View, queue: &str) -> Option<Resources> {
        Some(self.queues.get(queue).map_or(Resources::ZERO, |q| {
            q.real_capability(&self.total)
                .minus(&q.allocated)
                .minus(&q.inqueue)
        }))
    }
}

impl Entitlement for Proportion {
    fn job_entitled(&self, view: &View, job: Id) -> bool {
        let Some(j) = view.job(job) else { return false };
        let Some(min) = j.group.as_ref().and_then(|g| g.min_resources) else {
            return false;
        };
        let Some(q) = self.queues.get(j.queue()) else {
            return false;
        };
        let want = min.plus(&q.allocated).plus(&q.inqueue);
        (0..MAX_RESOURCES).all(|i| min.0[i] <= 0 || want.0[i] <= q.deserved.0[i])
    }

    fn headroom(&self, _view: &View, queue: &str, _priority: i32) -> Option<Resources> {
        Some(self.queues.get(queue).map_or(Resources::ZERO, |q| {
            q.deserved.minus(&q.allocated).minus(&q.inqueue)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(weight: i64, request: i64) -> QueueAttr {
        QueueAttr {
            weight,
            request: Resources::of(0, request),
            ..QueueAttr::default()
        }
    }

    #[test]
    fn water_fill_splits_by_weight_and_redistributes_unused_share() {
        let mut q = BTreeMap::new();
        q.insert("a".to_string(), attr(1, 1000));
        q.insert("b".to_string(), attr(3, 1000));
        water_fill(&Resources::of(0, 400), &mut q);
        assert_eq!(q["a"].deserved.get(0), 100);
        assert_eq!(q["b"].deserved.get(0), 300);

        // A queue that asks for little gives the rest to the others.
        let mut q = BTreeMap::new();
        q.insert("a".to_string(), attr(1, 50));
        q.insert("b".to_string(), attr(1, 1000));
        water_fill(&Resources::of(0, 400), &mut q);
        assert_eq!(q["a"].deserved.get(0), 50);
        assert_eq!(q["b"].deserved.get(0), 350);
    }

    #[test]
    fn guarantee_floors_and_capability_caps_the_deserved_share() {
        let mut q = BTreeMap::new();
        q.insert(
            "a".to_string(),
            QueueAttr {
                guarantee: Resources::of(0, 300),
                ..attr(1, 1000)
            },
        );
        q.insert(
            "b".to_string(),
            QueueAttr {
                capability: Some(Resources::of(0, 50)),
                ..attr(9, 1000)
            },
        );
        water_fill(&Resources::of(0, 400), &mut q);
        assert!(q["a"].deserved.get(0) >= 300);
        assert_eq!(q["b"].deserved.get(0), 50);
    }
}
