//! One pass of the job controller over one Job: from the Job, its PodGroup and its pods as they
//! are now (and a user's command, if one is waiting), the writes that move it along.
//!
//! The pass reads the action (a command, else the first policy a pod's event triggers, else
//! sync), takes the state machine's step for it ([`super::lifecycle`]), works out the pods to
//! create and delete, counts the pods, and moves the phase. Pods are created only once the
//! scheduler has admitted the PodGroup (it left Pending), and a task with `dependsOn` only once
//! the tasks it depends on run. Nothing here does IO: the runtime applies the writes, and
//! calls again when anything of the Job changes or when `wake_ms` comes.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use tephra_api::batch::{Action, Iteration, JobCondition, JobPhase, JobStatus};
use tephra_api::scheduling::PodGroupPhase;
use tephra_api::{Job, PodGroup};
use tephra_scheduler::duration::Duration;

use super::gang::{GangPlan, plan};
use super::lifecycle::{Facts, Pods, finished, step};
use super::names::{pod_name, podgroup_name};
use super::observe::{Counts, JobPod, Phase};
use super::plugins::{self, SshKey, made, made_key};
use super::pods::{pod, podgroup, podgroup_drifted};
use super::policy::{Trigger, decide, triggers};

/// What the controller sees of one Job.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    /// The Job.
    pub job: &'a Job,
    /// Its PodGroup, if it exists.
    pub podgroup: Option<&'a PodGroup>,
    /// The pods it owns.
    pub pods: &'a [&'a Pod],
    /// The action of a user's command (`vcctl job suspend` is AbortJob), if one waits.
    pub command: Option<Action>,
    /// Now, in ms since the epoch.
    pub now_ms: i64,
    /// A fresh key pair for the `ssh` plugin's Secret, when the Job asks for the plugin and its
    /// Secret is not made yet (the caller makes keys; this pass has no entropy).
    pub ssh_key: Option<&'a SshKey>,
}

/// A write the runtime applies.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Create the PodGroup.
    CreatePodGroup(Box<PodGroup>),
    /// Bring the PodGroup's spec in line (minMember, minTaskMember, minResources, priority).
    UpdatePodGroup(Box<PodGroup>),
    /// Delete the PodGroup (the Job is killed; a restart makes a new one).
    DeletePodGroup(String),
    /// Create a Service a plugin needs (`svc`); one that exists is left as it is.
    CreateService(Box<Service>),
    /// Create a ConfigMap a plugin needs (`svc`'s hosts); one that exists is left as it is.
    CreateConfigMap(Box<ConfigMap>),
    /// Create a plugin's Secret (`ssh`'s key pair).
    CreateSecret(Box<Secret>),
    /// Create a pod.
    CreatePod(Box<Pod>),
    /// Delete a pod, marking it first (`volcano.sh/controller-out-of-sync`) so that its end is
    /// no event for the policies.
    DeletePod(String),
    /// Write the Job's status.
    Status(Box<JobStatus>),
    /// Record an Event on the Job.
    Event {
        /// Warning (else Normal).
        warning: bool,
        /// Reason.
        reason: String,
        /// Message.
        message: String,
    },
    /// Delete the Job (`ttlSecondsAfterFinished` passed).
    DeleteJob,
}

/// The outcome of one pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The action taken.
    pub action: Action,
    /// The event that asked for it, if a policy did.
    pub trigger: Option<Trigger>,
    /// The writes, in order.
    pub writes: Vec<Write>,
    /// When to look at the Job again even if nothing changes (a policy's timeout, the TTL).
    pub wake_ms: Option<i64>,
}

