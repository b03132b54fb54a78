//! Resource requests: get, list (selectors, chunking, Tables), create, update, patch (every
//! kind), delete and deletecollection, and the status subresource; watches, bindings and
//! evictions are handed to their own modules.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use hyper::{Method, Response};
use serde_json::{Value, json};

use crate::admit::{self, FieldValidation};
use crate::api::{ApiServer, Scope, WriteOpts, Written};
use crate::authz_admission::{authorize_create, enforce_owner_references};
use crate::http::{Body, Req, bytes_reply, error_reply, json_reply};
use crate::pagination;
use crate::patch::{self, PatchKind};
use crate::resource::{Builtin, ResourceDef};
use crate::router::ResourcePath;
use crate::status::{self, ApiError};
use crate::store::{Key, Obj};
use crate::table;
use crate::time;
use crate::wire::{delete_opts, object_bytes, selectors};

/// Answers a resource request.
pub async fn resource(api: &Arc<ApiServer>, path: ResourcePath, req: Req) -> Response<Body> {
    match handle(api, path, req).await {
        Ok(r) => r,
        Err(e) => error_reply(&e),
    }
}

async fn handle(
    api: &Arc<ApiServer>,
    path: ResourcePath,
    req: Req,
) -> Result<Response<Body>, ApiError> {
    let def = api
        .resource(&path.group, &path.version, &path.plural)
        .ok_or_else(ApiError::no_route)?;
    if path.namespace.is_some() && !def.namespaced {
        return Err(ApiError::no_route());
    }
    if def.namespaced && path.name.is_some() && path.namespace.is_none() {
        return Err(ApiError::no_route());
    }
    let ns = path.namespace.as_deref();
    let Some(name) = path.name.clone() else {
        return match req.method {
            Method::GET if matches!(req.q("watch"), Some("true" | "1")) => {
                crate::watch::serve(api, &def, ns, &req)
            }
            Method::GET => list(api, &def, ns, &req),
            Method::POST => create(api, &def, ns, &req),
            Method::DELETE => delete_collection(api, &def, ns, &req),
            _ => Err(ApiError::method_not_allowed()),
        };
    };
    let key: Key = (ns.unwrap_or_default().to_string(), name.clone());
    match (path.sub.as_deref(), &req.method) {
        (None, &Method::GET) => get(api, &def, &key, &req),
        (None, &Method::PUT) => update(api, &def, &key, false, &req),
        (None, &Method::PATCH) => patch_object(api, &def, ns, &key, false, &req),
        (None, &Method::DELETE) => delete(api, &def, &key, &req),
        (Some("status"), m) if def.status => match *m {
            Method::GET => get(api, &def, &key, &req),
            Method::PUT => update(api, &def, &key, true, &req),
            Method::PATCH => patch_object(api, &def, ns, &key, true, &req),
            _ => Err(ApiError::method_not_allowed()),
        },
        (Some("binding"), &Method::POST) if def.builtin == Some(Builtin::Pod) => {
            crate::subresource::bind(api, &key, &req)
        }
        (Some("eviction"), &Method::POST) if def.builtin == Some(Builtin::Pod) => {
            crate::subresource::evict(api, &key, &req)
        }
        (Some("log"), &Method::GET) if def.builtin == Some(Builtin::Pod) => {
            crate::pod_log::serve(api, &key, &req).await
        }
        // A custom resource's subresource its CRD does not serve: the object is not found.
        (Some(_), _) if def.is_custom() => Err(ApiError::not_found(&def.group, &def.plural, &name)),
        (Some(_), _) => Err(ApiError::no_route()),
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn scope_of(status_only: bool) -> Scope {
    if status_only {
        Scope::Status
    } else {
        Scope::Main
    }
}

/// Write options from the query (and the user agent, as the default field manager).
pub fn write_opts(req: &Req) -> WriteOpts {
    let manager = req
        .q("fieldManager")
        .filter(|m| !m.is_empty())
        .map(String::from)
        .or_else(|| {
            let ua = req.user_agent.split('/').next().unwrap_or_default();
            (!ua.is_empty()).then(|| ua.to_string())
        })
        // Neither: kube-apiserver records the write as `unknown`'s.
        .or_else(|| Some("unknown".to_string()));
    WriteOpts {
        manager,
        validation: FieldValidation::parse(req.q("fieldValidation")),
        dry_run: req.q("dryRun") == Some("All"),
    }
}

/// One object as the client asked for it (object, Table, or metadata).
pub fn render_one(
    def: &ResourceDef,
    obj: &Obj,
    req: &Req,
    code: u16,
    warnings: &[String],
) -> Response<Body> {
    if req.wants_table() {
        let t = table::table(
            def,
            &[&obj.value],
            obj.rv,
            None,
            req.q("includeObject").unwrap_or("Metadata"),
            true,
        );
        return json_reply(code, &t, warnings);
    }
    if req.wants_metadata() {
        return json_reply(code, &table::partial_metadata(&obj.value), warnings);
    }
    bytes_reply(code, object_bytes(def, obj), "application/json", warnings)
}

fn get(
    api: &ApiServer,
    def: &ResourceDef,
    key: &Key,
    req: &Req,
) -> Result<Response<Body>, ApiError> {
    let obj = api
        .get(def, key)
        .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, &key.1))?;
    Ok(render_one(def, &obj, req, 200, &[]))
}

