//! Failover in the simulator, through the controllers' own decisions: the taint manager
//! ([`tephra_controllers::taint_manager`]) takes a cluster with an untolerated NoExecute taint
//! from a job and adds a graceful-eviction task; the job's copy there is set aside as ghosts
//! (pods of no job that still hold their nodes, as the scheduler runtime keeps them), its pods
//! are declared again and its PodGroup excludes the cluster, so the session places the whole
//! gang elsewhere; graceful eviction ([`tephra_controllers::graceful_eviction`]) says when the
//! old copy may go, and it terminates over the grace period once its member answers.
//!
//! The new copy starts over: the simulator has no checkpoints, and a ghost's work is lost.
//!
//! A job's binding as failover keeps it (its tasks and ghosts) is in `binding.rs`. Each fault
//! is measured (`measure.rs`) for `report.json`'s `failover` section (`report.rs`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Toleration as K8sToleration;
use tephra_api::work::{
    GracefulEvictionTask, ObjectReference, ResourceBinding, ResourceBindingSpec, TargetCluster,
};
use tephra_controllers::graceful_eviction::{NewPlacement, Verdict, assess};
use tephra_controllers::taint_manager::{self, EvictionDefaults};
use tephra_scheduler::cache::Event;
use tephra_scheduler::model::{TaskStatus, Toleration};

use crate::agenda::Ev;
use crate::ctx::Ctx;
use crate::error::{SimError, build_err};
use crate::jobs::vcjob::PodChange;
use crate::record::Record;
use crate::state::{InFlight, Parts, PodState};
use book::Book;

pub(crate) mod binding;
pub(crate) mod book;
mod measure;
pub(crate) mod report;

use binding::Ghost;
pub use report::{FailoverReport, FaultReport};

fn k8s_toleration(t: &Toleration) -> K8sToleration {
    K8sToleration {
        key: (!t.key.is_empty()).then(|| t.key.clone()),
        operator: Some(if t.exists { "Exists" } else { "Equal" }.into()),
        value: (!t.value.is_empty()).then(|| t.value.clone()),
        effect: t.effect.map(|e| e.as_str().to_string()),
        toleration_seconds: t.seconds,
    }
}

impl Book {
    /// The jobs with a pod bound or running in `cluster`, and where each runs.
    fn jobs_in(flight: &InFlight, cluster: &str) -> BTreeMap<String, BTreeSet<String>> {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for p in flight.pods.values() {
            if let (Some((c, _)), PodState::Bound | PodState::Running) = (&p.node, p.state) {
                out.entry(p.job.clone()).or_default().insert(c.clone());
            }
        }
        out.retain(|_, cs| cs.contains(cluster));
        out
    }

    /// The taint manager's pass over the jobs running in `cluster`.
    pub(crate) fn taint_manager(
        &mut self,
        w: &mut Parts<'_>,
        cluster: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let no_execute = w
            .fleet
            .cluster_taints(cluster)
            .is_some_and(|ts| ts.iter().any(|t| t.effect == "NoExecute"));
        if !no_execute {
            return Ok(());
        }
        for (job, clusters) in Self::jobs_in(w.flight, cluster) {
            let Some(j) = w.flight.jobs.get(&job) else {
                continue;
            };
            let tolerations: Vec<K8sToleration> = j
                .group
                .policy
                .tolerations
                .iter()
                .map(k8s_toleration)
                .collect();
            let (ns, name) = job.split_once('/').unwrap_or(("default", &job));
            let mut rb = ResourceBinding::new(
                name,
                ResourceBindingSpec {
                    resource: ObjectReference {
                        api_version: "scheduling.volcano.sh/v1beta1".into(),
                        kind: "PodGroup".into(),
                        namespace: Some(ns.to_string()),
                        name: name.to_string(),
                        uid: None,
                    },
                    clusters: clusters
                        .iter()
                        .map(|c| TargetCluster {
                            name: c.clone(),
                            tasks: BTreeMap::new(),
                        })
                        .collect(),
                    graceful_eviction_tasks: self
                        .bindings
                        .get(&job)
                        .map(|b| b.tasks.clone())
                        .unwrap_or_default(),
                    reschedule_triggered_at: None,
                },
            );
            rb.metadata.namespace = Some(ns.to_string());
            let d = taint_manager::decide(
                &rb,
                |c| w.fleet.cluster_taints(c),
                &tolerations,
                w.ctx.now,
                EvictionDefaults::default(),
            );
            if let Some(at) = d.wake_ms {
                w.ctx.push(at, Ev::Taints(cluster.to_string()));
            }
            if let Some(next) = d.binding {
                let tasks = next.spec.graceful_eviction_tasks;
                for c in &d.evicted {
                    self.move_off(w, &job, c, tasks.clone(), out)?;
                }
            }
        }
        Ok(())
    }

