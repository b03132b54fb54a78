//! The defaults kube-apiserver fills into a built-in object as it decodes a request (its
//! `SetDefaults_*` functions), before the field manager records who set what: so these fields
//! are owned, in `managedFields`, by the manager that wrote the object, unlike what admission
//! plugins and the registry set afterwards (a pod's service account and priority, a Service's
//! cluster IP, a Namespace's finalizer), which `api.rs` and `admit_pod.rs` set after recording.
//! Also the fields a typed object always carries when kube-apiserver encodes it (an Event's
//! `eventTime`, a Node's `nodeInfo`), which a client reading the devcluster must meet too.

use serde_json::{Map, Value, json};

use crate::resource::{Builtin, ResourceDef};

fn obj_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let m = v.as_object_mut()?;
    let slot = m.entry(key.to_string()).or_insert_with(|| json!({}));
    if slot.is_null() {
        *slot = json!({});
    }
    slot.as_object_mut()
}

fn default(m: &mut Map<String, Value>, key: &str, value: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), value);
    }
}

/// Whether an image names no tag or `latest` (and no digest): such an image is pulled always.
fn pulls_always(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, tag)) => tag == "latest",
        None => true,
    }
}

/// Removes the `false` of fields a Go `bool` (not a pointer) holds with `omitempty`: decoding
/// and encoding again leaves them out, so nobody owns them and nobody reads them back.
fn omit_false(m: &mut Map<String, Value>, keys: &[&str]) {
    for k in keys {
        if m.get(*k) == Some(&Value::Bool(false)) {
            m.remove(*k);
        }
    }
}

fn container(c: &mut Value) {
    let Some(m) = c.as_object_mut() else {
        return;
    };
    omit_false(m, &["stdin", "stdinOnce", "tty"]);
    default(m, "terminationMessagePath", json!("/dev/termination-log"));
    default(m, "terminationMessagePolicy", json!("File"));
    let image = m.get("image").and_then(Value::as_str).unwrap_or_default();
    let policy = if pulls_always(image) {
        "Always"
    } else {
        "IfNotPresent"
    };
    default(m, "imagePullPolicy", json!(policy));
    default(m, "resources", json!({}));
    // Limits without requests: the limits are the requests.
    if let Some(res) = m.get_mut("resources").and_then(Value::as_object_mut)
        && let Some(limits) = res.get("limits").and_then(Value::as_object).cloned()
    {
        let mut requests = res
            .get("requests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (k, v) in limits {
            requests.entry(k).or_insert(v);
        }
        if !requests.is_empty() {
            res.insert("requests".into(), Value::Object(requests));
        }
    }
    if let Some(Value::Array(ports)) = m.get_mut("ports") {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            default(p, "protocol", json!("TCP"));
        }
    }
}

/// A pod spec's defaults (pods, and pod templates in workloads).
pub fn pod_spec(spec: &mut Value) {
    let Some(m) = spec.as_object_mut() else {
        return;
    };
    omit_false(m, &["hostNetwork", "hostPID", "hostIPC"]);
    default(m, "restartPolicy", json!("Always"));
    default(m, "terminationGracePeriodSeconds", json!(30));
    default(m, "dnsPolicy", json!("ClusterFirst"));
    default(m, "securityContext", json!({}));
    default(m, "schedulerName", json!("default-scheduler"));
    // The deprecated `serviceAccount` mirrors `serviceAccountName`.
    if let Some(sa) = m
        .get("serviceAccountName")
        .filter(|s| s.is_string())
        .cloned()
    {
        default(m, "serviceAccount", sa);
    }
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(cs)) = m.get_mut(list) {
            cs.iter_mut().for_each(container);
        }
    }
}

fn service(svc: &mut Value) {
    let Some(spec) = obj_mut(svc, "spec") else {
        return;
    };
    default(spec, "type", json!("ClusterIP"));
    default(spec, "sessionAffinity", json!("None"));
    let kind = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if kind != "ExternalName" {
        default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if matches!(kind.as_str(), "NodePort" | "LoadBalancer") {
        default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if let Some(Value::Array(ports)) = spec.get_mut("ports") {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            default(p, "protocol", json!("TCP"));
            let port = p.get("port").cloned().unwrap_or(Value::Null);
            let unset = p
                .get("targetPort")
                .is_none_or(|t| t.is_null() || *t == json!(0) || *t == json!(""));
            if unset {
                p.insert("targetPort".into(), port);
            }
        }
    }
}

fn deployment(dep: &mut Value) {
    let Some(spec) = obj_mut(dep, "spec") else {
        return;
    };
    omit_false(spec, &["paused"]);
    default(spec, "replicas", json!(1));
    default(
        spec,
        "strategy",
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
    );
    if let Some(s) = spec.get_mut("strategy").and_then(Value::as_object_mut) {
        default(s, "type", json!("RollingUpdate"));
        if s.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            let ru = s
                .entry("rollingUpdate".to_string())
                .or_insert_with(|| json!({}));
            if let Some(ru) = ru.as_object_mut() {
                default(ru, "maxUnavailable", json!("25%"));
                default(ru, "maxSurge", json!("25%"));
            }
        }
    }
    default(spec, "revisionHistoryLimit", json!(10));
    default(spec, "progressDeadlineSeconds", json!(600));
    if let Some(t) = spec.get_mut("template").and_then(|t| t.get_mut("spec")) {
        pod_spec(t);
    }
}

