//! Field sets as server-side apply tracks them: the leaf fields an object sets, as paths of
//! `f:<field>`, `k:<merge key>` and `v:<value>` elements, rendered to and read from the
//! `FieldsV1` trees of `metadata.managedFields`.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::strategic::{ListStrategy, apply_list_strategy};

/// One path: `["f:spec", "k:{\"name\":\"c\"}", "f:image"]`. A path to a list item, or to a map
/// or list with fields of its own in the set, stands for the item, map or list itself (a
/// "member": in `FieldsV1`, its `.` entry).
pub type Path = Vec<String>;
/// A set of paths.
pub type FieldSet = BTreeSet<Path>;

/// Whether the field `key` holds an atomic map: label selectors and node selectors are, in the
/// built-in kinds' schemas (`keyed`), so one manager owns the whole of one; so are object
/// references (an Event's, a binding's role).
pub fn atomic_field(key: &str, keyed: bool) -> bool {
    keyed
        && matches!(
            key,
            "selector" | "nodeSelector" | "involvedObject" | "roleRef"
        )
}

/// The metadata fields a manager can own.
const OWNED_METADATA: &[&str] = &[
    "generateName",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
];

/// The leaf fields `value` sets, and its keyed lists' items (as server-side apply's
/// `ToFieldSet` sees an applied configuration). Lists merge by key for the built-in kinds
/// (`keyed`), and are atomic otherwise. `status` is left out (it belongs to the status
/// subresource).
pub fn field_set(value: &Value, keyed: bool) -> FieldSet {
    walk_fields(value, keyed, None)
}

/// [`field_set`], and the maps and lists `value` holds that are not in its kind's Go zero
/// value: what an update that adds them owns as wholes besides their fields (server-side
/// apply's comparison adds every path the old object lacks; the old object, typed, always
/// has its kind's zero value).
pub fn update_set(value: &Value, keyed: bool) -> (FieldSet, FieldSet) {
    let mut members = FieldSet::new();
    let fields = walk_fields(value, keyed, Some(&mut members));
    (fields, members)
}

/// Whether the field at `names` (from the object's root, through no list item) is in the Go
/// zero value of `kind` (its non-pointer structs and fields without `omitempty`), as
/// `DefaultUnstructuredConverter` renders it; a custom resource's zero value has only its
/// metadata.
fn zero_present(kind: &str, keyed: bool, names: &[String]) -> bool {
    let n: Vec<&str> = names.iter().map(String::as_str).collect();
    if n == ["metadata"] {
        return true;
    }
    if !keyed {
        return false;
    }
    matches!(
        (kind, n.as_slice()),
        (_, ["spec" | "status"])
            | ("Event", ["involvedObject" | "source"])
            | ("Node", ["status", "daemonEndpoints" | "nodeInfo"])
            | ("Node", ["status", "daemonEndpoints", "kubeletEndpoint"])
            | ("Deployment", ["spec", "selector" | "strategy" | "template"])
            | ("Deployment", ["spec", "template", "metadata" | "spec"])
            | ("Deployment", ["spec", "template", "spec", "containers"])
            | ("Pod", ["spec", "containers"])
            | ("Service", ["status", "loadBalancer"])
            | ("ResourceClaim", ["spec", "devices"])
            | ("ResourceClaimTemplate", ["spec", "metadata" | "spec"])
            | ("ResourceClaimTemplate", ["spec", "spec", "devices"])
    )
}

/// Where [`walk_fields`] is: the path, the field names along it (`None` past a list item),
/// and where members go.
struct Walk<'a> {
    keyed: bool,
    kind: String,
    path: Path,
    names: Vec<String>,
    in_item: usize,
    out: FieldSet,
    members: Option<&'a mut FieldSet>,
}

fn walk_fields(value: &Value, keyed: bool, members: Option<&mut FieldSet>) -> FieldSet {
    let mut w = Walk::new(value, keyed, members);
    if let Some(map) = value.as_object() {
        for (k, v) in map {
            if matches!(k.as_str(), "apiVersion" | "kind" | "status") {
                continue;
            }
            if k == "metadata" {
                for (mk, mv) in v.as_object().into_iter().flatten() {
                    if OWNED_METADATA.contains(&mk.as_str()) {
                        w.path.push("f:metadata".to_string());
                        w.names.push("metadata".to_string());
                        w.field(mk, mv);
                        w.path.pop();
                        w.names.pop();
                    }
                }
                continue;
            }
            w.field(k, v);
        }
    }
    w.out
}

