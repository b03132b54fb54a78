//! The read-only view of a session that every hook gets: the snapshot, the session's own state
//! and the time. Reading it changes nothing.

use std::collections::BTreeMap;

use super::state::State;
use crate::cache::Snapshot;
use crate::model::{Id, Job, Node, Task, TaskStatus};
use crate::resources::Resources;

/// Read-only view of a session, handed to every hook.
#[derive(Clone, Copy)]
pub struct View<'a> {
    /// The snapshot.
    pub snap: &'a Snapshot,
    /// Session-local state.
    pub state: &'a State,
    /// Virtual or wall time in seconds, as given to the session.
    pub now: i64,
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
    #[inline]
    pub fn job(&self, id: Id) -> Option<&'a Job> {
        self.snap.jobs.get(id)
    }

    /// The task in slot `id`.
    #[inline]
    pub fn task(&self, id: Id) -> Option<&'a Task> {
        self.snap.tasks.get(id)
    }

    /// The node in slot `id`.
    #[inline]
    pub fn node(&self, id: Id) -> Option<&'a Node> {
        self.snap.nodes.get(id)
    }

    /// The session status of a task.
    #[inline]
    pub fn status(&self, id: Id) -> TaskStatus {
        self.state.status(self.snap, id)
    }

    /// The node a task holds or is planned on in this session.
    #[inline]
    pub fn task_node(&self, id: Id) -> Option<Id> {
        self.state.task_node(self.snap, id)
    }

    /// Free resources of a node now (allocatable minus held).
    #[inline]
    pub fn idle(&self, node: Id) -> Resources {
        self.state.nodes[node as usize].idle
    }

    /// Resources of a node free once releasing tasks finish, less what is pipelined.
    #[inline]
    pub fn future_idle(&self, node: Id) -> Resources {
        self.state.nodes[node as usize].future_idle()
    }

    /// Whether a job has pending tasks in this session.
    pub fn has_pending(&self, job: Id) -> bool {
        self.job(job).is_some_and(|j| {
            j.tasks
                .iter()
                .any(|t| self.status(*t) == TaskStatus::Pending)
        })
    }

    /// Counts the job's tasks by session status: the cache's tally plus what the session
    /// changed, and for jobs with per-role minimums a walk over their tasks.
    pub fn counts(&self, job: Id) -> JobCounts<'a> {
        let mut c = JobCounts::default();
        let Some(j) = self.job(job) else {
            return c;
        };
        let by_role = j
            .group
            .as_ref()
            .is_some_and(|g| !g.role_minimums().is_empty());
        if !by_role {
            let t = self.state.tally(j, job);
            let n = |v: i32| v.max(0) as u32;
            return JobCounts {
                ready: n(t.ready),
                pipelined: n(t.pipelined),
                pending: n(t.pending),
                valid: n(t.valid),
                ..JobCounts::default()
            };
        }
        for &t in &j.tasks {
            let Some(task) = self.task(t) else {
                continue;
            };
            let role = task.spec.shape.role.as_str();
            let s = self.status(t);
            *c.total_by_role.entry(role).or_insert(0) += 1;
            if s.is_ready() {
                c.ready += 1;
                *c.ready_by_role.entry(role).or_insert(0) += 1;
            }
            if s == TaskStatus::Pipelined {
                c.pipelined += 1;
            }
            if s.is_ready_or_pipelined() {
                *c.waiting_by_role.entry(role).or_insert(0) += 1;
            }
            if s == TaskStatus::Pending {
                c.pending += 1;
            }
            if !matches!(s, TaskStatus::Failed | TaskStatus::Unknown) {
                c.valid += 1;
            }
        }
        c
    }

    /// Priority of a job.
    #[inline]
    pub fn job_priority(&self, job: Id) -> i32 {
        self.job(job).map_or(0, |j| self.snap.job_priority(j))
    }

    /// Priority of a task.
    #[inline]
    pub fn task_priority(&self, task: Id) -> i32 {
        self.task(task).map_or(0, |t| self.snap.task_priority(t))
    }

    /// Sum of allocatable over ready nodes of ready clusters: what fair-share plugins divide.
    #[inline]
    pub fn fleet_total(&self) -> Resources {
        self.state.fleet_total
    }
}
