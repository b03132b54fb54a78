//! Volcano Jobs in the simulator run through the job controller itself
//! ([`tephra_controllers::job::reconcile()`]), as on a cluster: the simulator keeps each Job, its
//! PodGroup and its pods as API objects, runs a pass whenever one of them changes (a pod
//! starts, finishes or is evicted, the PodGroup is admitted, a policy's timeout falls due) and
//! carries out the writes: the PodGroup and pods go into the cache, deleted pods leave their
//! nodes, and the Job's status moves through Volcano's phases. So a policy behaves in `tephra
//! sim` as it does on a cluster, and each phase change is an event (`kind: job`).
//!
//! The plugins' Services, ConfigMaps and Secrets have nothing to simulate and are only
//! counted; the `ssh` plugin gets a fixed key pair.
//!
//! What the simulator keeps of each Job in flight is in `vcjob.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, Pod,
    PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use tephra_api::batch::JobPhase;
use tephra_api::scheduling::PodGroupPhase;
use tephra_api::well_known::{SIM_DURATION, SIM_EXIT_CODE, TASK_INDEX, TASK_SPEC};
use tephra_api::{Job, PodGroupStatus};
use tephra_controllers::job::plugins::SshKey;
use tephra_controllers::job::plugins::ssh::needs_key as needs_ssh_key;
use tephra_controllers::job::{Observed, Write, reconcile};
use tephra_scheduler::cache::Event;
use tephra_scheduler::model::GroupPhase;

use crate::agenda::Ev;
use crate::error::SimError;
use crate::record::Record;
use crate::scenario::Dur;
use crate::state::{JobRt, NewPod, PodState, Sim};
use crate::workload::SimJob;

pub(crate) mod vcjob;

use vcjob::{PodChange, Role, VcJob};

