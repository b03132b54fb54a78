//! A CustomResourceDefinition as the server takes it: checked as kube-apiserver checks one
//! (names, versions, the CEL rules it would refuse), and the [`ResourceDef`]s of its served
//! versions, with their printer columns and compiled admission. Checks are cached per spec.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;
use tephra_api::admission::Admission;

use crate::resource::{PrinterColumn, ResourceDef};
use crate::status::{ApiError, Cause};

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

/// The strings of the array at a JSON pointer (none when absent).
pub(crate) fn strings_at(v: &Value, ptr: &str) -> Vec<String> {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

/// What checking one CRD spec found, kept per spec: the CEL cost estimate and compiling the
/// admission are the slow part of starting a server, and every test server installs the same
/// CRDs.
struct Checked {
    result: Result<CustomResourceDefinition, ApiError>,
    admission: std::sync::OnceLock<Result<Arc<Admission>, String>>,
}

fn checked(crd: &Value) -> Arc<Checked> {
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Checked>>>> = OnceLock::new();
    let key = serde_json::to_string(&serde_json::json!([
        crd.get("metadata").and_then(|m| m.get("name")),
        crd.get("spec")
    ]))
    .unwrap_or_default();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(hit) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return hit.clone();
    }
    let entry = Arc::new(Checked {
        result: check_crd_uncached(crd),
        admission: std::sync::OnceLock::new(),
    });
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    if map.len() > 256 {
        map.clear();
    }
    map.insert(key, entry.clone());
    entry
}

/// Checks a CRD as the API server does before it serves it: names, versions, and the CEL rules
/// kube-apiserver 1.34 would refuse (`tephra_api::celcheck`), with its messages.
pub fn check_crd(crd: &Value) -> Result<CustomResourceDefinition, ApiError> {
    checked(crd).result.clone()
}

fn check_crd_uncached(crd: &Value) -> Result<CustomResourceDefinition, ApiError> {
    let name = str_at(crd, "/metadata/name").to_string();
    let invalid = |causes: Vec<Cause>| {
        ApiError::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            &name,
            causes,
        )
    };
    let cause = |field: &str, message: String| Cause {
        reason: "FieldValueInvalid".into(),
        message,
        field: field.into(),
    };
    let typed: CustomResourceDefinition = serde_json::from_value(crd.clone())
        .map_err(|e| invalid(vec![cause("spec", format!("Invalid value: {e}"))]))?;
    let mut causes = Vec::new();
    let spec = &typed.spec;
    if spec.group.is_empty() {
        causes.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value".into(),
            field: "spec.group".into(),
        });
    }
    if spec.names.plural.is_empty() {
        causes.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value".into(),
            field: "spec.names.plural".into(),
        });
    }
    let expected = format!("{}.{}", spec.names.plural, spec.group);
    if name != expected {
        causes.push(cause(
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if spec.versions.is_empty() {
        causes.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "must have exactly one version marked as storage version".into(),
            field: "spec.versions".into(),
        });
    } else if spec.versions.iter().filter(|v| v.storage).count() != 1 {
        causes.push(cause(
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    if !matches!(spec.scope.as_str(), "Namespaced" | "Cluster") {
        causes.push(Cause {
            reason: "FieldValueNotSupported".into(),
            message: format!(
                "Unsupported value: {:?}: supported values: \"Cluster\", \"Namespaced\"",
                spec.scope
            ),
            field: "spec.scope".into(),
        });
    }
    for (path, report) in tephra_api::celcheck::check_crd(&typed) {
        for problem in report.problems(&path) {
            let (field, message) = problem
                .split_once(": ")
                .map_or((String::new(), problem.clone()), |(f, m)| {
                    (f.to_string(), m.to_string())
                });
            causes.push(Cause {
                reason: if message.starts_with("Forbidden") {
                    "FieldValueForbidden".into()
                } else {
                    "FieldValueInvalid".into()
                },
                message,
                field,
            });
        }
    }
    if causes.is_empty() {
        Ok(typed)
    } else {
        Err(invalid(causes))
    }
}

pub(crate) fn defs_from_crd(crd: &Value) -> Result<Vec<Arc<ResourceDef>>, ApiError> {
    let entry = checked(crd);
    let typed = entry.result.clone()?;
    let admission = entry
        .admission
        .get_or_init(|| {
            Admission::from_crds(std::slice::from_ref(&typed))
                .map(Arc::new)
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|e| ApiError::internal(format!("building admission: {e}")))?;
    let group = str_at(crd, "/spec/group").to_string();
    let kind = str_at(crd, "/spec/names/kind").to_string();
    let plural = str_at(crd, "/spec/names/plural").to_string();
    let singular = match str_at(crd, "/spec/names/singular") {
        "" => kind.to_lowercase(),
        s => s.to_string(),
    };
    let namespaced = str_at(crd, "/spec/scope") == "Namespaced";
    let mut defs = Vec::new();
    for version in crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if version.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let columns = version
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .map(|c| {
                        let path = str_at(c, "/jsonPath").to_string();
                        PrinterColumn {
                            name: str_at(c, "/name").to_string(),
                            type_: str_at(c, "/type").to_string(),
                            format: str_at(c, "/format").to_string(),
                            description: match str_at(c, "/description") {
                                "" => format!(
                                    "Custom resource definition column (in JSONPath format): {path}"
                                ),
                                d => d.to_string(),
                            },
                            priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                            json_path: path,
                        }
                    })
                    .collect()
            })
            .unwrap_or_else(|| {
                vec![PrinterColumn {
                    name: "Age".into(),
                    type_: "date".into(),
                    format: String::new(),
                    description: "CreationTimestamp is a timestamp representing the server time \
                                  when this object was created."
                        .into(),
                    priority: 0,
                    json_path: ".metadata.creationTimestamp".into(),
                }]
            });
        defs.push(Arc::new(ResourceDef {
            group: group.clone(),
            version: str_at(version, "/name").to_string(),
            kind: kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            namespaced,
            short_names: strings_at(crd, "/spec/names/shortNames"),
            categories: strings_at(crd, "/spec/names/categories"),
            status: version.pointer("/subresources/status").is_some(),
            builtin: None,
            columns,
            schema: version.pointer("/schema/openAPIV3Schema").cloned(),
            admission: Some(admission.clone()),
        }));
    }
    Ok(defs)
}
