//! The kubelet's Dynamic Resource Allocation manager, as far as it decides whether a pod can
//! start: each of the pod's ResourceClaims must exist and be reserved for the pod (which an
//! unallocated claim never is). Until then the pod stays `Pending` (ContainerCreating) and a
//! `FailedPrepareDynamicResources` Event says why, in the kubelet's words.

use serde_json::Value;

use crate::api::ApiServer;
use crate::resource::Builtin;

fn text<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// Why the pod's claims cannot be prepared yet, as the Event says it; `None` when they can.
pub fn not_prepared(api: &ApiServer, pod: &Value) -> Option<String> {
    let claims = pod
        .pointer("/spec/resourceClaims")
        .and_then(Value::as_array)?;
    let ns = text(pod, "/metadata/namespace");
    let (name, uid) = (text(pod, "/metadata/name"), text(pod, "/metadata/uid"));
    let statuses = pod
        .pointer("/status/resourceClaimStatuses")
        .and_then(Value::as_array);
    let def = api.builtin(Builtin::ResourceClaim);
    let why = |e: String| {
        Some(format!(
            "Failed to prepare dynamic resources: prepare dynamic resources: {e}"
        ))
    };
    for c in claims {
        let claim = match text(c, "/resourceClaimName") {
            "" => statuses
                .into_iter()
                .flatten()
                .find(|s| text(s, "/name") == text(c, "/name"))
                .map(|s| text(s, "/resourceClaimName").to_string())
                .filter(|n| !n.is_empty()),
            n => Some(n.to_string()),
        };
        let Some(claim) = claim else {
            return why(format!(
                "pod \"{ns}/{name}\": ResourceClaim not created yet"
            ));
        };
        let Some(obj) = api
            .store
            .get(&def.storage_key(), &(ns.to_string(), claim.clone()))
        else {
            return why(format!(
                "fetch ResourceClaim {claim}: resourceclaims.resource.k8s.io \"{claim}\" not found"
            ));
        };
        let reserved = obj
            .value
            .pointer("/status/reservedFor")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|x| text(x, "/uid") == uid));
        if !reserved {
            return why(format!(
                "pod {name} ({uid}) is not allowed to use ResourceClaim {claim} ({})",
                obj.uid()
            ));
        }
    }
    None
}
