//! A PodGroup that someone else created (Kubeflow's training-operator, KubeRay, the Spark and
//! MPI operators, or a user) and the pods that name it with `scheduling.k8s.io/group-name`: the
//! gang plan the scheduler sees. Pods of one role (`volcano.sh/task-spec`, else the pod's own
//! name) with the same shape become one task; the PodGroup's minMember and minTaskMember are
//! the gang's. A pod that names no PodGroup gets one of its own, minMember 1, as Volcano's
//! PodGroup controller gives it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use tephra_api::PodGroup;
use tephra_api::well_known::{PREEMPTABLE, QUEUE_NAME, TASK_SPEC};
use tephra_scheduler::model::TaskShape;
use tephra_scheduler::resources::{PODS, ResourceError, ResourceNames};

use crate::job::{GangPlan, TaskPlan};
use crate::pod::{self, RequestError, UnknownValue};

/// Volcano's pod annotation naming the queue of a pod that has no PodGroup.
pub const POD_QUEUE_ANNOTATION: &str = "scheduling.volcano.sh/queue-name";

/// Why a PodGroup and its pods cannot become a gang. Each names the object and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MembersError {
    /// A count is negative.
    #[error("{field}: must not be negative, got {value}")]
    Negative {
        /// Field path.
        field: String,
        /// Value.
        value: i32,
    },
    /// A pod has no spec.
    #[error("pod {pod}: spec is required")]
    NoSpec {
        /// The pod's name.
        pod: String,
    },
    /// A resource amount is not a quantity, or is negative.
    #[error("pod {pod}: {source}")]
    Request {
        /// The pod's name.
        pod: String,
        /// What.
        source: RequestError,
    },
    /// A value the scheduler has no meaning for.
    #[error("pod {pod}: {source}")]
    Unknown {
        /// The pod's name.
        pod: String,
        /// What.
        source: UnknownValue,
    },
    /// A shared-GPU amount cannot be read.
    #[error("pod {pod}: {source}")]
    Gpus {
        /// The pod's name.
        pod: String,
        /// What.
        source: Box<crate::vgpu::AskError>,
    },
    /// The pod's requests name more resources than the scheduler can track.
    #[error("pod {pod}: {source}")]
    Resources {
        /// The pod's name.
        pod: String,
        /// Why.
        source: ResourceError,
    },
}

/// The role of a pod in its gang: its `volcano.sh/task-spec` annotation (or label), else its
/// own name.
pub fn role(pod: &Pod) -> String {
    let meta = &pod.metadata;
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(TASK_SPEC))
        .or_else(|| meta.labels.as_ref().and_then(|l| l.get(TASK_SPEC)))
        .cloned()
        .unwrap_or_else(|| meta.name.clone().unwrap_or_default())
}

/// What one pod asks of the scheduler, as a one-replica task of `role`.
fn task(pod: &Pod, role: String, group_class: Option<&String>) -> Result<TaskPlan, MembersError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let spec = pod
        .spec
        .as_ref()
        .ok_or_else(|| MembersError::NoSpec { pod: name.clone() })?;
    let unknown = |source| MembersError::Unknown {
        pod: name.clone(),
        source,
    };
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let preemptable = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PREEMPTABLE))
        .or_else(|| labels.get(PREEMPTABLE))
        .is_none_or(|v| v != "false");
    Ok(TaskPlan {
        requests: pod::requests(spec, "").map_err(|source| MembersError::Request {
            pod: name.clone(),
            source,
        })?,
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        affinity: pod::node_affinity(spec, "").map_err(unknown)?,
        tolerations: pod::tolerations(spec, "").map_err(unknown)?,
        rules: {
            let mut r = pod::rules(spec, &labels, "").map_err(unknown)?;
            r.claims = pod::claims(spec, Some(&name));
            r.device_claims = crate::dra::pod_claims(pod);
            r.gpus = crate::vgpu::ask(pod).map_err(|source| MembersError::Gpus {
                pod: name.clone(),
                source: Box::new(source),
            })?;
            r
        },
        name: role,
        replicas: 1,
        min_available: 0,
        priority_class: spec
            .priority_class_name
            .clone()
            .or_else(|| group_class.cloned()),
        preemptable,
    })
}

/// What one running cluster's pod asks of the scheduler: its role, effective requests (with
/// its pod slot), selectors, affinity, tolerations, priority and preemptability, with resource
/// names interned in `names`. The runtime's informers feed pods one by one through this.
pub fn shape(pod: &Pod, names: &mut ResourceNames) -> Result<TaskShape, MembersError> {
    let t = task(pod, role(pod), None)?;
    let mut request = names
        .parse(t.requests.iter().map(|(k, v)| (k.as_str(), v.0.as_str())))
        .map_err(|source| MembersError::Resources {
            pod: pod.metadata.name.clone().unwrap_or_default(),
            source,
        })?;
    request.set(PODS, 1);
    Ok(TaskShape {
        role: t.name,
        request,
        node_selector: t.node_selector,
        affinity: t.affinity,
        tolerations: t.tolerations,
        priority: pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0),
        preemptable: t.preemptable,
        namespace: pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        priority_class: t.priority_class,
        rules: t.rules,
    })
}

