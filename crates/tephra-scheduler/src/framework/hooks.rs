//! Hook dispatch: where every plugin hook is called from.
//!
//! [`Hooks`] holds a session's plugin instances in tier order and, for each kind of hook, the
//! list of plugins that implement it and have it enabled (Volcano's `enableXxx` switches). A
//! list is built once when the session opens, so the hot loops (node predicates and scores)
//! touch only the plugins that have something to say. [`Dispatch`] combines the answers across
//! tiers, with Volcano's rules (see [`plugin`](super::plugin)).

use std::cmp::Ordering;

use super::fit::{ClusterUnfit, Room, Unfit};
use super::plugin::{Invalid, Plugin, SessionEvents, Vote};
use super::view::View;
use crate::config::{Enables, on};
use crate::model::{Id, Task};

struct Slot {
    tier: usize,
    plugin: Box<dyn Plugin>,
}

/// Positions of the plugins that take part in each kind of hook, in tier order.
#[derive(Default)]
struct Lists {
    predicate: Vec<usize>,
    node_score: Vec<usize>,
    job_order: Vec<usize>,
    task_order: Vec<usize>,
    queue_order: Vec<usize>,
    job_valid: Vec<usize>,
    job_ready: Vec<usize>,
    job_pipelined: Vec<usize>,
    enqueue_vote: Vec<usize>,
    entitlement: Vec<usize>,
    reservation: Vec<usize>,
    allocatable: Vec<usize>,
    overused: Vec<usize>,
    reclaim: Vec<usize>,
    cluster_filter: Vec<usize>,
    cluster_score: Vec<usize>,
    victim: Vec<usize>,
    events: Vec<usize>,
}

/// A session's plugins and the hooks each takes part in.
pub struct Hooks {
    slots: Vec<Slot>,
    lists: Lists,
}

impl Hooks {
    /// Takes the plugins of each tier, with their enable switches.
    pub fn new(tiers: Vec<Vec<(Enables, Box<dyn Plugin>)>>) -> Self {
        let mut slots = Vec::new();
        let mut lists = Lists::default();
        for (tier, plugins) in tiers.into_iter().enumerate() {
            for (e, mut plugin) in plugins {
                let i = slots.len();
                let p = plugin.as_ref();
                let add = |list: &mut Vec<usize>, has: bool, enabled: bool| {
                    if has && enabled {
                        list.push(i);
                    }
                };
                add(
                    &mut lists.predicate,
                    p.predicate().is_some(),
                    on(e.predicate),
                );
                add(
                    &mut lists.node_score,
                    p.node_scorer().is_some(),
                    on(e.node_order),
                );
                add(
                    &mut lists.job_order,
                    p.job_order().is_some(),
                    on(e.job_order),
                );
                add(
                    &mut lists.task_order,
                    p.task_order().is_some(),
                    on(e.task_order),
                );
                add(
                    &mut lists.queue_order,
                    p.queue_order().is_some(),
                    on(e.queue_order),
                );
                let gang = p.gang_rules().is_some();
                add(&mut lists.job_valid, gang, on(e.job_valid));
                add(&mut lists.job_ready, gang, on(e.job_ready));
                add(&mut lists.job_pipelined, gang, on(e.job_pipelined));
                add(
                    &mut lists.enqueue_vote,
                    p.enqueue_vote().is_some(),
                    on(e.job_enqueued) && on(e.job_enqueueable),
                );
                add(&mut lists.entitlement, p.entitlement().is_some(), true);
                add(&mut lists.reservation, p.reservation().is_some(), true);
                let share = p.queue_share().is_some();
                add(&mut lists.allocatable, share, on(e.allocatable));
                add(&mut lists.overused, share, on(e.overused));
                add(&mut lists.reclaim, share, on(e.reclaimable));
                add(
                    &mut lists.cluster_filter,
                    p.cluster_filter().is_some(),
                    on(e.cluster_filter),
                );
                add(
                    &mut lists.cluster_score,
                    p.cluster_scorer().is_some(),
                    on(e.cluster_score),
                );
                add(
                    &mut lists.victim,
                    p.victim_filter().is_some(),
                    on(e.preemptable) || on(e.reclaimable),
                );
                add(&mut lists.events, plugin.events().is_some(), true);
                slots.push(Slot { tier, plugin });
            }
        }
        Self { slots, lists }
    }

