//! kube-apiserver's field validation of the built-in kinds, as far as the differential test
//! against kube-apiserver (`tests/differential`) has compared it: object metadata (each kind's
//! name rule, label and annotation keys and values), ConfigMap and Secret keys and their
//! `immutable` contract, Leases, Deployments, Services, Node taints and Events. Each refusal
//! is a 422 `Invalid` whose causes name the fields as kube-apiserver names them.

use serde_json::Value;

use crate::resource::{Builtin, ResourceDef};
use crate::status::Cause;

pub(crate) fn cause(reason: &str, field: &str, message: String) -> Cause {
    Cause {
        reason: reason.into(),
        message,
        field: field.into(),
    }
}

pub(crate) fn invalid(field: &str, value: &Value, why: &str) -> Cause {
    cause(
        "FieldValueInvalid",
        field,
        format!("Invalid value: {value}: {why}"),
    )
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

pub(crate) const LABEL_FMT: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric \
    characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  \
    or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_FMT: &str = "a DNS-1035 label must consist of lower case alphanumeric characters \
    or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. \
    'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
pub(crate) const SUBDOMAIN_FMT: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
    alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
    (e.g. 'example.com', regex used for validation is \
    '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// An RFC 1123 label: lower-case alphanumerics and `-`, alphanumeric at both ends.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// An RFC 1123 subdomain: labels joined by dots, at most 253 characters.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

fn is_dns1035_label(s: &str) -> bool {
    is_dns_label(s) && s.starts_with(|c: char| c.is_ascii_lowercase())
}

/// The name part of a qualified name (a label key, an annotation key).
fn is_name_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A qualified name: an optional DNS subdomain prefix and `/`, then a name part.
pub(crate) fn is_qualified_name(s: &str) -> bool {
    match s.split_once('/') {
        Some((prefix, name)) => {
            !prefix.is_empty() && is_dns_subdomain(prefix) && is_name_part(name)
        }
        None => is_name_part(s),
    }
}

fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_name_part(s)
}

/// How a kind's names are checked, and the message of a name that fails.
/// A name the API paths can carry: not `.` or `..`, without `/` or `%`.
fn is_path_segment(s: &str) -> bool {
    s != "." && s != ".." && !s.contains('/') && !s.contains('%')
}

fn name_rule(def: &ResourceDef) -> (fn(&str) -> bool, &'static str, usize) {
    match def.builtin {
        Some(Builtin::Event) => (
            is_path_segment,
            "may not be '.' or '..', and may not contain '/' or '%'",
            usize::MAX,
        ),
        Some(Builtin::Namespace) => (is_dns_label, LABEL_FMT, 63),
        Some(Builtin::Service) => (is_dns1035_label, DNS1035_FMT, 63),
        _ => (is_dns_subdomain, SUBDOMAIN_FMT, 253),
    }
}

/// The object's name, labels and annotations.
pub fn metadata(def: &ResourceDef, obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let name = text(obj, "/metadata/name");
    let (ok, fmt, max) = name_rule(def);
    if !name.is_empty() && !ok(name) {
        let why = if name.len() > max {
            format!("must be no more than {max} characters")
        } else {
            fmt.to_string()
        };
        out.push(invalid("metadata.name", &Value::from(name), &why));
    }
    out.extend(meta_maps(obj));
    out
}

/// The keys and values of an object's `metadata.labels` and the keys of its
/// `metadata.annotations`.
pub(crate) fn meta_maps(obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    for (k, v) in obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if !is_qualified_name(k) {
            out.push(invalid(
                "metadata.labels",
                &Value::from(k.as_str()),
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must \
                 start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
                 '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ));
        }
        let value = v.as_str().unwrap_or_default();
        if !is_label_value(value) {
            out.push(invalid(
                "metadata.labels",
                &Value::from(value),
                "a valid label must be an empty string or consist of alphanumeric characters, \
                 '-', '_' or '.', and must start and end with an alphanumeric character",
            ));
        }
    }
    for k in obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        if !is_qualified_name(&k.to_ascii_lowercase()) {
            out.push(invalid(
                "metadata.annotations",
                &Value::from(k.as_str()),
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must \
                 start and end with an alphanumeric character",
            ));
        }
    }
    out
}

/// A ConfigMap's or Secret's key.
fn config_keys(obj: &Value, field: &str, out: &mut Vec<Cause>) {
    for k in obj
        .get(field)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        let ok = !k.is_empty()
            && k.len() <= 253
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && k != "."
            && k != ".."
            && !k.starts_with("..");
        if !ok {
            out.push(invalid(
                &format!("{field}[{k}]"),
                &Value::from(k.as_str()),
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.' \
                 (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is \
                 '[-._a-zA-Z0-9]+')",
            ));
        }
    }
}

