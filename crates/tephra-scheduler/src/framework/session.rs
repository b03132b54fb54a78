//! A scheduling session: open on a snapshot, run the configured actions, close into
//! [`Decisions`].
//!
//! The session never copies the world. Its mutable state is a per-node accounting vector
//! (copied from the snapshot's maintained totals, O(nodes)) plus an overlay of the tasks the
//! session touches. Every change goes through a [`Statement`], which is committed or discarded
//! as a unit: that is how a gang is all-or-nothing.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::cache::Snapshot;
use crate::config::{SchedulerConfig, on};
use crate::decisions::{Bind, Condition, Decisions, Eviction, GroupStatus, JobEvent, QueueStatus};
use crate::framework::{Invalid, Plugin, Unfit, View, Vote, first_non_equal};
use crate::model::{GroupPhase, Id, QueueState, Task, TaskStatus};
use crate::resources::{PODS, Resources};

/// Accounting of one node within a session.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NodeState {
    /// Allocatable minus everything held (including this session's allocations).
    pub idle: Resources,
    /// Held by releasing tasks.
    pub releasing: Resources,
    /// Reserved by pipelined tasks.
    pub pipelined: Resources,
}

impl NodeState {
    /// Free once releasing tasks finish, less what is pipelined.
    #[inline]
    pub fn future_idle(&self) -> Resources {
        self.idle.plus(&self.releasing).minus(&self.pipelined)
    }
}

/// Session-local state.
#[derive(Clone, Debug, Default)]
pub struct State {
    /// Per node slot.
    pub nodes: Vec<NodeState>,
    overlay: HashMap<Id, (TaskStatus, Option<Id>)>,
    /// Sum of future idle per cluster slot.
    pub cluster_future_idle: Vec<Resources>,
    /// Upper bound of any single node's future idle per cluster slot (only shrinks during a
    /// session, so it never prunes a cluster that could fit).
    pub cluster_max_node_idle: Vec<Resources>,
    /// Resources held by each queue, including this session's allocations.
    pub queue_allocated: BTreeMap<String, Resources>,
    /// PodGroup phases changed in this session (enqueue).
    pub phases: HashMap<Id, GroupPhase>,
    /// Sum of allocatable per cluster slot.
    pub cluster_allocatable: Vec<Resources>,
    /// Nodes of each cluster slot in classes by which extended resources they offer, classes
    /// without extended resources first.
    pub node_classes: Vec<Vec<NodeClass>>,
    /// Set while preempt or reclaim look for room: clusters are not pruned by what is free,
    /// since evictions will free more.
    pub making_room: bool,
    /// Memoized task counts of jobs without per-role minimums, dropped whenever one of the
    /// job's tasks changes in the session. Orderings ask for them many times per sort.
    pub(crate) counts_cache: std::cell::RefCell<Vec<Option<crate::framework::Totals>>>,
}

/// Nodes of one cluster that offer the same set of extended resources (GPUs, ...).
#[derive(Clone, Debug, Default)]
pub struct NodeClass {
    /// Bit `i` set when the nodes offer slot `i` (extended slots only).
    pub mask: u32,
    /// Node slots.
    pub nodes: Vec<Id>,
    /// Where the next scan starts (round robin, as kube-scheduler does).
    pub start: usize,
}

/// The extended-resource bit mask of a vector: bit `i` for every slot `i >= 3` above zero.
pub fn extended_mask(r: &Resources) -> u32 {
    (3..crate::resources::MAX_RESOURCES)
        .filter(|i| r.get(*i) > 0)
        .fold(0, |m, i| m | (1 << i))
}

impl State {
    /// The session status of a task.
    pub fn status(&self, snap: &Snapshot, id: Id) -> TaskStatus {
        match self.overlay.get(&id) {
            Some((s, _)) => *s,
            None => snap
                .tasks
                .get(id)
                .map_or(TaskStatus::Unknown, |t| t.spec.status),
        }
    }