impl<'a> Walk<'a> {
    fn new(value: &Value, keyed: bool, members: Option<&'a mut FieldSet>) -> Self {
        Walk {
            keyed,
            kind: value
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            path: Vec::new(),
            names: Vec::new(),
            in_item: 0,
            out: FieldSet::new(),
            members,
        }
    }

    /// Records the map or list at the current path as a member, unless it is in the kind's
    /// zero value.
    fn member(&mut self) {
        let zero = self.in_item == 0 && zero_present(&self.kind, self.keyed, &self.names);
        if let Some(m) = self.members.as_deref_mut()
            && !zero
        {
            m.insert(self.path.clone());
        }
    }

    fn field(&mut self, key: &str, value: &Value) {
        self.path.push(format!("f:{key}"));
        self.names.push(key.to_string());
        let atomic = atomic_field(key, self.keyed);
        match value {
            Value::Object(map) if !map.is_empty() && !atomic => {
                self.member();
                for (k, v) in map {
                    self.field(k, v);
                }
            }
            // An update compares with the old object, which always has the kind's zero value:
            // an empty struct there (`spec: {}`) changes nothing. An applied configuration
            // owns what it sets, empty or not.
            Value::Object(map)
                if map.is_empty()
                    && self.members.is_some()
                    && self.in_item == 0
                    && zero_present(&self.kind, self.keyed, &self.names) => {}
            Value::Array(items) => self.list(key, items),
            _ => {
                self.out.insert(self.path.clone());
            }
        }
        self.names.pop();
        self.path.pop();
    }

    fn list(&mut self, key: &str, items: &[Value]) {
        // Metadata's lists are keyed alike in every kind, custom resources' too.
        let parents = &self.names[..self.names.len() - 1];
        let strategy = if self.keyed || matches!(key, "finalizers" | "ownerReferences") {
            apply_list_strategy(parents, key)
        } else {
            ListStrategy::Atomic
        };
        match strategy {
            ListStrategy::Key(k) if items.iter().all(|i| i.get(k).is_some()) => {
                if !items.is_empty() {
                    self.member();
                }
                self.in_item += 1;
                for item in items {
                    self.path.push(item_key(k, item));
                    self.out.insert(self.path.clone());
                    // Each owner reference is atomic: its key is all there is to own.
                    let fields = item.as_object().filter(|_| key != "ownerReferences");
                    for (f, v) in fields.into_iter().flatten() {
                        self.field(f, v);
                    }
                    self.path.pop();
                }
                self.in_item -= 1;
            }
            ListStrategy::Set => {
                if !items.is_empty() {
                    self.member();
                }
                for item in items {
                    self.path.push(format!("v:{item}"));
                    self.out.insert(self.path.clone());
                    self.path.pop();
                }
            }
            _ => {
                self.out.insert(self.path.clone());
            }
        }
    }
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

/// The `FieldsV1` tree of a field set: a path with fields of its own below it is marked `.`.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    // In a set's order a path's own fields come right after it.
    let mut marked: Vec<Path> = Vec::with_capacity(set.len());
    let mut iter = set.iter().peekable();
    while let Some(path) = iter.next() {
        let has_fields = iter
            .peek()
            .is_some_and(|next| next.len() > path.len() && next.starts_with(path));
        if has_fields {
            let mut me = path.clone();
            me.push(".".into());
            marked.push(me);
        } else {
            marked.push(path.clone());
        }
    }
    let mut root = Map::new();
    for path in &marked {
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
                if k == "." {
                    out.insert(path.clone());
                    continue;
                }
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
    let mut e = json!({
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(set),
    });
    // An apply that changed nothing has no time.
    if !time.is_empty() {
        e["time"] = json!(time);
    }
    e
}

/// [`update_set`] of an object's status alone (a write through the status subresource).
pub fn status_update_set(value: &Value, keyed: bool) -> (FieldSet, FieldSet) {
    let mut members = FieldSet::new();
    let mut w = Walk::new(value, keyed, Some(&mut members));
    if let Some(status) = value.get("status")
        && !(keyed && status.as_object().is_some_and(Map::is_empty))
    {
        w.field("status", status);
    }
    let fields = w.out;
    (fields, members)
}

/// `managedFields` entries in the order kube-apiserver encodes them: by operation (`Apply`
/// before `Update`), then time (to the second), manager, apiVersion and subresource.
pub fn sort_entries(entries: &mut [Value]) {
    let text = |e: &Value, k: &str| -> String {
        e.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    entries.sort_by_cached_key(|e| {
        (
            text(e, "operation"),
            crate::time::parse_rfc3339(&text(e, "time")).unwrap_or(0),
            text(e, "manager"),
            text(e, "apiVersion"),
            text(e, "subresource"),
        )
    });
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