/// One pass over one Job.
pub fn reconcile(o: &Observed<'_>) -> Outcome {
    let job = o.job;
    let mut out = Outcome {
        action: Action::SyncJob,
        trigger: None,
        writes: Vec::new(),
        wake_ms: None,
    };
    if job.metadata.deletion_timestamp.is_some() {
        return out;
    }
    let old = job.status.clone().unwrap_or_default();
    // What Volcano's admission webhook refuses (and `tephra validate`): with no webhook here,
    // the Job waits with the fields named.
    let problems = tephra_api::checks::job(job);
    if !problems.is_empty() {
        let message: Vec<String> = problems.iter().map(ToString::to_string).collect();
        refuse(&old, &message.join("; "), o.now_ms, &mut out);
        return out;
    }
    let plan = match plan(job) {
        Ok(p) => p,
        Err(e) => {
            refuse(&old, &e.to_string(), o.now_ms, &mut out);
            return out;
        }
    };
    let pods: Vec<JobPod> = o.pods.iter().copied().filter_map(JobPod::read).collect();
    let tasks: Vec<(String, i32, i32)> = plan
        .tasks
        .iter()
        .zip(&job.spec.tasks)
        .map(|(t, s)| (t.name.clone(), t.replicas as i32, s.max_retry.unwrap_or(0)))
        .collect();
    let phase = old.state.phase;
    if let Some(action) = o.command {
        out.action = action;
    } else if matches!(
        phase,
        Some(JobPhase::Pending | JobPhase::Running | JobPhase::Restarting)
    ) {
        // Policies act on a live Job; once it drains or finished, their actions would change
        // nothing (Volcano's draining and finished states treat every action as a sync).
        let unknown = o
            .podgroup
            .and_then(|pg| pg.status.as_ref())
            .and_then(|s| s.phase)
            == Some(PodGroupPhase::Unknown);
        let verdict = decide(job, &triggers(job, &tasks, &pods, unknown), o.now_ms);
        out.wake_ms = verdict.wake_ms;
        if let Some((action, trigger)) = verdict.act {
            out.action = action;
            out.trigger = Some(trigger);
        }
    }
    let step = step(phase, out.action);
    let mut version = old.version;
    let mut counts = Counts::default();
    match step.pods {
        Pods::Sync => sync(o, &plan, &pods, &mut counts, &mut out.writes),
        Pods::KillAll { keep_finished } => {
            let last_retry = old.retry_count >= job.spec.max_retry - 1;
            let keep = keep_finished || last_retry;
            for p in &pods {
                if p.terminating {
                    counts.terminating += 1;
                } else if keep && p.phase.finished() {
                    counts.add(p);
                } else {
                    out.writes.push(Write::DeletePod(p.name.clone()));
                    counts.terminating += 1;
                }
            }
            if let Some(pg) = o.podgroup.and_then(|pg| pg.metadata.name.clone()) {
                out.writes.push(Write::DeletePodGroup(pg));
            }
            if out.action != Action::SyncJob {
                version += 1;
            }
        }
        Pods::KillTarget => {
            let targets = targets(job, &plan, out.action, out.trigger.as_ref(), &pods);
            for p in &pods {
                if targets.contains(p.name.as_str()) {
                    // A target already on its way out is marked too: its eviction has been
                    // answered and must not trigger the policy again.
                    out.writes.push(Write::DeletePod(p.name.clone()));
                    counts.terminating += 1;
                } else if p.terminating {
                    counts.terminating += 1;
                } else {
                    counts.add(p);
                }
            }
        }
    }
    let facts_tasks: Vec<(String, i32, Option<i32>)> = plan
        .tasks
        .iter()
        .zip(&job.spec.tasks)
        .map(|(t, s)| (t.name.clone(), t.replicas as i32, s.min_available))
        .collect();
    // The gang needs at least one pod, but the Job's own minimum is 0 when it has no replicas
    // (Volcano then runs it, with nothing to wait for).
    let min_available = if facts_tasks.iter().all(|t| t.1 == 0) {
        0
    } else {
        plan.min_member as i32
    };
    let facts = Facts {
        tasks: &facts_tasks,
        min_available,
        min_success: job.spec.min_success,
        max_retry: job.spec.max_retry,
    };
    let was = phase.unwrap_or(JobPhase::Pending);
    let (now_phase, retries) = step.next.apply(was, old.retry_count, &counts, &facts);
    let mut status = JobStatus {
        state: old.state.clone(),
        min_available,
        task_status_count: counts.tasks.clone(),
        pending: counts.pending,
        running: counts.running,
        succeeded: counts.succeeded,
        failed: counts.failed,
        terminating: counts.terminating,
        unknown: counts.unknown,
        version,
        retry_count: retries,
        running_duration: old.running_duration.clone(),
        controlled_resources: old.controlled_resources.clone(),
        conditions: old.conditions.clone(),
    };
    if matches!(step.pods, Pods::Sync) {
        // A plugin's objects count as made once it can make them (ssh: once it has a key).
        for (plugin, ctx) in plugins::asked(job, &plan, o.ssh_key) {
            if plugin.makes_objects(&ctx) {
                status
                    .controlled_resources
                    .insert(made_key(plugin.name()), plugin.name().into());
            }
        }
    }
    if phase != Some(now_phase) {
        let at = time(o.now_ms);
        status.state.phase = Some(now_phase);
        status.state.last_transition_time = Some(at.clone());
        (status.state.reason, status.state.message) = match &out.trigger {
            Some(t) => (Some(format!("{:?}", out.action)), Some(t.describe())),
            None if out.action != Action::SyncJob => {
                (Some(format!("{:?}", out.action)), Some("command".into()))
            }
            None => (None, None),
        };
        status.conditions.retain(|c| c.status != now_phase);
        status.conditions.push(JobCondition {
            status: now_phase,
            last_transition_time: Some(at),
        });
    }
    if phase == Some(now_phase) && now_phase == JobPhase::Pending {
        waits_because(o.podgroup, &mut status, &mut out);
    }
    if finished(Some(now_phase)) || now_phase == JobPhase::Aborted {
        status.running_duration = running_duration(job, &status);
    }
    // A Job that finishes in this pass gives up its PodGroup in the same pass, before its
    // status says it finished, as Volcano's killJob does: whoever sees it finished finds the
    // gang gone (the pass after would otherwise remove it).
    if finished(Some(now_phase))
        && !finished(phase)
        && !out
            .writes
            .iter()
            .any(|w| matches!(w, Write::DeletePodGroup(_)))
        && let Some(pg) = o.podgroup.and_then(|pg| pg.metadata.name.clone())
    {
        out.writes.push(Write::DeletePodGroup(pg));
    }
    let acted = phase != Some(now_phase)
        || out
            .writes
            .iter()
            .any(|w| matches!(w, Write::DeletePod(_) | Write::DeletePodGroup(_)));
    if out.action != Action::SyncJob && acted {
        let why = out
            .trigger
            .as_ref()
            .map_or_else(|| "a command".to_string(), Trigger::describe);
        out.writes.push(Write::Event {
            warning: false,
            reason: "ExecuteAction".into(),
            message: format!("Start to execute action {:?} for {why}", out.action),
        });
    }
    if status != old {
        out.writes.push(Write::Status(Box::new(status.clone())));
    }
    ttl(job, &status, o.now_ms, &mut out);
    out
}

