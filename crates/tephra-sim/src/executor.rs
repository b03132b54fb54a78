//! The executor: runs a scheduling session on the period and carries out its decisions, as the
//! runtime's executor does against the API servers: binds (each checked independently),
//! evictions (the pod terminates over the grace period) and PodGroup phases; and the
//! evictions a node-down fault causes (every gang with a pod on a lost node restarts whole).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use tephra_scheduler::model::TaskStatus;
use tephra_scheduler::schedule;

use crate::agenda::Ev;
use crate::checker::CheckBind;
use crate::error::{SimError, build_err};
use crate::jobs::vcjob::PodChange;
use crate::record::Record;
use crate::state::{PodState, Sim};

/// Sessions in a row that bind and evict nothing, with nothing but the scheduler's own timers
/// left to happen, after which the timers stop waking sessions.
const QUIET_TIMER_SESSIONS: u32 = 64;

impl Sim {
    /// Runs a session if anything changed since the last one, and carries out its decisions:
    /// binds (checked independently), evictions, and PodGroup phases.
    pub(crate) fn tick(&mut self, out: &mut dyn FnMut(&Record)) -> Result<(), SimError> {
        self.ctx.cadence.tick_pending = false;
        self.ctx.cadence.last_tick = Some(self.ctx.now);
        if !self.ctx.cadence.dirty {
            return Ok(());
        }
        self.ctx.cadence.dirty = false;
        self.ctx.cadence.session += 1;
        let started = Instant::now();
        let d = schedule(
            self.ctx.cache.snapshot(),
            Arc::clone(&self.config),
            self.ctx.now / 1000,
            self.ctx.cadence.session,
        );
        self.ctx
            .stats
            .session(started.elapsed().as_secs_f64() * 1000.0);
        // The cache takes the decisions in as the runtime's does; a bind here takes effect at
        // once, so bound pods are Bound, not Binding.
        let taken = self
            .ctx
            .cache
            .take(&d, TaskStatus::Bound)
            .map_err(build_err(&self.ctx.source))?;
        self.probe_eta();
        let mut checks = Vec::new();
        for b in &d.binds {
            let Some(p) = self.flight.pods.get_mut(&b.task) else {
                continue;
            };
            if p.state != PodState::Pending {
                continue;
            }
            p.state = PodState::Bound;
            p.node = Some((b.cluster.clone(), b.node.clone()));
            p.grants = b.gpus.clone();
            let generation = p.generation;
            checks.push(CheckBind {
                job: b.job.clone(),
                pod: b.task.clone(),
                cluster: b.cluster.clone(),
                node: b.node.clone(),
                request: p.request.clone(),
                gpus: b
                    .gpus
                    .iter()
                    .flat_map(|g| g.all())
                    .map(|g| (g.uuid.clone(), g.memory, g.cores))
                    .collect(),
            });
            let queue = self
                .flight
                .jobs
                .get(&b.job)
                .map(|j| j.queue.clone())
                .unwrap_or_default();
            out(&Record::placed(
                "bind",
                self.ctx.now,
                &b.job,
                &queue,
                b,
                &p.request,
            ));
            self.ctx
                .stats
                .bound(&b.cluster, &queue, p.gpus, p.cpu_milli, self.ctx.now);
            if self.flight.is_volcano(&b.job) {
                self.flight
                    .pod_changed(&mut self.ctx, &b.task, PodChange::Bound, out)?;
            }
            self.ctx.push(
                self.ctx.now + self.start_delay,
                Ev::Start(b.task.clone(), generation),
            );
        }
        self.ctx.checker.binds(&checks);
        // Preemption and reclaim: evicted pods terminate over the grace period, then go
        // back to Pending (see `release_pod`).
        for e in &d.evictions {
            let kind = if e.reason.starts_with("reclaimed") {
                "reclaim"
            } else {
                "preempt"
            };
            self.evict_pod(&e.task, &e.reason, kind, out)?;
        }
        if !d.evictions.is_empty() {
            self.ctx.mark_dirty();
        }
        for g in &d.groups {
            let Some(job) = self.flight.jobs.get_mut(&g.job) else {
                continue;
            };
            let mut said = Vec::new();
            if let Some(c) = g
                .conditions
                .iter()
                .rev()
                .find(|c| c.kind == "Unschedulable")
            {
                let why = format!("{}: {}", c.reason, c.message);
                if job.why.as_deref() != Some(why.as_str()) {
                    said.push(format!("waits: {why}"));
                }
                job.why = Some(why);
            }
            if let Some(c) = g.conditions.iter().find(|c| c.kind == "Scheduled") {
                said.push(format!("{}: {}", c.reason, c.message));
            }
            let changed = job.group.phase != g.phase;
            if changed {
                said.push(format!("PodGroup {:?} -> {:?}", job.group.phase, g.phase));
            }
            if changed {
                // The cache has it already (`take`); this is the simulator's own copy.
                job.group.phase = g.phase;
                job.group.phase_since = d.now;
            }
            for line in said {
                self.ctx.explain(&g.job, || line);
            }
        }
        // The job controller sees its PodGroups' new phases (pods are made once Inqueue).
        for (job, phase) in taken.phases {
            if self.flight.is_volcano(&job) {
                self.flight
                    .podgroup_phase(&mut self.ctx, &job, phase, out)?;
            }
        }
        if d.binds.is_empty() && d.evictions.is_empty() {
            self.ctx.cadence.quiet_sessions = self.ctx.cadence.quiet_sessions.saturating_add(1);
        } else {
            self.ctx.cadence.quiet_sessions = 0;
        }
        // A timer of the scheduler's own (an inqueue timeout, an SLA) gets a session when it
        // falls due, even if nothing else happens by then; unless nothing but such timers is
        // left and the last sessions changed nothing (jobs that go back and forth between
        // Pending and Inqueue with no room for any of them), which would never end.
        let spinning = self.ctx.agenda.only_timers()
            && self.ctx.cadence.quiet_sessions >= QUIET_TIMER_SESSIONS;
        if let Some(at) = d.wake_at.map(|s| s.saturating_mul(1000))
            && !spinning
            && at > self.ctx.now
            && self
                .ctx
                .cadence
                .timer_at
                .is_none_or(|t| t <= self.ctx.now || at < t)
        {
            self.ctx.cadence.timer_at = Some(at);
            self.ctx.push(at, Ev::Timer);
        }
        Ok(())
    }

