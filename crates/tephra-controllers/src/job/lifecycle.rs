//! Volcano's job state machine. For the phase a Job is in and the action to take, [`step`] says
//! what happens to its pods (keep them in sync, kill them all, or kill a task's or one pod's)
//! and how the phase moves once the pods are counted ([`Next::apply`]).
//!
//! The table is Volcano's (`pkg/controllers/job/state`): Pending and Running take every action;
//! Restarting goes back to Pending once enough old pods are gone, or to Failed at `maxRetry`;
//! Aborting, Completing and Terminating drain (no pod pending, running or terminating) into
//! Aborted, Completed and Terminated; Aborted resumes; the finished phases only clean up.

use tephra_api::batch::{Action, JobPhase};

use super::observe::Counts;

/// What happens to the Job's pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pods {
    /// Create what is missing (once the PodGroup is admitted), delete what is out of place.
    Sync,
    /// Delete every pod; with `keep_finished`, Succeeded and Failed pods stay (as they do at
    /// the last retry too). The PodGroup goes with them.
    KillAll {
        /// Keep finished pods.
        keep_finished: bool,
    },
    /// Delete the pods of one target (a task, a pod or a partition).
    KillTarget,
}

/// How the phase moves once the pods are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// It stays.
    Stay,
    /// It enters `phase`; with `retry`, the retry count goes up by one.
    Enter {
        /// The new phase.
        phase: JobPhase,
        /// Whether this is a retry.
        retry: bool,
    },
    /// Pending: Running once minAvailable pods run or ran.
    Pending,
    /// Running: Completed or Failed once every pod finished, per minSuccess and minAvailable.
    Running,
    /// Restarting: Failed at maxRetry, else Pending once enough old pods are gone.
    Restarting,
    /// Draining: `into` once no pod is pending, running or terminating.
    Drain {
        /// The phase the drain ends in.
        into: JobPhase,
    },
}

/// One step of the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// What happens to the pods.
    pub pods: Pods,
    /// How the phase moves.
    pub next: Next,
}

/// The facts of the Job's spec that phase changes read.
#[derive(Clone, Debug, PartialEq)]
pub struct Facts<'a> {
    /// Replicas per task: (task, replicas, the task's `minAvailable` if set).
    pub tasks: &'a [(String, i32, Option<i32>)],
    /// `spec.minAvailable` in force (Volcano's default: the tasks' minimums summed).
    pub min_available: i32,
    /// `spec.minSuccess`.
    pub min_success: Option<i32>,
    /// `spec.maxRetry`.
    pub max_retry: i32,
}

fn step_of(pods: Pods, next: Next) -> Step {
    Step { pods, next }
}

fn kill(keep_finished: bool, next: Next) -> Step {
    step_of(Pods::KillAll { keep_finished }, next)
}

fn enter(phase: JobPhase, retry: bool) -> Next {
    Next::Enter { phase, retry }
}

/// The step for `action` in `phase` (`None`: a Job the controller has not seen yet, which is
/// Pending).
pub fn step(phase: Option<JobPhase>, action: Action) -> Step {
    use Action as A;
    use JobPhase as P;
    let restart_target = matches!(action, A::RestartTask | A::RestartPod | A::RestartPartition);
    match phase.unwrap_or(P::Pending) {
        p @ (P::Pending | P::Running) => match action {
            A::RestartJob => kill(false, enter(P::Restarting, true)),
            _ if restart_target => step_of(Pods::KillTarget, enter(P::Restarting, true)),
            A::AbortJob => kill(true, enter(P::Aborting, false)),
            A::CompleteJob => kill(true, enter(P::Completing, false)),
            A::TerminateJob => kill(true, enter(P::Terminating, false)),
            _ if p == P::Pending => step_of(Pods::Sync, Next::Pending),
            _ => step_of(Pods::Sync, Next::Running),
        },
        P::Restarting => match action {
            A::SyncJob => step_of(Pods::Sync, Next::Restarting),
            _ if restart_target => step_of(Pods::KillTarget, Next::Restarting),
            _ => kill(false, Next::Restarting),
        },
        P::Aborting => match action {
            A::ResumeJob => kill(true, enter(P::Restarting, true)),
            _ => kill(true, Next::Drain { into: P::Aborted }),
        },
        P::Aborted => match action {
            A::ResumeJob => kill(true, enter(P::Restarting, true)),
            _ => kill(true, Next::Stay),
        },
        P::Completing => kill(true, Next::Drain { into: P::Completed }),
        P::Terminating => kill(
            true,
            Next::Drain {
                into: P::Terminated,
            },
        ),
        P::Completed | P::Failed | P::Terminated => kill(true, Next::Stay),
    }
}

