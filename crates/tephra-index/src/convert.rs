//! Kubernetes objects as the scheduler cache sees them. Pure functions, one per kind: a Node,
//! a Pod, a PodGroup, a Queue, a PriorityClass or a PodDisruptionBudget read from a member or
//! the control plane becomes the core's model, or an error that names the object and field.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tephra_api::scheduling::PodGroupPhase;
use tephra_api::well_known::{GROUP_NAME_ANNOTATION, LARGEST_TASK_REQUEST};
use tephra_api::{Cluster as ApiCluster, PodGroup, Queue};
use tephra_controllers::members::{self, MembersError};
use tephra_controllers::pod::{UnknownValue, label_selector};
use tephra_controllers::queue::{self, QueueError};
use tephra_scheduler::cache::{DraChange, Event, StorageChange};
use tephra_scheduler::model::vgpu;
use tephra_scheduler::model::{
    Cluster, GroupPhase, JobPolicy, NodeSpec, PdbSpec, PodGroupSpec, PodSpec, QueueSpec, TaskStatus,
};
use tephra_scheduler::resources::{PODS, ResourceError, ResourceNames};

/// Why an object cannot be read into the scheduler's model. Each names the object.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// A node's allocatable cannot be read.
    #[error("node {node}: status.allocatable: {source}")]
    NodeResources {
        /// Node.
        node: String,
        /// Why.
        source: ResourceError,
    },
    /// A pod cannot become a task.
    #[error("pod {namespace}/{source}")]
    Pod {
        /// Namespace.
        namespace: String,
        /// Why (names the pod).
        source: MembersError,
    },
    /// A PodGroup field cannot be read.
    #[error("podgroup {key}: {field}: {message}")]
    PodGroup {
        /// `namespace/name`.
        key: String,
        /// Field path.
        field: &'static str,
        /// Why.
        message: String,
    },
    /// A Queue cannot be read.
    #[error("queue {name}: {source}")]
    Queue {
        /// Queue.
        name: String,
        /// Why.
        source: QueueError,
    },
    /// A PodDisruptionBudget's selector cannot be read.
    #[error("poddisruptionbudget {key}: {source}")]
    Pdb {
        /// `namespace/name`.
        key: String,
        /// Why.
        source: UnknownValue,
    },
    /// A HyperNode cannot be read.
    #[error(transparent)]
    HyperNode(#[from] tephra_controllers::topology::HyperNodeError),
    /// The vGPU device configuration cannot be read.
    #[error("configmap {key}: {source}")]
    DeviceConfig {
        /// `namespace/name`.
        key: String,
        /// Why.
        source: tephra_scheduler::model::mig::DeviceConfigError,
    },
}

/// The key of the vGPU device configuration in its ConfigMap, as Volcano reads it.
pub const DEVICE_CONFIG_KEY: &str = "device-config.yaml";

/// The dynamic MIG geometries of the vGPU device configuration ConfigMap (its
/// [`DEVICE_CONFIG_KEY`]); none when it has no such key, as Volcano then uses its defaults,
/// which name none.
pub fn mig_geometries(
    cm: &k8s_openapi::api::core::v1::ConfigMap,
) -> Result<tephra_scheduler::model::mig::KnownGeometries, ConvertError> {
    let Some(text) = cm.data.as_ref().and_then(|d| d.get(DEVICE_CONFIG_KEY)) else {
        return Ok(Default::default());
    };
    tephra_scheduler::model::mig::KnownGeometries::parse(text).map_err(|source| {
        ConvertError::DeviceConfig {
            key: key(&cm.metadata),
            source,
        }
    })
}

/// Seconds since the epoch of a Kubernetes timestamp.
pub fn seconds(t: &Time) -> i64 {
    t.0.as_second()
}