fn list(
    api: &ApiServer,
    def: &ResourceDef,
    ns: Option<&str>,
    req: &Req,
) -> Result<Response<Body>, ApiError> {
    let (label, field) = selectors(def, req)?;
    let limit = req
        .q("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let (after, first_rv) = match req.q("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            let (rv, key) = pagination::decode(token)?;
            (Some(key), Some(rv))
        }
        None => (None, None),
    };
    let kind = def.storage_key();
    let (candidates, now_rv) = match (field.pinned_name(), ns.or((!def.namespaced).then_some(""))) {
        (Some(name), Some(ns)) if after.is_none() => {
            let rv = api.store.current_rv();
            let one = api.store.get(&kind, &(ns.to_string(), name.to_string()));
            (one.into_iter().collect(), rv)
        }
        _ => api.store.list(&kind, ns, after.as_ref()),
    };
    let rv = first_rv.unwrap_or(now_rv);
    let filter = !label.is_empty() || !field.is_empty();
    let mut items: Vec<Obj> = Vec::new();
    let mut more = false;
    // As etcd's paging with a selector: once the page is full, any object after its last item
    // (matching or not) means more, and the token resumes after that item.
    for o in candidates {
        if limit.is_some_and(|l| items.len() >= l) {
            more = true;
            break;
        }
        if filter && !(label.matches(&o.value) && field.matches(&o.value)) {
            continue;
        }
        items.push(o);
    }
    let cont = if more {
        items.last().map(|o| pagination::encode(rv, &o.key()))
    } else {
        None
    };
    if req.wants_table() {
        let values: Vec<&Value> = items.iter().map(|o| &o.value).collect();
        let t = table::table(
            def,
            &values,
            rv,
            cont.as_deref(),
            req.q("includeObject").unwrap_or("Metadata"),
            true,
        );
        return Ok(json_reply(200, &t, &[]));
    }
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = &cont {
        meta["continue"] = json!(c);
    } else if def.is_custom() {
        // kube-apiserver's lists of custom resources carry an empty one.
        meta["continue"] = json!("");
    }
    if req.wants_metadata() {
        let list = json!({
            "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
            "items": items.iter().map(|o| table::partial_metadata(&o.value)).collect::<Vec<_>>(),
        });
        return Ok(json_reply(200, &list, &[]));
    }
    Ok(bytes_reply(
        200,
        list_bytes(def, &meta, &items),
        "application/json",
        &[],
    ))
}

/// `{"kind":"<Kind>List",...,"items":[...]}` from the objects' cached bytes (a built-in kind's
/// items without their `apiVersion` and `kind`, as kube-apiserver lists them).
pub fn list_bytes(def: &ResourceDef, meta: &Value, items: &[Obj]) -> Bytes {
    let head = format!(
        "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{},\"items\":[",
        json!(def.list_kind()),
        json!(def.api_version()),
        meta
    );
    let total: usize = items.iter().map(|o| o.json().len() + 1).sum();
    let mut buf = BytesMut::with_capacity(head.len() + total + 2);
    buf.put_slice(head.as_bytes());
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            buf.put_u8(b',');
        }
        if def.is_custom() {
            buf.put_slice(&object_bytes(def, o));
        } else {
            buf.put_slice(&o.item_json());
        }
    }
    buf.put_slice(b"]}");
    buf.freeze()
}

fn create(
    api: &ApiServer,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    req: &Req,
) -> Result<Response<Body>, ApiError> {
    let body = req.json()?;
    let name = match admit::name_of(&body) {
        "" => body
            .pointer("/metadata/generateName")
            .and_then(Value::as_str)
            .unwrap_or("Unknown"),
        n => n,
    }
    .to_string();
    enforce_owner_references(api, req.user.as_ref(), def, ns, &name, None, &body)?;
    let w = api.create(def, ns, body, &write_opts(req))?;
    Ok(render_one(def, &w.obj, req, 201, &w.warnings))
}

