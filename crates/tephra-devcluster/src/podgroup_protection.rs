//! The PodGroup protection controller of kube-controller-manager 1.37 (with `GenericWorkload`
//! on): a Kubernetes PodGroup being deleted keeps its protection finalizer while a pod that
//! has not finished names it in `spec.schedulingGroup.podGroupName`, and loses it (and so is
//! gone) once none does.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use crate::api::{ApiServer, Scope, WriteOpts};
use crate::resource::Builtin;
use crate::store::Obj;
use crate::validate_workload::PROTECTION;

/// Starts the controller on `api`.
pub fn start(api: Arc<ApiServer>) -> crate::controller::Controller {
    crate::controller::Controller::start(api, &[Builtin::KubePodGroup, Builtin::Pod], reconcile)
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn protected(g: &Value) -> bool {
    g.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|x| x.as_str() == Some(PROTECTION)))
}

/// The groups (`namespace`, name) that pods not finished name, in `namespace` or everywhere.
fn used(api: &ApiServer, namespace: Option<&str>) -> BTreeSet<(String, String)> {
    let def = api.builtin(Builtin::Pod);
    api.store
        .list(&def.storage_key(), namespace, None)
        .0
        .into_iter()
        .filter(|p| !matches!(text(&p.value, "/status/phase"), "Succeeded" | "Failed"))
        .filter_map(|p| {
            let group = p
                .value
                .pointer("/spec/schedulingGroup/podGroupName")?
                .as_str()?;
            Some((
                text(&p.value, "/metadata/namespace").to_string(),
                group.to_string(),
            ))
        })
        .collect()
}

fn reconcile(api: &ApiServer) {
    let deleting: Vec<(String, String)> = crate::controller::list(api, Builtin::KubePodGroup)
        .into_iter()
        .filter(|g| g.value.pointer("/metadata/deletionTimestamp").is_some() && protected(&g.value))
        .map(|g| {
            (
                text(&g.value, "/metadata/namespace").to_string(),
                text(&g.value, "/metadata/name").to_string(),
            )
        })
        .collect();
    if deleting.is_empty() {
        return;
    }
    let used = used(api, None);
    for key in deleting.into_iter().filter(|k| !used.contains(k)) {
        release(api, key);
    }
}

impl ApiServer {
    /// What the controller does to a Kubernetes PodGroup just marked for deletion, at once
    /// (the delete calls it): on a real cluster it lets go of an unused group before the
    /// garbage collector gets to it.
    pub(crate) fn podgroup_deleting(&self, group: &Obj) {
        if !protected(&group.value) {
            return;
        }
        let namespace = text(&group.value, "/metadata/namespace").to_string();
        let key = (namespace, text(&group.value, "/metadata/name").to_string());
        if !used(self, Some(&key.0)).contains(&key) {
            release(self, key);
        }
    }
}

fn release(api: &ApiServer, key: (String, String)) {
    let def = api.builtin(Builtin::KubePodGroup);
    let result = api.update(&def, &key, Scope::Main, &WriteOpts::default(), &mut |cur| {
        let mut n = cur.clone();
        if let Some(f) = n
            .pointer_mut("/metadata/finalizers")
            .and_then(Value::as_array_mut)
        {
            f.retain(|x| x.as_str() != Some(PROTECTION));
        }
        Ok(n)
    });
    if let Err(e) = result
        && e.code != 404
        && e.code != 409
    {
        tracing::warn!(server = %api.name, podgroup = %format!("{}/{}", key.0, key.1),
            error = %e, "PodGroup protection: finalizer not removed");
    }
}