fn created(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> i64 {
    meta.creation_timestamp.as_ref().map_or(0, seconds)
}

/// `namespace/name` of an object.
pub fn key(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// When the node lock for shared GPUs (`vgpu::NODE_LOCK`, RFC 3339) was taken, if it stands.
/// A time that does not parse counts as long ago: the lock is taken over, as an expired one.
fn gpu_lock(n: &Node) -> Option<i64> {
    let at = n.metadata.annotations.as_ref()?.get(vgpu::NODE_LOCK)?;
    Some(
        at.parse::<k8s_openapi::jiff::Timestamp>()
            .map_or(0, |t| t.as_second()),
    )
}

/// A member's Node: allocatable (pod slots default to kubelet's 110), labels, taints,
/// cordon and the Ready condition.
pub fn node(cluster: &str, n: &Node, names: &mut ResourceNames) -> Result<NodeSpec, ConvertError> {
    let name = n.metadata.name.clone().unwrap_or_default();
    let status = n.status.as_ref();
    let list = status
        .and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()))
        .cloned()
        .unwrap_or_default();
    let mut allocatable = names
        .parse(list.iter().map(|(k, v)| (k.as_str(), v.0.as_str())))
        .map_err(|source| ConvertError::NodeResources {
            node: name.clone(),
            source,
        })?;
    if !list.contains_key("pods") {
        allocatable.set(PODS, tephra_scheduler::model::DEFAULT_MAX_PODS);
    }
    let spec = n.spec.as_ref();
    let taints = spec
        .and_then(|s| s.taints.as_ref())
        .map(|ts| tephra_controllers::pod::taint_list(ts))
        .unwrap_or_default();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    let gpus = node_gpus(&name, n, &list);
    Ok(NodeSpec {
        gpu_lock: gpu_lock(n),
        gpus,
        name,
        cluster: cluster.to_string(),
        labels: n.metadata.labels.clone().unwrap_or_default(),
        taints,
        allocatable,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
        ready,
    })
}

/// The shared GPUs a node's vGPU device plugin registered: its annotation read, where the node
/// offers the plugin's three resources (as Volcano requires). An annotation that does not read
/// registers nothing, with one line saying why. Besides, the cards of Volcano's gpushare mode
/// where the node offers `volcano.sh/gpu-memory` and `volcano.sh/gpu-number`.
fn node_gpus(
    name: &str,
    n: &Node,
    allocatable: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> Arc<[vgpu::Gpu]> {
    let annotations = n.metadata.annotations.as_ref();
    let amount = |r: &str| {
        allocatable
            .get(r)
            .and_then(|q| tephra_scheduler::quantity::parse_scaled(&q.0, 1).ok())
            .and_then(|v| u64::try_from(v).ok())
            .filter(|v| *v > 0)
    };
    let mut gpus = Vec::new();
    if let Some(text) = annotations.and_then(|a| a.get(vgpu::REGISTER))
        && [vgpu::NUMBER, vgpu::MEMORY, vgpu::CORES]
            .iter()
            .all(|r| amount(r).is_some())
    {
        match vgpu::parse_register(text) {
            Ok(list) => gpus = list,
            Err(e) => tracing::warn!(node = name, error = %e, "shared GPUs not registered"),
        }
    }
    if let (Some(memory), Some(number)) = (amount(vgpu::SHARE_MEMORY), amount(vgpu::SHARE_NUMBER)) {
        let unhealthy = annotations.and_then(|a| a.get(vgpu::SHARE_UNHEALTHY));
        gpus.extend(vgpu::share_gpus(
            memory,
            number,
            unhealthy.map(String::as_str),
        ));
    }
    gpus.into()
}

/// Whether a pod is the scheduler's to place: its `schedulerName` is one of `ours`.
pub fn is_ours(p: &Pod, ours: &[String]) -> bool {
    // A member's copy of a pod tephra placed is tephra's whoever binds it (under
    // `bindingMode: Extender`, the member's kube-scheduler does).
    if p.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(tephra_api::well_known::PLANNED_CLUSTER))
    {
        return true;
    }
    let name = p
        .spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or("default-scheduler");
    ours.iter().any(|o| o == name)
}

/// The PodGroup a pod names: a Volcano PodGroup in the annotation
/// `scheduling.k8s.io/group-name`, or a Kubernetes PodGroup (the Workload API) in
/// `spec.schedulingGroup.podGroupName`. Both are gangs of the same kind, keyed by namespace
/// and name.
pub fn group_of(p: &Pod) -> Option<String> {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(GROUP_NAME_ANNOTATION))
        .or_else(|| {
            p.spec
                .as_ref()?
                .scheduling_group
                .as_ref()?
                .pod_group_name
                .as_ref()
        })
        .filter(|g| !g.is_empty())
        .cloned()
}