/// The gang of a PodGroup and the pods that name it, in the order given. Fewer pods than
/// minMember is allowed: the gang waits for the rest, as in Volcano.
pub fn plan(group: &PodGroup, pods: &[&Pod]) -> Result<GangPlan, MembersError> {
    let spec = &group.spec;
    let min_member = match spec.min_member {
        Some(m) if m < 0 => {
            return Err(MembersError::Negative {
                field: "spec.minMember".into(),
                value: m,
            });
        }
        Some(m) => m as u32,
        None => 0,
    };
    let mut min_task_member = BTreeMap::new();
    for (role, &m) in &spec.min_task_member {
        let m = u32::try_from(m).map_err(|_| MembersError::Negative {
            field: format!("spec.minTaskMember[{role}]"),
            value: m,
        })?;
        min_task_member.insert(role.clone(), m);
    }
    let mut tasks: Vec<TaskPlan> = Vec::new();
    for p in pods {
        let role = role(p);
        let mut one = task(p, role.clone(), spec.priority_class_name.as_ref())?;
        one.min_available = min_task_member.get(&role).copied().unwrap_or(0);
        match tasks.iter_mut().find(|t| {
            t.name == role
                && TaskPlan {
                    replicas: 1,
                    ..(*t).clone()
                } == one
        }) {
            Some(t) => t.replicas += 1,
            None => {
                // Pods of one role with another shape (or other labels, such as a replica
                // index) become a task of their own, `<role>-<n>`.
                let mut n = 0;
                while tasks.iter().any(|t| t.name == one.name) {
                    n += 1;
                    one.name = format!("{role}-{n}");
                }
                tasks.push(one);
            }
        }
    }
    Ok(GangPlan {
        namespace: group
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        name: group.metadata.name.clone().unwrap_or_default(),
        queue: spec.queue.clone(),
        min_member: min_member.max(1),
        min_task_member,
        priority_class: spec.priority_class_name.clone(),
        topology: spec
            .network_topology
            .as_ref()
            .map(crate::podgroup::network_topology),
        tasks,
        planned_nodes: BTreeMap::new(),
    })
}

/// The gang of a pod that names no PodGroup: Volcano's PodGroup controller gives it one named
/// `podgroup-<pod>` (Volcano uses the pod's UID), minMember 1, in the queue its
/// `scheduling.volcano.sh/queue-name` annotation (or `volcano.sh/queue-name` label) names.
pub fn standalone(p: &Pod) -> Result<GangPlan, MembersError> {
    let meta = &p.metadata;
    let queue = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_QUEUE_ANNOTATION))
        .or_else(|| meta.labels.as_ref().and_then(|l| l.get(QUEUE_NAME)))
        .cloned()
        .unwrap_or_else(|| "default".into());
    let name = meta.name.clone().unwrap_or_default();
    let one = task(p, role(p), None)?;
    Ok(GangPlan {
        namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
        name: format!("podgroup-{name}"),
        queue,
        min_member: 1,
        min_task_member: BTreeMap::new(),
        priority_class: one.priority_class.clone(),
        topology: None,
        tasks: vec![one],
        planned_nodes: BTreeMap::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, role: Option<&str>, cpu: &str) -> Pod {
        let mut annotations = serde_json::json!({"scheduling.k8s.io/group-name": "pg"});
        if let Some(r) = role {
            annotations["volcano.sh/task-spec"] = r.into();
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "annotations": annotations},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
        }))
        .expect("valid pod")
    }

    fn group(v: serde_json::Value) -> PodGroup {
        serde_json::from_value(v).expect("valid podgroup")
    }

    #[test]
    fn pods_of_one_role_and_shape_become_one_task() {
        let g = group(serde_json::json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ns"},
            "spec": {"minMember": 3, "queue": "q", "minTaskMember": {"worker": 2},
                     "priorityClassName": "high"}
        }));
        let pods = [
            pod("m", Some("master"), "1"),
            pod("w0", Some("worker"), "2"),
            pod("w1", Some("worker"), "2"),
            pod("w2", Some("worker"), "4"),
            pod("w3", Some("worker"), "8"),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let p = plan(&g, &refs).unwrap();
        assert_eq!((p.namespace.as_str(), p.name.as_str()), ("ns", "pg"));
        assert_eq!(p.queue, "q");
        assert_eq!(p.min_member, 3);
        let shape: Vec<(&str, u32)> = p
            .tasks
            .iter()
            .map(|t| (t.name.as_str(), t.replicas))
            .collect();
        assert_eq!(
            shape,
            [
                ("master", 1),
                ("worker", 2),
                ("worker-1", 1),
                ("worker-2", 1)
            ]
        );
        assert_eq!(p.tasks[1].min_available, 2);
        assert_eq!(p.tasks[0].priority_class.as_deref(), Some("high"));
    }

    #[test]
    fn a_pod_without_a_podgroup_gets_its_own_gang_of_one() {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "solo", "annotations": {"scheduling.volcano.sh/queue-name": "q"}},
            "spec": {"containers": [{"name": "c"}]}
        }))
        .unwrap();
        let g = standalone(&p).unwrap();
        assert_eq!(g.name, "podgroup-solo");
        assert_eq!((g.queue.as_str(), g.min_member), ("q", 1));
    }

    #[test]
    fn an_unknown_operator_names_the_pods_own_field() {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "solo"},
            "spec": {"containers": [{"name": "c"}],
                     "tolerations": [{"key": "k", "operator": "Sometimes"}]}
        }))
        .unwrap();
        let e = standalone(&p).unwrap_err().to_string();
        assert!(e.contains("pod solo: spec.tolerations[0].operator"), "{e}");
    }

    #[test]
    fn a_negative_min_member_is_refused_naming_the_field() {
        let g = group(serde_json::json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "pg"}, "spec": {"minMember": -1}
        }));
        let e = plan(&g, &[]).unwrap_err().to_string();
        assert!(e.contains("spec.minMember"), "{e}");
    }
}