    /// Takes `cluster` from `job`: its copy there becomes ghosts, its pods wait to be placed
    /// again, and its PodGroup excludes the cluster.
    fn move_off(
        &mut self,
        w: &mut Parts<'_>,
        job: &str,
        cluster: &str,
        tasks: Vec<GracefulEvictionTask>,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let Some(j) = w.flight.jobs.get(job) else {
            return Ok(());
        };
        let queue = j.queue.clone();
        let pods = w.ctx.cache.copy_in(job, cluster);
        let fault = self.open.get(cluster).copied();
        let b = self.bindings.entry(job.to_string()).or_default();
        b.tasks = tasks;
        b.fault = fault;
        b.back_at = None;
        if let Some(r) = fault.and_then(|i| self.records.get_mut(i))
            && r.moved.insert(job.to_string())
        {
            r.jobs_moved += 1;
        }
        let why = format!(
            "cluster {cluster} has a NoExecute taint the job does not tolerate; its gang moves (TaintManager)"
        );
        w.ctx.explain(job, || why.clone());
        for key in pods {
            let Some(p) = w.flight.pods.get_mut(&key) else {
                continue;
            };
            let node = p.node.take().unwrap_or_default();
            p.grants = None;
            let running = p.state == PodState::Running;
            // A finished pod moves too: the copy starts over elsewhere, whole.
            let finished = p.state == PodState::Done;
            p.state = PodState::Pending;
            p.generation += 1;
            let (gpus, cpu_milli, started_ms) = (p.gpus, p.cpu_milli, p.started_ms);
            let request = p.request.clone();
            if finished {
                if !w.flight.is_volcano(job)
                    && let Some(j) = w.flight.jobs.get_mut(job)
                {
                    j.done = j.done.saturating_sub(1);
                }
            } else {
                w.ctx.stats.evicted("failover");
            }
            out(&Record::pod(
                "evict",
                w.ctx.now,
                job,
                &queue,
                &key,
                &node,
                &request,
                Some(why.clone()),
            ));
            let Some(spec) = w
                .ctx
                .cache
                .set_aside(&key, cluster)
                .map_err(build_err(&w.ctx.source))?
            else {
                continue;
            };
            let ghost = Ghost {
                name: spec.name,
                namespace: spec.namespace,
                cluster: cluster.to_string(),
                node,
                gpus,
                cpu_milli,
                started_ms,
                running,
                holds: !finished,
                terminating: false,
            };
            w.ctx.checker.ghost(
                job,
                &key,
                &format!("{}/{}", ghost.namespace, ghost.name),
                finished,
            );
            w.flight.pod_event(w.ctx, &key, TaskStatus::Pending)?;
            if running && let Some(j) = w.flight.jobs.get_mut(job) {
                j.started = j.started.saturating_sub(1);
            }
            if let Some(b) = self.bindings.get_mut(job) {
                b.ghosts.push(ghost);
            }
            if w.flight.is_volcano(job) {
                w.flight
                    .pod_changed(w.ctx, &key, PodChange::Replaced, out)?;
            }
        }
        if let Some(j) = w.flight.jobs.get_mut(job) {
            let policy = std::sync::Arc::make_mut(&mut j.group.policy);
            if !policy.exclude.iter().any(|c| c == cluster) {
                policy.exclude.push(cluster.to_string());
                if let Some(b) = self.bindings.get_mut(job) {
                    b.excluded.insert(cluster.to_string());
                }
            }
        }
        w.ctx.checker.exclude(job, cluster, true);
        w.flight.requeue_group(w.ctx, job)?;
        if let Some(spec) = w.flight.jobs.get(job).map(|j| j.group.clone()) {
            w.ctx.apply(Event::PodGroupUpsert(spec))?;
        }
        w.ctx.mark_dirty();
        self.evictions(w, job, out)
    }