/// The task status a pod's phase, node and deletion give.
pub fn status(p: &Pod) -> TaskStatus {
    if p.metadata.deletion_timestamp.is_some() {
        return TaskStatus::Releasing;
    }
    let bound = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
    match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Running") => TaskStatus::Running,
        Some("Succeeded") => TaskStatus::Succeeded,
        Some("Failed") => TaskStatus::Failed,
        Some("Unknown") => TaskStatus::Unknown,
        _ if bound => TaskStatus::Bound,
        _ => TaskStatus::Pending,
    }
}

/// The trailing number of a pod's name (`job-worker-3` → 3): its index within its role.
fn index(name: &str) -> u32 {
    name.rsplit('-')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// A member's pod as a task, or `None` when it is not the scheduler's to place and holds no
/// node (another scheduler's pending pod). Another scheduler's bound pod is kept, without its
/// group: it is not ours to move, but it consumes the node's capacity.
pub fn pod(
    cluster: &str,
    p: &Pod,
    ours: &[String],
    names: &mut ResourceNames,
) -> Result<Option<PodSpec>, ConvertError> {
    let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
    let mine = is_ours(p, ours);
    if !mine && node.is_none() {
        return Ok(None);
    }
    let namespace = p
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let mut shape = members::shape(p, names).map_err(|source| ConvertError::Pod {
        namespace: namespace.clone(),
        source,
    })?;
    if !mine {
        // Another scheduler's pod is not ours to evict, for preemption or reclaim.
        shape.preemptable = false;
    }
    let name = p.metadata.name.clone().unwrap_or_default();
    // The shared GPUs it was given, once bound (before, the annotation is only a plan).
    let annotations = node.as_ref().and(p.metadata.annotations.as_ref());
    let gpus = match (annotations, shape.rules.gpus.as_deref()) {
        (Some(a), Some(ask)) if ask.share => a
            .get(vgpu::SHARE_INDEX)
            .map(|v| Arc::new(vgpu::Grants::of_share_indices(v, ask))),
        (Some(a), _) => a.get(vgpu::IDS).map(|v| Arc::new(vgpu::Grants::parse(v))),
        (None, _) => None,
    };
    Ok(Some(PodSpec {
        gpus,
        index: index(&name),
        group: if mine { group_of(p) } else { None },
        shape: Arc::new(shape),
        status: status(p),
        placement: node.map(|n| (cluster.to_string(), n)),
        created: created(&p.metadata),
        namespace,
        name,
        lives_in: None,
        planned: p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(tephra_api::well_known::PLANNED_NODE))
            .filter(|n| !n.is_empty())
            .cloned(),
        ghost_of: None,
        foreign: !mine,
    }))
}

/// The scheduler's phase of a PodGroup's status phase.
pub fn phase(p: Option<PodGroupPhase>) -> GroupPhase {
    match p {
        None | Some(PodGroupPhase::Pending) => GroupPhase::Pending,
        Some(PodGroupPhase::Inqueue) => GroupPhase::Inqueue,
        Some(PodGroupPhase::Running) => GroupPhase::Running,
        Some(PodGroupPhase::Unknown) => GroupPhase::Unknown,
        Some(PodGroupPhase::Completed) => GroupPhase::Completed,
    }
}

/// The API's phase of a scheduler phase.
pub fn api_phase(p: GroupPhase) -> PodGroupPhase {
    match p {
        GroupPhase::Pending => PodGroupPhase::Pending,
        GroupPhase::Inqueue => PodGroupPhase::Inqueue,
        GroupPhase::Running => PodGroupPhase::Running,
        GroupPhase::Unknown => PodGroupPhase::Unknown,
        GroupPhase::Completed => PodGroupPhase::Completed,
    }
}

