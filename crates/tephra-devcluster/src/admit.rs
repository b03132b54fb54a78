//! What the API server does to an object between the request and storage: server-set metadata
//! (uid, creationTimestamp, generation), the status subresource rules, per-kind defaults and
//! checks of the built-in kinds, and, for custom resources, pruning, schema defaults and the
//! CRD's schema and CEL rules through tephra's own admission.

use serde_json::{Value, json};
use tephra_api::admission::AdmissionError;

use crate::resource::{Builtin, ResourceDef};
use crate::status::{ApiError, Cause};
use crate::time;

/// How unknown fields are treated (`fieldValidation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Refuse (400), as `kubectl` asks by default.
    Strict,
    /// Drop and warn (the server's default).
    #[default]
    Warn,
    /// Drop silently.
    Ignore,
}

impl FieldValidation {
    /// From the query parameter.
    pub fn parse(text: Option<&str>) -> Self {
        match text {
            Some("Strict") => Self::Strict,
            Some("Ignore") => Self::Ignore,
            _ => Self::Warn,
        }
    }
}

/// A fresh UUID (version 4).
pub fn uuid() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        b = (time::now_millis() as u128 ^ 0x5a5a_1234_abcd_ef01_u128).to_le_bytes();
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// `generateName` plus five characters, as the API server picks them.
pub fn generate_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut b = [0u8; 5];
    if getrandom::fill(&mut b).is_err() {
        b = (time::now_millis() as u64).to_le_bytes()[..5]
            .try_into()
            .unwrap_or([0; 5]);
    }
    let suffix: String = b
        .iter()
        .map(|x| ALPHABET[*x as usize % ALPHABET.len()] as char)
        .collect();
    let prefix = if prefix.len() > 58 {
        &prefix[..58]
    } else {
        prefix
    };
    format!("{prefix}{suffix}")
}

fn meta_mut(obj: &mut Value) -> &mut serde_json::Map<String, Value> {
    let slot = &mut obj["metadata"];
    if !slot.is_object() {
        *slot = Value::Object(serde_json::Map::new());
    }
    match slot {
        Value::Object(m) => m,
        // Made an object just above.
        _ => unreachable!("metadata is an object"),
    }
}

/// The name of an object.
pub fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Sets `apiVersion` and `kind` from the resource, refusing a body of another kind.
pub fn set_type(def: &ResourceDef, obj: &mut Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    if !kind.is_empty() && kind != def.kind {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({})",
            obj.get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            def.api_version()
        )));
    }
    obj["apiVersion"] = json!(def.api_version());
    obj["kind"] = json!(def.kind);
    Ok(())
}

/// Places the object in the request's namespace (or none, for cluster-scoped kinds).
pub fn set_namespace(
    def: &ResourceDef,
    obj: &mut Value,
    namespace: Option<&str>,
) -> Result<(), ApiError> {
    let meta = meta_mut(obj);
    if def.namespaced {
        let ns = namespace.unwrap_or("default");
        match meta.get("namespace").and_then(Value::as_str) {
            Some(given) if !given.is_empty() && given != ns => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on \
                     the request",
                ));
            }
            _ => {
                meta.insert("namespace".into(), json!(ns));
            }
        }
    } else {
        meta.remove("namespace");
    }
    Ok(())
}

fn has_generation(def: &ResourceDef) -> bool {
    def.is_custom()
        || matches!(
            def.builtin,
            Some(
                Builtin::Pod
                    | Builtin::Pdb
                    | Builtin::Deployment
                    | Builtin::Crd
                    | Builtin::DeviceClass
            )
        )
}

