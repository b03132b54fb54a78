//! `allocate`: place admitted gangs, queue by queue in queue order, job by job in job order
//! (see [`crate::placement::job`] for how one job is placed). An overused queue waits; a fifo
//! queue waits behind its first job that does not fit. Without an `enqueue` action in the
//! configuration, allocate admits Pending jobs of Open queues itself, as Volcano's does.
//!
//! An admitted job that fails and can never be placed at all (its pods arrived after its
//! admission, as a Volcano Job's do, and no node could ever take one: see
//! [`never_fits`](crate::placement::capacity::never_fits)) goes back to Pending at once and is
//! parked with `NotInqueueable`, so that it holds no admission budget and blocks no fifo queue.
//!
//! A runner may cap how many pods one allocate places ([`POD_BUDGET`]): it stops after the
//! job that reached the cap, leaving the jobs after it untried (no note, no verdict), for
//! the next session. tephra's runtime caps the sessions that follow its start, so that the
//! first gangs of a backlog are bound while the rest is still being decided.

use tephra_api::reasons;

use crate::config::{ArgErrors, ArgSpec, Args};
use crate::framework::order::{jobs_by_queue, jobs_by_queue_of, next_queue};
use crate::framework::session::{Session, queue_open};
use crate::model::{Dequeue, GroupPhase, Id};
use crate::placement::capacity::{Capacity, capacities, never_fits};
use crate::placement::search::SEARCH_ONLY;
use crate::placement::{Outcome, Placer, SearchArgs, allocate_job};

/// What `allocate` reads: the node-search arguments.
pub const ARGS: ArgSpec = SEARCH_ONLY;

/// The argument a runner sets to cap the pods one allocate places (a whole number). It is
/// not one of [`ARGS`]: a configuration file that sets it is refused, since a session whose
/// allocate stops early must not go on to evict for the jobs it left untried (the runner
/// that sets it runs enqueue and allocate only).
pub const POD_BUDGET: &str = "tephra.io/pod-budget";

/// Checks the arguments.
pub fn check(args: &Args) -> Result<(), ArgErrors> {
    SearchArgs::read(args, &ARGS).map(|_| ())
}

/// Runs `allocate`.
pub fn execute(ssn: &mut Session, placer: &mut Placer, args: &Args) {
    let mut args = args.clone();
    let budget = args
        .remove(POD_BUDGET)
        .and_then(|v| v.as_f64())
        .map(|b| b.max(0.0) as u64);
    let mut placed: u64 = 0;
    let search = SearchArgs::read(&args, &ARGS).unwrap_or_default();
    let admits = ssn.allocate_admits;
    let mut caps: Option<Vec<Capacity>> = None;
    let keep = |ssn: &Session, job: Id| match ssn.state.phase(&ssn.snap, job) {
        Some(GroupPhase::Inqueue | GroupPhase::Running | GroupPhase::Unknown) => true,
        Some(GroupPhase::Pending) => admits,
        _ => false,
    };
    // The backlog holds Pending jobs only: it is looked at when this action admits them (a
    // configuration without `enqueue` that the cache was not told of).
    let snap = ssn.snap.clone();
    let mut by_queue = if admits && !snap.backlog.is_empty() {
        let jobs = snap.active_jobs.iter().copied().chain(snap.backlog.ids());
        jobs_by_queue_of(ssn, jobs, keep)
    } else {
        jobs_by_queue(ssn, keep)
    };
    while let Some(queue) = next_queue(ssn, by_queue.keys()) {
        if budget.is_some_and(|b| placed >= b) {
            break;
        }
        let Some(jobs) = by_queue.get_mut(&queue) else {
            break;
        };
        if jobs.is_empty() {
            by_queue.remove(&queue);
            continue;
        }
        if ssn.hooks().overused(&queue) {
            for job in by_queue.remove(&queue).unwrap_or_default() {
                if !ssn.view().has_pending(job) {
                    continue;
                }
                let note = ssn.note(job);
                note.reason = Some(reasons::QUEUE_OVERUSED);
                note.message = Some(format!("queue {queue} is over its deserved share"));
            }
            continue;
        }
        let Some(job) = jobs.pop_front() else {
            continue;
        };
        if ssn.state.phase(&ssn.snap, job) == Some(GroupPhase::Pending) {
            // No enqueue action: admitted here, as long as the queue is Open.
            if let Err(closed) = queue_open(&ssn.snap, &queue) {
                let note = ssn.note(job);
                note.reason = Some(reasons::QUEUE_NOT_OPEN);
                note.message = Some(closed.to_string());
                continue;
            }
            ssn.set_phase(job, GroupPhase::Inqueue);
            ssn.job_enqueued(job);
        }
        let pending = budget.map(|_| ssn.view().counts(job).pending);
        let outcome = allocate_job(ssn, placer, job, &search);
        if let Some(before) = pending {
            let after = ssn.view().counts(job).pending;
            placed += u64::from(before.saturating_sub(after));
        }
        if outcome == Outcome::Failed && never_placeable(ssn, job, &mut caps) {
            continue;
        }
        let fifo = ssn
            .snap
            .queues
            .get(&queue)
            .is_some_and(|q| q.dequeue == Dequeue::Fifo);
        if outcome == Outcome::Failed && fifo {
            // Head-of-line blocking: later jobs of a fifo queue wait behind this one.
            for waiting in by_queue.remove(&queue).unwrap_or_default() {
                if !ssn.view().has_pending(waiting) {
                    continue;
                }
                let note = ssn.note(waiting);
                note.reason = Some(reasons::QUEUE_BLOCKED);
                note.message = Some(format!(
                    "queue {queue} is fifo and an earlier job is still waiting"
                ));
            }
        }
    }
}

/// Sends an admitted job that can never be placed back to Pending, to be parked; says whether.
fn never_placeable(ssn: &mut Session, job: Id, caps: &mut Option<Vec<Capacity>>) -> bool {
    if ssn.state.phase(&ssn.snap, job) != Some(GroupPhase::Inqueue) {
        return false;
    }
    let caps = caps.get_or_insert_with(|| capacities(ssn));
    let Some(why) = never_fits(ssn, job, caps) else {
        return false;
    };
    ssn.set_phase(job, GroupPhase::Pending);
    ssn.job_dequeued(job);
    let note = ssn.note(job);
    note.reason = Some(reasons::NOT_ENQUEUEABLE);
    note.message = Some(why);
    note.never_fits = true;
    true
}
