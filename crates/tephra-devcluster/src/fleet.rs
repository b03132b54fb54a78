//! The one adapter to the simulator's scenario format: a scenario's `fleet` (clusters, node
//! pools, labels, taints) and `queues` become the devcluster's members, nodes and Queue objects,
//! and `run.podStartDelay` the kubelets' start delay. Nothing else reads `tephra_scenario` types.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tephra_scenario::{ClusterDef, Effect, NodePool, Scenario, TaintDef, objects};

use crate::error::Error;
use crate::kubelet::NodeSpec;

/// One member cluster.
#[derive(Clone, Debug, Default)]
pub struct MemberSpec {
    /// Name (also its kubeconfig context).
    pub name: String,
    /// Cluster labels.
    pub labels: BTreeMap<String, String>,
    /// Provider.
    pub provider: Option<String>,
    /// Region.
    pub region: Option<String>,
    /// Zone.
    pub zone: Option<String>,
    /// Cluster taints (`{key, value, effect}`).
    pub taints: Vec<Value>,
    /// Price per resource-hour.
    pub price: BTreeMap<String, f64>,
    /// Its nodes.
    pub nodes: Vec<NodeSpec>,
    /// What it declares besides its nodes (StorageClasses, local PersistentVolumes,
    /// DeviceClasses, ResourceSlices), created once its nodes are registered.
    pub objects: Vec<Value>,
}

/// A fleet: members, queues, and the pod start delay.
#[derive(Clone, Debug, Default)]
pub struct FleetSpec {
    /// Members.
    pub members: Vec<MemberSpec>,
    /// Queue manifests (`scheduling.volcano.sh/v1beta1`).
    pub queues: Vec<Value>,
    /// From bind to Running.
    pub start_delay: Option<Duration>,
}

/// Reads a scenario file's fleet.
pub fn load(path: &Path) -> Result<FleetSpec, Error> {
    let s = Scenario::load(path).map_err(|e| Error::Fleet(e.to_string()))?;
    from_scenario(&s)
}

/// Reads a fleet from scenario text (`source` names it in errors).
pub fn parse(text: &str, source: &str) -> Result<FleetSpec, Error> {
    let s =
        Scenario::parse(text, source, Path::new(".")).map_err(|e| Error::Fleet(e.to_string()))?;
    from_scenario(&s)
}

fn effect(e: Effect) -> &'static str {
    match e {
        Effect::NoSchedule => "NoSchedule",
        Effect::PreferNoSchedule => "PreferNoSchedule",
        Effect::NoExecute => "NoExecute",
    }
}

fn taint(t: &TaintDef) -> Value {
    let mut v = json!({"key": t.key, "effect": effect(t.effect)});
    if !t.value.is_empty() {
        v["value"] = json!(t.value);
    }
    v
}

fn nodes(cluster: &ClusterDef, pool: &NodePool) -> Vec<NodeSpec> {
    (0..pool.count)
        .map(|i| NodeSpec {
            name: objects::node_name(cluster, pool, i),
            labels: objects::node_labels(cluster, pool, i),
            taints: pool.taints.iter().map(taint).collect(),
            capacity: objects::pool_capacity(pool),
            annotations: objects::node_annotations(cluster, pool, i),
        })
        .collect()
}

/// The devcluster's view of a scenario.
pub fn from_scenario(s: &Scenario) -> Result<FleetSpec, Error> {
    if s.fleet.from_trace.is_some() {
        return Err(Error::Fleet(format!(
            "{}: fleet.fromTrace is not supported by the devcluster; list the clusters and node pools",
            s.source
        )));
    }
    let members = s
        .fleet
        .clusters
        .iter()
        .map(|c| MemberSpec {
            name: c.name.clone(),
            labels: c.labels.clone(),
            provider: c.provider.clone(),
            region: c.region.clone(),
            zone: c.zone.clone(),
            taints: c.taints.iter().map(taint).collect(),
            price: c.price.clone(),
            nodes: c.node_pools.iter().flat_map(|p| nodes(c, p)).collect(),
            objects: objects::objects(c),
        })
        .collect();
    let resources = |r: &BTreeMap<String, tephra_scenario::Qty>| -> Value {
        r.iter().map(|(k, q)| (k.clone(), json!(q.0))).collect()
    };
    let queues = s
        .queues
        .iter()
        .map(|q| {
            let mut spec = json!({});
            if let Some(w) = q.weight {
                spec["weight"] = json!(w);
            }
            if let Some(c) = &q.capability {
                spec["capability"] = resources(c);
            }
            if let Some(g) = &q.guarantee {
                spec["guarantee"] = json!({"resource": resources(g)});
            }
            if let Some(d) = &q.deserved {
                spec["deserved"] = resources(d);
            }
            if let Some(r) = q.reclaimable {
                spec["reclaimable"] = json!(r);
            }
            if let Some(p) = &q.parent {
                spec["parent"] = json!(p);
            }
            if let Some(p) = q.priority {
                spec["priority"] = json!(p);
            }
            if let Some(d) = &q.dequeue_strategy {
                spec["dequeueStrategy"] = json!(d);
            }
            json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                   "metadata": {"name": q.name}, "spec": spec})
        })
        .collect();
    Ok(FleetSpec {
        members,
        queues,
        start_delay: Some(Duration::from_millis(s.run.pod_start_delay.0.max(0) as u64)),
    })
}
