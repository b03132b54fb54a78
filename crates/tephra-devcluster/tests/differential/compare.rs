//! What the two answers are compared on, and the short list of what legitimately differs
//! between two API servers given the same requests. Everything not listed here must be equal.
//!
//! Legitimately different (each replaced by a placeholder before comparing):
//! - `metadata.uid`: random; uids are named after the object first seen with them
//!   (`uid(configmaps/cm-1#1)`), so an owner reference still has to name the right owner.
//! - `metadata.resourceVersion`: each server's own counter (etcd's revision on the real one).
//! - `metadata.creationTimestamp`, `metadata.deletionTimestamp`, `managedFields[].time`, and
//!   the times conditions carry (`lastTransitionTime`, `lastProbeTime`): wall-clock times;
//!   and so the order of `managedFields` entries of one operation, which kube-apiserver sorts
//!   by time to the second before manager (they are compared sorted by manager).
//! - the five random characters `generateName` adds (in objects, watch keys and `Status`
//!   details, where the name is replaced by the key of the object it was generated for).
//! - a Service's allocated `spec.clusterIP`/`clusterIPs` and ports' `nodePort` (each server
//!   allocates its own).
//! - the `.` entries of `managedFields[].fieldsV1`, which mark a map or list as owned besides
//!   its fields: kube-apiserver sets them where the kind's Go zero value leaves the field out,
//!   which a server without the Go types cannot know; the fields themselves are compared.
//! - the order of a Namespace's `metadata.finalizers` once a delete changed them: the
//!   namespace registry rebuilds the list from a Go map (compared sorted).
//! - Events the real server's IP allocator repair loop records when it races with a Service's
//!   creation (`ClusterIPNotAllocated`): left out of lists and watches.
//! - which objects a page of a list holds when some of their names were generated (their
//!   random suffixes order them): the page's size is compared.
//! - a `Status`'s `message` (compared: code, reason, details' name, group and kind, and the
//!   causes' reason and field; the message is printed when they differ).
//!
//! Lists are compared as their items, by namespace and name; watches as each object's own
//! sequence of event types and objects (the real garbage collector deletes several
//! dependents in an order of its own).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::exec::{Answer, Memory};

const TIME: &str = "<time>";

