//! Pods that name a PodGroup that does not exist (`scheduling.k8s.io/group-name`): they are
//! not placed (their gang is unknown), and without a word they would wait for ever. Once such a
//! pod has waited [`GRACE_MS`] (an operator creates the PodGroup and its pods together, in
//! either order), it gets a `PodScheduled` False condition and one Warning Event naming the
//! annotation and the missing PodGroup; once the PodGroup appears it is scheduled as usual.

use std::collections::HashMap;

use tephra_scheduler::cache::World;
use tephra_scheduler::model::TaskStatus;

use crate::writes::{Involved, Write};

/// How long a pod may name a missing PodGroup before it is told.
pub const GRACE_MS: i64 = 5_000;

/// The pods waiting for their PodGroup: pod key → since when (ms), and whether told.
#[derive(Debug, Default)]
pub(super) struct Strays(HashMap<String, (i64, bool)>);

impl Strays {
    /// The writes that tell the pods of `world` that have waited [`GRACE_MS`] for a PodGroup
    /// that does not exist, once each.
    pub(super) fn writes(&mut self, world: &World, now_ms: i64) -> Vec<Write> {
        let mut waiting: Vec<(String, String, String, String)> = Vec::new();
        for (_, job) in world.jobs.iter() {
            if job.group.is_some() || job.implicit {
                continue;
            }
            for t in job.tasks.iter().filter_map(|t| world.tasks.get(*t)) {
                let s = &t.spec;
                if s.status != TaskStatus::Pending {
                    continue;
                }
                let Some(group) = &s.group else { continue };
                let key = format!("{}/{}", s.namespace, s.name);
                waiting.push((key, s.namespace.clone(), s.name.clone(), group.clone()));
            }
        }
        let strays = &mut self.0;
        let now_waiting: std::collections::HashSet<&str> =
            waiting.iter().map(|(k, ..)| k.as_str()).collect();
        strays.retain(|k, _| now_waiting.contains(k.as_str()));
        let mut out = Vec::new();
        for (key, namespace, name, group) in waiting {
            let (since, told) = strays.entry(key).or_insert((now_ms, false));
            if *told || now_ms.saturating_sub(*since) < GRACE_MS {
                continue;
            }
            *told = true;
            let message = format!(
                "metadata.annotations[scheduling.k8s.io/group-name]: PodGroup {group:?} not found in namespace {namespace:?}; the pod waits until it exists"
            );
            tracing::warn!(pod = %format!("{namespace}/{name}"), podgroup = %group, "pod names a PodGroup that does not exist");
            out.push(Write::DeclaredStatus {
                namespace: namespace.clone(),
                name: name.clone(),
                status: serde_json::json!({"conditions": [{"type": "PodScheduled",
                    "status": "False", "reason": "PodGroupNotFound", "message": message}]}),
            });
            out.push(Write::Event {
                cluster: crate::endpoint::CONTROL_PLANE.into(),
                namespace,
                kind: Involved::Pod,
                group: name,
                uid: None,
                reason: "PodGroupNotFound".into(),
                message,
                warning: true,
            });
        }
        out
    }
}
