//! The order in which actions visit work: a session's jobs grouped by queue, each queue's jobs
//! in the plugins' job order, and the next queue by the plugins' queue order.

use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};

use super::session::Session;
use crate::model::Id;

/// Jobs of the session that `keep` accepts, grouped by queue, each queue's jobs in job order,
/// and the queues in name order (the caller applies queue order). Actions take jobs from the
/// front, one at a time. The jobs in the cache's backlog are not among them, but for those this
/// session admitted.
pub fn jobs_by_queue(
    ssn: &Session,
    keep: impl Fn(&Session, Id) -> bool,
) -> BTreeMap<String, VecDeque<Id>> {
    jobs_by_queue_of(ssn, ssn.jobs().into_iter(), keep)
}

/// [`jobs_by_queue`] of `jobs`.
pub fn jobs_by_queue_of(
    ssn: &Session,
    jobs: impl Iterator<Item = Id>,
    keep: impl Fn(&Session, Id) -> bool,
) -> BTreeMap<String, VecDeque<Id>> {
    let mut by_queue: BTreeMap<String, VecDeque<Id>> = BTreeMap::new();
    for job in jobs {
        if !keep(ssn, job) {
            continue;
        }
        let Some(j) = ssn.snap.jobs.get(job) else {
            continue;
        };
        if j.group.is_none() {
            continue;
        }
        match by_queue.get_mut(j.queue()) {
            Some(jobs) => jobs.push_back(job),
            None => {
                by_queue.insert(j.queue().to_string(), VecDeque::from([job]));
            }
        }
    }
    let hooks = ssn.hooks();
    for jobs in by_queue.values_mut() {
        jobs.make_contiguous()
            .sort_by(|a, b| hooks.job_order(*a, *b));
    }
    by_queue
}

/// The queue that goes next by the plugins' queue order (name order on ties).
pub fn next_queue<'a>(ssn: &Session, queues: impl Iterator<Item = &'a String>) -> Option<String> {
    let hooks = ssn.hooks();
    let mut best: Option<&String> = None;
    for q in queues {
        best = match best {
            None => Some(q),
            Some(b) => {
                if hooks.queue_order(q, b).then_with(|| q.cmp(b)) == Ordering::Less {
                    Some(q)
                } else {
                    Some(b)
                }
            }
        };
    }
    best.cloned()
}