/// Why a Pending Job waits, where users look (`kubectl describe vcjob`, `tephra job view`):
/// the scheduler's reason on its PodGroup (`Unschedulable`) becomes the Job's `status.state`
/// reason and message, in the same words, with a Warning Event each time the reason changes.
/// The controller's own reasons (`InvalidJob`, `FailedCreatePod`) are left in place.
fn waits_because(podgroup: Option<&PodGroup>, status: &mut JobStatus, out: &mut Outcome) {
    if matches!(
        status.state.reason.as_deref(),
        Some("InvalidJob" | "FailedCreatePod")
    ) {
        return;
    }
    let Some(c) = podgroup.and_then(|pg| pg.status.as_ref()).and_then(|s| {
        s.conditions.iter().find(|c| {
            c.type_ == tephra_api::scheduling::PodGroupConditionType::Unschedulable
                && c.status == "True"
        })
    }) else {
        return;
    };
    let (Some(reason), Some(message)) = (c.reason.clone(), c.message.clone()) else {
        return;
    };
    if status.state.reason.as_deref() != Some(reason.as_str()) {
        out.writes.push(Write::Event {
            warning: true,
            reason: reason.clone(),
            message: message.clone(),
        });
    }
    status.state.reason = Some(reason);
    status.state.message = Some(message);
}

