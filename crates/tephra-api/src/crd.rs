//! CRD generation: the derived CRDs, tidied so that they stay small enough for
//! `kubectl apply` and read well in `kubectl explain`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// Errors from CRD generation.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The derived CRD could not round-trip through JSON.
    #[error("CRD {name}: {source}")]
    Json {
        /// CRD name.
        name: String,
        /// Cause.
        source: serde_json::Error,
    },
}

/// Embedded Kubernetes types whose long upstream descriptions are dropped: `kubectl explain` on
/// the core types already documents them, and keeping them would push the Job CRD past the
/// 256 KiB that client-side `kubectl apply` can store. Volcano ships its Job CRD the same way.
const EMBEDDED_CORE_TYPES: &[&[&str]] = &[
    &["spec", "tasks", "template"],
    &["spec", "volumes", "volumeClaim"],
    // A CronJob's Job template embeds a Job's spec.
    &["spec", "jobTemplate", "spec", "tasks", "template"],
    &["spec", "jobTemplate", "spec", "volumes", "volumeClaim"],
    &["spec", "jobTemplate", "metadata"],
];

/// The most resource names one resource list may hold.
const MAX_RESOURCE_NAMES: u64 = 64;

/// A Kubernetes quantity without a sign (Volcano's CRD pattern, which allows a leading `+` or
/// `-`, narrowed to what a resource amount can be).
pub const QUANTITY_PATTERN: &str = r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// The longest quantity string accepted.
const MAX_QUANTITY_LENGTH: u64 = 64;

const QUANTITY_DESCRIPTION: &str =
    "A Kubernetes quantity, such as 500m, 2, 1.5 or 128Gi (an integer or a string, not negative).";

/// Tidies a derived CRD: a description on the root object, a short description on every
/// quantity, descriptions of embedded core types dropped, and doc-comment line wraps unfolded.
pub fn tidy(
    crd: CustomResourceDefinition,
    root_doc: &str,
) -> Result<CustomResourceDefinition, CrdError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let json_err = |source| CrdError::Json {
        name: name.clone(),
        source,
    };
    let mut value = serde_json::to_value(&crd).map_err(json_err)?;
    if let Some(versions) = value
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    {
        for version in versions {
            let Some(root) = version.pointer_mut("/schema/openAPIV3Schema") else {
                continue;
            };
            if let Some(obj) = root.as_object_mut() {
                obj.insert("description".into(), Value::String(root_doc.to_string()));
            }
            if let Some(spec) = root
                .pointer_mut("/properties/spec")
                .and_then(Value::as_object_mut)
            {
                spec.insert(
                    "description".into(),
                    Value::String("Desired state, as written by the user.".into()),
                );
            }
            if let Some(status) = root
                .pointer_mut("/properties/status")
                .and_then(Value::as_object_mut)
            {
                status.insert(
                    "description".into(),
                    Value::String("Observed state, as written by tephra.".into()),
                );
            }
            tidy_node(root);
            for path in EMBEDDED_CORE_TYPES {
                if let Some(node) = schema_at(root, path) {
                    strip_descriptions(node);
                }
            }
        }
    }
    serde_json::from_value(value).map_err(json_err)
}

/// Lets objects of the CRD leave out `spec`, which then takes its defaults (Volcano's Queue and
/// PodGroup work that way).
pub fn make_spec_optional(crd: &mut CustomResourceDefinition) {
    for version in &mut crd.spec.versions {
        if let Some(root) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            && let Some(required) = root.required.as_mut()
        {
            required.retain(|field| field != "spec");
            if required.is_empty() {
                root.required = None;
            }
        }
    }
}

/// Moves the properties of `spec` to the top level of the schema and drops `spec`, for a kind
/// whose fields sit beside `metadata` (the Command).
pub fn hoist_spec(crd: &mut CustomResourceDefinition) {
    for version in &mut crd.spec.versions {
        let Some(root) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        let Some(props) = root.properties.as_mut() else {
            continue;
        };
        if let Some(spec) = props.remove("spec") {
            props.extend(spec.properties.unwrap_or_default());
        }
        if let Some(required) = root.required.as_mut() {
            required.retain(|f| f != "spec");
            if required.is_empty() {
                root.required = None;
            }
        }
        version.subresources = None;
    }
}

