//! Karmada's objects as the Karmada mode reads them: a `ResourceBinding` or
//! `ClusterResourceBinding` (its gang, its placement as a policy, whether it must be scheduled
//! again), the Volcano Queue its resource template names, and a `Cluster`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tephra_api::Cluster as ApiCluster;
use tephra_api::policy::Placement;
use tephra_scheduler::model::JobPolicy;

use super::{APPLIED_PLACEMENT, KarmadaError};

/// A `ResourceBinding`, the fields tephra reads.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Binding {
    /// Metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Spec.
    pub spec: BindingSpec,
    /// Status.
    #[serde(default)]
    pub status: BindingStatus,
}

/// `ResourceBinding.spec`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BindingSpec {
    /// The resource template.
    pub resource: ObjectReference,
    /// Replicas of a single-template workload.
    #[serde(default)]
    pub replicas: i32,
    /// What each replica needs.
    #[serde(default)]
    pub replica_requirements: Option<Requirements>,
    /// The templates of a multi-template workload.
    #[serde(default)]
    pub components: Vec<Component>,
    /// Where it is placed.
    #[serde(default)]
    pub clusters: Vec<TargetCluster>,
    /// The placement of its policy, as it is.
    #[serde(default)]
    pub placement: Option<Value>,
    /// Clusters it is being evicted from.
    #[serde(default)]
    pub graceful_eviction_tasks: Vec<EvictionTask>,
    /// The scheduler it names.
    #[serde(default)]
    pub scheduler_name: String,
    /// A reschedule asked for at this time.
    #[serde(default)]
    pub reschedule_triggered_at: Option<Time>,
    /// Its scheduling priority.
    #[serde(default)]
    pub schedule_priority: Option<SchedulePriority>,
}

/// `spec.resource`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// apiVersion.
    #[serde(default)]
    pub api_version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// The template's resourceVersion the binding was made from.
    #[serde(default)]
    pub resource_version: Option<String>,
}

/// What one replica needs (`replicaRequirements`, of the binding or of a component).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Requirements {
    /// Node constraints.
    #[serde(default)]
    pub node_claim: Option<NodeClaim>,
    /// Requests.
    #[serde(default)]
    pub resource_request: BTreeMap<String, Quantity>,
    /// Priority class.
    #[serde(default)]
    pub priority_class_name: Option<String>,
}

/// `nodeClaim`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaim {
    /// Required node affinity.
    #[serde(default)]
    pub hard_node_affinity: Option<NodeSelector>,
    /// Node selector.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations of node taints.
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
}

/// One template of a multi-template workload.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Component {
    /// Its name (a Volcano Job's task name).
    pub name: String,
    /// How many replicas must run.
    #[serde(default)]
    pub replicas: i32,
    /// What each needs.
    #[serde(default)]
    pub replica_requirements: Option<Requirements>,
}

/// A placement target.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetCluster {
    /// Cluster.
    pub name: String,
    /// Replicas there (omitted when zero, as Karmada writes it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// A graceful-eviction task (only the cluster matters here).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictionTask {
    /// The cluster being evicted from.
    pub from_cluster: String,
}

/// `spec.schedulePriority`.
#[derive(Clone, Debug, Deserialize)]
pub struct SchedulePriority {
    /// Priority value.
    #[serde(default)]
    pub priority: i32,
}

/// `ResourceBinding.status`, the fields tephra reads.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BindingStatus {
    /// The generation last scheduled.
    #[serde(default)]
    pub scheduler_observed_generation: i64,
    /// The cluster affinity group the last scheduling used.
    #[serde(default, rename = "schedulerObservingAffinityName")]
    pub scheduler_observing_affinity_name: Option<String>,
    /// When it was last scheduled.
    #[serde(default)]
    pub last_scheduled_time: Option<Time>,
    /// Conditions.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The status of the workload in each member.
    #[serde(default)]
    pub aggregated_status: Vec<AggregatedStatusItem>,
}

/// One member's status of the workload.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AggregatedStatusItem {
    /// Cluster.
    pub cluster_name: String,
    /// Whether the Work was applied.
    #[serde(default)]
    pub applied: bool,
    /// `Healthy`, `Unhealthy` or `Unknown`.
    #[serde(default)]
    pub health: Option<String>,
    /// The workload's status there, as its interpreter reflects it.
    #[serde(default)]
    pub status: Option<Value>,
}

