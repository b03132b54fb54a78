//! The event loop: a virtual clock and one queue of events (arrivals, session ticks, pod start
//! and finish, releases, faults), each handed to the part of the simulator it concerns.
//!
//! Sessions run on the scheduler period, but only when something changed since the last one
//! (an arrival, a finish, a fault): with nothing new a session would decide the same, so the
//! simulator skips it and simulated months cost little.
//!
//! | file | its part |
//! | --- | --- |
//! | `state.rs` | the simulation's parts, the jobs and pods in flight, and how a change in one part reaches another |
//! | `ctx.rs` | what every part acts through: the clock, the agenda, the cache, the checker and statistics |
//! | `agenda.rs` | the events the agenda holds, and when sessions run |
//! | `world.rs` | the fleet, queues and scheduler configuration from the scenario |
//! | `engine.rs` | this loop, and arrivals: the job controller turns each job into a gang |
//! | `executor.rs` | sessions and their decisions: binds, evictions, PodGroup phases; gangs on lost nodes |
//! | `kubelet.rs` | pods start, run, finish, release their nodes |
//! | `faults.rs` | faults and recovery as they happen to a member, and nodes down |
//! | `members/` | members as the control plane sees them: probes, Ready, taints; `fleet.rs`: the fleet; `member.rs`: a member itself, and the chain's timings |
//! | `failover/` | the taint manager, old copies set aside, graceful eviction; `book.rs`: what failover keeps; `binding.rs`: a job's tasks and old copies; `measure.rs`: what each fault did; `report.rs`: the `failover` section |
//! | `jobs/` | Volcano Jobs, run by the job controller's own passes; `vcjob.rs`: what is kept of each |
//! | `scheduled/` | CronJobs and JobFlows, run by their controllers' steps on the virtual clock; `controllers.rs`: what they keep |
//! | `report/` | `report.json` (`fields.rs`) and the statistics behind it (`stats.rs`, `hist.rs`) |
//!
//! How the files import each other, so that no import runs in a circle: see `state.rs`.

use std::sync::Arc;
use std::time::Instant;

use tephra_scheduler::cache::{Cache, Event};
use tephra_scheduler::model::JobPolicy;

use crate::agenda::{Agenda, Cadence, Ev};
use crate::checker::Checker;
use crate::ctx::Ctx;
use crate::error::{SimError, build_err};
use crate::failover::book::Book;
use crate::faults::Faults;
use crate::members::fleet::Fleet;
use crate::record::Record;
use crate::report::{Report, Stats};
use crate::scenario::Scenario;
use crate::state::{InFlight, JobRt, NewPod, PodState, Sim};
use crate::workload::{Merged, SimJob};
use crate::world::{build_queues, load_config};

/// How the run is driven.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Overrides `run.seed`.
    pub seed: Option<u64>,
    /// Overrides `run.until`, in ms.
    pub until_ms: Option<i64>,
    /// Refuse Volcano plugins tephra does not implement instead of loading them inert.
    pub strict_config: bool,
    /// Keep the history of this job (`namespace/name`) for [`Report::explain`].
    pub explain: Option<String>,
    /// Measure the expected-start forecast (`--eta-every`, `--eta-noise`).
    pub eta: Option<crate::eta::EtaOptions>,
}

/// Progress, reported now and then during a run.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Simulated seconds so far.
    pub simulated_s: f64,
    /// Simulated seconds the run will reach, when known.
    pub until_s: Option<f64>,
    /// Jobs submitted.
    pub submitted: u64,
    /// Jobs completed.
    pub completed: u64,
    /// Pods bound.
    pub bound: u64,
    /// Wall seconds so far.
    pub wall_s: f64,
}

