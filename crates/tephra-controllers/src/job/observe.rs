//! A Job's pods as its controller reads them: the task and index each was created for, the job
//! version that created it, its phase, and what lifecycle policies react to (exit code,
//! container restarts, eviction, how long it has been pending). Also the counts that go into
//! the Job's status, by phase and per task.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use tephra_api::batch::TaskState;
use tephra_api::well_known::{JOB_VERSION, OUT_OF_SYNC, TASK_INDEX, TASK_SPEC};

/// A pod's phase, as Kubernetes reports it (an absent or unknown phase counts as Pending).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Not yet running.
    Pending,
    /// Running.
    Running,
    /// Every container exited 0.
    Succeeded,
    /// A container failed.
    Failed,
    /// The kubelet lost track of it.
    Unknown,
}

impl Phase {
    /// Kubernetes' spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
            Phase::Unknown => "Unknown",
        }
    }

    fn read(s: Option<&str>) -> Phase {
        match s {
            Some("Running") => Phase::Running,
            Some("Succeeded") => Phase::Succeeded,
            Some("Failed") => Phase::Failed,
            Some("Unknown") => Phase::Unknown,
            _ => Phase::Pending,
        }
    }

    /// Whether the pod is done (Succeeded or Failed).
    pub fn finished(self) -> bool {
        matches!(self, Phase::Succeeded | Phase::Failed)
    }
}

/// One pod of a Job, as its controller sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct JobPod {
    /// Pod name (`<job>-<task>-<index>` for pods the controller made).
    pub name: String,
    /// The task (`volcano.sh/task-spec`).
    pub task: String,
    /// Index in its task (`volcano.sh/task-index`), if readable.
    pub index: Option<u32>,
    /// The Job version that created it (`volcano.sh/job-version`), if readable.
    pub version: Option<i32>,
    /// Phase.
    pub phase: Phase,
    /// Being deleted.
    pub terminating: bool,
    /// The controller itself is deleting it (`volcano.sh/controller-out-of-sync`).
    pub out_of_sync: bool,
    /// Exit code of the first container, once it terminated.
    pub exit_code: Option<i32>,
    /// Container restarts, init containers included.
    pub restarts: i32,
    /// Running with every container ready.
    pub ready: bool,
    /// Something other than the controller is taking it away: a `DisruptionTarget` condition
    /// (preemption, eviction, taint manager), or the kubelet evicted it.
    pub evicted: bool,
    /// Creation time, in ms since the epoch.
    pub created_ms: Option<i64>,
    /// When the first container terminated, in ms since the epoch.
    pub finished_ms: Option<i64>,
}

impl JobPod {
    /// A pod that is Pending and nothing more is known of (one the controller is creating).
    pub fn pending(name: &str, task: &str, index: u32) -> JobPod {
        JobPod {
            name: name.to_string(),
            task: task.to_string(),
            index: Some(index),
            version: None,
            phase: Phase::Pending,
            terminating: false,
            out_of_sync: false,
            exit_code: None,
            restarts: 0,
            ready: false,
            evicted: false,
            created_ms: None,
            finished_ms: None,
        }
    }