fn time(ms: i64) -> Time {
    Time(Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn finished(p: JobPhase) -> bool {
    matches!(
        p,
        JobPhase::Completed | JobPhase::Failed | JobPhase::Aborted | JobPhase::Terminated
    )
}

/// Passes over one Job at one instant, at most: the controller settles well within them.
const PASSES: usize = 8;

impl Sim {
    /// Submits a Volcano Job: the job controller makes its PodGroup now, and its pods once
    /// the scheduler admits the PodGroup.
    pub(crate) fn submit_volcano(
        &mut self,
        sj: SimJob,
        mut job: Job,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let key = sj.key();
        let gang = sj
            .gang(self.ctx.cache.names_mut(), self.ctx.now / 1000)
            .map_err(crate::error::build_err(&self.ctx.source))?;
        let mut roles = BTreeMap::new();
        for (t, g) in sj.tasks.iter().zip(&gang.tasks) {
            roles.insert(
                t.role.clone(),
                Role {
                    shape: Arc::clone(&g.shape),
                    request: t.request.clone(),
                    duration_ms: t.duration_ms.max(0),
                },
            );
        }
        let group = gang.group;
        let min = group.min_member;
        self.ctx.announce(&sj, &group, out);
        self.ctx.explain(&key, || {
            format!(
                "Volcano Job submitted to queue {}: {} pod(s), gang of {min}",
                sj.queue,
                sj.replicas()
            )
        });
        job.metadata.creation_timestamp = Some(time(self.ctx.now));
        self.flight.jobs.insert(
            key.clone(),
            JobRt {
                queue: sj.queue.clone(),
                min,
                pods: Vec::new(),
                submit_ms: self.ctx.now,
                started: 0,
                waited: false,
                done: 0,
                group,
                why: None,
            },
        );
        self.flight.vcjobs.insert(
            key.clone(),
            VcJob {
                job,
                podgroup: None,
                pods: BTreeMap::new(),
                roles,
                wake_at: None,
            },
        );
        self.job_pass(&key, out)
    }

    /// Whether `job` is a Volcano Job the controller runs.
    pub(crate) fn is_volcano(&self, job: &str) -> bool {
        self.flight.vcjobs.contains_key(job)
    }

    /// Runs the job controller over `key` until it writes nothing more, and carries out what
    /// it writes.
    pub(crate) fn job_pass(
        &mut self,
        key: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        for _ in 0..PASSES {
            let Some(vc) = self.flight.vcjobs.get(key) else {
                return Ok(());
            };
            let ssh = needs_ssh_key(&vc.job).then(|| SshKey::ed25519(&[7; 32], &[9; 32], 1, "sim"));
            let pods: Vec<&Pod> = vc.pods.values().collect();
            let outcome = reconcile(&Observed {
                job: &vc.job,
                podgroup: vc.podgroup.as_ref(),
                pods: &pods,
                command: None,
                now_ms: self.ctx.now,
                ssh_key: ssh.as_ref(),
            });
            if let Some(wake) = outcome.wake_ms
                && let Some(vc) = self.flight.vcjobs.get_mut(key)
                && vc.wake_at.is_none_or(|w| w <= self.ctx.now || w > wake)
            {
                vc.wake_at = Some(wake);
                self.ctx
                    .push(wake.max(self.ctx.now), Ev::JobWake(key.to_string()));
            }
            if outcome.writes.is_empty() {
                return Ok(());
            }
            for w in outcome.writes {
                self.job_write(key, w, out)?;
                if !self.flight.vcjobs.contains_key(key) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// A policy's timeout or the Job's TTL fell due.
    pub(crate) fn job_wake(
        &mut self,
        key: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        if let Some(vc) = self.flight.vcjobs.get_mut(key) {
            vc.wake_at = None;
        }
        self.job_pass(key, out)
    }

    fn job_write(
        &mut self,
        key: &str,
        w: Write,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        match w {
            Write::CreatePodGroup(pg) | Write::UpdatePodGroup(pg) => {
                let fresh = self
                    .flight
                    .vcjobs
                    .get(key)
                    .is_some_and(|v| v.podgroup.is_none());
                let mut pg = *pg;
                if fresh {
                    pg.status = Some(PodGroupStatus {
                        phase: Some(PodGroupPhase::Pending),
                        ..PodGroupStatus::default()
                    });
                } else if let Some(old) = self
                    .flight
                    .vcjobs
                    .get(key)
                    .and_then(|v| v.podgroup.as_ref())
                {
                    pg.status = old.status.clone();
                }
                if let Some(vc) = self.flight.vcjobs.get_mut(key) {
                    vc.podgroup = Some(pg);
                }
                if fresh && let Some(j) = self.flight.jobs.get_mut(key) {
                    j.group.phase = GroupPhase::Pending;
                    j.group.phase_since = self.ctx.now / 1000;
                    let spec = j.group.clone();
                    self.ctx.apply(Event::PodGroupUpsert(spec))?;
                    self.ctx.mark_dirty();
                }
            }
            Write::DeletePodGroup(_) => {
                if let Some(vc) = self.flight.vcjobs.get_mut(key) {
                    vc.podgroup = None;
                }
                if let Some(j) = self.flight.jobs.get(key) {
                    let (namespace, name) = (j.group.namespace.clone(), j.group.name.clone());
                    self.ctx.apply(Event::PodGroupDelete { namespace, name })?;
                }
            }
            Write::CreatePod(pod) => self.create_pod(key, *pod)?,
            Write::DeletePod(name) => self.delete_pod(key, &name, out)?,
            Write::Status(status) => {
                let was = self
                    .flight
                    .vcjobs
                    .get(key)
                    .and_then(|v| v.job.status.as_ref())
                    .and_then(|s| s.state.phase);
                let now = status.state.phase;
                if let Some(vc) = self.flight.vcjobs.get_mut(key) {
                    vc.job.status = Some(*status);
                }
                if now != was
                    && let Some(phase) = now
                {
                    let queue = self
                        .flight
                        .jobs
                        .get(key)
                        .map(|j| j.queue.clone())
                        .unwrap_or_default();
                    out(&Record::job_phase(
                        self.ctx.now,
                        key,
                        &queue,
                        phase_name(phase),
                    ));
                    self.ctx
                        .explain(key, || format!("Job {}", phase_name(phase)));
                    if finished(phase) {
                        self.job_finished(key, phase)?;
                    }
                }
            }
            Write::Event {
                reason, message, ..
            } => {
                self.ctx.explain(key, || format!("{reason}: {message}"));
            }
            Write::DeleteJob => {
                self.flight.vcjobs.remove(key);
            }
            Write::CreateService(_) | Write::CreateConfigMap(_) | Write::CreateSecret(_) => {}
        }
        Ok(())
    }

    fn create_pod(&mut self, key: &str, mut pod: Pod) -> Result<(), SimError> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        let role = annotations.get(TASK_SPEC).cloned().unwrap_or_default();
        let index = annotations
            .get(TASK_INDEX)
            .and_then(|i| i.parse().ok())
            .unwrap_or(0);
        let Some(r) = self.flight.vcjobs.get(key).and_then(|v| v.roles.get(&role)) else {
            return Ok(());
        };
        let duration_ms = annotations
            .get(SIM_DURATION)
            .and_then(|d| Dur::parse(d).ok())
            .map_or(r.duration_ms, |d| d.0);
        let exit_code = annotations
            .get(SIM_EXIT_CODE)
            .and_then(|c| c.trim().parse().ok())
            .unwrap_or(0);
        let (shape, request) = (Arc::clone(&r.shape), r.request.clone());
        pod.metadata.creation_timestamp = Some(time(self.ctx.now));
        pod.status = Some(PodStatus {
            phase: Some("Pending".into()),
            ..PodStatus::default()
        });
        let pod_key = format!("{ns}/{name}");
        let group = self
            .flight
            .jobs
            .get(key)
            .map(|j| j.group.name.clone())
            .unwrap_or_default();
        self.add_pod(
            key,
            &group,
            NewPod {
                key: pod_key.clone(),
                shape,
                request,
                index,
                duration_ms,
                exit_code,
            },
        )?;
        if let Some(j) = self.flight.jobs.get_mut(key) {
            j.pods.push(pod_key);
        }
        if let Some(vc) = self.flight.vcjobs.get_mut(key) {
            vc.pods.insert(name, pod);
        }
        self.ctx.mark_dirty();
        Ok(())
    }

    /// The controller deletes a pod: it leaves its node (if it holds one) and the cache.
    fn delete_pod(
        &mut self,
        key: &str,
        name: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let ns = self
            .flight
            .vcjobs
            .get(key)
            .and_then(|v| v.job.metadata.namespace.clone())
            .unwrap_or_else(|| "default".into());
        let pod_key = format!("{ns}/{name}");
        self.remove_pod(key, &pod_key, name, out)
    }

    /// Takes a pod out of the simulation: its node is released, the cache and the Job forget it.
    fn remove_pod(
        &mut self,
        key: &str,
        pod_key: &str,
        name: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        if let Some(p) = self.flight.pods.remove(pod_key) {
            let holds = matches!(
                p.state,
                PodState::Bound | PodState::Running | PodState::Releasing
            );
            if holds {
                let node = p.node.clone().unwrap_or_default();
                let queue = self
                    .flight
                    .jobs
                    .get(key)
                    .map(|j| j.queue.clone())
                    .unwrap_or_default();
                self.ctx.checker.released(key, pod_key, false);
                self.ctx
                    .stats
                    .released(&node.0, &queue, p.gpus, p.cpu_milli, self.ctx.now);
                let was_running = p.state == PodState::Running
                    || (p.state == PodState::Releasing && p.releasing_from == PodState::Running);
                if was_running {
                    self.ctx
                        .stats
                        .gpu_time(&queue, p.gpus, self.ctx.now - p.started_ms);
                    if let Some(j) = self.flight.jobs.get_mut(key) {
                        j.started = j.started.saturating_sub(1);
                    }
                }
                out(&Record::pod(
                    "delete",
                    self.ctx.now,
                    key,
                    &queue,
                    pod_key,
                    &node,
                    &p.request,
                    None,
                ));
            }
            let (ns, n) = pod_key.split_once('/').unwrap_or(("default", pod_key));
            self.ctx.apply(Event::PodDelete {
                namespace: ns.into(),
                name: n.into(),
            })?;
        }
        if let Some(j) = self.flight.jobs.get_mut(key) {
            j.pods.retain(|p| p != pod_key);
        }
        if let Some(vc) = self.flight.vcjobs.get_mut(key) {
            vc.pods.remove(name);
        }
        self.ctx.mark_dirty();
        Ok(())
    }

    /// A Job reached a final phase: it leaves the cache and the engine, counted as completed
    /// or failed.
    fn job_finished(&mut self, key: &str, phase: JobPhase) -> Result<(), SimError> {
        self.retire(key, phase == JobPhase::Completed)?;
        self.flight.vcjobs.remove(key);
        self.ctx.mark_dirty();
        Ok(())
    }

    /// The scheduler moved a Volcano Job's PodGroup to `phase`.
    pub(crate) fn podgroup_phase(
        &mut self,
        key: &str,
        phase: GroupPhase,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let api = match phase {
            GroupPhase::Pending => PodGroupPhase::Pending,
            GroupPhase::Inqueue => PodGroupPhase::Inqueue,
            GroupPhase::Running => PodGroupPhase::Running,
            GroupPhase::Unknown => PodGroupPhase::Unknown,
            GroupPhase::Completed => PodGroupPhase::Completed,
        };
        if let Some(pg) = self
            .flight
            .vcjobs
            .get_mut(key)
            .and_then(|v| v.podgroup.as_mut())
        {
            pg.status.get_or_insert_with(PodGroupStatus::default).phase = Some(api);
        }
        self.job_pass(key, out)
    }

    /// A pod of a Volcano Job was bound, started, finished or is being evicted: its object
    /// changes, and the controller looks again.
    pub(crate) fn pod_changed(
        &mut self,
        pod_key: &str,
        change: PodChange,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let Some(job) = self.flight.pods.get(pod_key).map(|p| p.job.clone()) else {
            return Ok(());
        };
        let node = self.flight.pods.get(pod_key).and_then(|p| p.node.clone());
        let name = pod_key
            .split_once('/')
            .map_or(pod_key, |(_, n)| n)
            .to_string();
        let now = time(self.ctx.now);
        if let Some(pod) = self
            .flight
            .vcjobs
            .get_mut(&job)
            .and_then(|v| v.pods.get_mut(&name))
        {
            let status = pod.status.get_or_insert_with(PodStatus::default);
            let container = |state: ContainerState, ready: bool| ContainerStatus {
                name: "main".into(),
                ready,
                state: Some(state),
                ..ContainerStatus::default()
            };
            match change {
                PodChange::Bound => {
                    if let Some((_, n)) = node {
                        pod.spec.get_or_insert_with(Default::default).node_name = Some(n);
                    }
                }
                PodChange::Started => {
                    status.phase = Some("Running".into());
                    status.start_time = Some(now.clone());
                    status.container_statuses = Some(vec![container(
                        ContainerState {
                            running: Some(ContainerStateRunning {
                                started_at: Some(now),
                            }),
                            ..ContainerState::default()
                        },
                        true,
                    )]);
                }
                PodChange::Finished(code) => {
                    status.phase = Some(if code == 0 { "Succeeded" } else { "Failed" }.into());
                    status.container_statuses = Some(vec![container(
                        ContainerState {
                            terminated: Some(ContainerStateTerminated {
                                exit_code: code,
                                finished_at: Some(now),
                                reason: Some(if code == 0 { "Completed" } else { "Error" }.into()),
                                ..ContainerStateTerminated::default()
                            }),
                            ..ContainerState::default()
                        },
                        false,
                    )]);
                }
                PodChange::Replaced => {
                    status.phase = Some("Pending".into());
                    status.start_time = None;
                    status.container_statuses = None;
                    if let Some(spec) = pod.spec.as_mut() {
                        spec.node_name = None;
                    }
                }
                PodChange::Evicted => {
                    pod.metadata.deletion_timestamp = Some(now.clone());
                    status
                        .conditions
                        .get_or_insert_with(Vec::new)
                        .push(PodCondition {
                            type_: "DisruptionTarget".into(),
                            status: "True".into(),
                            last_transition_time: Some(now),
                            ..PodCondition::default()
                        });
                }
            }
        }
        if change == PodChange::Bound {
            return Ok(());
        }
        self.job_pass(&job, out)
    }

    /// An evicted pod of a Volcano Job finished terminating: it is gone, as the API server
    /// removes it, and the controller decides what comes next.
    pub(crate) fn pod_gone(
        &mut self,
        pod_key: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let Some(job) = self.flight.pods.get(pod_key).map(|p| p.job.clone()) else {
            return Ok(());
        };
        let name = pod_key
            .split_once('/')
            .map_or(pod_key, |(_, n)| n)
            .to_string();
        self.remove_pod(&job, pod_key, &name, out)?;
        self.failover_job_changed(&job, out)?;
        self.job_pass(&job, out)
    }
}

/// Volcano's name of a phase.
pub fn phase_name(p: JobPhase) -> &'static str {
    match p {
        JobPhase::Pending => "Pending",
        JobPhase::Aborting => "Aborting",
        JobPhase::Aborted => "Aborted",
        JobPhase::Running => "Running",
        JobPhase::Restarting => "Restarting",
        JobPhase::Completing => "Completing",
        JobPhase::Completed => "Completed",
        JobPhase::Terminating => "Terminating",
        JobPhase::Terminated => "Terminated",
        JobPhase::Failed => "Failed",
    }
}