impl Sim {
    /// Builds the fleet, queues and sources. Nothing runs yet.
    pub fn new(scenario: &Scenario, opts: RunOptions) -> Result<Self, SimError> {
        let config = Arc::new(load_config(scenario, opts.strict_config)?);
        let mut s = scenario.clone();
        if let Some(seed) = opts.seed {
            s.run.seed = seed;
        }
        let mut sources = Merged::open(&s)?;
        // Random faults are drawn over the scenario's own `run.until`, whatever `--until` says.
        let faults =
            crate::scenario::faults::expand(&s, s.run.seed).map_err(|message| SimError::Build {
                source_name: scenario.source.clone(),
                message,
            })?;
        if let Some(until) = opts.until_ms {
            s.run.until = Some(crate::scenario::Dur(until));
        }
        let mut ctx = Ctx {
            now: 0,
            source: scenario.source.clone(),
            cache: Cache::new(),
            agenda: Agenda::default(),
            cadence: Cadence::new(scenario.scheduler.period.0),
            grace: scenario.run.eviction_grace_period.0.max(0),
            checker: Checker::default(),
            stats: Stats::default(),
            explain: opts.explain.clone().map(|k| (k, Vec::new())),
            eta: opts
                .eta
                .map(|o| crate::eta::EtaProbe::new(o, scenario.run.pod_start_delay.0.max(0))),
        };
        let fleet = Fleet::build(&s, &mut ctx)?;
        if !s.scheduler.topology_labels.is_empty() {
            ctx.cache
                .discover_topology_from(s.scheduler.topology_labels.clone());
        }
        if !s.scheduler.fleet_tiers.is_empty() {
            ctx.cache.set_fleet_tiers(
                s.scheduler
                    .fleet_tiers
                    .iter()
                    .map(|k| tephra_scheduler::model::topology::FleetKey::parse(k))
                    .collect(),
            );
        }
        build_queues(&s, &mut ctx, std::mem::take(&mut sources.queues))?;
        let mut first = Vec::new();
        let scheduled = crate::scheduled::controllers::Controllers::new(
            std::mem::take(&mut sources.scheduled),
            &mut |t, ev| first.push((t, ev)),
        );
        for (t, ev) in first {
            ctx.push(t, ev);
        }
        let mut sim = Sim {
            scheduled,
            config,
            ctx,
            sources,
            flight: InFlight::default(),
            faults: Faults::new(faults),
            start_delay: scenario.run.pod_start_delay.0.max(0),
            fleet,
            failover: Book::default(),
            wall: Instant::now(),
            scenario: Arc::new(s),
        };
        let manifest_classes = std::mem::take(&mut sim.sources.classes);
        for (name, value) in scenario
            .scheduler
            .priority_classes
            .iter()
            .chain(&manifest_classes)
        {
            sim.ctx.apply(Event::PriorityClassUpsert {
                name: name.clone(),
                value: *value,
            })?;
        }
        for (i, t) in sim.faults.starts().into_iter().enumerate() {
            sim.ctx.push(t, Ev::Fault(i));
        }
        if let Some(t) = sim.sources.peek() {
            sim.ctx.push(t, Ev::Arrival);
        }
        Ok(sim)
    }

    pub(crate) fn submit(
        &mut self,
        mut job: SimJob,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let key = job.key();
        let job_pods = job.tasks.iter().map(|t| u64::from(t.replicas)).sum();
        crate::scenario::check::admit_pods(self.flight.pods.len() as u64, job_pods).map_err(
            |m| SimError::Build {
                source_name: self.scenario.source.clone(),
                message: format!("job {key}, submitted at {}s: {m}", self.ctx.now / 1000),
            },
        )?;
        if let Some(vc) = job.volcano.take() {
            return self.flight.submit_volcano(&mut self.ctx, job, *vc.0, out);
        }
        // The job controller's stand-in for jobs that are not Volcano Jobs: the PodGroup
        // (with minResources) and each task's pods.
        let gang = job
            .gang(self.ctx.cache.names_mut(), self.ctx.now / 1000)
            .map_err(build_err(&self.ctx.source))?;
        let group = gang.group;
        let min = group.min_member;
        self.ctx.announce(&job, &group, out);
        self.ctx.apply(Event::PodGroupUpsert(group.clone()))?;
        self.ctx.explain(&key, || {
            format!(
                "submitted to queue {}: {} pod(s), gang of {min}",
                job.queue,
                job.tasks.iter().map(|t| t.replicas).sum::<u32>()
            )
        });
        let mut pod_names = Vec::new();
        for (t, g) in job.tasks.iter().zip(&gang.tasks) {
            let shape = &g.shape;
            for i in 0..t.replicas {
                let name = format!("{}-{}-{i}", job.name, t.role);
                let pod_key = format!("{}/{name}", job.namespace);
                self.flight.add_pod(
                    &mut self.ctx,
                    &key,
                    &job.name,
                    NewPod {
                        key: pod_key.clone(),
                        shape: Arc::clone(shape),
                        request: t.request.clone(),
                        index: i,
                        duration_ms: t.duration_ms,
                        exit_code: 0,
                    },
                )?;
                pod_names.push(pod_key);
            }
        }
        let empty = pod_names.is_empty();
        self.flight.jobs.insert(
            key.clone(),
            JobRt {
                queue: job.queue.clone(),
                min,
                pods: pod_names,
                submit_ms: self.ctx.now,
                started: 0,
                waited: false,
                done: 0,
                group,
                why: None,
            },
        );
        if empty {
            // A job with no replicas has nothing to wait for: Volcano's job controller moves
            // it to Completed at once (succeeded + failed = 0 = replicas).
            self.flight.complete(&mut self.ctx, &key)?;
        }
        self.ctx.mark_dirty();
        Ok(())
    }

