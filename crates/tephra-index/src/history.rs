//! What the web UI shows over time (`/ui/api/v1/history`): each queue's figures sampled over
//! the last hours, each job's history of phases and reasons (keyed by the name the user gave),
//! the jobs gone lately with where they ran, and a timeline of failover
//! (clusters going unready and back, taints added and removed, gangs evicted from a cluster
//! and moved to another). Built by comparing each fleet view ([`crate::view`]) with the one
//! before, at the caller's time: no IO, no clock. Kept in memory by the replica that serves
//! the UI, bounded: samples for [`KEEP_S`], [`JOB_CHANGES`] changes per job and the jobs of the
//! last [`KEEP_S`], [`FAILOVER_EVENTS`] failover events.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use serde::Serialize;

use crate::view::{FleetView, number};

/// How long samples and gone jobs are kept, seconds (six hours).
pub const KEEP_S: i64 = 6 * 3600;
/// Seconds between two samples of a queue.
pub const SAMPLE_S: i64 = 60;
/// Changes kept per job.
pub const JOB_CHANGES: usize = 32;
/// Failover events kept.
pub const FAILOVER_EVENTS: usize = 500;
/// Gone jobs kept.
pub const GONE_JOBS: usize = 200;

/// One queue at one moment. Quantities are numbers: CPU in cores, memory in bytes, the rest in
/// their own units.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct QueueSample {
    /// Seconds since the epoch.
    pub at: i64,
    /// What its pods hold.
    pub allocated: BTreeMap<String, f64>,
    /// `spec.deserved`.
    pub deserved: BTreeMap<String, f64>,
    /// What its waiting jobs ask.
    pub waiting_request: BTreeMap<String, f64>,
    /// PodGroups pending, inqueue, running.
    pub pending: u32,
    /// Inqueue.
    pub inqueue: u32,
    /// Running.
    pub running: u32,
}

/// One change of a job's phase or reason.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JobChange {
    /// Seconds since the epoch.
    pub at: i64,
    /// Phase.
    pub phase: String,
    /// Why it waits, if it does.
    pub reason: Option<String>,
    /// The condition's message.
    pub message: Option<String>,
    /// Where it runs.
    pub clusters: Vec<String>,
}

/// One failover event.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FailoverEvent {
    /// Seconds since the epoch.
    pub at: i64,
    /// `ClusterNotReady`, `ClusterReady`, `Tainted`, `Untainted`, `EvictionStarted`,
    /// `EvictionEnded`, `Moved`.
    pub kind: &'static str,
    /// The cluster.
    pub cluster: String,
    /// The job (`namespace/name`), for evictions and moves.
    pub job: Option<String>,
    /// What happened, in words.
    pub detail: String,
}

/// A job gone from the fleet in the last [`KEEP_S`]: its PodGroup is gone (a Volcano Job gives
/// its PodGroup up when it finishes; or the job was deleted), kept with where it last ran.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GoneJob {
    /// What the user named ([`crate::view::JobView::key`]).
    pub key: String,
    /// The PodGroup's name.
    pub podgroup: String,
    /// Queue.
    pub queue: String,
    /// Seconds since the epoch it was last seen at.
    pub gone_at: i64,
    /// Its last phase while its PodGroup was there.
    pub last_phase: String,
    /// Pods running (or succeeded) and pods, last seen.
    pub running: u32,
    /// Pods.
    pub pods: u32,
    /// The clusters it last ran in.
    pub clusters: Vec<String>,
    /// And nodes (`cluster/node`).
    pub nodes: Vec<String>,
}

/// The JSON the UI renders (`/ui/api/v1/history`): bounded by the number of queues, not of
/// jobs; a job's changes are asked for one job at a time ([`JobHistory`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HistoryView {
    /// [`crate::view::VERSION`].
    pub version: &'static str,
    /// Seconds since the epoch this replica's history starts at (its first view): nothing
    /// before it is known.
    pub since: Option<i64>,
    /// Jobs gone from the fleet in the last [`KEEP_S`], the latest first (at most
    /// [`GONE_JOBS`]).
    pub gone: Vec<GoneJob>,
    /// Seconds between samples.
    pub sample_seconds: i64,
    /// Each queue's samples, oldest first.
    pub queues: BTreeMap<String, Vec<QueueSample>>,
    /// Failover events, oldest first.
    pub failover: Vec<FailoverEvent>,
}

