//! Parked jobs: a job a session found can never be placed is set aside, out of `active_jobs`,
//! so that no later session pays for it (sorting, fair-share requests, admission checks,
//! status). It comes back when something that could change the verdict happens: its PodGroup
//! or one of its pods changes (`World::refresh_active` unparks it), or the fleet could hold
//! more than before (`fleet_generation`), or the caller says the configuration changed.
//!
//! A verdict is taken only if nothing it depends on changed between the session's snapshot and
//! now, so that a change racing with the session is never lost.
//!
//! Resting jobs: a Pending job the enqueue votes refused (its queue cannot admit it yet) has a
//! status that says so. Until the job, its queue, the fleet or the configuration changes, that
//! status can say nothing else, so later sessions ask only the votes about it and pass it over
//! in silence while they refuse (no note, no status, no event); the votes themselves are asked
//! every session, so that room freed by a finishing pod admits it at once. A resting job that
//! holds nothing leaves `active_jobs` for the backlog (`backlog.rs`), where a session finds it
//! only when its queue could admit it.

use super::backlog::Backlog;
use super::world::World;
use crate::decisions::{GroupStatus, Park};
use crate::model::GroupPhase;
use crate::model::Id;

impl World {
    /// Parks the jobs `park` names, those the session's snapshot saw as they still are.
    pub(super) fn park(&mut self, park: &Park) {
        if park.fleet_generation != self.fleet_generation {
            return;
        }
        for key in &park.jobs {
            let Some(id) = self.job_id(key) else { continue };
            let Some(job) = self.jobs.get(id) else {
                continue;
            };
            let pending = job
                .group
                .as_ref()
                .is_some_and(|g| g.phase == GroupPhase::Pending);
            if job.changed_at > park.generation || !pending {
                continue;
            }
            self.wake(id);
            self.active_jobs.remove(&id);
            self.parked.insert(id);
        }
    }

    /// The job stops resting; out of the backlog, it is active again.
    pub(super) fn wake(&mut self, id: Id) {
        self.resting.remove(&id);
        if self.backlog.remove(id) && self.jobs.get(id).is_some() {
            self.active_jobs.insert(id);
        }
    }

    /// Every resting job wakes (a queue changed, or the fleet, or the configuration).
    pub(super) fn wake_all(&mut self) {
        self.resting.clear();
        for id in self.backlog.take_all() {
            if self.jobs.get(id).is_some() {
                self.active_jobs.insert(id);
            }
        }
    }

    /// A PriorityClass changed: each job in the backlog goes to its bucket for its priority now.
    pub(super) fn reprioritize(&mut self) {
        if self.backlog.is_empty() {
            return;
        }
        let mut backlog = std::mem::take(&mut self.backlog);
        backlog.reprioritize(|id| self.jobs.get(id).map(|j| self.job_priority(j)));
        self.backlog = backlog;
    }

    /// Lets the jobs `park` says the votes refused rest, those the session's snapshot saw as
    /// they still are (those that hold nothing in the backlog); every other job whose status
    /// the session decided stops resting.
    pub(super) fn rest(&mut self, park: &Park, decided: &[GroupStatus]) {
        for g in decided {
            if let Some(id) = self.job_id(&g.job) {
                self.wake(id);
            }
        }
        if park.fleet_generation == self.fleet_generation {
            for r in &park.refused {
                let Some(id) = self.job_id(&r.job) else {
                    continue;
                };
                let Some(j) = self.jobs.get(id) else { continue };
                let unchanged = j.changed_at <= park.generation
                    && j.group
                        .as_ref()
                        .is_some_and(|g| g.phase == GroupPhase::Pending);
                if !unchanged || !self.active_jobs.contains(&id) {
                    continue;
                }
                self.resting.insert(id);
                if Backlog::admits(j) {
                    let priority = self.job_priority(j);
                    if self.backlog.insert(id, j, priority, r.valid) {
                        self.active_jobs.remove(&id);
                    }
                }
            }
        }
        self.backlog.refresh_floors();
    }

    /// Brings every parked job back for the next session, and wakes every resting one.
    pub(super) fn unpark_all(&mut self) {
        self.wake_all();
        for id in std::mem::take(&mut self.parked) {
            if self.jobs.get(id).is_some() {
                self.active_jobs.insert(id);
            }
        }
    }

    /// The fleet may hold more than before: every verdict is stale.
    pub(super) fn fleet_changed(&mut self) {
        self.fleet_generation += 1;
        self.unpark_all();
    }
}
