//! A small ResourceClaim controller, one per member API server, doing what
//! kube-controller-manager's `resourceclaim` controller does as far as a scheduler depends on
//! it:
//!
//! - a pod whose `spec.resourceClaims[]` names a `resourceClaimTemplateName` gets its own claim
//!   from the template, `<pod>-<claim>-<five characters>`, owned by the pod and annotated with
//!   `resource.kubernetes.io/pod-claim-name`, recorded in the pod's
//!   `status.resourceClaimStatuses`;
//! - a claim's `status.reservedFor` loses the pods that are gone, finished or deleted before
//!   they were scheduled; a claim whose reservations that drops to none is deallocated (its
//!   allocation and the `delete-protection` finalizer removed), as Kubernetes does for claims
//!   the scheduler allocated; a claim reserved for nobody already stays allocated until it is
//!   deleted;
//! - an allocated claim of a pod that is on a node already (made with `spec.nodeName`, bound by
//!   something else than a scheduler that reserves claims) is reserved for it;
//! - a generated claim whose pod is gone is deleted.
//!
//! Claims and pods are reconciled whenever either changes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::{ApiServer, DeleteOpts, Scope, WriteOpts};
use crate::resource::Builtin;
use crate::status::ApiError;
use crate::store::{Obj, key_of};

const POD_CLAIM_NAME: &str = "resource.kubernetes.io/pod-claim-name";
const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

fn text<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// Starts the ResourceClaim controller of `api`.
pub fn start(api: Arc<ApiServer>) -> crate::controller::Controller {
    crate::controller::Controller::start(api, &[Builtin::Pod, Builtin::ResourceClaim], |api| {
        Claims { api }.reconcile()
    })
}

struct Claims<'a> {
    api: &'a ApiServer,
}

