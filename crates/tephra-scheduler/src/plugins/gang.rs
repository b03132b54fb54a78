//! `gang`: all-or-nothing. A job is valid with at least minMember live tasks (and each role's
//! minTaskMember), ready when that many are placed, and may be kept pipelined when placed plus
//! pipelined reach it. A job with sub-groups also needs each policy's `minSubGroups` of them
//! whole. Jobs that are not ready go first.

use std::cmp::Ordering;

use tephra_api::reasons;

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::plugin::{GangRules, Invalid, JobOrder, Plugin, Vote};
use crate::framework::subgroups::short_of_minimum;
use crate::framework::view::View;
use crate::model::{Id, TaskStatus};

/// The `gang` plugin.
pub struct Gang;

/// The plugin reads no arguments.
pub const ARGS: ArgSpec = ArgSpec::NONE;

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    ArgReader::new(&cfg.arguments, &ARGS).finish()?;
    Ok(Box::new(Gang))
}

fn role_mins(view: &View, job: Id) -> Vec<(String, u32)> {
    view.job(job)
        .and_then(|j| j.group.as_ref())
        .map(|g| {
            g.role_minimums()
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect()
        })
        .unwrap_or_default()
}

fn ready(view: &View, job: Id) -> bool {
    let Some(j) = view.job(job) else { return false };
    let c = view.counts(job);
    c.ready >= j.min_member()
        && role_mins(view, job)
            .iter()
            .all(|(role, min)| c.ready_by_role.get(role.as_str()).copied().unwrap_or(0) >= *min)
        && short_of_minimum(view, job, TaskStatus::is_ready).is_none()
}

impl Plugin for Gang {
    fn name(&self) -> &'static str {
        "gang"
    }

    fn gang_rules(&self) -> Option<&dyn GangRules> {
        Some(self)
    }

    fn job_order(&self) -> Option<&dyn JobOrder> {
        Some(self)
    }
}

impl GangRules for Gang {
    fn job_valid(&self, view: &View, job: Id) -> Result<(), Invalid> {
        let Some(j) = view.job(job) else {
            return Ok(());
        };
        let c = view.counts(job);
        let min = j.min_member();
        if c.valid < min {
            return Err(Invalid {
                reason: reasons::NOT_ENOUGH_TASKS,
                message: format!(
                    "Not enough valid tasks for gang-scheduling, valid: {}, min: {min}",
                    c.valid
                ),
            });
        }
        for (role, need) in role_mins(view, job) {
            let have = c.total_by_role.get(role.as_str()).copied().unwrap_or(0);
            if have < need {
                return Err(Invalid {
                    reason: reasons::NOT_ENOUGH_PODS_OF_TASK,
                    message: format!("task {role} has {have} pod(s), minTaskMember is {need}"),
                });
            }
        }
        Ok(())
    }

    fn job_ready(&self, view: &View, job: Id) -> bool {
        ready(view, job)
    }

    fn job_pipelined(&self, view: &View, job: Id) -> Vote {
        let Some(j) = view.job(job) else {
            return Vote::Abstain;
        };
        let c = view.counts(job);
        let roles_ok = role_mins(view, job)
            .iter()
            .all(|(role, min)| c.waiting_by_role.get(role.as_str()).copied().unwrap_or(0) >= *min);
        if c.ready + c.pipelined >= j.min_member()
            && roles_ok
            && short_of_minimum(view, job, TaskStatus::is_ready_or_pipelined).is_none()
        {
            Vote::Permit
        } else {
            Vote::Reject
        }
    }
}

impl JobOrder for Gang {
    fn compare(&self, view: &View, a: Id, b: Id) -> Ordering {
        // Jobs still waiting for their gang go before jobs that are already ready.
        ready(view, a).cmp(&ready(view, b))
    }

    /// A job with every pod Pending is not ready (its gang is at least one).
    fn ties_waiting(&self) -> bool {
        true
    }
}
