//! Before a gang whose pods have volume claims to bind is bound, as kube-scheduler's
//! `VolumeBinding` PreBind does it: each claim given a volume gets it (the volume's
//! `spec.claimRef`, for the PV controller to complete), each claim to provision gets the node
//! (`volume.kubernetes.io/selected-node`, for the provisioner); then the claims are watched
//! until every one is bound, and only then are the gang's pods bound. A claim that is not bound
//! within the timeout, or whose selected node is taken back (the provisioner gave up), fails
//! every bind of the gang, and the pods are placed again.
//!
//! The writes run on an executor worker; the wait runs on a task of its own, so that a slow
//! provisioner holds no worker.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio::time::Instant;

use tephra_controllers::storage::{BIND_COMPLETED, BOUND_BY_CONTROLLER, SELECTED_NODE};

pub use tephra_index::writes::{ClaimStep, DeviceStep};

/// Makes sure the member has the claim `name` of `namespace`: a claim declared on the control
/// plane (fleet mode) is copied there under its name, spec, labels and annotations.
pub async fn copy_if_missing<K>(
    member: &Client,
    control: &Client,
    namespace: &str,
    name: &str,
) -> Result<(), kube::Error>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    <K as kube::Resource>::DynamicType: Default,
{
    let here: Api<K> = Api::namespaced(member.clone(), namespace);
    if here.get_opt(name).await?.is_some() {
        return Ok(());
    }
    let there: Api<K> = Api::namespaced(control.clone(), namespace);
    let Some(declared) = there.get_opt(name).await? else {
        return Ok(());
    };
    let mut v = serde_json::to_value(&declared).map_err(kube::Error::SerdeError)?;
    let meta = json!({"name": name, "namespace": namespace,
                      "labels": v.pointer("/metadata/labels").cloned().unwrap_or(json!({})),
                      "annotations": v.pointer("/metadata/annotations").cloned().unwrap_or(json!({}))});
    v["metadata"] = meta;
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    if let Some(spec) = v.get_mut("spec").and_then(serde_json::Value::as_object_mut) {
        // The member's PV controller binds it there.
        spec.remove("volumeName");
    }
    let copy: K = serde_json::from_value(v).map_err(kube::Error::SerdeError)?;
    crate::deps::ensure_namespace(member, namespace).await?;
    match here.create(&kube::api::PostParams::default(), &copy).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Adds the pod `pod` (`uid`) to the `reservedFor` of each of `claims`, which were allocated
/// before it existed (a declared pod's member copy); a claim changed meanwhile is read again,
/// a few times, and one reserved for the pod already is left as it is.
pub async fn reserve(
    client: &Client,
    namespace: &str,
    claims: &[String],
    pod: &str,
    uid: &str,
) -> Result<(), kube::Error> {
    use k8s_openapi::api::resource::v1::ResourceClaim;
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    for name in claims {
        let mut attempt = 0;
        loop {
            let c = api.get(name).await?;
            let before = c.status.and_then(|s| s.reserved_for).unwrap_or_default();
            // The claim controller reserves an allocated claim for a pod that is on a node
            // already, as the copy is: it may have been first.
            if before.iter().any(|r| r.uid == uid) {
                break;
            }
            let mut reserved: Vec<serde_json::Value> = before
                .iter()
                .map(|r| json!({"resource": r.resource, "name": r.name, "uid": r.uid}))
                .collect();
            reserved.push(json!({"resource": "pods", "name": pod, "uid": uid}));
            let patch = json!({"metadata": {"resourceVersion": c.metadata.resource_version},
                               "status": {"reservedFor": reserved}});
            match api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => break,
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < 3 => attempt += 1,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Takes the pod `pod` out of the `reservedFor` of each of `claims`, as kube-scheduler's
/// DynamicResources Unreserve does once a bind after its PreBind failed: the claims' allocation
/// stays (the claim controller deallocates a claim only when the pods it was reserved for go),
/// and the pod is placed again. A claim gone, or not reserved for the pod, is left as it is; a
/// claim changed meanwhile is read again, a few times.
pub async fn unreserve(
    client: &Client,
    namespace: &str,
    claims: &[String],
    pod: &str,
) -> Result<(), kube::Error> {
    use k8s_openapi::api::resource::v1::ResourceClaim;
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    for name in claims {
        let mut attempt = 0;
        loop {
            let Some(c) = api.get_opt(name).await? else {
                break;
            };
            let reserved = c.status.and_then(|s| s.reserved_for).unwrap_or_default();
            let is_pod = |r: &&k8s_openapi::api::resource::v1::ResourceClaimConsumerReference| {
                r.resource == "pods" && r.name == pod
            };
            if !reserved.iter().any(|r| is_pod(&r)) {
                break;
            }
            let kept: Vec<serde_json::Value> = reserved
                .iter()
                .filter(|r| !is_pod(r))
                .map(|r| json!({"resource": r.resource, "name": r.name, "uid": r.uid}))
                .collect();
            let patch = json!({"metadata": {"resourceVersion": c.metadata.resource_version},
                               "status": {"reservedFor": if kept.is_empty() { serde_json::Value::Null } else { json!(kept) }}});
            match api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => break,
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < 3 => attempt += 1,
                Err(kube::Error::Api(s)) if s.code == 404 => break,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Deallocates the claim `name` (clears its allocation, reservations and device status), as
/// kube-scheduler's DynamicResources PostFilter does for a claim that keeps its pod off the
/// nodes: only if it is still at `resource_version` (as the session saw it) and reserved for
/// nobody but `pod`. A claim changed meanwhile, or gone, is left for the next session to look
/// at again: `Ok(false)`.
pub async fn deallocate(
    client: &Client,
    namespace: &str,
    name: &str,
    pod: &str,
    resource_version: &str,
) -> Result<bool, kube::Error> {
    use k8s_openapi::api::resource::v1::ResourceClaim;
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), namespace);
    let Some(c) = api.get_opt(name).await? else {
        return Ok(false);
    };
    let status = c.status.unwrap_or_default();
    let others = status
        .reserved_for
        .iter()
        .flatten()
        .any(|r| r.resource != "pods" || r.name != pod);
    if c.metadata.resource_version.as_deref() != Some(resource_version)
        || status.allocation.is_none()
        || others
    {
        return Ok(false);
    }
    let patch = json!({"metadata": {"resourceVersion": resource_version},
                       "status": {"allocation": null, "reservedFor": null, "devices": null}});
    match api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// A write refused because another took the object first (HTTP 409).
fn conflict(message: String) -> kube::Error {
    kube::Error::Api(Box::new(
        kube::core::Status::failure(&message, "Conflict").with_code(409),
    ))
}

/// The finalizer that keeps an allocated claim from being deleted while in use.
pub const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// Allocates and reserves each claim, as kube-scheduler's DynamicResources PreBind does: the
/// finalizer first (for a claim it allocates), then the allocation and the pod's entry in
/// `status.reservedFor` in one status write. A claim allocated elsewhere in the meantime fails.
pub async fn write_devices(
    client: &Client,
    control: &Client,
    steps: &[DeviceStep],
) -> Result<(), kube::Error> {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::resource::v1::ResourceClaim;
    for s in steps {
        copy_if_missing::<ResourceClaim>(client, control, &s.namespace, &s.claim).await?;
        let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &s.namespace);
        let pods: Api<Pod> = Api::namespaced(client.clone(), &s.namespace);
        let uid = if s.reserve {
            Some(pods.get(&s.pod).await?.metadata.uid.unwrap_or_default())
        } else {
            None
        };
        let claim = claims.get(&s.claim).await?;
        let status = claim.status.clone().unwrap_or_default();
        let mut reserved: Vec<serde_json::Value> = status
            .reserved_for
            .iter()
            .flatten()
            .filter(|r| Some(&r.uid) != uid.as_ref())
            .map(|r| json!({"resource": r.resource, "name": r.name, "uid": r.uid}))
            .collect();
        if let Some(uid) = &uid {
            reserved.push(json!({"resource": "pods", "name": s.pod, "uid": uid}));
        }
        let mut patch = json!({"metadata": {"resourceVersion": claim.metadata.resource_version},
                               "status": {"reservedFor": reserved}});
        if s.allocation.is_none() && status.allocation.is_none() {
            // Allocated when the session looked, deallocated since (a session gave it up for
            // another pod it kept back): a reservation alone would let the pod run without it.
            return Err(conflict(format!(
                "claim {}/{} got deallocated in the meantime",
                s.namespace, s.claim
            )));
        }
        if let Some(a) = &s.allocation {
            if status.allocation.is_some() {
                return Err(conflict(format!(
                    "claim {}/{} got allocated elsewhere in the meantime",
                    s.namespace, s.claim
                )));
            }
            let mut finalizers = claim.metadata.finalizers.clone().unwrap_or_default();
            if !finalizers.iter().any(|f| f == DELETE_PROTECTION) {
                finalizers.push(DELETE_PROTECTION.into());
                let add = json!({"metadata": {"finalizers": finalizers,
                                              "resourceVersion": claim.metadata.resource_version}});
                let updated = claims
                    .patch(&s.claim, &PatchParams::default(), &Patch::Merge(&add))
                    .await?;
                patch["metadata"]["resourceVersion"] = json!(updated.metadata.resource_version);
            }
            patch["status"]["allocation"] = a.clone();
        }
        claims
            .patch_status(&s.claim, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

/// How often the claims are looked at while waiting.
const POLL: Duration = Duration::from_millis(200);

/// Writes what each claim was given: the volume's claim reference (with the claim's uid), or
/// the claim's selected node. Idempotent: a claim already given the same is written again
/// harmlessly; a volume another claim took first fails with a conflict.
pub async fn write_claims(
    client: &Client,
    control: &Client,
    steps: &[ClaimStep],
) -> Result<(), kube::Error> {
    for s in steps {
        copy_if_missing::<PersistentVolumeClaim>(client, control, &s.namespace, &s.claim).await?;
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &s.namespace);
        match &s.volume {
            Some(volume) => {
                let pvc = claims.get(&s.claim).await?;
                let volumes: Api<PersistentVolume> = Api::all(client.clone());
                // Another claim's volume is never taken over: a conflict, the pod is placed
                // again. The write holds the version read, so one made meanwhile conflicts too.
                let pv = volumes.get(volume).await?;
                let taken = pv.spec.as_ref().and_then(|sp| sp.claim_ref.as_ref());
                if let Some(other) = taken.filter(|r| {
                    r.namespace.as_deref() != Some(s.namespace.as_str())
                        || r.name.as_deref() != Some(s.claim.as_str())
                }) {
                    return Err(conflict(format!(
                        "volume {volume} is bound to claim {}/{} already",
                        other.namespace.as_deref().unwrap_or_default(),
                        other.name.as_deref().unwrap_or_default()
                    )));
                }
                let patch = json!({
                    "metadata": {"annotations": {BOUND_BY_CONTROLLER: "yes"},
                                 "resourceVersion": pv.metadata.resource_version},
                    "spec": {"claimRef": {
                        "kind": "PersistentVolumeClaim", "apiVersion": "v1",
                        "namespace": s.namespace, "name": s.claim,
                        "uid": pvc.metadata.uid, "resourceVersion": pvc.metadata.resource_version,
                    }},
                });
                volumes
                    .patch(volume, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
            None => {
                let patch = json!({"metadata": {"annotations": {SELECTED_NODE: s.node}}});
                claims
                    .patch(&s.claim, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
        }
    }
    Ok(())
}

/// Waits until every claim of `steps` is bound, at most `timeout`. The error says why not, in
/// kube-scheduler's words.
pub async fn wait_bound(
    client: &Client,
    steps: &[ClaimStep],
    timeout: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut waiting = None;
        for s in steps {
            let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &s.namespace);
            let pvc = match claims.get_opt(&s.claim).await {
                Ok(Some(p)) => p,
                Ok(None) => {
                    return Err(format!(
                        "binding volumes: persistentvolumeclaim \"{}\" not found",
                        s.claim
                    ));
                }
                Err(e) => {
                    waiting = Some(format!("{}/{}: {e}", s.namespace, s.claim));
                    continue;
                }
            };
            let annotations = pvc.metadata.annotations.clone().unwrap_or_default();
            let bound = pvc
                .spec
                .as_ref()
                .and_then(|sp| sp.volume_name.as_deref())
                .is_some_and(|v| !v.is_empty())
                && annotations.contains_key(BIND_COMPLETED);
            if bound {
                continue;
            }
            if s.volume.is_none() && annotations.get(SELECTED_NODE) != Some(&s.node) {
                return Err(format!(
                    "binding volumes: selectedNode annotation reset for PVC \"{}\"",
                    s.claim
                ));
            }
            waiting = Some(format!("{}/{}", s.namespace, s.claim));
        }
        let Some(claim) = waiting else {
            return Ok(());
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "binding volumes: timed out after {}s waiting for claim {claim} to be bound",
                timeout.as_secs()
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}
