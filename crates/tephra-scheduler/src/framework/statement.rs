//! Statements: every change a session makes goes through one, and is committed or discarded as
//! a unit. That is how a gang is all-or-nothing.
//!
//! Allocate, pipeline and evict are applied to the session's [`State`](super::state::State) at
//! once, so that the rest of the gang sees them, and the plugins that follow session events
//! are told (allocated, deallocated). Discarding undoes them newest first; committing turns
//! allocations into binds (or keeps them as pipelined) and evictions into decisions.

use super::session::Session;
use crate::decisions::{Bind, Eviction, PreBind};
use crate::model::{Id, TaskStatus};

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

impl Op {
    /// Whether the change places a task (allocate or pipeline), as opposed to evicting one.
    pub fn places(&self) -> bool {
        !matches!(self, Op::Evict { .. })
    }
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

impl Session {
    fn queue_of_task(&self, task: Id) -> String {
        self.snap
            .tasks
            .get(task)
            .and_then(|t| self.snap.jobs.get(t.job))
            .map(|j| j.queue().to_string())
            .unwrap_or_default()
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
            self.notify(|p, v| p.deallocated(v, task));
        }
        self.state.gpus.evict(&self.snap, task, node, sign);
        let ns = &mut self.state.nodes[node as usize];
        ns.releasing.add(&req);
        let future = ns.future_idle();
        self.state.cluster_future_idle[cluster].add(&req);
        self.state.domains_add(cluster, node, &req);
        if sign > 0 {
            // The bound must stay an upper bound of any node's future idle.
            self.state.cluster_max_node_idle[cluster] =
                self.state.cluster_max_node_idle[cluster].max(&future);
            self.state
                .set_task(&self.snap, task, Some((TaskStatus::Releasing, Some(node))));
        } else {
            self.state.set_task(&self.snap, task, prev);
        }
        self.state
            .queue_allocated
            .entry(queue)
            .or_default()
            .sub(&req);
        if sign < 0 {
            self.notify(|p, v| p.allocated(v, task));
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
        self.state.domains_add(cluster, node, &req.times(-1));
        let queue = self.queue_of_task(task);
        self.state
            .queue_allocated
            .entry(queue)
            .or_default()
            .add(&req);
        // A pod placed again in failover takes the room over from its old copy's ghost, which
        // counted for the queue until now: the gang counts once.
        if let Some((queue, held)) = self.snap.ghost_share(&t.key) {
            self.state
                .queue_allocated
                .entry(queue.clone())
                .or_default()
                .sub(&held.times(sign));
        }
        // Plugins see the task on its node for both events; the overlay entry is dropped
        // after a deallocation has been reported. Its claims are given (or given back) with it.
        self.state
            .volumes
            .place(&self.snap, task, node, sign as i32);
        self.state
            .devices
            .place(&self.snap, task, node, sign as i32);
        self.state
            .gpus
            .place(&self.snap, task, node, sign as i32, pipelined);
        if sign > 0 {
            let status = if pipelined {
                TaskStatus::Pipelined
            } else {
                TaskStatus::Allocated
            };
            self.state
                .set_task(&self.snap, task, Some((status, Some(node))));
            self.notify(|p, v| p.allocated(v, task));
        } else {
            self.notify(|p, v| p.deallocated(v, task));
            self.state.set_task(&self.snap, task, None);
        }
    }

    /// Places `task` on `node`: on free resources, or pipelined onto resources being released.
    pub fn allocate(&mut self, stmt: &mut Statement, task: Id, node: Id, pipelined: bool) {
        // Shared GPUs that only pods being evicted leave free make it a pipelined placement.
        let pipelined = pipelined
            || self
                .snap
                .tasks
                .get(task)
                .is_some_and(|t| !self.state.gpus.fits_now(&self.snap, t, node));
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
            prev: self.state.overlay(task),
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

    /// Undoes the changes recorded after the first `keep` (newest first), so that one statement
    /// can try one alternative after another.
    pub fn roll_back(&mut self, stmt: &mut Statement, keep: usize) {
        while stmt.ops.len() > keep {
            if let Some(op) = stmt.ops.pop() {
                self.apply(&op, -1);
            }
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
            let Some(mut decision) = self.bind_for(task, node) else {
                continue;
            };
            if bind && !was_pipelined {
                decision.gpus = self.state.gpus.prebind(task, node);
                decision.gpu_lock = self.state.gpus.takes_lock(task);
                self.state
                    .set_task(&self.snap, task, Some((TaskStatus::Binding, Some(node))));
                let volumes = self.state.volumes.prebind(&self.snap, task, node);
                let devices = self.state.devices.prebind(&self.snap, task, node);
                if !volumes.is_empty() || !devices.is_empty() {
                    self.prebinds.push(PreBind {
                        task: decision.task.clone(),
                        cluster: decision.cluster.clone(),
                        node: decision.node.clone(),
                        volumes,
                        devices,
                    });
                }
                self.binds.push(decision);
            } else {
                self.state
                    .set_task(&self.snap, task, Some((TaskStatus::Pipelined, Some(node))));
                self.pipelined.push(decision);
            }
        }
    }

    /// The names of `job` and of the cluster of `node` (empty when unknown).
    fn job_and_cluster(&self, job: Id, node: Id) -> (String, String) {
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
            .get(job)
            .map(|j| j.key.clone())
            .unwrap_or_default();
        (job, cluster)
    }

    /// The decision that places `task` on `node`, named as the API servers name them.
    pub(super) fn bind_for(&self, task: Id, node: Id) -> Option<Bind> {
        let t = self.snap.tasks.get(task)?;
        let n = self.snap.nodes.get(node)?;
        let (job, cluster) = self.job_and_cluster(t.job, node);
        Some(Bind {
            job,
            task: t.key.clone(),
            role: t.spec.shape.role.clone(),
            cluster,
            node: n.spec.name.clone(),
            gpus: None,
            gpu_lock: false,
        })
    }

    fn record_eviction(&mut self, task: Id, node: Id, reason: usize) {
        let Some(t) = self.snap.tasks.get(task) else {
            return;
        };
        let (job, cluster) = self.job_and_cluster(t.job, node);
        self.evictions.push(Eviction {
            job,
            task: t.key.clone(),
            cluster,
            reason: self.reasons.get(reason).cloned().unwrap_or_default(),
        });
    }
}