impl Claims<'_> {
    fn list(&self, kind: Builtin) -> Vec<Obj> {
        crate::controller::list(self.api, kind)
    }

    fn reconcile(&self) {
        let pods = self.list(Builtin::Pod);
        for p in &pods {
            if let Err(e) = self
                .generate(&p.value)
                .and_then(|()| self.reserve_bound(&p.value))
                && !matches!(e.code, 404 | 409 | 422)
            {
                tracing::warn!(server = %self.api.name, pod = %text(&p.value, "/metadata/name"),
                    error = %e, "claim controller: pod not reconciled");
            }
        }
        // Pods that may still use a claim: not finished, not gone, not deleted before they
        // were scheduled.
        let live: BTreeMap<String, String> = pods
            .iter()
            .filter(|p| !matches!(text(&p.value, "/status/phase"), "Succeeded" | "Failed"))
            .filter(|p| {
                p.value.pointer("/metadata/deletionTimestamp").is_none()
                    || !text(&p.value, "/spec/nodeName").is_empty()
            })
            .map(|p| {
                (
                    text(&p.value, "/metadata/uid").to_string(),
                    text(&p.value, "/metadata/namespace").to_string(),
                )
            })
            .collect();
        let all_uids: BTreeSet<&str> = pods.iter().map(|p| p.uid()).collect();
        for c in self.list(Builtin::ResourceClaim) {
            let _ = self.release(&c.value, &live);
            // A generated claim whose owner pod is gone goes with it.
            let owner = c
                .value
                .pointer("/metadata/ownerReferences/0/uid")
                .and_then(Value::as_str);
            let generated = c
                .value
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(POD_CLAIM_NAME))
                .is_some();
            if generated
                && owner.is_some_and(|u| !all_uids.contains(u))
                && c.value.pointer("/metadata/deletionTimestamp").is_none()
            {
                let def = self.api.builtin(Builtin::ResourceClaim);
                let _ = self.api.delete(&def, &c.key(), &DeleteOpts::default());
            }
        }
    }

    /// Reserves the allocated claims of a pod that is on a node already (bound by something
    /// else than a scheduler that reserves them, or made with `spec.nodeName`) for it, as
    /// kube-controller-manager's controller does, so that its kubelet can prepare them.
    fn reserve_bound(&self, pod: &Value) -> Result<(), ApiError> {
        if text(pod, "/spec/nodeName").is_empty()
            || pod.pointer("/metadata/deletionTimestamp").is_some()
            || matches!(text(pod, "/status/phase"), "Succeeded" | "Failed")
        {
            return Ok(());
        }
        let ns = text(pod, "/metadata/namespace").to_string();
        let uid = text(pod, "/metadata/uid").to_string();
        let generated: BTreeMap<&str, &str> = pod
            .pointer("/status/resourceClaimStatuses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|s| (text(s, "/name"), text(s, "/resourceClaimName")))
            .collect();
        let def = self.api.builtin(Builtin::ResourceClaim);
        for rc in pod
            .pointer("/spec/resourceClaims")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let named = text(rc, "/resourceClaimName");
            let claim = if named.is_empty() {
                generated
                    .get(text(rc, "/name"))
                    .copied()
                    .unwrap_or_default()
            } else {
                named
            };
            if claim.is_empty() {
                continue;
            }
            let key = (ns.clone(), claim.to_string());
            let Some(c) = self.api.store.get(&def.storage_key(), &key) else {
                continue;
            };
            let reserved = c
                .value
                .pointer("/status/reservedFor")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if c.value.pointer("/status/allocation").is_none()
                || reserved.iter().any(|r| text(r, "/uid") == uid)
                || reserved.len() >= 256
            {
                continue;
            }
            let entry =
                json!({"resource": "pods", "name": text(pod, "/metadata/name"), "uid": uid});
            self.extend_status_list(Builtin::ResourceClaim, &key, "reservedFor", &mut |list| {
                if !list.iter().any(|r| text(r, "/uid") == uid) {
                    list.push(entry.clone());
                }
            })?;
        }
        Ok(())
    }

    /// Changes the list `field` of the status of the `which` object at `key` with `change`.
    fn extend_status_list(
        &self,
        which: Builtin,
        key: &crate::store::Key,
        field: &str,
        change: &mut dyn FnMut(&mut Vec<Value>),
    ) -> Result<(), ApiError> {
        let def = self.api.builtin(which);
        self.api.update(
            &def,
            key,
            Scope::Status,
            &WriteOpts::default(),
            &mut |cur| {
                let mut n = cur.clone();
                let mut list = n
                    .pointer(&format!("/status/{field}"))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                change(&mut list);
                n["status"][field] = json!(list);
                Ok(n)
            },
        )?;
        Ok(())
    }

    /// Creates the claims a pod's templates call for and records them on the pod.
    fn generate(&self, pod: &Value) -> Result<(), ApiError> {
        if pod.pointer("/metadata/deletionTimestamp").is_some()
            || matches!(text(pod, "/status/phase"), "Succeeded" | "Failed")
        {
            return Ok(());
        }
        let recorded: BTreeSet<String> = pod
            .pointer("/status/resourceClaimStatuses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|s| text(s, "/name").to_string())
            .collect();
        let ns = text(pod, "/metadata/namespace").to_string();
        let pod_name = text(pod, "/metadata/name").to_string();
        let mut made = Vec::new();
        for rc in pod
            .pointer("/spec/resourceClaims")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = text(rc, "/name");
            let template = text(rc, "/resourceClaimTemplateName");
            if template.is_empty() || recorded.contains(name) {
                continue;
            }
            let templates = self.api.builtin(Builtin::ResourceClaimTemplate);
            let Some(t) = self.api.store.get(
                &templates.storage_key(),
                &(ns.clone(), template.to_string()),
            ) else {
                continue;
            };
            let mut meta = t
                .value
                .pointer("/spec/metadata")
                .cloned()
                .unwrap_or(json!({}));
            meta["namespace"] = json!(ns);
            meta["generateName"] = json!(format!("{pod_name}-{name}-"));
            meta["annotations"][POD_CLAIM_NAME] = json!(name);
            meta["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod", "name": pod_name,
                "uid": text(pod, "/metadata/uid"), "controller": true, "blockOwnerDeletion": true}]);
            let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": meta, "spec": t.value.pointer("/spec/spec").cloned().unwrap_or(json!({}))});
            let def = self.api.builtin(Builtin::ResourceClaim);
            let created = self
                .api
                .create(&def, Some(&ns), claim, &WriteOpts::default())?;
            made.push(json!({"name": name, "resourceClaimName": text(&created.obj.value, "/metadata/name")}));
        }
        if made.is_empty() {
            return Ok(());
        }
        self.extend_status_list(
            Builtin::Pod,
            &key_of(pod),
            "resourceClaimStatuses",
            &mut |list| {
                list.extend(made.iter().cloned());
            },
        )?;
        Ok(())
    }

    /// Drops a claim's reservations for pods that are gone, replaced, finished, or deleted
    /// before they were scheduled, as kube-controller-manager's `resourceclaim` controller
    /// does; the reservations dropping to none deallocate a claim the scheduler allocated (its
    /// `delete-protection` finalizer). A claim that was reserved for nobody already keeps its
    /// allocation (the scheduler may have written it before its pod's reservation, and a
    /// scheduler's Unreserve leaves it allocated); a deleted one reserved for nobody loses its
    /// allocation and the finalizer, so it can go.
    fn release(&self, claim: &Value, live: &BTreeMap<String, String>) -> Result<(), ApiError> {
        let reserved: Vec<Value> = claim
            .pointer("/status/reservedFor")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let kept: Vec<Value> = reserved
            .iter()
            .filter(|r| text(r, "/resource") != "pods" || live.contains_key(text(r, "/uid")))
            .cloned()
            .collect();
        let protected = claim
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x.as_str() == Some(DELETE_PROTECTION)));
        let allocated = claim.pointer("/status/allocation").is_some();
        let deleting = claim.pointer("/metadata/deletionTimestamp").is_some();
        let dropped = kept.len() < reserved.len();
        // Unused now: by the transition, or deleted while unused.
        let unused = kept.is_empty() && (dropped || deleting);
        let deallocate = unused && allocated && protected;
        let unprotect = unused && protected;
        if !(dropped || deallocate || unprotect) {
            return Ok(());
        }
        let def = self.api.builtin(Builtin::ResourceClaim);
        let key = key_of(claim);
        if dropped || deallocate {
            self.api.update(
                &def,
                &key,
                Scope::Status,
                &WriteOpts::default(),
                &mut |cur| {
                    let mut n = cur.clone();
                    n["status"]["reservedFor"] = json!(kept);
                    if let Some(s) = n.get_mut("status").and_then(Value::as_object_mut) {
                        if kept.is_empty() {
                            s.remove("reservedFor");
                        }
                        if deallocate {
                            s.remove("allocation");
                        }
                    }
                    Ok(n)
                },
            )?;
        }
        if unprotect {
            self.api
                .update(&def, &key, Scope::Main, &WriteOpts::default(), &mut |cur| {
                    let mut n = cur.clone();
                    if let Some(f) = n
                        .pointer_mut("/metadata/finalizers")
                        .and_then(Value::as_array_mut)
                    {
                        f.retain(|x| x.as_str() != Some(DELETE_PROTECTION));
                    }
                    Ok(n)
                })?;
        }
        Ok(())
    }
}
