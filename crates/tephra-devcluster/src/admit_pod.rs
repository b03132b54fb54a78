//! What the API server does to a pod beyond the generic rules of `admit.rs`: its defaults and
//! initial status (with the `SchedulingGated` condition of a gated pod), and what a create or an
//! update of its spec may not do (a node name together with scheduling gates; new gates;
//! changes to the immutable part of the spec), with kube-apiserver's wording.

use serde_json::{Value, json};

use crate::status::{ApiError, Cause};
use crate::time;

fn name_of(pod: &Value) -> &str {
    pod.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn forbidden(pod: &Value, field: &str, message: String) -> ApiError {
    ApiError::invalid(
        "",
        "Pod",
        name_of(pod),
        vec![Cause {
            reason: "FieldValueForbidden".into(),
            message: format!("Forbidden: {message}"),
            field: field.into(),
        }],
    )
}

/// The names of a pod's scheduling gates.
pub fn gates(pod: &Value) -> Vec<&str> {
    pod.pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|g| g.get("name").and_then(Value::as_str))
        .collect()
}

/// Refuses a new pod that names its node while scheduling gates hold it back.
pub fn check_pod_create(pod: &Value) -> Result<(), ApiError> {
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str);
    if node.is_some_and(|n| !n.is_empty()) && !gates(pod).is_empty() {
        return Err(forbidden(
            pod,
            "spec.nodeName",
            "cannot be set until all schedulingGates have been cleared".into(),
        ));
    }
    Ok(())
}

/// A pod's spec with what an update may change masked out: container images, the active
/// deadline, tolerations (additions) and scheduling gates (removals).
fn pod_spec_fixed_part(pod: &Value) -> Value {
    let mut spec = pod.get("spec").cloned().unwrap_or(Value::Null);
    if let Some(s) = spec.as_object_mut() {
        for k in [
            "activeDeadlineSeconds",
            "tolerations",
            "schedulingGates",
            "terminationGracePeriodSeconds",
        ] {
            s.remove(k);
        }
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(cs)) = s.get_mut(list) {
                for c in cs {
                    if let Some(c) = c.as_object_mut() {
                        c.remove("image");
                    }
                }
            }
        }
    }
    spec
}

/// Refuses a pod update that changes its spec beyond what Kubernetes allows (a pod's spec is
/// immutable but for images, the active deadline, added tolerations and removed scheduling
/// gates; `spec.nodeName` is set only through the binding subresource).
pub fn check_pod_update(old: &Value, new: &Value) -> Result<(), ApiError> {
    // Every cause at once, as kube-apiserver answers: each added gate, then what else changed.
    let before = gates(old);
    let mut causes = Vec::new();
    for (i, g) in gates(new).iter().enumerate() {
        if !before.contains(g) {
            causes.push(Cause {
                reason: "FieldValueForbidden".into(),
                message: format!(
                    "Forbidden: only deletion is allowed, but found new scheduling gate '{g}'"
                ),
                field: format!("spec.schedulingGates[{i}].name"),
            });
        }
    }
    if !only_added_tolerations(old, new) {
        causes.push(Cause {
            reason: "FieldValueForbidden".into(),
            message: "Forbidden: existing toleration can not be modified except its \
                      tolerationSeconds"
                .into(),
            field: "spec.tolerations".into(),
        });
    }
    if pod_spec_fixed_part(old) != pod_spec_fixed_part(new) {
        causes.push(Cause {
            reason: "FieldValueForbidden".into(),
            message: "Forbidden: pod updates may not change fields other than \
                      `spec.containers[*].image`,`spec.initContainers[*].image`,\
                      `spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing \
                      tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if \
                      it was previously negative)"
                .into(),
            field: "spec".into(),
        });
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid("", "Pod", name_of(new), causes))
    }
}

/// A toleration as kube-apiserver compares them: its five fields, an absent string being
/// empty. `with_seconds` stands in for its `tolerationSeconds` (the one part an update may
/// change).
fn toleration_fields<'a>(t: &'a Value, with_seconds: Option<&'a Value>) -> [Option<&'a Value>; 5] {
    let text = |k: &str| t.get(k).filter(|v| v.as_str() != Some(""));
    let seconds = with_seconds.or_else(|| t.get("tolerationSeconds"));
    [
        text("key"),
        text("operator"),
        text("value"),
        text("effect"),
        seconds.filter(|v| !v.is_null()),
    ]
}

