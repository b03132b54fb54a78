//! Field sets as server-side apply tracks them: the leaf fields an object sets, as paths of
//! `f:<field>`, `k:<merge key>` and `v:<value>` elements, rendered to and read from the
//! `FieldsV1` trees of `metadata.managedFields`.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::strategic::{ListStrategy, list_strategy};

/// One path: `["f:spec", "k:{\"name\":\"c\"}", "f:image"]`; a path ending in `"."` stands for
/// the list item itself.
pub type Path = Vec<String>;
/// A set of paths.
pub type FieldSet = BTreeSet<Path>;

/// The metadata fields a manager can own.
const OWNED_METADATA: &[&str] = &[
    "generateName",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
];

/// The leaf fields `value` sets. Lists merge by key for the built-in kinds (`keyed`), and are
/// atomic otherwise. `status` is left out (it belongs to the status subresource).
pub fn field_set(value: &Value, keyed: bool) -> FieldSet {
    let mut out = FieldSet::new();
    let mut path = Vec::new();
    let mut names = Vec::new();
    if let Some(map) = value.as_object() {
        for (k, v) in map {
            if matches!(k.as_str(), "apiVersion" | "kind" | "status") {
                continue;
            }
            // An empty top-level struct (`spec: {}`) is the kind's zero value: no field.
            if keyed && v.as_object().is_some_and(serde_json::Map::is_empty) {
                continue;
            }
            if k == "metadata" {
                for (mk, mv) in v.as_object().into_iter().flatten() {
                    if OWNED_METADATA.contains(&mk.as_str()) {
                        path.push("f:metadata".to_string());
                        names.push("metadata".to_string());
                        collect_field(mk, mv, keyed, &mut path, &mut names, &mut out);
                        path.pop();
                        names.pop();
                    }
                }
                continue;
            }
            collect_field(k, v, keyed, &mut path, &mut names, &mut out);
        }
    }
    out
}

fn collect_field(
    key: &str,
    value: &Value,
    keyed: bool,
    path: &mut Path,
    names: &mut Vec<String>,
    out: &mut FieldSet,
) {
    path.push(format!("f:{key}"));
    // Label selectors and node selectors are atomic in the built-in kinds' schemas: one
    // manager owns the whole of one.
    // So are object references (an Event's, a binding's role).
    let atomic = keyed
        && matches!(
            key,
            "selector" | "nodeSelector" | "involvedObject" | "roleRef"
        );
    match value {
        Value::Object(map) if !map.is_empty() && !atomic => {
            names.push(key.to_string());
            for (k, v) in map {
                collect_field(k, v, keyed, path, names, out);
            }
            names.pop();
        }
        Value::Array(items) => {
            // Metadata's lists are keyed alike in every kind, custom resources' too.
            let strategy = if keyed || matches!(key, "finalizers" | "ownerReferences") {
                list_strategy(names, key)
            } else {
                ListStrategy::Atomic
            };
            match strategy {
                ListStrategy::Key(k) if items.iter().all(|i| i.get(k).is_some()) => {
                    names.push(key.to_string());
                    for item in items {
                        path.push(item_key(k, item));
                        let mut me = path.clone();
                        me.push(".".into());
                        out.insert(me);
                        // Each owner reference is atomic: its key is all there is to own.
                        let fields = item.as_object().filter(|_| key != "ownerReferences");
                        for (f, v) in fields.into_iter().flatten() {
                            collect_field(f, v, keyed, path, names, out);
                        }
                        path.pop();
                    }
                    names.pop();
                }
                ListStrategy::Set => {
                    for item in items {
                        path.push(format!("v:{item}"));
                        out.insert(path.clone());
                        path.pop();
                    }
                }
                _ => {
                    out.insert(path.clone());
                }
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
    path.pop();
}

/// A list item's key element. Ports are keyed by their number and protocol together (TCP
/// when unset, the schema's default), as server-side apply keys them.
fn item_key(key: &str, item: &Value) -> String {
    let mut m = Map::new();
    m.insert(
        key.to_string(),
        item.get(key).cloned().unwrap_or(Value::Null),
    );
    if matches!(key, "port" | "containerPort") {
        m.insert(
            "protocol".into(),
            item.get("protocol")
                .cloned()
                .unwrap_or_else(|| json!("TCP")),
        );
    }
    format!("k:{}", Value::Object(m))
}

/// The `FieldsV1` tree of a field set.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for elem in path {
            let entry = node
                .entry(elem.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(next) = entry else {
                break;
            };
            node = next;
        }
    }
    Value::Object(root)
}

/// The field set of a `FieldsV1` tree.
pub fn from_fields_v1(tree: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    let mut path = Vec::new();
    walk(tree, &mut path, &mut out);
    out
}

fn walk(node: &Value, path: &mut Path, out: &mut FieldSet) {
    match node.as_object() {
        Some(map) if !map.is_empty() => {
            for (k, v) in map {
                path.push(k.clone());
                walk(v, path, out);
                path.pop();
            }
        }
        _ => {
            if !path.is_empty() {
                out.insert(path.clone());
            }
        }
    }
}

fn matches_elem<'a>(items: &'a [Value], elem: &str) -> Option<(usize, &'a Value)> {
    if let Some(k) = elem.strip_prefix("k:") {
        let want: Map<String, Value> = serde_json::from_str(k).ok()?;
        items.iter().enumerate().find(|(_, i)| {
            want.iter().all(|(f, v)| match i.get(f) {
                Some(x) => x == v,
                // A port's protocol defaults to TCP.
                None => f == "protocol" && v == "TCP",
            })
        })
    } else if let Some(v) = elem.strip_prefix("v:") {
        let want: Value = serde_json::from_str(v).ok()?;
        items.iter().enumerate().find(|(_, i)| **i == want)
    } else {
        None
    }
}

