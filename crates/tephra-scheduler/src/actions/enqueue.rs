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
use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};

use tephra_api::reasons;

use crate::cache::backlog::{BucketKey, Rank};
use crate::config::{ArgErrors, ArgReader, ArgSpec, Args};
use crate::duration::Duration;
use crate::framework::order::{jobs_by_queue, jobs_by_queue_of, next_queue};
use crate::framework::session::{Session, queue_open};
use crate::model::{GroupPhase, Id};
use crate::placement::Placer;
use crate::placement::capacity::{Capacity, capacities, never_fits};
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
    /// What a job of `queue` at `priority` could ask to be admitted this session (`None`: the
    /// plugins cannot say).
    fn room(&self, ssn: &Session, queue: &str, priority: i32) -> Option<Resources> {
        let mut known = self.known.borrow_mut();
        match known.iter().find(|k| k.0 == queue && k.1 == priority) {
            Some(k) => k.2,
            None => {
                let room = ssn.hooks().admission_headroom(queue, priority);
                known.push((queue.to_string(), priority, room));
                room
            }
        }
    }

    /// Whether `job` could be admitted at all this session (`true` when the plugins cannot
    /// say, or it asks for no minResources).
    fn may_admit(&self, ssn: &Session, job: Id) -> bool {
        let Some(j) = ssn.snap.jobs.get(job) else {
            return true;
        };
        let Some(min) = j.group.as_ref().and_then(|g| g.min_resources) else {
            return true;
        };
        let room = self.room(ssn, j.queue(), ssn.view().job_priority(job));
        fits(&min, room)
    }
}

/// Whether `min` fits in `room` (`None`: no bound).
fn fits(min: &Resources, room: Option<Resources>) -> bool {
    room.is_none_or(|room| min.fits_in(&room).is_ok())
}

/// Whether a job was admitted before and sent back: it goes after the jobs of its queue that
/// never had their chance, so that the budget it gave back is not simply taken by itself again.
fn returned(ssn: &Session, job: Id) -> bool {
    ssn.snap
        .jobs
        .get(job)
        .and_then(|j| j.group.as_ref())
        .is_some_and(|g| g.phase_since > g.created)
}

/// One bucket of a queue's backlog (`cache/backlog.rs`), read in its order: the jobs that
/// could be admitted, one at a time.
struct Cursor<'s> {
    key: BucketKey,
    floor: Resources,
    ranks: std::collections::btree_set::Iter<'s, Rank>,
    /// What a job of the bucket could ask when the session opened.
    start: Option<Resources>,
    /// What it could ask after the last admission looked at (`admitted` of them).
    now: Option<Resources>,
    admitted: usize,
    /// The next job that could be admitted, if found.
    head: Option<Id>,
}

impl Cursor<'_> {
    /// Finds the next job that the votes could admit, if any: one whose minResources fits
    /// what its queue could admit when the session opened and, when `open`, now (after
    /// `admitted` admissions; the votes refuse any other, so passing it over changes nothing).
    fn advance(&mut self, ssn: &Session, queue: &str, open: bool, admitted: usize) {
        if open && self.admitted != admitted {
            self.admitted = admitted;
            self.now = ssn.hooks().admission_headroom(queue, self.key.0);
            if !fits(&self.floor, self.now) {
                // None of the bucket's jobs asks less: the votes refuse them all.
                self.head = None;
                self.ranks = Default::default();
                return;
            }
            if let Some(head) = self.head
                && !self.admissible(ssn, head, open)
            {
                self.head = None;
            }
        }
        while self.head.is_none() {
            let Some(rank) = self.ranks.next() else {
                return;
            };
            if self.admissible(ssn, rank.id, open) {
                self.head = Some(rank.id);
            }
        }
    }

    fn admissible(&self, ssn: &Session, job: Id, open: bool) -> bool {
        let Some(min) = ssn
            .snap
            .jobs
            .get(job)
            .and_then(|j| j.group.as_ref())
            .and_then(|g| g.min_resources)
        else {
            return true;
        };
        fits(&min, self.start) && (!open || fits(&min, self.now))
    }
}