    /// The node of a task in this session.
    pub fn task_node(&self, snap: &Snapshot, id: Id) -> Option<Id> {
        match self.overlay.get(&id) {
            Some((_, n)) => *n,
            None => snap.tasks.get(id).and_then(|t| t.node),
        }
    }

    /// The phase of a job's PodGroup in this session.
    pub fn phase(&self, snap: &Snapshot, job: Id) -> Option<GroupPhase> {
        self.phases.get(&job).copied().or_else(|| {
            snap.jobs
                .get(job)
                .and_then(|j| j.group.as_ref().map(|g| g.phase))
        })
    }
}

/// One recorded change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// A task placed on a node's free resources.
    Allocate {
        /// Task.
        task: Id,
        /// Node.
        node: Id,
    },
    /// A task reserved on resources being released.
    Pipeline {
        /// Task.
        task: Id,
        /// Node.
        node: Id,
    },
    /// A running task evicted to make room; its resources become releasing.
    Evict {
        /// Task.
        task: Id,
        /// Node it holds.
        node: Id,
        /// Index of the reason in the session's reason list.
        reason: usize,
        /// The task's session overlay before the eviction, restored on undo.
        prev: Option<(TaskStatus, Option<Id>)>,
    },
}

/// Changes recorded for one unit of work (a gang). Commit or discard it through the session.
#[derive(Debug, Default)]
#[must_use = "a statement must be committed or discarded"]
pub struct Statement {
    ops: Vec<Op>,
}

impl Statement {
    /// A new, empty statement.
    pub fn new() -> Self {
        Self::default()
    }