fn pod_spec(spec: Option<&Value>, at: &str, out: &mut Vec<Cause>) {
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array);
    match containers {
        None => out.push(required(&format!("{at}.containers"))),
        Some(list) if list.is_empty() => out.push(required(&format!("{at}.containers"))),
        Some(list) => {
            for (i, c) in list.iter().enumerate() {
                let name = text(c, "/name");
                let field = format!("{at}.containers[{i}].name");
                if name.is_empty() {
                    out.push(required(&field));
                } else if !is_dns_label(name) {
                    out.push(invalid(&field, &Value::from(name), LABEL_FMT));
                }
                if text(c, "/image").is_empty() {
                    out.push(required(&format!("{at}.containers[{i}].image")));
                }
            }
        }
    }
}

pub(crate) fn required(field: &str) -> Cause {
    cause("FieldValueRequired", field, "Required value".into())
}

fn selector_matches(selector: &Value, labels: &Value) -> bool {
    let labels = labels.as_object();
    let has = |k: &str, v: &Value| labels.and_then(|l| l.get(k)) == Some(v);
    let match_labels_ok = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| has(k, v));
    let expressions_ok = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|e| {
            let key = text(e, "/key");
            let values: Vec<&Value> = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .collect();
            let got = labels.and_then(|l| l.get(key));
            match text(e, "/operator") {
                "In" => got.is_some_and(|g| values.contains(&g)),
                "NotIn" => got.is_none_or(|g| !values.contains(&g)),
                "Exists" => got.is_some(),
                "DoesNotExist" => got.is_none(),
                _ => false,
            }
        });
    match_labels_ok && expressions_ok
}

fn deployment(obj: &Value, out: &mut Vec<Cause>) {
    let replicas = obj.pointer("/spec/replicas").and_then(Value::as_i64);
    if let Some(r) = replicas.filter(|r| *r < 0) {
        out.push(invalid(
            "spec.replicas",
            &Value::from(r),
            "must be greater than or equal to 0",
        ));
    }
    let selector = obj.pointer("/spec/selector");
    let empty = selector.is_none_or(|s| {
        s.get("matchLabels")
            .and_then(Value::as_object)
            .is_none_or(serde_json::Map::is_empty)
            && s.get("matchExpressions")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
    });
    if empty {
        out.push(required("spec.selector"));
        out.push(invalid(
            "spec.selector",
            &Value::from("null"),
            "empty selector is invalid for deployment",
        ));
    }
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .cloned()
        .unwrap_or(Value::Null);
    if let Some(sel) = selector
        && !empty
        && !selector_matches(sel, &labels)
    {
        out.push(invalid(
            "spec.template.metadata.labels",
            &labels,
            "`selector` does not match template `labels`",
        ));
    }
    let template_spec = obj.pointer("/spec/template/spec");
    pod_spec(template_spec, "spec.template.spec", out);
    let policy = text(obj, "/spec/template/spec/restartPolicy");
    if !policy.is_empty() && policy != "Always" {
        out.push(cause(
            "FieldValueNotSupported",
            "spec.template.spec.restartPolicy",
            format!("Unsupported value: {policy:?}: supported values: \"Always\""),
        ));
    }
}

fn service(obj: &Value, out: &mut Vec<Cause>) {
    let kind = text(obj, "/spec/type");
    if !matches!(
        kind,
        "" | "ClusterIP" | "NodePort" | "LoadBalancer" | "ExternalName"
    ) {
        out.push(cause(
            "FieldValueNotSupported",
            "spec.type",
            format!(
                "Unsupported value: {kind:?}: supported values: \"ClusterIP\", \"ExternalName\", \
                 \"LoadBalancer\", \"NodePort\""
            ),
        ));
    }
    let ports = obj.pointer("/spec/ports").and_then(Value::as_array);
    let headless = text(obj, "/spec/clusterIP") == "None";
    if kind != "ExternalName" && !headless && ports.is_none_or(Vec::is_empty) {
        out.push(required("spec.ports"));
    }
    for (i, p) in ports.into_iter().flatten().enumerate() {
        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=65535).contains(&port) {
            out.push(invalid(
                &format!("spec.ports[{i}].port"),
                &Value::from(port),
                "must be between 1 and 65535, inclusive",
            ));
        }
        let at = format!("spec.ports[{i}].targetPort");
        match p.get("targetPort") {
            Some(Value::Number(n)) if !n.as_i64().is_some_and(|t| (1..=65535).contains(&t)) => {
                out.push(invalid(
                    &at,
                    &Value::Number(n.clone()),
                    "must be between 1 and 65535, inclusive",
                ));
            }
            Some(Value::String(name)) if !is_port_name(name) => out.push(invalid(
                &at,
                &Value::from(name.as_str()),
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
            )),
            _ => {}
        }
    }
}