/// A Job the controller cannot plan: it stays Pending with the reason, and an Event names the
/// field. Nothing is created.
fn refuse(old: &JobStatus, message: &str, now_ms: i64, out: &mut Outcome) {
    let mut status = old.clone();
    status.state.reason = Some("InvalidJob".into());
    status.state.message = Some(message.to_string());
    if status.state.phase.is_none() {
        status.state.phase = Some(JobPhase::Pending);
        status.state.last_transition_time = Some(time(now_ms));
    }
    if &status != old {
        out.writes.push(Write::Event {
            warning: true,
            reason: "InvalidJob".into(),
            message: message.to_string(),
        });
        out.writes.push(Write::Status(Box::new(status)));
    }
}

/// The sync step: the PodGroup exists and matches the Job; once it is admitted, every pod of
/// every task exists (tasks with `dependsOn` once their dependencies run); pods out of place
/// (an index past the replicas, a task the Job no longer has, marked by the controller) go.
fn sync(
    o: &Observed<'_>,
    plan: &GangPlan,
    pods: &[JobPod],
    counts: &mut Counts,
    writes: &mut Vec<Write>,
) {
    let job = o.job;
    match podgroup(job, plan) {
        Ok(want) => match o.podgroup {
            None => writes.push(Write::CreatePodGroup(Box::new(want))),
            Some(have) if podgroup_drifted(have, &want) => {
                let mut updated = have.clone();
                updated.spec.min_member = want.spec.min_member;
                updated.spec.min_task_member = want.spec.min_task_member;
                updated.spec.min_resources = want.spec.min_resources;
                updated.spec.priority_class_name = want.spec.priority_class_name;
                writes.push(Write::UpdatePodGroup(Box::new(updated)));
            }
            Some(_) => {}
        },
        Err(e) => writes.push(Write::Event {
            warning: true,
            reason: "PodGroupError".into(),
            message: e.to_string(),
        }),
    }
    for (plugin, ctx) in plugins::asked(job, plan, o.ssh_key) {
        if made(job, plugin.name()) {
            continue;
        }
        let Some(objects) = plugin.objects(&ctx) else {
            continue;
        };
        writes.extend(
            objects
                .services
                .into_iter()
                .map(|x| Write::CreateService(Box::new(x))),
        );
        writes.extend(
            objects
                .config_maps
                .into_iter()
                .map(|x| Write::CreateConfigMap(Box::new(x))),
        );
        writes.extend(
            objects
                .secrets
                .into_iter()
                .map(|x| Write::CreateSecret(Box::new(x))),
        );
    }
    let admitted = o
        .podgroup
        .filter(|pg| pg.metadata.name.as_deref() == Some(podgroup_name(job).as_str()))
        .and_then(|pg| pg.status.as_ref())
        .and_then(|s| s.phase)
        .is_some_and(|p| p != PodGroupPhase::Pending);
    let job_name = job.metadata.name.clone().unwrap_or_default();
    let by_name: BTreeMap<&str, &JobPod> = pods.iter().map(|p| (p.name.as_str(), p)).collect();
    let mut wanted = BTreeSet::new();
    for (i, t) in plan.tasks.iter().enumerate() {
        let ready = depends_ready(job, plan, i, &by_name);
        for index in 0..t.replicas {
            let name = pod_name(&job_name, &t.name, index);
            match by_name.get(name.as_str()) {
                Some(p) => {
                    wanted.insert(name);
                    if p.terminating {
                        counts.terminating += 1;
                    } else if p.out_of_sync {
                        writes.push(Write::DeletePod(p.name.clone()));
                        counts.terminating += 1;
                    } else {
                        counts.add(p);
                    }
                }
                None if admitted && ready => {
                    if let Some(new) = pod(job, plan, i, index) {
                        writes.push(Write::CreatePod(Box::new(new)));
                        counts.add(&JobPod::pending(&name, &t.name, index));
                    }
                }
                None => {}
            }
        }
    }
    for p in pods.iter().filter(|p| !wanted.contains(&p.name)) {
        if !p.terminating {
            writes.push(Write::DeletePod(p.name.clone()));
        }
        counts.terminating += 1;
    }
}

