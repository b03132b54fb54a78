//! kube-apiserver 1.34's rules for dynamic resource allocation (`resource.k8s.io/v1`), as the
//! differential test against it (`tests/differential`, its resource-claim sequences) compares
//! them: a ResourceClaim's requests (a name each, exactly one of `exactly` and
//! `firstAvailable`, a device class, CEL selectors that compile, an allocation mode and its
//! count), constraints and configuration naming its requests; a spec that never changes; a
//! status whose reservations need an allocation (and gain none while the claim is being
//! deleted), whose allocation names the claim's requests and valid devices and, once set, is
//! only ever removed; a DeviceClass's selectors and configuration; the defaults the API
//! server's decoding gives (`allocationMode: ExactCount`, `count: 1`). Causes come in
//! kube-apiserver's order, named as it names them.

use serde_json::{Value, json};

use crate::resource::{Builtin, ResourceDef};
use crate::status::Cause;
use crate::validate::{LABEL_FMT, SUBDOMAIN_FMT, cause, invalid};

const REQUESTS_MAX: usize = 32;
const CONSTRAINTS_MAX: usize = 32;
const CONFIG_MAX: usize = 32;
const SELECTORS_MAX: usize = 32;
const FIRST_AVAILABLE_MAX: usize = 8;
const RESERVED_FOR_MAX: usize = 256;
const RESULTS_MAX: usize = 32;
const CEL_MAX_LENGTH: usize = 10 * 1024;
const PARAMETERS_MAX_LENGTH: usize = 10 * 1024;
const REQUEST_REF: &str = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'";

fn required(field: &str, why: &str) -> Cause {
    let message = if why.is_empty() {
        "Required value".to_string()
    } else {
        format!("Required value: {why}")
    };
    cause("FieldValueRequired", field, message)
}

fn forbidden(field: &str, why: &str) -> Cause {
    cause("FieldValueForbidden", field, format!("Forbidden: {why}"))
}

