//! Pods declared on the control plane (fleet mode): each is kept, as compact JSON, for as long
//! as it exists; it is offered to the session until a member has a copy, placed again when the
//! copy is gone, and its copy's phase, cluster and node are reported on it (the cluster also
//! as its `tephra.io/member` label, written only when it changes).

use std::collections::{HashMap, HashSet};

use crate::writes::{DeclaredPod, Write};

/// The declared pods, which of them a member has, and what was reported on them.
#[derive(Default)]
pub(super) struct DeclaredPods {
    /// Pods declared on the control plane, by key.
    pub(super) pods: HashMap<String, DeclaredPod>,
    /// Keys of pods some member has: the member's copy is the one that counts.
    pub(super) mirrored: HashSet<String>,
    /// What was last reported on each declared pod: phase and `cluster/node`.
    pub(super) aggregated: HashMap<String, (String, String)>,
    /// The member each declared pod's `tephra.io/member` label names, as last seen on it or
    /// last written.
    pub(super) labelled: HashMap<String, String>,
    /// Declared pods' status writes not handed out yet.
    pub(super) status_writes: Vec<Write>,
}

impl DeclaredPods {
    /// The declared pod `key`, unless a member already has it.
    pub(super) fn unplaced(&self, key: &str) -> Option<&DeclaredPod> {
        if self.mirrored.contains(key) {
            return None;
        }
        self.pods.get(key)
    }

    /// The declared pod `key` was seen with its member label naming `member` (or none).
    pub(super) fn label_seen(&mut self, key: &str, member: Option<&str>) {
        self.remember_label(key, member);
    }

    /// Keeps that the member label of `key` names `member`; false when it did already.
    fn remember_label(&mut self, key: &str, member: Option<&str>) -> bool {
        if self.labelled.get(key).map(String::as_str) == member {
            return false;
        }
        match member {
            Some(m) => self.labelled.insert(key.to_string(), m.to_string()),
            None => self.labelled.remove(key),
        };
        true
    }

    /// The declared pod `key` is gone: nothing is kept of it.
    pub(super) fn forget(&mut self, key: &str) {
        self.pods.remove(key);
        self.aggregated.remove(key);
        self.labelled.remove(key);
    }

    /// Writes the member label of the declared pod `key` if it does not name `member` yet.
    fn label(&mut self, key: &str, member: Option<&str>) {
        if !self.remember_label(key, member) {
            return;
        }
        let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
        self.status_writes.push(Write::DeclaredMember {
            namespace: namespace.to_string(),
            name: name.to_string(),
            member: member.map(str::to_string),
        });
    }

    /// The copy of the declared pod `key` no longer counts (`reason`, `message`): if where it
    /// ran was reported on the pod, the pod now says that it waits to be placed again.
    pub(super) fn waits_again(&mut self, key: &str, reason: &str, message: String) {
        self.label(key, None);
        if self.aggregated.remove(key).is_none() {
            return;
        }
        let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
        self.status_writes.push(Write::DeclaredStatus {
            namespace: namespace.to_string(),
            name: name.to_string(),
            status: serde_json::json!({
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False",
                    "reason": reason, "message": message}],
            }),
        });
    }

    /// A member's copy of a declared pod changed: its phase, cluster and node, its containers'
    /// statuses and its `Ready` conditions are reported on the declared pod's status (once per
    /// change), so that the control plane shows where and how it runs (`kubectl get pods`
    /// READY included).
    pub(super) fn aggregate(
        &mut self,
        key: &str,
        cluster: &str,
        p: &k8s_openapi::api::core::v1::Pod,
    ) {
        let Some(declared) = self.pods.get(key) else {
            return;
        };
        // An old copy, of a pod of the same name before this one, says nothing of this one.
        if let (Some(Some(copy)), Some(uid)) = (super::copies::copy_of(p), declared.uid())
            && copy != uid
        {
            return;
        }
        let phase = p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".into());
        let node = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let containers = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.clone())
            .unwrap_or_default();
        let ready_conditions: Vec<serde_json::Value> = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .filter(|c| c.type_ == "Ready" || c.type_ == "ContainersReady")
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect();
        let ready = containers.iter().filter(|c| c.ready).count();
        let seen = (
            phase.clone(),
            format!("{cluster}/{node} {ready}/{}", containers.len()),
        );
        self.label(key, Some(cluster));
        if self.aggregated.get(key) == Some(&seen) {
            return;
        }
        self.aggregated.insert(key.to_string(), seen);
        let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
        // Scheduled only once the copy has a node: under `bindingMode: Extender` the member's
        // kube-scheduler binds it, and until then it waits there.
        let condition = if node.is_empty() {
            let scheduler = p
                .spec
                .as_ref()
                .and_then(|s| s.scheduler_name.as_deref())
                .unwrap_or("default-scheduler");
            let planned = p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(tephra_api::well_known::PLANNED_NODE))
                .map(String::as_str)
                .unwrap_or_default();
            serde_json::json!({"type": "PodScheduled", "status": "False",
                "reason": "WaitingInMember",
                "message": format!("created in member cluster {cluster}; waits for its kube-scheduler ({scheduler}) to bind it to node {planned}")})
        } else {
            use tephra_api::well_known::placed;
            serde_json::json!({"type": "PodScheduled", "status": "True",
                "reason": placed::REASON,
                "message": placed::message(cluster, &node, namespace, name)})
        };
        let mut conditions = vec![condition];
        conditions.extend(ready_conditions);
        let mut status = serde_json::json!({"phase": phase, "conditions": conditions});
        if !containers.is_empty() {
            status["containerStatuses"] = serde_json::to_value(&containers).unwrap_or_default();
        }
        self.status_writes.push(Write::DeclaredStatus {
            namespace: namespace.to_string(),
            name: name.to_string(),
            status,
        });
    }
}