impl Binding {
    /// Reads a binding (a `ResourceBinding`, or a `ClusterResourceBinding`: no namespace)
    /// from its JSON.
    pub fn from_value(v: Value) -> Result<Self, KarmadaError> {
        let key = format!(
            "{}/{}",
            v["metadata"]["namespace"].as_str().unwrap_or_default(),
            v["metadata"]["name"].as_str().unwrap_or_default()
        );
        serde_json::from_value(v).map_err(|e| KarmadaError::Binding {
            key,
            message: e.to_string(),
        })
    }

    /// `namespace/name`; `/name` for a ClusterResourceBinding.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace(), self.name())
    }

    /// Whether it is a `ClusterResourceBinding`.
    pub fn cluster_scoped(&self) -> bool {
        self.metadata.namespace.as_deref().is_none_or(str::is_empty)
    }

    /// Its namespace; empty for a ClusterResourceBinding.
    pub fn namespace(&self) -> String {
        self.metadata.namespace.clone().unwrap_or_default()
    }

    /// Its name.
    pub fn name(&self) -> String {
        self.metadata.name.clone().unwrap_or_default()
    }

    /// The gang: each template's name, replicas and requirements.
    pub(super) fn gang(&self) -> Vec<(String, u32, Requirements)> {
        if !self.spec.components.is_empty() {
            return self
                .spec
                .components
                .iter()
                .map(|c| {
                    (
                        c.name.clone(),
                        u32::try_from(c.replicas).unwrap_or(0),
                        c.replica_requirements.clone().unwrap_or_default(),
                    )
                })
                .collect();
        }
        match u32::try_from(self.spec.replicas) {
            Ok(n) if n > 0 => vec![(
                "replica".to_string(),
                n,
                self.spec.replica_requirements.clone().unwrap_or_default(),
            )],
            _ => Vec::new(),
        }
    }

    /// Whether it is a workload (its replicas are scheduled), not a plain object duplicated
    /// to every cluster.
    pub fn is_workload(&self) -> bool {
        self.gang().iter().any(|(_, n, _)| *n > 0)
    }

    /// Why it must be (re)scheduled now, as karmada-scheduler decides: never placed, its
    /// placement changed since it was, its replicas no longer add up, a reschedule was asked
    /// for. `None`: it stays where it is.
    pub fn needs_scheduling(&self) -> Option<&'static str> {
        if self.metadata.deletion_timestamp.is_some() {
            return None;
        }
        if self.spec.clusters.is_empty() {
            return Some("not placed yet");
        }
        let applied = self
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(APPLIED_PLACEMENT))
            .and_then(|s| serde_json::from_str::<Value>(s).ok());
        if applied.as_ref() != Some(self.spec.placement.as_ref().unwrap_or(&Value::Null)) {
            return Some("its placement changed");
        }
        if self.spec.components.is_empty() && self.spec.replicas > 0 {
            let sum: i64 = self
                .spec
                .clusters
                .iter()
                .map(|c| i64::from(c.replicas))
                .sum();
            if sum != i64::from(self.spec.replicas) {
                return Some("its replicas changed");
            }
        }
        if let Some(asked) = &self.spec.reschedule_triggered_at
            && self
                .status
                .last_scheduled_time
                .as_ref()
                .is_none_or(|last| last.0 < asked.0)
        {
            return Some("a reschedule was asked for");
        }
        None
    }

    /// Karmada's ordered cluster affinity groups (`spec.placement.clusterAffinities`).
    pub fn affinity_groups(&self) -> &[Value] {
        self.spec
            .placement
            .as_ref()
            .and_then(|p| p["clusterAffinities"].as_array())
            .map_or(&[], Vec::as_slice)
    }

    /// The affinity group scheduling starts from, as karmada-scheduler starts: the one the
    /// last scheduling used (`status.schedulerObservingAffinityName`), else the first.
    pub fn first_affinity_group(&self) -> usize {
        let observed = self.status.scheduler_observing_affinity_name.as_deref();
        self.affinity_groups()
            .iter()
            .position(|g| observed.is_some() && g["affinityName"].as_str() == observed)
            .unwrap_or(0)
    }

    /// The name of affinity group `group`, when the binding has groups.
    pub fn affinity_name(&self, group: usize) -> Option<String> {
        Some(
            self.affinity_groups().get(group)?["affinityName"]
                .as_str()?
                .to_string(),
        )
    }

    /// The placement policy of its `spec.placement` (cluster affinity, tolerations, spread),
    /// never a cluster it is being evicted from; with `clusterAffinities`, that of the group
    /// scheduling starts from.
    pub fn policy(&self) -> Result<JobPolicy, KarmadaError> {
        self.policy_in(self.first_affinity_group())
    }

    /// [`Binding::policy`] with cluster affinity group `group` of `clusterAffinities` (ignored
    /// when the binding gives a `clusterAffinity` or no groups).
    pub fn policy_in(&self, group: usize) -> Result<JobPolicy, KarmadaError> {
        let bad = |message: String| KarmadaError::Binding {
            key: self.key(),
            message,
        };
        let mut placement: Placement = match &self.spec.placement {
            Some(p) => serde_json::from_value(p.clone())
                .map_err(|e| bad(format!("spec.placement: {e}")))?,
            None => Placement::default(),
        };
        if placement.cluster_affinity.is_none()
            && let Some(g) = self.affinity_groups().get(group)
        {
            placement.cluster_affinity = Some(
                serde_json::from_value(g.clone())
                    .map_err(|e| bad(format!("spec.placement.clusterAffinities[{group}]: {e}")))?,
            );
        }
        let mut policy = tephra_controllers::propagation::placement_policy(&placement)
            .map_err(|e| bad(e.to_string()))?;
        // Karmada places by its own spread rules; a gang of tephra's goes whole to one member.
        policy.spread.clear();
        policy.splittable = false;
        for t in &self.spec.graceful_eviction_tasks {
            if !policy.exclude.contains(&t.from_cluster) {
                policy.exclude.push(t.from_cluster.clone());
            }
        }
        Ok(policy)
    }

    pub(super) fn condition(&self, kind: &str) -> Option<&Condition> {
        self.status.conditions.iter().find(|c| c.type_ == kind)
    }
}

