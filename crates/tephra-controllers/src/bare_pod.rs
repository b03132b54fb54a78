//! Volcano's PodGroup controller: a pod that one of our scheduler names places and that names
//! no PodGroup (a Deployment's, a StatefulSet's, a batch Job's, or a bare pod) gets one, so that
//! it is scheduled as a gang of its own (or of its owner's `scheduling.volcano.sh/group-min-member`).
//!
//! The PodGroup is `podgroup-<uid>`, the uid of the pod's controller (its ReplicaSet, ...) or of
//! the pod itself; it is owned by the pod's owners (else by the pod), so that it goes when they
//! go. minMember is 1 unless the owner says otherwise; minResources is the pod's requests times
//! minMember; the queue is the pod's `scheduling.volcano.sh/queue-name`; the priority class is
//! the pod's. Volcano's annotations (`volcano.sh/...`) of the owner are inherited, and the
//! pod's preemption, cooldown, revocable-zone, disruption-budget and network-topology hints are
//! carried over. The pod then gets `scheduling.k8s.io/group-name`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use tephra_api::batch::{NetworkTopologyMode, NetworkTopologySpec};
use tephra_api::well_known::{GROUP_NAME_ANNOTATION, PREEMPTABLE, QUEUE_NAME};
use tephra_api::{PodGroup, PodGroupSpec};
use tephra_scheduler::resources::{ResourceError, ResourceNames, format_quantity};

use crate::members::POD_QUEUE_ANNOTATION;
use crate::pod::{self, RequestError};

/// The prefix of the PodGroups this controller makes (Volcano's `podgroup-`).
pub const PODGROUP_PREFIX: &str = "podgroup-";
/// An owner's annotation giving the PodGroup's minMember.
pub const GROUP_MIN_MEMBER: &str = "scheduling.volcano.sh/group-min-member";
/// The annotations of an owner that the PodGroup inherits start with this.
pub const INHERITED_PREFIX: &str = "volcano.sh/";
/// The kinds whose annotations a PodGroup inherits (the owners Volcano reads).
pub const OWNER_KINDS: [&str; 4] = ["ReplicaSet", "StatefulSet", "DaemonSet", "Job"];

/// Pod hints that go to the PodGroup as annotations.
const CARRIED_ANNOTATIONS: [&str; 3] = [
    PREEMPTABLE,
    "volcano.sh/cooldown-time",
    "volcano.sh/revocable-zone",
];
/// Pod hints that go to the PodGroup as labels.
const CARRIED_LABELS: [&str; 2] = [PREEMPTABLE, "volcano.sh/cooldown-time"];
const JDB_MIN_AVAILABLE: &str = "volcano.sh/jdb-min-available";
const JDB_MAX_UNAVAILABLE: &str = "volcano.sh/jdb-max-unavailable";
const TOPOLOGY_MODE: &str = "volcano.sh/network-topology-mode";
const TOPOLOGY_TIER: &str = "volcano.sh/network-topology-highest-tier";

/// Why a pod's PodGroup cannot be made. Each names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BarePodError {
    /// The pod's requests cannot be read.
    #[error(transparent)]
    Requests(#[from] RequestError),
    /// The requests cannot be added up.
    #[error("spec.containers: {0}")]
    Resources(#[from] ResourceError),
}

/// Whether `pod` is one this controller gives a PodGroup: ours to schedule, naming none, and
/// not on its way out.
pub fn needs_group(pod: &Pod, ours: &[String]) -> bool {
    let name = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or("default-scheduler");
    let named = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(GROUP_NAME_ANNOTATION))
        .is_some_and(|g| !g.is_empty())
        // A pod of Kubernetes' own PodGroup (the Workload API) has its gang already.
        || pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_group.as_ref())
            .and_then(|g| g.pod_group_name.as_deref())
            .is_some_and(|g| !g.is_empty());
    ours.iter().any(|o| o == name) && !named && pod.metadata.deletion_timestamp.is_none()
}

/// The pod's controller, when it has one.
pub fn controller(pod: &Pod) -> Option<&OwnerReference> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// The name of the PodGroup `pod` belongs in: `podgroup-<uid>` of its controller, else of the
/// pod. Pods of one ReplicaSet share it.
pub fn group_name(pod: &Pod) -> String {
    let uid = match controller(pod) {
        Some(r) => r.uid.as_str(),
        None => pod.metadata.uid.as_deref().unwrap_or_default(),
    };
    format!("{PODGROUP_PREFIX}{uid}")
}

/// minMember from the owner's annotation; 1 when absent, unreadable or negative (as Volcano
/// does: the annotation never blocks a pod).
fn min_member(owner: &BTreeMap<String, String>) -> i32 {
    owner
        .get(GROUP_MIN_MEMBER)
        .and_then(|v| v.trim().parse::<i32>().ok())
        .filter(|m| *m >= 0)
        .unwrap_or(1)
}