fn update(
    api: &ApiServer,
    def: &Arc<ResourceDef>,
    key: &Key,
    status_only: bool,
    req: &Req,
) -> Result<Response<Body>, ApiError> {
    let body = req.json()?;
    undeterminable(def, key, &body)?;
    // The body is decoded before the object is looked up: a mistyped one is a 400 even when
    // the object is absent.
    admit::decode(def, &body)?;
    let body_rv = body
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from);
    // A uid in the body is a precondition kube-apiserver's storage checks first, before the
    // resourceVersion; an absent object is a 404, but for the kinds a PUT creates (whose
    // storage reads an absent object as empty, so the uid precondition fails first).
    let body_uid = body
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from);
    let uid_conflict = |found: &str| {
        ApiError::conflict(
            &def.group,
            &def.plural,
            &key.1,
            &format!(
                "Precondition failed: UID in precondition: {}, UID in object meta: {found}",
                body_uid.as_deref().unwrap_or_default()
            ),
        )
    };
    if creates_on_update(def) && api.get(def, key).is_none() {
        if body_uid.is_some() {
            return Err(uid_conflict(""));
        }
        if !status_only && admit::name_of(&body) == key.1 {
            let mut obj = body.clone();
            if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
            }
            let ns = Some(key.0.as_str()).filter(|n| !n.is_empty());
            enforce_owner_references(api, req.user.as_ref(), def, ns, &key.1, None, &body)?;
            let w = api.create(def, ns, obj, &write_opts(req))?;
            return Ok(written_reply(def, &w, req, 201));
        }
    }
    let opts = write_opts(req);
    let w = api.update(def, key, scope_of(status_only), &opts, &mut |cur| {
        let found = cur
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if body_uid.as_deref().is_some_and(|u| u != found) {
            return Err(uid_conflict(found));
        }
        // Custom resources, Leases and PodDisruptionBudgets have no unconditional update
        // (their strategies' `AllowUnconditionalUpdate`), checked once the object is found.
        let conditional = def.is_custom()
            || matches!(
                def.builtin,
                Some(
                    Builtin::Lease
                        | Builtin::Pdb
                        | Builtin::CsiNode
                        | Builtin::KubePodGroup
                        | Builtin::Workload
                )
            );
        if body_rv.is_none() && conditional {
            return Err(ApiError::invalid_field(
                &def.group,
                &def.plural,
                &key.1,
                "metadata.resourceVersion",
                "Invalid value: 0x0: must be specified for an update",
            ));
        }
        if let Some(rv) = &body_rv
            && *rv
                != cur
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
        {
            return Err(ApiError::stale(&def.group, &def.plural, &key.1));
        }
        if !status_only {
            let ns = Some(key.0.as_str()).filter(|n| !n.is_empty());
            enforce_owner_references(api, req.user.as_ref(), def, ns, &key.1, Some(cur), &body)?;
        }
        Ok(body.clone())
    })?;
    Ok(written_reply(def, &w, req, 200))
}

/// The kinds a PUT of an absent object creates (their strategies' `AllowCreateOnUpdate`).
fn creates_on_update(def: &ResourceDef) -> bool {
    matches!(
        def.builtin,
        Some(
            Builtin::Service
                | Builtin::Event
                | Builtin::EventsV1
                | Builtin::Lease
                | Builtin::Role
                | Builtin::RoleBinding
                | Builtin::ClusterRole
                | Builtin::ClusterRoleBinding
        )
    )
}

/// A PUT body kube-apiserver cannot decode into the kind: a custom resource without its
/// `kind`, a built-in object without its name.
fn undeterminable(def: &ResourceDef, key: &Key, body: &Value) -> Result<(), ApiError> {
    if def.is_custom()
        && body
            .get("kind")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): Object 'Kind' is missing in '{body}'",
            def.kind
        )));
    }
    if !def.is_custom() && admit::name_of(body).is_empty() {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({} based on URL) was undeterminable: name must be provided",
            key.1
        )));
    }
    Ok(())
}

fn written_reply(def: &ResourceDef, w: &Written, req: &Req, code: u16) -> Response<Body> {
    render_one(def, &w.obj, req, code, &w.warnings)
}