impl Next {
    /// The phase after this step, given the pods as counted after it, the retry count before
    /// it, and the phase before it. Returns the new phase and retry count.
    pub fn apply(
        self,
        phase: JobPhase,
        retries: i32,
        counts: &Counts,
        facts: &Facts<'_>,
    ) -> (JobPhase, i32) {
        let total: i32 = facts.tasks.iter().map(|t| t.1).sum();
        match self {
            Next::Stay => (phase, retries),
            Next::Enter { phase, retry } => (phase, retries + i32::from(retry)),
            Next::Pending => {
                let started = counts.running + counts.succeeded + counts.failed;
                if facts.min_available <= started {
                    (JobPhase::Running, retries)
                } else {
                    (JobPhase::Pending, retries)
                }
            }
            Next::Running => (running(counts, facts, total), retries),
            Next::Restarting => {
                if retries >= facts.max_retry {
                    (JobPhase::Failed, retries)
                } else if total - counts.terminating >= facts.min_available {
                    (JobPhase::Pending, retries)
                } else {
                    (JobPhase::Restarting, retries)
                }
            }
            Next::Drain { into } => {
                if counts.terminating == 0 && counts.pending == 0 && counts.running == 0 {
                    (into, retries)
                } else {
                    (phase, retries)
                }
            }
        }
    }
}

/// Running's rule: minSuccess reached completes the job; once every pod finished, a task short
/// of its own minimum, or minSuccess missed, fails it, and minAvailable succeeded completes it;
/// too many pods pending again sends it back to Pending.
fn running(counts: &Counts, facts: &Facts<'_>, total: i32) -> JobPhase {
    if total == 0 {
        return JobPhase::Running;
    }
    if facts.min_success.is_some_and(|m| counts.succeeded >= m) {
        return JobPhase::Completed;
    }
    if counts.succeeded + counts.failed == total {
        let task_minimums: i32 = facts.tasks.iter().map(|t| t.2.unwrap_or(t.1)).sum();
        if facts.min_available >= task_minimums {
            for (task, _, min) in facts.tasks {
                if let Some(min) = min
                    && counts.tasks.contains_key(task)
                    && counts.succeeded_in(task) < *min
                {
                    return JobPhase::Failed;
                }
            }
        }
        return match facts.min_success {
            Some(m) if counts.succeeded < m => JobPhase::Failed,
            _ if counts.succeeded >= facts.min_available => JobPhase::Completed,
            _ => JobPhase::Failed,
        };
    }
    if counts.pending > total - facts.min_available {
        return JobPhase::Pending;
    }
    JobPhase::Running
}

