//! The part of Volcano's job controller that turns a `batch.volcano.sh` Job into a gang: its
//! PodGroup (minMember, minTaskMember, queue, priority) and, per task, what each pod asks of the
//! scheduler. Volcano's defaults apply: an unnamed task is `default<index>`, a task's
//! minAvailable defaults to its replicas, and the job's minAvailable to the sum of those.
//!
//! [`plan`] reads the Job into typed values (selectors, affinity, tolerations as the scheduler
//! models them; anything it cannot read is an error that names the field), and
//! [`GangPlan::gang`] turns the plan into what the scheduler sees: the PodGroup, with its
//! minResources, and each task's pod shape with its replicas.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use tephra_api::Job;
use tephra_api::well_known::{JOB_NAME, JOB_NAMESPACE, PREEMPTABLE, QUEUE_NAME, TASK_SPEC};
use tephra_scheduler::model::{JobPolicy, Labels, PodRules, Requirement, TaskShape, Toleration};
use tephra_scheduler::resources::{PODS, ResourceError, ResourceNames, Resources};

use crate::pod::{self, RequestError, UnknownValue};
use crate::podgroup::{Gang, GangSpec, GangTask, gang};

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
    /// A value the scheduler has no meaning for (an affinity operator, a toleration operator
    /// or effect).
    #[error(transparent)]
    Unknown(#[from] UnknownValue),
    /// A resource amount in a task's pod template is not a quantity, or is negative.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// A shared-GPU amount of a task's template cannot be read.
    #[error(transparent)]
    Gpus(Box<crate::vgpu::AskError>),
    /// The tasks' replicas sum past int32, which Kubernetes counts them in (a PodGroup's
    /// minMember is an int32).
    #[error("spec.tasks: the replicas sum to {total}, more than int32 holds")]
    TooManyReplicas {
        /// The sum.
        total: i64,
    },
    /// A pod's requests cannot be read.
    #[error("spec.tasks[{index}] ({task}): {source}")]
    Resources {
        /// Task index.
        index: usize,
        /// Task name.
        task: String,
        /// Why.
        source: ResourceError,
    },
}

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
    /// standing in for missing requests, pod overhead added), as the pod shows them.
    pub requests: BTreeMap<String, Quantity>,
    /// `nodeSelector`.
    pub node_selector: Labels,
    /// Required node affinity: terms ORed, requirements within a term ANDed.
    pub affinity: Vec<Vec<Requirement>>,
    /// Tolerations.
    pub tolerations: Vec<Toleration>,
    /// Priority class of the pods.
    pub priority_class: Option<String>,
    /// Labels, preferred node affinity and inter-pod (anti-)affinity of the pods.
    pub rules: PodRules,
    /// Whether the pods may be preempted or reclaimed (`volcano.sh/preemptable`, default true).
    pub preemptable: bool,
}

impl TaskPlan {
    /// One pod's requests as a resource vector, names interned in `names`; `index` is the
    /// task's place in the Job, for the error.
    pub fn request(&self, index: usize, names: &mut ResourceNames) -> Result<Resources, JobError> {
        names
            .parse(
                self.requests
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.0.as_str())),
            )
            .map_err(|source| JobError::Resources {
                index,
                task: self.name.clone(),
                source,
            })
    }
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
    /// `networkTopology`.
    pub topology: Option<tephra_scheduler::model::topology::NetworkTopology>,
    /// Tasks.
    pub tasks: Vec<TaskPlan>,
    /// The node a fleet scheduler planned for each pod, by task and pod index (the Job's
    /// `tephra.io/planned-nodes`, read once here; empty when it has none or it does not read).
    pub planned_nodes: BTreeMap<String, Vec<String>>,
}