    /// Runs to the end: `until`, or when nothing is left to happen.
    pub fn run(
        mut self,
        out: &mut dyn FnMut(&Record),
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Report, SimError> {
        let mut last_progress = Instant::now();
        while let Some((t, ev)) = self.ctx.agenda.pop() {
            if self.until_ms().is_some_and(|u| t > u) {
                self.ctx.now = self.until_ms().unwrap_or(t);
                break;
            }
            self.ctx.now = t;
            if self.held(&ev) {
                continue;
            }
            match ev {
                Ev::Arrival => {
                    while self.sources.peek().is_some_and(|a| a <= self.ctx.now) {
                        if let Some(job) = self.sources.next_job() {
                            self.submit(job, out)?;
                        }
                    }
                    if let Some(next) = self.sources.peek() {
                        self.ctx.push(next, Ev::Arrival);
                    }
                }
                Ev::Tick => self.tick(out)?,
                Ev::Cron(i) => self.cron(i, out)?,
                Ev::Flow(i) => self.flow(i, out)?,
                Ev::Timer => {
                    if self.ctx.cadence.timer_at == Some(self.ctx.now) {
                        self.ctx.cadence.timer_at = None;
                    }
                    self.ctx.mark_dirty();
                }
                Ev::Start(pod, generation) => self.start(&pod, generation, out)?,
                Ev::JobWake(key) => self.flight.job_wake(&mut self.ctx, &key, out)?,
                Ev::Finish(pod, generation) => self.finish(&pod, generation, out)?,
                Ev::Released(pod, generation) => {
                    if self.flight.pods.get(&pod).is_some_and(|p| {
                        p.generation == generation && p.state == PodState::Releasing
                    }) {
                        self.release_pod(&pod, out)?;
                    }
                }
                Ev::Fault(i) => self.fault(i, true, out)?,
                Ev::FaultEnd(i) => self.fault(i, false, out)?,
                Ev::Probe(c) => self.probe(&c, out)?,
                Ev::Taints(c) => self.taints_pass(&c, out)?,
                Ev::Eviction(job) => {
                    let (book, mut parts) = self.failover_parts();
                    book.evictions(&mut parts, &job, out)?;
                }
                Ev::GhostGone(job, name) => {
                    let (book, mut parts) = self.failover_parts();
                    book.ghost_gone(&mut parts, &job, &name, out)?;
                }
            }
            self.wake_flows();
            if last_progress.elapsed().as_millis() >= 200 {
                last_progress = Instant::now();
                progress(&self.progress());
            }
        }
        if let Some(u) = self.until_ms()
            && self.ctx.now < u
            && self.ctx.agenda.is_empty()
        {
            // Nothing more happens; the clock still reaches `until` for utilization.
            self.ctx.now = u;
        }
        progress(&self.progress());
        // Pods still running at the end have used GPU time too.
        let still: Vec<(String, i64, i64)> = self
            .flight
            .pods
            .values()
            .filter(|p| {
                matches!(p.state, PodState::Running)
                    || (p.state == PodState::Releasing && p.releasing_from == PodState::Running)
            })
            .filter_map(|p| {
                self.flight
                    .jobs
                    .get(&p.job)
                    .map(|j| (j.queue.clone(), p.gpus, self.ctx.now - p.started_ms))
            })
            .collect();
        for (queue, gpus, ran) in still {
            self.ctx.stats.gpu_time(&queue, gpus, ran);
        }
        let started: std::collections::HashSet<String> = self
            .flight
            .jobs
            .iter()
            .filter(|(k, j)| self.job_started(k, j))
            .map(|(k, _)| k.clone())
            .collect();
        let running = started.len() as u64;
        let pending = self.flight.jobs.len() as u64 - running;
        let (book, parts) = self.failover_parts();
        let failover = book.failover_report(&parts);
        let mut report = self.ctx.stats.finish(
            &self.scenario.source,
            self.scenario.run.seed,
            self.ctx.now,
            self.wall.elapsed().as_secs_f64(),
            pending,
            running,
            self.ctx.checker.invariants.clone(),
        );
        report.trace_skipped = self.sources.skipped();
        report.notes = self.sources.notes();
        report.notes.extend(self.scheduled.notes());
        report.failover = failover;
        report.notes.extend(
            self.config
                .warnings
                .iter()
                .map(|w| format!("scheduler.config: {w}")),
        );
        if pending > 0 && self.scenario.run.until.is_none() {
            // Nothing more could happen, yet jobs wait: say which, so a run that ends with
            // work left is never mistaken for one that finished it.
            let mut waiting: Vec<&String> = self
                .flight
                .jobs
                .iter()
                .filter(|(k, _)| !started.contains(*k))
                .map(|(k, _)| k)
                .collect();
            waiting.sort();
            let shown: Vec<String> = waiting
                .iter()
                .take(5)
                .map(
                    |k| match self.flight.jobs.get(*k).and_then(|j| j.why.as_ref()) {
                        Some(why) => format!("{k} ({why})"),
                        None => k.to_string(),
                    },
                )
                .collect();
            report.notes.push(format!(
                "{pending} job(s) still pending when nothing more could happen: {}",
                shown.join("; ")
            ));
        }
        report.jobs.pending_reasons = crate::report::pending_reasons(
            self.flight
                .jobs
                .iter()
                .filter(|(k, _)| !started.contains(*k))
                .map(|(k, j)| (k.as_str(), j.why.as_deref())),
        );
        report.eta = self.ctx.eta.as_ref().map(crate::eta::EtaProbe::report);
        if let Some((key, mut lines)) = self.ctx.explain.take() {
            if lines.is_empty() {
                lines.push(format!("{key}: no such job was submitted"));
            } else if let Some(j) = self.flight.jobs.get(&key) {
                lines.push(format!(
                    "at the end: {:?}{}",
                    j.group.phase,
                    j.why
                        .as_ref()
                        .map(|w| format!(", last reason {w}"))
                        .unwrap_or_default()
                ));
            }
            report.explain = lines;
        }
        report.violations = self.ctx.checker.details.clone();
        Ok(report)
    }

    /// Whether a job in flight has started: a Volcano Job past Pending (a Job with no
    /// replicas runs with no pods, as in Volcano), any other job with a pod placed or done.
    fn job_started(&self, key: &str, j: &JobRt) -> bool {
        if let Some(vc) = self.flight.vcjobs.get(key) {
            let phase = vc.job.status.as_ref().and_then(|s| s.state.phase);
            return phase.is_some_and(|p| p != tephra_api::batch::JobPhase::Pending);
        }
        j.pods.iter().any(|p| {
            self.flight.pods.get(p).is_some_and(|p| {
                matches!(
                    p.state,
                    PodState::Bound | PodState::Running | PodState::Done
                )
            })
        })
    }

    fn progress(&self) -> Progress {
        Progress {
            simulated_s: self.ctx.now as f64 / 1000.0,
            until_s: self.until_ms().map(|u| u as f64 / 1000.0),
            submitted: self.ctx.stats.total_submitted(),
            completed: self.ctx.stats.total_completed(),
            bound: self.ctx.stats.total_bound(),
            wall_s: self.wall.elapsed().as_secs_f64(),
        }
    }
}

/// Policy of a job as the checker needs it (re-exported for tests).
pub fn default_policy() -> JobPolicy {
    JobPolicy::default()
}
