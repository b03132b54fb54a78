//! Structural pruning of custom resources, as the API server does before defaulting: fields the
//! CRD's schema does not declare are dropped (or, with `fieldValidation=Strict`, refused), except
//! under `x-kubernetes-preserve-unknown-fields` and at the root's `apiVersion`, `kind` and
//! `metadata`; `metadata` keeps ObjectMeta's own fields.

use serde_json::Value;

use tephra_api::admission::OBJECT_META_FIELDS as OBJECT_META;

/// Drops undeclared fields from `object`; returns their paths (`spec.tasks[0].replica`).
pub fn prune(object: &mut Value, schema: &Value) -> Vec<String> {
    let mut pruned = prune_metadata(object);
    walk(object, schema, "", true, &mut pruned);
    pruned
}

/// Drops what `metadata` may not hold (ObjectMeta's fields only); returns their paths.
pub fn prune_metadata(object: &mut Value) -> Vec<String> {
    let mut pruned = Vec::new();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let unknown: Vec<String> = meta
            .keys()
            .filter(|k| !OBJECT_META.contains(&k.as_str()))
            .cloned()
            .collect();
        for k in unknown {
            meta.remove(&k);
            pruned.push(format!("metadata.{k}"));
        }
    }
    pruned
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn walk(value: &mut Value, schema: &Value, path: &str, root: bool, pruned: &mut Vec<String>) {
    let preserve = schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true);
    let embedded = schema
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        == Some(true);
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                let keep_meta = (root || embedded)
                    && matches!(key.as_str(), "apiVersion" | "kind" | "metadata");
                if let Some(prop) = properties.and_then(|p| p.get(&key)) {
                    if let Some(child) = map.get_mut(&key) {
                        walk(child, prop, &join(path, &key), false, pruned);
                    }
                } else if let Some(add) = additional {
                    if let Some(child) = map.get_mut(&key) {
                        walk(child, add, &join(path, &key), false, pruned);
                    }
                } else if keep_meta
                    || preserve
                    || schema.get("additionalProperties").and_then(Value::as_bool) == Some(true)
                {
                    continue;
                } else {
                    map.remove(&key);
                    pruned.push(join(path, &key));
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(item, item_schema, &format!("{path}[{i}]"), false, pruned);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn drops_undeclared_fields_and_reports_their_paths() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "tasks": {"type": "array", "items": {"type": "object", "properties": {"replicas": {"type": "integer"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}});
        let mut obj = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a", "bogus": 1},
            "spec": {"tasks": [{"replicas": 1, "replica": 2}], "free": {"any": 1}, "typo": true}});
        let pruned = prune(&mut obj, &schema);
        assert_eq!(
            pruned,
            vec!["metadata.bogus", "spec.tasks[0].replica", "spec.typo"]
        );
        assert_eq!(obj["spec"]["free"]["any"], 1);
        assert_eq!(obj["apiVersion"], "x/v1");
    }
}