fn normalize_meta(meta: &mut serde_json::Map<String, Value>, mem: &Memory) {
    if let Some(uid) = meta.get("uid").and_then(Value::as_str) {
        let named = mem
            .uid_names
            .get(uid)
            .cloned()
            .unwrap_or_else(|| "<uid>".into());
        meta.insert("uid".into(), json!(named));
    }
    if meta.contains_key("resourceVersion") {
        meta.insert("resourceVersion".into(), json!("<rv>"));
    }
    for t in ["creationTimestamp", "deletionTimestamp"] {
        if meta.get(t).is_some_and(|v| !v.is_null()) {
            meta.insert(t.into(), json!(TIME));
        }
    }
    if let Some(prefix) = meta
        .get("generateName")
        .and_then(Value::as_str)
        .map(String::from)
        && let Some(Value::String(name)) = meta.get_mut("name")
        && name.starts_with(&prefix)
        && name.len() == prefix.len() + 5
    {
        let generated = std::mem::replace(name, format!("{prefix}<suffix>"));
        // A Namespace's name label carries the generated name too.
        if let Some(label) = meta
            .get_mut("labels")
            .and_then(|l| l.get_mut("kubernetes.io/metadata.name"))
            && *label == json!(generated)
        {
            *label = json!(format!("{prefix}<suffix>"));
        }
    }
    if let Some(Value::Array(refs)) = meta.get_mut("ownerReferences") {
        for r in refs {
            if let Some(uid) = r.get("uid").and_then(Value::as_str) {
                let named = mem
                    .uid_names
                    .get(uid)
                    .cloned()
                    .unwrap_or_else(|| uid.to_string());
                r["uid"] = json!(named);
            }
        }
    }
    if let Some(Value::Array(fields)) = meta.get_mut("managedFields") {
        for f in fields.iter_mut() {
            if f.get("time").is_some() {
                f["time"] = json!(TIME);
            }
            if let Some(set) = f.get_mut("fieldsV1") {
                strip_members(set, mem);
            }
        }
        // Entries are ordered by their time to the second (see the list at the top).
        fields.sort_by_key(|f| {
            let text = |k: &str| {
                f.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            (text("operation"), text("manager"), text("subresource"))
        });
    }
}

/// A `FieldsV1` tree without its `.` entries (see the list at the top).
/// Owner references' uids in its keys are named as everywhere else.
fn strip_members(set: &mut Value, mem: &Memory) {
    if let Value::Object(m) = set {
        m.remove(".");
        let renamed: serde_json::Map<String, Value> = std::mem::take(m)
            .into_iter()
            // A map or list owned only as such (all its fields owned by others) is a `.`
            // entry too: it goes with it.
            .filter(|(k, v)| {
                !(k.starts_with("f:")
                    && v.get(".").is_some()
                    && v.as_object().is_some_and(|o| o.len() == 1))
            })
            .map(|(k, mut v)| {
                strip_members(&mut v, mem);
                let k = match k
                    .strip_prefix("k:")
                    .and_then(|j| serde_json::from_str::<Value>(j).ok())
                {
                    Some(Value::Object(mut key)) => {
                        if let Some(uid) = key.get("uid").and_then(Value::as_str) {
                            let named = mem
                                .uid_names
                                .get(uid)
                                .cloned()
                                .unwrap_or_else(|| uid.to_string());
                            key.insert("uid".into(), json!(named));
                        }
                        format!("k:{}", Value::Object(key))
                    }
                    _ => k,
                };
                (k, v)
            })
            .collect();
        *m = renamed;
    }
}

fn normalize_times(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if matches!(k.as_str(), "lastTransitionTime" | "lastProbeTime") && x.is_string() {
                    *x = json!(TIME);
                } else {
                    normalize_times(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(normalize_times),
        _ => {}
    }
}

/// An object with what legitimately differs replaced; `kind` for list items, which carry none.
pub fn normalize_object(obj: &Value, mem: &Memory, kind: &str) -> Value {
    let mut o = obj.clone();
    if let Some(Value::Object(meta)) = o.get_mut("metadata") {
        normalize_meta(meta, mem);
    }
    if o.get("kind").and_then(Value::as_str).unwrap_or(kind) == "Service" {
        if o.pointer("/spec/clusterIP").is_some_and(|ip| ip != "None") {
            o["spec"]["clusterIP"] = json!("<ip>");
            o["spec"]["clusterIPs"] = json!(["<ip>"]);
        }
        if let Some(Value::Array(ports)) = o.pointer_mut("/spec/ports") {
            for p in ports.iter_mut().filter(|p| p.get("nodePort").is_some()) {
                p["nodePort"] = json!("<port>");
            }
        }
    }
    if o.get("kind").and_then(Value::as_str).unwrap_or(kind) == "Namespace"
        && let Some(Value::Array(finalizers)) = o.pointer_mut("/metadata/finalizers")
    {
        finalizers.sort_by_key(Value::to_string);
    }
    if let Some(status) = o.get_mut("status") {
        normalize_times(status);
    }
    o
}

fn normalize_status(s: &Value, mem: &Memory) -> Value {
    let d = s.get("details").cloned().unwrap_or(Value::Null);
    let mut causes: Vec<Value> = d
        .get("causes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| json!({"reason": c.get("reason"), "field": c.get("field")}))
        .collect();
    causes.sort_by_key(|c| c.to_string());
    causes.dedup();
    let uid = d.get("uid").and_then(Value::as_str).map(|u| {
        mem.uid_names
            .get(u)
            .cloned()
            .unwrap_or_else(|| "<uid>".into())
    });
    // A name `generateName` made is each server's own: named after the object's key.
    let name = d.get("name").map(|n| {
        n.as_str()
            .and_then(|n| mem.generated_key(n))
            .map_or_else(|| n.clone(), |k| json!(format!("{{name:{k}}}")))
    });
    json!({
        "kind": "Status",
        "status": s.get("status"),
        "code": s.get("code"),
        "reason": s.get("reason"),
        "details": {
            "name": name, "group": d.get("group"), "kind": d.get("kind"),
            "uid": uid, "causes": causes,
        },
    })
}

/// A normalized object's key: namespace and name, and its uid's name (which tells apart the
/// objects whose generated names normalize alike).
fn sort_key(o: &Value) -> String {
    let text = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let name = text("/metadata/name");
    if name.ends_with("<suffix>") {
        format!(
            "{}/{name}#{}",
            text("/metadata/namespace"),
            text("/metadata/uid")
        )
    } else {
        format!("{}/{name}", text("/metadata/namespace"))
    }
}

/// An Event kube-apiserver's IP allocator repair loop records when it races with a Service's
/// creation (it lists Services and allocations apart): the real server's own, at random.
pub fn from_repair_loop(obj: &Value) -> bool {
    obj.get("reportingComponent").and_then(Value::as_str) == Some("ipallocator-repair-controller")
}

/// A body with what legitimately differs replaced.
pub fn normalize_body(body: &Value, mem: &Memory) -> Value {
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind == "Status" {
        return normalize_status(body, mem);
    }
    if kind.ends_with("List") && body.get("items").is_some() {
        let mut items: Vec<Value> = body
            .get("items")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|i| !from_repair_loop(i))
            .map(|i| normalize_object(i, mem, kind.trim_end_matches("List")))
            .collect();
        items.sort_by_key(sort_key);
        // A page of a longer list is the first names in each server's order, and a name
        // `generateName` made sorts by its random suffix: such a page holds any of those
        // objects. Compared then: how many there are.
        let paged = body.pointer("/metadata/continue").is_some();
        let generated = items.iter().any(|i| sort_key(i).contains("<suffix>#"));
        if paged && generated {
            return json!({
                "kind": kind, "apiVersion": body.get("apiVersion"), "continue": true,
                "items": items.len(),
            });
        }
        return json!({
            "kind": kind, "apiVersion": body.get("apiVersion"),
            "continue": body.pointer("/metadata/continue").is_some(),
            "items": items,
        });
    }
    if body.is_object() {
        normalize_object(body, mem, kind)
    } else {
        body.clone()
    }
}

/// The paths at which two values differ, with both values (at most `max`).
pub fn differences(a: &Value, b: &Value, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    walk(a, b, String::new(), &mut out, max);
    out
}

fn walk(a: &Value, b: &Value, path: String, out: &mut Vec<String>, max: usize) {
    if out.len() >= max || a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = format!("{path}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => walk(u, v, p, out, max),
                    (u, v) => out.push(format!("{p}: real={} dev={}", show(u), show(v))),
                }
                if out.len() >= max {
                    return;
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                walk(u, v, format!("{path}/{i}"), out, max);
            }
        }
        _ => out.push(format!("{path}: real={a} dev={b}")),
    }
}