/// Server-set metadata of a new object.
pub fn stamp_new(def: &ResourceDef, obj: &mut Value) -> Result<(), ApiError> {
    let meta = meta_mut(obj);
    let name = meta.get("name").and_then(Value::as_str).unwrap_or_default();
    if name.is_empty() {
        let prefix = meta
            .get("generateName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if prefix.is_empty() {
            return Err(ApiError::invalid_field(
                &def.group,
                &def.kind,
                "",
                "metadata.name",
                "Required value: name or generateName is required",
            ));
        }
        meta.insert("name".into(), json!(generate_name(&prefix)));
    }
    meta.insert("uid".into(), json!(uuid()));
    meta.insert("creationTimestamp".into(), json!(time::now_rfc3339()));
    for k in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ] {
        meta.remove(k);
    }
    if has_generation(def) {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    // The name is checked with the rest of the metadata (`validate.rs`): a built-in kind's
    // in its validation, a custom resource's with its schema (`admit_custom`).
    Ok(())
}

/// Keeps what an update may not change: identity, creation, deletion state, generation, and
/// (outside the status subresource) the status; on the status subresource, everything but the
/// status.
pub fn carry_over(
    def: &ResourceDef,
    old: &Value,
    new: &mut Value,
    status_only: bool,
    keep_status: bool,
) {
    if status_only {
        // Everything but the status is the stored object's. Only what differs is copied:
        // a status write usually sends the rest unchanged, and a whole copy per write was
        // a large part of a status update's cost.
        let (Some(old_map), Some(map)) = (old.as_object(), new.as_object_mut()) else {
            let status = new.get_mut("status").map(Value::take);
            *new = old.clone();
            if let Some(m) = new.as_object_mut() {
                match status {
                    Some(s) => m.insert("status".into(), s),
                    None => m.remove("status"),
                };
            }
            return;
        };
        map.retain(|k, _| k == "status" || old_map.contains_key(k));
        for (k, v) in old_map {
            if k != "status" && map.get(k) != Some(v) {
                map.insert(k.clone(), v.clone());
            }
        }
        return;
    }
    if def.status && keep_status {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    let empty = serde_json::Map::new();
    let old_meta = old
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let meta = meta_mut(new);
    for k in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "name",
        "namespace",
    ] {
        match old_meta.get(k) {
            Some(v) => {
                meta.insert(k.into(), v.clone());
            }
            None => {
                meta.remove(k);
            }
        }
    }
}

/// Whether two objects differ outside metadata (and outside status when `status_too`),
/// compared in place: a copy of each object per write was a fifth of an update's cost.
fn differs_outside_meta(a: &Value, b: &Value, status_too: bool) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a != b;
    };
    let counts = |m: &serde_json::Map<String, Value>| {
        m.keys()
            .filter(|k| *k != "metadata" && !(status_too && *k == "status"))
            .count()
    };
    counts(a) != counts(b)
        || a.iter()
            .any(|(k, v)| k != "metadata" && !(status_too && k == "status") && b.get(k) != Some(v))
}

/// Bumps `metadata.generation` when anything outside metadata (and outside status, for kinds
/// with a status subresource) changed; for a Deployment, its annotations too (they are copied
/// to its ReplicaSets).
pub fn bump_generation(def: &ResourceDef, old: &Value, new: &mut Value) {
    if !has_generation(def) {
        return;
    }
    let annotations = |v: &Value| {
        v.pointer("/metadata/annotations")
            .filter(|a| a.as_object().is_some_and(|m| !m.is_empty()))
            .cloned()
    };
    let deployment_annotations =
        def.builtin == Some(Builtin::Deployment) && annotations(old) != annotations(new);
    if deployment_annotations || differs_outside_meta(old, new, def.status) {
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta_mut(new).insert("generation".into(), json!(g + 1));
    }
}

