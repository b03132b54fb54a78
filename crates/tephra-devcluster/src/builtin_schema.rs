//! Unknown and mistyped fields of the built-in kinds, found with their OpenAPI schemas (from
//! k8s-openapi): the real API server decodes built-in objects into typed structs, which drops
//! fields the type does not have (and, with `fieldValidation=Strict`, refuses them), and
//! refuses a field of the wrong JSON type (`"spec": 5`) with 400 before anything else looks at
//! the object. So a controller that writes `spec.containers[0].resource` learns here, as it
//! would on a cluster, that the field is gone. A custom resource's `metadata` is decoded the
//! same way; the rest of it is its CRD schema's business.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value};

use crate::resource::Builtin;

/// A kind's schema and the definitions it refers to.
pub struct KindSchema {
    root: Value,
    defs: Map<String, Value>,
}

/// The schema of a built-in kind (built once per process). CustomResourceDefinitions are left
/// alone: their schema is recursive free-form JSON in places.
pub fn schema(which: Builtin) -> Option<Arc<KindSchema>> {
    if which == Builtin::Crd {
        return None;
    }
    static CACHE: OnceLock<Mutex<HashMap<Builtin, Arc<KindSchema>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let key = which;
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = map.get(&key) {
        return Some(s.clone());
    }
    let mut generator = SchemaGenerator::new(SchemaSettings::openapi3());
    let name = crate::openapi::register_builtin(&mut generator, which);
    let defs = generator.take_definitions(true);
    let root = defs.get(&name)?.clone();
    let schema = Arc::new(KindSchema { root, defs });
    map.insert(key, schema.clone());
    Some(schema)
}

/// A field of the wrong JSON type, as the decoder reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mistyped {
    /// Dotted path of the field.
    pub path: String,
    /// The JSON type it has (`string`, `number`, `bool`, `array`, `object`).
    pub got: &'static str,
    /// The type it must have.
    pub want: String,
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The first field of `object` that could not be decoded, for an object of the built-in kind
/// `which` (all of it), or of any other kind (`None`: its `apiVersion`, `kind` and
/// `metadata`).
pub fn mistyped(which: Option<Builtin>, object: &Value) -> Option<Mistyped> {
    if let Some(schema) = which.and_then(schema) {
        return schema.mistyped(object, &schema.root, &mut String::new());
    }
    for field in ["apiVersion", "kind"] {
        if let Some(v) = object.get(field).filter(|v| !v.is_string() && !v.is_null()) {
            return Some(Mistyped {
                path: field.into(),
                got: json_type(v),
                want: "string".into(),
            });
        }
    }
    // Every built-in kind's `metadata` is an ObjectMeta; a ConfigMap's says what one is.
    let meta_schema = schema(Builtin::ConfigMap)?;
    let meta = meta_schema.root.get("properties")?.get("metadata")?;
    let value = object.get("metadata")?;
    meta_schema.mistyped(value, meta, &mut "metadata".to_string())
}

