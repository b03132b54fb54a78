//! What the server serves: one [`ResourceDef`] per group, version and resource, for the built-in
//! kinds and for every served version of every applied CustomResourceDefinition, with what
//! discovery, printing and admission need to know about it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;
use tephra_api::admission::Admission;

use crate::status::{ApiError, Cause};

/// The built-in kinds, each with its own rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Builtin {
    Namespace,
    Node,
    Pod,
    Service,
    ConfigMap,
    Secret,
    Event,
    EventsV1,
    Lease,
    PriorityClass,
    Pdb,
    Crd,
    ServiceAccount,
    Deployment,
    Role,
    RoleBinding,
    ClusterRole,
    ClusterRoleBinding,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    CsiNode,
    DeviceClass,
    ResourceSlice,
    ResourceClaim,
    ResourceClaimTemplate,
}

/// A CRD printer column.
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    /// Header.
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: String,
    /// Format hint.
    pub format: String,
    /// Description.
    pub description: String,
    /// 0 always shown, >0 only with `-o wide`.
    pub priority: i64,
    /// JSONPath into the object.
    pub json_path: String,
}

/// One served resource.
#[derive(Clone)]
pub struct ResourceDef {
    /// API group; empty for core.
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name.
    pub plural: String,
    /// Singular resource name.
    pub singular: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names (`po`, `vcjob`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Whether the kind has a `status` subresource.
    pub status: bool,
    /// Which built-in kind, if any.
    pub builtin: Option<Builtin>,
    /// Printer columns (CRDs).
    pub columns: Vec<PrinterColumn>,
    /// The version's structural schema (CRDs).
    pub schema: Option<Value>,
    /// The CRD's admission (schema and CEL rules), shared by its versions.
    pub admission: Option<Arc<Admission>>,
}

impl ResourceDef {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Where objects of this resource are stored (shared by every version).
    pub fn storage_key(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }

    /// `PodList`, `JobList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The verbs of the main resource.
    pub fn verbs(&self) -> Vec<&'static str> {
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }

    /// Whether this is a custom resource (served from a CRD).
    pub fn is_custom(&self) -> bool {
        self.builtin.is_none()
    }
}

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    short: &[&str],
    status: bool,
    which: Builtin,
) -> Arc<ResourceDef> {
    Arc::new(ResourceDef {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: if which == Builtin::Pod || which == Builtin::Service {
            vec!["all".into()]
        } else {
            Vec::new()
        },
        status,
        builtin: Some(which),
        columns: Vec::new(),
        schema: None,
        admission: None,
    })
}

/// The RBAC API group.
pub const RBAC: &str = "rbac.authorization.k8s.io";

fn builtins() -> Vec<Arc<ResourceDef>> {
    use Builtin as B;
    vec![
        builtin(
            "",
            "v1",
            "Namespace",
            "namespaces",
            false,
            &["ns"],
            true,
            B::Namespace,
        ),
        builtin("", "v1", "Node", "nodes", false, &["no"], true, B::Node),
        builtin("", "v1", "Pod", "pods", true, &["po"], true, B::Pod),
        builtin(
            "",
            "v1",
            "Service",
            "services",
            true,
            &["svc"],
            true,
            B::Service,
        ),
        builtin(
            "",
            "v1",
            "ConfigMap",
            "configmaps",
            true,
            &["cm"],
            false,
            B::ConfigMap,
        ),
        builtin("", "v1", "Secret", "secrets", true, &[], false, B::Secret),
        builtin("", "v1", "Event", "events", true, &["ev"], false, B::Event),
        builtin(
            "events.k8s.io",
            "v1",
            "Event",
            "events",
            true,
            &["ev"],
            false,
            B::EventsV1,
        ),
        builtin(
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            true,
            &[],
            false,
            B::Lease,
        ),
        builtin(
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            "priorityclasses",
            false,
            &["pc"],
            false,
            B::PriorityClass,
        ),
        builtin(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            true,
            &["pdb"],
            true,
            B::Pdb,
        ),
        builtin(
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            true,
            &["sa"],
            false,
            B::ServiceAccount,
        ),
        builtin(
            "apps",
            "v1",
            "Deployment",
            "deployments",
            true,
            &["deploy"],
            true,
            B::Deployment,
        ),
        builtin(RBAC, "v1", "Role", "roles", true, &[], false, B::Role),
        builtin(
            RBAC,
            "v1",
            "RoleBinding",
            "rolebindings",
            true,
            &[],
            false,
            B::RoleBinding,
        ),
        builtin(
            RBAC,
            "v1",
            "ClusterRole",
            "clusterroles",
            false,
            &[],
            false,
            B::ClusterRole,
        ),
        builtin(
            RBAC,
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            &[],
            false,
            B::ClusterRoleBinding,
        ),
        builtin(
            "",
            "v1",
            "PersistentVolume",
            "persistentvolumes",
            false,
            &["pv"],
            true,
            B::PersistentVolume,
        ),
        builtin(
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            true,
            &["pvc"],
            true,
            B::PersistentVolumeClaim,
        ),
        builtin(
            "storage.k8s.io",
            "v1",
            "StorageClass",
            "storageclasses",
            false,
            &["sc"],
            false,
            B::StorageClass,
        ),
        builtin(
            "storage.k8s.io",
            "v1",
            "CSINode",
            "csinodes",
            false,
            &[],
            false,
            B::CsiNode,
        ),
        builtin(
            "resource.k8s.io",
            "v1",
            "DeviceClass",
            "deviceclasses",
            false,
            &[],
            false,
            B::DeviceClass,
        ),
        builtin(
            "resource.k8s.io",
            "v1",
            "ResourceSlice",
            "resourceslices",
            false,
            &[],
            false,
            B::ResourceSlice,
        ),
        builtin(
            "resource.k8s.io",
            "v1",
            "ResourceClaim",
            "resourceclaims",
            true,
            &[],
            true,
            B::ResourceClaim,
        ),
        builtin(
            "resource.k8s.io",
            "v1",
            "ResourceClaimTemplate",
            "resourceclaimtemplates",
            true,
            &[],
            false,
            B::ResourceClaimTemplate,
        ),
        builtin(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["crd", "crds"],
            true,
            B::Crd,
        ),
    ]
}

