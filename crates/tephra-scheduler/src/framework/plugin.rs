//! What a plugin is: a name and the hooks it implements, nothing else.
//!
//! Each kind of hook is a small trait of its own ([`Predicate`], [`NodeScorer`],
//! [`DomainScorer`], [`JobOrder`],
//! [`QueueShare`], ...). A plugin implements the ones it needs and returns itself from the
//! matching accessor of [`Plugin`]; every accessor it does not write answers `None`, so a plugin
//! never declares what it does not do. When a session opens, [`Hooks`](super::hooks::Hooks)
//! asks each plugin once and keeps a typed list per kind of hook, in tier order; dispatch walks
//! only those lists.
//!
//! Hooks combine across tiers as in Volcano: for orderings the first plugin with a non-equal
//! answer wins; predicates and filters are ANDed; scores are summed; votes (enqueueable,
//! pipelined) follow permit/reject/abstain: a reject wins at once, otherwise the first tier with
//! a permit decides, and if nobody votes the answer is yes.

use std::cmp::Ordering;

use super::fit::{ClusterUnfit, Room, Unfit};
use super::view::View;
pub use crate::decisions::QueueFigures;
use crate::model::{Id, Task};
use crate::resources::Resources;

/// A vote on a yes/no question.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vote {
    /// Yes, unless another plugin rejects.
    Permit,
    /// No, whatever others say.
    Reject,
    /// No opinion.
    Abstain,
}

/// Why a job cannot be scheduled at all this session.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Invalid {
    /// One-word CamelCase reason (Volcano's, where one exists; see `tephra_api::reasons`).
    pub reason: &'static str,
    /// Human-readable detail.
    pub message: String,
}

/// Whether a task may run on a node (kube-scheduler's filter).
pub trait Predicate {
    /// `Ok` when `task` may run on `node`, or why not.
    fn check(&self, view: &View, task: &Task, node: Id) -> Result<(), Unfit>;
}

/// How good a node is for a task (kube-scheduler's score; higher is better).
pub trait NodeScorer {
    /// The score of `node` for `task`.
    fn score(&self, view: &View, task: &Task, node: Id) -> f64;
}

/// How good a network-topology domain (a HyperNode) is for a gang or sub-group asking
/// `request` in all (Volcano's HyperNodeOrder; higher is better). Placement tries the domains a
/// gang may go to in this order.
pub trait DomainScorer {
    /// The score of domain `domain` of cluster `cluster`.
    fn score(
        &self,
        view: &View,
        cluster: Id,
        domain: usize,
        request: &crate::resources::Resources,
    ) -> f64;
}

/// The order of jobs within a queue.
pub trait JobOrder {
    /// `Less` when job `a` goes first.
    fn compare(&self, view: &View, a: Id, b: Id) -> Ordering;

    /// Whether this order ties any two jobs of one queue and one priority that are Pending
    /// with every pod Pending, changed by nothing this session (as the jobs in the cache's
    /// backlog are: `cache/backlog.rs`). When every order says so, the backlog's own order
    /// (creation time, then name) is the job order among them, and a session need not sort
    /// them. `false` (the default) when the answer may depend on anything else, such as the
    /// time.
    fn ties_waiting(&self) -> bool {
        false
    }
}

/// The order of tasks within a job.
pub trait TaskOrder {
    /// `Less` when task `a` goes first.
    fn compare(&self, view: &View, a: Id, b: Id) -> Ordering;
}

/// The order of queues.
pub trait QueueOrder {
    /// `Less` when queue `a` goes first.
    fn compare(&self, view: &View, a: &str, b: &str) -> Ordering;
}

/// Gang rules: when a job may be scheduled at all, when it is ready to bind, and when a partial
/// placement may be kept as pipelined.
pub trait GangRules {
    /// Whether the job can be scheduled at all.
    fn job_valid(&self, view: &View, job: Id) -> Result<(), Invalid>;
    /// Whether the job is ready to bind.
    fn job_ready(&self, view: &View, job: Id) -> bool;
    /// Whether the job's partial placement may be kept as pipelined.
    fn job_pipelined(&self, view: &View, job: Id) -> Vote;
}

/// A vote on admitting a Pending job (Pending → Inqueue).
pub trait EnqueueVote {
    /// This plugin's vote on admitting `job`.
    fn job_enqueueable(&self, view: &View, job: Id) -> Vote;

    /// The most a job of `queue` may ask (its minResources) for this plugin to permit it now,
    /// if the plugin can say: a job asking for more is rejected, and admissions later in the
    /// session only lower it. `None`: no such bound.
    fn headroom(&self, _view: &View, _queue: &str) -> Option<Resources> {
        None
    }
}

/// An entitlement to admission whatever the votes say (a queue's deserved share can hold the
/// job, lower-priority work could make room, the job waited past its SLA).
pub trait Entitlement {
    /// Whether `job` is admitted regardless of the votes.
    fn job_entitled(&self, view: &View, job: Id) -> bool;

    /// The most a job of `queue` at `priority` may ask (its minResources) to be entitled now,
    /// if the plugin can say: a job asking for more is not, and admissions later in the
    /// session only lower it. `None`: no such bound.
    fn headroom(&self, _view: &View, _queue: &str, _priority: i32) -> Option<Resources> {
        None
    }
}

/// Reservation: a job that cannot be placed whole keeps what it can get as pipelined, so that
/// later jobs cannot take it.
pub trait Reservation {
    /// Whether `job` reserves.
    fn job_reserves(&self, view: &View, job: Id) -> bool;
}