fn items(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A list's size limit and duplicate keys (`key` of each item, named `name` in the field),
/// after its items were checked, as `validateSet` orders them.
fn set_tail(
    at: &str,
    list: &[Value],
    max: usize,
    key: &dyn Fn(&Value) -> String,
    name: &str,
    out: &mut Vec<Cause>,
) {
    too_many(at, list, max, out);
    let mut seen = std::collections::BTreeSet::new();
    for (i, item) in list.iter().enumerate() {
        let k = key(item);
        if !seen.insert(k.clone()) {
            let field = if name.is_empty() {
                format!("{at}[{i}]")
            } else {
                format!("{at}[{i}].{name}")
            };
            out.push(cause(
                "FieldValueDuplicate",
                &field,
                format!("Duplicate value: {}", json!(k)),
            ));
        }
    }
}

fn too_many(at: &str, list: &[Value], max: usize, out: &mut Vec<Cause>) {
    if list.len() > max {
        out.push(cause(
            "FieldValueTooMany",
            at,
            format!("Too many: {}: must have at most {max} items", list.len()),
        ));
    }
}

/// The characters and ends of an RFC 1123 label, whatever its length.
fn label_form(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn dns_label(at: &str, s: &str, out: &mut Vec<Cause>) {
    if s.len() > 63 {
        out.push(invalid(at, &json!(s), "must be no more than 63 characters"));
    }
    if !label_form(s) {
        out.push(invalid(at, &json!(s), LABEL_FMT));
    }
}

fn subdomain_form(s: &str) -> bool {
    s.split('.').all(label_form)
}

fn dns_subdomain(at: &str, s: &str, out: &mut Vec<Cause>) {
    if s.len() > 253 {
        out.push(invalid(
            at,
            &json!(s),
            "must be no more than 253 characters",
        ));
    }
    if !subdomain_form(s) {
        out.push(invalid(at, &json!(s), SUBDOMAIN_FMT));
    }
}

/// A driver's name: as a CSI driver's, a DNS subdomain (in lower case) of at most 63.
fn driver(at: &str, s: &str, out: &mut Vec<Cause>) {
    if s.is_empty() {
        out.push(required(at, ""));
    }
    if s.len() > 63 {
        out.push(cause(
            "FieldValueTooLong",
            at,
            "Too long: may not be more than 63 bytes".into(),
        ));
    }
    dns_subdomain(at, &s.to_lowercase(), out);
}

fn selectors(at: &str, list: &[Value], out: &mut Vec<Cause>) {
    for (i, s) in list.iter().enumerate() {
        let at = format!("{at}[{i}].cel");
        match s.get("cel").filter(|c| !c.is_null()) {
            None => out.push(required(&at, "")),
            Some(c) => cel_selector(&at, &text(c, "expression"), out),
        }
    }
    too_many(at, list, SELECTORS_MAX, out);
}

/// A selector's expression compiles, over the one variable DRA's environment declares.
fn cel_selector(at: &str, expression: &str, out: &mut Vec<Cause>) {
    let at = format!("{at}.expression");
    if expression.len() > CEL_MAX_LENGTH {
        out.push(cause(
            "FieldValueTooLong",
            &at,
            format!("Too long: may not be more than {CEL_MAX_LENGTH} bytes"),
        ));
        return;
    }
    if expression.trim().is_empty() {
        out.push(required(&at, "expression must not be empty"));
        return;
    }
    match kube_cel::cel::Program::compile(expression) {
        Err(e) => out.push(invalid(
            &at,
            &json!(expression),
            &format!("compilation failed: {e}"),
        )),
        Ok(p) => {
            if let Some(v) = p
                .references()
                .variables()
                .into_iter()
                .find(|v| *v != "device")
            {
                out.push(invalid(
                    &at,
                    &json!(expression),
                    &format!("compilation failed: undeclared reference to '{v}'"),
                ));
            }
        }
    }
}

fn allocation_mode(at: &str, r: &Value, out: &mut Vec<Cause>) {
    let count = r.get("count").and_then(Value::as_i64).unwrap_or(0);
    match r
        .get("allocationMode")
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "All" if count != 0 => out.push(invalid(
            &format!("{at}.count"),
            &json!(count),
            "must not be specified when allocationMode is 'All'",
        )),
        "All" => {}
        "ExactCount" if count <= 0 => out.push(invalid(
            &format!("{at}.count"),
            &json!(count),
            "must be greater than zero",
        )),
        "ExactCount" => {}
        other => out.push(cause(
            "FieldValueNotSupported",
            &format!("{at}.allocationMode"),
            format!(
                "Unsupported value: {}: supported values: \"All\", \"ExactCount\"",
                json!(other)
            ),
        )),
    }
}

fn device_class(at: &str, r: &Value, out: &mut Vec<Cause>) {
    let class = text(r, "deviceClassName");
    let at = format!("{at}.deviceClassName");
    if class.is_empty() {
        out.push(required(&at, ""));
    } else {
        dns_subdomain(&at, &class, out);
    }
}

fn request(at: &str, r: &Value, out: &mut Vec<Cause>) {
    dns_label(&format!("{at}.name"), &text(r, "name"), out);
    let mut kinds = 0;
    let first = items(r.get("firstAvailable"));
    if !first.is_empty() {
        kinds += 1;
        let list_at = format!("{at}.firstAvailable");
        for (i, s) in first.iter().enumerate() {
            let sub_at = format!("{list_at}[{i}]");
            dns_label(&format!("{sub_at}.name"), &text(s, "name"), out);
            device_class(&sub_at, s, out);
            selectors(
                &format!("{sub_at}.selectors"),
                items(s.get("selectors")),
                out,
            );
            allocation_mode(&sub_at, s, out);
        }
        set_tail(
            &list_at,
            first,
            FIRST_AVAILABLE_MAX,
            &|s| text(s, "name"),
            "name",
            out,
        );
    }
    if let Some(e) = r.get("exactly").filter(|e| !e.is_null()) {
        kinds += 1;
        let e_at = format!("{at}.exactly");
        device_class(&e_at, e, out);
        selectors(&format!("{e_at}.selectors"), items(e.get("selectors")), out);
        allocation_mode(&e_at, e, out);
    }
    match kinds {
        0 => out.push(required(
            at,
            "exactly one of `exactly` or `firstAvailable` is required",
        )),
        1 => {}
        _ => out.push(invalid(
            at,
            &Value::Null,
            "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
        )),
    }
}

/// The names a claim's requests and their alternatives answer to (`r`, `r/sub`).
fn request_names(spec: &Value) -> Vec<(String, Vec<String>)> {
    items(spec.pointer("/devices/requests"))
        .iter()
        .map(|r| {
            let subs = items(r.get("firstAvailable"))
                .iter()
                .map(|s| text(s, "name"))
                .collect();
            (text(r, "name"), subs)
        })
        .collect()
}

fn request_ref(at: &str, name: &str, names: &[(String, Vec<String>)], out: &mut Vec<Cause>) {
    let segments: Vec<&str> = name.split('/').collect();
    if segments.len() > 2 {
        out.push(invalid(at, &json!(name), REQUEST_REF));
        return;
    }
    for s in &segments {
        dns_label(at, s, out);
    }
    let known = names.iter().any(|(r, subs)| {
        r == segments[0]
            && match segments.get(1) {
                None => true,
                Some(sub) => subs.iter().any(|s| s == sub),
            }
    });
    if !known {
        out.push(invalid(at, &json!(name), REQUEST_REF));
    }
}

fn request_refs(at: &str, refs: &[Value], names: &[(String, Vec<String>)], out: &mut Vec<Cause>) {
    for (i, r) in refs.iter().enumerate() {
        request_ref(
            &format!("{at}[{i}]"),
            r.as_str().unwrap_or_default(),
            names,
            out,
        );
    }
    set_tail(
        at,
        refs,
        REQUESTS_MAX,
        &|r| r.as_str().unwrap_or_default().to_string(),
        "",
        out,
    );
}

/// An opaque configuration (`opaque`: a driver and its parameters, a JSON object).
fn configuration(at: &str, c: &Value, out: &mut Vec<Cause>) {
    let Some(o) = c.get("opaque").filter(|o| !o.is_null()) else {
        out.push(required(&format!("{at}.opaque"), ""));
        return;
    };
    let at = format!("{at}.opaque");
    driver(&format!("{at}.driver"), &text(o, "driver"), out);
    let p_at = format!("{at}.parameters");
    match o.get("parameters") {
        None | Some(Value::Null) => out.push(required(&p_at, "")),
        Some(p) if p.to_string().len() > PARAMETERS_MAX_LENGTH => out.push(cause(
            "FieldValueTooLong",
            &p_at,
            format!("Too long: may not be more than {PARAMETERS_MAX_LENGTH} bytes"),
        )),
        Some(Value::Object(_)) => {}
        Some(_) => out.push(invalid(
            &p_at,
            &json!("<value omitted>"),
            "must be a valid JSON object",
        )),
    }
}

fn qualified_attribute(at: &str, name: &str, out: &mut Vec<Cause>) {
    if name.is_empty() {
        out.push(required(at, "name required"));
        return;
    }
    let parts: Vec<&str> = name.split('/').collect();
    let c_identifier = |id: &str, out: &mut Vec<Cause>| {
        if id.len() > 32 {
            out.push(cause(
                "FieldValueTooLong",
                at,
                "Too long: may not be more than 32 bytes".into(),
            ));
        }
        let ok = id.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            out.push(invalid(
                at,
                &json!(id),
                "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')",
            ));
        }
    };
    match parts.as_slice() {
        [id] => c_identifier(id, out),
        [domain, id] => {
            if domain.is_empty() {
                out.push(required(at, "the domain must not be empty"));
            } else {
                driver(at, domain, out);
            }
            if id.is_empty() {
                out.push(required(at, "the name must not be empty"));
            } else {
                c_identifier(id, out);
            }
        }
        _ => {}
    }
    if !name.contains('/') {
        out.push(invalid(at, &json!(name), "must include a domain"));
    }
}

