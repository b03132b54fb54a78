//! The kubelet's volume manager, as far as it decides whether a pod can start: every
//! ConfigMap and Secret its volumes name (projected ones too) must exist unless marked
//! `optional`; every PersistentVolumeClaim the pod mounts must exist and be bound, and its
//! volume's node affinity must admit this node. Until then the pod stays `Pending`
//! (ContainerCreating) and a `FailedMount` Event says why, in the kubelet's words.

use std::collections::BTreeMap;

use serde_json::Value;

use super::admission::terms_match;
use crate::api::ApiServer;
use crate::resource::Builtin;

/// The claims a pod's volumes use, with the volume names: `persistentVolumeClaim` volumes, and
/// generic ephemeral volumes' `<pod>-<volume>`.
fn claims(pod: &Value) -> Vec<(String, String)> {
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    pod.pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| {
            let vol = v.get("name").and_then(Value::as_str)?.to_string();
            if let Some(c) = v
                .pointer("/persistentVolumeClaim/claimName")
                .and_then(Value::as_str)
            {
                return Some((vol, c.to_string()));
            }
            v.get("ephemeral")
                .map(|_| (vol.clone(), format!("{name}-{vol}")))
        })
        .collect()
}

/// The ConfigMaps and Secrets the pod's volumes need: (volume, "configmap" or "secret", name),
/// those marked `optional` left out.
fn sources(pod: &Value) -> Vec<(String, &'static str, String)> {
    let mut out = Vec::new();
    let required = |src: &Value, name_field: &str| -> Option<String> {
        if src.get("optional").and_then(Value::as_bool) == Some(true) {
            return None;
        }
        src.get(name_field)
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
    };
    for v in pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let vol = v.get("name").and_then(Value::as_str).unwrap_or_default();
        if let Some(n) = v.get("configMap").and_then(|c| required(c, "name")) {
            out.push((vol.to_string(), "configmap", n));
        }
        if let Some(n) = v.get("secret").and_then(|c| required(c, "secretName")) {
            out.push((vol.to_string(), "secret", n));
        }
        for p in v
            .pointer("/projected/sources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(n) = p.get("configMap").and_then(|c| required(c, "name")) {
                out.push((vol.to_string(), "configmap", n));
            }
            if let Some(n) = p.get("secret").and_then(|c| required(c, "name")) {
                out.push((vol.to_string(), "secret", n));
            }
        }
    }
    out
}

/// Why the pod's volumes cannot be mounted on `node` yet, as the `FailedMount` Event says it;
/// `None` when they can.
pub fn not_mountable(
    api: &ApiServer,
    pod: &Value,
    node: &str,
    labels: &BTreeMap<String, String>,
) -> Option<String> {
    let ns = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    for (vol, kind, name) in sources(pod) {
        let def = api.builtin(if kind == "configmap" {
            Builtin::ConfigMap
        } else {
            Builtin::Secret
        });
        if api
            .store
            .get(&def.storage_key(), &(ns.to_string(), name.clone()))
            .is_none()
        {
            return Some(format!(
                "MountVolume.SetUp failed for volume \"{vol}\" : {kind} \"{name}\" not found"
            ));
        }
    }
    let pvcs = api.builtin(Builtin::PersistentVolumeClaim);
    let pvs = api.builtin(Builtin::PersistentVolume);
    let mut failed: Vec<(String, String)> = Vec::new();
    for (vol, claim) in claims(pod) {
        let Some(pvc) = api
            .store
            .get(&pvcs.storage_key(), &(ns.to_string(), claim.clone()))
        else {
            failed.push((vol, format!(
                "error processing PVC {ns}/{claim}: failed to fetch PVC from API server: persistentvolumeclaims \"{claim}\" not found"
            )));
            continue;
        };
        let v = &pvc.value;
        let phase = v
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let volume = v
            .pointer("/spec/volumeName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if phase != "Bound" || volume.is_empty() {
            failed.push((
                vol,
                format!("error processing PVC {ns}/{claim}: PVC is not bound"),
            ));
            continue;
        }
        let Some(pv) = api
            .store
            .get(&pvs.storage_key(), &(String::new(), volume.to_string()))
        else {
            failed.push((
                vol,
                format!(
                    "error processing PVC {ns}/{claim}: PersistentVolume \"{volume}\" not found"
                ),
            ));
            continue;
        };
        if let Some(terms) = pv
            .value
            .pointer("/spec/nodeAffinity/required/nodeSelectorTerms")
            .and_then(Value::as_array)
            && !terms_match(terms, node, labels)
        {
            return Some(format!(
                "MountVolume.NodeAffinity check failed for volume \"{volume}\" : no matching NodeSelectorTerms"
            ));
        }
    }
    if failed.is_empty() {
        return None;
    }
    let names: Vec<&str> = failed.iter().map(|(v, _)| v.as_str()).collect();
    Some(format!(
        "Unable to attach or mount volumes: unmounted volumes=[{}], unattached volumes=[], failed to process volumes=[{}]: {}",
        names.join(" "),
        names.join(" "),
        failed[0].1
    ))
}
