//! Lifecycle policies: which events a Job's pods show, and which action the Job's policies
//! (the task's first, then the job's) take for them, as Volcano's `applyPolicies` matches them.
//!
//! Events are read from the pods as they are, not from a stream of changes, so that a restart
//! of the controller loses none: a pod of the current job version that Failed is `PodFailed`
//! (with its exit code); one being deleted by someone else is `PodEvicted`; one still Pending
//! is `PodPending` (which only a policy with a `timeout` reacts to, once it has waited that
//! long); a task whose replicas all Succeeded is `TaskCompleted`; a task whose live pods
//! restarted `maxRetry` times is `TaskFailed`; a PodGroup in phase Unknown is `Unknown`. Pods
//! of older versions, and pods the controller deletes itself, speak for nothing.

use tephra_api::Job;
use tephra_api::batch::{Action, Event};
use tephra_api::batch::{LifecyclePolicy, TaskSpec};
use tephra_scheduler::duration::Duration;

use super::observe::{JobPod, Phase};

/// An event one of the Job's pods (or its PodGroup) shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trigger {
    /// The event.
    pub event: Event,
    /// The task it concerns (none for `Unknown`).
    pub task: Option<String>,
    /// The pod it concerns.
    pub pod: Option<String>,
    /// The exit code, for a failed pod.
    pub exit_code: Option<i32>,
    /// Since when the condition holds (ms since the epoch), for a policy's `timeout`.
    pub since_ms: Option<i64>,
}

impl Trigger {
    /// A short account, for events and logs.
    pub fn describe(&self) -> String {
        let mut s = format!("{:?}", self.event);
        match (&self.task, &self.pod) {
            (Some(t), _) if matches!(self.event, Event::TaskCompleted | Event::TaskFailed) => {
                s.push_str(&format!(" on task {t}"))
            }
            (_, Some(p)) => s.push_str(&format!(" on pod {p}")),
            _ => {}
        }
        if let Some(c) = self.exit_code {
            s.push_str(&format!(" (exit code {c})"));
        }
        s
    }
}

/// What the policies decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdict {
    /// The action to take now and the event that asked for it.
    pub act: Option<(Action, Trigger)>,
    /// When a delayed policy (`timeout`) falls due, if one is waiting (ms since the epoch).
    pub wake_ms: Option<i64>,
}

/// The events the Job's pods show now, in a stable order (pods by name, then tasks).
pub fn triggers(
    job: &Job,
    tasks: &[(String, i32, i32)],
    pods: &[JobPod],
    podgroup_unknown: bool,
) -> Vec<Trigger> {
    let version = job.status.as_ref().map_or(0, |s| s.version);
    let mut out = Vec::new();
    let mut speaking: Vec<&JobPod> = pods.iter().filter(|p| p.speaks_for(version)).collect();
    speaking.sort_by(|a, b| a.name.cmp(&b.name));
    let one = |event, p: &JobPod, exit_code, since_ms| Trigger {
        event,
        task: Some(p.task.clone()),
        pod: Some(p.name.clone()),
        exit_code,
        since_ms,
    };
    for p in &speaking {
        if p.terminating {
            out.push(one(Event::PodEvicted, p, None, None));
        } else if p.phase == Phase::Failed {
            out.push(one(Event::PodFailed, p, p.exit_code, p.finished_ms));
        } else if p.phase == Phase::Pending {
            out.push(one(Event::PodPending, p, None, p.created_ms));
        }
    }
    for (task, replicas, max_retry) in tasks {
        let of_task = || speaking.iter().filter(|p| &p.task == task);
        let succeeded = of_task()
            .filter(|p| !p.terminating && p.phase == Phase::Succeeded)
            .count();
        // A task's event names the pod that made it true last (for RestartPod).
        let task_trigger = |event, pod: Option<&&JobPod>| Trigger {
            event,
            task: Some(task.clone()),
            pod: pod.map(|p| p.name.clone()),
            exit_code: None,
            since_ms: None,
        };
        if *replicas > 0 && succeeded as i32 >= *replicas {
            let last = of_task().max_by_key(|p| (p.finished_ms, &p.name));
            out.push(task_trigger(Event::TaskCompleted, last));
        }
        let limit = if *max_retry == 0 { 3 } else { *max_retry };
        let restarts: i32 = of_task()
            .filter(|p| matches!(p.phase, Phase::Running | Phase::Pending))
            .map(|p| p.restarts)
            .sum();
        if *max_retry != -1 && *replicas > 0 && restarts >= limit {
            let worst = of_task().max_by_key(|p| (p.restarts, &p.name));
            out.push(task_trigger(Event::TaskFailed, worst));
        }
    }
    if podgroup_unknown {
        out.push(Trigger {
            event: Event::Unknown,
            task: None,
            pod: None,
            exit_code: None,
            since_ms: None,
        });
    }
    out
}

