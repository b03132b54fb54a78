//! What the handlers of resource requests share with the watch, subresource and log
//! handlers: an object's JSON for the version its resource is served at, a request's label
//! and field selectors, and a request's delete options (`DeleteOptions` and the query).

use bytes::Bytes;
use serde_json::{Value, json};

use crate::api::DeleteOpts;
use crate::http::Req;
use crate::resource::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::Obj;

/// An object's JSON for the resource's version.
pub fn object_bytes(def: &ResourceDef, obj: &Obj) -> Bytes {
    if obj.value.get("apiVersion").and_then(Value::as_str) == Some(def.api_version().as_str()) {
        obj.json()
    } else {
        let mut v = obj.value.clone();
        v["apiVersion"] = json!(def.api_version());
        Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
    }
}

/// Label and field selectors of a request.
pub fn selectors(def: &ResourceDef, req: &Req) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let label = LabelSelector::parse(req.q("labelSelector").unwrap_or_default())?;
    let field = FieldSelector::parse(
        req.q("fieldSelector").unwrap_or_default(),
        &def.group,
        &def.kind,
        !def.is_custom(),
        def.namespaced,
    )?;
    Ok((label, field))
}

/// Delete options from the body (`DeleteOptions`) and the query.
pub fn delete_opts(req: &Req) -> Result<DeleteOpts, ApiError> {
    let body = req.json()?;
    let grace = body
        .get("gracePeriodSeconds")
        .and_then(Value::as_i64)
        .or_else(|| req.q("gracePeriodSeconds").and_then(|g| g.parse().ok()));
    let dry_run = req.q("dryRun") == Some("All")
        || body
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|x| x == "All"));
    let pre = |k: &str| {
        body.pointer(&format!("/preconditions/{k}"))
            .and_then(Value::as_str)
            .map(String::from)
    };
    let propagation = body
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .or_else(|| req.q("propagationPolicy"))
        .map(String::from);
    if let Some(p) = &propagation
        && !matches!(p.as_str(), "Orphan" | "Background" | "Foreground")
    {
        return Err(ApiError::unprocessable(format!(
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: {p:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
        )));
    }
    Ok(DeleteOpts {
        grace,
        uid: pre("uid"),
        resource_version: pre("resourceVersion"),
        dry_run,
        propagation,
    })
}