impl KindSchema {
    /// The first value under `value` whose JSON type `schema` does not allow. `null` decodes
    /// as the zero value of anything; a schema without a type (free-form JSON, a quantity)
    /// takes anything; int-or-string fields take either.
    fn mistyped(&self, value: &Value, schema: &Value, path: &mut String) -> Option<Mistyped> {
        // A RawExtension (a DRA driver's opaque parameters) holds any JSON.
        let raw = |s: &Value| {
            s.get("$ref")
                .and_then(Value::as_str)
                .is_some_and(|r| r.ends_with(".RawExtension"))
        };
        let all_of = schema.get("allOf").and_then(Value::as_array);
        if raw(schema) || all_of.is_some_and(|a| a.iter().any(raw)) {
            return None;
        }
        let schema = self.resolve(schema, 0);
        if value.is_null() {
            return None;
        }
        let wrong = |want: &str| {
            Some(Mistyped {
                path: path.trim_start_matches('.').to_string(),
                got: json_type(value),
                want: want.to_string(),
            })
        };
        if schema
            .get("x-kubernetes-int-or-string")
            .and_then(Value::as_bool)
            == Some(true)
        {
            return match value {
                Value::String(_) => None,
                Value::Number(n) if n.is_i64() || n.is_u64() => None,
                _ => wrong("intstr.IntOrString"),
            };
        }
        let ty = schema.get("type").and_then(Value::as_str);
        match (ty, value) {
            (None, _) => None,
            (Some("string"), Value::String(_)) => None,
            (Some("boolean"), Value::Bool(_)) => None,
            (Some("number"), Value::Number(_)) => None,
            (Some("integer"), Value::Number(n)) if n.is_i64() || n.is_u64() => None,
            (Some("array"), Value::Array(items)) => {
                let item_schema = schema.get("items")?;
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    let found = self.mistyped(item, item_schema, path);
                    path.truncate(len);
                    if found.is_some() {
                        return found;
                    }
                }
                None
            }
            (Some("object"), Value::Object(map)) => {
                let props = schema.get("properties").and_then(Value::as_object);
                let additional = schema.get("additionalProperties").filter(|a| a.is_object());
                for (key, child) in map {
                    let Some(child_schema) = props.and_then(|p| p.get(key)).or(additional) else {
                        continue;
                    };
                    let len = path.len();
                    path.push('.');
                    path.push_str(key);
                    let found = self.mistyped(child, child_schema, path);
                    path.truncate(len);
                    if found.is_some() {
                        return found;
                    }
                }
                None
            }
            (Some("object"), _) if schema.get("additionalProperties").is_some() => wrong("map"),
            (Some(t), _) => wrong(t),
        }
    }

    fn resolve<'a>(&'a self, schema: &'a Value, depth: usize) -> &'a Value {
        if depth > 16 {
            return schema;
        }
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            let name = r.rsplit('/').next().unwrap_or_default();
            return self
                .defs
                .get(name)
                .map_or(schema, |d| self.resolve(d, depth + 1));
        }
        if let Some([one]) = schema
            .get("allOf")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            return self.resolve(one, depth + 1);
        }
        schema
    }

    /// Drops the fields the kind does not have (outside `metadata`, which the server handles
    /// on its own); returns their paths.
    pub fn prune(&self, object: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        if let Some(map) = object.as_object_mut() {
            let props = self.root.get("properties").and_then(Value::as_object);
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                match props.and_then(|p| p.get(&key)) {
                    Some(s) => {
                        if let Some(child) = map.get_mut(&key) {
                            let mut path = key.clone();
                            self.walk(child, s, &mut path, &mut pruned);
                        }
                    }
                    None => {
                        map.remove(&key);
                        pruned.push(key);
                    }
                }
            }
        }
        pruned
    }

    /// Prunes `value` against `schema`; `path` is its dotted path, extended in place for the
    /// children (a path is only copied out when a field is pruned: this runs on every write of
    /// a built-in object).
    fn walk(&self, value: &mut Value, schema: &Value, path: &mut String, pruned: &mut Vec<String>) {
        let schema = self.resolve(schema, 0);
        match value {
            Value::Object(map) => {
                let props = schema.get("properties").and_then(Value::as_object);
                let additional = schema.get("additionalProperties").filter(|a| a.is_object());
                if props.is_none() && additional.is_none() {
                    // No declared shape: anything goes (free-form JSON).
                    return;
                }
                let mut unknown = Vec::new();
                for (key, child) in map.iter_mut() {
                    let len = path.len();
                    path.push('.');
                    path.push_str(key);
                    match props.and_then(|p| p.get(key)).or(additional) {
                        Some(s) => self.walk(child, s, path, pruned),
                        None => {
                            unknown.push(key.clone());
                            pruned.push(path.clone());
                        }
                    }
                    path.truncate(len);
                }
                for key in unknown {
                    map.remove(&key);
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (i, item) in items.iter_mut().enumerate() {
                        let len = path.len();
                        path.push('[');
                        path.push_str(&i.to_string());
                        path.push(']');
                        self.walk(item, item_schema, path, pruned);
                        path.truncate(len);
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_keeps_its_fields_and_loses_the_misspelled_ones() {
        let schema = schema(Builtin::Pod).expect("pods have a schema");
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {
                "containers": [{"name": "c", "image": "i", "resource": {"requests": {"cpu": "1"}},
                                "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}},
                                "env": [{"name": "A", "value": "1"}], "ports": [{"containerPort": 80}]}],
                "nodeSelector": {"zone": "a"},
                "tolerations": [{"key": "k", "operator": "Exists"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]}}},
                "priorityClassName": "high", "schedulerName": "volcano", "nodeName": "n1"
            },
            "status": {"phase": "Running"},
            "spec2": 1
        });
        let before = pod.clone();
        let pruned = schema.prune(&mut pod);
        assert_eq!(pruned, vec!["spec.containers[0].resource", "spec2"]);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            before["spec"]["containers"][0]["resources"]
        );
        assert_eq!(pod["spec"]["affinity"], before["spec"]["affinity"]);
        assert_eq!(pod["spec"]["nodeSelector"], before["spec"]["nodeSelector"]);
        assert_eq!(pod["status"], before["status"]);
    }

    #[test]
    fn a_field_of_the_wrong_json_type_is_found_and_null_is_not_one() {
        let pod = |spec: Value| {
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}}, "spec": spec})
        };
        let ok = pod(json!({"containers": [{"name": "c", "image": "i",
            "ports": [{"containerPort": 80}], "resources": {"requests": {"cpu": 1}}}],
            "nodeName": null, "activeDeadlineSeconds": 60}));
        assert_eq!(mistyped(Some(Builtin::Pod), &ok), None);
        let bad = pod(json!({"containers": [{"name": "c", "image": "i",
            "ports": [{"containerPort": "80"}]}]}));
        assert_eq!(
            mistyped(Some(Builtin::Pod), &bad),
            Some(Mistyped {
                path: "spec.containers[0].ports[0].containerPort".into(),
                got: "string",
                want: "integer".into()
            })
        );
        assert_eq!(
            mistyped(Some(Builtin::Pod), &pod(json!(5))).map(|m| m.path),
            Some("spec".into())
        );
        let service = json!({"spec": {"ports": [{"port": 80, "targetPort": "http"}]}});
        assert_eq!(mistyped(Some(Builtin::Service), &service), None);
        let service = json!({"spec": {"ports": [{"port": 80, "targetPort": 1.5}]}});
        assert!(mistyped(Some(Builtin::Service), &service).is_some());
        let custom = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"labels": "a=b"},
            "spec": {"anything": 5}});
        assert_eq!(
            mistyped(None, &custom).map(|m| (m.path, m.got)),
            Some(("metadata.labels".into(), "string"))
        );
        let custom = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"labels": {"a": "b"}},
            "spec": {"anything": 5}});
        assert_eq!(mistyped(None, &custom), None);
    }

    #[test]
    fn every_built_in_kind_but_crds_has_a_schema() {
        for b in [
            Builtin::Namespace,
            Builtin::Node,
            Builtin::Pod,
            Builtin::Service,
            Builtin::ConfigMap,
            Builtin::Secret,
            Builtin::Event,
            Builtin::EventsV1,
            Builtin::Lease,
            Builtin::PriorityClass,
            Builtin::Pdb,
        ] {
            let s = schema(b).expect("schema");
            let mut empty = json!({"metadata": {}});
            assert!(s.prune(&mut empty).is_empty(), "{b:?}");
        }
    }
}
