//! The plugin framework: the hooks a plugin may implement (each with a neutral default) and
//! the read-only view of session state they see.
//!
//! Hooks combine across tiers as in Volcano: for orderings the first plugin with a non-equal
//! answer wins; predicates and filters are ANDed; scores are summed; votes (enqueueable,
//! pipelined) follow permit/reject/abstain: a reject wins at once, otherwise the first tier with
//! a permit decides, and if nobody votes the answer is yes.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use crate::cache::Snapshot;
use crate::model::{Id, Job, Node, Task, TaskStatus};
use crate::resources::Resources;
use crate::session::State;

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

/// Why a task does not fit a node. Compact, so that counting reasons over thousands of nodes
/// costs no allocation; rendered only for messages.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unfit {
    /// The node is cordoned.
    Unschedulable,
    /// The node is not Ready.
    NotReady,
    /// nodeSelector or required node affinity does not match.
    Selector,
    /// The node has a NoSchedule/NoExecute taint the pod does not tolerate.
    Taint(String),
    /// Not enough of a resource (slot index).
    Insufficient(usize),
    /// The node's pod slots are full.
    TooManyPods,
    /// A plugin-specific reason.
    Other(&'static str),
}

impl Unfit {
    /// Human-readable reason in kube-scheduler's words.
    pub fn render(&self, names: &crate::resources::ResourceNames) -> String {
        match self {
            Self::Unschedulable => "node(s) were unschedulable".into(),
            Self::NotReady => "node(s) were not ready".into(),
            Self::Selector => "node(s) didn't match Pod's node affinity/selector".into(),
            Self::Taint(t) => format!("node(s) had untolerated taint {{{t}}}"),
            Self::Insufficient(slot) => format!("Insufficient {}", names.name(*slot)),
            Self::TooManyPods => "Too many pods".into(),
            Self::Other(s) => (*s).to_string(),
        }
    }
}

/// Counts of reasons why nodes were rejected, for one cluster. The common reasons are plain
/// counters, so recording one costs no lookup.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FitErrors {
    /// Nodes looked at.
    pub nodes: u32,
    common: [u32; 4],
    insufficient: [u32; crate::resources::MAX_RESOURCES],
    other: BTreeMap<Unfit, u32>,
}

impl FitErrors {
    /// Records one rejected node.
    #[inline]
    pub fn add(&mut self, reason: Unfit) {
        self.add_n(reason, 1);
    }

    /// Records `n` nodes rejected for the same reason.
    pub fn add_n(&mut self, reason: Unfit, n: u32) {
        match reason {
            Unfit::Unschedulable => self.common[0] += n,
            Unfit::NotReady => self.common[1] += n,
            Unfit::Selector => self.common[2] += n,
            Unfit::TooManyPods => self.common[3] += n,
            Unfit::Insufficient(slot) if slot < self.insufficient.len() => {
                self.insufficient[slot] += n
            }
            other => {
                if n > 0 {
                    *self.other.entry(other).or_insert(0) += n;
                }
            }
        }
    }

    /// Every reason with its count.
    pub fn reasons(&self) -> BTreeMap<Unfit, u32> {
        let mut all = self.other.clone();
        let common = [
            Unfit::Unschedulable,
            Unfit::NotReady,
            Unfit::Selector,
            Unfit::TooManyPods,
        ];
        for (r, n) in common.into_iter().zip(self.common) {
            if n > 0 {
                all.insert(r, n);
            }
        }
        for (slot, n) in self.insufficient.iter().enumerate() {
            if *n > 0 {
                all.insert(Unfit::Insufficient(slot), *n);
            }
        }
        all
    }

    /// `0/500 nodes are available: 400 Insufficient nvidia.com/gpu, 100 ...`
    pub fn render(&self, names: &crate::resources::ResourceNames) -> String {
        let mut parts: Vec<(u32, String)> = self
            .reasons()
            .iter()
            .map(|(r, n)| (*n, r.render(names)))
            .collect();
        parts.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let list = parts
            .iter()
            .map(|(n, r)| format!("{n} {r}"))
            .collect::<Vec<_>>()
            .join(", ");
        if list.is_empty() {
            format!("{} node(s) looked at, none free", self.nodes)
        } else {
            format!("0/{} nodes are available: {list}", self.nodes)
        }
    }
}

/// Read-only view of a session, handed to every hook.
pub struct View<'a> {
    /// The snapshot.
    pub snap: &'a Snapshot,
    /// Session-local state.
    pub state: &'a State,
    /// Virtual or wall time in seconds, as given to the session.
    pub now: i64,
}

