//! `gangpreempt` and `gangreclaim`: Volcano's gang-aware preempt and reclaim.
//!
//! tephra's own `preempt` and `reclaim` are gang-aware already (they evict spare tasks first and
//! whole gangs otherwise, never leave a gang below its minimum, and commit only when the
//! preemptor's whole gang then fits), so these two run the same code and a Volcano
//! configuration naming them keeps working. Volcano's `maxDomains` (HyperNode domains to try)
//! has no effect: a gang held to a network-topology tier is tried in the domains of that tier as
//! allocate tries them (`placement/domains.rs`); `allowWholeBundle` is how tephra always behaves:
//! a whole gang may be a victim.

use crate::config::{ArgErrors, ArgSpec, Args};
use crate::framework::session::Session;
use crate::placement::room::{Mode, run};
use crate::placement::search::{PREDICATE_CACHE, SEARCH_KEYS};
use crate::placement::{Placer, SearchArgs};

/// What both actions read: the node-search arguments; Volcano's own keys are accepted.
pub const ARGS: ArgSpec = ArgSpec {
    keys: SEARCH_KEYS,
    prefixes: &[],
    inert: &[
        PREDICATE_CACHE,
        (
            "maxDomains",
            "a gang held to a tier is tried in that tier's domains as allocate tries them",
        ),
        (
            "allowWholeBundle",
            "tephra may always evict a whole gang when its spare tasks are not enough",
        ),
    ],
};

/// Checks the arguments (the same for both actions).
pub fn check(args: &Args) -> Result<(), ArgErrors> {
    SearchArgs::read(args, &ARGS).map(|_| ())
}

/// Runs `gangpreempt`: the placement code of `preempt`.
pub fn preempt(ssn: &mut Session, placer: &mut Placer, args: &Args) {
    let search = SearchArgs::read(args, &ARGS).unwrap_or_default();
    run(ssn, placer, &search, Mode::Preempt);
}

/// Runs `gangreclaim`: the placement code of `reclaim`.
pub fn reclaim(ssn: &mut Session, placer: &mut Placer, args: &Args) {
    let search = SearchArgs::read(args, &ARGS).unwrap_or_default();
    run(ssn, placer, &search, Mode::Reclaim);
}
