//! Hook dispatch: where every plugin hook is called from.
//!
//! [`Hooks`] holds a session's plugin instances in tier order and, for each kind of hook, the
//! list of plugins that implement it and have it enabled (Volcano's `enableXxx` switches). A
//! list is built once when the session opens, so the hot loops (node predicates and scores)
//! touch only the plugins that have something to say. [`Dispatch`] combines the answers across
//! tiers, with Volcano's rules (see [`plugin`](super::plugin)).

use std::cmp::Ordering;

use super::fit::{ClusterUnfit, Room, Unfit};
use super::plugin::{Invalid, Plugin, QueueFigures, SessionEvents, Vote};
use super::view::View;
use crate::config::{Enables, on};
use crate::model::{Id, Task};
use crate::resources::Resources;

struct Slot {
    tier: usize,
    plugin: Box<dyn Plugin>,
}

/// The kinds of hook, each with its list of plugins.
#[derive(Clone, Copy)]
enum Kind {
    Predicate,
    NodeScore,
    DomainScore,
    JobOrder,
    TaskOrder,
    QueueOrder,
    JobValid,
    JobReady,
    JobPipelined,
    EnqueueVote,
    Entitlement,
    Reservation,
    Allocatable,
    Overused,
    Reclaim,
    ClusterFilter,
    ClusterScore,
    Victim,
    Deadline,
    Events,
}

const KINDS: usize = Kind::Events as usize + 1;

/// Which kinds of hook a plugin takes part in, given what it implements and what its enable
/// switches allow (Volcano's `enableXxx`).
fn kinds(p: &mut dyn Plugin, e: &Enables) -> [bool; KINDS] {
    let mut k = [false; KINDS];
    let gang = p.gang_rules().is_some();
    let share = p.queue_share().is_some();
    k[Kind::Predicate as usize] = p.predicate().is_some() && on(e.predicate);
    k[Kind::NodeScore as usize] = p.node_scorer().is_some() && on(e.node_order);
    k[Kind::DomainScore as usize] = p.domain_scorer().is_some() && on(e.hyper_node_order);
    k[Kind::JobOrder as usize] = p.job_order().is_some() && on(e.job_order);
    k[Kind::TaskOrder as usize] = p.task_order().is_some() && on(e.task_order);
    k[Kind::QueueOrder as usize] = p.queue_order().is_some() && on(e.queue_order);
    k[Kind::JobValid as usize] = gang && on(e.job_valid);
    k[Kind::JobReady as usize] = gang && on(e.job_ready);
    k[Kind::JobPipelined as usize] = gang && on(e.job_pipelined);
    k[Kind::EnqueueVote as usize] =
        p.enqueue_vote().is_some() && on(e.job_enqueued) && on(e.job_enqueueable);
    // Entitlement is part of admission: the same switches turn it off.
    k[Kind::Entitlement as usize] =
        p.entitlement().is_some() && on(e.job_enqueued) && on(e.job_enqueueable);
    k[Kind::Reservation as usize] = p.reservation().is_some();
    k[Kind::Allocatable as usize] = share && on(e.allocatable);
    k[Kind::Overused as usize] = share && on(e.overused);
    k[Kind::Reclaim as usize] = share && on(e.reclaimable);
    k[Kind::ClusterFilter as usize] = p.cluster_filter().is_some() && on(e.cluster_filter);
    k[Kind::ClusterScore as usize] = p.cluster_scorer().is_some() && on(e.cluster_score);
    k[Kind::Victim as usize] =
        p.victim_filter().is_some() && (on(e.preemptable) || on(e.reclaimable));
    k[Kind::Deadline as usize] = p.deadline().is_some();
    k[Kind::Events as usize] = p.events().is_some();
    k
}

/// A session's plugins and the hooks each takes part in.
pub struct Hooks {
    slots: Vec<Slot>,
    /// The positions of the plugins taking part in each kind of hook, in tier order, one kind
    /// after the other (one allocation per session).
    order: Vec<u16>,
    /// Where each kind's positions are in `order`.
    ranges: [(u16, u16); KINDS],
}