/// An IANA service name, as a named port: at most 15 lower-case alphanumerics and single
/// hyphens, with a letter, and a hyphen at neither end.
fn is_port_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().any(|b| b.is_ascii_lowercase())
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

fn node(obj: &Value, out: &mut Vec<Cause>) {
    let taints = obj
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut seen: Vec<(String, String)> = Vec::new();
    for (i, t) in taints.iter().enumerate() {
        let key = text(t, "/key");
        let effect = text(t, "/effect");
        // kube-apiserver names Node taints under `metadata`.
        let at = format!("metadata.taints[{i}]");
        if !is_qualified_name(key) {
            out.push(invalid(
                &format!("{at}.key"),
                &Value::from(key),
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must \
                 start and end with an alphanumeric character",
            ));
        }
        if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            out.push(cause(
                "FieldValueNotSupported",
                &format!("{at}.effect"),
                format!(
                    "Unsupported value: {effect:?}: supported values: \"NoSchedule\", \
                     \"PreferNoSchedule\", \"NoExecute\""
                ),
            ));
        }
        let pair = (key.to_string(), effect.to_string());
        if seen.contains(&pair) {
            out.push(cause(
                "FieldValueDuplicate",
                &at,
                format!(
                    "Duplicate value: {{\"key\":{key:?},\"effect\":{effect:?}}}: taints must be \
                     unique by key and effect pair"
                ),
            ));
        }
        seen.push(pair);
    }
}

fn event(obj: &Value, out: &mut Vec<Cause>) {
    let ns = text(obj, "/metadata/namespace");
    let involved = text(obj, "/involvedObject/namespace");
    let mismatch = if involved.is_empty() {
        !ns.is_empty() && ns != "default"
    } else {
        involved != ns
    };
    if mismatch {
        out.push(invalid(
            "involvedObject.namespace",
            &Value::from(involved),
            "does not match event.namespace",
        ));
    }
}

/// The causes for which kube-apiserver refuses `obj` (empty: it is valid).
pub fn builtin(def: &ResourceDef, obj: &Value) -> Vec<Cause> {
    // A core/v1 Event's own validation (the legacy one, kept for old clients) leaves its
    // metadata to the registry's common check, which runs only when the Event passed, and
    // takes any name that is a path segment.
    if def.builtin == Some(Builtin::Event) {
        let mut out = Vec::new();
        event(obj, &mut out);
        if out.is_empty() {
            out = metadata(def, obj);
        }
        return out;
    }
    let mut out = metadata(def, obj);
    match def.builtin {
        Some(Builtin::ConfigMap) => {
            config_keys(obj, "data", &mut out);
            config_keys(obj, "binaryData", &mut out);
        }
        Some(Builtin::Secret) => config_keys(obj, "data", &mut out),
        Some(Builtin::Pod) => pod_spec(obj.get("spec"), "spec", &mut out),
        Some(Builtin::Lease) => {
            if let Some(d) = obj
                .pointer("/spec/leaseDurationSeconds")
                .and_then(Value::as_i64)
                .filter(|d| *d <= 0)
            {
                out.push(invalid(
                    "spec.leaseDurationSeconds",
                    &Value::from(d),
                    "must be greater than 0",
                ));
            }
        }
        Some(Builtin::Deployment) => deployment(obj, &mut out),
        Some(Builtin::Service) => service(obj, &mut out),
        Some(Builtin::Node) => node(obj, &mut out),
        Some(Builtin::Role) => policy_rules(obj, true, &mut out),
        Some(Builtin::ClusterRole) => policy_rules(obj, false, &mut out),
        Some(Builtin::ResourceClaim) => share_ids(obj, &mut out),
        _ => {}
    }
    out
}

