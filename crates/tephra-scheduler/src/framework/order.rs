//! The order in which actions visit work: a session's jobs grouped by queue, each queue's jobs
//! in the plugins' job order, and the next queue by the plugins' queue order.

use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};

use super::session::Session;
use crate::model::Id;

/// Jobs of the session that `keep` accepts, grouped by queue, each queue's jobs in job order,
/// and the queues in name order (the caller applies queue order). Actions take jobs from the
/// front, one at a time.
pub fn jobs_by_queue(
    ssn: &Session,
    keep: impl Fn(&Session, Id) -> bool,
) -> BTreeMap<String, VecDeque<Id>> {
    let mut by_queue: BTreeMap<String, VecDeque<Id>> = BTreeMap::new();
    for &job in &ssn.snap.active_jobs {
        if !keep(ssn, job) {
            continue;
        }
        let Some(j) = ssn.snap.jobs.get(job) else {
            continue;
        };
        if j.group.is_none() {
            continue;
        }
        by_queue
            .entry(j.queue().to_string())
            .or_default()
            .push_back(job);
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