fn namespace(ns: &mut Value) {
    let name = ns
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if name.is_empty() {
        return;
    }
    if let Some(meta) = obj_mut(ns, "metadata") {
        let slot = meta
            .entry("labels".to_string())
            .or_insert_with(|| json!({}));
        if slot.is_null() {
            *slot = json!({});
        }
        if let Some(l) = slot.as_object_mut() {
            l.insert("kubernetes.io/metadata.name".into(), json!(name));
        }
    }
}

fn event(ev: &mut Value) {
    let Some(m) = ev.as_object_mut() else {
        return;
    };
    // Not omitted when empty, in kube-apiserver's encoding of a core/v1 Event.
    m.entry("eventTime".to_string()).or_insert(Value::Null);
    default(m, "reportingComponent", json!(""));
    default(m, "reportingInstance", json!(""));
}

fn node(n: &mut Value) {
    let Some(status) = obj_mut(n, "status") else {
        return;
    };
    // A Node's status always carries these, empty, in kube-apiserver's encoding.
    default(
        status,
        "daemonEndpoints",
        json!({"kubeletEndpoint": {"Port": 0}}),
    );
    let info = status
        .entry("nodeInfo".to_string())
        .or_insert_with(|| json!({}));
    if let Some(info) = info.as_object_mut() {
        for k in [
            "machineID",
            "systemUUID",
            "bootID",
            "kernelVersion",
            "osImage",
            "containerRuntimeVersion",
            "kubeletVersion",
            "kubeProxyVersion",
            "operatingSystem",
            "architecture",
        ] {
            default(info, k, json!(""));
        }
    }
}

/// Adds what kube-apiserver's encoding of a built-in kind always carries, empty when unset
/// (after the field manager: nobody owns these).
pub fn encode(def: &ResourceDef, obj: &mut Value) {
    match def.builtin {
        Some(Builtin::Event) => event(obj),
        Some(Builtin::Node) => node(obj),
        Some(Builtin::Deployment) => {
            if let Some(m) = obj.as_object_mut() {
                m.entry("status".to_string()).or_insert_with(|| json!({}));
            }
        }
        Some(Builtin::KubePodGroup | Builtin::Workload) => {
            crate::validate_workload::encode(def, obj);
        }
        Some(Builtin::ResourceClaim | Builtin::ResourceClaimTemplate | Builtin::DeviceClass) => {
            crate::validate_dra::encode(def, obj);
        }
        _ => {}
    }
}

/// Fills the decoding defaults of a built-in kind into `obj`.
pub fn apply(def: &ResourceDef, obj: &mut Value) {
    match def.builtin {
        Some(Builtin::Pod) => {
            if let Some(spec) = obj.get_mut("spec") {
                pod_spec(spec);
                // A pod's own default, not its templates'.
                if let Some(m) = spec.as_object_mut() {
                    default(m, "enableServiceLinks", json!(true));
                }
            }
        }
        Some(Builtin::Service) => service(obj),
        Some(Builtin::Deployment) => deployment(obj),
        Some(Builtin::Namespace) => namespace(obj),
        Some(Builtin::Node) => {
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                omit_false(spec, &["unschedulable"]);
            }
        }
        Some(Builtin::KubePodGroup) => {
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                default(spec, "disruptionMode", json!({"single": {}}));
            }
        }
        Some(Builtin::Workload) => crate::validate_workload::decode(def, obj),
        Some(Builtin::ResourceClaim | Builtin::ResourceClaimTemplate) => {
            crate::validate_dra::decode(def, obj);
        }
        Some(Builtin::Secret)
            if obj
                .get("type")
                .is_none_or(|t| t.as_str().is_none_or(str::is_empty)) =>
        {
            obj["type"] = json!("Opaque");
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_untagged_or_latest_image_is_pulled_always() {
        assert!(pulls_always("busybox"));
        assert!(pulls_always("registry:5000/busybox:latest"));
        assert!(pulls_always("registry:5000/busybox"));
        assert!(!pulls_always("registry:5000/busybox:1"));
        assert!(!pulls_always("busybox:1.36"));
        assert!(!pulls_always("busybox@sha256:00"));
    }
}
