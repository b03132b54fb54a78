//! What the server serves: one [`ResourceDef`] per group, version and resource, for the built-in
//! kinds and for every served version of every applied CustomResourceDefinition, with what
//! discovery, printing and admission need to know about it. The CRDs' resources are made in
//! `crd.rs`; `registry.rs` indexes them all.

use std::sync::Arc;

use serde_json::Value;
use tephra_api::admission::Admission;

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
    /// `scheduling.k8s.io/v1beta1` PodGroup (the Workload API), served as a kube-apiserver
    /// 1.37 with that version and the GenericWorkload gate on serves it.
    KubePodGroup,
    /// `scheduling.k8s.io/v1beta1` Workload (its pod group templates; no status).
    Workload,
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

pub(crate) fn builtins() -> Vec<Arc<ResourceDef>> {
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
            "scheduling.k8s.io",
            "v1beta1",
            "PodGroup",
            "podgroups",
            true,
            &[],
            true,
            B::KubePodGroup,
        ),
        builtin(
            "scheduling.k8s.io",
            "v1beta1",
            "Workload",
            "workloads",
            true,
            &[],
            false,
            B::Workload,
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
