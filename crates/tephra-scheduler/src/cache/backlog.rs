//! The backlog: resting jobs (`parking.rs`) that hold nothing, kept out of `active_jobs`, so
//! that a session touches none of them unless their queue could admit one.
//!
//! A job joins when the enqueue votes refused it and it rests, if every one of its pods is
//! Pending and its PodGroup asks for minResources; it leaves when it wakes (its PodGroup or
//! pods, its queue, the fleet or the configuration changed, or a session decided a status for
//! it) and goes back to `active_jobs`. Each queue keeps what its backlog asks for (fair shares
//! count it), what of that is admissible (the queue's status), and how many jobs and Pending
//! pods it holds (a session counts them as passed over). Within a queue, jobs are in buckets of
//! one priority and one admission history (admitted before and sent back, or not: `enqueue`
//! puts those last), each bucket in creation order and then name: among such jobs that is the
//! job order, under plugins whose order ties jobs that hold nothing
//! (`JobOrder::ties_waiting`). Each bucket keeps the least minResources of its jobs in each
//! resource, so that a session whose admission headroom is below it passes it over whole.
//!
//! What a job adds is kept with it, so that it is taken out exactly as it was put in, whatever
//! changed of the job since.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{Id, Job};
use crate::resources::Resources;

/// A bucket of a queue's backlog: its jobs' priority, and whether they were admitted before.
pub type BucketKey = (i32, bool);

/// A job's place in its bucket: the job order among the bucket's jobs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rank {
    /// Its PodGroup's creation time.
    pub created: i64,
    /// `namespace/name`.
    pub key: String,
    /// The job slot.
    pub id: Id,
}

/// Jobs of one queue, priority and admission history, in job order.
#[derive(Clone, Debug, Default)]
pub struct Bucket {
    /// The jobs, in order.
    pub jobs: BTreeSet<Rank>,
    /// In each resource, no more than the least minResources of any job in the bucket (it may
    /// be lower while `stale`): a headroom it does not fit in admits none of them.
    pub floor: Resources,
    /// A job left since `floor` was worked out.
    stale: bool,
}

/// One queue's backlog.
#[derive(Clone, Debug, Default)]
pub struct QueueBacklog {
    /// Its buckets.
    pub buckets: BTreeMap<BucketKey, Bucket>,
    /// What its jobs' Pending pods ask for.
    pub request: Resources,
    /// What the ungated Pending pods of its valid jobs ask for: its admissible sum.
    pub admissible: Resources,
    /// How many jobs.
    pub jobs: u32,
    /// Their Pending pods.
    pub pending_tasks: u64,
}

/// What one job added, to take out as it was put in.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Its queue.
    pub queue: String,
    /// Its bucket.
    pub bucket: BucketKey,
    /// Its place in the bucket.
    pub rank: Rank,
    /// Its minResources.
    pub min: Resources,
    /// What its Pending pods ask for.
    pub request: Resources,
    /// What it adds to its queue's admissible sum.
    pub admissible: Resources,
    /// Its Pending pods.
    pub pending: u32,
}

/// The resting jobs kept out of `active_jobs`, by queue.
#[derive(Clone, Debug, Default)]
pub struct Backlog {
    queues: BTreeMap<String, QueueBacklog>,
    entries: BTreeMap<Id, Entry>,
    /// Some bucket's floor is stale.
    stale: bool,
}

impl Backlog {
    /// Whether the job is in the backlog.
    #[inline]
    pub fn contains(&self, id: Id) -> bool {
        self.entries.contains_key(&id)
    }

    /// What the job added, if it is in the backlog.
    pub fn entry(&self, id: Id) -> Option<&Entry> {
        self.entries.get(&id)
    }

    /// How many jobs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds no job.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The queues with a backlog, by name.
    pub fn queues(&self) -> impl Iterator<Item = (&String, &QueueBacklog)> {
        self.queues.iter()
    }

