//! `preempt`: within a queue, a waiting gang of higher priority evicts running work of lower
//! priority to fit, gang-aware (see [`crate::placement::room`]). The preemptor is pipelined onto
//! what is freed in the same statement, which commits only if its gang then fits.

use crate::config::{ArgErrors, ArgSpec, Args};
use crate::framework::session::Session;
use crate::placement::room::{Mode, run};
use crate::placement::search::{PREDICATE_CACHE, SEARCH_KEYS};
use crate::placement::{Placer, SearchArgs};

/// What `preempt` reads: the node-search arguments.
pub const ARGS: ArgSpec = ArgSpec {
    keys: SEARCH_KEYS,
    prefixes: &[],
    inert: &[
        PREDICATE_CACHE,
        (
            "enableTopologyAwarePreemption",
            "a preemptor held to a network-topology tier is always placed within one domain of it",
        ),
        (
            "topologyAwarePreemptWorkerNum",
            "preemption runs in the session, on one thread",
        ),
        (
            "minCandidateNodesPercentage",
            "preempt looks at every node holding what the preemptor is short of",
        ),
        (
            "minCandidateNodesAbsolute",
            "preempt looks at every node holding what the preemptor is short of",
        ),
        (
            "maxCandidateNodesAbsolute",
            "preempt looks at every node holding what the preemptor is short of",
        ),
    ],
};

/// Checks the arguments.
pub fn check(args: &Args) -> Result<(), ArgErrors> {
    SearchArgs::read(args, &ARGS).map(|_| ())
}

/// Runs `preempt`.
pub fn execute(ssn: &mut Session, placer: &mut Placer, args: &Args) {
    let search = SearchArgs::read(args, &ARGS).unwrap_or_default();
    run(ssn, placer, &search, Mode::Preempt);
}
