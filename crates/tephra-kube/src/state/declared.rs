//! Pods declared on the control plane (fleet mode): each is kept, as compact JSON, for as long
//! as it exists; it is offered to the session until a member has a copy, placed again when the
//! copy is gone, and its copy's phase, cluster and node are reported on it.

use std::sync::Arc;

use super::{State, StateError};
use crate::watch::Obj;
use crate::writes::DeclaredPod;

impl State {
    /// The declared pod `key` (fleet mode) waits to be placed again, if it is still declared.
    pub(super) fn declare_again(&mut self, key: &str) -> Result<(), StateError> {
        let Some(kept) = self.declared.get(key) else {
            return Ok(());
        };
        let pod = kept.pod().map_err(|e| StateError::Declared {
            pod: key.to_string(),
            source: e,
        })?;
        let control = self.control.clone().unwrap_or_else(|| Arc::from(""));
        self.upsert(0, &control, Obj::Pod(Box::new(pod)))
    }

    /// The declared pod `key` (fleet mode), unless a member already has it.
    pub fn declared(&self, key: &str) -> Option<&DeclaredPod> {
        if self.mirrored.contains(key) {
            return None;
        }
        self.declared.get(key)
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
        let Some(declared) = self.declared.get(key) else {
            return;
        };
        // An old copy, of a pod of the same name before this one, says nothing of this one.
        if let (Some(Some(copy)), Some(uid)) = (super::orphans::copy_of(p), declared.uid())
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
            serde_json::json!({"type": "PodScheduled", "status": "True",
                "reason": "PlacedInMember",
                "message": format!("running in member cluster {cluster} on node {node}")})
        };
        let mut conditions = vec![condition];
        conditions.extend(ready_conditions);
        let mut status = serde_json::json!({"phase": phase, "conditions": conditions});
        if !containers.is_empty() {
            status["containerStatuses"] = serde_json::to_value(&containers).unwrap_or_default();
        }
        self.status_writes
            .push(crate::writes::Write::DeclaredStatus {
                namespace: namespace.to_string(),
                name: name.to_string(),
                status,
            });
    }

    /// The status writes for declared pods that [`State::apply`] found due.
    pub fn take_status_writes(&mut self) -> Vec<crate::writes::Write> {
        std::mem::take(&mut self.status_writes)
    }
}
