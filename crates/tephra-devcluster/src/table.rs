//! Server-side printing: `meta.k8s.io/v1` Tables for `kubectl get`, with the built-in kinds'
//! usual columns and each CRD version's `additionalPrinterColumns`.

use serde_json::{Value, json};

use crate::jsonpath;
use crate::resource::{Builtin, ResourceDef};
use crate::time;

fn col(name: &str, type_: &str, format: &str, priority: i64, description: &str) -> Value {
    json!({"name": name, "type": type_, "format": format, "description": description, "priority": priority})
}

const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating \
                        resources, although some resources may allow a client to request the \
                        generation of an appropriate name automatically.";
const AGE_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this \
                       object was created.";

/// The column definitions of a resource.
pub fn columns(def: &ResourceDef) -> Vec<Value> {
    let name = col("Name", "string", "name", 0, NAME_DOC);
    let age = col("Age", "string", "", 0, AGE_DOC);
    let s = |n: &str| col(n, "string", "", 0, "");
    let wide = |n: &str| col(n, "string", "", 1, "");
    match def.builtin {
        Some(Builtin::Pod) => vec![
            name,
            s("Ready"),
            s("Status"),
            col("Restarts", "string", "", 0, ""),
            age,
            wide("IP"),
            wide("Node"),
            wide("Nominated Node"),
            wide("Readiness Gates"),
        ],
        Some(Builtin::Node) => vec![
            name,
            s("Status"),
            s("Roles"),
            age,
            s("Version"),
            wide("Internal-IP"),
            wide("External-IP"),
            wide("OS-Image"),
            wide("Kernel-Version"),
            wide("Container-Runtime"),
        ],
        Some(Builtin::Namespace) => vec![name, s("Status"), age],
        Some(Builtin::ConfigMap) => vec![name, col("Data", "integer", "", 0, ""), age],
        Some(Builtin::Secret) => vec![name, s("Type"), col("Data", "integer", "", 0, ""), age],
        Some(Builtin::Service) => vec![
            name,
            s("Type"),
            s("Cluster-IP"),
            s("External-IP"),
            s("Port(s)"),
            age,
            wide("Selector"),
        ],
        Some(Builtin::Pdb) => vec![
            name,
            s("Min Available"),
            s("Max Unavailable"),
            col("Allowed Disruptions", "integer", "", 0, ""),
            age,
        ],
        Some(Builtin::PriorityClass) => vec![
            name,
            col("Value", "integer", "", 0, ""),
            col("Global-Default", "boolean", "", 0, ""),
            age,
            s("PreemptionPolicy"),
        ],
        Some(Builtin::Lease) => vec![name, s("Holder"), age],
        Some(Builtin::Event | Builtin::EventsV1) => vec![
            s("Last Seen"),
            s("Type"),
            s("Reason"),
            s("Object"),
            s("Message"),
            col("Name", "string", "name", 1, NAME_DOC),
        ],
        Some(Builtin::Crd | Builtin::Role | Builtin::ClusterRole) => {
            vec![name, col("Created At", "date", "", 0, AGE_DOC)]
        }
        Some(Builtin::ServiceAccount) => vec![name, age],
        Some(Builtin::Deployment) => vec![
            name,
            s("Ready"),
            col("Up-to-date", "integer", "", 0, ""),
            col("Available", "integer", "", 0, ""),
            age,
        ],
        Some(Builtin::RoleBinding | Builtin::ClusterRoleBinding) => vec![name, s("Role"), age],
        Some(Builtin::PersistentVolumeClaim) => vec![
            name,
            s("Status"),
            s("Volume"),
            s("Capacity"),
            s("Access Modes"),
            s("StorageClass"),
            age,
        ],
        Some(Builtin::PersistentVolume) => vec![
            name,
            s("Capacity"),
            s("Access Modes"),
            s("Reclaim Policy"),
            s("Status"),
            s("Claim"),
            s("StorageClass"),
            age,
        ],
        Some(Builtin::StorageClass) => vec![
            name,
            s("Provisioner"),
            s("ReclaimPolicy"),
            s("VolumeBindingMode"),
            age,
        ],
        Some(Builtin::CsiNode) => vec![name, col("Drivers", "integer", "", 0, ""), age],
        Some(Builtin::ResourceClaim) => vec![name, s("State"), age],
        Some(Builtin::ResourceSlice) => vec![name, s("Node"), s("Driver"), s("Pool"), age],
        Some(Builtin::KubePodGroup) => vec![name, s("Policy"), s("Workload"), s("Status"), age],
        Some(Builtin::DeviceClass | Builtin::ResourceClaimTemplate | Builtin::Workload) => {
            vec![name, age]
        }
        None => {
            let mut cols = vec![name];
            cols.extend(
                def.columns
                    .iter()
                    .map(|c| col(&c.name, &c.type_, &c.format, c.priority, &c.description)),
            );
            cols
        }
    }
}

