//! kube-apiserver 1.37's rules for the Workload API (`scheduling.k8s.io/v1beta1` PodGroups and
//! Workloads), as it serves them with the `GenericWorkload` gate on and the gates of their
//! newer fields (topology constraints, DRA claims, preemption policy, composite groups) at
//! their default, off: those fields are dropped on write, not refused. Its declarative rules
//! ratchet: on an update, a field that did not change is not checked again, and one that did is
//! checked against its old value (most fields here may not change at all).

use serde_json::{Value, json};

use crate::resource::{Builtin, ResourceDef};
use crate::status::Cause;
use crate::validate::{
    LABEL_FMT as LABEL, SUBDOMAIN_FMT as SUBDOMAIN, cause, invalid, is_dns_label, is_dns_subdomain,
    required,
};

/// The finalizer kube-apiserver's `PodGroupProtection` admission puts on every new PodGroup
/// (its controller takes it off once no pod names the group).
pub const PROTECTION: &str = "scheduling.k8s.io/podgroup-protection";

/// How many pod group templates a Workload may have.
const MAX_TEMPLATES: usize = 8;

/// The largest priority a PodGroup or template may carry (system classes are above it).
const MAX_PRIORITY: i64 = 1_000_000_000;

fn immutable(field: &str) -> Cause {
    invalid(field, &Value::Null, "field is immutable")
}

/// A field present and not null.
fn present(v: &Value, key: &str) -> bool {
    v.get(key).is_some_and(|x| !x.is_null())
}

fn get<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.get(key).unwrap_or(&Value::Null)
}

/// A union of members of which exactly one is set.
fn union(at: &str, members: &[(&str, bool)], out: &mut Vec<Cause>) {
    let names: Vec<String> = members.iter().map(|(n, _)| format!("`{n}`")).collect();
    let set: Vec<&str> = members
        .iter()
        .filter(|(_, s)| *s)
        .map(|(n, _)| *n)
        .collect();
    match set.len() {
        1 => {}
        0 => out.push(invalid(
            at,
            &json!(""),
            &format!("must specify one of: {}", names.join(", ")),
        )),
        _ => out.push(invalid(
            at,
            &json!(format!("{{{}}}", set.join(", "))),
            &format!("must specify exactly one of: {}", names.join(", ")),
        )),
    }
}

