//! `backfill`: place best-effort pods (no requests beyond a pod slot) of admitted jobs, still
//! gang by gang.

use crate::framework::FitErrors;
use crate::model::{GroupPhase, Id};
use crate::placement::{SearchArgs, pending_groups, place_job_in_cluster};
use crate::session::{Session, Statement};

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
        let groups = pending_groups(ssn, job, true);
        if groups.is_empty() || ssn.job_valid(job).is_err() {
            continue;
        }
        let (candidates, _) = super::allocate::candidate_clusters(ssn, job);
        for cluster in candidates.into_iter().take(search.max_clusters) {
            let mut stmt = Statement::new();
            let mut errs = FitErrors::default();
            place_job_in_cluster(ssn, &mut stmt, job, &groups, cluster, search, &mut errs);
            if ssn.job_ready(job) && !stmt.is_empty() {
                super::allocate::finish(ssn, job, stmt, true, Some(cluster));
                break;
            }
            ssn.discard(stmt);
        }
    }
}