/// A claim's spec at `at` (`spec`, or a template's `spec.spec`), on create and on every
/// write of it.
fn claim_spec(at: &str, spec: &Value, out: &mut Vec<Cause>) {
    let names = request_names(spec);
    let requests = items(spec.pointer("/devices/requests"));
    for (i, r) in requests.iter().enumerate() {
        request(&format!("{at}.devices.requests[{i}]"), r, out);
    }
    set_tail(
        &format!("{at}.devices.requests"),
        requests,
        REQUESTS_MAX,
        &|r| text(r, "name"),
        "name",
        out,
    );
    let constraints = items(spec.pointer("/devices/constraints"));
    for (i, c) in constraints.iter().enumerate() {
        let at = format!("{at}.devices.constraints[{i}]");
        request_refs(
            &format!("{at}.requests"),
            items(c.get("requests")),
            &names,
            out,
        );
        match c.get("matchAttribute").and_then(Value::as_str) {
            Some(a) => qualified_attribute(&format!("{at}.matchAttribute"), a, out),
            None => out.push(required(&format!("{at}.matchAttribute"), "")),
        }
    }
    too_many(
        &format!("{at}.devices.constraints"),
        constraints,
        CONSTRAINTS_MAX,
        out,
    );
    let config = items(spec.pointer("/devices/config"));
    for (i, c) in config.iter().enumerate() {
        let at = format!("{at}.devices.config[{i}]");
        request_refs(
            &format!("{at}.requests"),
            items(c.get("requests")),
            &names,
            out,
        );
        configuration(&at, c, out);
    }
    too_many(&format!("{at}.devices.config"), config, CONFIG_MAX, out);
}

