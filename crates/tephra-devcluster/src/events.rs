//! Events that the devcluster's own controllers record (the kubelets, the volume controller),
//! as `kubectl describe` shows them: on the object they concern, with the component that saw
//! it.

use serde_json::{Value, json};

use crate::admit::generate_name;
use crate::api::{ApiServer, WriteOpts};
use crate::resource::Builtin;
use crate::time;

/// Records an Event of `type_` (`Normal`, `Warning`) with `reason` and `message` on `obj`, from
/// `component` (on `host`, for a kubelet).
pub fn record(
    api: &ApiServer,
    obj: &Value,
    type_: &str,
    reason: &str,
    message: &str,
    component: &str,
    host: Option<&str>,
) {
    let str_at = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let (ns, name) = (str_at("/metadata/namespace"), str_at("/metadata/name"));
    let ns = if ns.is_empty() { "default" } else { ns };
    let now = time::now_rfc3339();
    let mut source = json!({"component": component});
    if let Some(h) = host {
        source["host"] = json!(h);
    }
    let event = json!({
        "metadata": {"name": generate_name(&format!("{name}.")), "namespace": ns},
        "involvedObject": {"apiVersion": str_at("/apiVersion"), "kind": str_at("/kind"),
                           "namespace": str_at("/metadata/namespace"), "name": name,
                           "uid": str_at("/metadata/uid")},
        "reason": reason,
        "message": message,
        "type": type_,
        "source": source,
        "reportingComponent": component,
        "reportingInstance": host.unwrap_or(component),
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    });
    let def = api.builtin(Builtin::Event);
    if let Err(e) = api.create(&def, Some(ns), event, &WriteOpts::default()) {
        tracing::debug!(server = %api.name, object = name, error = %e, "event not recorded");
    }
}
