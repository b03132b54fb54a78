//! `reclaim`: across queues, a waiting gang of a queue below its deserved share takes back
//! resources from reclaimable queues above theirs, with the same gang rules as `preempt` (see
//! [`crate::placement::room`]); a victim queue is never pushed below its deserved share.

use crate::config::{ArgErrors, ArgSpec, Args};
use crate::framework::session::Session;
use crate::placement::room::{Mode, run};
use crate::placement::search::SEARCH_ONLY;
use crate::placement::{Placer, SearchArgs};

/// What `reclaim` reads: the node-search arguments.
pub const ARGS: ArgSpec = SEARCH_ONLY;

/// Checks the arguments.
pub fn check(args: &Args) -> Result<(), ArgErrors> {
    SearchArgs::read(args, &ARGS).map(|_| ())
}

/// Runs `reclaim`.
pub fn execute(ssn: &mut Session, placer: &mut Placer, args: &Args) {
    let search = SearchArgs::read(args, &ARGS).unwrap_or_default();
    run(ssn, placer, &search, Mode::Reclaim);
}
