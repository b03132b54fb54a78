//! `enqueue`: admit Pending PodGroups (Pending → Inqueue) when their queue is Open, some
//! eligible cluster could ever hold the gang ([`never_fits`]), and the plugins'
//! votes (overcommit, proportion, ...) allow its minResources in.
//!
//! An admitted job that still cannot be placed `inqueueTimeout` after its admission (default
//! 5m; a Go duration) goes back to Pending when the session closes, with a condition that says
//! so, so that it stops holding its queue's admission budget (Volcano moves such PodGroups back
//! too); a job that reserves room (sla) or was pipelined keeps its place.
//!
//! A resting job (refused by the votes before, its status saying so, nothing changed since:
//! `cache/parking.rs`) is only put to the votes: while they refuse, it is passed over in
//! silence, and its place in the order is kept so that what is admitted stays the same. One that
//! asks for more than its queue could admit at all this session (the plugins' headroom, which
//! admissions only lower) is passed over before the jobs are sorted.

use std::cell::RefCell;

use tephra_api::reasons;

use crate::config::{ArgErrors, ArgReader, ArgSpec, Args};
use crate::duration::Duration;
use crate::framework::order::{jobs_by_queue, next_queue};
use crate::framework::session::{Session, queue_open};
use crate::model::{GroupPhase, Id};
use crate::placement::Placer;
use crate::placement::capacity::{capacities, never_fits};
use crate::resources::Resources;

/// What `enqueue` reads.
pub const ARGS: ArgSpec = ArgSpec {
    keys: &["inqueueTimeout"],
    prefixes: &[],
    inert: &[],
};

/// How long an admitted job may wait to be placed before it goes back to Pending, by default.
pub const DEFAULT_INQUEUE_TIMEOUT_S: i64 = 300;

/// The `inqueueTimeout` argument, in seconds.
fn read(args: &Args) -> Result<i64, ArgErrors> {
    let r = ArgReader::new(args, &ARGS);
    let timeout = match r.string("inqueueTimeout") {
        None => DEFAULT_INQUEUE_TIMEOUT_S,
        Some(text) => match Duration::parse(&text) {
            Ok(d) if !d.is_negative() => d.as_secs(),
            _ => {
                r.refuse(
                    "inqueueTimeout",
                    format!("{text:?} is not a duration such as 5m or 1h"),
                );
                0
            }
        },
    };
    r.finish()?;
    Ok(timeout)
}

/// What each queue could admit this session, by priority, asked of the plugins once
/// ([`Dispatch::admission_headroom`](crate::framework::hooks::Dispatch::admission_headroom)).
#[derive(Default)]
struct Headroom {
    known: RefCell<Vec<(String, i32, Option<Resources>)>>,
}

impl Headroom {
    /// Whether `job` could be admitted at all this session (`true` when the plugins cannot
    /// say, or it asks for no minResources).
    fn may_admit(&self, ssn: &Session, job: Id) -> bool {
        let Some(j) = ssn.snap.jobs.get(job) else {
            return true;
        };
        let Some(min) = j.group.as_ref().and_then(|g| g.min_resources) else {
            return true;
        };
        let (queue, priority) = (j.queue(), ssn.view().job_priority(job));
        let mut known = self.known.borrow_mut();
        let room = match known.iter().find(|k| k.0 == queue && k.1 == priority) {
            Some(k) => k.2,
            None => {
                let room = ssn.hooks().admission_headroom(queue, priority);
                known.push((queue.to_string(), priority, room));
                room
            }
        };
        room.is_none_or(|room| min.fits_in(&room).is_ok())
    }
}

/// Checks the arguments.
pub fn check(args: &Args) -> Result<(), ArgErrors> {
    read(args).map(|_| ())
}

/// Runs `enqueue`.
pub fn execute(ssn: &mut Session, _placer: &mut Placer, args: &Args) {
    // Applied when the session closes, to admitted jobs this session could not place either.
    ssn.inqueue_timeout = Some(read(args).unwrap_or(DEFAULT_INQUEUE_TIMEOUT_S));
    // A resting job asking for more than its queue could admit at all this session is passed
    // over before the jobs are even sorted: taking it out keeps the others' order.
    let headroom = Headroom::default();
    let passed = RefCell::new(Vec::new());
    let mut by_queue = jobs_by_queue(ssn, |ssn, job| {
        if ssn.state.phase(&ssn.snap, job) != Some(GroupPhase::Pending) {
            return false;
        }
        if ssn.snap.resting.contains(&job) && !headroom.may_admit(ssn, job) {
            passed.borrow_mut().push(job);
            return false;
        }
        true
    });
    for job in passed.into_inner() {
        ssn.pass_over(job);
    }
    // A job back from an admission that did not lead to a placement (its phase changed after
    // it was created) is admitted after the jobs of its queue that never had their chance, so
    // that the budget it gave back is not simply taken by itself again.
    for jobs in by_queue.values_mut() {
        jobs.make_contiguous().sort_by_key(|&job| {
            ssn.snap
                .jobs
                .get(job)
                .and_then(|j| j.group.as_ref())
                .is_some_and(|g| g.phase_since > g.created)
        });
    }
    let caps = if by_queue.is_empty() {
        Vec::new()
    } else {
        capacities(ssn)
    };
    while let Some(queue) = next_queue(ssn, by_queue.keys()) {
        let Some(jobs) = by_queue.get_mut(&queue) else {
            break;
        };
        if jobs.is_empty() {
            by_queue.remove(&queue);
            continue;
        }
        let Some(job) = jobs.pop_front() else {
            continue;
        };
        if let Err(closed) = queue_open(&ssn.snap, &queue) {
            let note = ssn.note(job);
            note.reason = Some(reasons::QUEUE_NOT_OPEN);
            note.message = Some(closed.to_string());
            continue;
        }
        // A resting job could not be told it never fits (neither it nor the fleet changed since
        // it was last checked), so the votes alone decide whether there is anything new.
        if ssn.snap.resting.contains(&job) && !ssn.hooks().job_enqueueable(job) {
            ssn.pass_over(job);
            continue;
        }
        // No validity check here, as in Volcano: a Volcano Job's pods are created only once
        // its PodGroup is Inqueue, so a PodGroup without its pods yet must be admissible.
        // allocate checks validity before placing anything.
        if let Some(why) = never_fits(ssn, job, &caps) {
            let note = ssn.note(job);
            note.reason = Some(reasons::NOT_ENQUEUEABLE);
            note.message = Some(why);
            note.never_fits = true;
            continue;
        }
        if ssn.hooks().job_enqueueable(job) {
            ssn.set_phase(job, GroupPhase::Inqueue);
            ssn.job_enqueued(job);
        } else {
            // What it asks, so that the resource in short supply can be told.
            let asks = ssn
                .snap
                .jobs
                .get(job)
                .and_then(|j| j.group.as_ref())
                .and_then(|g| g.min_resources)
                .map(|r| {
                    let list = ssn.snap.names.to_list(&r);
                    let parts: Vec<String> = list
                        .iter()
                        .filter(|(k, _)| k.as_str() != "pods")
                        .map(|(k, v)| format!("{k} {v}"))
                        .collect();
                    format!(" ({})", parts.join(", "))
                })
                .unwrap_or_default();
            let note = ssn.note(job);
            note.reason = Some(reasons::NOT_ENQUEUEABLE);
            note.refused = true;
            note.message = Some(format!(
                "queue {queue} cannot admit the job yet: its minResources{asks} do not fit what \
                 the fleet and the queue have free"
            ));
        }
    }
}