    /// Reads a pod. `None` for a pod that carries no task annotation: not one of a Job's.
    pub fn read(pod: &Pod) -> Option<JobPod> {
        let meta = &pod.metadata;
        let annotations = meta.annotations.as_ref()?;
        let task = annotations.get(TASK_SPEC)?.clone();
        let status = pod.status.as_ref();
        let containers = status.and_then(|s| s.container_statuses.as_deref());
        let init = status.and_then(|s| s.init_container_statuses.as_deref());
        let restarts = containers
            .into_iter()
            .chain(init)
            .flatten()
            .map(|c| c.restart_count)
            .sum();
        let terminated = containers
            .and_then(|c| c.first())
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.terminated.as_ref());
        let exit_code = terminated.map(|t| t.exit_code);
        let finished_ms = terminated
            .and_then(|t| t.finished_at.as_ref())
            .map(|t| t.0.as_millisecond());
        let phase = Phase::read(status.and_then(|s| s.phase.as_deref()));
        let ready = phase == Phase::Running && containers.is_none_or(|c| c.iter().all(|c| c.ready));
        let disrupted = status.and_then(|s| s.conditions.as_ref()).is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
        });
        let kubelet_evicted = status.and_then(|s| s.reason.as_deref()) == Some("Evicted");
        Some(JobPod {
            name: meta.name.clone().unwrap_or_default(),
            index: annotations.get(TASK_INDEX).and_then(|i| i.parse().ok()),
            version: annotations.get(JOB_VERSION).and_then(|v| v.parse().ok()),
            task,
            phase,
            terminating: meta.deletion_timestamp.is_some(),
            out_of_sync: annotations.contains_key(OUT_OF_SYNC),
            exit_code,
            restarts,
            ready,
            evicted: disrupted || kubelet_evicted,
            created_ms: meta
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_millisecond()),
            finished_ms,
        })
    }

    /// Whether this pod's failure or loss is an event for the policies of a Job at `version`:
    /// it was made for this version and the controller is not the one taking it away.
    pub fn speaks_for(&self, version: i32) -> bool {
        self.version == Some(version) && !self.out_of_sync
    }
}

/// Pod counts for the Job's status (Volcano's: a terminating pod counts only as terminating).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counts {
    /// Pending pods.
    pub pending: i32,
    /// Running pods.
    pub running: i32,
    /// Succeeded pods.
    pub succeeded: i32,
    /// Failed pods.
    pub failed: i32,
    /// Pods being deleted.
    pub terminating: i32,
    /// Pods in phase Unknown.
    pub unknown: i32,
    /// Per task, per phase.
    pub tasks: BTreeMap<String, TaskState>,
}

impl Counts {
    /// Counts one pod that is not being deleted.
    pub fn add(&mut self, pod: &JobPod) {
        let slot = match pod.phase {
            Phase::Pending => &mut self.pending,
            Phase::Running => &mut self.running,
            Phase::Succeeded => &mut self.succeeded,
            Phase::Failed => &mut self.failed,
            Phase::Unknown => &mut self.unknown,
        };
        *slot += 1;
        *self
            .tasks
            .entry(pod.task.clone())
            .or_default()
            .phase
            .entry(pod.phase.as_str().to_string())
            .or_default() += 1;
    }

    /// Succeeded pods of one task.
    pub fn succeeded_in(&self, task: &str) -> i32 {
        self.tasks
            .get(task)
            .and_then(|t| t.phase.get(Phase::Succeeded.as_str()))
            .copied()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).expect("valid pod")
    }

    #[test]
    fn reads_what_policies_react_to() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "j-worker-1", "annotations": {
                "volcano.sh/task-spec": "worker", "volcano.sh/task-index": "1",
                "volcano.sh/job-version": "2"}},
            "status": {"phase": "Failed",
                "conditions": [{"type": "DisruptionTarget", "status": "True"}],
                "containerStatuses": [{"name": "c", "image": "i", "ready": false,
                    "restartCount": 2, "state": {"terminated": {"exitCode": 137}}}]}
        }));
        let jp = JobPod::read(&p).expect("a job pod");
        assert_eq!(jp.task, "worker");
        assert_eq!(jp.index, Some(1));
        assert_eq!(jp.version, Some(2));
        assert_eq!(jp.phase, Phase::Failed);
        assert_eq!(jp.exit_code, Some(137));
        assert_eq!(jp.restarts, 2);
        assert!(jp.evicted);
        assert!(jp.speaks_for(2));
        assert!(!jp.speaks_for(3));
    }

    #[test]
    fn a_pod_without_a_task_is_not_a_job_pod() {
        let p = pod(serde_json::json!({"metadata": {"name": "x"}}));
        assert_eq!(JobPod::read(&p), None);
    }
}