/// The value at a path, if the object has it.
pub fn lookup<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = value;
    for elem in path {
        if elem == "." {
            continue;
        }
        cur = if let Some(f) = elem.strip_prefix("f:") {
            cur.get(f)?
        } else {
            matches_elem(cur.as_array()?, elem)?.1
        };
    }
    Some(cur)
}

/// Removes the field (or list item, for a path ending in `.` or `v:`) at a path.
pub fn remove(value: &mut Value, path: &[String]) {
    let path: Vec<&String> = path.iter().filter(|e| *e != ".").collect();
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = value;
    for elem in parents {
        let next = if let Some(f) = elem.strip_prefix("f:") {
            cur.get_mut(f)
        } else {
            let idx = cur
                .as_array()
                .and_then(|a| matches_elem(a, elem))
                .map(|(i, _)| i);
            match (idx, cur.as_array_mut()) {
                (Some(i), Some(a)) => a.get_mut(i),
                _ => None,
            }
        };
        let Some(next) = next else {
            return;
        };
        cur = next;
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(i) = cur
        .as_array()
        .and_then(|a| matches_elem(a, last))
        .map(|(i, _)| i)
        && let Some(a) = cur.as_array_mut()
    {
        a.remove(i);
    }
}

/// A path as the API server prints it in a conflict: `.spec.containers[name="c"].image`.
pub fn display(path: &[String]) -> String {
    let mut s = String::new();
    for elem in path {
        if let Some(f) = elem.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = elem.strip_prefix("k:") {
            let keys: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let inner: Vec<String> = keys.iter().map(|(f, v)| format!("{f}={v}")).collect();
            s.push_str(&format!("[{}]", inner.join(",")));
        } else if let Some(v) = elem.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        }
    }
    s
}

/// A `managedFields` entry.
pub fn entry(
    manager: &str,
    operation: &str,
    api_version: &str,
    time: &str,
    set: &FieldSet,
) -> Value {
    json!({
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": time,
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(set),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_sets_round_trip_through_fields_v1() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let set = field_set(&pod, true);
        let tree = to_fields_v1(&set);
        assert_eq!(
            tree,
            json!({"f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
        );
        assert_eq!(from_fields_v1(&tree), set);
        let image: Path = vec![
            "f:spec".into(),
            "f:containers".into(),
            "k:{\"name\":\"c\"}".into(),
            "f:image".into(),
        ];
        assert_eq!(lookup(&pod, &image), Some(&json!("i")));
        assert_eq!(display(&image), ".spec.containers[name=\"c\"].image");
        let mut p2 = pod.clone();
        remove(&mut p2, &image);
        assert_eq!(p2["spec"]["containers"][0], json!({"name": "c"}));
    }
}