/// Serves `status` as part of the main resource instead of a subresource.
pub fn drop_status_subresource(crd: &mut CustomResourceDefinition) {
    for version in &mut crd.spec.versions {
        if let Some(sub) = version.subresources.as_mut() {
            sub.status = None;
            if sub.scale.is_none() {
                version.subresources = None;
            }
        }
    }
}

/// Follows `properties` (and `items` for arrays) down a path of field names.
fn schema_at<'a>(mut node: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    for field in path {
        if node.get("type").and_then(Value::as_str) == Some("array") {
            node = node.get_mut("items")?;
        }
        node = node.get_mut("properties")?.get_mut(*field)?;
    }
    Some(node)
}

fn strip_descriptions(node: &mut Value) {
    match node {
        Value::Object(map) => {
            map.remove("description");
            for (key, child) in map.iter_mut() {
                // Field names under `properties` are not schema keywords.
                if key == "properties" {
                    if let Value::Object(props) = child {
                        props.values_mut().for_each(strip_descriptions);
                    }
                } else {
                    strip_descriptions(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

fn tidy_node(node: &mut Value) {
    match node {
        Value::Object(map) => {
            let is_quantity = map
                .get("description")
                .and_then(Value::as_str)
                .is_some_and(|d| d.starts_with("Quantity is a fixed-point"));
            if is_quantity {
                map.insert(
                    "description".into(),
                    Value::String(QUANTITY_DESCRIPTION.into()),
                );
                // Volcano's quantity pattern, without a sign: no resource quantity tephra reads
                // may be negative. The length bound keeps the cost of CEL rules that parse
                // quantities within the API server's budget.
                map.insert("pattern".into(), Value::String(QUANTITY_PATTERN.into()));
                map.insert("minimum".into(), Value::from(0));
                map.insert("maxLength".into(), Value::from(MAX_QUANTITY_LENGTH));
            } else if let Some(Value::String(desc)) = map.get_mut("description") {
                *desc = unwrap_lines(desc);
            }
            let is_resource_list = map.get("type").and_then(Value::as_str) == Some("object")
                && map
                    .get("additionalProperties")
                    .and_then(|a| a.get("x-kubernetes-int-or-string"))
                    .and_then(Value::as_bool)
                    == Some(true);
            if is_resource_list && !map.contains_key("maxProperties") {
                // Bounds the cost estimate of CEL rules that iterate resource lists.
                map.insert("maxProperties".into(), Value::from(MAX_RESOURCE_NAMES));
            }
            map.values_mut().for_each(tidy_node);
        }
        Value::Array(items) => items.iter_mut().for_each(tidy_node),
        _ => {}
    }
}

/// Joins hard-wrapped doc-comment lines into paragraphs; blank lines still separate paragraphs.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|para| {
            para.split('\n')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwrap_lines_keeps_paragraphs_and_joins_wrapped_lines() {
        assert_eq!(unwrap_lines("a b\nc d\n\ne f\ng"), "a b c d\n\ne f g");
    }

    #[test]
    fn tidy_replaces_quantity_descriptions_and_strips_embedded_core_docs() {
        let crds = crate::crds().expect("crds generate");
        for (_, crd) in &crds {
            let text = serde_json::to_string(crd).expect("serializes");
            assert!(
                !text.contains("Quantity is a fixed-point"),
                "{:?}",
                crd.metadata.name
            );
            assert!(
                !text.contains("Auto-generated derived type"),
                "{:?}",
                crd.metadata.name
            );
        }
        let job = &crds[0].1;
        let text = serde_json::to_string(job).expect("serializes");
        assert!(!text.contains("List of initialization containers"));
        assert!(text.contains("The roles of the job"));
    }
}
