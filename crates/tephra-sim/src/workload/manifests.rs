//! Volcano Job manifests (`workload.manifests`).

use tephra_scheduler::model::JobPolicy;

use super::explicit::Explicit;
use super::job::{SimJob, SimTask};
use crate::scenario::{Dur, Scenario, ScenarioError};

/// Reads Volcano Job manifests: each is admitted as the API server would (schema and CEL
/// rules), turned into a gang by the job controller's own planning function, and submitted at
/// its `tephra.io/sim-submit-at` annotation, its pods running for `tephra.io/sim-duration`.
pub fn manifests(s: &Scenario) -> Result<Explicit, ScenarioError> {
    use tephra_api::well_known::{SIM_DURATION, SIM_SUBMIT_AT};
    let err = |message: String| ScenarioError::Invalid {
        path: s.source.clone(),
        message,
    };
    let admission =
        tephra_api::admission::Admission::new().map_err(|e| err(format!("CRDs: {e}")))?;
    let mut jobs = Vec::new();
    for (i, rel) in s.workload.manifests.iter().enumerate() {
        let path = s.resolve(rel);
        let at = |d: usize| format!("workload.manifests[{i}] ({rel}) document {d}");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| err(format!("workload.manifests[{i}]: {}: {e}", path.display())))?;
        let docs: Vec<serde_json::Value> = serde_saphyr::from_str_multiple(&text)
            .map_err(|e| err(format!("workload.manifests[{i}] ({rel}): {e}")))?;
        for (d, doc) in docs.iter().enumerate().filter(|(_, d)| !d.is_null()) {
            // A Namespace shipped with a manifest has nothing to simulate.
            if doc.get("apiVersion").and_then(serde_json::Value::as_str) == Some("v1")
                && doc.get("kind").and_then(serde_json::Value::as_str) == Some("Namespace")
            {
                continue;
            }
            admission
                .admit(doc)
                .map_err(|e| err(format!("{}: {e}", at(d))))?;
            let job: tephra_api::Job =
                serde_json::from_value(doc.clone()).map_err(|e| err(format!("{}: {e}", at(d))))?;
            let plan =
                tephra_controllers::job::plan(&job).map_err(|e| err(format!("{}: {e}", at(d))))?;
            let notes = job.metadata.annotations.clone().unwrap_or_default();
            let submit = match notes.get(SIM_SUBMIT_AT) {
                Some(v) => Dur::parse(v).map_err(|e| {
                    err(format!(
                        "{}: metadata.annotations[{SIM_SUBMIT_AT}]: {e}",
                        at(d)
                    ))
                })?,
                None => Dur(0),
            };
            let duration = notes
                .get(SIM_DURATION)
                .ok_or_else(|| {
                    err(format!(
                        "{}: metadata.annotations[{SIM_DURATION}]: required, e.g. \"2h\"",
                        at(d)
                    ))
                })
                .and_then(|v| {
                    Dur::parse(v).map_err(|e| {
                        err(format!(
                            "{}: metadata.annotations[{SIM_DURATION}]: {e}",
                            at(d)
                        ))
                    })
                })?;
            let priority = match &plan.priority_class {
                None => 0,
                Some(c) => *s.scheduler.priority_classes.get(c).ok_or_else(|| {
                    err(format!(
                        "{}: spec.priorityClassName: unknown class {c:?} (declare it under scheduler.priorityClasses)",
                        at(d)
                    ))
                })?,
            };
            let tasks = plan
                .tasks
                .iter()
                .map(|t| SimTask {
                    role: t.name.clone(),
                    replicas: t.replicas,
                    min: Some(t.min_available),
                    request: t
                        .requests
                        .iter()
                        .map(|(k, v)| (k.clone(), v.0.clone()))
                        .collect(),
                    duration_ms: duration.0,
                    node_selector: t.node_selector.clone(),
                    affinity: t.affinity.clone(),
                    tolerations: t.tolerations.clone(),
                })
                .collect();
            jobs.push(SimJob {
                namespace: plan.namespace.clone(),
                name: plan.name.clone(),
                queue: plan.queue.clone(),
                submit_ms: submit.0,
                priority,
                min_member: Some(plan.min_member),
                tasks,
                policy: JobPolicy::default(),
                plan: Some(Box::new(plan)),
            });
        }
    }
    Ok(Explicit::new(jobs))
}