/// The Volcano Queue a resource template names: a Volcano Job's or PodGroup's `spec.queue`,
/// or the `scheduling.volcano.sh/queue-name` annotation of any other kind (as Volcano reads
/// it on a pod).
pub fn template_queue(template: &Value) -> Option<String> {
    let kind = template["kind"].as_str().unwrap_or_default();
    let api = template["apiVersion"].as_str().unwrap_or_default();
    let spec_queue = (kind == "Job" && api.starts_with("batch.volcano.sh/"))
        || (kind == "PodGroup" && api.starts_with("scheduling.volcano.sh/"));
    let named = if spec_queue {
        template["spec"]["queue"].as_str()
    } else {
        template["metadata"]["annotations"][QUEUE_ANNOTATION].as_str()
    };
    named.filter(|q| !q.is_empty()).map(str::to_string)
}

/// The PodGroup a workload template's pods name: `scheduling.k8s.io/group-name` on its pod
/// template (`spec.template`: a Deployment's, StatefulSet's, ReplicaSet's or Job's), or on a
/// Pod itself.
pub fn template_pod_group(template: &Value) -> Option<String> {
    let annotations = if template["kind"] == "Pod" {
        &template["metadata"]["annotations"]
    } else {
        &template["spec"]["template"]["metadata"]["annotations"]
    };
    annotations[tephra_api::well_known::GROUP_NAME_ANNOTATION]
        .as_str()
        .filter(|g| !g.is_empty())
        .map(str::to_string)
}

/// The annotation naming a Volcano Queue on objects without a `spec.queue`.
pub const QUEUE_ANNOTATION: &str = "scheduling.volcano.sh/queue-name";

/// A Karmada `Cluster` read as tephra's (the two share their fields; Karmada's deprecated
/// `spec.zone` counts as its one zone when `spec.zones` is empty).
pub fn cluster_from_value(mut v: Value) -> Result<ApiCluster, KarmadaError> {
    let name = v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let zone = v["spec"]["zone"].as_str().map(str::to_string);
    // Only the conditions of Karmada's status are read (its summaries have fields of their own).
    let conditions = v["status"]["conditions"].take();
    if let Some(o) = v.as_object_mut() {
        if conditions.is_null() {
            o.remove("status");
        } else {
            o.insert("status".into(), json!({ "conditions": conditions }));
        }
    }
    let mut c: ApiCluster = serde_json::from_value(v).map_err(|e| KarmadaError::Cluster {
        name,
        message: e.to_string(),
    })?;
    if c.spec.zones.is_empty()
        && let Some(z) = zone
    {
        c.spec.zones.push(z);
    }
    Ok(c)
}
