//! Unknown fields of the built-in kinds, found with their OpenAPI schemas (from k8s-openapi):
//! the real API server decodes built-in objects into typed structs, which drops fields the type
//! does not have (and, with `fieldValidation=Strict`, refuses them). So a controller that writes
//! `spec.containers[0].resource` learns here, as it would on a cluster, that the field is gone.

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

impl KindSchema {
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