fn network_topology(a: &BTreeMap<String, String>) -> Option<NetworkTopologySpec> {
    let mode = a.get(TOPOLOGY_MODE);
    let tier = a.get(TOPOLOGY_TIER);
    if mode.is_none() && tier.is_none() {
        return None;
    }
    let mode = match mode.map(|m| m.to_ascii_lowercase()).as_deref() {
        Some("soft") => NetworkTopologyMode::Soft,
        _ => NetworkTopologyMode::Hard,
    };
    Some(NetworkTopologySpec {
        mode: Some(mode),
        highest_tier_allowed: tier.and_then(|t| t.trim().parse().ok()),
        highest_tier_name: None,
    })
}

/// The PodGroup for `pod`, given the annotations of its owner (empty when it has none, or the
/// owner cannot be read).
pub fn podgroup(pod: &Pod, owner: &BTreeMap<String, String>) -> Result<PodGroup, BarePodError> {
    let meta = &pod.metadata;
    let empty = BTreeMap::new();
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    let min = min_member(owner);
    let spec = pod.spec.clone().unwrap_or_default();
    let requests = pod::requests(&spec, "")?;
    let mut names = ResourceNames::default();
    let one = names.parse(requests.iter().map(|(k, v)| (k.as_str(), v.0.as_str())))?;
    let total = one.times(i64::from(min));
    let min_resources: BTreeMap<String, Quantity> = (0..names.len())
        .filter(|&slot| total.get(slot) != 0)
        .map(|slot| {
            (
                names.name(slot).to_string(),
                Quantity(format_quantity(slot, total.get(slot))),
            )
        })
        .collect();
    let queue = annotations
        .get(POD_QUEUE_ANNOTATION)
        .or_else(|| labels.get(QUEUE_NAME))
        .filter(|q| !q.is_empty())
        .cloned();
    let mut pg = PodGroup::new(
        &group_name(pod),
        PodGroupSpec {
            min_member: Some(min),
            priority_class_name: spec.priority_class_name.clone(),
            min_resources: Some(min_resources),
            network_topology: network_topology(annotations),
            ..PodGroupSpec::default()
        },
    );
    if let Some(q) = queue {
        pg.spec.queue = q;
    }
    let mut pg_annotations: BTreeMap<String, String> = owner
        .iter()
        .filter(|(k, _)| k.starts_with(INHERITED_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for k in CARRIED_ANNOTATIONS {
        if let Some(v) = annotations.get(k) {
            pg_annotations.insert(k.to_string(), v.clone());
        }
    }
    if let Some(v) = annotations.get(JDB_MIN_AVAILABLE) {
        pg_annotations.insert(JDB_MIN_AVAILABLE.into(), v.clone());
    } else if let Some(v) = annotations.get(JDB_MAX_UNAVAILABLE) {
        pg_annotations.insert(JDB_MAX_UNAVAILABLE.into(), v.clone());
    }
    let pg_labels: BTreeMap<String, String> = CARRIED_LABELS
        .iter()
        .filter_map(|k| labels.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    pg.metadata.namespace = meta.namespace.clone();
    pg.metadata.annotations = (!pg_annotations.is_empty()).then_some(pg_annotations);
    pg.metadata.labels = (!pg_labels.is_empty()).then_some(pg_labels);
    pg.metadata.owner_references = Some(match controller(pod) {
        Some(_) => meta.owner_references.clone().unwrap_or_default(),
        None => vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }],
    });
    Ok(pg)
}

/// The owner whose annotations the PodGroup inherits: the first owner reference of a kind
/// Volcano reads, as `(apiVersion, kind, name)`.
pub fn annotated_owner(pod: &Pod) -> Option<(&str, &str, &str)> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| OWNER_KINDS.contains(&r.kind.as_str()) && !r.name.is_empty())
        .map(|r| (r.api_version.as_str(), r.kind.as_str(), r.name.as_str()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    fn pod(extra: serde_json::Value) -> Pod {
        let mut p = serde_json::json!({
            "metadata": {"name": "web-abc12", "namespace": "shop", "uid": "pod-uid"},
            "spec": {"schedulerName": "volcano", "priorityClassName": "high",
                "containers": [{"name": "c", "image": "nginx",
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}
        });
        if let (Some(m), Some(e)) = (p["metadata"].as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                m.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(p).expect("pod")
    }

    fn rs_owned() -> serde_json::Value {
        serde_json::json!({"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "name": "web-7f9", "uid": "rs-uid", "controller": true}]})
    }

    #[test]
    fn a_replica_sets_pods_share_one_podgroup_named_after_the_replica_set() {
        let p = pod(rs_owned());
        assert!(needs_group(&p, &["volcano".into()]));
        let pg = podgroup(&p, &BTreeMap::new()).expect("pg");
        assert_eq!(pg.metadata.name.as_deref(), Some("podgroup-rs-uid"));
        assert_eq!(pg.spec.min_member, Some(1));
        assert_eq!(pg.spec.queue, "default");
        assert_eq!(pg.spec.priority_class_name.as_deref(), Some("high"));
        let owners = pg.metadata.owner_references.expect("owners");
        assert_eq!(owners[0].kind, "ReplicaSet");
        let min = pg.spec.min_resources.expect("minResources");
        assert_eq!(min["cpu"].0, "500m");
        assert_eq!(min["memory"].0, "1Gi");
    }

    #[test]
    fn a_bare_pod_owns_its_podgroup() {
        let pg = podgroup(&pod(serde_json::json!({})), &BTreeMap::new()).expect("pg");
        assert_eq!(pg.metadata.name.as_deref(), Some("podgroup-pod-uid"));
        let owners = pg.metadata.owner_references.expect("owners");
        assert_eq!(
            (owners[0].kind.as_str(), owners[0].uid.as_str()),
            ("Pod", "pod-uid")
        );
    }

    #[test]
    fn the_owners_min_member_and_volcano_annotations_are_inherited() {
        let owner: BTreeMap<String, String> = [
            (GROUP_MIN_MEMBER, "3"),
            ("volcano.sh/sla-waiting-time", "10m"),
            ("deployment.kubernetes.io/revision", "2"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let pg = podgroup(&pod(rs_owned()), &owner).expect("pg");
        assert_eq!(pg.spec.min_member, Some(3));
        assert_eq!(pg.spec.min_resources.expect("min")["cpu"].0, "1500m");
        let a = pg.metadata.annotations.expect("annotations");
        assert_eq!(a["volcano.sh/sla-waiting-time"], "10m");
        assert!(!a.contains_key("deployment.kubernetes.io/revision"));
    }

    #[test]
    fn an_unreadable_min_member_falls_back_to_one() {
        for bad in ["-2", "three", ""] {
            let owner = BTreeMap::from([(GROUP_MIN_MEMBER.to_string(), bad.to_string())]);
            let pg = podgroup(&pod(rs_owned()), &owner).expect("pg");
            assert_eq!(pg.spec.min_member, Some(1), "{bad:?}");
        }
    }

    #[test]
    fn queue_preemption_and_topology_hints_come_from_the_pod() {
        let p = pod(serde_json::json!({"annotations": {
            "scheduling.volcano.sh/queue-name": "research",
            "volcano.sh/preemptable": "false",
            "volcano.sh/network-topology-mode": "Soft",
            "volcano.sh/network-topology-highest-tier": "2"}}));
        let pg = podgroup(&p, &BTreeMap::new()).expect("pg");
        assert_eq!(pg.spec.queue, "research");
        assert_eq!(
            pg.metadata.annotations.expect("a")["volcano.sh/preemptable"],
            "false"
        );
        let t = pg.spec.network_topology.expect("topology");
        assert_eq!(t.mode, Some(NetworkTopologyMode::Soft));
        assert_eq!(t.highest_tier_allowed, Some(2));
    }

    #[test]
    fn pods_of_other_schedulers_or_with_a_group_are_left_alone() {
        let ours = ["volcano".to_string()];
        let mut p = pod(serde_json::json!({}));
        p.spec.as_mut().expect("spec").scheduler_name = Some("default-scheduler".into());
        assert!(!needs_group(&p, &ours));
        let named = pod(serde_json::json!({"annotations": {"scheduling.k8s.io/group-name": "pg"}}));
        assert!(!needs_group(&named, &ours));
        // A pod of a Kubernetes PodGroup (the Workload API) is in a gang already: a PodGroup
        // of its own would make each pod a gang of one.
        let mut workload = pod(serde_json::json!({}));
        workload.spec.as_mut().expect("spec").scheduling_group =
            Some(k8s_openapi::api::core::v1::PodSchedulingGroup {
                pod_group_name: Some("workers".into()),
            });
        assert!(!needs_group(&workload, &ours));
    }

    #[test]
    fn a_malformed_request_is_an_error_naming_the_field() {
        let mut p = pod(serde_json::json!({}));
        let c = &mut p.spec.as_mut().expect("spec").containers[0];
        c.resources
            .as_mut()
            .expect("resources")
            .requests
            .as_mut()
            .expect("requests")
            .insert("cpu".into(), Quantity("lots".into()));
        let e = podgroup(&p, &BTreeMap::new()).expect_err("bad cpu");
        assert!(e.to_string().contains("spec.containers[0]"), "{e}");
    }
}
