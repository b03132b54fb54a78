//! `overcommit`: admit a Pending job only while the fleet, over-committed by
//! `overcommit-factor` (default 1.2), still has room for its minResources after what is used
//! and what admitted-but-not-started jobs have claimed.

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::plugin::{EnqueueVote, Plugin, SessionEvents, Vote};
use crate::framework::view::View;
use crate::model::{GroupPhase, Id};
use crate::resources::{MAX_RESOURCES, Resources};

/// The `overcommit` plugin.
pub struct Overcommit {
    factor: f64,
    idle: Resources,
    inqueue: Resources,
}

/// The plugin reads `overcommit-factor` (default 1.2, at least 1).
pub const ARGS: ArgSpec = ArgSpec {
    keys: &["overcommit-factor"],
    prefixes: &[],
    inert: &[],
};

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    let r = ArgReader::new(&cfg.arguments, &ARGS);
    let factor = r.f64_or("overcommit-factor", 1.2);
    if factor < 1.0 {
        r.refuse(
            "overcommit-factor",
            format!("must be at least 1.0, got {factor}"),
        );
    }
    r.finish()?;
    Ok(Box::new(Overcommit {
        factor,
        idle: Resources::ZERO,
        inqueue: Resources::ZERO,
    }))
}

fn min_resources(view: &View, job: Id) -> Option<Resources> {
    view.job(job)?.group.as_ref()?.min_resources
}

impl Plugin for Overcommit {
    fn name(&self) -> &'static str {
        "overcommit"
    }

    fn enqueue_vote(&self) -> Option<&dyn EnqueueVote> {
        Some(self)
    }

    fn events(&mut self) -> Option<&mut dyn SessionEvents> {
        Some(self)
    }
}

impl SessionEvents for Overcommit {
    fn opened(&mut self, view: &View) {
        let total = view.fleet_total();
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

    fn job_enqueued(&mut self, view: &View, job: Id) {
        if let Some(min) = min_resources(view, job) {
            self.inqueue.add(&min);
        }
    }

    fn job_dequeued(&mut self, view: &View, job: Id) {
        if let Some(min) = min_resources(view, job) {
            self.inqueue.sub(&min);
        }
    }
}

impl EnqueueVote for Overcommit {
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

    fn headroom(&self, _view: &View, _queue: &str) -> Option<Resources> {
        Some(self.idle.minus(&self.inqueue))
    }
}