/// One queue's Pending jobs in the order enqueue takes them: its active ones (sorted) merged
/// with the buckets of its backlog, each already in job order.
#[derive(Default)]
struct Line<'s> {
    jobs: VecDeque<Id>,
    buckets: Vec<Cursor<'s>>,
    /// The queue admits new work (its backlog's jobs are passed over only then).
    open: bool,
}

impl Line<'_> {
    /// The next job in order, taken out.
    fn pop(&mut self, ssn: &Session, queue: &str, admitted: usize) -> Option<Id> {
        for c in &mut self.buckets {
            c.advance(ssn, queue, self.open, admitted);
        }
        self.buckets.retain(|c| c.head.is_some());
        let hooks = ssn.hooks();
        let before = |a: (bool, Id), b: (bool, Id)| {
            a.0.cmp(&b.0).then_with(|| hooks.job_order(a.1, b.1)) == Ordering::Less
        };
        // `None`: the active jobs' front; `Some(i)`: bucket i's head.
        let mut best: Option<(Option<usize>, (bool, Id))> =
            self.jobs.front().map(|&j| (None, (returned(ssn, j), j)));
        for (i, c) in self.buckets.iter().enumerate() {
            let Some(head) = c.head else { continue };
            let cand = (c.key.1, head);
            if best.is_none_or(|(_, b)| before(cand, b)) {
                best = Some((Some(i), cand));
            }
        }
        match best? {
            (None, _) => self.jobs.pop_front(),
            (Some(i), (_, job)) => {
                self.buckets[i].head = None;
                Some(job)
            }
        }
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
    let keep = |ssn: &Session, job: Id| {
        ssn.state.phase(&ssn.snap, job) == Some(GroupPhase::Pending)
            && (!ssn.snap.resting.contains(&job) || headroom.may_admit(ssn, job))
    };
    // The backlog is in job order already where the plugins' order ties its jobs; otherwise its
    // jobs are sorted with the others.
    let ordered = ssn.hooks().job_order_ties_waiting();
    let snap = ssn.snap.clone();
    let mut by_queue = if ordered {
        jobs_by_queue(ssn, keep)
    } else {
        jobs_by_queue_of(
            ssn,
            snap.active_jobs.iter().copied().chain(snap.backlog.ids()),
            keep,
        )
    };
    for jobs in by_queue.values_mut() {
        jobs.make_contiguous()
            .sort_by_key(|&job| returned(ssn, job));
    }
    let mut lines: BTreeMap<String, Line> = by_queue
        .into_iter()
        .map(|(q, jobs)| {
            (
                q,
                Line {
                    jobs,
                    ..Line::default()
                },
            )
        })
        .collect();
    if ordered {
        for (queue, backlog) in snap.backlog.queues() {
            let open = queue_open(&snap, queue).is_ok();
            for (&key, bucket) in &backlog.buckets {
                let start = headroom.room(ssn, queue, key.0);
                // None of its jobs could be admitted this session: all are passed over.
                if !fits(&bucket.floor, start) {
                    continue;
                }
                let line = lines.entry(queue.clone()).or_default();
                line.open = open;
                line.buckets.push(Cursor {
                    key,
                    floor: bucket.floor,
                    ranks: bucket.jobs.iter(),
                    start,
                    now: start,
                    admitted: 0,
                    head: None,
                });
            }
        }
    }
    let mut caps: Option<Vec<Capacity>> = None;
    let mut admitted = 0usize;
    while let Some(queue) = next_queue(ssn, lines.keys()) {
        let Some(line) = lines.get_mut(&queue) else {
            break;
        };
        let Some(job) = line.pop(ssn, &queue, admitted) else {
            lines.remove(&queue);
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
            continue;
        }
        // No validity check here, as in Volcano: a Volcano Job's pods are created only once
        // its PodGroup is Inqueue, so a PodGroup without its pods yet must be admissible.
        // allocate checks validity before placing anything.
        let caps = caps.get_or_insert_with(|| capacities(ssn));
        if let Some(why) = never_fits(ssn, job, caps) {
            let note = ssn.note(job);
            note.reason = Some(reasons::NOT_ENQUEUEABLE);
            note.message = Some(why);
            note.never_fits = true;
            continue;
        }
        if ssn.hooks().job_enqueueable(job) {
            ssn.set_phase(job, GroupPhase::Inqueue);
            ssn.job_enqueued(job);
            admitted += 1;
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
