//! Each ResourceBinding's `status.aggregatedStatus`: per cluster it places the job in, whether
//! the pods meant for it are there (`applied`) and how they run (`health`: Healthy when all of
//! them run or have finished well, Unhealthy when one failed, Unknown while they start).
//! Looked at for the jobs whose pods or binding changed, written when it changed.

use tephra_api::work::{AggregatedStatusItem, ResourceHealth};
use tephra_scheduler::model::TaskStatus;

use super::State;
use crate::writes::Write;

impl State {
    /// The aggregated-status writes due for the jobs touched since the last call.
    pub fn aggregated_statuses(&mut self) -> Vec<Write> {
        let touched = std::mem::take(&mut self.touched);
        let mut out = Vec::new();
        for job in touched {
            let Some(rb) = self.bindings.get(&job) else {
                continue;
            };
            let items = self.aggregate_binding(&job, rb);
            let stored = rb
                .status
                .as_ref()
                .map(|s| s.aggregated_status.clone())
                .unwrap_or_default();
            let last = self.aggregated_written.get(&job).unwrap_or(&stored);
            if *last == items {
                continue;
            }
            self.aggregated_written.insert(job.clone(), items.clone());
            let (namespace, name) = job.split_once('/').unwrap_or(("default", &job));
            out.push(Write::BindingStatus {
                namespace: namespace.to_string(),
                name: name.to_string(),
                status: serde_json::json!({"aggregatedStatus": items}),
            });
        }
        out
    }

    fn aggregate_binding(
        &self,
        job: &str,
        rb: &tephra_api::ResourceBinding,
    ) -> Vec<AggregatedStatusItem> {
        let tasks = self.job_pods(job);
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
}