/// A queue share provider: what each queue may hold, and when resources may move between
/// queues (proportion, capacity).
pub trait QueueShare {
    /// Whether `queue` may take `task` now (it stays within its capabilities).
    fn allocatable(&self, view: &View, queue: &str, task: Id) -> bool;
    /// Whether `queue` is over its share (its jobs wait this session). `None`: this provider
    /// does not judge overuse.
    fn overused(&self, view: &View, queue: &str) -> Option<bool>;
    /// Whether evicting `victims` (for reclaim) keeps their queues at or above the share they
    /// may keep.
    fn reclaimable(&self, view: &View, victims: &[Id]) -> bool;
    /// Whether `job`'s queue may reclaim for it (`None`: no opinion).
    fn may_reclaim(&self, view: &View, job: Id) -> Option<bool>;
    /// What this provider computed for `queue` (for queue status and metrics). `None`: it
    /// keeps no such figures.
    fn figures(&self, _view: &View, _queue: &str) -> Option<QueueFigures> {
        None
    }
}

/// Whether a job may be placed in a cluster.
pub trait ClusterFilter {
    /// `Ok`, or why `job` may not go to `cluster`. With [`Room::Making`] a refusal that
    /// evictions could resolve does not count, so a filter may skip checking for one.
    fn filter(&self, view: &View, job: Id, cluster: Id, room: Room) -> Result<(), ClusterUnfit>;
}

/// How good each candidate cluster is for a job.
pub trait ClusterScorer {
    /// Adds this plugin's score of each of `clusters` into `scores`.
    fn score(&self, view: &View, job: Id, clusters: &[Id], scores: &mut [f64]);
}

/// Which running tasks may be evicted to make room for others (preempt and reclaim).
pub trait VictimFilter {
    /// Whether `victim` may be evicted.
    fn allows(&self, view: &View, victim: Id) -> bool;
    /// Whether `victims` may all be evicted together (each was allowed alone).
    fn allows_together(&self, view: &View, victims: &[Id]) -> bool {
        let _ = (view, victims);
        true
    }
}

/// A time at which a plugin's verdict on a job changes with nothing else happening (a waiting
/// time running out). A simulator that runs sessions only when something changes runs one
/// then, as the runtime's periodic sessions would notice it.
pub trait Deadline {
    /// The next such time for `job` after `view.now`, in seconds, if any.
    fn due(&self, view: &View, job: Id) -> Option<i64>;
}

/// What happens in a session, for plugins that keep state. Each event has a no-op default: a
/// plugin writes the ones it follows.
#[allow(unused_variables)]
pub trait SessionEvents {
    /// The session opened; called once, before any action.
    fn opened(&mut self, view: &View) {}
    /// A Pending job was admitted (Inqueue).
    fn job_enqueued(&mut self, view: &View, job: Id) {}
    /// An admitted job went back to Pending: it no longer holds admission budget.
    fn job_dequeued(&mut self, view: &View, job: Id) {}
    /// A task was allocated or pipelined (the view shows it on its node).
    fn allocated(&mut self, view: &View, task: Id) {}
    /// An allocation was undone, or a running task evicted (the view still shows it on its
    /// node).
    fn deallocated(&mut self, view: &View, task: Id) {}
}

/// A scheduler plugin: its name and the hooks it implements. Write the accessor of each kind of
/// hook the plugin has, returning `Some(self)`; leave the others out.
pub trait Plugin: Send {
    /// The plugin's configured name.
    fn name(&self) -> &'static str;

    /// Its node filter.
    fn predicate(&self) -> Option<&dyn Predicate> {
        None
    }
    /// Its network-topology domain score.
    fn domain_scorer(&self) -> Option<&dyn DomainScorer> {
        None
    }
    /// Its node score.
    fn node_scorer(&self) -> Option<&dyn NodeScorer> {
        None
    }
    /// Its job order.
    fn job_order(&self) -> Option<&dyn JobOrder> {
        None
    }
    /// Its task order.
    fn task_order(&self) -> Option<&dyn TaskOrder> {
        None
    }
    /// Its queue order.
    fn queue_order(&self) -> Option<&dyn QueueOrder> {
        None
    }
    /// Its gang rules.
    fn gang_rules(&self) -> Option<&dyn GangRules> {
        None
    }
    /// Its vote on admission.
    fn enqueue_vote(&self) -> Option<&dyn EnqueueVote> {
        None
    }
    /// Its entitlement to admission.
    fn entitlement(&self) -> Option<&dyn Entitlement> {
        None
    }
    /// Its reservation rule.
    fn reservation(&self) -> Option<&dyn Reservation> {
        None
    }
    /// Its queue shares.
    fn queue_share(&self) -> Option<&dyn QueueShare> {
        None
    }
    /// Its cluster filter.
    fn cluster_filter(&self) -> Option<&dyn ClusterFilter> {
        None
    }
    /// Its cluster score.
    fn cluster_scorer(&self) -> Option<&dyn ClusterScorer> {
        None
    }
    /// Its victim filter.
    fn victim_filter(&self) -> Option<&dyn VictimFilter> {
        None
    }
    /// Its deadlines.
    fn deadline(&self) -> Option<&dyn Deadline> {
        None
    }
    /// The session events it follows.
    fn events(&mut self) -> Option<&mut dyn SessionEvents> {
        None
    }
}
