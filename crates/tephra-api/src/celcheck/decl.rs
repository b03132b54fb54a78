//! Schema node → declared CEL type, with the size bounds the API server derives for each node
//! (Kubernetes `SchemaDeclType`): `maxItems`, `maxProperties` and `maxLength` where set, and
//! otherwise the most that fits in one 3 MiB request.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::types::{CelType, DeclType, Shape};

/// The largest request the API server takes, which bounds every unbounded estimate.
pub const MAX_REQUEST_SIZE_BYTES: i64 = 3 * 1024 * 1024;

const MIN_STRING_SIZE: i64 = 2;
const MIN_BOOL_SIZE: i64 = 4;
const MIN_NUMBER_SIZE: i64 = 1;
const MIN_DURATION_SIZE_JSON: i64 = 3;
const JSON_DATE_SIZE: i64 = 12;
const MIN_DATETIME_SIZE_JSON: i64 = 21;
const MAX_DURATION_SIZE_JSON: i64 = 32;
const MAX_DATETIME_SIZE_JSON: i64 = 32;

fn int(schema: &Value, key: &str) -> Option<i64> {
    schema.get(key).and_then(Value::as_i64)
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn scalar(name: &str, t: CelType, max_elements: i64, min: i64) -> Arc<DeclType> {
    Arc::new(DeclType {
        name: name.to_string(),
        shape: Shape::Scalar(t),
        max_elements,
        min_serialized_size: min,
    })
}

/// The longest string (in bytes) a schema admits: `maxLength` counts code points, so it is
/// taken four times over; without it, a whole request.
fn max_string_elements(schema: &Value) -> i64 {
    match int(schema, "maxLength") {
        Some(n) => n.max(0) * 4,
        None => MAX_REQUEST_SIZE_BYTES - 2,
    }
}

/// Escapes a property name as the API server exposes it to CEL, or `None` when it cannot be
/// exposed (it then is not a field of the object).
pub fn escape(name: &str) -> Option<String> {
    const RESERVED: &[&str] = &[
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let first = name.chars().next()?;
    if !(first.is_ascii_alphabetic() || first == '_') {
        return None;
    }
    let mut out = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

/// The declared type of a schema node, or `None` when CEL cannot see it. `resource_root` marks
/// the root of a custom resource (and embedded resources), where `apiVersion`, `kind`,
/// `metadata.name` and `metadata.generateName` are always visible.
pub fn decl_type(schema: &Value, name: &str, resource_root: bool) -> Option<Arc<DeclType>> {
    if flag(schema, "x-kubernetes-int-or-string") {
        return Some(scalar(name, CelType::Dyn, max_string_elements(schema), 1));
    }
    let ty = schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match ty {
        "array" => {
            let items = schema.get("items")?;
            let embedded = flag(items, "x-kubernetes-embedded-resource");
            let elem = decl_type(items, &format!("{name}.@idx"), embedded)?;
            let max = match int(schema, "maxItems") {
                Some(n) => n.max(0),
                None => (MAX_REQUEST_SIZE_BYTES - 2) / (elem.min_serialized_size + 1),
            };
            Some(Arc::new(DeclType {
                name: name.to_string(),
                shape: Shape::List(elem),
                max_elements: max,
                min_serialized_size: 2,
            }))
        }
        "object" => {
            if let Some(add) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                let embedded = flag(add, "x-kubernetes-embedded-resource");
                let value = decl_type(add, &format!("{name}.@elem"), embedded)?;
                let max = match int(schema, "maxProperties") {
                    Some(n) => n.max(0),
                    None => (MAX_REQUEST_SIZE_BYTES - 2) / (value.min_serialized_size + 6),
                };
                return Some(Arc::new(DeclType {
                    name: name.to_string(),
                    shape: Shape::Map(value),
                    max_elements: max,
                    min_serialized_size: 2,
                }));
            }
            Some(object(schema, name, resource_root))
        }
        "string" => Some(match schema.get("format").and_then(Value::as_str) {
            Some("byte") => scalar(
                name,
                CelType::Bytes,
                int(schema, "maxLength").map_or(MAX_REQUEST_SIZE_BYTES - 2, |n| n.max(0)),
                MIN_STRING_SIZE,
            ),
            Some("duration") => scalar(
                name,
                CelType::Duration,
                MAX_DURATION_SIZE_JSON,
                MIN_DURATION_SIZE_JSON,
            ),
            Some("date") => scalar(name, CelType::Timestamp, JSON_DATE_SIZE, JSON_DATE_SIZE),
            Some("date-time") => scalar(
                name,
                CelType::Timestamp,
                MAX_DATETIME_SIZE_JSON,
                MIN_DATETIME_SIZE_JSON,
            ),
            _ => {
                let max = if schema.get("maxLength").is_some() {
                    max_string_elements(schema)
                } else if let Some(values) = schema
                    .get("enum")
                    .and_then(Value::as_array)
                    .filter(|e| !e.is_empty())
                {
                    values
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|s| s.len() as i64)
                        .max()
                        .unwrap_or(0)
                } else {
                    MAX_REQUEST_SIZE_BYTES - 2
                };
                scalar(name, CelType::String, max, MIN_STRING_SIZE)
            }
        }),
        "boolean" => Some(scalar(name, CelType::Bool, 0, MIN_BOOL_SIZE)),
        "number" => Some(scalar(name, CelType::Double, 0, MIN_NUMBER_SIZE)),
        "integer" => Some(scalar(name, CelType::Int, 0, MIN_NUMBER_SIZE)),
        _ => None,
    }
}

fn object(schema: &Value, name: &str, resource_root: bool) -> Arc<DeclType> {
    let empty = serde_json::Map::new();
    let mut properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty)
        .clone();
    if resource_root {
        // apiVersion, kind, metadata.name and metadata.generateName are always visible at the
        // root of a resource, whatever the schema says of metadata.
        let string = serde_json::json!({"type": "string"});
        properties.insert("apiVersion".into(), string.clone());
        properties.insert("kind".into(), string.clone());
        properties.insert(
            "metadata".into(),
            serde_json::json!({"type": "object", "properties": {
                "name": string, "generateName": string
            }}),
        );
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut fields = BTreeMap::new();
    // An object serializes to at least `{}`, plus every required field without a default.
    let mut min = 2;
    for (prop, prop_schema) in &properties {
        let embedded = flag(prop_schema, "x-kubernetes-embedded-resource");
        let Some(field) = decl_type(prop_schema, &format!("{name}.{prop}"), embedded) else {
            continue;
        };
        if required.contains(&prop.as_str()) && prop_schema.get("default").is_none() {
            min += prop.len() as i64 + field.min_serialized_size + 4;
        }
        if let Some(escaped) = escape(prop) {
            fields.insert(escaped, field);
        }
    }
    Arc::new(DeclType {
        name: name.to_string(),
        shape: Shape::Object(fields),
        max_elements: 0,
        min_serialized_size: min,
    })
}

/// How many elements a schema node multiplies the evaluations of rules below it by: a map's
/// `maxProperties`, an array's `maxItems` (`None`: unbounded), 1 for anything else.
pub fn max_elements_factor(schema: &Value) -> Option<u64> {
    match schema.get("type").and_then(Value::as_str) {
        Some("object") if schema.get("additionalProperties").is_some() => {
            int(schema, "maxProperties").map(|n| n.max(0) as u64)
        }
        Some("array") => int(schema, "maxItems").map(|n| n.max(0) as u64),
        _ => Some(1),
    }
}