fn node_selector(at: &str, s: &Value, out: &mut Vec<Cause>) {
    let at = format!("{at}.nodeSelectorTerms");
    let terms = items(s.get("nodeSelectorTerms"));
    if terms.is_empty() {
        out.push(required(&at, "must have at least one node selector term"));
        return;
    }
    for (i, t) in terms.iter().enumerate() {
        for (j, e) in items(t.get("matchExpressions")).iter().enumerate() {
            let at = format!("{at}[{i}].matchExpressions[{j}]");
            let values = items(e.get("values"));
            match text(e, "operator").as_str() {
                "In" | "NotIn" if values.is_empty() => out.push(required(
                    &format!("{at}.values"),
                    "must be specified when `operator` is 'In' or 'NotIn'",
                )),
                "Exists" | "DoesNotExist" if !values.is_empty() => out.push(forbidden(
                    &format!("{at}.values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )),
                "Gt" | "Lt" if values.len() != 1 => out.push(required(
                    &format!("{at}.values"),
                    "must be specified single value when `operator` is 'Lt' or 'Gt'",
                )),
                "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
                other => out.push(invalid(
                    &format!("{at}.operator"),
                    &json!(other),
                    "not a valid selector operator",
                )),
            }
            let key = text(e, "key");
            if !crate::validate::is_qualified_name(&key) {
                out.push(invalid(
                    &format!("{at}.key"),
                    &json!(key),
                    "name part must be valid",
                ));
            }
        }
        for (j, f) in items(t.get("matchFields")).iter().enumerate() {
            let at = format!("{at}[{i}].matchFields[{j}]");
            let values = items(f.get("values"));
            match text(f, "operator").as_str() {
                "In" | "NotIn" if values.len() != 1 => out.push(required(
                    &format!("{at}.values"),
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                )),
                "In" | "NotIn" => {}
                other => out.push(invalid(
                    &format!("{at}.operator"),
                    &json!(other),
                    "not a valid selector operator",
                )),
            }
            if text(f, "key") != "metadata.name" {
                out.push(invalid(
                    &format!("{at}.key"),
                    &json!(text(f, "key")),
                    "not a valid field selector key",
                ));
            } else {
                for (k, v) in values.iter().enumerate() {
                    let v = v.as_str().unwrap_or_default();
                    dns_subdomain(&format!("{at}.values[{k}]"), v, out);
                }
            }
        }
    }
}

/// A new allocation (one already stored is not checked again: it may not change).
fn allocation(a: &Value, names: &[(String, Vec<String>)], out: &mut Vec<Cause>) {
    let at = "status.allocation.devices";
    let results = items(a.pointer("/devices/results"));
    for (i, r) in results.iter().enumerate() {
        let r_at = format!("{at}.results[{i}]");
        request_ref(&format!("{r_at}.request"), &text(r, "request"), names, out);
        driver(&format!("{r_at}.driver"), &text(r, "driver"), out);
        let pool = text(r, "pool");
        let p_at = format!("{r_at}.pool");
        if pool.is_empty() {
            out.push(required(&p_at, ""));
        } else {
            if pool.len() > 253 {
                out.push(cause(
                    "FieldValueTooLong",
                    &p_at,
                    "Too long: may not be more than 253 bytes".into(),
                ));
            }
            for part in pool.split('/') {
                dns_subdomain(&p_at, part, out);
            }
        }
        dns_label(&format!("{r_at}.device"), &text(r, "device"), out);
    }
    too_many(&format!("{at}.results"), results, RESULTS_MAX, out);
    let config = items(a.pointer("/devices/config"));
    for (i, c) in config.iter().enumerate() {
        let c_at = format!("{at}.config[{i}]");
        match text(c, "source").as_str() {
            "" => out.push(required(&format!("{c_at}.source"), "")),
            "FromClaim" | "FromClass" => {}
            other => out.push(cause(
                "FieldValueNotSupported",
                &format!("{c_at}.source"),
                format!(
                    "Unsupported value: {}: supported values: \"FromClaim\", \"FromClass\"",
                    json!(other)
                ),
            )),
        }
        request_refs(
            &format!("{c_at}.requests"),
            items(c.get("requests")),
            names,
            out,
        );
        configuration(&c_at, c, out);
    }
    too_many(&format!("{at}.config"), config, 2 * CONFIG_MAX, out);
    if let Some(s) = a.get("nodeSelector").filter(|s| !s.is_null()) {
        node_selector("status.allocation.nodeSelector", s, out);
    }
}

/// A claim's status written over `old`'s.
fn claim_status(old: &Value, new: &Value, out: &mut Vec<Cause>) {
    let reserved = items(new.pointer("/status/reservedFor"));
    for (i, r) in reserved.iter().enumerate() {
        for f in ["resource", "name", "uid"] {
            if text(r, f).is_empty() {
                out.push(required(&format!("status.reservedFor[{i}].{f}"), ""));
            }
        }
    }
    set_tail(
        "status.reservedFor",
        reserved,
        RESERVED_FOR_MAX,
        &|r| text(r, "uid"),
        "uid",
        out,
    );
    let new_alloc = new.pointer("/status/allocation").filter(|a| !a.is_null());
    let old_alloc = old.pointer("/status/allocation").filter(|a| !a.is_null());
    if !reserved.is_empty() {
        if new_alloc.is_none() {
            out.push(forbidden(
                "status.reservedFor",
                "may not be specified when `allocated` is not set",
            ));
        } else if new.pointer("/metadata/deletionTimestamp").is_some() {
            let before = items(old.pointer("/status/reservedFor"));
            if reserved.iter().any(|r| !before.contains(r)) {
                out.push(forbidden(
                    "status.reservedFor",
                    "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set",
                ));
            }
        }
    }
    match (old_alloc, new_alloc) {
        (Some(o), Some(n)) if o != n => {
            out.push(invalid("status.allocation", n, "field is immutable"));
        }
        (None, Some(n)) => allocation(n, &request_names(&new["spec"]), out),
        _ => {}
    }
}

/// What kube-apiserver refuses in `obj`, a ResourceClaim, a ResourceClaimTemplate or a
/// DeviceClass, created (`old` none) or written over `old`; nothing for other kinds. Its
/// metadata is checked apart (`validate::metadata`). An update of a claim or a template is
/// checked as a create, then as an update: the spec's own causes come twice, as from
/// kube-apiserver. A claim's status is checked on every update: on a write of its main
/// resource it is the stored one, which passes.
pub fn check(def: &ResourceDef, old: Option<&Value>, obj: &Value, out: &mut Vec<Cause>) {
    let spec_of = |o: &Value| o.get("spec").cloned().unwrap_or(json!({}));
    let immutable = |old: &Value, out: &mut Vec<Cause>| {
        if spec_of(old) != spec_of(obj) {
            out.push(invalid("spec", &spec_of(obj), "field is immutable"));
        }
    };
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    match def.builtin {
        Some(Builtin::ResourceClaim) => {
            claim_spec("spec", spec, out);
            if let Some(old) = old {
                immutable(old, out);
                claim_spec("spec", spec, out);
                claim_status(old, obj, out);
            }
        }
        Some(Builtin::ResourceClaimTemplate) => {
            template_spec(spec, out);
            if let Some(old) = old {
                immutable(old, out);
                template_spec(spec, out);
            }
        }
        Some(Builtin::DeviceClass) => {
            let list = items(obj.pointer("/spec/selectors"));
            selectors("spec.selectors", list, out);
            let config = items(obj.pointer("/spec/config"));
            for (i, c) in config.iter().enumerate() {
                configuration(&format!("spec.config[{i}]"), c, out);
            }
            too_many("spec.config", config, CONFIG_MAX, out);
        }
        _ => {}
    }
}

/// A claim template's spec: the claims' metadata (labels and annotations only) and spec.
fn template_spec(spec: &Value, out: &mut Vec<Cause>) {
    if let Some(meta) = spec.get("metadata").and_then(Value::as_object) {
        for (k, v) in meta {
            match k.as_str() {
                "labels" | "annotations" => {
                    let whole = json!({"metadata": {k.as_str(): v}});
                    for c in crate::validate::meta_maps(&whole) {
                        out.push(Cause {
                            field: format!("spec.{}", c.field),
                            ..c
                        });
                    }
                }
                _ if v.is_null() => {}
                _ => out.push(forbidden(&format!("spec.metadata.{k}"), "cannot be set")),
            }
        }
    }
    claim_spec("spec.spec", spec.get("spec").unwrap_or(&Value::Null), out);
}

/// The defaults of a claim's (or a claim template's) requests and their alternatives:
/// `allocationMode: ExactCount`, and a count of one where that mode has none (or zero).
pub fn decode(def: &ResourceDef, obj: &mut Value) {
    let at = match def.builtin {
        Some(Builtin::ResourceClaim) => "/spec/devices/requests",
        Some(Builtin::ResourceClaimTemplate) => "/spec/spec/devices/requests",
        _ => return,
    };
    let Some(requests) = obj.pointer_mut(at).and_then(Value::as_array_mut) else {
        return;
    };
    let default = |r: &mut Value| {
        let Some(m) = r.as_object_mut() else { return };
        let mode = m
            .get("allocationMode")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if mode.is_empty() {
            m.insert("allocationMode".into(), json!("ExactCount"));
        }
        let exact = mode.is_empty() || mode == "ExactCount";
        if exact && m.get("count").and_then(Value::as_i64).unwrap_or(0) == 0 {
            m.insert("count".into(), json!(1));
        }
    };
    for r in requests {
        if let Some(e) = r.get_mut("exactly").filter(|e| e.is_object()) {
            default(e);
        }
        if let Some(subs) = r.get_mut("firstAvailable").and_then(Value::as_array_mut) {
            subs.iter_mut().for_each(default);
        }
    }
}

/// What kube-apiserver's encoding always carries: a claim's `spec.devices` (and its
/// `requests`, null when there are none) and `status`, a template's `spec.metadata` and
/// `spec.spec`, a class's `spec` (Go structs, never left out).
pub fn encode(def: &ResourceDef, obj: &mut Value) {
    let claim_spec = |spec: &mut Value| {
        if let Some(s) = spec.as_object_mut() {
            let devices = s.entry("devices").or_insert_with(|| json!({}));
            // `requests` has no `omitempty`: null when there are none.
            if let Some(d) = devices.as_object_mut() {
                d.entry("requests").or_insert(Value::Null);
            }
        }
    };
    let Some(m) = obj.as_object_mut() else { return };
    match def.builtin {
        Some(Builtin::ResourceClaim) => {
            claim_spec(m.entry("spec").or_insert_with(|| json!({})));
            m.entry("status").or_insert_with(|| json!({}));
        }
        Some(Builtin::ResourceClaimTemplate) => {
            let spec = m.entry("spec").or_insert_with(|| json!({}));
            if let Some(s) = spec.as_object_mut() {
                s.entry("metadata").or_insert_with(|| json!({}));
                claim_spec(s.entry("spec").or_insert_with(|| json!({})));
            }
        }
        Some(Builtin::DeviceClass) => {
            m.entry("spec").or_insert_with(|| json!({}));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn claim_def() -> std::sync::Arc<ResourceDef> {
        Registry::new()
            .builtin(Builtin::ResourceClaim)
            .expect("claims are built in")
    }

    fn fields(out: &[Cause]) -> Vec<(String, String)> {
        out.iter()
            .map(|c| (c.reason.clone(), c.field.clone()))
            .collect()
    }

    fn claim(requests: Value) -> Value {
        json!({"metadata": {"name": "c"}, "spec": {"devices": {"requests": requests}}})
    }

    #[test]
    fn a_request_defaults_to_one_device_and_zero_counts_as_unset() {
        let def = claim_def();
        let mut c = claim(json!([
            {"name": "a", "exactly": {"deviceClassName": "gpu"}},
            {"name": "b", "exactly": {"deviceClassName": "gpu", "count": 0}},
            {"name": "c", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}},
            {"name": "d", "firstAvailable": [{"name": "x", "deviceClassName": "gpu"}]}]));
        decode(&def, &mut c);
        let r = &c["spec"]["devices"]["requests"];
        assert_eq!(r[0]["exactly"]["allocationMode"], "ExactCount");
        assert_eq!(r[0]["exactly"]["count"], 1);
        assert_eq!(r[1]["exactly"]["count"], 1);
        assert!(r[2]["exactly"].get("count").is_none());
        assert_eq!(r[3]["firstAvailable"][0]["count"], 1);
    }

    #[test]
    fn a_request_needs_exactly_one_form_and_a_valid_class_and_count() {
        let mut out = Vec::new();
        let c = claim(json!([
            {"name": "Bad_Name", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": -1}},
            {"name": "r1"},
            {"name": "r1", "exactly": {"allocationMode": "All", "count": 2}}]));
        check(&claim_def(), None, &c, &mut out);
        assert_eq!(
            fields(&out),
            [
                ("FieldValueInvalid", "spec.devices.requests[0].name"),
                (
                    "FieldValueInvalid",
                    "spec.devices.requests[0].exactly.count"
                ),
                ("FieldValueRequired", "spec.devices.requests[1]"),
                (
                    "FieldValueRequired",
                    "spec.devices.requests[2].exactly.deviceClassName"
                ),
                (
                    "FieldValueInvalid",
                    "spec.devices.requests[2].exactly.count"
                ),
                ("FieldValueDuplicate", "spec.devices.requests[2].name"),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
    }

    #[test]
    fn reservations_need_an_allocation_which_never_changes_once_set() {
        let def = claim_def();
        let base = claim(
            json!([{"name": "r0", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]),
        );
        let reserved = json!([{"resource": "pods", "name": "p", "uid": "u1"}]);
        let mut unallocated = base.clone();
        unallocated["status"] = json!({"reservedFor": reserved});
        let mut out = Vec::new();
        check(&def, Some(&base), &unallocated, &mut out);
        assert_eq!(
            fields(&out),
            [(
                "FieldValueForbidden".to_string(),
                "status.reservedFor".to_string()
            )]
        );
        let allocation = |device: &str| {
            json!({"devices": {"results": [{"request": "r0", "driver": "gpu.example.com",
                "pool": "n1", "device": device}]}})
        };
        let mut allocated = base.clone();
        allocated["status"] = json!({"allocation": allocation("gpu-0"), "reservedFor": reserved});
        let mut out = Vec::new();
        check(&def, Some(&base), &allocated, &mut out);
        assert!(out.is_empty(), "{out:?}");
        let mut moved = allocated.clone();
        moved["status"]["allocation"] = allocation("gpu-1");
        let mut out = Vec::new();
        check(&def, Some(&allocated), &moved, &mut out);
        assert_eq!(
            fields(&out),
            [(
                "FieldValueInvalid".to_string(),
                "status.allocation".to_string()
            )]
        );
        let mut released = allocated.clone();
        released["status"] = json!({});
        let mut out = Vec::new();
        check(&def, Some(&allocated), &released, &mut out);
        assert!(out.is_empty(), "a claim is deallocated: {out:?}");
    }

    #[test]
    fn a_template_names_its_claims_fields_one_level_down_and_gives_only_labels_and_annotations() {
        let def = Registry::new()
            .builtin(Builtin::ResourceClaimTemplate)
            .expect("templates are built in");
        let t = json!({"metadata": {"name": "t"}, "spec": {
            "metadata": {"name": "fixed", "labels": {"a": "b"}},
            "spec": {"devices": {"requests": [{"name": "r0", "exactly": {"deviceClassName": "",
                "allocationMode": "ExactCount", "count": 1}}]}}}});
        let mut out = Vec::new();
        check(&def, None, &t, &mut out);
        assert_eq!(
            fields(&out),
            [
                ("FieldValueForbidden", "spec.metadata.name"),
                (
                    "FieldValueRequired",
                    "spec.spec.devices.requests[0].exactly.deviceClassName"
                ),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        let mut changed = t.clone();
        changed["spec"]["metadata"] = json!({});
        let mut out = Vec::new();
        check(&def, Some(&t), &changed, &mut out);
        assert_eq!(
            out.iter().filter(|c| c.field == "spec").count(),
            1,
            "a template's spec is immutable: {out:?}"
        );
    }

    #[test]
    fn a_deleted_claim_loses_reservations_but_gains_none() {
        let def = claim_def();
        let mut old = claim(
            json!([{"name": "r0", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]),
        );
        old["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        old["status"] = json!({"allocation": {"devices": {"results": [{"request": "r0",
            "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}]}},
            "reservedFor": [{"resource": "pods", "name": "a", "uid": "u1"},
                {"resource": "pods", "name": "b", "uid": "u2"}]});
        let mut fewer = old.clone();
        fewer["status"]["reservedFor"] = json!([{"resource": "pods", "name": "a", "uid": "u1"}]);
        let mut out = Vec::new();
        check(&def, Some(&old), &fewer, &mut out);
        assert!(out.is_empty(), "{out:?}");
        let mut more = old.clone();
        more["status"]["reservedFor"] = json!([{"resource": "pods", "name": "c", "uid": "u3"}]);
        let mut out = Vec::new();
        check(&def, Some(&old), &more, &mut out);
        assert_eq!(
            fields(&out),
            [(
                "FieldValueForbidden".to_string(),
                "status.reservedFor".to_string()
            )]
        );
    }
}