impl GangPlan {
    /// The gang the scheduler sees: the PodGroup (created at `created`, with minResources) and
    /// each task's pod shape, its resource names interned in `names`.
    pub fn gang(&self, names: &mut ResourceNames, created: i64) -> Result<Gang, JobError> {
        let mut tasks = Vec::new();
        for (index, t) in self.tasks.iter().enumerate() {
            let mut request = t.request(index, names)?;
            request.set(PODS, 1);
            tasks.push(GangTask {
                shape: Arc::new(TaskShape {
                    role: t.name.clone(),
                    request,
                    node_selector: t.node_selector.clone(),
                    affinity: t.affinity.clone(),
                    tolerations: t.tolerations.clone(),
                    priority: 0,
                    preemptable: t.preemptable,
                    namespace: self.namespace.clone(),
                    priority_class: t.priority_class.clone(),
                    rules: t.rules.clone(),
                }),
                replicas: t.replicas,
                min_available: Some(t.min_available),
            });
        }
        Ok(gang(
            GangSpec {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
                queue: self.queue.clone(),
                min_member: Some(self.min_member),
                priority: None,
                priority_class: self.priority_class.clone(),
                policy: Arc::new(JobPolicy::default()),
                topology: self.topology.clone(),
                tasks,
            },
            created,
        ))
    }
}

fn non_negative(field: String, v: i32) -> Result<u32, JobError> {
    u32::try_from(v).map_err(|_| JobError::Negative { field, value: v })
}