    /// Graceful eviction's pass over `job`'s tasks: old copies whose time has come are
    /// deleted where their member answers; tasks whose copies are gone leave.
    pub(crate) fn evictions(
        &mut self,
        w: &mut Parts<'_>,
        job: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let Some(b) = self.bindings.get(job) else {
            return Ok(());
        };
        let placement = NewPlacement::of(w.ctx.cache.world(), job);
        let (now, timeout) = (w.ctx.now, w.fleet.timings.eviction_timeout_ms);
        let tasks = b.tasks.clone();
        let mut purge = Vec::new();
        for task in &tasks {
            match assess(task, placement, now, timeout) {
                Verdict::Purge => purge.push(task.from_cluster.clone()),
                Verdict::Wait { until_ms } => w.ctx.push(until_ms, Ev::Eviction(job.to_string())),
                Verdict::Hold => {}
            }
        }
        if placement.healthy()
            && let Some(b) = self.bindings.get_mut(job)
            && b.back_at.is_none()
        {
            b.back_at = Some(now);
        }
        for cluster in purge {
            if !w.fleet.reachable(&cluster) {
                continue;
            }
            let grace = w.ctx.grace;
            let Some(b) = self.bindings.get_mut(job) else {
                continue;
            };
            let mut gone = Vec::new();
            for g in b.ghosts.iter_mut().filter(|g| g.cluster == cluster) {
                if !g.terminating {
                    g.terminating = true;
                    gone.push(g.name.clone());
                }
            }
            for name in gone {
                if grace == 0 {
                    self.ghost_gone(w, job, &name, out)?;
                } else {
                    w.ctx
                        .push(now + grace, Ev::GhostGone(job.to_string(), name));
                }
            }
            if self
                .bindings
                .get(job)
                .is_some_and(|b| !b.ghosts.iter().any(|g| g.cluster == cluster))
            {
                self.task_done(w, job, &cluster)?;
            }
        }
        self.both_copies(w, job);
        Ok(())
    }

    /// The task evicting `job` from `cluster` is done (its old copy is gone): the task leaves
    /// the binding, and the PodGroup may use the cluster again.
    fn task_done(&mut self, w: &mut Parts<'_>, job: &str, cluster: &str) -> Result<(), SimError> {
        let Some(b) = self.bindings.get_mut(job) else {
            return Ok(());
        };
        b.tasks.retain(|t| t.from_cluster != cluster);
        if !b.excluded.remove(cluster) {
            return Ok(());
        }
        w.ctx.checker.exclude(job, cluster, false);
        if let Some(j) = w.flight.jobs.get_mut(job) {
            std::sync::Arc::make_mut(&mut j.group.policy)
                .exclude
                .retain(|c| c != cluster);
            let spec = j.group.clone();
            w.ctx.apply(Event::PodGroupUpsert(spec))?;
            w.ctx.mark_dirty();
        }
        Ok(())
    }

    /// Graceful eviction's pass over every job with an old copy in `cluster` (it answers again).
    pub(crate) fn evictions_in(&mut self, ctx: &mut Ctx, cluster: &str) -> Result<(), SimError> {
        // In name order: the agenda's order must not depend on a hash map's.
        let jobs: BTreeSet<String> = self
            .bindings
            .iter()
            .filter(|(_, b)| b.ghosts.iter().any(|g| g.cluster == cluster))
            .map(|(k, _)| k.clone())
            .collect();
        for job in jobs {
            ctx.push(ctx.now, Ev::Eviction(job));
        }
        Ok(())
    }

    /// A pod of `job` started, stopped or moved: graceful eviction and the measures look again,
    /// if it moved.
    pub(crate) fn job_changed(
        &mut self,
        w: &mut Parts<'_>,
        job: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        if self.bindings.contains_key(job) {
            self.evictions(w, job, out)?;
        }
        Ok(())
    }

    /// An old copy's pod finished terminating: it leaves its node.
    pub(crate) fn ghost_gone(
        &mut self,
        w: &mut Parts<'_>,
        job: &str,
        name: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let Some(b) = self.bindings.get_mut(job) else {
            return Ok(());
        };
        let Some(i) = b.ghosts.iter().position(|g| g.name == name) else {
            return Ok(());
        };
        let g = b.ghosts.remove(i);
        let cluster = g.cluster.clone();
        if !b.ghosts.iter().any(|x| x.cluster == cluster) {
            self.task_done(w, job, &cluster)?;
        }
        let queue = w
            .flight
            .jobs
            .get(job)
            .map(|j| j.queue.clone())
            .unwrap_or_default();
        if g.holds {
            w.ctx
                .checker
                .released(job, &format!("{}/{}", g.namespace, g.name), false);
            w.ctx
                .stats
                .released(&g.node.0, &queue, g.gpus, g.cpu_milli, w.ctx.now);
        }
        if g.running {
            w.ctx
                .stats
                .gpu_time(&queue, g.gpus, w.ctx.now - g.started_ms);
        }
        out(&Record::pod(
            "delete",
            w.ctx.now,
            job,
            &queue,
            &format!("{}/{}", g.namespace, g.name),
            &g.node,
            &crate::workload::Request::default(),
            Some(format!("old copy in {cluster} deleted (graceful eviction)")),
        ));
        w.ctx.apply(Event::PodDelete {
            namespace: g.namespace,
            name: g.name,
        })?;
        self.both_copies(w, job);
        if self
            .bindings
            .get(job)
            .is_some_and(|b| b.ghosts.is_empty() && b.tasks.is_empty())
            && !w.flight.jobs.contains_key(job)
        {
            self.bindings.remove(job);
        }
        w.ctx.mark_dirty();
        Ok(())
    }
}
