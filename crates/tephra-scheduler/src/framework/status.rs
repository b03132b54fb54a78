//! Closing a session: the decisions, with each touched PodGroup's new phase and conditions (and
//! an event for each waiting job), every queue's status, and the room kept for the next
//! session (`held_decisions`).

use tephra_api::reasons::{self, conditions};

use super::session::Session;
use crate::decisions::{Bind, Condition, Decisions, GroupStatus, JobEvent, QueueStatus, Refused};
use crate::hash::{HashMap, HashSet};
use crate::model::{GroupPhase, Id, TaskStatus};
use crate::resources::Resources;

impl Session {
    /// The proposed deallocations that stand: a claim a pod bound this session uses, or that a
    /// PreBind of this session writes, stays. Each job whose claims are deallocated says so.
    fn settle_deallocations(&mut self) -> Vec<crate::decisions::Deallocation> {
        if self.deallocations.is_empty() {
            return Vec::new();
        }
        let mut used: HashSet<(&str, String)> = HashSet::default();
        for p in &self.prebinds {
            for d in &p.devices {
                used.insert((p.cluster.as_str(), d.claim.clone()));
            }
        }
        for b in self.binds.iter().chain(&self.pipelined) {
            let Some(t) = self
                .snap
                .task_id(&b.task)
                .and_then(|id| self.snap.tasks.get(id))
            else {
                continue;
            };
            let shape = &t.spec.shape;
            for pc in &shape.rules.device_claims {
                if let Some(name) = &pc.claim {
                    used.insert((b.cluster.as_str(), format!("{}/{name}", shape.namespace)));
                }
            }
        }
        let (stand, _): (Vec<_>, Vec<_>) = std::mem::take(&mut self.deallocations)
            .into_iter()
            .partition(|(_, d)| !used.contains(&(d.cluster.as_str(), d.claim.clone())));
        let mut by_job: HashMap<Id, Vec<String>> = HashMap::default();
        for (job, d) in &stand {
            by_job
                .entry(*job)
                .or_default()
                .push(format!("ResourceClaim {}", d.claim));
        }
        for (job, claims) in by_job {
            let note = self.note(job);
            let said = format!(
                "{} allocated where the pod cannot go: deallocated, to be allocated again",
                claims.join(", ")
            );
            note.message = Some(match note.message.take() {
                Some(m) => format!("{m}; {said}"),
                None => said,
            });
        }
        stand.into_iter().map(|(_, d)| d).collect()
    }