/// The labels of a task's pods, as Volcano's job controller sets them: the template's labels
/// plus the job name, namespace, queue and task.
fn pod_labels(
    job: &Job,
    task: &str,
    meta: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
) -> Labels {
    let mut labels = meta.and_then(|m| m.labels.clone()).unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    let namespace = job.metadata.namespace.clone().unwrap_or_default();
    labels.insert(JOB_NAME.into(), name);
    labels.insert(JOB_NAMESPACE.into(), namespace);
    labels.insert(QUEUE_NAME.into(), job.spec.queue.clone());
    labels.insert(TASK_SPEC.into(), task.to_string());
    labels
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
        let at = format!("spec.tasks[{i}].template");
        let preemptable = t
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(PREEMPTABLE))
            .is_none_or(|v| v != "false");
        let labels = pod_labels(job, &name, t.template.metadata.as_ref());
        tasks.push(TaskPlan {
            requests: pod::requests(&pod, &at)?,
            node_selector: pod.node_selector.clone().unwrap_or_default(),
            affinity: pod::node_affinity(&pod, &at)?,
            tolerations: pod::tolerations(&pod, &at)?,
            rules: {
                let mut r = pod::rules(&pod, &labels, &at)?;
                let annotations = t
                    .template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.annotations.as_ref());
                r.gpus = crate::vgpu::ask_of(&pod, annotations, &format!("{at}."))
                    .map_err(|e| JobError::Gpus(Box::new(e)))?;
                r
            },
            name,
            replicas,
            min_available: min,
            priority_class: pod
                .priority_class_name
                .clone()
                .or_else(|| spec.priority_class_name.clone()),
            preemptable,
        });
    }
    if total > i64::from(i32::MAX) {
        return Err(JobError::TooManyReplicas { total });
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
        topology: spec
            .network_topology
            .as_ref()
            .map(crate::podgroup::network_topology),
        tasks,
        planned_nodes: job
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(tephra_api::well_known::PLANNED_NODES))
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tephra_scheduler::model::TaintEffect;

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
            pod::parse_milli(&r["cpu"].0),
            Some(4000),
            "init container's 4 cpu beat 1.5"
        );
        assert_eq!(pod::parse_milli(&r["memory"].0), Some(1_073_741_824_000));
        assert_eq!(
            pod::parse_milli(&r["nvidia.com/gpu"].0),
            Some(2000),
            "limit stands in for the request"
        );
    }

    fn one_task_job(containers: serde_json::Value) -> Job {
        job(serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {"tasks": [{"name": "w", "replicas": 2, "template": {"spec": {
                "containers": containers}}}]}
        }))
    }

    #[test]
    fn a_quantity_that_does_not_parse_is_refused_naming_the_field() {
        let j = one_task_job(serde_json::json!([
            {"name": "a", "resources": {"requests": {"cpu": "1"}}},
            {"name": "b", "resources": {"requests": {"memory": "lots"}}}
        ]));
        assert_eq!(
            plan(&j).unwrap_err().to_string(),
            "spec.tasks[0].template.spec.containers[1].resources.requests.memory: \"lots\" is not a Kubernetes quantity"
        );
        let j = one_task_job(serde_json::json!([
            {"name": "a", "resources": {"limits": {"cpu": "1.5.5"}}}
        ]));
        let e = plan(&j).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "spec.tasks[0].template.spec.containers[0].resources.limits.cpu: \"1.5.5\""
            ),
            "{e}"
        );
    }

    #[test]
    fn a_negative_request_is_refused_naming_the_field() {
        let j = one_task_job(serde_json::json!([
            {"name": "a", "resources": {"requests": {"cpu": "2"}}},
            {"name": "b", "resources": {"requests": {"cpu": "-1"}}}
        ]));
        let e = plan(&j).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "spec.tasks[0].template.spec.containers[1].resources.requests.cpu: \"-1\""
            ),
            "{e}"
        );
        assert!(e.contains("negative"), "{e}");
    }

    #[test]
    fn a_request_larger_than_any_node_is_kept_exactly() {
        let j = one_task_job(serde_json::json!([
            {"name": "a", "resources": {"requests": {"memory": "9Pi"}}},
            {"name": "b", "resources": {"requests": {"memory": "1Ei"}}}
        ]));
        let mut names = ResourceNames::default();
        let g = plan(&j).unwrap().gang(&mut names, 0).unwrap();
        let memory = g.tasks[0]
            .shape
            .request
            .get(tephra_scheduler::resources::MEMORY);
        assert_eq!(memory, (9 << 50) + (1 << 60));
    }

    #[test]
    fn replicas_summing_past_int32_are_refused_not_wrapped() {
        let task = |n: &str| serde_json::json!({"name": n, "replicas": i32::MAX, "template": {}});
        let j = job(serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {"tasks": [task("a"), task("b"), task("c")]}
        }));
        let e = plan(&j).unwrap_err().to_string();
        assert!(e.starts_with("spec.tasks"), "{e}");
        assert!(e.contains("int32"), "{e}");
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

    #[test]
    fn an_unknown_affinity_operator_is_an_error_not_dropped() {
        let j = job(serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {"tasks": [{"name": "w", "replicas": 1, "template": {"spec": {
                "containers": [{"name": "c"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "zone", "operator": "Near", "values": ["a"]}
                    ]}]
                }}}
            }}}]}
        }));
        let e = plan(&j).unwrap_err().to_string();
        assert!(e.contains("matchExpressions[0].operator"), "{e}");
        assert!(e.contains("\"Near\""), "{e}");
    }

    #[test]
    fn the_gang_has_typed_shapes_and_min_resources() {
        let j = job(serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ml"},
            "spec": {"minAvailable": 2, "priorityClassName": "high", "tasks": [
                {"name": "w", "replicas": 3, "template": {"spec": {
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
                    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
                }}}
            ]}
        }));
        let mut names = ResourceNames::default();
        let g = plan(&j).unwrap().gang(&mut names, 7).unwrap();
        assert_eq!(g.group.min_member, 2);
        assert_eq!(g.group.created, 7);
        assert_eq!(g.group.priority_class.as_deref(), Some("high"));
        assert_eq!(g.tasks[0].replicas, 3);
        let shape = &g.tasks[0].shape;
        assert_eq!(shape.request.get(tephra_scheduler::resources::CPU), 2000);
        assert_eq!(shape.request.get(PODS), 1);
        assert!(shape.tolerations[0].exists);
        assert_eq!(shape.tolerations[0].effect, Some(TaintEffect::NoSchedule));
        let min = g.group.min_resources.unwrap();
        assert_eq!(
            min.get(tephra_scheduler::resources::CPU),
            4000,
            "two pods of 2 cpu"
        );
    }
}
