//! `backfill`: place best-effort pods (no requests beyond a pod slot) of admitted jobs, still
//! gang by gang.

use crate::config::{ArgErrors, ArgSpec, Args};
use crate::framework::session::Session;
use crate::model::{GroupPhase, Id};
use crate::placement::gang::pending_groups;
use crate::placement::search::SEARCH_ONLY;
use crate::placement::{Placer, SearchArgs, place_job};

/// What `backfill` reads: the node-search arguments.
pub const ARGS: ArgSpec = SEARCH_ONLY;

/// Checks the arguments.
pub fn check(args: &Args) -> Result<(), ArgErrors> {
    SearchArgs::read(args, &ARGS).map(|_| ())
}

/// Runs `backfill`.
pub fn execute(ssn: &mut Session, placer: &mut Placer, args: &Args) {
    let search = SearchArgs::read(args, &ARGS).unwrap_or_default();
    let jobs: Vec<Id> = ssn
        .jobs()
        .into_iter()
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
        place_job(ssn, placer, job, &groups, &search);
    }
}