/// A Role's or ClusterRole's rules, as RBAC's `ValidatePolicyRule`: verbs are required; a rule
/// names resources (with at least one API group and one resource) or non-resource URLs (not
/// in a namespaced Role, and not with resources).
fn policy_rules(obj: &Value, namespaced: bool, out: &mut Vec<Cause>) {
    let rules = obj
        .get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let count = |r: &Value, f: &str| r.get(f).and_then(Value::as_array).map_or(0, Vec::len);
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("rules[{i}]");
        if count(rule, "verbs") == 0 {
            out.push(required(&format!("{at}.verbs")));
        }
        if count(rule, "nonResourceURLs") > 0 {
            let urls = rule.get("nonResourceURLs").unwrap_or(&Value::Null);
            if namespaced {
                out.push(invalid(
                    &format!("{at}.nonResourceURLs"),
                    urls,
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if count(rule, "apiGroups") + count(rule, "resources") + count(rule, "resourceNames")
                > 0
            {
                out.push(invalid(
                    &format!("{at}.nonResourceURLs"),
                    urls,
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if count(rule, "apiGroups") == 0 {
            out.push(required(&format!("{at}.apiGroups")));
        }
        if count(rule, "resources") == 0 {
            out.push(required(&format!("{at}.resources")));
        }
    }
}

/// A Service's `status.loadBalancer`: ingress points only for a `LoadBalancer` Service, each
/// with an `ipMode` (`VIP` or `Proxy`) when it has an IP and only then.
fn load_balancer_status(svc: &Value, out: &mut Vec<Cause>) {
    let ingress = svc
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if ingress.is_empty() {
        return;
    }
    let at = "status.loadBalancer.ingress";
    if text(svc, "/spec/type") != "LoadBalancer" {
        out.push(cause(
            "FieldValueForbidden",
            at,
            "Forbidden: may only be used when `spec.type` is 'LoadBalancer'".into(),
        ));
        return;
    }
    for (i, point) in ingress.iter().enumerate() {
        let has_ip = !text(point, "/ip").is_empty();
        match point.get("ipMode").and_then(Value::as_str) {
            None if has_ip => out.push(cause(
                "FieldValueRequired",
                &format!("{at}[{i}].ipMode"),
                "Required value: must be specified when `ip` is set".into(),
            )),
            Some(_) if !has_ip => out.push(cause(
                "FieldValueForbidden",
                &format!("{at}[{i}].ipMode"),
                "Forbidden: may not be specified when `ip` is not set".into(),
            )),
            Some(mode) if !matches!(mode, "VIP" | "Proxy") => out.push(cause(
                "FieldValueNotSupported",
                &format!("{at}[{i}].ipMode"),
                format!("Unsupported value: {mode:?}: supported values: \"Proxy\", \"VIP\""),
            )),
            _ => {}
        }
    }
}

/// What an update may not change: an immutable ConfigMap's or Secret's data, a Deployment's
/// selector, a Service's cluster IP.
pub fn builtin_update(def: &ResourceDef, old: &Value, new: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let forbidden = |field: &str| {
        cause(
            "FieldValueForbidden",
            field,
            "Forbidden: field is immutable when `immutable` is set".into(),
        )
    };
    match def.builtin {
        Some(Builtin::ConfigMap | Builtin::Secret) => {
            if old.get("immutable").and_then(Value::as_bool) == Some(true) {
                if new.get("immutable").and_then(Value::as_bool) != Some(true) {
                    out.push(forbidden("immutable"));
                }
                for f in ["data", "binaryData"] {
                    if old.get(f) != new.get(f) {
                        out.push(forbidden(f));
                    }
                }
            }
            if def.builtin == Some(Builtin::Secret) && old.get("type") != new.get("type") {
                out.push(invalid(
                    "type",
                    new.get("type").unwrap_or(&Value::Null),
                    "field is immutable",
                ));
            }
        }
        Some(Builtin::Deployment)
            if old.pointer("/spec/selector") != new.pointer("/spec/selector") =>
        {
            out.push(invalid(
                "spec.selector",
                new.pointer("/spec/selector").unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
        Some(Builtin::Service) => {
            load_balancer_status(new, &mut out);
            let (a, b) = (text(old, "/spec/clusterIP"), text(new, "/spec/clusterIP"));
            if !a.is_empty() && a != b {
                out.push(invalid(
                    "spec.clusterIPs[0]",
                    &Value::from(b),
                    "may not change once set",
                ));
            }
        }
        _ => {}
    }
    out
}

/// A ResourceClaim's allocated shares (`status.allocation.devices.results[].shareID`) are
/// named by UUIDs in RFC 4122's normalized form, lowercase, as kube-apiserver requires.
fn share_ids(obj: &Value, out: &mut Vec<Cause>) {
    let results = obj
        .pointer("/status/allocation/devices/results")
        .and_then(Value::as_array);
    for (i, r) in results.into_iter().flatten().enumerate() {
        let Some(id) = r.get("shareID") else { continue };
        let text = id.as_str().unwrap_or_default();
        let normal = text.len() == 36
            && text.char_indices().all(|(k, c)| match k {
                8 | 13 | 18 | 23 => c == '-',
                _ => c.is_ascii_digit() || ('a'..='f').contains(&c),
            });
        if !normal {
            out.push(invalid(
                &format!("status.allocation.devices.results[{i}].shareID"),
                id,
                "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_take_a_subdomain_prefix() {
        assert!(is_qualified_name("app"));
        assert!(is_qualified_name("kubernetes.io/metadata.name"));
        assert!(!is_qualified_name("bad label!"));
        assert!(!is_qualified_name("/x"));
        assert!(is_dns1035_label("svc-1"));
        assert!(!is_dns1035_label("1svc"));
    }
}
