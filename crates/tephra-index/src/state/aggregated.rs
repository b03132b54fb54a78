//! Each ResourceBinding's status: per cluster it places the job in (`aggregatedStatus`),
//! whether the pods meant for it are there (`applied`) and how they run (`health`: Healthy when
//! all of them run or have finished well, Unhealthy when one failed, Unknown while they start);
//! and Karmada's two conditions, `Scheduled` (it names its clusters) and `FullyApplied` (every
//! cluster has all its pods), which `kubectl get resourcebindings` shows as columns. Looked at
//! for the jobs whose pods or binding changed, written when it changed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use tephra_api::work::{AggregatedStatusItem, ResourceHealth};
use tephra_scheduler::model::TaskStatus;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use tephra_api::ResourceBinding;
use tephra_scheduler::cache::World;
use tephra_scheduler::model::PodSpec;

use crate::writes::Write;

/// What was last written for a binding: its items and its conditions' (type, status, reason,
/// message).
type Written = (Vec<AggregatedStatusItem>, Vec<[String; 4]>);

/// The bindings' statuses: which jobs to look at again, and what was last written for each.
#[derive(Default)]
pub(super) struct Aggregation {
    /// Jobs whose pods or binding changed since their status was last looked at.
    touched: HashSet<String>,
    /// The status last written per job.
    written: HashMap<String, Written>,
}

/// The pods of `job` (`namespace/podgroup`) as the cache has them.
fn job_pods<'w>(world: &'w World, job: &str) -> Vec<&'w PodSpec> {
    world
        .job_id(job)
        .and_then(|id| world.jobs.get(id))
        .map(|j| {
            j.tasks
                .iter()
                .filter_map(|t| world.tasks.get(*t))
                .map(|t| &t.spec)
                .collect()
        })
        .unwrap_or_default()
}

impl Aggregation {
    /// The pods or binding of `job` changed: its status is looked at again.
    pub(super) fn touch(&mut self, job: String) {
        self.touched.insert(job);
    }

    /// The status writes due for the jobs touched since the last call, stamped `now` where a
    /// condition changes.
    pub(super) fn statuses(
        &mut self,
        world: &World,
        bindings: &HashMap<String, Arc<ResourceBinding>>,
        now: &Time,
    ) -> Vec<Write> {
        let touched = std::mem::take(&mut self.touched);
        let mut out = Vec::new();
        for job in touched {
            let Some(rb) = bindings.get(&job) else {
                continue;
            };
            let items = aggregate_binding(world, &job, rb);
            let stored_conditions = rb
                .status
                .as_ref()
                .map(|s| s.conditions.clone())
                .unwrap_or_default();
            let conditions = conditions(
                !rb.spec.clusters.is_empty(),
                &items,
                &stored_conditions,
                now,
            );
            let key = |cs: &[Condition]| -> Vec<[String; 4]> {
                cs.iter()
                    .map(|c| {
                        [
                            c.type_.clone(),
                            c.status.clone(),
                            c.reason.clone(),
                            c.message.clone(),
                        ]
                    })
                    .collect()
            };
            let want: Written = (items.clone(), key(&conditions));
            let stored: Written = (
                rb.status
                    .as_ref()
                    .map(|s| s.aggregated_status.clone())
                    .unwrap_or_default(),
                key(&stored_conditions),
            );
            let last = self.written.get(&job).unwrap_or(&stored);
            if *last == want {
                continue;
            }
            self.written.insert(job.clone(), want);
            let (namespace, name) = job.split_once('/').unwrap_or(("default", &job));
            out.push(Write::BindingStatus {
                namespace: namespace.to_string(),
                name: name.to_string(),
                status: serde_json::json!({"aggregatedStatus": items, "conditions": conditions}),
            });
        }
        out
    }
}

/// Each target cluster's item of `job`'s binding `rb`.
fn aggregate_binding(world: &World, job: &str, rb: &ResourceBinding) -> Vec<AggregatedStatusItem> {
    let tasks = job_pods(world, job);
    rb.spec
        .clusters
        .iter()
        .map(|target| {
            let want: i32 = target.tasks.values().sum();
            let here: Vec<TaskStatus> = tasks
                .iter()
                .filter(|t| t.placement.as_ref().is_some_and(|(c, _)| *c == target.name))
                .map(|t| t.status)
                .collect();
            let placed = i32::try_from(here.len()).unwrap_or(i32::MAX);
            let fine = here
                .iter()
                .filter(|s| matches!(s, TaskStatus::Running | TaskStatus::Succeeded))
                .count();
            let health = if here.contains(&TaskStatus::Failed) {
                ResourceHealth::Unhealthy
            } else if want > 0 && i32::try_from(fine).unwrap_or(i32::MAX) >= want {
                ResourceHealth::Healthy
            } else {
                ResourceHealth::Unknown
            };
            AggregatedStatusItem {
                cluster_name: target.name.clone(),
                applied: placed >= want,
                applied_message: (placed < want)
                    .then(|| format!("{placed} of {want} pod(s) placed")),
                health: Some(health),
            }
        })
        .collect()
}

/// `Scheduled` and `FullyApplied` for a binding with these items; a condition whose status did
/// not change keeps its time.
fn conditions(
    scheduled: bool,
    items: &[AggregatedStatusItem],
    stored: &[Condition],
    now: &Time,
) -> Vec<Condition> {
    let short: Vec<String> = items
        .iter()
        .filter(|i| !i.applied)
        .map(|i| {
            format!(
                "{}: {}",
                i.cluster_name,
                i.applied_message.as_deref().unwrap_or("not applied")
            )
        })
        .collect();
    let applied = !items.is_empty() && short.is_empty();
    let make = |type_: &str, ok: bool, reason: &str, message: String| {
        let status = if ok { "True" } else { "False" };
        let since = stored
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message,
            last_transition_time: since,
            observed_generation: None,
        }
    };
    vec![
        if scheduled {
            make(
                "Scheduled",
                true,
                "Success",
                "placed in its target clusters".into(),
            )
        } else {
            make(
                "Scheduled",
                false,
                "NoClusterFit",
                "no target cluster".into(),
            )
        },
        if applied {
            make(
                "FullyApplied",
                true,
                "FullyAppliedSuccess",
                "every target cluster has all its pods".into(),
            )
        } else {
            make(
                "FullyApplied",
                false,
                "FullyAppliedFailed",
                if short.is_empty() {
                    "no target cluster".into()
                } else {
                    short.join("; ")
                },
            )
        },
    ]
}