/// Whether every toleration of `old` is still in `new`, but perhaps for its seconds (a pod's
/// tolerations may only be added to).
fn only_added_tolerations(old: &Value, new: &Value) -> bool {
    let list = |pod: &Value| -> Vec<Value> {
        pod.pointer("/spec/tolerations")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (before, after) = (list(old), list(new));
    before.iter().all(|o| {
        after.iter().any(|n| {
            toleration_fields(o, Some(n.get("tolerationSeconds").unwrap_or(&Value::Null)))
                == toleration_fields(n, None)
        })
    })
}

/// The QoS class of a pod's resources.
pub fn qos_class(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let req = c.pointer("/resources/requests").and_then(Value::as_object);
        let lim = c.pointer("/resources/limits").and_then(Value::as_object);
        if req.is_some_and(|r| !r.is_empty()) || lim.is_some_and(|l| !l.is_empty()) {
            any = true;
        }
        for r in ["cpu", "memory"] {
            let l = lim.and_then(|l| l.get(r));
            let q = req.and_then(|q| q.get(r)).or(l);
            if l.is_none() || q != l {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// Whether a pod tolerates a `NoExecute` taint with `key` (a toleration of that key, or of
/// every key, with that effect or every effect).
fn tolerates_no_execute(pod: &Value, key: &str) -> bool {
    pod.pointer("/spec/tolerations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|t| {
            let text = |f: &str| t.get(f).and_then(Value::as_str).unwrap_or_default();
            (text("key") == key || text("key").is_empty())
                && (text("effect") == "NoExecute" || text("effect").is_empty())
        })
}

/// What admission sets on a new pod after its defaults: the namespace's `default` service
/// account (the ServiceAccount plugin), five minutes' toleration of a not-ready or unreachable
/// node (DefaultTolerationSeconds), its priority (Priority), and its initial status (with the
/// `SchedulingGated` condition of a gated pod).
pub fn default_pod(pod: &mut Value, priority: Option<i64>) {
    tolerate_unready_nodes(pod);
    let spec = &mut pod["spec"];
    if spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        spec["serviceAccountName"] = json!("default");
    }
    if spec.get("serviceAccount").is_none() {
        spec["serviceAccount"] = spec["serviceAccountName"].clone();
    }
    if spec.get("preemptionPolicy").is_none() {
        spec["preemptionPolicy"] = json!("PreemptLowerPriority");
    }
    if let Some(p) = priority {
        spec["priority"] = json!(p);
    }
    let qos = qos_class(pod);
    pod["status"] = json!({"phase": "Pending", "qosClass": qos});
    if !gates(pod).is_empty() {
        pod["status"]["conditions"] = json!([{
            "type": "PodScheduled", "status": "False", "lastProbeTime": null,
            "lastTransitionTime": time::now_rfc3339(), "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates",
        }]);
    }
}

/// The DefaultTolerationSeconds admission plugin, on every write of a pod (not of its
/// subresources): five minutes' toleration of a not-ready and of an unreachable node, unless
/// the pod tolerates them already.
pub fn tolerate_unready_nodes(pod: &mut Value) {
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        if !tolerates_no_execute(pod, key) {
            let toleration = json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300});
            match pod
                .pointer_mut("/spec/tolerations")
                .and_then(Value::as_array_mut)
            {
                Some(list) => list.push(toleration),
                None => pod["spec"]["tolerations"] = json!([toleration]),
            }
        }
    }
}

/// A new Node is tainted not-ready until its kubelet reports it Ready (the
/// TaintNodesByCondition admission plugin; the node lifecycle controller lifts it).
pub fn taint_new_node(node: &mut Value) {
    let key = "node.kubernetes.io/not-ready";
    let taints = node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if taints
        .iter()
        .any(|t| t.get("key").and_then(Value::as_str) == Some(key))
    {
        return;
    }
    let mut taints = taints;
    taints.push(json!({"key": key, "effect": "NoSchedule"}));
    node["spec"]["taints"] = json!(taints);
}