impl Hooks {
    /// Takes the plugins of each tier, with their enable switches.
    pub fn new(tiers: Vec<Vec<(Enables, Box<dyn Plugin>)>>) -> Self {
        let mut slots = Vec::new();
        let mut taking = Vec::new();
        for (tier, plugins) in tiers.into_iter().enumerate() {
            for (e, mut plugin) in plugins {
                taking.push(kinds(plugin.as_mut(), &e));
                slots.push(Slot { tier, plugin });
            }
        }
        // More plugins than positions fit a u16 cannot be configured meaningfully; the rest
        // take part in nothing rather than wrap around.
        let n = slots.len().min(usize::from(u16::MAX));
        let mut order = Vec::new();
        let mut ranges = [(0u16, 0u16); KINDS];
        for (kind, range) in ranges.iter_mut().enumerate() {
            let start = order.len();
            order.extend((0..n).filter(|&i| taking[i][kind]).map(|i| i as u16));
            *range = (start as u16, order.len() as u16);
        }
        Self {
            slots,
            order,
            ranges,
        }
    }

    /// The positions of the plugins taking part in `kind`, in tier order.
    #[inline]
    fn list(&self, kind: Kind) -> &[u16] {
        let (a, b) = self.ranges[kind as usize];
        self.order
            .get(usize::from(a)..usize::from(b))
            .unwrap_or_default()
    }

