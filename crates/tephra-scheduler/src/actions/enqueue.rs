//! `enqueue`: admit Pending PodGroups (Pending → Inqueue) when their queue is Open, the job is
//! valid, and the plugins' votes (overcommit, proportion, ...) allow its minResources in.

use crate::model::GroupPhase;
use crate::session::{Session, queue_open};

pub(super) fn execute(ssn: &mut Session) {
    let mut by_queue = super::jobs_by_queue(ssn, |ssn, job| {
        ssn.state.phase(&ssn.snap, job) == Some(GroupPhase::Pending)
    });
    while let Some(queue) = super::next_queue(ssn, by_queue.keys()) {
        let Some(jobs) = by_queue.get_mut(&queue) else {
            break;
        };
        if jobs.is_empty() {
            by_queue.remove(&queue);
            continue;
        }
        let job = jobs.remove(0);
        if let Err(msg) = queue_open(&ssn.snap, &queue) {
            let note = ssn.note(job);
            note.reason = Some("QueueNotOpen");
            note.message = Some(msg);
            continue;
        }
        if let Err(invalid) = ssn.job_valid(job) {
            let note = ssn.note(job);
            note.reason = Some(invalid.reason);
            note.message = Some(invalid.message.clone());
            note.invalid = Some(invalid);
            continue;
        }
        if ssn.job_enqueueable(job) {
            ssn.set_phase(job, GroupPhase::Inqueue);
            ssn.job_enqueued(job);
        } else {
            let note = ssn.note(job);
            note.reason = Some("NotEnqueueable");
            note.message = Some(format!(
                "queue {queue} cannot admit the job yet: its minResources do not fit what the \
                 fleet and the queue have free"
            ));
        }
    }
}