/// The Service registry's part of an update, before validation: the cluster IP and node
/// ports the request leaves out are kept (`patchAllocatedValues`), and those the new type no
/// longer needs are dropped when the request kept them as they were
/// (`dropTypeDependentFields`).
pub fn service_update(old: &Value, new: &mut Value) {
    let text = |v: &Value, p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let needs_ip = |v: &Value| text(v, "/spec/type") != "ExternalName";
    let needs_node_port = |v: &Value| {
        matches!(text(v, "/spec/type").as_str(), "NodePort" | "LoadBalancer")
            && v.pointer("/spec/allocateLoadBalancerNodePorts") != Some(&Value::Bool(false))
    };
    let node_ports = |v: &Value| -> Vec<Option<i64>> {
        v.pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| p.get("nodePort").and_then(Value::as_i64))
            .collect()
    };
    if needs_ip(old) && needs_ip(new) {
        if text(new, "/spec/clusterIP").is_empty()
            && let Some(ip) = old.pointer("/spec/clusterIP").cloned()
        {
            new["spec"]["clusterIP"] = ip;
        }
        if new
            .pointer("/spec/clusterIPs")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
            && let Some(ips) = old.pointer("/spec/clusterIPs").cloned()
        {
            new["spec"]["clusterIPs"] = ips;
        }
    }
    if needs_node_port(old) && needs_node_port(new) {
        let used_old: Vec<i64> = node_ports(old).into_iter().flatten().collect();
        let used: Vec<i64> = node_ports(new)
            .into_iter()
            .flatten()
            .filter(|p| used_old.contains(p))
            .collect();
        let by_name: Vec<(String, i64)> = old
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| Some((text(p, "/name"), p.get("nodePort").and_then(Value::as_i64)?)))
            .collect();
        if let Some(ports) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            for p in ports.iter_mut().filter(|p| p.get("nodePort").is_none()) {
                let name = text(p, "/name");
                if let Some((_, n)) = by_name.iter().find(|(pn, _)| *pn == name)
                    && !used.contains(n)
                {
                    p["nodePort"] = json!(n);
                }
            }
        }
    }
    if needs_node_port(old)
        && !needs_node_port(new)
        && node_ports(old) == node_ports(new)
        && let Some(ports) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut)
    {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            p.remove("nodePort");
        }
    }
    let externally = |v: &Value| {
        needs_node_port(v)
            || matches!(text(v, "/spec/type").as_str(), "NodePort" | "LoadBalancer")
            || v.pointer("/spec/externalIPs")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
    };
    if externally(old)
        && !externally(new)
        && old.pointer("/spec/externalTrafficPolicy") == new.pointer("/spec/externalTrafficPolicy")
        && let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut)
    {
        spec.remove("externalTrafficPolicy");
    }
}

/// Refuses new finalizers on an object being deleted.
pub fn check_finalizers(def: &ResourceDef, old: &Value, new: &Value) -> Result<(), ApiError> {
    if old.pointer("/metadata/deletionTimestamp").is_none() {
        return Ok(());
    }
    let list = |v: &Value| -> Vec<String> {
        v.pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(String::from))
            .collect()
    };
    let before = list(old);
    let added: Vec<String> = list(new)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    if added.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        &def.group,
        &def.kind,
        name_of(new),
        vec![Cause {
            reason: "FieldValueForbidden".into(),
            message: format!(
                "Forbidden: no new finalizers can be added if the object is being deleted, found \
                 new finalizers []string{{{}}}",
                added
                    .iter()
                    .map(|f| format!("{f:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            field: "metadata.finalizers".into(),
        }],
    ))
}

/// What became of the unknown fields an object came with: a 400 with `Strict` (as the API
/// server's strict decoding answers), warnings with `Warn`, nothing with `Ignore`.
fn unknown_fields(
    def: &ResourceDef,
    pruned: &[String],
    validation: FieldValidation,
) -> Result<Vec<String>, ApiError> {
    if pruned.is_empty() {
        return Ok(Vec::new());
    }
    match validation {
        FieldValidation::Strict => {
            let list = pruned
                .iter()
                .map(|p| format!("unknown field {p:?}"))
                .collect::<Vec<_>>()
                .join(", ");
            Err(ApiError::bad_request(format!(
                "{} in version {:?} cannot be handled as a {}: strict decoding error: {list}",
                def.kind, def.version, def.kind
            )))
        }
        FieldValidation::Warn => Ok(pruned
            .iter()
            .map(|p| format!("unknown field {p:?}"))
            .collect()),
        FieldValidation::Ignore => Ok(Vec::new()),
    }
}