/// One job's changes (`/ui/api/v1/history/jobs/NAMESPACE/NAME`), oldest first; none when it
/// was not seen in the last [`KEEP_S`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JobHistory {
    /// `namespace/name`.
    pub job: String,
    /// Its changes.
    pub changes: Vec<JobChange>,
}

/// What was last seen of a cluster: ready, taints.
type ClusterSeen = (bool, BTreeSet<String>);

/// The history, fed view after view.
#[derive(Clone, Debug, Default)]
pub struct History {
    started: Option<i64>,
    last_sample: Option<i64>,
    /// Each job in the last view, as it would be remembered if it went.
    present: HashMap<String, GoneJob>,
    /// Jobs gone, oldest first.
    gone: VecDeque<GoneJob>,
    queues: BTreeMap<String, VecDeque<QueueSample>>,
    /// Each job's changes, and when it was last in a view.
    jobs: HashMap<String, (VecDeque<JobChange>, i64)>,
    failover: VecDeque<FailoverEvent>,
    clusters: BTreeMap<String, ClusterSeen>,
    /// Each job's clusters where it last ran somewhere, and the clusters it is evicted from.
    placed: HashMap<String, Vec<String>>,
    evicting: HashMap<String, Vec<String>>,
}

fn numbers(m: &BTreeMap<String, String>) -> BTreeMap<String, f64> {
    m.iter().map(|(k, v)| (k.clone(), number(v))).collect()
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    fn event(&mut self, e: FailoverEvent) {
        self.failover.push_back(e);
        while self.failover.len() > FAILOVER_EVENTS {
            self.failover.pop_front();
        }
    }

    /// Takes in `view`, as the fleet is at `now`.
    pub fn observe(&mut self, view: &FleetView, now: i64) {
        self.started.get_or_insert(now);
        self.sample(view, now);
        let mut present: BTreeSet<String> = BTreeSet::new();
        let mut last = HashMap::with_capacity(view.jobs.len());
        for j in &view.jobs {
            let key = j.key();
            last.insert(
                key.clone(),
                GoneJob {
                    key: key.clone(),
                    podgroup: j.name.clone(),
                    queue: j.queue.clone(),
                    gone_at: now,
                    last_phase: j.phase.clone(),
                    running: j.running,
                    pods: j.pods,
                    clusters: j.clusters.clone(),
                    nodes: j.nodes.clone(),
                },
            );
            let change = JobChange {
                at: now,
                phase: j.phase.clone(),
                reason: j.reason.clone(),
                message: j.message.clone(),
                clusters: j.clusters.clone(),
            };
            let (changes, seen) = self.jobs.entry(key.clone()).or_default();
            *seen = now;
            let same = changes.back().is_some_and(|c| {
                (&c.phase, &c.reason, &c.message, &c.clusters)
                    == (
                        &change.phase,
                        &change.reason,
                        &change.message,
                        &change.clusters,
                    )
            });
            if !same {
                changes.push_back(change);
                while changes.len() > JOB_CHANGES {
                    changes.pop_front();
                }
            }
            self.job_moves(&key, &j.clusters, &j.evicting, now);
            present.insert(key);
        }
        for (key, mut was) in std::mem::replace(&mut self.present, last) {
            if self.present.contains_key(&key) {
                continue;
            }
            was.gone_at = now;
            let where_ = if was.clusters.is_empty() {
                "it had not run".to_string()
            } else {
                format!("it last ran in {}", was.clusters.join(", "))
            };
            if let Some((changes, _)) = self.jobs.get_mut(&key) {
                changes.push_back(JobChange {
                    at: now,
                    phase: "Gone".into(),
                    reason: None,
                    message: Some(format!(
                        "its PodGroup is gone (the job finished or was deleted); {where_}"
                    )),
                    clusters: was.clusters.clone(),
                });
                while changes.len() > JOB_CHANGES {
                    changes.pop_front();
                }
            }
            self.gone.retain(|g| g.key != key);
            self.gone.push_back(was);
        }
        // A job back under the same name is no longer gone.
        self.gone.retain(|g| !self.present.contains_key(&g.key));
        while self.gone.len() > GONE_JOBS
            || self.gone.front().is_some_and(|g| now - g.gone_at > KEEP_S)
        {
            self.gone.pop_front();
        }
        self.jobs.retain(|_, (_, seen)| now - *seen <= KEEP_S);
        self.placed.retain(|k, _| present.contains(k));
        self.evicting.retain(|k, _| present.contains(k));
        for c in &view.clusters {
            let taints: BTreeSet<String> = c.taints.iter().cloned().collect();
            let Some((ready, before)) = self.clusters.get(&c.name).cloned() else {
                self.clusters.insert(c.name.clone(), (c.ready, taints));
                continue;
            };
            let at = |kind: &'static str, detail: String| FailoverEvent {
                at: now,
                kind,
                cluster: c.name.clone(),
                job: None,
                detail,
            };
            let mut events = Vec::new();
            if ready != c.ready {
                events.push(if c.ready {
                    at("ClusterReady", "its health probe succeeds again".into())
                } else {
                    at("ClusterNotReady", "its health probe fails".into())
                });
            }
            for t in taints.difference(&before) {
                events.push(at("Tainted", t.clone()));
            }
            for t in before.difference(&taints) {
                events.push(at("Untainted", t.clone()));
            }
            for e in events {
                self.event(e);
            }
            self.clusters.insert(c.name.clone(), (c.ready, taints));
        }
    }

    /// Records the evictions that start or end for `job`, and a move when it runs somewhere
    /// else than where it last ran.
    fn job_moves(&mut self, job: &str, clusters: &[String], evicting: &[String], now: i64) {
        let before = self.evicting.get(job).cloned().unwrap_or_default();
        let mut events = Vec::new();
        let event = |kind, cluster: &str, detail: String| FailoverEvent {
            at: now,
            kind,
            cluster: cluster.to_string(),
            job: Some(job.to_string()),
            detail,
        };
        for c in evicting.iter().filter(|c| !before.contains(c)) {
            events.push(event(
                "EvictionStarted",
                c,
                format!("{job} is evicted from {c}"),
            ));
        }
        for c in before.iter().filter(|c| !evicting.contains(c)) {
            events.push(event(
                "EvictionEnded",
                c,
                format!("{job}'s old copy in {c} is gone"),
            ));
        }
        if evicting.is_empty() {
            self.evicting.remove(job);
        } else {
            self.evicting.insert(job.to_string(), evicting.to_vec());
        }
        // Where it runs, its evicted copies aside.
        let now_at: Vec<String> = clusters
            .iter()
            .filter(|c| !evicting.contains(c))
            .cloned()
            .collect();
        if !now_at.is_empty() {
            if let Some(was) = self.placed.get(job)
                && *was != now_at
                && !now_at.iter().all(|c| was.contains(c))
            {
                let to = now_at.join(", ");
                events.push(event(
                    "Moved",
                    &to,
                    format!("{job} moved from {} to {to}", was.join(", ")),
                ));
            }
            self.placed.insert(job.to_string(), now_at);
        }
        for e in events {
            self.event(e);
        }
    }

    /// A sample of every queue, if one is due.
    fn sample(&mut self, view: &FleetView, now: i64) {
        if self.last_sample.is_some_and(|t| now - t < SAMPLE_S) {
            return;
        }
        self.last_sample = Some(now);
        for q in &view.queues {
            let samples = self.queues.entry(q.name.clone()).or_default();
            samples.push_back(QueueSample {
                at: now,
                allocated: numbers(&q.allocated),
                deserved: numbers(&q.deserved),
                waiting_request: numbers(&q.waiting_request),
                pending: q.pending,
                inqueue: q.inqueue,
                running: q.running,
            });
        }
        for samples in self.queues.values_mut() {
            while samples.front().is_some_and(|s| now - s.at > KEEP_S) {
                samples.pop_front();
            }
        }
        self.queues.retain(|_, s| !s.is_empty());
    }

    /// The queues' samples and the failover events, as the UI renders them.
    pub fn view(&self) -> HistoryView {
        HistoryView {
            version: crate::view::VERSION,
            since: self.started,
            gone: self.gone.iter().rev().cloned().collect(),
            sample_seconds: SAMPLE_S,
            queues: self
                .queues
                .iter()
                .map(|(k, v)| (k.clone(), v.iter().cloned().collect()))
                .collect(),
            failover: self.failover.iter().cloned().collect(),
        }
    }

    /// Job `job`'s changes (`namespace/name`).
    pub fn job(&self, job: &str) -> JobHistory {
        JobHistory {
            job: job.to_string(),
            changes: self
                .jobs
                .get(job)
                .map(|(c, _)| c.iter().cloned().collect())
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests;