/// The scalar task counts of a job, memoized per session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    ready: u32,
    pipelined: u32,
    pending: u32,
    valid: u32,
}

/// Per-job task counts in the session. The per-role maps are filled only for jobs with
/// per-role minimums (`minTaskMember`), the only ones that need them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobCounts<'a> {
    /// Tasks counting as ready (Allocated, Binding, Bound, Running, Succeeded).
    pub ready: u32,
    /// Tasks pipelined.
    pub pipelined: u32,
    /// Tasks pending.
    pub pending: u32,
    /// Tasks that can still take part (everything but Failed and Unknown).
    pub valid: u32,
    /// Ready tasks per role.
    pub ready_by_role: BTreeMap<&'a str, u32>,
    /// Ready or pipelined tasks per role.
    pub waiting_by_role: BTreeMap<&'a str, u32>,
    /// All tasks per role.
    pub total_by_role: BTreeMap<&'a str, u32>,
}

impl<'a> View<'a> {
    /// The job in slot `id`.
    pub fn job(&self, id: Id) -> Option<&Job> {
        self.snap.jobs.get(id)
    }

    /// The task in slot `id`.
    pub fn task(&self, id: Id) -> Option<&Task> {
        self.snap.tasks.get(id)
    }

    /// The node in slot `id`.
    pub fn node(&self, id: Id) -> Option<&Node> {
        self.snap.nodes.get(id)
    }

    /// The session status of a task.
    pub fn status(&self, id: Id) -> TaskStatus {
        self.state.status(self.snap, id)
    }

    /// The node a task holds or is planned on in this session.
    pub fn task_node(&self, id: Id) -> Option<Id> {
        self.state.task_node(self.snap, id)
    }

    /// Free resources of a node now (allocatable minus held).
    pub fn idle(&self, node: Id) -> Resources {
        self.state.nodes[node as usize].idle
    }

    /// Resources of a node free once releasing tasks finish, less what is pipelined.
    pub fn future_idle(&self, node: Id) -> Resources {
        self.state.nodes[node as usize].future_idle()
    }

    /// Counts the job's tasks by session status.
    pub fn counts(&self, job: Id) -> JobCounts<'a> {
        let mut c = JobCounts::default();
        let snap: &'a Snapshot = self.snap;
        let Some(j) = snap.jobs.get(job) else {
            return c;
        };
        let by_role = j
            .group
            .as_ref()
            .is_some_and(|g| !g.min_task_member.is_empty());
        if !by_role && let Some(Some(t)) = self.state.counts_cache.borrow().get(job as usize) {
            return JobCounts {
                ready: t.ready,
                pipelined: t.pipelined,
                pending: t.pending,
                valid: t.valid,
                ..JobCounts::default()
            };
        }
        for &t in &j.tasks {
            let Some(task) = snap.tasks.get(t) else {
                continue;
            };
            let role = task.spec.shape.role.as_str();
            let s = self.status(t);
            if by_role {
                *c.total_by_role.entry(role).or_insert(0) += 1;
            }
            if s.is_ready() {
                c.ready += 1;
                if by_role {
                    *c.ready_by_role.entry(role).or_insert(0) += 1;
                }
            }
            if s == TaskStatus::Pipelined {
                c.pipelined += 1;
            }
            if by_role && s.is_ready_or_pipelined() {
                *c.waiting_by_role.entry(role).or_insert(0) += 1;
            }
            if s == TaskStatus::Pending {
                c.pending += 1;
            }
            if !matches!(s, TaskStatus::Failed | TaskStatus::Unknown) {
                c.valid += 1;
            }
        }
        if !by_role && let Some(slot) = self.state.counts_cache.borrow_mut().get_mut(job as usize) {
            *slot = Some(Totals {
                ready: c.ready,
                pipelined: c.pipelined,
                pending: c.pending,
                valid: c.valid,
            });
        }
        c
    }

    /// Priority of a job.
    pub fn job_priority(&self, job: Id) -> i32 {
        self.job(job).map_or(0, |j| self.snap.job_priority(j))
    }

    /// Priority of a task.
    pub fn task_priority(&self, task: Id) -> i32 {
        self.task(task).map_or(0, |t| self.snap.task_priority(t))
    }
}

/// Why a job cannot be scheduled at all this session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// One-word CamelCase reason (Volcano's, where one exists).
    pub reason: &'static str,
    /// Human-readable detail.
    pub message: String,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

