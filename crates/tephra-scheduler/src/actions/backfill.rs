//! `backfill`: place best-effort pods (no requests beyond a pod slot) of admitted jobs, still
//! gang by gang.

use crate::model::{GroupPhase, Id};
use crate::placement::{SearchArgs, pending_groups};
use crate::session::Session;

pub(super) fn execute(ssn: &mut Session, search: &SearchArgs) {
    let jobs: Vec<Id> = ssn
        .snap
        .active_jobs
        .iter()
        .copied()
        .filter(|j| {
            matches!(
                ssn.state.phase(&ssn.snap, *j),
                Some(GroupPhase::Inqueue | GroupPhase::Running | GroupPhase::Unknown)
            )
        })
        .collect();
    for job in jobs {
        // Jobs with pods that request resources were handled by allocate, best-effort pods
        // included; here go the jobs whose pending pods are all best-effort.
        if !pending_groups(ssn, job, false).is_empty() {
            continue;
        }
        let groups = pending_groups(ssn, job, true);
        if groups.is_empty() {
            continue;
        }
        super::allocate::place_job(ssn, job, &groups, search);
    }
}
