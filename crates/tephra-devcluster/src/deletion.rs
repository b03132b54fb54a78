//! What marks an object as on its way out, shared by the API server's handlers and the
//! controllers that finish deletions: the garbage collector's finalizers (`orphan`,
//! `foregroundDeletion`) and a namespace's terminating state (its `deletionTimestamp`, its own
//! `spec.finalizers`, and the 403 a create in it gets).

use serde_json::{Value, json};

use crate::status::ApiError;

/// The finalizer of an object deleted with `propagationPolicy: Orphan`: its dependents lose
/// their references to it before it goes.
pub const ORPHAN: &str = "orphan";

/// The finalizer of an object deleted with `propagationPolicy: Foreground`: its dependents go
/// before it does (it waits for those that block its deletion).
pub const FOREGROUND: &str = "foregroundDeletion";

/// Whether a namespace object is being deleted.
pub fn terminating(ns: &Value) -> bool {
    ns.pointer("/metadata/deletionTimestamp").is_some()
}

/// Whether the namespace's own `spec.finalizers` still hold it.
pub fn spec_finalized(ns: &Value) -> bool {
    ns.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
}

/// The 403 of a create in a terminating namespace (the NamespaceLifecycle admission plugin).
pub fn terminating_error(group: &str, plural: &str, name: &str, ns: &str) -> ApiError {
    let mut e = ApiError::forbidden(
        group,
        plural,
        name,
        &format!("unable to create new content in namespace {ns} because it is being terminated"),
    );
    if let Some(d) = e.details.as_mut() {
        d["causes"] = json!([{"reason": "NamespaceTerminating",
            "message": format!("namespace {ns} is being terminated"),
            "field": "metadata.namespace"}]);
    }
    e
}
