//! What a waiting pod says about itself, as Volcano's scheduler (and kube-scheduler) says it:
//! each pending pod of a job the session could not place gets a `PodScheduled` False
//! condition with reason `Unschedulable` and the job's reason as message, and one
//! `FailedScheduling` Warning Event, so that `kubectl describe pod` and `kubectl get events`
//! show why it waits. Written once per pod and reason: a pod is written again only when its
//! job's reason changes. Gated pods keep the API server's own `SchedulingGated`.

use std::collections::HashMap;

use tephra_scheduler::Decisions;
use tephra_scheduler::cache::World;
use tephra_scheduler::model::TaskStatus;

use crate::writes::{GroupSeen, Involved, Write};

/// The reason on the pod's condition, Volcano's and kube-scheduler's word.
pub const REASON: &str = "Unschedulable";
/// The reason of the pod's Event, kube-scheduler's word.
pub const EVENT_REASON: &str = "FailedScheduling";

/// The message last written on each pending pod, by pod key.
#[derive(Debug, Default)]
pub(super) struct Told {
    said: HashMap<String, String>,
    /// When the map is next swept of pods no longer pending.
    sweep_at: usize,
}

impl Told {
    /// The condition and Event writes for the pending pods of the jobs `d` explains.
    pub(super) fn writes(
        &mut self,
        world: &World,
        d: &Decisions,
        group: &dyn Fn(&str) -> Option<GroupSeen>,
        assumed: &dyn Fn(&str) -> bool,
    ) -> Vec<Write> {
        let mut out = Vec::new();
        for e in &d.events {
            let Some(seen) = group(&e.job) else { continue };
            let Some(job) = world.job_id(&e.job).and_then(|id| world.jobs.get(id)) else {
                continue;
            };
            for t in job.tasks.iter().filter_map(|t| world.tasks.get(*t)) {
                let s = &t.spec;
                if s.status != TaskStatus::Pending
                    || s.placement.is_some()
                    || s.shape.gated()
                    || assumed(&t.key)
                {
                    continue;
                }
                if self.said.get(&t.key) == Some(&e.message) {
                    continue;
                }
                self.said.insert(t.key.clone(), e.message.clone());
                out.push(Write::PodCondition {
                    cluster: seen.cluster.to_string(),
                    namespace: s.namespace.clone(),
                    name: s.name.clone(),
                    reason: REASON.into(),
                    message: e.message.clone(),
                });
                out.push(Write::Event {
                    cluster: seen.cluster.to_string(),
                    namespace: s.namespace.clone(),
                    kind: Involved::Pod,
                    group: s.name.clone(),
                    uid: None,
                    reason: EVENT_REASON.into(),
                    message: e.message.clone(),
                    warning: true,
                });
            }
        }
        if self.said.len() >= self.sweep_at {
            self.said.retain(|key, _| {
                world
                    .task_id(key)
                    .and_then(|id| world.tasks.get(id))
                    .is_some_and(|t| t.spec.status == TaskStatus::Pending)
            });
            self.sweep_at = (self.said.len() * 2).max(1024);
        }
        out
    }
}