/// A PodGroup: minMember, minTaskMember, minResources, priority class and phase. Its phase
/// started at `phase_since` (the caller remembers when it saw the phase change).
pub fn pod_group(
    g: &PodGroup,
    names: &mut ResourceNames,
    phase_since: Option<i64>,
    policy: Arc<JobPolicy>,
) -> Result<PodGroupSpec, ConvertError> {
    let key = key(&g.metadata);
    let bad = |field, message: String| ConvertError::PodGroup {
        key: key.clone(),
        field,
        message,
    };
    let spec = &g.spec;
    let min_member = match spec.min_member {
        Some(m) => {
            u32::try_from(m).map_err(|_| bad("spec.minMember", "must not be negative".into()))?
        }
        None => 1,
    };
    let mut min_task_member = BTreeMap::new();
    for (role, &m) in &spec.min_task_member {
        let m = u32::try_from(m).map_err(|_| {
            bad(
                "spec.minTaskMember",
                format!("{role}: must not be negative"),
            )
        })?;
        min_task_member.insert(role.clone(), m);
    }
    let min_resources = match &spec.min_resources {
        Some(list) => Some(
            names
                .parse(list.iter().map(|(k, v)| (k.as_str(), v.0.as_str())))
                .map_err(|e| bad("spec.minResources", e.to_string()))?,
        ),
        None => None,
    };
    let largest_task = match g
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LARGEST_TASK_REQUEST))
    {
        Some(text) => {
            let field = "metadata.annotations[tephra.io/largest-task-request]";
            let list: BTreeMap<String, String> = serde_json::from_str(text).map_err(|e| {
                bad(
                    field,
                    format!("not a JSON object of resource quantities: {e}"),
                )
            })?;
            Some(
                names
                    .parse(list.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                    .map_err(|e| bad(field, e.to_string()))?,
            )
        }
        None => None,
    };
    let status = g.status.as_ref();
    let created = created(&g.metadata);
    let since = phase_since.unwrap_or_else(|| {
        status
            .and_then(|s| {
                s.conditions
                    .iter()
                    .filter_map(|c| c.last_transition_time.as_ref().map(seconds))
                    .max()
            })
            .unwrap_or(created)
    });
    Ok(PodGroupSpec {
        namespace: g
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        name: g.metadata.name.clone().unwrap_or_default(),
        queue: if spec.queue.is_empty() {
            tephra_api::defaults::DEFAULT_QUEUE.to_string()
        } else {
            spec.queue.clone()
        },
        min_member,
        min_task_member,
        min_resources,
        largest_task,
        priority_class: spec.priority_class_name.clone(),
        priority: None,
        phase: phase(status.and_then(|s| s.phase)),
        phase_since: since,
        created,
        policy,
        topology: spec
            .network_topology
            .as_ref()
            .map(tephra_controllers::podgroup::network_topology),
        sub_groups: tephra_controllers::podgroup::sub_groups(&spec.sub_group_policy)
            .map_err(|e| bad("spec.subGroupPolicy", e.to_string()))?,
    })
}

/// A Queue: weight, capability, guarantee, deserved, hierarchy and state.
pub fn queue(q: &Queue, names: &mut ResourceNames) -> Result<QueueSpec, ConvertError> {
    queue::spec(q, names).map_err(|source| ConvertError::Queue {
        name: q.metadata.name.clone().unwrap_or_default(),
        source,
    })
}

/// A `Cluster` object as a member: labels, provider, region, zones, taints, prices, and
/// readiness from its `Ready` condition (a member without one yet counts as ready: nothing
/// has found it unhealthy). `reachable` is what the scheduler's own watchers see.
pub fn cluster(c: &ApiCluster, reachable: bool) -> Cluster {
    let spec = &c.spec;
    let ready = c
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .is_none_or(|c| c.status == "True");
    Cluster {
        name: c.metadata.name.clone().unwrap_or_default(),
        labels: c.metadata.labels.clone().unwrap_or_default(),
        provider: spec.provider.clone(),
        region: spec.region.clone(),
        zones: spec.zones.clone(),
        taints: tephra_controllers::pod::taint_list(&spec.taints),
        ready: ready && reachable,
        price: spec
            .price
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.0.parse::<f64>().ok()?)))
            .collect(),
    }
}

/// A PodDisruptionBudget: its selector and how many of its pods may be disrupted now.
pub fn pdb(p: &PodDisruptionBudget) -> Result<PdbSpec, ConvertError> {
    let selector = match p.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        Some(s) => {
            Some(
                label_selector(s, "spec.selector").map_err(|source| ConvertError::Pdb {
                    key: key(&p.metadata),
                    source,
                })?,
            )
        }
        None => None,
    };
    let status = p.status.as_ref();
    Ok(PdbSpec {
        namespace: p
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        name: p.metadata.name.clone().unwrap_or_default(),
        selector,
        disruptions_allowed: status.map_or(0, |s| s.disruptions_allowed.unwrap_or(0)),
        disrupted_pods: status
            .and_then(|s| s.disrupted_pods.as_ref())
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default(),
    })
}

