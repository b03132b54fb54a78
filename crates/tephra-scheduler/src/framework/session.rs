//! A scheduling session: opened on a snapshot with a set of plugins, changed by actions through
//! statements (`statement.rs`), closed into [`Decisions`](crate::decisions::Decisions)
//! (`status.rs`).
//!
//! The session never copies the world: its mutable state is [`State`], an overlay on the
//! snapshot. It knows nothing of actions; the crate root runs them in the configured order.

use std::collections::BTreeMap;

use super::hooks::{Dispatch, Hooks};
use super::plugin::{Invalid, SessionEvents};
use super::state::State;
use super::view::View;
use crate::cache::Snapshot;
use crate::decisions::{Bind, Eviction, PreBind};
use crate::model::{GroupPhase, Id, QueueState};

/// What the session learned about a job, for its status and events.
#[derive(Clone, Debug, Default)]
pub struct JobNote {
    /// Placement was tried this session.
    pub attempted: bool,
    /// The job cannot be scheduled at all.
    pub invalid: Option<Invalid>,
    /// What happened, in words a user can read.
    pub message: Option<String>,
    /// The condition reason (`tephra_api::reasons`); `None` for the default.
    pub reason: Option<&'static str>,
    /// Where it was placed.
    pub placed_in: Option<String>,
    /// It was placed and will bind.
    pub scheduled: bool,
    /// It can never be placed on the fleet as it is: it may be parked.
    pub never_fits: bool,
    /// The room it reserved is kept for it in the next session (`holds.rs`).
    pub keeps_room: bool,
    /// The enqueue votes refused it: its status says its queue cannot admit it yet, and it
    /// may rest (`cache/parking.rs`).
    pub refused: bool,
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
    /// Whether `allocate` admits Pending jobs itself: true when the configuration has no
    /// `enqueue` action (Volcano's allocate does the same).
    pub allocate_admits: bool,
    /// Set by `enqueue`: seconds after which an admitted job that still cannot be placed goes
    /// back to Pending when the session closes.
    pub inqueue_timeout: Option<i64>,
    pub(super) hooks: Hooks,
    pub(super) binds: Vec<Bind>,
    pub(super) prebinds: Vec<PreBind>,
    /// ResourceClaims proposed for deallocation, with the job whose pod they keep back
    /// (`placement::job`); settled as the session closes (`status.rs`).
    pub(crate) deallocations: Vec<(Id, crate::decisions::Deallocation)>,
    pub(super) pipelined: Vec<Bind>,
    pub(super) evictions: Vec<Eviction>,
    pub(super) reasons: Vec<String>,
    pub(super) notes: BTreeMap<Id, JobNote>,
}

impl Session {
    /// Opens a session on `snap` with these plugins: O(nodes) to build the accounting vector,
    /// no copy of pods. Every plugin that follows session events is told it opened.
    pub fn open(snap: Snapshot, hooks: Hooks, now: i64, id: u64) -> Self {
        Self::open_observed(snap, hooks, now, id, &mut |_, _| {})
    }

    /// [`Session::open`], calling `observe(plugin, true)` before and `observe(plugin, false)`
    /// after each plugin's `opened`.
    pub fn open_observed(
        snap: Snapshot,
        hooks: Hooks,
        now: i64,
        id: u64,
        observe: &mut dyn FnMut(&'static str, bool),
    ) -> Self {
        let mut state = State::open(&snap);
        state.hold_nominations(&snap);
        let mut ssn = Self {
            snap,
            state,
            now,
            id,
            allocate_admits: false,
            inqueue_timeout: None,
            hooks,
            binds: Vec::new(),
            prebinds: Vec::new(),
            deallocations: Vec::new(),
            pipelined: Vec::new(),
            evictions: Vec::new(),
            reasons: Vec::new(),
            notes: BTreeMap::new(),
        };
        let view = View {
            snap: &ssn.snap,
            state: &ssn.state,
            now: ssn.now,
        };
        ssn.hooks.notify_observed(|p| p.opened(&view), observe);
        ssn
    }

    /// The jobs an action looks at: the active ones, then those of the cache's backlog that
    /// this session gave a phase (enqueue admitted them), in slot order.
    pub fn jobs(&self) -> Vec<Id> {
        let mut woken: Vec<Id> = self
            .state
            .phases
            .keys()
            .copied()
            .filter(|&id| self.snap.backlog.contains(id) && !self.snap.active_jobs.contains(&id))
            .collect();
        woken.sort_unstable();
        self.snap.active_jobs.iter().copied().chain(woken).collect()
    }

    /// The read-only view handed to plugins.
    #[inline]
    pub fn view(&self) -> View<'_> {
        View {
            snap: &self.snap,
            state: &self.state,
            now: self.now,
        }
    }

    /// The plugins' hooks, seen through the current view.
    #[inline]
    pub fn hooks(&self) -> Dispatch<'_> {
        Dispatch::new(&self.hooks, self.view())
    }

    /// What the session has learned about `job`, to add to.
    pub fn note(&mut self, job: Id) -> &mut JobNote {
        self.notes.entry(job).or_default()
    }

    /// Sets a PodGroup's phase for the rest of the session.
    pub fn set_phase(&mut self, job: Id, phase: GroupPhase) {
        self.state.phases.insert(job, phase);
    }

    /// Tells the plugins a job was admitted.
    pub fn job_enqueued(&mut self, job: Id) {
        self.notify(|p, v| p.job_enqueued(v, job));
    }

    /// Tells the plugins an admitted job went back to Pending.
    pub fn job_dequeued(&mut self, job: Id) {
        self.notify(|p, v| p.job_dequeued(v, job));
    }

    /// Tells every plugin that follows session events about one, with the current view.
    pub(super) fn notify(&mut self, event: impl Fn(&mut dyn SessionEvents, &View)) {
        let view = View {
            snap: &self.snap,
            state: &self.state,
            now: self.now,
        };
        self.hooks.notify(|p| event(p, &view));
    }

    /// Gives `job` back the room held for it, before it is placed.
    pub fn release_holds(&mut self, job: Id) {
        if self.state.holds.contains_key(&job) {
            self.state.release(&self.snap, job);
        }
    }
}

/// Why a queue admits nothing new.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueueClosed {
    /// The queue does not exist.
    #[error("queue {0} does not exist")]
    Missing(String),
    /// The queue is Closed or Closing.
    #[error("queue {name} is {state:?} and admits nothing new")]
    NotOpen {
        /// The queue.
        name: String,
        /// Its state.
        state: QueueState,
    },
    /// The queue's `spec.parent` names a queue that does not exist, or makes a cycle.
    #[error("{0}; it admits nothing new until that is fixed")]
    Tree(super::queues::TreeProblem),
}

/// Whether a queue admits new work.
pub fn queue_open(snap: &Snapshot, name: &str) -> Result<(), QueueClosed> {
    match snap.queues.get(name) {
        None => Err(QueueClosed::Missing(name.to_string())),
        Some(q) if q.state != QueueState::Open => Err(QueueClosed::NotOpen {
            name: name.to_string(),
            state: q.state,
        }),
        Some(_) => match super::queues::tree_problem(name, |q| {
            snap.queues.get(q).map(|spec| spec.parent.clone())
        }) {
            Some(problem) => Err(QueueClosed::Tree(problem)),
            None => Ok(()),
        },
    }
}