/// The first trigger a policy takes an action for, now; and when the next delayed one falls
/// due. A policy's `timeout` that does not parse counts as no timeout (admission refuses it).
pub fn decide(job: &Job, triggers: &[Trigger], now_ms: i64) -> Verdict {
    let mut verdict = Verdict::default();
    for t in triggers {
        let Some((action, timeout)) = matching(job, t) else {
            continue;
        };
        let due = match (timeout, t.since_ms) {
            (Some(d), Some(since)) => since.saturating_add(d),
            (Some(d), None) => now_ms.saturating_add(d),
            (None, _) => now_ms,
        };
        if due <= now_ms {
            verdict.act = Some((action, t.clone()));
            return verdict;
        }
        verdict.wake_ms = Some(verdict.wake_ms.map_or(due, |w| w.min(due)));
    }
    verdict
}

/// The action (and its timeout in ms) of the first policy that matches `t`: the task's
/// policies, then the job's.
fn matching(job: &Job, t: &Trigger) -> Option<(Action, Option<i64>)> {
    let task_policies = t
        .task
        .as_deref()
        .and_then(|name| task_of(job, name))
        .map(|ts| ts.policies.as_slice())
        .unwrap_or_default();
    task_policies
        .iter()
        .chain(&job.spec.policies)
        .find_map(|p| matches(p, t))
}

fn task_of<'a>(job: &'a Job, name: &str) -> Option<&'a TaskSpec> {
    job.spec
        .tasks
        .iter()
        .enumerate()
        .find(|(i, ts)| {
            ts.name
                .as_deref()
                .filter(|n| !n.is_empty())
                .map_or_else(|| format!("default{i}") == name, |n| n == name)
        })
        .map(|(_, ts)| ts)
}

