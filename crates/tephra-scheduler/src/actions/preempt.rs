//! `preempt`: within a queue, a waiting gang of higher priority evicts running work of lower
//! priority to fit, gang-aware (see [`crate::placement::room`]). The preemptor is pipelined onto
//! what is freed in the same statement, which commits only if its gang then fits.

use crate::config::{ArgError, Args};
use crate::framework::session::Session;
use crate::placement::room::{Mode, run};
use crate::placement::{Placer, SearchArgs};

/// Reads the node-search arguments.
pub fn check(args: &Args) -> Result<(), ArgError> {
    SearchArgs::from_args(args).map(|_| ())
}

/// Runs `preempt`.
pub fn execute(ssn: &mut Session, placer: &mut Placer, args: &Args) {
    let search = SearchArgs::from_args(args).unwrap_or_default();
    run(ssn, placer, &search, Mode::Preempt);
}