/// Refuses, as decoding does on a real server (400), an object with a field of the wrong JSON
/// type: anywhere in a built-in object, in a custom resource's `metadata`.
pub fn decode(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    match crate::builtin_schema::mistyped(def.builtin, obj) {
        None => Ok(()),
        Some(m) => Err(ApiError::bad_request(format!(
            "{} in version {:?} cannot be handled as a {}: json: cannot unmarshal {} into Go \
             struct field {} of type {}",
            def.kind, def.version, def.kind, m.got, m.path, m.want
        ))),
    }
}

/// [`decode`] for the result of a JSON, merge or strategic patch: kube-apiserver refuses it
/// with 422 naming the field `patch`, the patched object and why it did not decode.
pub fn decode_patched(def: &ResourceDef, patched: &Value) -> Result<(), ApiError> {
    match crate::builtin_schema::mistyped(def.builtin, patched) {
        None => Ok(()),
        Some(m) => Err(ApiError::invalid(
            "",
            "",
            "",
            vec![Cause {
                reason: "FieldValueInvalid".into(),
                message: format!(
                    "Invalid value: {:?}: json: cannot unmarshal {} into Go struct field {} of \
                     type {}",
                    patched.to_string(),
                    m.got,
                    m.path,
                    m.want
                ),
                field: "patch".into(),
            }],
        )),
    }
}

/// Built-in kinds: drops the fields the kind's type does not have (or refuses them with
/// `Strict`), as decoding into the typed object does on a real server. Returns warnings.
pub fn prune_builtin(
    def: &ResourceDef,
    obj: &mut Value,
    validation: FieldValidation,
) -> Result<Vec<String>, ApiError> {
    let Some(schema) = def.builtin.and_then(crate::builtin_schema::schema) else {
        return Ok(Vec::new());
    };
    let mut pruned = crate::prune::prune_metadata(obj);
    pruned.extend(schema.prune(obj));
    unknown_fields(def, &pruned, validation)
}

/// Custom resources: prune (or refuse unknown fields), apply schema defaults, then check the
/// schema and CEL rules. Returns warnings. `status_write`: the status comes with the request
/// (a write through the status subresource), so its defaults apply too.
pub fn admit_custom(
    def: &ResourceDef,
    obj: &mut Value,
    validation: FieldValidation,
    status_write: bool,
) -> Result<Vec<String>, ApiError> {
    // kube-apiserver checks a custom resource's metadata (name, labels, annotations) with its
    // schema, and answers every cause at once.
    let mut causes = crate::validate::metadata(def, obj);
    let Some(schema) = &def.schema else {
        return refuse_if_any(def, obj, causes).map(|()| Vec::new());
    };
    let pruned = crate::prune::prune(obj, schema);
    let mut warnings = unknown_fields(def, &pruned, validation)?;
    let status = obj.get("status").cloned();
    let mut defaulted = kube_cel::apply_defaults(schema, obj);
    // Defaults apply to what the request carries; a status kept from storage stays as it was.
    if def.status
        && !status_write
        && let Some(s) = status
    {
        defaulted["status"] = s;
    }
    *obj = defaulted;
    if let Some(admission) = &def.admission {
        match admission.admit(obj) {
            Ok(admitted) => warnings.extend(admitted.warnings),
            Err(AdmissionError::Invalid { errors, .. }) => {
                causes.extend(errors.into_iter().map(|e| Cause {
                    reason: e.reason().into(),
                    message: if e.message == "is required" {
                        "Required value".into()
                    } else {
                        e.message
                    },
                    field: e.field,
                }));
                return Err(ApiError::invalid(
                    &def.group,
                    &def.kind,
                    name_of(obj),
                    causes,
                ));
            }
            Err(other) => return Err(ApiError::bad_request(other.to_string())),
        }
    }
    refuse_if_any(def, obj, causes)?;
    Ok(warnings)
}

