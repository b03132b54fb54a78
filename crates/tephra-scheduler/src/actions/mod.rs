//! Actions, one file each, with Volcano's semantics. A session runs them in the configured
//! order.

mod allocate;
mod backfill;
mod enqueue;
mod preempt;
mod reclaim;
mod victims;

use crate::config::Args;
use crate::session::Session;

/// Actions tephra provides.
pub const KNOWN: &[&str] = &["enqueue", "allocate", "backfill", "preempt", "reclaim"];

/// Volcano actions that tephra does not provide yet. Naming one is an explicit error rather
/// than a silent no-op.
pub const UNAVAILABLE: &[&str] = &["shuffle"];

/// Checks an action's arguments.
pub fn validate_args(action: &str, args: &Args) -> Result<(), (String, String)> {
    match action {
        "allocate" | "backfill" | "preempt" | "reclaim" => {
            crate::placement::SearchArgs::from_args(args).map(|_| ())
        }
        "enqueue" => match args.keys().next() {
            Some(k) => Err((k.clone(), "unknown argument".into())),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Runs one action.
pub fn execute(name: &str, ssn: &mut Session, args: &Args) {
    let search = crate::placement::SearchArgs::from_args(args).unwrap_or_default();
    match name {
        "enqueue" => enqueue::execute(ssn),
        "allocate" => allocate::execute(ssn, &search),
        "backfill" => backfill::execute(ssn, &search),
        "preempt" => preempt::execute(ssn, &search),
        "reclaim" => reclaim::execute(ssn, &search),
        _ => {}
    }
}

/// Jobs of the session grouped by queue, each queue's jobs in job order, and the queues in
/// name order (the caller applies queue order).
pub(crate) fn jobs_by_queue(
    ssn: &Session,
    keep: impl Fn(&Session, crate::model::Id) -> bool,
) -> std::collections::BTreeMap<String, Vec<crate::model::Id>> {
    let mut by_queue: std::collections::BTreeMap<String, Vec<crate::model::Id>> =
        std::collections::BTreeMap::new();
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
        by_queue.entry(j.queue().to_string()).or_default().push(job);
    }
    for jobs in by_queue.values_mut() {
        jobs.sort_by(|a, b| ssn.job_order(*a, *b));
    }
    by_queue
}

/// Picks the queue that goes next by the plugins' queue order (name order on ties).
pub(crate) fn next_queue<'a>(
    ssn: &Session,
    queues: impl Iterator<Item = &'a String>,
) -> Option<String> {
    let mut best: Option<&String> = None;
    for q in queues {
        best = match best {
            None => Some(q),
            Some(b) => {
                if ssn.queue_order(q, b).then_with(|| q.cmp(b)) == std::cmp::Ordering::Less {
                    Some(q)
                } else {
                    Some(b)
                }
            }
        };
    }
    best.cloned()
}