/// A change to `cluster`'s DRA objects, as a cache event.
pub(crate) fn dra_event(cluster: &str, change: DraChange) -> Event {
    Event::Dra {
        cluster: cluster.to_string(),
        change,
    }
}

/// A change to `cluster`'s storage objects, as a cache event.
pub(crate) fn storage_event(cluster: &str, change: StorageChange) -> Event {
    Event::Storage {
        cluster: cluster.to_string(),
        change,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn ours() -> Vec<String> {
        vec!["volcano".to_string()]
    }

    fn pod_json(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_node_registers_shared_gpus_only_with_the_plugins_resources_and_a_readable_annotation() {
        let register = "GPU-a,10,15360,NVIDIA-Tesla T4,true,hami-core:GPU-b,10,15360,NVIDIA-Tesla T4,false,hami-core:";
        let n = |annotation: &str, resources: bool| -> Node {
            let mut alloc = json!({"cpu": "8", "pods": "110"});
            if resources {
                alloc["volcano.sh/vgpu-number"] = json!("20");
                // As kube-apiserver writes 32000 back.
                alloc["volcano.sh/vgpu-memory"] = json!("32k");
                alloc["volcano.sh/vgpu-cores"] = json!("200");
            }
            serde_json::from_value(json!({
                "metadata": {"name": "n1", "annotations": {vgpu::REGISTER: annotation}},
                "status": {"allocatable": alloc}
            }))
            .unwrap()
        };
        let mut names = ResourceNames::default();
        let spec = node("local", &n(register, true), &mut names).unwrap();
        assert_eq!(spec.gpus.len(), 2);
        assert_eq!(spec.gpus[0].uuid, "GPU-a");
        assert_eq!(spec.gpus[0].memory, 15360);
        assert!(!spec.gpus[1].healthy);
        // Without the plugin's resources (or with a record short of fields) nothing registers.
        assert!(
            node("local", &n(register, false), &mut names)
                .unwrap()
                .gpus
                .is_empty()
        );
        let short = "GPU-a,10,15360,NVIDIA-Tesla T4,true:";
        assert!(
            node("local", &n(short, true), &mut names)
                .unwrap()
                .gpus
                .is_empty()
        );
    }

    #[test]
    fn a_bound_pod_holds_the_shared_gpus_its_annotation_names_and_a_pending_one_none() {
        let p = |node: Option<&str>| {
            let mut spec = json!({"schedulerName": "volcano", "containers": [
                {"name": "c", "resources": {"limits": {"volcano.sh/vgpu-number": "1",
                                                       "volcano.sh/vgpu-memory": "3000"}}}]});
            if let Some(n) = node {
                spec["nodeName"] = json!(n);
            }
            pod_json(json!({
                "metadata": {"name": "p", "namespace": "ns",
                             "annotations": {vgpu::IDS: "GPU-a,NVIDIA,3000,30:"}},
                "spec": spec
            }))
        };
        let mut names = ResourceNames::default();
        let bound = pod("local", &p(Some("n1")), &ours(), &mut names)
            .unwrap()
            .unwrap();
        let grants = bound.gpus.expect("bound with GPUs");
        assert_eq!(
            grants.all().map(|g| g.memory).collect::<Vec<_>>(),
            vec![3000]
        );
        let ask = bound.shape.rules.gpus.clone().expect("asks for a slice");
        assert_eq!(ask.asks[0].memory, 3000);
        let pending = pod("local", &p(None), &ours(), &mut names)
            .unwrap()
            .unwrap();
        assert!(pending.gpus.is_none());
    }

    #[test]
    fn a_pending_pod_of_ours_becomes_a_pending_task_of_its_podgroup() {
        let p = pod_json(json!({
            "metadata": {"name": "job-worker-3", "namespace": "ns",
                         "annotations": {"scheduling.k8s.io/group-name": "job"},
                         "creationTimestamp": "2026-01-01T00:00:10Z"},
            "spec": {"schedulerName": "volcano", "priority": 7, "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}}}]}
        }));
        let mut names = ResourceNames::default();
        let spec = pod("local", &p, &ours(), &mut names).unwrap().unwrap();
        assert_eq!(spec.group.as_deref(), Some("job"));
        assert_eq!(spec.status, TaskStatus::Pending);
        assert_eq!(spec.placement, None);
        assert_eq!(spec.index, 3);
        assert_eq!(spec.shape.priority, 7);
        let gpu = names.intern("nvidia.com/gpu").unwrap();
        assert_eq!(spec.shape.request.0[gpu], 1);
        assert_eq!(spec.shape.request.0[0], 2000);
        assert_eq!(spec.shape.request.0[PODS], 1);
    }

    #[test]
    fn another_schedulers_pod_counts_only_once_it_holds_a_node() {
        let mut names = ResourceNames::default();
        let pending = pod_json(json!({"metadata": {"name": "web", "namespace": "ns"},
            "spec": {"containers": [{"name": "c"}]}}));
        assert!(
            pod("local", &pending, &ours(), &mut names)
                .unwrap()
                .is_none()
        );
        let running = pod_json(json!({"metadata": {"name": "web", "namespace": "ns",
                "annotations": {"scheduling.k8s.io/group-name": "theirs"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running"}}));
        let spec = pod("local", &running, &ours(), &mut names)
            .unwrap()
            .unwrap();
        assert_eq!(spec.group, None);
        assert!(!spec.shape.preemptable, "never a victim of ours");
        assert_eq!(spec.status, TaskStatus::Running);
        assert_eq!(spec.placement, Some(("local".into(), "n1".into())));
    }

    #[test]
    fn a_pod_with_a_bad_quantity_is_refused_with_its_name() {
        let p = pod_json(json!({"metadata": {"name": "p", "namespace": "ns"},
            "spec": {"schedulerName": "volcano", "containers": [
                {"name": "c", "resources": {"requests": {"memory": "lots"}}}]}}));
        let e = pod("local", &p, &ours(), &mut ResourceNames::default()).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("ns/") && s.contains("pod p") && s.contains("memory"),
            "{s}"
        );
    }

    #[test]
    fn a_node_reports_allocatable_taints_cordon_and_readiness() {
        let n: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "spec": {"unschedulable": true, "taints": [
                {"key": "gpu", "value": "yes", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        let mut names = ResourceNames::default();
        let spec = node("east", &n, &mut names).unwrap();
        assert_eq!(spec.cluster, "east");
        assert!(spec.ready && spec.unschedulable);
        assert_eq!(spec.taints.len(), 1);
        assert_eq!(spec.allocatable.0[PODS], 110);
        assert_eq!(spec.labels.get("zone").map(String::as_str), Some("a"));
    }

    #[test]
    fn a_podgroup_keeps_its_gang_minimums_and_phase() {
        let g: PodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ns"},
            "spec": {"minMember": 4, "queue": "q", "minTaskMember": {"worker": 3},
                     "minResources": {"cpu": "4"}},
            "status": {"phase": "Inqueue"}
        }))
        .unwrap();
        let spec = pod_group(&g, &mut ResourceNames::default(), Some(5), Arc::default()).unwrap();
        assert_eq!(spec.min_member, 4);
        assert_eq!(spec.min_task_member.get("worker"), Some(&3));
        assert_eq!(spec.phase, GroupPhase::Inqueue);
        assert_eq!(spec.phase_since, 5);
        assert_eq!(spec.queue, "q");
        assert!(spec.min_resources.is_some());
        assert!(spec.largest_task.is_none());
    }

    #[test]
    fn a_podgroups_declared_largest_task_is_read_and_a_bad_one_is_named() {
        let group = |text: &str| -> PodGroup {
            serde_json::from_value(json!({
                "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "pg", "namespace": "ns",
                    "annotations": {"tephra.io/largest-task-request": text}},
                "spec": {"minMember": 1}
            }))
            .unwrap()
        };
        let mut names = ResourceNames::default();
        let spec = pod_group(
            &group(r#"{"cpu": "12", "nvidia.com/gpu": "4"}"#),
            &mut names,
            None,
            Arc::default(),
        )
        .unwrap();
        let largest = spec.largest_task.unwrap();
        assert_eq!(names.to_list(&largest).len(), 2);
        for bad in ["12 cpus", r#"{"cpu": "twelve"}"#] {
            let e = pod_group(&group(bad), &mut names, None, Arc::default()).unwrap_err();
            assert!(
                e.to_string()
                    .contains("metadata.annotations[tephra.io/largest-task-request]"),
                "{e}"
            );
        }
    }
}