/// Access modes as kubectl abbreviates them (`RWO,RWX`).
fn modes(v: &Value, ptr: &str) -> String {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|m| match m {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn text<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn age(obj: &Value) -> String {
    time::parse_rfc3339(text(obj, "/metadata/creationTimestamp"))
        .map(|t| time::human_age(time::now_secs() - t))
        .unwrap_or_else(|| "<unknown>".into())
}

fn or_none(s: &str) -> Value {
    if s.is_empty() {
        json!("<none>")
    } else {
        json!(s)
    }
}

fn pod_status(pod: &Value) -> String {
    if pod.pointer("/metadata/deletionTimestamp").is_some() {
        return "Terminating".into();
    }
    let reason = text(pod, "/status/reason");
    if !reason.is_empty() {
        return reason.into();
    }
    for cs in pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(r) = cs.pointer("/state/waiting/reason").and_then(Value::as_str) {
            return r.into();
        }
        if let Some(r) = cs
            .pointer("/state/terminated/reason")
            .and_then(Value::as_str)
        {
            return r.into();
        }
    }
    match text(pod, "/status/phase") {
        "" => "Pending".into(),
        p => p.into(),
    }
}

fn cells(def: &ResourceDef, obj: &Value) -> Vec<Value> {
    let name = json!(text(obj, "/metadata/name"));
    match def.builtin {
        Some(Builtin::Pod) => {
            let total = obj
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let statuses: Vec<&Value> = obj
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .collect();
            let ready = statuses
                .iter()
                .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
                .count();
            let restarts: i64 = statuses
                .iter()
                .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
                .sum();
            vec![
                name,
                json!(format!("{ready}/{total}")),
                json!(pod_status(obj)),
                json!(restarts),
                json!(age(obj)),
                or_none(text(obj, "/status/podIP")),
                or_none(text(obj, "/spec/nodeName")),
                or_none(text(obj, "/status/nominatedNodeName")),
                json!("<none>"),
            ]
        }
        Some(Builtin::Node) => {
            let ready = obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
                .and_then(|c| c.get("status").and_then(Value::as_str));
            let mut status = match ready {
                Some("True") => "Ready".to_string(),
                Some("False") => "NotReady".to_string(),
                _ => "Unknown".to_string(),
            };
            if obj.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
                status.push_str(",SchedulingDisabled");
            }
            let roles: Vec<String> = obj
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, _)| k.strip_prefix("node-role.kubernetes.io/").map(String::from))
                .collect();
            let address = |t: &str| {
                obj.pointer("/status/addresses")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .find(|a| a.get("type").and_then(Value::as_str) == Some(t))
                    .and_then(|a| a.get("address").and_then(Value::as_str))
                    .unwrap_or_default()
                    .to_string()
            };
            vec![
                name,
                json!(status),
                or_none(&roles.join(",")),
                json!(age(obj)),
                json!(text(obj, "/status/nodeInfo/kubeletVersion")),
                or_none(&address("InternalIP")),
                or_none(&address("ExternalIP")),
                or_none(text(obj, "/status/nodeInfo/osImage")),
                or_none(text(obj, "/status/nodeInfo/kernelVersion")),
                or_none(text(obj, "/status/nodeInfo/containerRuntimeVersion")),
            ]
        }
        Some(Builtin::Namespace) => vec![name, json!(text(obj, "/status/phase")), json!(age(obj))],
        Some(Builtin::ConfigMap) => {
            let n = ["data", "binaryData"]
                .iter()
                .filter_map(|k| obj.get(*k).and_then(Value::as_object))
                .map(|m| m.len())
                .sum::<usize>();
            vec![name, json!(n), json!(age(obj))]
        }
        Some(Builtin::Secret) => {
            let n = obj
                .get("data")
                .and_then(Value::as_object)
                .map_or(0, |m| m.len());
            vec![name, json!(text(obj, "/type")), json!(n), json!(age(obj))]
        }
        Some(Builtin::Service) => {
            let ports: Vec<String> = obj
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|p| {
                    format!(
                        "{}/{}",
                        p.get("port").map(|v| v.to_string()).unwrap_or_default(),
                        p.get("protocol").and_then(Value::as_str).unwrap_or("TCP")
                    )
                })
                .collect();
            let selector: Vec<String> = obj
                .pointer("/spec/selector")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect();
            vec![
                name,
                json!(text(obj, "/spec/type")),
                or_none(text(obj, "/spec/clusterIP")),
                json!("<none>"),
                or_none(&ports.join(",")),
                json!(age(obj)),
                or_none(&selector.join(",")),
            ]
        }
        Some(Builtin::Pdb) => {
            let show = |p: &str| match obj.pointer(p) {
                Some(Value::String(s)) => json!(s),
                Some(Value::Number(n)) => json!(n.to_string()),
                _ => json!("N/A"),
            };
            vec![
                name,
                show("/spec/minAvailable"),
                show("/spec/maxUnavailable"),
                json!(
                    obj.pointer("/status/disruptionsAllowed")
                        .and_then(Value::as_i64)
                        .unwrap_or(0)
                ),
                json!(age(obj)),
            ]
        }
        Some(Builtin::PriorityClass) => vec![
            name,
            obj.get("value").cloned().unwrap_or(json!(0)),
            json!(
                obj.get("globalDefault")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            ),
            json!(age(obj)),
            json!(
                obj.get("preemptionPolicy")
                    .and_then(Value::as_str)
                    .unwrap_or("PreemptLowerPriority")
            ),
        ],
        Some(Builtin::Lease) => vec![
            name,
            or_none(text(obj, "/spec/holderIdentity")),
            json!(age(obj)),
        ],
        Some(Builtin::Event | Builtin::EventsV1) => {
            let involved = obj
                .get("involvedObject")
                .or_else(|| obj.get("regarding"))
                .cloned()
                .unwrap_or(json!({}));
            let last = [
                "/lastTimestamp",
                "/eventTime",
                "/metadata/creationTimestamp",
            ]
            .iter()
            .find_map(|p| obj.pointer(p).and_then(Value::as_str))
            .and_then(time::parse_rfc3339)
            .map(|t| time::human_age(time::now_secs() - t))
            .unwrap_or_else(|| "<unknown>".into());
            vec![
                json!(last),
                json!(text(obj, "/type")),
                json!(text(obj, "/reason")),
                json!(format!(
                    "{}/{}",
                    text(&involved, "/kind").to_lowercase(),
                    text(&involved, "/name")
                )),
                json!(
                    obj.get("message")
                        .or_else(|| obj.get("note"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                ),
                name,
            ]
        }
        Some(Builtin::Crd | Builtin::Role | Builtin::ClusterRole) => {
            vec![name, json!(text(obj, "/metadata/creationTimestamp"))]
        }
        Some(Builtin::ServiceAccount) => vec![name, json!(age(obj))],
        Some(Builtin::Deployment) => {
            let n = |p: &str| obj.pointer(p).and_then(Value::as_i64).unwrap_or(0);
            vec![
                name,
                json!(format!(
                    "{}/{}",
                    n("/status/readyReplicas"),
                    obj.pointer("/spec/replicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(1)
                )),
                json!(n("/status/updatedReplicas")),
                json!(n("/status/availableReplicas")),
                json!(age(obj)),
            ]
        }
        Some(Builtin::RoleBinding | Builtin::ClusterRoleBinding) => vec![
            name,
            json!(format!(
                "{}/{}",
                text(obj, "/roleRef/kind"),
                text(obj, "/roleRef/name")
            )),
            json!(age(obj)),
        ],
        Some(Builtin::PersistentVolumeClaim) => vec![
            name,
            json!(text(obj, "/status/phase")),
            json!(text(obj, "/spec/volumeName")),
            json!(text(obj, "/status/capacity/storage")),
            json!(modes(obj, "/status/accessModes")),
            json!(text(obj, "/spec/storageClassName")),
            json!(age(obj)),
        ],
        Some(Builtin::PersistentVolume) => {
            let claim = match text(obj, "/spec/claimRef/name") {
                "" => String::new(),
                n => format!("{}/{n}", text(obj, "/spec/claimRef/namespace")),
            };
            vec![
                name,
                json!(text(obj, "/spec/capacity/storage")),
                json!(modes(obj, "/spec/accessModes")),
                json!(text(obj, "/spec/persistentVolumeReclaimPolicy")),
                json!(text(obj, "/status/phase")),
                json!(claim),
                json!(text(obj, "/spec/storageClassName")),
                json!(age(obj)),
            ]
        }
        Some(Builtin::StorageClass) => vec![
            name,
            json!(text(obj, "/provisioner")),
            json!(text(obj, "/reclaimPolicy")),
            json!(text(obj, "/volumeBindingMode")),
            json!(age(obj)),
        ],
        Some(Builtin::ResourceClaim) => {
            let allocated = obj.pointer("/status/allocation").is_some();
            let reserved = obj
                .pointer("/status/reservedFor")
                .and_then(Value::as_array)
                .is_some_and(|r| !r.is_empty());
            let state = match (allocated, reserved) {
                (true, true) => "allocated,reserved",
                (true, false) => "allocated",
                _ => "pending",
            };
            vec![name, json!(state), json!(age(obj))]
        }
        Some(Builtin::ResourceSlice) => vec![
            name,
            json!(text(obj, "/spec/nodeName")),
            json!(text(obj, "/spec/driver")),
            json!(text(obj, "/spec/pool/name")),
            json!(age(obj)),
        ],
        Some(Builtin::KubePodGroup) => {
            // As kube-apiserver prints it: the policy, the Workload, and a status from the
            // conditions (a disruption's reason over the scheduling condition).
            let policy = if obj.pointer("/spec/schedulingPolicy/gang").is_some() {
                "Gang"
            } else {
                "Basic"
            };
            let workload = obj
                .pointer("/spec/workloadRef/workloadName")
                .and_then(Value::as_str)
                .unwrap_or("<none>");
            let conditions = obj.pointer("/status/conditions").and_then(Value::as_array);
            let condition = |t: &str| {
                conditions
                    .into_iter()
                    .flatten()
                    .rfind(|c| c.get("type").and_then(Value::as_str) == Some(t))
            };
            let mut status = match condition("PodGroupInitiallyScheduled") {
                Some(c) if c.get("status").and_then(Value::as_str) == Some("True") => "Scheduled",
                Some(_) => "Unschedulable",
                None => "Pending",
            };
            if let Some(c) = condition("DisruptionTarget") {
                status = c.get("reason").and_then(Value::as_str).unwrap_or_default();
            }
            vec![
                name,
                json!(policy),
                json!(workload),
                json!(status),
                json!(age(obj)),
            ]
        }
        Some(Builtin::DeviceClass | Builtin::ResourceClaimTemplate | Builtin::Workload) => {
            vec![name, json!(age(obj))]
        }
        Some(Builtin::CsiNode) => vec![
            name,
            json!(
                obj.pointer("/spec/drivers")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len)
            ),
            json!(age(obj)),
        ],
        None => {
            let mut out = vec![name];
            for c in &def.columns {
                let found = jsonpath::select(obj, &c.json_path);
                let cell = match found.first() {
                    None => Value::Null,
                    Some(v) => match c.type_.as_str() {
                        "date" => v
                            .as_str()
                            .and_then(time::parse_rfc3339)
                            .map(|t| json!(time::human_age(time::now_secs() - t)))
                            .unwrap_or(json!("<invalid>")),
                        "integer" | "number" | "boolean" => (*v).clone(),
                        _ => match v {
                            Value::String(s) => json!(s),
                            _ if found.len() > 1 => json!(
                                found
                                    .iter()
                                    .map(|x| match x {
                                        Value::String(s) => s.clone(),
                                        o => o.to_string(),
                                    })
                                    .collect::<Vec<_>>()
                                    .join(",")
                            ),
                            other => json!(other.to_string()),
                        },
                    },
                };
                out.push(cell);
            }
            out
        }
    }
}

/// The metadata-only form of an object (`PartialObjectMetadata`).
pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// One row.
pub fn row(def: &ResourceDef, obj: &Value, include: &str) -> Value {
    let object = match include {
        "None" => Value::Null,
        "Object" => obj.clone(),
        _ => partial_metadata(obj),
    };
    json!({"cells": cells(def, obj), "object": object})
}

/// A Table of objects.
pub fn table(
    def: &ResourceDef,
    objects: &[&Value],
    rv: u64,
    cont: Option<&str>,
    include: &str,
    headers: bool,
) -> Value {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    let column_definitions = if headers { columns(def) } else { Vec::new() };
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": column_definitions,
        "rows": objects.iter().map(|o| row(def, o, include)).collect::<Vec<_>>(),
    })
}
