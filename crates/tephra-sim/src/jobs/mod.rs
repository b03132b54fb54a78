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
//! The controller's passes are methods of the jobs and pods in flight
//! ([`InFlight`](crate::state::InFlight)); what the simulator keeps of each Job is in
//! `vcjob.rs`.

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
use crate::ctx::Ctx;
use crate::error::SimError;
use crate::record::Record;
use crate::scenario::Dur;
use crate::state::{InFlight, JobRt, NewPod, PodState};
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

impl InFlight {
    /// Submits a Volcano Job: the job controller makes its PodGroup now, and its pods once
    /// the scheduler admits the PodGroup.
    pub(crate) fn submit_volcano(
        &mut self,
        ctx: &mut Ctx,
        sj: SimJob,
        mut job: Job,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let key = sj.key();
        let gang = sj
            .gang(ctx.cache.names_mut(), ctx.now / 1000)
            .map_err(crate::error::build_err(&ctx.source))?;
        let mut roles = BTreeMap::new();
        for (t, g) in sj.tasks.iter().zip(&gang.tasks) {
            roles.insert(
                t.role.clone(),
                Role {
                    shape: Arc::clone(&g.shape),
                    request: t.request.clone(),
                    duration_ms: t.duration_ms.max(0),
                    partitions: BTreeMap::new(),
                },
            );
        }
        let group = gang.group;
        let min = group.min_member;
        ctx.announce(&sj, &group, out);
        ctx.explain(&key, || {
            format!(
                "Volcano Job submitted to queue {}: {} pod(s), gang of {min}",
                sj.queue,
                sj.replicas()
            )
        });
        job.metadata.creation_timestamp = Some(time(ctx.now));
        self.jobs.insert(
            key.clone(),
            JobRt {
                queue: sj.queue.clone(),
                min,
                pods: Vec::new(),
                submit_ms: ctx.now,
                started: 0,
                waited: false,
                done: 0,
                group,
                why: None,
            },
        );
        self.vcjobs.insert(
            key.clone(),
            VcJob {
                job,
                podgroup: None,
                pods: BTreeMap::new(),
                roles,
                wake_at: None,
            },
        );
        self.job_pass(ctx, &key, out)
    }