/// Whether a phase is final for `ttlSecondsAfterFinished` (Volcano's garbage collector).
pub fn finished(phase: Option<JobPhase>) -> bool {
    matches!(
        phase,
        Some(JobPhase::Completed | JobPhase::Failed | JobPhase::Terminated)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(tasks: &[(String, i32, Option<i32>)], min: i32) -> Facts<'_> {
        Facts {
            tasks,
            min_available: min,
            min_success: None,
            max_retry: 3,
        }
    }

    #[test]
    fn restart_from_running_kills_everything_and_counts_a_retry() {
        let s = step(Some(JobPhase::Running), Action::RestartJob);
        assert_eq!(
            s.pods,
            Pods::KillAll {
                keep_finished: false
            }
        );
        let tasks = [("w".to_string(), 2, None)];
        let (p, r) = s
            .next
            .apply(JobPhase::Running, 0, &Counts::default(), &facts(&tasks, 2));
        assert_eq!((p, r), (JobPhase::Restarting, 1));
    }

    #[test]
    fn restarting_waits_for_old_pods_then_pends_or_fails_at_max_retry() {
        let tasks = [("w".to_string(), 2, None)];
        let f = facts(&tasks, 2);
        let mut c = Counts {
            terminating: 1,
            ..Counts::default()
        };
        let n = step(Some(JobPhase::Restarting), Action::SyncJob).next;
        assert_eq!(
            n.apply(JobPhase::Restarting, 1, &c, &f).0,
            JobPhase::Restarting
        );
        c.terminating = 0;
        assert_eq!(
            n.apply(JobPhase::Restarting, 1, &c, &f).0,
            JobPhase::Pending
        );
        assert_eq!(n.apply(JobPhase::Restarting, 3, &c, &f).0, JobPhase::Failed);
    }

    #[test]
    fn running_completes_on_min_available_succeeded_and_fails_short_of_a_task_minimum() {
        let tasks = [
            ("ps".to_string(), 1, Some(1)),
            ("worker".to_string(), 2, None),
        ];
        let f = facts(&tasks, 3);
        let mut c = Counts::default();
        for (task, phase) in [
            ("ps", "Succeeded"),
            ("worker", "Succeeded"),
            ("worker", "Succeeded"),
        ] {
            *c.tasks
                .entry(task.into())
                .or_default()
                .phase
                .entry(phase.into())
                .or_default() += 1;
        }
        c.succeeded = 3;
        let n = step(Some(JobPhase::Running), Action::SyncJob).next;
        assert_eq!(n.apply(JobPhase::Running, 0, &c, &f).0, JobPhase::Completed);
        c.tasks.insert("ps".into(), Default::default());
        *c.tasks
            .entry("ps".into())
            .or_default()
            .phase
            .entry("Failed".into())
            .or_default() += 1;
        c.succeeded = 2;
        c.failed = 1;
        assert_eq!(n.apply(JobPhase::Running, 0, &c, &f).0, JobPhase::Failed);
    }

    #[test]
    fn min_success_completes_before_every_pod_is_done() {
        let tasks = [("w".to_string(), 4, None)];
        let mut f = facts(&tasks, 4);
        f.min_success = Some(2);
        let c = Counts {
            succeeded: 2,
            running: 2,
            ..Counts::default()
        };
        let n = step(Some(JobPhase::Running), Action::SyncJob).next;
        assert_eq!(n.apply(JobPhase::Running, 0, &c, &f).0, JobPhase::Completed);
    }

    #[test]
    fn aborting_drains_into_aborted_and_resume_restarts() {
        let tasks = [("w".to_string(), 1, None)];
        let f = facts(&tasks, 1);
        let n = step(Some(JobPhase::Aborting), Action::SyncJob).next;
        let busy = Counts {
            terminating: 1,
            ..Counts::default()
        };
        assert_eq!(
            n.apply(JobPhase::Aborting, 0, &busy, &f).0,
            JobPhase::Aborting
        );
        assert_eq!(
            n.apply(JobPhase::Aborting, 0, &Counts::default(), &f).0,
            JobPhase::Aborted
        );
        let r = step(Some(JobPhase::Aborted), Action::ResumeJob);
        assert_eq!(
            r.next.apply(JobPhase::Aborted, 0, &Counts::default(), &f),
            (JobPhase::Restarting, 1)
        );
    }

    #[test]
    fn finished_phases_ignore_actions() {
        for p in [JobPhase::Completed, JobPhase::Failed, JobPhase::Terminated] {
            let s = step(Some(p), Action::RestartJob);
            assert_eq!(s.next, Next::Stay);
            assert!(finished(Some(p)));
        }
    }
}