    /// Evicts one bound or running pod. A pod lost to a fault is gone at once; a preempted or
    /// reclaimed one terminates over `run.evictionGracePeriod`, holding its node meanwhile.
    /// Returns whether it held a node.
    pub(crate) fn evict_pod(
        &mut self,
        pod: &str,
        reason: &str,
        kind: &'static str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<bool, SimError> {
        let Some(p) = self.flight.pods.get_mut(pod) else {
            return Ok(false);
        };
        if !matches!(p.state, PodState::Bound | PodState::Running) {
            return Ok(false);
        }
        let node = p.node.clone().unwrap_or_default();
        let request = p.request.clone();
        let job_key = p.job.clone();
        let generation = p.generation;
        let queue = self
            .flight
            .jobs
            .get(&job_key)
            .map(|j| j.queue.clone())
            .unwrap_or_default();
        self.ctx.stats.evicted(kind);
        self.ctx.explain(&job_key, || {
            format!("pod {pod} evicted from {node:?}: {reason}")
        });
        out(&Record::pod(
            "evict",
            self.ctx.now,
            &job_key,
            &queue,
            pod,
            &node,
            &request,
            Some(reason.to_string()),
        ));
        if kind == "fault" || self.ctx.grace == 0 {
            if self.flight.is_volcano(&job_key) {
                self.flight
                    .pod_changed(&mut self.ctx, pod, PodChange::Evicted, out)?;
            }
            self.release_pod(pod, out)?;
        } else {
            if let Some(p) = self.flight.pods.get_mut(pod) {
                p.releasing_from = p.state;
                p.state = PodState::Releasing;
            }
            self.ctx
                .cache
                .release(pod)
                .map_err(build_err(&self.ctx.source))?;
            self.ctx.push(
                self.ctx.now + self.ctx.grace,
                Ev::Released(pod.to_string(), generation),
            );
            if self.flight.is_volcano(&job_key) {
                self.flight
                    .pod_changed(&mut self.ctx, pod, PodChange::Evicted, out)?;
            }
        }
        Ok(true)
    }

    /// The pods on `lost` nodes fail, and each gang that had one there restarts whole.
    pub(crate) fn node_lifecycle(
        &mut self,
        cluster: &str,
        lost: &[String],
        fault: usize,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let hit: BTreeSet<String> = self
            .flight
            .pods
            .values()
            .filter(|p| matches!(p.state, PodState::Bound | PodState::Running))
            .filter(|p| {
                p.node
                    .as_ref()
                    .is_some_and(|(c, n)| c == cluster && lost.contains(n))
            })
            .map(|p| p.job.clone())
            .collect();
        let reason = format!("node(s) down in cluster {cluster}; the gang restarts whole");
        for job_key in hit {
            let Some(pods) = self.flight.jobs.get(&job_key).map(|j| j.pods.clone()) else {
                continue;
            };
            self.failover.fault_restarted(fault, &job_key);
            for pod in pods {
                self.evict_pod(&pod, &reason, "fault", out)?;
            }
            // A Volcano Job's controller decides what its evicted pods mean.
            if !self.flight.is_volcano(&job_key) {
                self.flight.requeue_group(&mut self.ctx, &job_key)?;
            }
        }
        self.ctx.mark_dirty();
        Ok(())
    }

    /// Runs the expected-start probe when it is due (`--eta-every`).
    fn probe_eta(&mut self) {
        let Some(mut probe) = self.ctx.eta.take() else {
            return;
        };
        let waiting = self
            .flight
            .jobs
            .iter()
            .filter(|(_, j)| !j.waited)
            .map(|(k, _)| k);
        if probe.due(self.ctx.now, waiting) {
            let pods = &self.flight.pods;
            let pod = |key: &str| {
                let p = pods.get(key)?;
                let started = (p.state == PodState::Running).then_some(p.started_ms);
                Some((p.duration_ms, started))
            };
            probe.forecast(&self.ctx.cache, &self.config, self.ctx.now, &pod);
        }
        self.ctx.eta = Some(probe);
    }
}