    /// The plugins' names, in tier order.
    pub fn names(&self) -> Vec<&'static str> {
        self.slots.iter().map(|s| s.plugin.name()).collect()
    }

    /// Tells every plugin that follows session events about one.
    pub fn notify(&mut self, event: impl Fn(&mut dyn SessionEvents)) {
        let (a, b) = self.ranges[Kind::Events as usize];
        for k in usize::from(a)..usize::from(b) {
            let i = usize::from(self.order[k]);
            if let Some(e) = self.slots[i].plugin.events() {
                event(e);
            }
        }
    }

    /// [`Hooks::notify`], calling `observe(plugin, true)` before and `observe(plugin, false)`
    /// after each plugin (for a runtime that times them).
    pub fn notify_observed(
        &mut self,
        event: impl Fn(&mut dyn SessionEvents),
        observe: &mut dyn FnMut(&'static str, bool),
    ) {
        let (a, b) = self.ranges[Kind::Events as usize];
        for k in usize::from(a)..usize::from(b) {
            let i = usize::from(self.order[k]);
            let name = self.slots[i].plugin.name();
            if let Some(e) = self.slots[i].plugin.events() {
                observe(name, true);
                event(e);
                observe(name, false);
            }
        }
    }

    /// The answers of the plugins taking part in `kind`, in tier order.
    fn each<'s, T: 's>(
        &'s self,
        kind: Kind,
        ask: impl Fn(&'s dyn Plugin) -> Option<T> + 's,
    ) -> impl Iterator<Item = T> + 's {
        self.list(kind)
            .iter()
            .filter_map(move |&i| ask(self.slots[usize::from(i)].plugin.as_ref()))
    }

    /// A vote across tiers: a reject wins at once; otherwise the first tier with a permit says
    /// yes; with no vote at all the answer is yes.
    fn vote(&self, kind: Kind, ask: impl Fn(&dyn Plugin) -> Option<Vote>) -> bool {
        let mut tier = None;
        let mut permitted = false;
        for &i in self.list(kind) {
            let slot = &self.slots[usize::from(i)];
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
    #[inline]
    pub fn new(hooks: &'a Hooks, view: View<'a>) -> Self {
        Self { hooks, view }
    }

    /// The view the hooks see.
    #[inline]
    pub fn view(&self) -> &View<'a> {
        &self.view
    }

    /// Queue order across tiers.
    pub fn queue_order(&self, a: &str, b: &str) -> Ordering {
        let v = &self.view;
        first_non_equal(self.hooks.each(Kind::QueueOrder, |p| {
            p.queue_order().map(|o| o.compare(v, a, b))
        }))
    }

    /// Job order across tiers, falling back to creation time and name.
    pub fn job_order(&self, a: Id, b: Id) -> Ordering {
        let v = &self.view;
        first_non_equal(self.hooks.each(Kind::JobOrder, |p| {
            p.job_order().map(|o| o.compare(v, a, b))
        }))
        .then_with(|| {
            let key = |j: Id| {
                v.job(j).map(|job| {
                    (
                        job.group.as_ref().map_or(0, |g| g.created),
                        job.key.as_str(),
                    )
                })
            };
            key(a).cmp(&key(b))
        })
    }

    /// Whether every job order ties the jobs of one queue and priority that the cache's backlog
    /// holds ([`JobOrder::ties_waiting`](super::plugin::JobOrder::ties_waiting)): then their
    /// order is the backlog's.
    pub fn job_order_ties_waiting(&self) -> bool {
        self.hooks
            .each(Kind::JobOrder, |p| p.job_order().map(|o| o.ties_waiting()))
            .all(|yes| yes)
    }

    /// Task order across tiers, falling back to role and index.
    pub fn task_order(&self, a: Id, b: Id) -> Ordering {
        let v = &self.view;
        first_non_equal(self.hooks.each(Kind::TaskOrder, |p| {
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
        for r in self.hooks.each(Kind::JobValid, |p| {
            p.gang_rules().map(|g| g.job_valid(v, job))
        }) {
            r?;
        }
        Ok(())
    }

    /// Whether a Pending job may be admitted: the votes allow it, or a plugin entitles it.
    pub fn job_enqueueable(&self, job: Id) -> bool {
        let v = &self.view;
        self.hooks.vote(Kind::EnqueueVote, |p| {
            p.enqueue_vote().map(|e| e.job_enqueueable(v, job))
        }) || {
            // A job its queue's deserved share can hold is admitted even when the fleet is
            // full: otherwise a queue coming back from idle could never reclaim its share.
            self.hooks
                .each(Kind::Entitlement, |p| {
                    p.entitlement().map(|e| e.job_entitled(v, job))
                })
                .any(|yes| yes)
        }
    }

    /// The most a job of `queue` at `priority` may ask (its minResources) to be admitted now,
    /// if the plugins can say (`None`: they cannot). The votes are bounded by the first tier
    /// that votes, which is always asked whole; an entitlement without a bound leaves the job
    /// unbounded. Admissions later in the session only lower it.
    pub fn admission_headroom(&self, queue: &str, priority: i32) -> Option<Resources> {
        let v = &self.view;
        let hooks = self.hooks;
        let voters = hooks.list(Kind::EnqueueVote);
        let first_tier = voters.first().map(|&i| hooks.slots[usize::from(i)].tier);
        let mut votes: Option<Resources> = None;
        for &i in voters {
            let slot = &hooks.slots[usize::from(i)];
            if Some(slot.tier) != first_tier {
                break;
            }
            if let Some(room) = slot
                .plugin
                .enqueue_vote()
                .and_then(|e| e.headroom(v, queue))
            {
                votes = Some(votes.map_or(room, |b| b.min(&room)));
            }
        }
        let mut bound = votes?;
        for &i in hooks.list(Kind::Entitlement) {
            let plugin = hooks.slots[usize::from(i)].plugin.as_ref();
            let room = plugin
                .entitlement()
                .and_then(|e| e.headroom(v, queue, priority))?;
            bound = bound.max(&room);
        }
        Some(bound)
    }

    /// Whether a job's partial placement may be kept as pipelined.
    pub fn job_pipelined(&self, job: Id) -> bool {
        let v = &self.view;
        self.hooks.vote(Kind::JobPipelined, |p| {
            p.gang_rules().map(|g| g.job_pipelined(v, job))
        })
    }

    /// Whether a job that does not fit keeps its partial placement as a reservation.
    pub fn job_reserves(&self, job: Id) -> bool {
        let v = &self.view;
        self.hooks
            .each(Kind::Reservation, |p| {
                p.reservation().map(|r| r.job_reserves(v, job))
            })
            .any(|yes| yes)
    }

    /// Whether a job is ready to bind: every plugin with gang rules must agree.
    pub fn job_ready(&self, job: Id) -> bool {
        let v = &self.view;
        self.hooks
            .each(Kind::JobReady, |p| {
                p.gang_rules().map(|g| g.job_ready(v, job))
            })
            .all(|yes| yes)
    }

    /// The first queue share provider's figures for `queue`, with whether it is overused.
    pub fn queue_figures(&self, queue: &str) -> Option<(QueueFigures, bool)> {
        let v = &self.view;
        let figures = self
            .hooks
            .each(Kind::Overused, |p| {
                p.queue_share().and_then(|s| s.figures(v, queue))
            })
            .next()?;
        Some((figures, self.overused(queue)))
    }

    /// Whether the queue may take the task now.
    pub fn allocatable(&self, queue: &str, task: Id) -> bool {
        let v = &self.view;
        self.hooks
            .each(Kind::Allocatable, |p| {
                p.queue_share().map(|s| s.allocatable(v, queue, task))
            })
            .all(|yes| yes)
    }

    /// Whether a queue is over its share.
    pub fn overused(&self, queue: &str) -> bool {
        let v = &self.view;
        self.hooks
            .each(Kind::Overused, |p| {
                p.queue_share().and_then(|s| s.overused(v, queue))
            })
            .any(|yes| yes)
    }

    /// All predicates ANDed.
    #[inline]
    pub fn predicate(&self, task: &Task, node: Id) -> Result<(), Unfit> {
        for &i in self.hooks.list(Kind::Predicate) {
            if let Some(p) = self.hooks.slots[usize::from(i)].plugin.predicate() {
                p.check(&self.view, task, node)?;
            }
        }
        Ok(())
    }

    /// All node scores summed.
    #[inline]
    pub fn node_score(&self, task: &Task, node: Id) -> f64 {
        self.hooks
            .list(Kind::NodeScore)
            .iter()
            .filter_map(|&i| self.hooks.slots[usize::from(i)].plugin.node_scorer())
            .map(|s| s.score(&self.view, task, node))
            .sum()
    }

    /// Domain scores summed over plugins, or `None` when no plugin scores domains (placement
    /// then keeps its own order, tightest first).
    pub fn domain_score(
        &self,
        cluster: Id,
        domain: usize,
        request: &crate::resources::Resources,
    ) -> Option<f64> {
        let list = self.hooks.list(Kind::DomainScore);
        if list.is_empty() {
            return None;
        }
        Some(
            list.iter()
                .filter_map(|&i| self.hooks.slots[usize::from(i)].plugin.domain_scorer())
                .map(|s| s.score(&self.view, cluster, domain, request))
                .sum(),
        )
    }

    /// All cluster filters ANDed; the first refusal that counts is returned. While room is
    /// being made, a refusal that evictions could resolve does not count.
    pub fn cluster_filter(&self, job: Id, cluster: Id, room: Room) -> Result<(), ClusterUnfit> {
        let v = &self.view;
        for r in self.hooks.each(Kind::ClusterFilter, |p| {
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
        for &i in self.hooks.list(Kind::ClusterScore) {
            if let Some(s) = self.hooks.slots[usize::from(i)].plugin.cluster_scorer() {
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
        consent(self.hooks.each(Kind::Reclaim, |p| {
            p.queue_share().map(|s| Some(s.reclaimable(v, victims)))
        }))
    }

    /// Whether `job`'s queue may reclaim for it: every plugin with an opinion must agree, and
    /// with none nothing is reclaimed.
    pub fn may_reclaim(&self, job: Id) -> bool {
        let v = &self.view;
        consent(self.hooks.each(Kind::Reclaim, |p| {
            p.queue_share().map(|s| s.may_reclaim(v, job))
        }))
    }

    /// Whether a task may be evicted for others.
    pub fn victim_allowed(&self, task: Id) -> bool {
        let v = &self.view;
        self.hooks
            .each(Kind::Victim, |p| {
                p.victim_filter().map(|f| f.allows(v, task))
            })
            .all(|yes| yes)
    }

    /// Whether all of `tasks` may be evicted together (a budget may allow each alone but not
    /// all at once).
    pub fn victims_allowed(&self, tasks: &[Id]) -> bool {
        let v = &self.view;
        self.hooks
            .each(Kind::Victim, |p| {
                p.victim_filter().map(|f| f.allows_together(v, tasks))
            })
            .all(|yes| yes)
    }
}

impl Dispatch<'_> {
    /// Whether some plugin has verdicts that change with time ([`Dispatch::due`]).
    pub fn has_deadlines(&self) -> bool {
        !self.hooks.list(Kind::Deadline).is_empty()
    }

    /// The earliest time after now at which a plugin's verdict on `job` changes by itself.
    pub fn due(&self, job: Id) -> Option<i64> {
        let v = &self.view;
        self.hooks
            .each(Kind::Deadline, |p| p.deadline().and_then(|d| d.due(v, job)))
            .filter(|t| *t > v.now)
            .min()
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