    /// The plugins' names, in tier order.
    pub fn names(&self) -> Vec<&'static str> {
        self.slots.iter().map(|s| s.plugin.name()).collect()
    }

    /// Tells every plugin that follows session events about one.
    pub fn notify(&mut self, event: impl Fn(&mut dyn SessionEvents)) {
        for &i in &self.lists.events {
            if let Some(e) = self.slots[i].plugin.events() {
                event(e);
            }
        }
    }

    /// The answers of the plugins in `list`, in tier order.
    fn each<'s, T: 's>(
        &'s self,
        list: &'s [usize],
        ask: impl Fn(&'s dyn Plugin) -> Option<T> + 's,
    ) -> impl Iterator<Item = T> + 's {
        list.iter()
            .filter_map(move |&i| ask(self.slots[i].plugin.as_ref()))
    }

    /// A vote across tiers: a reject wins at once; otherwise the first tier with a permit says
    /// yes; with no vote at all the answer is yes.
    fn vote(&self, list: &[usize], ask: impl Fn(&dyn Plugin) -> Option<Vote>) -> bool {
        let mut tier = None;
        let mut permitted = false;
        for &i in list {
            let slot = &self.slots[i];
            if tier != Some(slot.tier) {
                if permitted {
                    return true;
                }
                tier = Some(slot.tier);
            }
            match ask(slot.plugin.as_ref()) {
                Some(Vote::Reject) => return false,
                Some(Vote::Permit) => permitted = true,
                Some(Vote::Abstain) | None => {}
            }
        }
        true
    }
}

/// The hooks of a session, bound to its current view: ask them with these methods.
pub struct Dispatch<'a> {
    hooks: &'a Hooks,
    view: View<'a>,
}

/// The first non-equal answer wins.
fn first_non_equal(answers: impl Iterator<Item = Ordering>) -> Ordering {
    for a in answers {
        if a != Ordering::Equal {
            return a;
        }
    }
    Ordering::Equal
}

impl<'a> Dispatch<'a> {
    /// The hooks seen through `view`.
    pub fn new(hooks: &'a Hooks, view: View<'a>) -> Self {
        Self { hooks, view }
    }