/// A scheduler plugin. Implement only the hooks you need.
#[allow(unused_variables)]
pub trait Plugin: Send {
    /// The plugin's configured name.
    fn name(&self) -> &'static str;

    /// Called once when a session opens, before any action.
    fn on_session_open(&mut self, view: &View) {}

    /// Queue order: `Less` means `a` goes first.
    fn queue_order(&self, view: &View, a: &str, b: &str) -> Ordering {
        Ordering::Equal
    }

    /// Job order within a queue: `Less` means `a` goes first.
    fn job_order(&self, view: &View, a: Id, b: Id) -> Ordering {
        Ordering::Equal
    }

    /// Task order within a job: `Less` means `a` goes first.
    fn task_order(&self, view: &View, a: Id, b: Id) -> Ordering {
        Ordering::Equal
    }

    /// Whether a job can be scheduled at all.
    fn job_valid(&self, view: &View, job: Id) -> Result<(), Invalid> {
        Ok(())
    }

    /// Whether a Pending job may be admitted (Inqueue).
    fn job_enqueueable(&self, view: &View, job: Id) -> Vote {
        Vote::Abstain
    }

    /// Whether a Pending job is entitled to admission whatever the votes say, because its
    /// queue's deserved share can hold it (reclaim then makes room for it).
    fn job_entitled(&self, view: &View, job: Id) -> bool {
        false
    }

    /// Whether a job that cannot be placed whole keeps what it can get as a reservation
    /// (pipelined), so that later jobs cannot take it.
    fn job_reserves(&self, view: &View, job: Id) -> bool {
        false
    }

    /// Whether a job is ready to bind (`None`: no opinion).
    fn job_ready(&self, view: &View, job: Id) -> Option<bool> {
        None
    }

    /// Whether a job's partial placement may be kept as pipelined.
    fn job_pipelined(&self, view: &View, job: Id) -> Vote {
        Vote::Abstain
    }

    /// Whether a queue may take `task` now.
    fn allocatable(&self, view: &View, queue: &str, task: Id) -> bool {
        true
    }

    /// Whether a queue is over its share (its jobs are skipped this session).
    fn overused(&self, view: &View, queue: &str) -> bool {
        false
    }

    /// Whether this plugin implements [`Plugin::predicate`]; the hot loop skips those that
    /// do not. Defaults to true; plugins without a predicate say false.
    fn has_predicate(&self) -> bool {
        true
    }

    /// Whether this plugin implements [`Plugin::node_score`] (see [`Plugin::has_predicate`]).
    fn has_node_score(&self) -> bool {
        true
    }

    /// Whether `task` may run on `node`.
    fn predicate(&self, view: &View, task: &Task, node: Id) -> Result<(), Unfit> {
        Ok(())
    }

    /// How good `node` is for `task` (higher is better).
    fn node_score(&self, view: &View, task: &Task, node: Id) -> f64 {
        0.0
    }

    /// Whether a job may be placed in `cluster`.
    fn cluster_filter(&self, view: &View, job: Id, cluster: Id) -> Result<(), String> {
        Ok(())
    }

    /// Adds this plugin's score for each candidate cluster into `scores`.
    fn cluster_scores(&self, view: &View, job: Id, clusters: &[Id], scores: &mut [f64]) {}

    /// Whether `victim` may be evicted to make room for others (preempt and reclaim).
    fn victim_allowed(&self, view: &View, victim: Id) -> bool {
        true
    }

    /// Whether evicting `victims` (for reclaim) keeps their queues at or above their
    /// deserved share (`None`: no opinion).
    fn reclaimable(&self, view: &View, victims: &[Id]) -> Option<bool> {
        None
    }

    /// Whether a waiting job's queue may reclaim for it (`None`: no opinion).
    fn may_reclaim(&self, view: &View, job: Id) -> Option<bool> {
        None
    }

    /// A Pending job was admitted (Inqueue) in the session.
    fn on_job_enqueued(&mut self, view: &View, job: Id) {}

    /// A task was allocated or pipelined in the session.
    fn on_allocate(&mut self, view: &View, task: Id) {}

    /// An allocation was undone in the session.
    fn on_deallocate(&mut self, view: &View, task: Id) {}
}

/// Compares two items by the tiers' hooks: the first non-equal answer wins.
pub(crate) fn first_non_equal<'a>(answers: impl Iterator<Item = Ordering> + 'a) -> Ordering {
    for a in answers {
        if a != Ordering::Equal {
            return a;
        }
    }
    Ordering::Equal
}