/// A 422 `Invalid` naming every cause, if there is any.
pub(crate) fn refuse_if_any(
    def: &ResourceDef,
    obj: &Value,
    causes: Vec<Cause>,
) -> Result<(), ApiError> {
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(
            &def.group,
            &def.kind,
            name_of(obj),
            causes,
        ))
    }
}

fn required(field: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired".into(),
        message: "Required value".into(),
        field: field.into(),
    }
}

/// Checks of the built-in kinds (`validate.rs`), and of an update against the stored object.
pub fn validate_builtin(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    validate_builtin_update(def, None, obj)
}

/// [`validate_builtin`] for an update of `old` (what may not change, besides).
pub fn validate_builtin_update(
    def: &ResourceDef,
    old: Option<&Value>,
    obj: &Value,
) -> Result<(), ApiError> {
    // kube-apiserver decodes a Secret's `stringData` into its `data` before it validates: a
    // key or an immutable Secret's data is checked as written there.
    let folded;
    let obj = if def.builtin == Some(Builtin::Secret) && obj.get("stringData").is_some() {
        let mut o = obj.clone();
        fold_string_data(&mut o);
        folded = o;
        &folded
    } else {
        obj
    };
    let mut causes = crate::validate::builtin(def, obj);
    if let Some(old) = old {
        causes.extend(crate::validate::builtin_update(def, old, obj));
    }
    crate::validate_dra::check(def, old, obj, &mut causes);
    match def.builtin {
        Some(Builtin::PriorityClass) if !obj.get("value").is_some_and(Value::is_i64) => {
            causes.push(required("value"));
        }
        Some(Builtin::Pdb) => {
            let min = obj.pointer("/spec/minAvailable").is_some();
            let max = obj.pointer("/spec/maxUnavailable").is_some();
            if min && max {
                causes.push(Cause {
                    reason: "FieldValueInvalid".into(),
                    message:
                        "Invalid value: \"\": minAvailable and maxUnavailable cannot be both set"
                            .into(),
                    field: "spec".into(),
                });
            }
        }
        _ => {}
    }
    refuse_if_any(def, obj, causes)
}

/// A Secret whose `data` is not base64 cannot be decoded into a Secret: a 400, as
/// kube-apiserver's decoding answers.
pub fn decode_secret(secret: &Value) -> Result<(), ApiError> {
    use base64::Engine;
    for (_, v) in secret
        .get("data")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let text = v.as_str().unwrap_or_default();
        if let Err(e) = base64::engine::general_purpose::STANDARD.decode(text) {
            return Err(ApiError::bad_request(format!(
                "Secret in version \"v1\" cannot be handled as a Secret: {e}"
            )));
        }
    }
    Ok(())
}

/// A Secret's `stringData` folded into `data`, and its `type` defaulted to `Opaque`, as the
/// API server stores it.
pub fn fold_string_data(secret: &mut Value) {
    use base64::Engine;
    if secret.get("type").is_none_or(|t| t.as_str() == Some("")) {
        secret["type"] = json!("Opaque");
    }
    let Some(string_data) = secret.as_object_mut().and_then(|m| m.remove("stringData")) else {
        return;
    };
    if !secret.get("data").is_some_and(Value::is_object) {
        secret["data"] = json!({});
    }
    for (k, v) in string_data.as_object().into_iter().flatten() {
        let text = v.as_str().unwrap_or_default();
        secret["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(text));
    }
}

/// A CRD's status once it is served: names accepted, established, stored versions.
pub fn crd_status(crd: &mut Value) {
    let now = time::now_rfc3339();
    let storage: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let condition = |t: &str, reason: &str, msg: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": msg});
    crd["status"] = json!({
        "acceptedNames": names,
        "storedVersions": storage,
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
    });
}