/// Whether task `i` may start: every task it depends on (any one, with `iteration: any` and
/// more than one) has its minimum of pods running and ready, or succeeded.
fn depends_ready(job: &Job, plan: &GangPlan, i: usize, pods: &BTreeMap<&str, &JobPod>) -> bool {
    let Some(deps) = job.spec.tasks.get(i).and_then(|t| t.depends_on.as_ref()) else {
        return true;
    };
    let job_name = job.metadata.name.clone().unwrap_or_default();
    let ready = |name: &String| {
        let Some(t) = plan.tasks.iter().find(|t| &t.name == name) else {
            return false;
        };
        let up = (0..t.replicas)
            .filter_map(|k| pods.get(pod_name(&job_name, &t.name, k).as_str()))
            .filter(|p| !p.terminating && (p.ready || p.phase == Phase::Succeeded))
            .count();
        up as u32 >= t.min_available
    };
    if deps.name.len() > 1 && deps.iteration == Some(Iteration::Any) {
        deps.name.iter().any(ready)
    } else {
        deps.name.iter().all(ready)
    }
}

/// The pods a RestartTask, RestartPod or RestartPartition takes: the trigger's task, its pod,
/// or the pods of its pod's partition.
fn targets<'a>(
    job: &Job,
    plan: &GangPlan,
    action: Action,
    trigger: Option<&Trigger>,
    pods: &'a [JobPod],
) -> BTreeSet<&'a str> {
    let Some(t) = trigger else {
        return BTreeSet::new();
    };
    let task = t.task.as_deref();
    let of_task = pods.iter().filter(|p| Some(p.task.as_str()) == task);
    match action {
        Action::RestartTask => of_task.map(|p| p.name.as_str()).collect(),
        Action::RestartPartition => {
            let size = plan
                .tasks
                .iter()
                .position(|p| Some(p.name.as_str()) == task)
                .and_then(|i| job.spec.tasks.get(i))
                .and_then(|s| s.partition_policy.as_ref())
                .map(|p| p.partition_size)
                .filter(|s| *s > 0)
                .unwrap_or(1) as u32;
            let at = pods
                .iter()
                .find(|p| Some(&p.name) == t.pod.as_ref())
                .and_then(|p| p.index)
                .map(|i| i / size);
            of_task
                .filter(|p| at.is_some() && p.index.map(|i| i / size) == at)
                .map(|p| p.name.as_str())
                .collect()
        }
        _ => pods
            .iter()
            .filter(|p| Some(&p.name) == t.pod.as_ref())
            .map(|p| p.name.as_str())
            .collect(),
    }
}

/// How long the job ran: from its creation to its last transition, in Go's duration syntax.
fn running_duration(job: &Job, status: &JobStatus) -> Option<String> {
    let created = job.metadata.creation_timestamp.as_ref()?.0.as_millisecond();
    let last = status
        .state
        .last_transition_time
        .as_ref()?
        .0
        .as_millisecond();
    let ms = (last - created).max(0);
    Some(Duration::from_millis(ms).go_string())
}

/// `ttlSecondsAfterFinished`: a finished Job is deleted that long after it finished.
fn ttl(job: &Job, status: &JobStatus, now_ms: i64, out: &mut Outcome) {
    let Some(ttl) = job.spec.ttl_seconds_after_finished else {
        return;
    };
    if !finished(status.state.phase) {
        return;
    }
    let since = status
        .state
        .last_transition_time
        .as_ref()
        .map_or(now_ms, |t| t.0.as_millisecond());
    let due = since.saturating_add(i64::from(ttl.max(0)) * 1000);
    if due <= now_ms {
        out.writes.push(Write::DeleteJob);
    } else {
        out.wake_ms = Some(out.wake_ms.map_or(due, |w| w.min(due)));
    }
}

/// A Kubernetes time from ms since the epoch (whole seconds, as the API server keeps them).
fn time(ms: i64) -> Time {
    Time(Timestamp::from_second(ms.div_euclid(1000)).unwrap_or(Timestamp::UNIX_EPOCH))
}
