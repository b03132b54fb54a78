//! Strategic merge patch for the built-in kinds, as far as `kubectl apply` and `kubectl patch`
//! need it: maps merge, `null` deletes, lists with a patch merge key (containers by `name`,
//! ports by `containerPort`, conditions by `type`, ...) merge item by item, `finalizers` merge
//! as a set, other lists are replaced; the `$patch`, `$retainKeys`,
//! `$deleteFromPrimitiveList/` and `$setElementOrder/` directives are honoured.

use serde_json::{Map, Value};

/// How a list field merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListStrategy {
    /// Items are maps merged by this key.
    Key(&'static str),
    /// Items are scalars merged as a set.
    Set,
    /// The list is replaced whole.
    Atomic,
}

/// The merge strategy of list `field` under the fields `parents` (the path from the object's
/// root), from the built-in types' `patchStrategy`/`patchMergeKey` tags.
pub fn list_strategy(parents: &[String], field: &str) -> ListStrategy {
    let under = |name: &str| parents.iter().any(|p| p == name);
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates" => ListStrategy::Key("name"),
        "volumeMounts" => ListStrategy::Key("mountPath"),
        "volumeDevices" => ListStrategy::Key("devicePath"),
        "hostAliases" => ListStrategy::Key("ip"),
        "ports" if under("containers") || under("initContainers") => {
            ListStrategy::Key("containerPort")
        }
        "ports" => ListStrategy::Key("port"),
        "conditions" | "addresses" => ListStrategy::Key("type"),
        "ownerReferences" => ListStrategy::Key("uid"),
        // A ResourceClaim's consumers.
        "reservedFor" => ListStrategy::Key("uid"),
        "topologySpreadConstraints" => ListStrategy::Key("topologyKey"),
        "finalizers" => ListStrategy::Set,
        _ => ListStrategy::Atomic,
    }
}

/// How server-side apply merges the list `field`: as a strategic merge patch does, but for
/// lists whose schema makes them maps without a patch strategy (a Workload's pod group
/// templates, keyed by name, which a strategic merge patch replaces whole).
pub fn apply_list_strategy(parents: &[String], field: &str) -> ListStrategy {
    match field {
        "podGroupTemplates" | "compositePodGroupTemplates" => ListStrategy::Key("name"),
        _ => list_strategy(parents, field),
    }
}

/// Applies a strategic merge patch to `target`.
pub fn merge(target: &mut Value, patch: &Value) {
    let mut parents = Vec::new();
    merge_value(target, patch, &mut parents);
}

fn is_directive(key: &str) -> bool {
    key == "$patch"
        || key == "$retainKeys"
        || key.starts_with("$setElementOrder/")
        || key.starts_with("$deleteFromPrimitiveList/")
}

/// A patch value with its directives removed, as stored when there is nothing to merge into.
fn clean(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, v)| !is_directive(k) && !v.is_null())
                .map(|(k, v)| (k.clone(), clean(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|i| i.get("$patch").and_then(Value::as_str) != Some("delete"))
                .map(clean)
                .collect(),
        ),
        other => other.clone(),
    }
}

fn merge_value(target: &mut Value, patch: &Value, parents: &mut Vec<String>) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => merge_map(t, p, parents),
        _ => *target = clean(patch),
    }
}

fn merge_map(
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    parents: &mut Vec<String>,
) {
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        if let Value::Object(m) = clean(&Value::Object(patch.clone())) {
            *target = m;
        }
        return;
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Some(remove)) =
                (target.get_mut(field), value.as_array())
            {
                items.retain(|i| !remove.contains(i));
            }
            continue;
        }
        if is_directive(key) {
            continue;
        }
        if value.is_null() {
            target.remove(key);
            continue;
        }
        if value.get("$patch").and_then(Value::as_str) == Some("delete") {
            target.remove(key);
            continue;
        }
        match (target.get_mut(key), value) {
            (Some(Value::Object(t)), Value::Object(p)) => {
                parents.push(key.clone());
                merge_map(t, p, parents);
                parents.pop();
            }
            (Some(Value::Array(t)), Value::Array(p)) => {
                let strategy = list_strategy(parents, key);
                parents.push(key.clone());
                merge_list(t, p, strategy, parents);
                parents.pop();
            }
            _ => {
                target.insert(key.clone(), clean(value));
            }
        }
    }
    if let Some(keep) = patch.get("$retainKeys").and_then(Value::as_array) {
        target.retain(|k, _| keep.iter().any(|r| r.as_str() == Some(k)));
    }
}

fn merge_list(
    target: &mut Vec<Value>,
    patch: &[Value],
    strategy: ListStrategy,
    parents: &mut Vec<String>,
) {
    if patch
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *target = patch
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .map(clean)
            .collect();
        return;
    }
    match strategy {
        ListStrategy::Atomic => *target = patch.iter().map(clean).collect(),
        ListStrategy::Set => {
            for item in patch {
                if !target.contains(item) {
                    target.push(item.clone());
                }
            }
        }
        ListStrategy::Key(k) => {
            for item in patch {
                let Some(id) = item.get(k) else {
                    target.push(clean(item));
                    continue;
                };
                let pos = target.iter().position(|t| t.get(k) == Some(id));
                let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                match (pos, delete) {
                    (Some(i), true) => {
                        target.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => merge_value(&mut target[i], item, parents),
                    (None, false) => target.push(clean(item)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containers_merge_by_name_and_null_deletes() {
        let mut pod = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
            "spec": {"containers": [{"name": "c", "image": "i1"}, {"name": "d", "image": "i2"}],
                     "tolerations": [{"key": "t"}]}});
        merge(
            &mut pod,
            &json!({"metadata": {"labels": {"a": null, "c": "3"}, "finalizers": ["y"]},
                "spec": {"containers": [{"name": "d", "image": "i3"}], "tolerations": []}}),
        );
        assert_eq!(pod["metadata"]["labels"], json!({"b": "2", "c": "3"}));
        assert_eq!(pod["metadata"]["finalizers"], json!(["x", "y"]));
        assert_eq!(pod["spec"]["containers"][0]["image"], "i1");
        assert_eq!(pod["spec"]["containers"][1]["image"], "i3");
        assert_eq!(pod["spec"]["tolerations"], json!([]));
    }

    #[test]
    fn directives_delete_and_replace() {
        let mut pod = json!({"spec": {"containers": [{"name": "c"}, {"name": "d"}],
            "nodeSelector": {"a": "1"}}, "metadata": {"finalizers": ["x", "y"]}});
        merge(
            &mut pod,
            &json!({"spec": {"containers": [{"name": "c", "$patch": "delete"}],
                "nodeSelector": {"$patch": "replace", "b": "2"},
                "$setElementOrder/containers": [{"name": "d"}]},
                "metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}),
        );
        assert_eq!(pod["spec"]["containers"], json!([{"name": "d"}]));
        assert_eq!(pod["spec"]["nodeSelector"], json!({"b": "2"}));
        assert_eq!(pod["metadata"]["finalizers"], json!(["y"]));
    }
}
