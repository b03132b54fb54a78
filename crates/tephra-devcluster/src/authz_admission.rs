//! What kube-apiserver authorizes beyond the request's own verb, for a user RBAC judges:
//! - a `create` check when an apply (or an update) creates the object, as the apiserver's
//!   create-on-update authorization does: `patch` alone does not let an apply create;
//! - the `OwnerReferencesPermissionEnforcement` admission plugin (on here, as on OpenShift and
//!   many hardened clusters): changing an existing object's `ownerReferences` needs `delete` on
//!   it, and a reference that newly sets `blockOwnerDeletion` needs `update` on the owner's
//!   `finalizers` subresource (or on `*/finalizers` everywhere), the owner's kind mapped to its
//!   resource as discovery maps it.
//!
//! Each decision is recorded in the access log like the request's own, and a refusal is a 403
//! worded as kube-apiserver words it.

use serde_json::Value;

use crate::api::ApiServer;
use crate::authz::{Attributes, User};
use crate::resource::ResourceDef;
use crate::status::ApiError;

/// Kinds every real cluster serves that this one does not, as (apiVersion, kind, plural,
/// namespaced): owners that Volcano's controllers and tephra's meet on pods.
const UNSERVED_BUILTINS: &[(&str, &str, &str, bool)] = &[
    ("apps/v1", "ReplicaSet", "replicasets", true),
    ("apps/v1", "StatefulSet", "statefulsets", true),
    ("apps/v1", "DaemonSet", "daemonsets", true),
    ("batch/v1", "Job", "jobs", true),
    ("batch/v1", "CronJob", "cronjobs", true),
    (
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        true,
    ),
];

fn judge(api: &ApiServer, user: &User, attrs: &Attributes) -> bool {
    let allowed = crate::authz::allowed(&api.store, user, attrs);
    api.access.record(user, attrs, allowed);
    allowed
}

/// An apply (or update) that creates `name`: the user must be allowed to `create` it.
pub fn authorize_create(
    api: &ApiServer,
    user: Option<&User>,
    def: &ResourceDef,
    ns: Option<&str>,
    name: &str,
) -> Result<(), ApiError> {
    let Some(user) = user else {
        return Ok(());
    };
    let attrs = Attributes {
        verb: "create",
        group: def.group.clone(),
        resource: def.plural.clone(),
        subresource: None,
        namespace: ns.map(str::to_string),
        name: Some(name.to_string()),
    };
    if judge(api, user, &attrs) {
        return Ok(());
    }
    Err(ApiError::forbidden(
        &def.group,
        &def.plural,
        name,
        &attrs.denial(user),
    ))
}

fn refs(obj: Option<&Value>) -> Vec<Value> {
    obj.and_then(|o| o.pointer("/metadata/ownerReferences"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn blocks(r: &Value) -> bool {
    r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
}

fn uid(r: &Value) -> &str {
    r.get("uid").and_then(Value::as_str).unwrap_or_default()
}

/// `OwnerReferencesPermissionEnforcement` for a create (`old: None`) or an update of `name` in
/// `def` from `old` to `new`, by `user`.
pub fn enforce_owner_references(
    api: &ApiServer,
    user: Option<&User>,
    def: &ResourceDef,
    ns: Option<&str>,
    name: &str,
    old: Option<&Value>,
    new: &Value,
) -> Result<(), ApiError> {
    let Some(user) = user else {
        return Ok(());
    };
    let (before, after) = (refs(old), refs(Some(new)));
    let changed = match old {
        None => !after.is_empty(),
        Some(_) => before != after,
    };
    if !changed {
        return Ok(());
    }
    let refuse = |why: String| ApiError::forbidden(&def.group, &def.plural, name, &why);
    if old.is_some() {
        let attrs = Attributes {
            verb: "delete",
            group: def.group.clone(),
            resource: def.plural.clone(),
            subresource: None,
            namespace: ns.map(str::to_string),
            name: Some(name.to_string()),
        };
        if !judge(api, user, &attrs) {
            return Err(refuse(
                "cannot set an ownerRef on a resource you can't delete: , <nil>".into(),
            ));
        }
    }
    let newly_blocking: Vec<&Value> = after
        .iter()
        .filter(|r| blocks(r))
        .filter(|r| !before.iter().any(|b| uid(b) == uid(r) && blocks(b)))
        .collect();
    if newly_blocking.is_empty() {
        return Ok(());
    }
    let anything = Attributes {
        verb: "update",
        group: "*".into(),
        resource: "*".into(),
        subresource: Some("finalizers".into()),
        namespace: None,
        name: Some("*".into()),
    };
    if crate::authz::allowed(&api.store, user, &anything) {
        return Ok(());
    }
    for r in newly_blocking {
        let text = |f: &str| r.get(f).and_then(Value::as_str).unwrap_or_default();
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        let Some((group, plural, namespaced)) = owner_resource(api, api_version, kind) else {
            return Err(refuse(format!(
                "cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion {api_version} Kind {kind}: no matches for kind {kind:?} in version {api_version:?}"
            )));
        };
        let attrs = Attributes {
            verb: "update",
            group,
            resource: plural,
            subresource: Some("finalizers".into()),
            namespace: namespaced.then(|| ns.map(str::to_string)).flatten(),
            name: Some(text("name").to_string()),
        };
        if !judge(api, user, &attrs) {
            return Err(refuse(
                "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: , <nil>".into(),
            ));
        }
    }
    Ok(())
}

/// The owner kind's (group, plural, namespaced), as discovery maps it.
fn owner_resource(
    api: &ApiServer,
    api_version: &str,
    kind: &str,
) -> Option<(String, String, bool)> {
    if let Some(def) = api.registry().by_kind(api_version, kind) {
        return Some((def.group.clone(), def.plural.clone(), def.namespaced));
    }
    UNSERVED_BUILTINS
        .iter()
        .find(|(v, k, _, _)| *v == api_version && *k == kind)
        .map(|(v, _, plural, namespaced)| {
            let group = v.rsplit_once('/').map_or("", |(g, _)| g);
            (group.to_string(), (*plural).to_string(), *namespaced)
        })
}