    /// The view the hooks see.
    pub fn view(&self) -> &View<'a> {
        &self.view
    }

    /// Queue order across tiers.
    pub fn queue_order(&self, a: &str, b: &str) -> Ordering {
        let v = &self.view;
        first_non_equal(self.hooks.each(&self.hooks.lists.queue_order, |p| {
            p.queue_order().map(|o| o.compare(v, a, b))
        }))
    }

    /// Job order across tiers, falling back to creation time and name.
    pub fn job_order(&self, a: Id, b: Id) -> Ordering {
        let v = &self.view;
        first_non_equal(self.hooks.each(&self.hooks.lists.job_order, |p| {
            p.job_order().map(|o| o.compare(v, a, b))
        }))
        .then_with(|| {
            let key = |j: Id| {
                v.job(j)
                    .map(|job| (job.group.as_ref().map_or(0, |g| g.created), job.key.clone()))
            };
            key(a).cmp(&key(b))
        })
    }

    /// Task order across tiers, falling back to role and index.
    pub fn task_order(&self, a: Id, b: Id) -> Ordering {
        let v = &self.view;
        first_non_equal(self.hooks.each(&self.hooks.lists.task_order, |p| {
            p.task_order().map(|o| o.compare(v, a, b))
        }))
        .then_with(|| {
            let key = |t: Id| {
                v.task(t)
                    .map(|t| (t.spec.shape.role.as_str(), t.spec.index, t.key.as_str()))
            };
            key(a).cmp(&key(b))
        })
    }

    /// The first reason a job is invalid, if any.
    pub fn job_valid(&self, job: Id) -> Result<(), Invalid> {
        let v = &self.view;
        for r in self.hooks.each(&self.hooks.lists.job_valid, |p| {
            p.gang_rules().map(|g| g.job_valid(v, job))
        }) {
            r?;
        }
        Ok(())
    }

    /// Whether a Pending job may be admitted: the votes allow it, or a plugin entitles it.
    pub fn job_enqueueable(&self, job: Id) -> bool {
        let v = &self.view;
        self.hooks.vote(&self.hooks.lists.enqueue_vote, |p| {
            p.enqueue_vote().map(|e| e.job_enqueueable(v, job))
        }) || {
            // A job its queue's deserved share can hold is admitted even when the fleet is
            // full: otherwise a queue coming back from idle could never reclaim its share.
            self.hooks
                .each(&self.hooks.lists.entitlement, |p| {
                    p.entitlement().map(|e| e.job_entitled(v, job))
                })
                .any(|yes| yes)
        }
    }

    /// Whether a job's partial placement may be kept as pipelined.
    pub fn job_pipelined(&self, job: Id) -> bool {
        let v = &self.view;
        self.hooks.vote(&self.hooks.lists.job_pipelined, |p| {
            p.gang_rules().map(|g| g.job_pipelined(v, job))
        })
    }

    /// Whether a job that does not fit keeps its partial placement as a reservation.
    pub fn job_reserves(&self, job: Id) -> bool {
        let v = &self.view;
        self.hooks
            .each(&self.hooks.lists.reservation, |p| {
                p.reservation().map(|r| r.job_reserves(v, job))
            })
            .any(|yes| yes)
    }

    /// Whether a job is ready to bind: every plugin with gang rules must agree.
    pub fn job_ready(&self, job: Id) -> bool {
        let v = &self.view;
        self.hooks
            .each(&self.hooks.lists.job_ready, |p| {
                p.gang_rules().map(|g| g.job_ready(v, job))
            })
            .all(|yes| yes)
    }

    /// Whether the queue may take the task now.
    pub fn allocatable(&self, queue: &str, task: Id) -> bool {
        let v = &self.view;
        self.hooks
            .each(&self.hooks.lists.allocatable, |p| {
                p.queue_share().map(|s| s.allocatable(v, queue, task))
            })
            .all(|yes| yes)
    }

    /// Whether a queue is over its share.
    pub fn overused(&self, queue: &str) -> bool {
        let v = &self.view;
        self.hooks
            .each(&self.hooks.lists.overused, |p| {
                p.queue_share().and_then(|s| s.overused(v, queue))
            })
            .any(|yes| yes)
    }

    /// All predicates ANDed.
    #[inline]
    pub fn predicate(&self, task: &Task, node: Id) -> Result<(), Unfit> {
        for &i in &self.hooks.lists.predicate {
            if let Some(p) = self.hooks.slots[i].plugin.predicate() {
                p.check(&self.view, task, node)?;
            }
        }
        Ok(())
    }

    /// All node scores summed.
    #[inline]
    pub fn node_score(&self, task: &Task, node: Id) -> f64 {
        let mut total = 0.0;
        for &i in &self.hooks.lists.node_score {
            if let Some(s) = self.hooks.slots[i].plugin.node_scorer() {
                total += s.score(&self.view, task, node);
            }
        }
        total
    }

    /// All cluster filters ANDed; the first refusal that counts is returned. While room is
    /// being made, a refusal that evictions could resolve does not count.
    pub fn cluster_filter(&self, job: Id, cluster: Id, room: Room) -> Result<(), ClusterUnfit> {
        let v = &self.view;
        for r in self.hooks.each(&self.hooks.lists.cluster_filter, |p| {
            p.cluster_filter().map(|f| f.filter(v, job, cluster, room))
        }) {
            match r {
                Err(why) if room == Room::Making && why.resolvable => {}
                other => other?,
            }
        }
        Ok(())
    }

    /// Cluster scores summed over plugins.
    pub fn cluster_scores(&self, job: Id, clusters: &[Id]) -> Vec<f64> {
        let v = &self.view;
        let mut scores = vec![0.0; clusters.len()];
        for &i in &self.hooks.lists.cluster_score {
            if let Some(s) = self.hooks.slots[i].plugin.cluster_scorer() {
                s.score(v, job, clusters, &mut scores);
            }
        }
        scores
    }

    /// Whether evicting `victims` (running tasks of other queues) for reclaim keeps every
    /// victim queue at or above the share it may keep. With no plugin defining shares, nothing
    /// is reclaimable.
    pub fn reclaimable(&self, victims: &[Id]) -> bool {
        let v = &self.view;
        consent(self.hooks.each(&self.hooks.lists.reclaim, |p| {
            p.queue_share().map(|s| Some(s.reclaimable(v, victims)))
        }))
    }

    /// Whether `job`'s queue may reclaim for it: every plugin with an opinion must agree, and
    /// with none nothing is reclaimed.
    pub fn may_reclaim(&self, job: Id) -> bool {
        let v = &self.view;
        consent(self.hooks.each(&self.hooks.lists.reclaim, |p| {
            p.queue_share().map(|s| s.may_reclaim(v, job))
        }))
    }

    /// Whether a task may be evicted for others.
    pub fn victim_allowed(&self, task: Id) -> bool {
        let v = &self.view;
        self.hooks
            .each(&self.hooks.lists.victim, |p| {
                p.victim_filter().map(|f| f.allows(v, task))
            })
            .all(|yes| yes)
    }
}

/// Yes when at least one plugin says yes and none says no.
fn consent(opinions: impl Iterator<Item = Option<bool>>) -> bool {
    let mut opinion = None;
    for o in opinions {
        match o {
            Some(false) => return false,
            Some(true) => opinion = Some(true),
            None => {}
        }
    }
    opinion.unwrap_or(false)
}