fn matches(p: &LifecyclePolicy, t: &Trigger) -> Option<(Action, Option<i64>)> {
    let action = p.action?;
    let timeout = p
        .timeout
        .as_deref()
        .and_then(|s| Duration::parse(s).ok())
        .map(Duration::as_millis);
    for e in p.event.iter().chain(&p.events) {
        if *e == t.event || *e == Event::Any {
            // A PodPending policy without a timeout would fire for every new pod: Volcano
            // only lets a timed one match.
            if t.event != Event::PodPending || timeout.is_some() {
                return Some((action, timeout));
            }
        }
    }
    match (p.exit_code, t.exit_code) {
        (Some(want), Some(got)) if want == got => Some((action, timeout)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(policies: serde_json::Value, task_policies: serde_json::Value) -> Job {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"policies": policies, "tasks": [{"name": "w", "replicas": 2,
                "policies": task_policies,
                "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]},
            "status": {"version": 1}
        }))
        .expect("valid job")
    }

    fn pod(name: &str, phase: Phase, version: i32) -> JobPod {
        JobPod {
            version: Some(version),
            phase,
            created_ms: Some(0),
            ..JobPod::pending(name, "w", 0)
        }
    }

    const TASKS: &[(&str, i32, i32)] = &[("w", 2, 3)];

    fn tasks() -> Vec<(String, i32, i32)> {
        TASKS
            .iter()
            .map(|(n, r, m)| (n.to_string(), *r, *m))
            .collect()
    }

    #[test]
    fn the_task_policy_wins_over_the_job_policy() {
        let j = job(
            serde_json::json!([{"event": "PodFailed", "action": "RestartJob"}]),
            serde_json::json!([{"event": "PodFailed", "action": "RestartTask"}]),
        );
        let t = triggers(&j, &tasks(), &[pod("j-w-0", Phase::Failed, 1)], false);
        let v = decide(&j, &t, 0);
        assert_eq!(v.act.map(|a| a.0), Some(Action::RestartTask));
    }

    #[test]
    fn pods_of_an_older_version_or_marked_by_the_controller_speak_for_nothing() {
        let j = job(
            serde_json::json!([{"event": "PodFailed", "action": "RestartJob"}]),
            serde_json::json!([]),
        );
        let mut marked = pod("j-w-1", Phase::Failed, 1);
        marked.out_of_sync = true;
        let t = triggers(
            &j,
            &tasks(),
            &[pod("j-w-0", Phase::Failed, 0), marked],
            false,
        );
        assert_eq!(decide(&j, &t, 0).act, None);
    }

    #[test]
    fn an_exit_code_policy_matches_only_that_code() {
        let j = job(
            serde_json::json!([{"exitCode": 3, "action": "AbortJob"}]),
            serde_json::json!([]),
        );
        let mut p = pod("j-w-0", Phase::Failed, 1);
        p.exit_code = Some(1);
        let t = triggers(&j, &tasks(), std::slice::from_ref(&p), false);
        assert_eq!(decide(&j, &t, 0).act, None);
        p.exit_code = Some(3);
        let t = triggers(&j, &tasks(), &[p], false);
        assert_eq!(decide(&j, &t, 0).act.map(|a| a.0), Some(Action::AbortJob));
    }

    #[test]
    fn pod_pending_fires_only_after_its_timeout_and_says_when() {
        let j = job(
            serde_json::json!([{"event": "PodPending", "action": "RestartJob", "timeout": "1m"}]),
            serde_json::json!([]),
        );
        let t = triggers(&j, &tasks(), &[pod("j-w-0", Phase::Pending, 1)], false);
        let early = decide(&j, &t, 30_000);
        assert_eq!(early.act, None);
        assert_eq!(early.wake_ms, Some(60_000));
        assert_eq!(
            decide(&j, &t, 60_000).act.map(|a| a.0),
            Some(Action::RestartJob)
        );
        let untimed = job(
            serde_json::json!([{"event": "PodPending", "action": "RestartJob"}]),
            serde_json::json!([]),
        );
        assert_eq!(decide(&untimed, &t, 1 << 40).act, None);
    }

    #[test]
    fn task_completed_needs_every_replica_succeeded() {
        let j = job(
            serde_json::json!([{"event": "TaskCompleted", "action": "CompleteJob"}]),
            serde_json::json!([]),
        );
        let one = [
            pod("j-w-0", Phase::Succeeded, 1),
            pod("j-w-1", Phase::Running, 1),
        ];
        assert_eq!(
            decide(&j, &triggers(&j, &tasks(), &one, false), 0).act,
            None
        );
        let both = [
            pod("j-w-0", Phase::Succeeded, 1),
            pod("j-w-1", Phase::Succeeded, 1),
        ];
        let v = decide(&j, &triggers(&j, &tasks(), &both, false), 0);
        assert_eq!(v.act.map(|a| a.0), Some(Action::CompleteJob));
    }

    #[test]
    fn a_deleted_pod_is_evicted_and_any_matches_it() {
        let j = job(
            serde_json::json!([{"event": "*", "action": "RestartJob"}]),
            serde_json::json!([]),
        );
        let mut p = pod("j-w-0", Phase::Running, 1);
        p.terminating = true;
        let v = decide(&j, &triggers(&j, &tasks(), &[p], false), 0);
        let (action, t) = v.act.expect("an action");
        assert_eq!((action, t.event), (Action::RestartJob, Event::PodEvicted));
    }
}