    /// Ends the session and returns its decisions.
    pub fn close(mut self) -> Decisions {
        let deallocations = self.settle_deallocations();
        let view = self.view();
        let mut groups = Vec::new();
        let mut new_phase: HashMap<Id, GroupPhase> = HashMap::default();
        let mut events = Vec::new();
        let mut park = Vec::new();
        let mut refused = Vec::new();
        let mut wake_at: Option<i64> = None;
        let mut admissible: HashMap<&str, Resources> = HashMap::default();
        let mut resting = crate::decisions::Resting::default();
        // The jobs the session may have something to say of: the backlog's only if an action
        // noted it, gave it a phase or held room for it.
        let mut touched: Vec<Id> = self.snap.active_jobs.iter().copied().collect();
        touched.extend(self.notes.keys().copied());
        touched.extend(self.snap.changed_jobs.iter().copied());
        touched.extend(self.state.phases.keys().copied());
        touched.extend(self.state.holds.keys().copied());
        touched.sort_unstable();
        touched.dedup();
        // The backlog's jobs looked at here, whose part of their queue's sums is not the cache's.
        let mut looked_at = Vec::new();
        // Only needed to spare pipelined jobs the inqueue timeout (set when enqueue ran).
        let pipelined: HashSet<&str> = if self.inqueue_timeout.is_some() {
            self.pipelined.iter().map(|b| b.job.as_str()).collect()
        } else {
            std::collections::HashSet::default()
        };
        for job_id in touched {
            let Some(job) = self.snap.jobs.get(job_id) else {
                continue;
            };
            let Some(group) = &job.group else { continue };
            if let Some(e) = self.snap.backlog.entry(job_id) {
                looked_at.push(e);
            }
            if self.passed_over(job_id) {
                if self.inqueue_timeout.is_some() {
                    resting.jobs += 1;
                    resting.pending_tasks += u64::try_from(job.tally.pending).unwrap_or(0);
                }
                // Nothing about it changed since its status was last decided, and nothing was
                // said of it: its status stands. It still asks what it asks, and its timers
                // still run.
                if self.state.tally(job, job_id).pending > 0 {
                    // No task of it changed this session: the cache's sum of its ungated
                    // Pending tasks is what it asks.
                    if self.hooks().job_valid(job_id).is_ok() {
                        admissible
                            .entry(group.queue.as_str())
                            .or_default()
                            .add(&job.pending_ungated);
                    }
                    if let Some(due) = self.hooks().due(job_id) {
                        wake(&mut wake_at, due, self.now);
                    }
                }
                continue;
            }
            let counts = view.counts(job_id);
            let (mut running, mut succeeded, mut failed) = (0u32, 0u32, 0u32);
            for &t in &job.tasks {
                match view.status(t) {
                    TaskStatus::Running => running += 1,
                    TaskStatus::Succeeded => succeeded += 1,
                    TaskStatus::Failed => failed += 1,
                    _ => {}
                }
            }
            let old = self.state.phase(&self.snap, job_id).unwrap_or(group.phase);
            let min = job.min_member();
            let allocated = counts.ready - succeeded;
            let phase = if succeeded >= min && counts.pending == 0 && allocated == 0 {
                GroupPhase::Completed
            } else if allocated + succeeded >= min && old != GroupPhase::Pending {
                GroupPhase::Running
            } else if matches!(old, GroupPhase::Running | GroupPhase::Unknown) && running > 0 {
                GroupPhase::Unknown
            } else if matches!(old, GroupPhase::Running | GroupPhase::Unknown) {
                // Below its gang with nothing running (its pods are gone or back to
                // Pending): Pending again, as Volcano does, to be admitted anew.
                GroupPhase::Pending
            } else {
                old
            };
            // Admitted long ago and still not placed, even this session: back to Pending.
            let expired = self.inqueue_timeout.and_then(|timeout| {
                let waited = self.now - group.phase_since;
                (phase == GroupPhase::Inqueue
                    && old == group.phase
                    && waited >= timeout
                    && allocated == 0
                    && !pipelined.contains(job.key.as_str())
                    && !self.hooks().job_reserves(job_id))
                .then_some(waited)
            });
            let phase = if expired.is_some() {
                GroupPhase::Pending
            } else {
                phase
            };
            if matches!(phase, GroupPhase::Pending | GroupPhase::Inqueue)
                && counts.pending > 0
                && self
                    .notes
                    .get(&job_id)
                    .is_none_or(|n| !n.never_fits && n.invalid.is_none())
            {
                let sum = admissible.entry(group.queue.as_str()).or_default();
                self.add_admissible(job_id, sum);
            }
            // Timers that fall due with nothing else happening.
            if let Some(timeout) = self.inqueue_timeout
                && phase == GroupPhase::Inqueue
                && allocated == 0
            {
                let since = if old == group.phase {
                    group.phase_since
                } else {
                    self.now
                };
                wake(&mut wake_at, since + timeout.max(1), self.now);
            }
            if counts.pending > 0
                && let Some(due) = self.hooks().due(job_id)
            {
                wake(&mut wake_at, due, self.now);
            }
            let note = self.notes.get(&job_id);
            let mut conditions = Vec::new();
            if let Some(waited) = expired {
                let message = format!(
                    "admitted {waited}s ago but still not placed: back to Pending so that it \
                     stops holding queue {}'s admission budget",
                    group.queue
                );
                conditions.push(Condition {
                    kind: conditions::UNSCHEDULABLE,
                    status: true,
                    reason: reasons::INQUEUE_TIMEOUT.into(),
                    message: message.clone(),
                    transition_id: self.id,
                });
                events.push(JobEvent {
                    job: job.key.clone(),
                    reason: reasons::INQUEUE_TIMEOUT,
                    message,
                });
            }
            if let Some(note) = note {
                if note.scheduled {
                    conditions.push(Condition {
                        kind: conditions::SCHEDULED,
                        status: true,
                        reason: reasons::SCHEDULED.into(),
                        message: note.message.clone().unwrap_or_default(),
                        transition_id: self.id,
                    });
                } else if let Some(msg) = &note.message {
                    let reason = note.reason.unwrap_or(reasons::NOT_ENOUGH_RESOURCES);
                    conditions.push(Condition {
                        kind: conditions::UNSCHEDULABLE,
                        status: true,
                        reason: reason.into(),
                        message: msg.clone(),
                        transition_id: self.id,
                    });
                    events.push(JobEvent {
                        job: job.key.clone(),
                        reason,
                        message: msg.clone(),
                    });
                }
            }
            if note.is_some_and(|n| n.never_fits) && phase == GroupPhase::Pending {
                park.push(job.key.clone());
            }
            // Refused by the votes and told so, and nothing else: it may rest.
            if phase == GroupPhase::Pending
                && expired.is_none()
                && note.is_some_and(|n| {
                    n.refused
                        && n.reason == Some(reasons::NOT_ENQUEUEABLE)
                        && !n.never_fits
                        && !n.attempted
                        && !n.scheduled
                })
            {
                refused.push(Refused {
                    job: job.key.clone(),
                    valid: self.hooks().job_valid(job_id).is_ok(),
                });
            }
            new_phase.insert(job_id, phase);
            if phase != group.phase || !conditions.is_empty() {
                groups.push(GroupStatus {
                    job: job.key.clone(),
                    phase,
                    conditions,
                    running,
                    succeeded,
                    failed,
                    short_of_pods: u32::try_from(job.tasks.len()).unwrap_or(u32::MAX) < min,
                });
            }
        }
        // The backlog's jobs no action looked at: passed over, their status standing, their
        // part of their queue's sums as the cache keeps it.
        for (queue, b) in self.snap.backlog.queues() {
            let mut sum = b.admissible;
            let (mut jobs, mut pending) = (b.jobs, b.pending_tasks);
            for e in looked_at.iter().filter(|e| e.queue == *queue) {
                sum.sub(&e.admissible);
                jobs = jobs.saturating_sub(1);
                pending = pending.saturating_sub(u64::from(e.pending));
            }
            admissible.entry(queue.as_str()).or_default().add(&sum);
            if self.inqueue_timeout.is_some() {
                resting.jobs += jobs;
                resting.pending_tasks += pending;
            }
        }
        if self.hooks().has_deadlines() {
            for id in self.snap.backlog.ids() {
                let waits = self.snap.backlog.entry(id).is_some_and(|e| e.pending > 0);
                if waits
                    && self.passed_over(id)
                    && let Some(due) = self.hooks().due(id)
                {
                    wake(&mut wake_at, due, self.now);
                }
            }
        }
        let mut queues = Vec::new();
        // The cache keeps every queue's counts; only the jobs whose phase this session
        // changed move.
        let mut counts = self.snap.queue_phases.clone();
        let changed = new_phase.iter().chain(
            self.state
                .phases
                .iter()
                .filter(|(id, _)| !new_phase.contains_key(id)),
        );
        for (id, &phase) in changed {
            let Some(g) = self
                .snap
                .jobs
                .get(*id)
                .filter(|j| !j.ghost)
                .and_then(|j| j.group.as_ref())
            else {
                continue;
            };
            if phase != g.phase {
                let c = counts.entry(g.queue.clone()).or_default();
                c.count(g.phase, -1);
                c.count(phase, 1);
            }
        }
        for (name, q) in &self.snap.queues {
            let c = counts.get(name).copied().unwrap_or_default();
            let allocated = self
                .state
                .queue_allocated
                .get(name)
                .copied()
                .unwrap_or_default();
            queues.push(QueueStatus {
                name: name.clone(),
                state: q.state,
                allocated: self.snap.names.to_list(&allocated),
                allocated_vec: allocated,
                pending: c.get(GroupPhase::Pending),
                inqueue: c.get(GroupPhase::Inqueue),
                running: c.get(GroupPhase::Running),
                unknown: c.get(GroupPhase::Unknown),
                completed: c.get(GroupPhase::Completed),
                figures: self.hooks().queue_figures(name),
                admissible: admissible.get(name.as_str()).copied().unwrap_or_default(),
            });
        }
        let held = self.held_decisions();
        Decisions {
            session: self.id,
            now: self.now,
            held,
            binds: self.binds,
            prebinds: self.prebinds,
            deallocations,
            pipelined: self.pipelined,
            evictions: self.evictions,
            groups,
            queues,
            events,
            park: crate::decisions::Park {
                jobs: park,
                refused,
                generation: self.snap.generation,
                fleet_generation: self.snap.fleet_generation,
            },
            wake_at,
            resting,
        }
    }

