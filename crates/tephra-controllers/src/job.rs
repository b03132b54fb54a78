//! The part of Volcano's job controller that turns a `batch.volcano.sh` Job into a gang: its
//! PodGroup (minMember, minTaskMember, queue, priority) and, per task, what each pod asks of the
//! scheduler. Volcano's defaults apply: an unnamed task is `default<index>`, a task's
//! minAvailable defaults to its replicas, and the job's minAvailable to the sum of those.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use tephra_api::Job;

/// Why a Job cannot become a gang. Each names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// The Job has no tasks.
    #[error("spec.tasks: a job needs at least one task")]
    NoTasks,
    /// A count is negative.
    #[error("{field}: must not be negative, got {value}")]
    Negative {
        /// Field path.
        field: String,
        /// Value.
        value: i32,
    },
    /// minAvailable exceeds what the tasks can give.
    #[error("{field}: {value} exceeds {max}")]
    TooLarge {
        /// Field path.
        field: String,
        /// Value.
        value: i32,
        /// The bound.
        max: i64,
    },
    /// Two tasks share a name.
    #[error("spec.tasks[{index}].name: {name:?} is used by another task")]
    DuplicateTask {
        /// Index.
        index: usize,
        /// Name.
        name: String,
    },
}

/// One node-affinity requirement: key, operator (`In`, `NotIn`, `Exists`, `DoesNotExist`,
/// `Gt`, `Lt`) and values.
pub type Requirement = (String, String, Vec<String>);

/// What one task's pods ask of the scheduler.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskPlan {
    /// Task name (defaulted).
    pub name: String,
    /// Pods of this task.
    pub replicas: u32,
    /// This task's minimum in the gang.
    pub min_available: u32,
    /// Effective requests of one pod (containers summed, init containers' maximum, limits
    /// standing in for missing requests, pod overhead added).
    pub requests: BTreeMap<String, Quantity>,
    /// `nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: terms ORed, requirements within a term ANDed.
    pub affinity: Vec<Vec<Requirement>>,
    /// Tolerations.
    pub tolerations: Vec<Toleration>,
    /// Priority class of the pods.
    pub priority_class: Option<String>,
}

/// The gang a Job becomes.
#[derive(Clone, Debug, PartialEq)]
pub struct GangPlan {
    /// Namespace.
    pub namespace: String,
    /// Name (the PodGroup's name).
    pub name: String,
    /// Queue.
    pub queue: String,
    /// PodGroup minMember.
    pub min_member: u32,
    /// PodGroup minTaskMember.
    pub min_task_member: BTreeMap<String, u32>,
    /// Priority class.
    pub priority_class: Option<String>,
    /// Tasks.
    pub tasks: Vec<TaskPlan>,
}

fn non_negative(field: String, v: i32) -> Result<u32, JobError> {
    u32::try_from(v).map_err(|_| JobError::Negative { field, value: v })
}

/// Adds quantities of the same resource exactly, keeping Kubernetes text form.
fn add_quantity(a: &Quantity, b: &Quantity) -> Quantity {
    // Both are valid quantities (the API server checked them); summing their millis keeps it
    // exact for every unit the scheduler uses.
    let milli = |q: &Quantity| parse_milli(&q.0).unwrap_or(0);
    Quantity(format!("{}m", milli(a) + milli(b)))
}

fn max_quantity(a: &Quantity, b: &Quantity) -> Quantity {
    let milli = |q: &Quantity| parse_milli(&q.0).unwrap_or(0);
    if milli(b) > milli(a) {
        b.clone()
    } else {
        a.clone()
    }
}

/// A quantity in thousandths of its unit (exact; rounds up below that).
fn parse_milli(text: &str) -> Option<i64> {
    tephra_scheduler::quantity::parse_scaled(text, 1000).ok()
}

