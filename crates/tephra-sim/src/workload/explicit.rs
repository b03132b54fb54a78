//! The scenario's explicit jobs (`workload.jobs`).

use std::collections::BTreeMap;

use super::job::{JobSource, SimJob, SimTask, policy, request, topology};
use crate::scenario::JobDef;

/// Jobs known up front, in arrival order.
pub struct Explicit {
    jobs: std::vec::IntoIter<SimJob>,
    head: Option<SimJob>,
}

impl Explicit {
    /// Jobs in any order; they come out by submission time.
    pub fn new(mut jobs: Vec<SimJob>) -> Self {
        jobs.sort_by_key(|j| j.submit_ms);
        Self {
            jobs: jobs.into_iter(),
            head: None,
        }
    }
}

impl JobSource for Explicit {
    fn peek(&mut self) -> Option<i64> {
        if self.head.is_none() {
            self.head = self.jobs.next();
        }
        self.head.as_ref().map(|j| j.submit_ms)
    }
    fn next_job(&mut self) -> Option<SimJob> {
        self.peek();
        self.head.take()
    }
}

/// The scenario's explicit jobs.
pub fn explicit(defs: &[JobDef], classes: &BTreeMap<String, i32>) -> Explicit {
    let jobs: Vec<SimJob> = defs
        .iter()
        .map(|d| SimJob {
            namespace: d.namespace.clone().unwrap_or_else(|| "default".into()),
            name: d.name.clone(),
            queue: d.queue.clone().unwrap_or_else(|| "default".into()),
            submit_ms: d.submit_at.0,
            priority: d
                .priority
                .or_else(|| {
                    d.priority_class
                        .as_ref()
                        .and_then(|c| classes.get(c).copied())
                })
                .unwrap_or(0),
            min_member: d.min_available,
            tasks: d
                .tasks
                .iter()
                .map(|t| SimTask {
                    role: t.name.clone(),
                    replicas: t.replicas,
                    min: t.min_available,
                    request: request(&t.resources).into(),
                    duration_ms: t.duration.0,
                    node_selector: t.node_selector.clone(),
                    affinity: Vec::new(),
                    tolerations: Vec::new(),
                })
                .collect(),
            policy: policy(d.policy.as_ref()),
            topology: topology(d.network_topology.as_ref()),
            plan: None,
            volcano: None,
        })
        .collect();
    Explicit::new(jobs)
}
