//! PodGroups by queue and phase, kept as events arrive, so that a session reports every
//! queue's counts without walking every job (a parked backlog included).

use std::collections::BTreeMap;

use crate::model::{GroupPhase, Job, PhaseCounts};

/// Counts `job` as it is now in `by_queue`, in place of what it was counted as. A job removed
/// from the cache is uncounted by [`uncount`] instead. A ghost's job is no PodGroup of any
/// queue and counts nowhere.
pub(super) fn recount(by_queue: &mut BTreeMap<String, PhaseCounts>, j: &mut Job) {
    // Compared before anything is copied: this runs on every change to a job's pods.
    let now_ref = (!j.ghost)
        .then(|| j.group.as_ref().map(|g| (g.queue.as_str(), g.phase)))
        .flatten();
    if j.counted_as.as_ref().map(|(q, p)| (q.as_str(), *p)) == now_ref {
        return;
    }
    let now = now_ref.map(|(q, p)| (q.to_string(), p));
    let before = std::mem::replace(&mut j.counted_as, now.clone());
    count(by_queue, before, -1);
    count(by_queue, now, 1);
}

/// Uncounts a job leaving the cache.
pub(super) fn uncount(
    by_queue: &mut BTreeMap<String, PhaseCounts>,
    counted_as: Option<(String, GroupPhase)>,
) {
    count(by_queue, counted_as, -1);
}

fn count(
    by_queue: &mut BTreeMap<String, PhaseCounts>,
    what: Option<(String, GroupPhase)>,
    sign: i32,
) {
    let Some((queue, phase)) = what else { return };
    let c = by_queue.entry(queue).or_default();
    c.count(phase, sign);
    if c.is_empty() {
        by_queue.retain(|_, c| !c.is_empty());
    }
}