fn container_requests(c: &Container) -> BTreeMap<String, Quantity> {
    let mut out = BTreeMap::new();
    if let Some(r) = &c.resources {
        // Kubernetes defaults a missing request to the limit.
        if let Some(limits) = &r.limits {
            out.extend(limits.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        if let Some(requests) = &r.requests {
            out.extend(requests.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    out
}

/// The effective requests of a pod, as kube-scheduler computes them.
pub fn pod_requests(spec: &PodSpec) -> BTreeMap<String, Quantity> {
    let mut sum: BTreeMap<String, Quantity> = BTreeMap::new();
    for c in &spec.containers {
        for (k, v) in container_requests(c) {
            let e = sum.entry(k).or_insert_with(|| Quantity("0".into()));
            *e = add_quantity(e, &v);
        }
    }
    for c in spec.init_containers.iter().flatten() {
        for (k, v) in container_requests(c) {
            let e = sum.entry(k).or_insert_with(|| Quantity("0".into()));
            *e = max_quantity(e, &v);
        }
    }
    for (k, v) in spec.overhead.iter().flatten() {
        let e = sum.entry(k.clone()).or_insert_with(|| Quantity("0".into()));
        *e = add_quantity(e, v);
    }
    sum
}

/// Turns a Job into its gang plan.
pub fn plan(job: &Job) -> Result<GangPlan, JobError> {
    let spec = &job.spec;
    if spec.tasks.is_empty() {
        return Err(JobError::NoTasks);
    }
    let mut tasks = Vec::new();
    let mut sum_min: i64 = 0;
    let mut total: i64 = 0;
    for (i, t) in spec.tasks.iter().enumerate() {
        let name = t
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("default{i}"));
        if tasks.iter().any(|p: &TaskPlan| p.name == name) {
            return Err(JobError::DuplicateTask { index: i, name });
        }
        let replicas = non_negative(format!("spec.tasks[{i}].replicas"), t.replicas.unwrap_or(0))?;
        let min = non_negative(
            format!("spec.tasks[{i}].minAvailable"),
            t.min_available.unwrap_or(replicas as i32),
        )?;
        if min > replicas {
            return Err(JobError::TooLarge {
                field: format!("spec.tasks[{i}].minAvailable"),
                value: min as i32,
                max: i64::from(replicas),
            });
        }
        sum_min += i64::from(min);
        total += i64::from(replicas);
        let pod = t.template.spec.clone().unwrap_or_default();
        let affinity = pod
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|sel| {
                sel.node_selector_terms
                    .iter()
                    .map(|term| {
                        term.match_expressions
                            .iter()
                            .flatten()
                            .map(|e| {
                                (
                                    e.key.clone(),
                                    e.operator.clone(),
                                    e.values.clone().unwrap_or_default(),
                                )
                            })
                            .collect()
                    })
                    .collect()
            })
            .unwrap_or_default();
        tasks.push(TaskPlan {
            name,
            replicas,
            min_available: min,
            requests: pod_requests(&pod),
            node_selector: pod.node_selector.clone().unwrap_or_default(),
            affinity,
            tolerations: pod.tolerations.clone().unwrap_or_default(),
            priority_class: pod
                .priority_class_name
                .clone()
                .or_else(|| spec.priority_class_name.clone()),
        });
    }
    let min_member = match spec.min_available {
        Some(m) if m > 0 => {
            if i64::from(m) > total {
                return Err(JobError::TooLarge {
                    field: "spec.minAvailable".into(),
                    value: m,
                    max: total,
                });
            }
            m as u32
        }
        Some(m) if m < 0 => {
            return Err(JobError::Negative {
                field: "spec.minAvailable".into(),
                value: m,
            });
        }
        _ => sum_min as u32,
    };
    Ok(GangPlan {
        namespace: job
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        name: job.metadata.name.clone().unwrap_or_default(),
        queue: spec.queue.clone(),
        min_member: min_member.max(1),
        min_task_member: tasks
            .iter()
            .map(|t| (t.name.clone(), t.min_available))
            .collect(),
        priority_class: spec.priority_class_name.clone(),
        tasks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(yaml_json: serde_json::Value) -> Job {
        serde_json::from_value(yaml_json).expect("valid job")
    }

    #[test]
    fn volcano_defaults_apply() {
        let j = job(serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ml"},
            "spec": {"tasks": [
                {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}},
                {"name": "ps", "replicas": 3, "minAvailable": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}
            ]}
        }));
        let p = plan(&j).unwrap();
        assert_eq!(p.tasks[0].name, "default0");
        assert_eq!(p.min_member, 3, "2 (replicas of default0) + 1");
        assert_eq!(p.min_task_member["default0"], 2);
        assert_eq!(p.min_task_member["ps"], 1);
        assert_eq!(p.queue, "default");
    }

    #[test]
    fn pod_requests_sum_containers_take_init_max_and_default_to_limits() {
        let j = job(serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {"tasks": [{"name": "w", "replicas": 1, "template": {"spec": {
                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "4"}}}],
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}}
                ]}}}]}
        }));
        let r = &plan(&j).unwrap().tasks[0].requests;
        assert_eq!(
            parse_milli(&r["cpu"].0),
            Some(4000),
            "init container's 4 cpu beat 1.5"
        );
        assert_eq!(parse_milli(&r["memory"].0), Some(1_073_741_824_000));
        assert_eq!(
            parse_milli(&r["nvidia.com/gpu"].0),
            Some(2000),
            "limit stands in for the request"
        );
    }

    #[test]
    fn bad_counts_name_the_field() {
        let j = job(serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {"minAvailable": 5, "tasks": [{"name": "w", "replicas": 2, "template": {}}]}
        }));
        assert_eq!(
            plan(&j).unwrap_err().to_string(),
            "spec.minAvailable: 5 exceeds 2"
        );
    }
}