fn show(v: Option<&Value>) -> String {
    v.map_or_else(|| "(absent)".into(), Value::to_string)
}

/// Compares two answers; `Err` lists the differences.
pub fn answers(
    real: &Answer,
    real_mem: &Memory,
    dev: &Answer,
    dev_mem: &Memory,
) -> Result<(), Vec<String>> {
    if real.code != dev.code {
        return Err(vec![format!("code: real={} dev={}", real.code, dev.code)]);
    }
    let (a, b) = (
        normalize_body(&real.body, real_mem),
        normalize_body(&dev.body, dev_mem),
    );
    let d = differences(&a, &b, 12);
    if d.is_empty() { Ok(()) } else { Err(d) }
}

/// A watch's events per object, in order: `(type, normalized object)` each.
pub fn watch_events(events: &[Value], mem: &Memory) -> BTreeMap<String, Vec<Value>> {
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for e in events {
        let t = e.get("type").and_then(Value::as_str).unwrap_or_default();
        if t == "BOOKMARK" {
            continue;
        }
        let obj = e.get("object").cloned().unwrap_or(Value::Null);
        if from_repair_loop(&obj) {
            continue;
        }
        let normalized = if t == "ERROR" {
            normalize_status(&obj, mem)
        } else {
            normalize_object(&obj, mem, "")
        };
        // Keyed by the normalized name: a generated name's suffix is each server's own.
        let key = if t == "ERROR" {
            "<error>".to_string()
        } else {
            sort_key(&normalized)
        };
        out.entry(key)
            .or_default()
            .push(json!({"type": t, "object": normalized}));
    }
    out
}