    /// Whether `job` rests and the session passed it over: no action noted it, gave it a
    /// phase or held room for it (`actions/enqueue.rs`, `cache/parking.rs`).
    fn passed_over(&self, job: Id) -> bool {
        self.snap.resting.contains(&job)
            && !self.notes.contains_key(&job)
            && !self.state.phases.contains_key(&job)
            && !self.state.holds.contains_key(&job)
    }

    /// Adds what a waiting job's pending, ungated pods ask to `sum`, if the job is valid.
    fn add_admissible(&self, job: Id, sum: &mut Resources) {
        if self.hooks().job_valid(job).is_err() {
            return;
        }
        let view = self.view();
        for &t in view
            .job(job)
            .map(|j| j.tasks.as_slice())
            .unwrap_or_default()
        {
            if view.status(t) == TaskStatus::Pending
                && let Some(task) = view.task(t)
                && !task.spec.shape.gated()
            {
                sum.add(&task.spec.shape.request);
            }
        }
    }

    /// What the jobs that reserved room this session (past their SLA) and may keep it
    /// (`placement/drain.rs`) keep for the next one: the pods reserved, and the room still
    /// held when it closes. Anything else held lapses: a job not tried this session (its queue
    /// over its share, say), or placed in the ordinary way, lets go.
    pub(super) fn held_decisions(&self) -> Vec<Bind> {
        let reserving = |job: Id| self.notes.get(&job).is_some_and(|n| n.keeps_room);
        let reserving_key = |key: &str| self.snap.job_id(key).is_some_and(reserving);
        let mut out: Vec<Bind> = self
            .pipelined
            .iter()
            .filter(|b| reserving_key(&b.job))
            .cloned()
            .collect();
        for (&job, holds) in &self.state.holds {
            if !reserving(job) {
                continue;
            }
            out.extend(holds.iter().filter_map(|h| self.bind_for(h.task, h.node)));
        }
        out
    }
}

/// Keeps the earliest of the times in `at` that is later than `now`.
fn wake(at: &mut Option<i64>, due: i64, now: i64) {
    if due > now {
        *at = Some(at.map_or(due, |a| a.min(due)));
    }
}
