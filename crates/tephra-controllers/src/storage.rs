//! A member's storage objects as the scheduler cache sees them, for every reader (the
//! Kubernetes runtime, the simulator): StorageClasses, PersistentVolumes,
//! PersistentVolumeClaims and CSINodes become the core's storage model
//! ([`tephra_scheduler::model::volumes`]), or an error that names the object and field.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelectorTerm, PersistentVolume as K8sPv, PersistentVolumeClaim as K8sPvc,
};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass as K8sClass};
use tephra_scheduler::cache::StorageChange;
use tephra_scheduler::model::{
    AccessModes, ClaimRef, PersistentVolume, Requirement, SelectorOp, StorageClass, VolumeClaim,
};

/// The annotation that names a claim's or volume's class before `storageClassName` existed;
/// it still wins when present, as in Kubernetes.
pub const BETA_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";
/// Set by the PV controller once a claim is bound to its volume.
pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// The node a `WaitForFirstConsumer` claim is provisioned for, set by the scheduler.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Set on a volume the scheduler or the PV controller bound to a claim.
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";

/// Why a storage object cannot be read. Each names the object and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {name}: {field}: {message}")]
pub struct StorageError {
    /// `persistentvolume`, `persistentvolumeclaim`, ...
    pub kind: &'static str,
    /// The object's name (`namespace/name` when namespaced).
    pub name: String,
    /// The field.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn bytes(
    q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
) -> Result<i64, String> {
    match q {
        None => Ok(0),
        Some(q) => tephra_scheduler::quantity::parse_scaled(&q.0, 1)
            .map_err(|e| format!("{:?} is not a quantity: {e}", q.0)),
    }
}

fn modes(list: Option<&Vec<String>>) -> Result<AccessModes, String> {
    AccessModes::parse(list.into_iter().flatten().map(String::as_str))
        .map_err(|m| format!("unknown access mode {m:?} (known: ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod)"))
}

fn class_of(annotations: Option<&BTreeMap<String, String>>, spec_class: Option<&String>) -> String {
    annotations
        .and_then(|a| a.get(BETA_CLASS_ANNOTATION))
        .or(spec_class)
        .cloned()
        .unwrap_or_default()
}

/// Node selector terms as the volume binder matches them: from node labels only, so a term
/// that names fields (`matchFields`) matches no node.
fn terms(list: &[NodeSelectorTerm]) -> Result<Vec<Vec<Requirement>>, String> {
    let mut out = Vec::new();
    for term in list {
        let mut reqs = Vec::new();
        for e in term.match_expressions.iter().flatten() {
            let op = SelectorOp::parse(&e.operator)
                .ok_or_else(|| format!("unknown operator {:?}", e.operator))?;
            reqs.push(Requirement {
                key: e.key.clone(),
                op,
                values: e.values.clone().unwrap_or_default(),
            });
        }
        if term.match_fields.as_ref().is_some_and(|f| !f.is_empty()) || reqs.is_empty() {
            // Never matches: In with no values.
            reqs.push(Requirement {
                key: "metadata.name".into(),
                op: SelectorOp::In,
                values: Vec::new(),
            });
        }
        out.push(reqs);
    }
    Ok(out)
}

/// A StorageClass.
pub fn class(c: &K8sClass) -> StorageClass {
    StorageClass {
        name: c.metadata.name.clone().unwrap_or_default(),
        provisioner: c.provisioner.clone(),
        wait_for_first_consumer: c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer"),
        allowed_topologies: c
            .allowed_topologies
            .iter()
            .flatten()
            .map(|t| {
                t.match_label_expressions
                    .iter()
                    .flatten()
                    .map(|e| (e.key.clone(), e.values.clone()))
                    .collect()
            })
            .collect(),
    }
}

/// A PersistentVolume.
pub fn volume(pv: &K8sPv) -> Result<PersistentVolume, StorageError> {
    let name = pv.metadata.name.clone().unwrap_or_default();
    let bad = |field: &str, message: String| StorageError {
        kind: "persistentvolume",
        name: name.clone(),
        field: field.into(),
        message,
    };
    let spec = pv.spec.clone().unwrap_or_default();
    let node_affinity = match spec
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.as_ref())
    {
        Some(sel) => terms(&sel.node_selector_terms)
            .map_err(|m| bad("spec.nodeAffinity.required.nodeSelectorTerms", m))?,
        None => Vec::new(),
    };
    Ok(PersistentVolume {
        labels: pv.metadata.labels.clone().unwrap_or_default(),
        class: class_of(
            pv.metadata.annotations.as_ref(),
            spec.storage_class_name.as_ref(),
        ),
        capacity: bytes(spec.capacity.as_ref().and_then(|c| c.get("storage")))
            .map_err(|m| bad("spec.capacity.storage", m))?,
        access_modes: modes(spec.access_modes.as_ref()).map_err(|m| bad("spec.accessModes", m))?,
        block: spec.volume_mode.as_deref() == Some("Block"),
        node_affinity,
        claim: spec.claim_ref.as_ref().map(|r| ClaimRef {
            namespace: r.namespace.clone().unwrap_or_default(),
            name: r.name.clone().unwrap_or_default(),
        }),
        available: pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available"),
        deleting: pv.metadata.deletion_timestamp.is_some(),
        csi: spec
            .csi
            .as_ref()
            .map(|c| (c.driver.clone(), c.volume_handle.clone())),
        name,
    })
}

