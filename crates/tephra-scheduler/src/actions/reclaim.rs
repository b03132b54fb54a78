//! `reclaim`: across queues, a waiting gang of a queue below its deserved share takes back
//! resources from reclaimable queues above theirs, with the same gang rules as `preempt`; a
//! victim queue is never pushed below its deserved share.

use crate::placement::SearchArgs;
use crate::session::Session;

use super::preempt::{Mode, run};

pub(super) fn execute(ssn: &mut Session, search: &SearchArgs) {
    run(ssn, search, Mode::Reclaim);
}
