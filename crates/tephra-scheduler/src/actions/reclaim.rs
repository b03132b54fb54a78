//! `reclaim`: across queues, a waiting gang of a queue below its deserved share takes back
//! resources from reclaimable queues above theirs, with the same gang rules as `preempt` (see
//! [`crate::placement::room`]); a victim queue is never pushed below its deserved share.

use crate::config::{ArgError, Args};
use crate::framework::session::Session;
use crate::placement::room::{Mode, run};
use crate::placement::{Placer, SearchArgs};

/// Reads the node-search arguments.
pub fn check(args: &Args) -> Result<(), ArgError> {
    SearchArgs::from_args(args).map(|_| ())
}

/// Runs `reclaim`.
pub fn execute(ssn: &mut Session, placer: &mut Placer, args: &Args) {
    let search = SearchArgs::from_args(args).unwrap_or_default();
    run(ssn, placer, &search, Mode::Reclaim);
}
