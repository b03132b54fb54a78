//! The Events a kubelet records about a pod (`source.component: kubelet`), as `kubectl
//! describe pod` shows them: a refusal at admission, a volume that cannot be mounted.

use serde_json::{Value, json};

use crate::admit::generate_name;
use crate::api::{ApiServer, WriteOpts};
use crate::resource::Builtin;
use crate::time;

/// Records a Warning Event with `reason` and `message` on `pod`, from the kubelet of `node`.
pub fn warn(api: &ApiServer, pod: &Value, node: &str, reason: &str, message: &str) {
    let str_at = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let (ns, name) = (str_at("/metadata/namespace"), str_at("/metadata/name"));
    let now = time::now_rfc3339();
    let event = json!({
        "metadata": {"name": generate_name(&format!("{name}.")), "namespace": ns},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": name,
                           "uid": str_at("/metadata/uid")},
        "reason": reason,
        "message": message,
        "type": "Warning",
        "source": {"component": "kubelet", "host": node},
        "reportingComponent": "kubelet",
        "reportingInstance": node,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    });
    let def = api.builtin(Builtin::Event);
    if let Err(e) = api.create(&def, Some(ns), event, &WriteOpts::default()) {
        tracing::debug!(server = %api.name, pod = name, error = %e, "kubelet event not recorded");
    }
}