fn patch_object(
    api: &ApiServer,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    key: &Key,
    status_only: bool,
    req: &Req,
) -> Result<Response<Body>, ApiError> {
    let kind = PatchKind::from_content_type(&req.content_type, def.is_custom())?;
    let patch_body = patch::parse_body(kind, &req.body)?;
    let mut opts = write_opts(req);
    let precondition = patch_body
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from);
    let check_rv = |cur: &Value| -> Result<(), ApiError> {
        match &precondition {
            Some(rv)
                if rv
                    != cur
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        .unwrap_or_default() =>
            {
                Err(ApiError::stale(&def.group, &def.plural, &key.1))
            }
            _ => Ok(()),
        }
    };
    if kind != PatchKind::Apply {
        let w = api.update(def, key, scope_of(status_only), &opts, &mut |cur| {
            check_rv(cur)?;
            let mut v = cur.clone();
            patch::apply_simple(kind, &mut v, &patch_body)?;
            admit::decode_patched(def, &v)?;
            if !status_only {
                enforce_owner_references(api, req.user.as_ref(), def, ns, &key.1, Some(cur), &v)?;
            }
            Ok(v)
        })?;
        return Ok(written_reply(def, &w, req, 200));
    }
    // Server-side apply.
    let manager = req
        .q("fieldManager")
        .filter(|m| !m.is_empty())
        .map(String::from)
        .ok_or_else(|| {
            ApiError::invalid_field(
                "meta.k8s.io",
                "PatchOptions",
                "",
                "fieldManager",
                "Required value: is required for apply patch",
            )
        })?;
    let force = req.q("force") == Some("true");
    let mut applied = patch_body;
    admit::set_type(def, &mut applied)?;
    admit::set_namespace(def, &mut applied, ns)?;
    let applied_name = admit::name_of(&applied).to_string();
    if applied_name.is_empty() {
        applied["metadata"]["name"] = json!(key.1);
    } else if applied_name != key.1 {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({applied_name}) does not match the name on the URL ({})",
            key.1
        )));
    }
    let keyed = !def.is_custom();
    let now = time::now_rfc3339();
    opts.manager = None;
    for _ in 0..3 {
        if api.get(def, key).is_none() {
            if status_only {
                return Err(ApiError::not_found(&def.group, &def.plural, &key.1));
            }
            // An apply that creates needs `create`, whatever let it patch.
            authorize_create(api, req.user.as_ref(), def, ns, &key.1)?;
            let obj = patch::apply::apply(None, &applied, &manager, force, keyed, &now)?;
            enforce_owner_references(api, req.user.as_ref(), def, ns, &key.1, None, &obj)?;
            match api.create(def, ns, obj, &opts) {
                Ok(w) => return Ok(written_reply(def, &w, req, 201)),
                Err(e) if e.reason == "AlreadyExists" => continue,
                Err(e) => return Err(e),
            }
        }
        match api.update(def, key, scope_of(status_only), &opts, &mut |cur| {
            check_rv(cur)?;
            let v = patch::apply::apply(Some(cur), &applied, &manager, force, keyed, &now)?;
            if !status_only {
                enforce_owner_references(api, req.user.as_ref(), def, ns, &key.1, Some(cur), &v)?;
            }
            Ok(v)
        }) {
            Ok(w) => return Ok(written_reply(def, &w, req, 200)),
            Err(e) if e.code == 404 => continue,
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::internal("apply raced with deletion; try again"))
}

fn delete(
    api: &ApiServer,
    def: &Arc<ResourceDef>,
    key: &Key,
    req: &Req,
) -> Result<Response<Body>, ApiError> {
    let opts = delete_opts(req)?;
    let d = api.delete(def, key, &opts)?;
    // The registries with `ReturnDeletedObject` answer the object, the others a `Status`.
    let returns_object = matches!(
        def.builtin,
        Some(
            Builtin::Pod
                | Builtin::Namespace
                | Builtin::Service
                | Builtin::ServiceAccount
                | Builtin::PersistentVolume
                | Builtin::PersistentVolumeClaim
                | Builtin::StorageClass
                | Builtin::CsiNode
                | Builtin::DeviceClass
                | Builtin::ResourceSlice
                | Builtin::ResourceClaim
                | Builtin::ResourceClaimTemplate
        )
    );
    if d.removed && !returns_object {
        let mut details = json!({"name": key.1, "kind": def.plural, "uid": d.obj.uid()});
        if !def.group.is_empty() {
            details["group"] = json!(def.group);
        }
        return Ok(json_reply(200, &status::success(None, Some(details)), &[]));
    }
    Ok(render_one(def, &d.obj, req, 200, &[]))
}

fn delete_collection(
    api: &ApiServer,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    req: &Req,
) -> Result<Response<Body>, ApiError> {
    let (label, field) = selectors(def, req)?;
    let opts = delete_opts(req)?;
    let (objs, _) = api.store.list(&def.storage_key(), ns, None);
    let mut deleted = Vec::new();
    for o in objs {
        if !(label.matches(&o.value) && field.matches(&o.value)) {
            continue;
        }
        match api.delete(def, &o.key(), &opts) {
            Ok(d) => deleted.push(d.obj),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let meta = json!({"resourceVersion": api.store.current_rv().to_string()});
    Ok(bytes_reply(
        200,
        list_bytes(def, &meta, &deleted),
        "application/json",
        &[],
    ))
}
