//! One line of `events.jsonl`: `t` (virtual seconds), `kind` (submit, bind, start, finish,
//! fail, evict, delete, job (a Volcano Job's phase, in `reason`), fault, recover) and, where they apply, `job`, `queue`, `task`, `pod`,
//! `cluster`, `node`, `resources`, `reason`, `min_available` and `splittable`.

use std::collections::BTreeMap;

use serde::Serialize;
use tephra_scheduler::decisions::Bind;

use crate::workload::Request;

/// One simulator event.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Record {
    /// Virtual time, seconds.
    pub t: f64,
    /// What happened.
    pub kind: &'static str,
    /// `namespace/name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Task (role).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Pod (`namespace/name`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// Cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The pod's requests, as Kubernetes quantities (written as an object, keys sorted).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "requests_by_name"
    )]
    pub resources: Option<Request>,
    /// Why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Gang size (submit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_available: Option<u32>,
    /// Whether the gang may be split across clusters (submit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub splittable: Option<bool>,
}

/// A request as a JSON object, keys in order and the last of a repeated key winning (as a
/// `BTreeMap` made from it would), without copying a string.
fn requests_by_name<S: serde::Serializer>(r: &Option<Request>, s: S) -> Result<S::Ok, S::Error> {
    let sorted: BTreeMap<&str, &str> = r
        .iter()
        .flat_map(|r| r.iter())
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    s.collect_map(sorted)
}

fn secs(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

fn role_of(pod: &str) -> Option<String> {
    // Pods are named <job>-<role>-<index>; the role is the second-to-last part.
    let mut parts = pod.rsplitn(3, '-');
    parts.next();
    parts.next().map(str::to_string)
}

impl Record {
    /// The quantity the pod requests of resource `name`, if any (the last one named, as in
    /// the object `events.jsonl` holds).
    pub fn resource(&self, name: &str) -> Option<&str> {
        let r = self.resources.as_ref()?;
        r.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A job was submitted.
    pub fn submit(t: i64, job: &str, queue: &str, min: u32, splittable: bool) -> Self {
        Self {
            t: secs(t),
            kind: "submit",
            job: Some(job.into()),
            queue: Some(queue.into()),
            min_available: Some(min),
            splittable: Some(splittable),
            ..Self::default()
        }
    }

    /// A pod was bound.
    pub fn placed(
        kind: &'static str,
        t: i64,
        job: &str,
        queue: &str,
        b: &Bind,
        req: &Request,
    ) -> Self {
        Self {
            t: secs(t),
            kind,
            job: Some(job.into()),
            queue: Some(queue.into()),
            task: Some(b.role.clone()),
            pod: Some(b.task.clone()),
            cluster: Some(b.cluster.clone()),
            node: Some(b.node.clone()),
            resources: Some(req.clone()),
            ..Self::default()
        }
    }

    /// A pod started, finished, failed or was evicted.
    #[allow(clippy::too_many_arguments)]
    pub fn pod(
        kind: &'static str,
        t: i64,
        job: &str,
        queue: &str,
        pod: &str,
        node: &(String, String),
        req: &Request,
        reason: Option<String>,
    ) -> Self {
        Self {
            t: secs(t),
            kind,
            job: Some(job.into()),
            queue: Some(queue.into()),
            task: role_of(pod),
            pod: Some(pod.into()),
            cluster: Some(node.0.clone()),
            node: Some(node.1.clone()),
            resources: Some(req.clone()),
            reason,
            ..Self::default()
        }
    }

    /// A Volcano Job entered `phase` (`kind: job`, the phase in `reason`).
    pub fn job_phase(t: i64, job: &str, queue: &str, phase: &str) -> Self {
        Self {
            t: secs(t),
            kind: "job",
            job: Some(job.into()),
            queue: Some(queue.into()),
            reason: Some(phase.into()),
            ..Self::default()
        }
    }

    /// A fault began (`fault`) or ended (`recover`).
    pub fn fault(
        kind: &'static str,
        t: i64,
        cluster: &str,
        node: Option<&String>,
        what: &str,
    ) -> Self {
        Self {
            t: secs(t),
            kind,
            cluster: Some(cluster.into()),
            node: node.cloned(),
            reason: Some(what.into()),
            ..Self::default()
        }
    }
}
