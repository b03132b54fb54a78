//! `enqueue`: admit Pending PodGroups (Pending → Inqueue) when their queue is Open, the job is
//! valid, and the plugins' votes (overcommit, proportion, ...) allow its minResources in.

use tephra_api::reasons;

use crate::config::{ArgErrors, ArgReader, ArgSpec, Args};
use crate::framework::order::{jobs_by_queue, next_queue};
use crate::framework::session::{Session, queue_open};
use crate::model::GroupPhase;
use crate::placement::Placer;

/// `enqueue` takes no arguments.
pub const ARGS: ArgSpec = ArgSpec::NONE;

/// Checks the arguments.
pub fn check(args: &Args) -> Result<(), ArgErrors> {
    ArgReader::new(args, &ARGS).finish()
}

/// Runs `enqueue`.
pub fn execute(ssn: &mut Session, _placer: &mut Placer, _args: &Args) {
    let mut by_queue = jobs_by_queue(ssn, |ssn, job| {
        ssn.state.phase(&ssn.snap, job) == Some(GroupPhase::Pending)
    });
    while let Some(queue) = next_queue(ssn, by_queue.keys()) {
        let Some(jobs) = by_queue.get_mut(&queue) else {
            break;
        };
        if jobs.is_empty() {
            by_queue.remove(&queue);
            continue;
        }
        let job = jobs.remove(0);
        if let Err(closed) = queue_open(&ssn.snap, &queue) {
            let note = ssn.note(job);
            note.reason = Some(reasons::QUEUE_NOT_OPEN);
            note.message = Some(closed.to_string());
            continue;
        }
        if let Err(invalid) = ssn.hooks().job_valid(job) {
            let note = ssn.note(job);
            note.reason = Some(invalid.reason);
            note.message = Some(invalid.message.clone());
            note.invalid = Some(invalid);
            continue;
        }
        if ssn.hooks().job_enqueueable(job) {
            ssn.set_phase(job, GroupPhase::Inqueue);
            ssn.job_enqueued(job);
        } else {
            let note = ssn.note(job);
            note.reason = Some(reasons::NOT_ENQUEUEABLE);
            note.message = Some(format!(
                "queue {queue} cannot admit the job yet: its minResources do not fit what the \
                 fleet and the queue have free"
            ));
        }
    }
}