fn union_members(v: &Value, names: &[&'static str]) -> Vec<(&'static str, bool)> {
    names.iter().map(|n| (*n, present(v, n))).collect()
}

/// A string that must be a DNS subdomain (a name of another object).
fn subdomain(at: &str, v: &str, out: &mut Vec<Cause>) {
    if v.len() > 253 {
        out.push(invalid(at, &json!(v), "must be no more than 253 bytes"));
    } else if !is_dns_subdomain(v) {
        out.push(invalid(at, &json!(v), SUBDOMAIN));
    }
}

/// A string that must be a DNS label (a template's name).
fn label(at: &str, v: &str, out: &mut Vec<Cause>) {
    if is_dns_label(v) {
        return;
    }
    if v.contains('.') && is_dns_subdomain(v) {
        out.push(invalid(at, &json!(v), "must not contain dots"));
    } else if v.len() <= 63 || !is_dns_subdomain(v) {
        out.push(invalid(at, &json!(v), LABEL));
    }
    if v.len() > 63 {
        out.push(invalid(at, &json!(v), "must be no more than 63 bytes"));
    }
}

/// A required string: absent or empty is `Required`, else `then` checks it.
fn required_text(at: &str, v: &Value, then: fn(&str, &str, &mut Vec<Cause>), out: &mut Vec<Cause>) {
    match v.as_str().filter(|s| !s.is_empty()) {
        None => out.push(required(at)),
        Some(s) => then(at, s, out),
    }
}

/// A name an API path can carry.
fn path_segment(at: &str, v: &str, out: &mut Vec<Cause>) {
    for (bad, why) in [(".", "may not be '.'"), ("..", "may not be '..'")] {
        if v == bad {
            out.push(invalid(at, &json!(v), why));
        }
    }
    for (bad, why) in [('/', "may not contain '/'"), ('%', "may not contain '%'")] {
        if v.contains(bad) {
            out.push(invalid(at, &json!(v), why));
        }
    }
}

/// A `schedulingPolicy` (of a PodGroup or a template) at `at`, against its old value.
fn scheduling_policy(at: &str, new: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    if old == Some(new) {
        return;
    }
    let members = union_members(new, &["basic", "gang"]);
    if old.is_none_or(|o| union_members(o, &["basic", "gang"]) != members) {
        union(at, &members, out);
    }
    if let Some(old) = old
        && present(old, "basic") != present(new, "basic")
    {
        out.push(immutable(&format!("{at}.basic")));
    }
    let gang = format!("{at}.gang");
    match (old.map(|o| present(o, "gang")), present(new, "gang")) {
        (Some(false), true) => {
            out.push(invalid(
                &gang,
                &Value::Null,
                "field cannot be set once created",
            ));
            return;
        }
        (Some(true), false) => {
            out.push(invalid(
                &gang,
                &Value::Null,
                "field cannot be cleared once set",
            ));
            return;
        }
        _ => {}
    }
    if !present(new, "gang") {
        return;
    }
    let count = new.pointer("/gang/minCount");
    if old.is_some_and(|o| o.pointer("/gang/minCount") == count) {
        return;
    }
    let at = format!("{gang}.minCount");
    match count.and_then(Value::as_i64).unwrap_or(0) {
        0 => out.push(required(&at)),
        n if n < 1 => out.push(invalid(
            &at,
            &json!(n),
            "must be greater than or equal to 1",
        )),
        _ => {}
    }
}

/// The fields a PodGroup and a template share after the policy: `disruptionMode` (optional in
/// a template, defaulted in a PodGroup), `priorityClassName`, `priority`; each immutable.
fn shared_tail(at: &str, new: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let field = |f: &str| {
        if at.is_empty() {
            f.to_string()
        } else {
            format!("{at}.{f}")
        }
    };
    let changed = |f: &str| old.is_some_and(|o| get(o, f) != get(new, f));
    let unchanged = |f: &str| old.is_some_and(|o| get(o, f) == get(new, f));
    if changed("disruptionMode") {
        out.push(immutable(&field("disruptionMode")));
    } else if !unchanged("disruptionMode") && present(new, "disruptionMode") {
        let members = union_members(get(new, "disruptionMode"), &["single", "all"]);
        union(&field("disruptionMode"), &members, out);
    }
    if changed("priorityClassName") {
        out.push(immutable(&field("priorityClassName")));
    } else if !unchanged("priorityClassName")
        && let Some(name) = new
            .get("priorityClassName")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    {
        subdomain(&field("priorityClassName"), name, out);
    }
    if changed("priority") {
        out.push(immutable(&field("priority")));
    } else if !unchanged("priority")
        && let Some(p) = new.get("priority").and_then(Value::as_i64)
        && p > MAX_PRIORITY
    {
        out.push(invalid(
            &field("priority"),
            &json!(p),
            "must be less than or equal to 1000000000",
        ));
    }
}

/// The fields of a PodGroup's spec its gates leave out (see the module's doc).
const GATED_GROUP_FIELDS: [&str; 4] = [
    "parentCompositePodGroupName",
    "schedulingConstraints",
    "resourceClaims",
    "preemptionPolicy",
];
/// The fields of a Workload's pod group template its gates leave out.
const GATED_TEMPLATE_FIELDS: [&str; 3] = [
    "schedulingConstraints",
    "resourceClaims",
    "preemptionPolicy",
];

/// Drops the fields whose gates are off (what the registry's strategy does before it
/// validates), unless `old` uses them already.
pub fn drop_gated(def: &ResourceDef, old: Option<&Value>, obj: &mut Value) {
    match def.builtin {
        Some(Builtin::KubePodGroup) => {
            let used = |f: &str| old.and_then(|o| o.pointer(&format!("/spec/{f}"))).is_some();
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                for f in GATED_GROUP_FIELDS {
                    if !used(f) {
                        spec.remove(f);
                    }
                }
            }
            let claims = old
                .and_then(|o| o.pointer("/spec/resourceClaims"))
                .is_some_and(|c| c.as_array().is_some_and(|a| !a.is_empty()));
            if !claims && let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
                status.remove("resourceClaimStatuses");
            }
        }
        Some(Builtin::Workload) => {
            let old_templates = old
                .and_then(|o| o.pointer("/spec/podGroupTemplates"))
                .and_then(Value::as_array);
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                let old_composite = old.and_then(|o| o.pointer("/spec/compositePodGroupTemplates"));
                if old_composite.is_none_or(Value::is_null) {
                    spec.remove("compositePodGroupTemplates");
                }
                if let Some(Value::Array(templates)) = spec.get_mut("podGroupTemplates") {
                    for (i, t) in templates.iter_mut().enumerate() {
                        // Judged against the old template at the same place, as the registry
                        // does.
                        let was = old_templates.and_then(|ts| ts.get(i));
                        if let Some(t) = t.as_object_mut() {
                            for f in GATED_TEMPLATE_FIELDS {
                                if was.is_none_or(|w| !present(w, f))
                                    && t.remove(f).is_some()
                                    && f == "schedulingConstraints"
                                {
                                    // Encoded `null` when unset (see `defaults`).
                                    t.insert(f.to_string(), Value::Null);
                                }
                            }
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

/// What kube-apiserver's encoding of a PodGroup always carries: its `status`.
pub fn encode(def: &ResourceDef, obj: &mut Value) {
    if def.builtin == Some(Builtin::KubePodGroup)
        && let Some(m) = obj.as_object_mut()
    {
        m.entry("status".to_string()).or_insert_with(|| json!({}));
    }
}

/// What a Workload decodes to: each template's `schedulingConstraints` is a pointer without
/// `omitempty`, so a template without one reads (and is recorded as setting) `null`.
pub fn decode(def: &ResourceDef, obj: &mut Value) {
    if def.builtin != Some(Builtin::Workload) {
        return;
    }
    if let Some(Value::Array(templates)) = obj.pointer_mut("/spec/podGroupTemplates") {
        for t in templates {
            if let Some(t) = t.as_object_mut() {
                t.entry("schedulingConstraints".to_string())
                    .or_insert(Value::Null);
            }
        }
    }
}

/// A PodGroup's spec (its metadata is checked with every kind's).
fn pod_group(new: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let spec = get(new, "spec");
    let old_spec = old.map(|o| get(o, "spec"));
    if old_spec == Some(spec) {
        return;
    }
    let was = |f: &str| old_spec.map(|o| get(o, f));
    let reference = get(spec, "workloadRef");
    match was("workloadRef") {
        Some(w) if w != reference => out.push(immutable("spec.workloadRef")),
        Some(_) => {}
        None if !reference.is_null() => {
            required_text(
                "spec.workloadRef.workloadName",
                get(reference, "workloadName"),
                subdomain,
                out,
            );
            required_text(
                "spec.workloadRef.templateName",
                get(reference, "templateName"),
                label,
                out,
            );
        }
        None => {}
    }
    scheduling_policy(
        "spec.schedulingPolicy",
        get(spec, "schedulingPolicy"),
        was("schedulingPolicy"),
        out,
    );
    if old_spec.is_none() && !present(spec, "disruptionMode") {
        out.push(required("spec.disruptionMode"));
    }
    shared_tail("spec", spec, old_spec, out);
}

/// A Workload's spec.
fn workload(new: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let spec = get(new, "spec");
    let empty = Vec::new();
    let templates = get(spec, "podGroupTemplates").as_array().unwrap_or(&empty);
    // The registry's own rule first: every template has the same priority.
    let priority = |t: &Value| {
        (
            t.get("priorityClassName").cloned(),
            t.get("priority").cloned(),
        )
    };
    if templates
        .windows(2)
        .any(|w| priority(&w[0]) != priority(&w[1]))
    {
        out.push(invalid(
            "spec",
            &Value::Null,
            "detected multiple priority configurations",
        ));
    }
    let old_spec = old.map(|o| get(o, "spec"));
    if old_spec == Some(spec) {
        return;
    }
    let lists = |s: &Value| {
        [
            ("podGroupTemplates", s.get("podGroupTemplates")),
            (
                "compositePodGroupTemplates",
                s.get("compositePodGroupTemplates"),
            ),
        ]
        .map(|(n, v)| {
            (
                n,
                v.and_then(Value::as_array).is_some_and(|a| !a.is_empty()),
            )
        })
    };
    if old_spec.is_none_or(|o| lists(o) != lists(spec)) {
        union("spec", &lists(spec), out);
    }
    let reference = get(spec, "controllerRef");
    match old_spec.map(|o| get(o, "controllerRef")) {
        Some(w) if w != reference => out.push(immutable("spec.controllerRef")),
        Some(_) => {}
        None if !reference.is_null() => {
            if let Some(g) = reference
                .get("apiGroup")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                subdomain("spec.controllerRef.apiGroup", g, out);
            }
            required_text(
                "spec.controllerRef.kind",
                get(reference, "kind"),
                path_segment,
                out,
            );
            required_text(
                "spec.controllerRef.name",
                get(reference, "name"),
                path_segment,
                out,
            );
        }
        None => {}
    }
    let old_templates = old_spec.and_then(|o| o.get("podGroupTemplates"));
    if old_templates == spec.get("podGroupTemplates") && old_spec.is_some() {
        return;
    }
    let at = "spec.podGroupTemplates";
    if templates.len() > MAX_TEMPLATES {
        out.push(cause(
            "FieldValueTooMany",
            at,
            format!(
                "Too many: {}: must have at most {MAX_TEMPLATES} items",
                templates.len()
            ),
        ));
        return;
    }
    let name = |t: &Value| {
        t.get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let old_list = old_templates.and_then(Value::as_array);
    if let Some(old_list) = old_list {
        let before: Vec<String> = old_list.iter().map(name).collect();
        let after: Vec<String> = templates.iter().map(name).collect();
        let mut moved = false;
        for (i, n) in after.iter().enumerate() {
            if !before.contains(n) {
                out.push(cause(
                    "FieldValueForbidden",
                    &format!("{at}[{i}]"),
                    "Forbidden: item may not be added".into(),
                ));
                moved = true;
            }
        }
        for n in &before {
            if !after.contains(n) {
                out.push(cause(
                    "FieldValueForbidden",
                    at,
                    "Forbidden: item may not be removed".into(),
                ));
                moved = true;
            }
        }
        if moved {
            return;
        }
    }
    for (j, t) in templates.iter().enumerate() {
        if templates[..j].iter().any(|s| name(s) == name(t)) {
            out.push(cause(
                "FieldValueDuplicate",
                &format!("{at}[{j}]"),
                format!("Duplicate value: {t}"),
            ));
        }
    }
    for (i, t) in templates.iter().enumerate() {
        let was = old_list.and_then(|l| l.iter().find(|o| name(o) == name(t)));
        if was == Some(t) {
            continue;
        }
        let at = format!("{at}[{i}]");
        if was.is_none() {
            required_text(&format!("{at}.name"), get(t, "name"), label, out);
        }
        scheduling_policy(
            &format!("{at}.schedulingPolicy"),
            get(t, "schedulingPolicy"),
            was.map(|w| get(w, "schedulingPolicy")),
            out,
        );
        for f in ["schedulingConstraints", "resourceClaims"] {
            if was.is_some_and(|w| get(w, f) != get(t, f)) {
                out.push(immutable(&format!("{at}.{f}")));
            }
        }
        shared_tail(&at, t, was, out);
    }
}

/// The causes for which kube-apiserver refuses a write of a PodGroup or Workload (`old` on an
/// update), besides its metadata's.
pub fn check(def: &ResourceDef, old: Option<&Value>, new: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    match def.builtin {
        Some(Builtin::KubePodGroup) => pod_group(new, old, &mut out),
        Some(Builtin::Workload) => workload(new, old, &mut out),
        _ => {}
    }
    out
}

/// A PodGroup's status write: its conditions, each as `metav1.Condition` must be, and its
/// claims' statuses naming claims of its spec.
pub fn status(new: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let empty = Vec::new();
    let conditions = new
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let mut seen = Vec::new();
    for (i, c) in conditions.iter().enumerate() {
        let at = format!("status.conditions[{i}]");
        let kind = c.get("type").and_then(Value::as_str).unwrap_or_default();
        if seen.contains(&kind) {
            out.push(cause(
                "FieldValueDuplicate",
                &at,
                format!("Duplicate value: {}", json!(kind)),
            ));
        }
        seen.push(kind);
        if kind.is_empty() {
            out.push(cause(
                "FieldValueRequired",
                &format!("{at}.type"),
                "Required value: is required".into(),
            ));
        } else if !crate::validate::is_qualified_name(kind) {
            out.push(invalid(
                &format!("{at}.type"),
                &json!(kind),
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must \
                 start and end with an alphanumeric character",
            ));
        }
        match c.get("status").and_then(Value::as_str).unwrap_or_default() {
            "" => out.push(required(&format!("{at}.status"))),
            "True" | "False" | "Unknown" => {}
            other => out.push(cause(
                "FieldValueNotSupported",
                &format!("{at}.status"),
                format!(
                    "Unsupported value: {}: supported values: \"False\", \"True\", \"Unknown\"",
                    json!(other)
                ),
            )),
        }
        if let Some(g) = c.get("observedGeneration").and_then(Value::as_i64)
            && g < 0
        {
            out.push(invalid(
                &format!("{at}.observedGeneration"),
                &json!(g),
                "must be greater than or equal to zero",
            ));
        }
        if c.get("lastTransitionTime")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            out.push(required(&format!("{at}.lastTransitionTime")));
        }
        let reason = c.get("reason").and_then(Value::as_str).unwrap_or_default();
        if reason.is_empty() {
            out.push(required(&format!("{at}.reason")));
        } else if !is_reason(reason) {
            out.push(invalid(
                &format!("{at}.reason"),
                &json!(reason),
                "a condition reason must start with alphabetic character, optionally followed \
                 by a string of alphanumeric characters or '_,:', and must end with an \
                 alphanumeric character or '_'",
            ));
        } else if reason.len() > 1024 {
            out.push(cause(
                "FieldValueTooLong",
                &format!("{at}.reason"),
                "Too long: may not be more than 1024 bytes".into(),
            ));
        }
        if c.get("message")
            .and_then(Value::as_str)
            .is_some_and(|m| m.len() > 32768)
        {
            out.push(cause(
                "FieldValueTooLong",
                &format!("{at}.message"),
                "Too long: may not be more than 32768 bytes".into(),
            ));
        }
    }
    let claims: Vec<&str> = new
        .pointer("/spec/resourceClaims")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    for (i, s) in new
        .pointer("/status/resourceClaimStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = s.get("name").and_then(Value::as_str).unwrap_or_default();
        if !claims.contains(&name) {
            out.push(invalid(
                &format!("status.resourceClaimStatuses[{i}].name"),
                &json!(name),
                "must match the name of an entry in `spec.resourceClaims`",
            ));
        }
    }
    out
}

/// A condition's reason: a letter, then letters, digits, `_`, `,` or `:`, ending in a letter,
/// digit or `_`.
fn is_reason(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_alphabetic)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':'))
        && b.last()
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(kind: Builtin) -> ResourceDef {
        let d = crate::registry::Registry::new()
            .builtin(kind)
            .expect("served");
        (*d).clone()
    }

    fn fields(causes: &[Cause]) -> Vec<(&str, &str)> {
        causes
            .iter()
            .map(|c| (c.field.as_str(), c.reason.as_str()))
            .collect()
    }

    #[test]
    fn a_gang_needs_a_count_of_one_or_more_and_exactly_one_policy() {
        let d = def(Builtin::KubePodGroup);
        let group = |policy: Value| json!({"spec": {"schedulingPolicy": policy, "disruptionMode": {"single": {}}}});
        assert!(check(&d, None, &group(json!({"gang": {"minCount": 2}}))).is_empty());
        assert_eq!(
            fields(&check(&d, None, &group(json!({"gang": {"minCount": 0}})))),
            [("spec.schedulingPolicy.gang.minCount", "FieldValueRequired")]
        );
        assert_eq!(
            fields(&check(&d, None, &group(json!({"gang": {"minCount": -2}})))),
            [("spec.schedulingPolicy.gang.minCount", "FieldValueInvalid")]
        );
        assert_eq!(
            fields(&check(&d, None, &group(json!({})))),
            [("spec.schedulingPolicy", "FieldValueInvalid")]
        );
        let both = check(
            &d,
            None,
            &group(json!({"basic": {}, "gang": {"minCount": 1}})),
        );
        assert!(both[0].message.contains("{basic, gang}"), "{both:?}");
    }

    #[test]
    fn a_podgroups_policy_and_reference_may_not_change_but_its_count_may() {
        let d = def(Builtin::KubePodGroup);
        let old = json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
            "workloadRef": {"workloadName": "w", "templateName": "t"},
            "disruptionMode": {"single": {}}, "priority": 0}});
        let mut new = old.clone();
        new["spec"]["schedulingPolicy"]["gang"]["minCount"] = json!(3);
        assert!(check(&d, Some(&old), &new).is_empty());
        new["spec"]["schedulingPolicy"] = json!({"basic": {}});
        new["spec"]["workloadRef"]["templateName"] = json!("u");
        assert_eq!(
            fields(&check(&d, Some(&old), &new)),
            [
                ("spec.workloadRef", "FieldValueInvalid"),
                ("spec.schedulingPolicy.basic", "FieldValueInvalid"),
                ("spec.schedulingPolicy.gang", "FieldValueInvalid"),
            ]
        );
    }

    #[test]
    fn a_workloads_templates_are_named_unique_and_neither_added_nor_removed() {
        let d = def(Builtin::Workload);
        let t = |name: &str| json!({"name": name, "schedulingPolicy": {"gang": {"minCount": 1}}});
        let w = |ts: Vec<Value>| json!({"spec": {"podGroupTemplates": ts}});
        assert!(check(&d, None, &w(vec![t("a"), t("b")])).is_empty());
        assert_eq!(
            fields(&check(&d, None, &w(vec![t("a"), t("a")]))),
            [("spec.podGroupTemplates[1]", "FieldValueDuplicate")]
        );
        assert_eq!(
            fields(&check(&d, None, &w(vec![t("A_b")]))),
            [("spec.podGroupTemplates[0].name", "FieldValueInvalid")]
        );
        assert_eq!(
            fields(&check(&d, None, &w(vec![]))),
            [("spec", "FieldValueInvalid")]
        );
        assert_eq!(
            fields(&check(
                &d,
                None,
                &w((0..9).map(|i| t(&format!("t{i}"))).collect())
            )),
            [("spec.podGroupTemplates", "FieldValueTooMany")]
        );
        let old = w(vec![t("a"), t("b")]);
        assert_eq!(
            fields(&check(&d, Some(&old), &w(vec![t("a"), t("c")]))),
            [
                ("spec.podGroupTemplates[1]", "FieldValueForbidden"),
                ("spec.podGroupTemplates", "FieldValueForbidden"),
            ]
        );
        let mut two = t("b");
        two["priority"] = json!(5);
        assert_eq!(
            fields(&check(&d, None, &w(vec![t("a"), two]))),
            [("spec", "FieldValueInvalid")]
        );
    }

    #[test]
    fn conditions_need_a_type_a_status_a_time_and_a_reason() {
        let good = json!({"type": "PodGroupInitiallyScheduled", "status": "True",
            "reason": "Scheduled", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"});
        assert!(status(&json!({"status": {"conditions": [good.clone()]}})).is_empty());
        let mut bad = good.clone();
        bad["status"] = json!("Maybe");
        bad["reason"] = json!("not ok!");
        assert_eq!(
            fields(&status(&json!({"status": {"conditions": [good, bad]}}))),
            [
                ("status.conditions[1]", "FieldValueDuplicate"),
                ("status.conditions[1].status", "FieldValueNotSupported"),
                ("status.conditions[1].reason", "FieldValueInvalid"),
            ]
        );
    }
}