    /// Runs the job controller over `key` until it writes nothing more, and carries out what
    /// it writes.
    pub(crate) fn job_pass(
        &mut self,
        ctx: &mut Ctx,
        key: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        for _ in 0..PASSES {
            let Some(vc) = self.vcjobs.get(key) else {
                return Ok(());
            };
            let ssh = needs_ssh_key(&vc.job).then(|| SshKey::ed25519(&[7; 32], &[9; 32], 1, "sim"));
            let pods: Vec<&Pod> = vc.pods.values().collect();
            let outcome = reconcile(&Observed {
                job: &vc.job,
                podgroup: vc.podgroup.as_ref(),
                pods: &pods,
                command: None,
                now_ms: ctx.now,
                ssh_key: ssh.as_ref(),
            });
            if let Some(wake) = outcome.wake_ms
                && let Some(vc) = self.vcjobs.get_mut(key)
                && vc.wake_at.is_none_or(|w| w <= ctx.now || w > wake)
            {
                vc.wake_at = Some(wake);
                ctx.push(wake.max(ctx.now), Ev::JobWake(key.to_string()));
            }
            if outcome.writes.is_empty() {
                return Ok(());
            }
            for w in outcome.writes {
                self.job_write(ctx, key, w, out)?;
                if !self.vcjobs.contains_key(key) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// A policy's timeout or the Job's TTL fell due.
    pub(crate) fn job_wake(
        &mut self,
        ctx: &mut Ctx,
        key: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        if let Some(vc) = self.vcjobs.get_mut(key) {
            vc.wake_at = None;
        }
        self.job_pass(ctx, key, out)
    }

    fn job_write(
        &mut self,
        ctx: &mut Ctx,
        key: &str,
        w: Write,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        match w {
            Write::CreatePodGroup(pg) | Write::UpdatePodGroup(pg) => {
                let fresh = self.vcjobs.get(key).is_some_and(|v| v.podgroup.is_none());
                let mut pg = *pg;
                // Its sub-groups, as the job controller filled them (partitions).
                let sub_groups =
                    tephra_controllers::podgroup::sub_groups(&pg.spec.sub_group_policy)
                        .map_err(crate::error::build_err(&ctx.source))?;
                if let Some(j) = self.jobs.get_mut(key) {
                    j.group.sub_groups = sub_groups;
                }
                if fresh {
                    pg.status = Some(PodGroupStatus {
                        phase: Some(PodGroupPhase::Pending),
                        ..PodGroupStatus::default()
                    });
                } else if let Some(old) = self.vcjobs.get(key).and_then(|v| v.podgroup.as_ref()) {
                    pg.status = old.status.clone();
                }
                if let Some(vc) = self.vcjobs.get_mut(key) {
                    vc.podgroup = Some(pg);
                }
                if fresh && let Some(j) = self.jobs.get_mut(key) {
                    j.group.phase = GroupPhase::Pending;
                    j.group.phase_since = ctx.now / 1000;
                    let spec = j.group.clone();
                    ctx.apply(Event::PodGroupUpsert(spec))?;
                    ctx.mark_dirty();
                }
            }
            Write::DeletePodGroup(_) => {
                if let Some(vc) = self.vcjobs.get_mut(key) {
                    vc.podgroup = None;
                }
                if let Some(j) = self.jobs.get(key) {
                    let (namespace, name) = (j.group.namespace.clone(), j.group.name.clone());
                    ctx.apply(Event::PodGroupDelete { namespace, name })?;
                }
            }
            Write::CreatePod(pod) => self.create_pod(ctx, key, *pod)?,
            Write::DeletePod(name) => self.delete_pod(ctx, key, &name, out)?,
            Write::Status(status) => {
                let was = self
                    .vcjobs
                    .get(key)
                    .and_then(|v| v.job.status.as_ref())
                    .and_then(|s| s.state.phase);
                let now = status.state.phase;
                if let Some(vc) = self.vcjobs.get_mut(key) {
                    vc.job.status = Some(*status);
                }
                if now != was
                    && let Some(phase) = now
                {
                    let queue = self
                        .jobs
                        .get(key)
                        .map(|j| j.queue.clone())
                        .unwrap_or_default();
                    out(&Record::job_phase(ctx.now, key, &queue, phase_name(phase)));
                    ctx.explain(key, || format!("Job {}", phase_name(phase)));
                    if finished(phase) {
                        self.job_finished(ctx, key, phase)?;
                    }
                }
            }
            Write::Event {
                reason, message, ..
            } => {
                ctx.explain(key, || format!("{reason}: {message}"));
            }
            Write::DeleteJob => {
                self.vcjobs.remove(key);
            }
            Write::CreateService(_) | Write::CreateConfigMap(_) | Write::CreateSecret(_) => {}
        }
        Ok(())
    }

    fn create_pod(&mut self, ctx: &mut Ctx, key: &str, mut pod: Pod) -> Result<(), SimError> {
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
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let Some(r) = self
            .vcjobs
            .get_mut(key)
            .and_then(|v| v.roles.get_mut(&role))
        else {
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
        let (shape, request) = (r.shape_for(&labels), r.request.clone());
        pod.metadata.creation_timestamp = Some(time(ctx.now));
        pod.status = Some(PodStatus {
            phase: Some("Pending".into()),
            ..PodStatus::default()
        });
        let pod_key = format!("{ns}/{name}");
        let group = self
            .jobs
            .get(key)
            .map(|j| j.group.name.clone())
            .unwrap_or_default();
        self.add_pod(
            ctx,
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
        if let Some(j) = self.jobs.get_mut(key) {
            j.pods.push(pod_key);
        }
        if let Some(vc) = self.vcjobs.get_mut(key) {
            vc.pods.insert(name, pod);
        }
        ctx.mark_dirty();
        Ok(())
    }

    /// The controller deletes a pod: it leaves its node (if it holds one) and the cache.
    fn delete_pod(
        &mut self,
        ctx: &mut Ctx,
        key: &str,
        name: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let ns = self
            .vcjobs
            .get(key)
            .and_then(|v| v.job.metadata.namespace.clone())
            .unwrap_or_else(|| "default".into());
        let pod_key = format!("{ns}/{name}");
        self.remove_pod(ctx, key, &pod_key, name, out)
    }

    /// Takes a pod out of the simulation: its node is released, the cache and the Job forget it.
    fn remove_pod(
        &mut self,
        ctx: &mut Ctx,
        key: &str,
        pod_key: &str,
        name: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        if let Some(p) = self.pods.remove(pod_key) {
            let holds = matches!(
                p.state,
                PodState::Bound | PodState::Running | PodState::Releasing
            );
            if holds {
                let node = p.node.clone().unwrap_or_default();
                let queue = self
                    .jobs
                    .get(key)
                    .map(|j| j.queue.clone())
                    .unwrap_or_default();
                ctx.checker.released(key, pod_key, false);
                ctx.stats
                    .released(&node.0, &queue, p.gpus, p.cpu_milli, ctx.now);
                let was_running = p.state == PodState::Running
                    || (p.state == PodState::Releasing && p.releasing_from == PodState::Running);
                if was_running {
                    ctx.stats.gpu_time(&queue, p.gpus, ctx.now - p.started_ms);
                    if let Some(j) = self.jobs.get_mut(key) {
                        j.started = j.started.saturating_sub(1);
                    }
                }
                out(&Record::pod(
                    "delete", ctx.now, key, &queue, pod_key, &node, &p.request, None,
                ));
            }
            let (ns, n) = pod_key.split_once('/').unwrap_or(("default", pod_key));
            ctx.apply(Event::PodDelete {
                namespace: ns.into(),
                name: n.into(),
            })?;
        }
        if let Some(j) = self.jobs.get_mut(key) {
            j.pods.retain(|p| p != pod_key);
        }
        if let Some(vc) = self.vcjobs.get_mut(key) {
            vc.pods.remove(name);
        }
        ctx.mark_dirty();
        Ok(())
    }

    /// A Job reached a final phase: it leaves the cache and the engine, counted as completed
    /// or failed.
    fn job_finished(&mut self, ctx: &mut Ctx, key: &str, phase: JobPhase) -> Result<(), SimError> {
        self.retire(ctx, key, phase == JobPhase::Completed)?;
        if let Some(vc) = self.vcjobs.remove(key)
            && vc.job.metadata.owner_references.is_some()
        {
            // A CronJob's or JobFlow's: its controller looks at it next (`scheduled.rs`).
            self.ended.push(vc.job);
        }
        ctx.mark_dirty();
        Ok(())
    }

    /// The scheduler moved a Volcano Job's PodGroup to `phase`.
    pub(crate) fn podgroup_phase(
        &mut self,
        ctx: &mut Ctx,
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
        if let Some(pg) = self.vcjobs.get_mut(key).and_then(|v| v.podgroup.as_mut()) {
            pg.status.get_or_insert_with(PodGroupStatus::default).phase = Some(api);
        }
        self.job_pass(ctx, key, out)
    }

    /// A pod of a Volcano Job was bound, started, finished or is being evicted: its object
    /// changes, and the controller looks again.
    pub(crate) fn pod_changed(
        &mut self,
        ctx: &mut Ctx,
        pod_key: &str,
        change: PodChange,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let Some(job) = self.pods.get(pod_key).map(|p| p.job.clone()) else {
            return Ok(());
        };
        let node = self.pods.get(pod_key).and_then(|p| p.node.clone());
        let name = pod_key
            .split_once('/')
            .map_or(pod_key, |(_, n)| n)
            .to_string();
        let now = time(ctx.now);
        if let Some(pod) = self
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
        self.job_pass(ctx, &job, out)
    }

    /// An evicted pod of a Volcano Job finished terminating: it is gone, as the API server
    /// removes it. Returns its job, whose controller decides what comes next ([`Self::job_pass`]).
    pub(crate) fn pod_gone(
        &mut self,
        ctx: &mut Ctx,
        pod_key: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<Option<String>, SimError> {
        let Some(job) = self.pods.get(pod_key).map(|p| p.job.clone()) else {
            return Ok(None);
        };
        let name = pod_key
            .split_once('/')
            .map_or(pod_key, |(_, n)| n)
            .to_string();
        self.remove_pod(ctx, &job, pod_key, &name, out)?;
        Ok(Some(job))
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