/// Everything served, rebuilt whenever a CRD changes.
#[derive(Clone)]
pub struct Registry {
    resources: Vec<Arc<ResourceDef>>,
    index: HashMap<(String, String, String), Arc<ResourceDef>>,
    /// Per CRD name: its spec and the resources built from it (kept while the spec is unchanged,
    /// so a status write does not recompile CEL rules).
    crds: BTreeMap<String, (Value, Vec<Arc<ResourceDef>>)>,
    /// Built-in API groups not served, as an older Kubernetes does not serve them.
    unserved: Vec<String>,
    /// Every built-in kind, served or not: the in-process controllers find their kinds here
    /// (an unserved kind simply has no objects).
    all_builtins: Vec<Arc<ResourceDef>>,
    /// Bumped on every change; openapi documents are cached against it.
    pub generation: u64,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// The built-in kinds only.
    pub fn new() -> Self {
        Self::without(&[])
    }

    /// The built-in kinds but those of the `unserved` API groups.
    pub fn without(unserved: &[String]) -> Self {
        let mut r = Self {
            resources: Vec::new(),
            index: HashMap::new(),
            crds: BTreeMap::new(),
            unserved: unserved.to_vec(),
            all_builtins: builtins(),
            generation: 0,
        };
        r.reindex();
        r
    }

    fn reindex(&mut self) {
        let mut resources = builtins();
        resources.retain(|r| !self.unserved.contains(&r.group));
        for (_, defs) in self.crds.values() {
            resources.extend(defs.iter().cloned());
        }
        self.index = resources
            .iter()
            .map(|r| {
                (
                    (r.group.clone(), r.version.clone(), r.plural.clone()),
                    r.clone(),
                )
            })
            .collect();
        self.resources = resources;
        self.generation += 1;
    }

    /// A built-in kind, whether it is served or not.
    pub fn builtin(&self, which: Builtin) -> Option<Arc<ResourceDef>> {
        self.all_builtins
            .iter()
            .find(|r| r.builtin == Some(which))
            .cloned()
    }

    /// The resource served at `group/version/plural`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.index
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// The resource of a kind in a group and version.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        self.resources
            .iter()
            .find(|r| r.kind == kind && r.api_version() == api_version)
            .cloned()
    }

    /// Every served resource, built-ins first.
    pub fn resources(&self) -> &[Arc<ResourceDef>] {
        &self.resources
    }

    /// Serves (or re-serves) a CRD's versions. The CRD must have passed [`check_crd`].
    pub fn put_crd(&mut self, crd: &Value) -> Result<(), ApiError> {
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
        if self.crds.get(&name).is_some_and(|(s, _)| *s == spec) {
            return Ok(());
        }
        let defs = defs_from_crd(crd)?;
        self.crds.insert(name, (spec, defs));
        self.reindex();
        Ok(())
    }

    /// Stops serving a CRD's versions.
    pub fn remove_crd(&mut self, name: &str) -> Option<Vec<Arc<ResourceDef>>> {
        let removed = self.crds.remove(name).map(|(_, defs)| defs);
        if removed.is_some() {
            self.reindex();
        }
        removed
    }
}

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

fn defs_from_crd(crd: &Value) -> Result<Vec<Arc<ResourceDef>>, ApiError> {
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
