//! Parked jobs: a job a session found can never be placed is set aside, out of `active_jobs`,
//! so that no later session pays for it (sorting, fair-share requests, admission checks,
//! status). It comes back when something that could change the verdict happens: its PodGroup
//! or one of its pods changes (`World::refresh_active` unparks it), or the fleet could hold
//! more than before (`fleet_generation`), or the caller says the configuration changed.
//!
//! A verdict is taken only if nothing it depends on changed between the session's snapshot and
//! now, so that a change racing with the session is never lost.

use super::world::World;
use crate::decisions::Park;
use crate::model::GroupPhase;

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
            self.active_jobs.remove(&id);
            self.parked.insert(id);
        }
    }

    /// Brings every parked job back for the next session.
    pub(super) fn unpark_all(&mut self) {
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