/// A PersistentVolumeClaim.
pub fn claim(pvc: &K8sPvc) -> Result<VolumeClaim, StorageError> {
    let namespace = pvc
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let name = pvc.metadata.name.clone().unwrap_or_default();
    let bad = |field: &str, message: String| StorageError {
        kind: "persistentvolumeclaim",
        name: format!("{namespace}/{name}"),
        field: field.into(),
        message,
    };
    let spec = pvc.spec.clone().unwrap_or_default();
    let annotations = pvc.metadata.annotations.as_ref();
    let volume = spec.volume_name.clone().filter(|v| !v.is_empty());
    let selector = spec
        .selector
        .as_ref()
        .map(|s| crate::pod::label_selector(s, "spec.selector"))
        .transpose()
        .map_err(|e| bad(&e.field, format!("unknown value {:?}", e.value)))?;
    Ok(VolumeClaim {
        class: class_of(annotations, spec.storage_class_name.as_ref()),
        request: bytes(
            spec.resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("storage")),
        )
        .map_err(|m| bad("spec.resources.requests.storage", m))?,
        access_modes: modes(spec.access_modes.as_ref()).map_err(|m| bad("spec.accessModes", m))?,
        block: spec.volume_mode.as_deref() == Some("Block"),
        bound: volume.is_some() && annotations.is_some_and(|a| a.contains_key(BIND_COMPLETED)),
        volume,
        selected_node: annotations.and_then(|a| a.get(SELECTED_NODE)).cloned(),
        selector,
        lost: pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost"),
        deleting: pvc.metadata.deletion_timestamp.is_some(),
        namespace,
        name,
    })
}

/// A CSINode's attach limits, by driver (drivers without a limit are left out).
pub fn attach_limits(n: &CSINode) -> StorageChange {
    let limits = n
        .spec
        .drivers
        .iter()
        .filter_map(|d| {
            let count = d.allocatable.as_ref()?.count?;
            Some((d.name.clone(), u32::try_from(count).unwrap_or(0)))
        })
        .collect();
    StorageChange::AttachLimits {
        node: n.metadata.name.clone().unwrap_or_default(),
        limits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_claim_is_bound_only_once_the_pv_controller_says_so() {
        let mut pvc: K8sPvc = serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "ml",
                         "annotations": {"volume.kubernetes.io/selected-node": "n1"}},
            "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOncePod"],
                     "resources": {"requests": {"storage": "10Gi"}}, "volumeName": "pv-1"}
        }))
        .unwrap();
        let c = claim(&pvc).unwrap();
        assert_eq!((c.request, c.bound), (10 << 30, false));
        assert!(c.access_modes.once_pod());
        assert_eq!(c.selected_node.as_deref(), Some("n1"));
        pvc.metadata
            .annotations
            .get_or_insert_default()
            .insert(BIND_COMPLETED.into(), "yes".into());
        assert!(claim(&pvc).unwrap().bound);
    }

    #[test]
    fn a_bad_access_mode_names_the_field() {
        let pvc: K8sPvc = serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "ml"},
            "spec": {"accessModes": ["ReadWriteSometimes"]}
        }))
        .unwrap();
        let e = claim(&pvc).unwrap_err();
        assert_eq!(e.field, "spec.accessModes");
        assert!(e.to_string().contains("ReadWriteSometimes"), "{e}");
    }

    #[test]
    fn a_volume_term_naming_fields_matches_no_node() {
        let pv: K8sPv = serde_json::from_value(json!({
            "metadata": {"name": "pv"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}},
            "status": {"phase": "Available"}
        }))
        .unwrap();
        let v = volume(&pv).unwrap();
        let labels = BTreeMap::from([("kubernetes.io/hostname".to_string(), "n1".to_string())]);
        assert!(!v.node_allows(&labels));
        assert!(v.available);
    }
}
