//! `overcommit`: admit a Pending job only while the fleet, over-committed by
//! `overcommit-factor` (default 1.2), still has room for its minResources after what is used
//! and what admitted-but-not-started jobs have claimed.

use super::{ArgError, ArgReader};
use crate::config::Args;
use crate::framework::{Plugin, View, Vote};
use crate::model::{GroupPhase, Id};
use crate::resources::{MAX_RESOURCES, Resources};

pub struct Overcommit {
    factor: f64,
    idle: Resources,
    inqueue: Resources,
}

impl Overcommit {
    pub fn new(args: &Args) -> Result<Self, ArgError> {
        let r = ArgReader::new(args, &["overcommit-factor"], &[])?;
        let factor = r.f64_or("overcommit-factor", 1.2)?;
        if factor < 1.0 {
            return Err((
                "overcommit-factor".into(),
                format!("must be at least 1.0, got {factor}"),
            ));
        }
        Ok(Self {
            factor,
            idle: Resources::ZERO,
            inqueue: Resources::ZERO,
        })
    }
}

fn min_resources(view: &View, job: Id) -> Option<Resources> {
    view.job(job)?.group.as_ref()?.min_resources
}

impl Plugin for Overcommit {
    fn name(&self) -> &'static str {
        "overcommit"
    }

    fn has_predicate(&self) -> bool {
        false
    }

    fn has_node_score(&self) -> bool {
        false
    }

    fn on_session_open(&mut self, view: &View) {
        let total = super::drf::fleet_total(view);
        let mut used = Resources::ZERO;
        for (_, n) in view.snap.nodes.iter() {
            used.add(&n.used);
        }
        let mut idle = Resources::ZERO;
        for i in 0..MAX_RESOURCES {
            idle.0[i] = (total.0[i] as f64 * self.factor) as i64 - used.0[i];
        }
        self.idle = idle;
        for &job in &view.snap.active_jobs {
            let Some(j) = view.job(job) else { continue };
            if view.state.phase(view.snap, job) == Some(GroupPhase::Inqueue)
                && view.counts(job).ready < j.min_member()
                && let Some(min) = min_resources(view, job)
            {
                self.inqueue.add(&min);
            }
        }
    }

    fn job_enqueueable(&self, view: &View, job: Id) -> Vote {
        let Some(min) = min_resources(view, job) else {
            return Vote::Permit;
        };
        if min.fits_in(&self.idle.minus(&self.inqueue)).is_ok() {
            Vote::Permit
        } else {
            Vote::Reject
        }
    }

    fn on_job_enqueued(&mut self, view: &View, job: Id) {
        if let Some(min) = min_resources(view, job) {
            self.inqueue.add(&min);
        }
    }
}