    /// The jobs, in slot order.
    pub fn ids(&self) -> impl Iterator<Item = Id> + '_ {
        self.entries.keys().copied()
    }

    /// Whether a job may join: every pod Pending (it holds nothing, and nothing of it is
    /// ready or pipelined) and minResources to compare with a queue's headroom.
    pub fn admits(job: &Job) -> bool {
        let min = job.group.as_ref().and_then(|g| g.min_resources);
        min.is_some() && usize::try_from(job.tally.pending).ok() == Some(job.tasks.len())
    }

    /// Puts `job` (slot `id`, at `priority`) in; `valid` says whether what its pods ask counts
    /// in its queue's admissible sum. Returns whether it joined ([`Backlog::admits`]).
    pub(super) fn insert(&mut self, id: Id, job: &Job, priority: i32, valid: bool) -> bool {
        let Some(group) = job.group.as_ref() else {
            return false;
        };
        let Some(min) = group.min_resources else {
            return false;
        };
        if !Self::admits(job) || self.contains(id) {
            return false;
        }
        let entry = Entry {
            queue: group.queue.clone(),
            bucket: (priority, group.phase_since > group.created),
            rank: Rank {
                created: group.created,
                key: job.key.clone(),
                id,
            },
            min,
            request: job.pending_request,
            admissible: if valid {
                job.pending_ungated
            } else {
                Resources::ZERO
            },
            pending: u32::try_from(job.tally.pending).unwrap_or(0),
        };
        self.add(&entry);
        self.entries.insert(id, entry);
        true
    }

    fn add(&mut self, e: &Entry) {
        let q = self.queues.entry(e.queue.clone()).or_default();
        q.request.add(&e.request);
        q.admissible.add(&e.admissible);
        q.jobs += 1;
        q.pending_tasks += u64::from(e.pending);
        let b = q.buckets.entry(e.bucket).or_default();
        b.floor = if b.jobs.is_empty() {
            e.min
        } else {
            b.floor.min(&e.min)
        };
        b.jobs.insert(e.rank.clone());
    }

    /// Takes the job out. Returns whether it was in.
    pub(super) fn remove(&mut self, id: Id) -> bool {
        let Some(e) = self.entries.remove(&id) else {
            return false;
        };
        self.subtract(&e);
        true
    }

    fn subtract(&mut self, e: &Entry) {
        let Some(q) = self.queues.get_mut(&e.queue) else {
            return;
        };
        q.request.sub(&e.request);
        q.admissible.sub(&e.admissible);
        q.jobs = q.jobs.saturating_sub(1);
        q.pending_tasks = q.pending_tasks.saturating_sub(u64::from(e.pending));
        if let Some(b) = q.buckets.get_mut(&e.bucket) {
            b.jobs.remove(&e.rank);
            b.stale = true;
            self.stale = true;
            if b.jobs.is_empty() {
                q.buckets.remove(&e.bucket);
            }
        }
        if q.jobs == 0 {
            self.queues.remove(&e.queue);
        }
    }

    /// Takes every job out, returning them.
    pub(super) fn take_all(&mut self) -> Vec<Id> {
        self.queues.clear();
        std::mem::take(&mut self.entries).into_keys().collect()
    }

    /// Moves each job whose priority is no longer the one it was put in at to its new bucket
    /// (a PriorityClass changed).
    pub(super) fn reprioritize(&mut self, priority: impl Fn(Id) -> Option<i32>) {
        let moved: Vec<(Id, i32)> = self
            .entries
            .iter()
            .filter_map(|(&id, e)| priority(id).filter(|p| *p != e.bucket.0).map(|p| (id, p)))
            .collect();
        for (id, p) in moved {
            if let Some(mut e) = self.entries.remove(&id) {
                self.subtract(&e);
                e.bucket.0 = p;
                self.add(&e);
                self.entries.insert(id, e);
            }
        }
    }

    /// Whether some bucket's floor is stale ([`Backlog::refresh_floors`]).
    pub fn stale(&self) -> bool {
        self.stale
    }

    /// Works out again the floor of each bucket that lost a job since it was last worked out.
    pub(super) fn refresh_floors(&mut self) {
        if !self.stale {
            return;
        }
        self.stale = false;
        let entries = &self.entries;
        for q in self.queues.values_mut() {
            for b in q.buckets.values_mut().filter(|b| b.stale) {
                b.stale = false;
                let mut mins = b
                    .jobs
                    .iter()
                    .filter_map(|r| entries.get(&r.id))
                    .map(|e| e.min);
                if let Some(first) = mins.next() {
                    b.floor = mins.fold(first, |f, m| f.min(&m));
                }
            }
        }
    }
}