    /// The recorded changes.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// What the session learned about a job, for its status and events.
#[derive(Clone, Debug, Default)]
pub(crate) struct JobNote {
    pub attempted: bool,
    pub invalid: Option<Invalid>,
    pub message: Option<String>,
    pub reason: Option<&'static str>,
    pub placed_in: Option<String>,
    pub scheduled: bool,
}

struct Slot {
    enables: crate::config::Enables,
    plugin: Box<dyn Plugin>,
}

/// A scheduling session.
pub struct Session {
    /// The snapshot the session works on.
    pub snap: Snapshot,
    /// Session-local state.
    pub state: State,
    /// The time the session runs at, in seconds.
    pub now: i64,
    /// Session number, used as the PodGroup condition transition ID.
    pub id: u64,
    config: Arc<SchedulerConfig>,
    tiers: Vec<Vec<Slot>>,
    predicate_slots: Vec<(usize, usize)>,
    score_slots: Vec<(usize, usize)>,
    binds: Vec<Bind>,
    pipelined: Vec<Bind>,
    evictions: Vec<Eviction>,
    reasons: Vec<String>,
    pub(crate) notes: BTreeMap<Id, JobNote>,
}

impl Session {
    /// Opens a session: O(nodes) to build the accounting vector, no copy of pods.
    pub fn open(snap: Snapshot, config: Arc<SchedulerConfig>, now: i64, id: u64) -> Self {
        let mut state = State {
            nodes: vec![NodeState::default(); snap.nodes.capacity()],
            cluster_future_idle: vec![Resources::ZERO; snap.clusters.capacity()],
            cluster_max_node_idle: vec![Resources::ZERO; snap.clusters.capacity()],
            queue_allocated: snap.queue_used.clone(),
            cluster_allocatable: vec![Resources::ZERO; snap.clusters.capacity()],
            node_classes: vec![Vec::new(); snap.clusters.capacity()],
            counts_cache: std::cell::RefCell::new(vec![None; snap.jobs.capacity()]),
            ..State::default()
        };
        for (id, node) in snap.nodes.iter() {
            let mut alloc = node.spec.allocatable;
            if alloc.get(PODS) == 0 {
                alloc.set(PODS, 110);
            }
            let ns = NodeState {
                idle: alloc.minus(&node.used),
                releasing: node.releasing,
                pipelined: Resources::ZERO,
            };
            let c = node.cluster as usize;
            state.cluster_allocatable[c].add(&alloc);
            // An over-used node (allocatable shrank under running pods) offers nothing, and
            // must not hide what other nodes of the cluster have free.
            let fi = ns.future_idle().max(&Resources::ZERO);
            state.cluster_future_idle[c].add(&fi);
            state.cluster_max_node_idle[c] = state.cluster_max_node_idle[c].max(&fi);
            state.nodes[id as usize] = ns;
        }
        for (cluster, nodes) in snap.cluster_nodes.iter().enumerate() {
            let mut classes: Vec<NodeClass> = Vec::new();
            for &n in nodes {
                let Some(node) = snap.nodes.get(n) else {
                    continue;
                };
                let mask = extended_mask(&node.spec.allocatable);
                match classes.iter_mut().find(|c| c.mask == mask) {
                    Some(c) => c.nodes.push(n),
                    None => classes.push(NodeClass {
                        mask,
                        nodes: vec![n],
                        start: 0,
                    }),
                }
            }
            classes.sort_by_key(|c| (c.mask.count_ones(), c.mask));
            if let Some(slot) = state.node_classes.get_mut(cluster) {
                *slot = classes;
            }
        }
        let mut tiers = Vec::new();
        for tier in &config.tiers {
            let mut slots = Vec::new();
            for p in tier {
                // Arguments were validated when the config was parsed.
                if let Ok(plugin) = crate::plugins::build(p) {
                    slots.push(Slot {
                        enables: p.enables.clone(),
                        plugin,
                    });
                }
            }
            tiers.push(slots);
        }
        let hot = |want: fn(&Slot) -> bool| -> Vec<(usize, usize)> {
            tiers
                .iter()
                .enumerate()
                .flat_map(|(t, tier)| {
                    tier.iter()
                        .enumerate()
                        .filter(move |(_, s)| want(s))
                        .map(move |(i, _)| (t, i))
                })
                .collect()
        };
        let predicate_slots = hot(|s| on(s.enables.predicate) && s.plugin.has_predicate());
        let score_slots = hot(|s| on(s.enables.node_order) && s.plugin.has_node_score());
        let mut ssn = Self {
            snap,
            state,
            now,
            id,
            config,
            tiers,
            predicate_slots,
            score_slots,
            binds: Vec::new(),
            pipelined: Vec::new(),
            evictions: Vec::new(),
            reasons: Vec::new(),
            notes: BTreeMap::new(),
        };
        let view = View {
            snap: &ssn.snap,
            state: &ssn.state,
            now,
        };
        for slot in ssn.tiers.iter_mut().flatten() {
            slot.plugin.on_session_open(&view);
        }
        ssn
    }

    /// Runs the configured actions in order.
    pub fn run(&mut self) {
        let config = Arc::clone(&self.config);
        for name in &config.actions {
            crate::actions::execute(name, self, &config.action_args(name));
        }
    }

    /// The read-only view handed to plugins.
    pub fn view(&self) -> View<'_> {
        View {
            snap: &self.snap,
            state: &self.state,
            now: self.now,
        }
    }

    fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.tiers.iter().flatten()
    }

    // ---- hook dispatch ---------------------------------------------------------------------

    /// Queue order across tiers.
    pub fn queue_order(&self, a: &str, b: &str) -> Ordering {
        let v = self.view();
        first_non_equal(
            self.slots()
                .filter(|s| on(s.enables.queue_order))
                .map(|s| s.plugin.queue_order(&v, a, b)),
        )
    }

    /// Job order across tiers, falling back to creation time and name.
    pub fn job_order(&self, a: Id, b: Id) -> Ordering {
        let v = self.view();
        first_non_equal(
            self.slots()
                .filter(|s| on(s.enables.job_order))
                .map(|s| s.plugin.job_order(&v, a, b)),
        )
        .then_with(|| {
            let key = |j: Id| {
                self.snap
                    .jobs
                    .get(j)
                    .map(|job| (job.group.as_ref().map_or(0, |g| g.created), job.key.clone()))
            };
            key(a).cmp(&key(b))
        })
    }

    /// Task order across tiers, falling back to role and index.
    pub fn task_order(&self, a: Id, b: Id) -> Ordering {
        let v = self.view();
        first_non_equal(
            self.slots()
                .filter(|s| on(s.enables.task_order))
                .map(|s| s.plugin.task_order(&v, a, b)),
        )
        .then_with(|| {
            let key = |t: Id| {
                self.snap
                    .tasks
                    .get(t)
                    .map(|t| (t.spec.shape.role.as_str(), t.spec.index, t.key.as_str()))
            };
            key(a).cmp(&key(b))
        })
    }

    /// The first reason a job is invalid, if any.
    pub fn job_valid(&self, job: Id) -> Result<(), Invalid> {
        let v = self.view();
        for s in self.slots().filter(|s| on(s.enables.job_valid)) {
            s.plugin.job_valid(&v, job)?;
        }
        Ok(())
    }

    fn vote(
        &self,
        f: impl Fn(&dyn Plugin, &View) -> Vote,
        enabled: impl Fn(&Slot) -> bool,
    ) -> bool {
        let v = self.view();
        for tier in &self.tiers {
            let mut permitted = false;
            for s in tier.iter().filter(|s| enabled(s)) {
                match f(s.plugin.as_ref(), &v) {
                    Vote::Reject => return false,
                    Vote::Permit => permitted = true,
                    Vote::Abstain => {}
                }
            }
            if permitted {
                return true;
            }
        }
        true
    }

    /// Whether a Pending job may be admitted.
    pub fn job_enqueueable(&self, job: Id) -> bool {
        self.vote(
            |p, v| p.job_enqueueable(v, job),
            |s| on(s.enables.job_enqueued) && on(s.enables.job_enqueueable),
        ) || {
            // A job its queue's deserved share can hold is admitted even when the fleet is
            // full: otherwise a queue coming back from idle could never reclaim its share.
            let v = self.view();
            self.slots().any(|s| s.plugin.job_entitled(&v, job))
        }
    }

    /// Whether a job's partial placement may be kept as pipelined.
    pub fn job_pipelined(&self, job: Id) -> bool {
        self.vote(
            |p, v| p.job_pipelined(v, job),
            |s| on(s.enables.job_pipelined),
        )
    }

    /// Whether a job that does not fit keeps its partial placement as a reservation.
    pub fn job_reserves(&self, job: Id) -> bool {
        let v = self.view();
        self.slots().any(|s| s.plugin.job_reserves(&v, job))
    }

    /// Whether a job is ready to bind: every plugin with an opinion must agree.
    pub fn job_ready(&self, job: Id) -> bool {
        let v = self.view();
        self.slots()
            .filter(|s| on(s.enables.job_ready))
            .all(|s| s.plugin.job_ready(&v, job) != Some(false))
    }

    /// Whether the queue may take the task now.
    pub fn allocatable(&self, queue: &str, task: Id) -> bool {
        let v = self.view();
        self.slots()
            .filter(|s| on(s.enables.allocatable))
            .all(|s| s.plugin.allocatable(&v, queue, task))
    }

    /// Whether a queue is over its share.
    pub fn overused(&self, queue: &str) -> bool {
        let v = self.view();
        self.slots()
            .filter(|s| on(s.enables.overused))
            .any(|s| s.plugin.overused(&v, queue))
    }

    /// All predicates ANDed.
    #[inline]
    pub fn predicate(&self, task: &Task, node: Id) -> Result<(), Unfit> {
        let v = self.view();
        for &(t, i) in &self.predicate_slots {
            self.tiers[t][i].plugin.predicate(&v, task, node)?;
        }
        Ok(())
    }

    /// All node scores summed.
    #[inline]
    pub fn node_score(&self, task: &Task, node: Id) -> f64 {
        let v = self.view();
        self.score_slots
            .iter()
            .map(|&(t, i)| self.tiers[t][i].plugin.node_score(&v, task, node))
            .sum()
    }

    /// All cluster filters ANDed; the first refusal is returned.
    pub fn cluster_filter(&self, job: Id, cluster: Id) -> Result<(), String> {
        let v = self.view();
        for s in self.slots().filter(|s| on(s.enables.cluster_filter)) {
            s.plugin.cluster_filter(&v, job, cluster)?;
        }
        Ok(())
    }

    /// Cluster scores summed over plugins.
    pub fn cluster_scores(&self, job: Id, clusters: &[Id]) -> Vec<f64> {
        let v = self.view();
        let mut scores = vec![0.0; clusters.len()];
        for s in self.slots().filter(|s| on(s.enables.cluster_score)) {
            s.plugin.cluster_scores(&v, job, clusters, &mut scores);
        }
        scores
    }

    /// Whether evicting `victims` (running tasks of other queues) for reclaim keeps every
    /// victim queue at or above its deserved share. With no plugin defining shares, nothing
    /// is reclaimable.
    pub fn reclaimable(&self, victims: &[Id]) -> bool {
        self.reclaim_consent(|p, v| p.reclaimable(v, victims))
    }

    /// Whether `job`'s queue may reclaim for it: every plugin with an opinion must agree, and
    /// with none nothing is reclaimed.
    pub fn may_reclaim(&self, job: Id) -> bool {
        self.reclaim_consent(|p, v| p.may_reclaim(v, job))
    }

    /// Yes when at least one reclaim-enabled plugin says yes and none says no.
    fn reclaim_consent(&self, f: impl Fn(&dyn Plugin, &View) -> Option<bool>) -> bool {
        let v = self.view();
        let mut opinion = None;
        for s in self.slots().filter(|s| on(s.enables.reclaimable)) {
            match f(s.plugin.as_ref(), &v) {
                Some(false) => return false,
                Some(true) => opinion = Some(true),
                None => {}
            }
        }
        opinion.unwrap_or(false)
    }

    /// Whether a task may be evicted for others.
    pub fn victim_allowed(&self, task: Id) -> bool {
        let v = self.view();
        self.slots()
            .filter(|s| on(s.enables.preemptable) || on(s.enables.reclaimable))
            .all(|s| s.plugin.victim_allowed(&v, task))
    }

    // ---- statements ------------------------------------------------------------------------

    fn queue_of_task(&self, task: Id) -> String {
        self.snap
            .tasks
            .get(task)
            .and_then(|t| self.snap.jobs.get(t.job))
            .map(|j| j.queue().to_string())
            .unwrap_or_default()
    }

    /// Tells every plugin about an event, with the current view.
    fn notify(&mut self, event: impl Fn(&mut dyn Plugin, &View)) {
        let view = View {
            snap: &self.snap,
            state: &self.state,
            now: self.now,
        };
        for slot in self.tiers.iter_mut().flatten() {
            event(slot.plugin.as_mut(), &view);
        }
    }

    fn forget_counts(&mut self, task: Id) {
        if let Some(t) = self.snap.tasks.get(task)
            && let Some(slot) = self.state.counts_cache.get_mut().get_mut(t.job as usize)
        {
            *slot = None;
        }
    }

    fn apply_evict(
        &mut self,
        task: Id,
        node: Id,
        prev: Option<(TaskStatus, Option<Id>)>,
        sign: i64,
    ) {
        let Some(t) = self.snap.tasks.get(task) else {
            return;
        };
        let req = t.spec.shape.request.times(sign);
        let cluster = self.snap.nodes.get(node).map_or(0, |n| n.cluster) as usize;
        let queue = self.queue_of_task(task);
        // Plugins see the task on its node, as it was, for both directions.
        if sign > 0 {
            self.notify(|p, v| p.on_deallocate(v, task));
        }
        self.forget_counts(task);
        let ns = &mut self.state.nodes[node as usize];
        ns.releasing.add(&req);
        let future = ns.future_idle();
        self.state.cluster_future_idle[cluster].add(&req);
        if sign > 0 {
            // The bound must stay an upper bound of any node's future idle.
            self.state.cluster_max_node_idle[cluster] =
                self.state.cluster_max_node_idle[cluster].max(&future);
            self.state
                .overlay
                .insert(task, (TaskStatus::Releasing, Some(node)));
        } else {
            match prev {
                Some(p) => self.state.overlay.insert(task, p),
                None => self.state.overlay.remove(&task),
            };
        }
        self.forget_counts(task);
        self.state
            .queue_allocated
            .entry(queue)
            .or_default()
            .sub(&req);
        if sign < 0 {
            self.notify(|p, v| p.on_allocate(v, task));
        }
    }

    fn apply(&mut self, op: &Op, sign: i64) {
        let (task, node, pipelined) = match *op {
            Op::Allocate { task, node } => (task, node, false),
            Op::Pipeline { task, node } => (task, node, true),
            Op::Evict {
                task, node, prev, ..
            } => return self.apply_evict(task, node, prev, sign),
        };
        let Some(t) = self.snap.tasks.get(task) else {
            return;
        };
        let req = t.spec.shape.request.times(sign);
        let cluster = self.snap.nodes.get(node).map_or(0, |n| n.cluster) as usize;
        let ns = &mut self.state.nodes[node as usize];
        if pipelined {
            ns.pipelined.add(&req);
        } else {
            ns.idle.sub(&req);
        }
        self.state.cluster_future_idle[cluster].sub(&req);
        let queue = self.queue_of_task(task);
        self.state
            .queue_allocated
            .entry(queue)
            .or_default()
            .add(&req);
        if sign > 0 {
            let status = if pipelined {
                TaskStatus::Pipelined
            } else {
                TaskStatus::Allocated
            };
            self.state.overlay.insert(task, (status, Some(node)));
        }
        // Counts are forgotten whenever the overlay changes, so that a plugin asking for
        // them in a hook never caches a stale answer.
        self.forget_counts(task);
        // Plugins see the task on its node for both events; the overlay entry is dropped
        // after a deallocation has been reported.
        if sign > 0 {
            self.notify(|p, v| p.on_allocate(v, task));
        } else {
            self.notify(|p, v| p.on_deallocate(v, task));
        }
        if sign < 0 {
            self.state.overlay.remove(&task);
            self.forget_counts(task);
        }
    }

    /// Places `task` on `node`: on free resources, or pipelined onto resources being released.
    pub fn allocate(&mut self, stmt: &mut Statement, task: Id, node: Id, pipelined: bool) {
        let op = if pipelined {
            Op::Pipeline { task, node }
        } else {
            Op::Allocate { task, node }
        };
        self.apply(&op, 1);
        stmt.ops.push(op);
    }

    /// Evicts a running `task` to make room, for `reason`. Its resources count as releasing, so
    /// placements in the same statement can be pipelined onto them.
    pub fn evict(&mut self, stmt: &mut Statement, task: Id, reason: &str) {
        let Some(node) = self.state.task_node(&self.snap, task) else {
            return;
        };
        if !self.state.status(&self.snap, task).holds_node() {
            return;
        }
        let reason_idx = match self.reasons.iter().position(|r| r == reason) {
            Some(i) => i,
            None => {
                self.reasons.push(reason.to_string());
                self.reasons.len() - 1
            }
        };
        let op = Op::Evict {
            task,
            node,
            reason: reason_idx,
            prev: self.state.overlay.get(&task).copied(),
        };
        self.apply(&op, 1);
        stmt.ops.push(op);
    }

    /// Undoes every change of the statement, newest first.
    pub fn discard(&mut self, stmt: Statement) {
        for op in stmt.ops.iter().rev() {
            self.apply(op, -1);
        }
    }

    /// Keeps the statement's changes. Allocations become binds when `bind` is true (the gang
    /// is ready); otherwise everything is kept as pipelined (reserved, not bound).
    pub fn commit(&mut self, stmt: Statement, bind: bool) {
        for op in stmt.ops {
            let (task, node, was_pipelined) = match op {
                Op::Allocate { task, node } => (task, node, false),
                Op::Pipeline { task, node } => (task, node, true),
                Op::Evict {
                    task, node, reason, ..
                } => {
                    self.record_eviction(task, node, reason);
                    continue;
                }
            };
            let Some(t) = self.snap.tasks.get(task) else {
                continue;
            };
            let Some(n) = self.snap.nodes.get(node) else {
                continue;
            };
            let cluster = self
                .snap
                .clusters
                .get(n.cluster)
                .map(|c| c.name.clone())
                .unwrap_or_default();
            let job = self
                .snap
                .jobs
                .get(t.job)
                .map(|j| j.key.clone())
                .unwrap_or_default();
            let decision = Bind {
                job,
                task: t.key.clone(),
                role: t.spec.shape.role.clone(),
                cluster,
                node: n.spec.name.clone(),
            };
            if bind && !was_pipelined {
                self.state
                    .overlay
                    .insert(task, (TaskStatus::Binding, Some(node)));
                self.binds.push(decision);
            } else {
                self.state
                    .overlay
                    .insert(task, (TaskStatus::Pipelined, Some(node)));
                self.pipelined.push(decision);
            }
            self.forget_counts(task);
        }
    }

    fn record_eviction(&mut self, task: Id, node: Id, reason: usize) {
        let Some(t) = self.snap.tasks.get(task) else {
            return;
        };
        let cluster = self
            .snap
            .nodes
            .get(node)
            .and_then(|n| self.snap.clusters.get(n.cluster))
            .map(|c| c.name.clone())
            .unwrap_or_default();
        let job = self
            .snap
            .jobs
            .get(t.job)
            .map(|j| j.key.clone())
            .unwrap_or_default();
        self.evictions.push(Eviction {
            job,
            task: t.key.clone(),
            cluster,
            reason: self.reasons.get(reason).cloned().unwrap_or_default(),
        });
    }

    /// Tells the plugins a job was admitted.
    pub fn job_enqueued(&mut self, job: Id) {
        self.notify(|p, v| p.on_job_enqueued(v, job));
    }

    pub(crate) fn note(&mut self, job: Id) -> &mut JobNote {
        self.notes.entry(job).or_default()
    }

    /// Sets a PodGroup's phase for the rest of the session.
    pub fn set_phase(&mut self, job: Id, phase: GroupPhase) {
        self.state.phases.insert(job, phase);
    }

    // ---- close -----------------------------------------------------------------------------

    /// Ends the session and returns its decisions.
    pub fn close(self) -> Decisions {
        let view = self.view();
        let mut groups = Vec::new();
        let mut new_phase: HashMap<Id, GroupPhase> = HashMap::new();
        let mut events = Vec::new();
        let mut touched: Vec<Id> = self.snap.active_jobs.iter().copied().collect();
        touched.extend(self.notes.keys().copied());
        touched.extend(self.snap.changed_jobs.iter().copied());
        touched.sort_unstable();
        touched.dedup();
        for job_id in touched {
            let Some(job) = self.snap.jobs.get(job_id) else {
                continue;
            };
            let Some(group) = &job.group else { continue };
            let counts = view.counts(job_id);
            let running = job
                .tasks
                .iter()
                .filter(|t| view.status(**t) == TaskStatus::Running)
                .count() as u32;
            let succeeded = job
                .tasks
                .iter()
                .filter(|t| view.status(**t) == TaskStatus::Succeeded)
                .count() as u32;
            let failed = job
                .tasks
                .iter()
                .filter(|t| view.status(**t) == TaskStatus::Failed)
                .count() as u32;
            let old = self.state.phase(&self.snap, job_id).unwrap_or(group.phase);
            let min = job.min_member();
            let allocated = counts.ready - succeeded;
            let phase = if succeeded >= min && counts.pending == 0 && allocated == 0 {
                GroupPhase::Completed
            } else if allocated + succeeded >= min && old != GroupPhase::Pending {
                GroupPhase::Running
            } else if matches!(old, GroupPhase::Running | GroupPhase::Unknown) && running > 0 {
                GroupPhase::Unknown
            } else {
                old
            };
            let note = self.notes.get(&job_id);
            let mut conditions = Vec::new();
            if let Some(note) = note {
                if note.scheduled {
                    conditions.push(Condition {
                        kind: "Scheduled",
                        status: true,
                        reason: "Scheduled".into(),
                        message: note.message.clone().unwrap_or_default(),
                        transition_id: self.id,
                    });
                } else if let Some(msg) = &note.message {
                    let reason = note
                        .reason
                        .unwrap_or(tephra_api::scheduling::reasons::NOT_ENOUGH_RESOURCES);
                    conditions.push(Condition {
                        kind: "Unschedulable",
                        status: true,
                        reason: reason.into(),
                        message: msg.clone(),
                        transition_id: self.id,
                    });
                    events.push(JobEvent {
                        job: job.key.clone(),
                        reason,
                        message: msg.clone(),
                    });
                }
            }
            new_phase.insert(job_id, phase);
            if phase != group.phase || !conditions.is_empty() {
                groups.push(GroupStatus {
                    job: job.key.clone(),
                    phase,
                    conditions,
                    running,
                    succeeded,
                    failed,
                });
            }
        }
        let mut queues = Vec::new();
        let mut counts: BTreeMap<&str, [u32; 5]> = BTreeMap::new();
        for (id, job) in self.snap.jobs.iter() {
            let Some(g) = &job.group else { continue };
            let phase = new_phase
                .get(&id)
                .or_else(|| self.state.phases.get(&id))
                .copied()
                .unwrap_or(g.phase);
            let idx = match phase {
                GroupPhase::Pending => 0,
                GroupPhase::Inqueue => 1,
                GroupPhase::Running => 2,
                GroupPhase::Unknown => 3,
                GroupPhase::Completed => 4,
            };
            counts.entry(g.queue.as_str()).or_default()[idx] += 1;
        }
        for (name, q) in &self.snap.queues {
            let c = counts.get(name.as_str()).copied().unwrap_or_default();
            let allocated = self
                .state
                .queue_allocated
                .get(name)
                .copied()
                .unwrap_or_default();
            queues.push(QueueStatus {
                name: name.clone(),
                state: q.state,
                allocated: self.snap.names.to_list(&allocated),
                allocated_vec: allocated,
                pending: c[0],
                inqueue: c[1],
                running: c[2],
                unknown: c[3],
                completed: c[4],
            });
        }
        Decisions {
            session: self.id,
            binds: self.binds,
            pipelined: self.pipelined,
            evictions: self.evictions,
            groups,
            queues,
            events,
        }
    }
}

/// Whether a queue admits new work.
pub fn queue_open(snap: &Snapshot, name: &str) -> Result<(), String> {
    match snap.queues.get(name) {
        None => Err(format!("queue {name} does not exist")),
        Some(q) if q.state != QueueState::Open => Err(format!(
            "queue {name} is {:?} and admits nothing new",
            q.state
        )),
        Some(_) => Ok(()),
    }
}
