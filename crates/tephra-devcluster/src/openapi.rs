//! `/openapi/v3`: an index of one document per group version, each with a PATCH operation per
//! kind (the `fieldValidation` parameter tells `kubectl apply` to leave validation to the
//! server) and the kinds' schemas (for `kubectl explain`): the built-in kinds' from
//! k8s-openapi, the custom resources' from their CRDs. Documents are rebuilt when a CRD changes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use k8s_openapi::api;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use crate::registry::Registry;
use crate::resource::{Builtin, ResourceDef};

/// The documents of one registry generation.
pub struct Docs {
    /// The index (`/openapi/v3`).
    pub index: Bytes,
    /// Per `api/v1` or `apis/g/v`: the document.
    pub docs: BTreeMap<String, Bytes>,
}

/// Documents cached per registry generation.
#[derive(Default)]
pub struct Cache {
    slot: Mutex<Option<(u64, Arc<Docs>)>>,
}

impl Cache {
    /// The documents for `reg`, built on first use.
    pub fn get(&self, reg: &Registry) -> Arc<Docs> {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((generation, docs)) = slot.as_ref()
            && *generation == reg.generation
        {
            return docs.clone();
        }
        let docs = Arc::new(build(reg));
        *slot = Some((reg.generation, docs.clone()));
        docs
    }
}

/// `/openapi/v2`: an empty OpenAPI v2 document in protobuf (the only encoding client-go reads).
/// kubectl releases before 1.27 fetch it before `apply` and validate only the kinds it
/// describes; with no kinds described they leave validation to the server, as newer ones do
/// through `/openapi/v3`, and compute patches from their compiled-in types.
pub fn v2_document() -> Bytes {
    // Field 1 (`swagger`), a string: "2.0".
    Bytes::from_static(&[0x0a, 0x03, b'2', b'.', b'0'])
}

fn fnv(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// Registers a built-in kind's schema (and everything it refers to) with `generator`; returns
/// the kind's schema name.
pub fn register_builtin(generator: &mut SchemaGenerator, which: Builtin) -> String {
    macro_rules! reg {
        ($t:ty) => {{
            generator.subschema_for::<$t>();
            <$t as schemars::JsonSchema>::schema_name().into_owned()
        }};
    }
    match which {
        Builtin::Namespace => reg!(api::core::v1::Namespace),
        Builtin::Node => reg!(api::core::v1::Node),
        Builtin::Pod => reg!(api::core::v1::Pod),
        Builtin::Service => reg!(api::core::v1::Service),
        Builtin::ConfigMap => reg!(api::core::v1::ConfigMap),
        Builtin::Secret => reg!(api::core::v1::Secret),
        Builtin::Event => reg!(api::core::v1::Event),
        Builtin::EventsV1 => reg!(api::events::v1::Event),
        Builtin::Lease => reg!(api::coordination::v1::Lease),
        Builtin::PriorityClass => reg!(api::scheduling::v1::PriorityClass),
        Builtin::Pdb => reg!(api::policy::v1::PodDisruptionBudget),
        Builtin::Crd => reg!(CustomResourceDefinition),
        Builtin::ServiceAccount => reg!(api::core::v1::ServiceAccount),
        Builtin::Deployment => reg!(api::apps::v1::Deployment),
        Builtin::Role => reg!(api::rbac::v1::Role),
        Builtin::RoleBinding => reg!(api::rbac::v1::RoleBinding),
        Builtin::ClusterRole => reg!(api::rbac::v1::ClusterRole),
        Builtin::ClusterRoleBinding => reg!(api::rbac::v1::ClusterRoleBinding),
        Builtin::PersistentVolume => reg!(api::core::v1::PersistentVolume),
        Builtin::PersistentVolumeClaim => reg!(api::core::v1::PersistentVolumeClaim),
        Builtin::StorageClass => reg!(api::storage::v1::StorageClass),
        Builtin::CsiNode => reg!(api::storage::v1::CSINode),
        Builtin::DeviceClass => reg!(api::resource::v1::DeviceClass),
        Builtin::ResourceSlice => reg!(api::resource::v1::ResourceSlice),
        Builtin::ResourceClaim => reg!(api::resource::v1::ResourceClaim),
        Builtin::ResourceClaimTemplate => reg!(api::resource::v1::ResourceClaimTemplate),
        Builtin::KubePodGroup => reg!(api::scheduling::v1beta1::PodGroup),
        Builtin::Workload => reg!(api::scheduling::v1beta1::Workload),
    }
}

fn reversed_group(group: &str) -> String {
    group.split('.').rev().collect::<Vec<_>>().join(".")
}

fn patch_op(def: &ResourceDef) -> Value {
    let body = json!({"schema": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}});
    let mut content = Map::new();
    for t in [
        "application/apply-patch+yaml",
        "application/json-patch+json",
        "application/merge-patch+json",
    ] {
        content.insert(t.into(), body.clone());
    }
    let param = |name: &str, ty: &str| json!({"name": name, "in": "query", "schema": {"type": ty}, "uniqueItems": true});
    json!({
        "operationId": format!("patch{}{}", if def.namespaced { "Namespaced" } else { "" }, def.kind),
        "parameters": [param("dryRun", "string"), param("fieldManager", "string"),
                       param("fieldValidation", "string"), param("force", "boolean")],
        "requestBody": {"required": true, "content": content},
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": "patch",
        "x-kubernetes-group-version-kind": {"group": def.group, "version": def.version, "kind": def.kind},
    })
}

fn build(reg: &Registry) -> Docs {
    let mut by_gv: BTreeMap<String, Vec<&Arc<ResourceDef>>> = BTreeMap::new();
    for r in reg.resources() {
        by_gv
            .entry(gv_path(&r.group, &r.version))
            .or_default()
            .push(r);
    }
    let mut docs = BTreeMap::new();
    let mut index = Map::new();
    for (path, defs) in by_gv {
        let mut generator = SchemaGenerator::new(SchemaSettings::openapi3());
        let mut kinds: Vec<(String, &Arc<ResourceDef>)> = Vec::new();
        let mut custom: Vec<(String, Value)> = Vec::new();
        let mut paths = Map::new();
        for def in &defs {
            let name = match def.builtin {
                Some(b) => register_builtin(&mut generator, b),
                None => {
                    generator.subschema_for::<ObjectMeta>();
                    let name = format!(
                        "{}.{}.{}",
                        reversed_group(&def.group),
                        def.version,
                        def.kind
                    );
                    let mut schema = def.schema.clone().unwrap_or(json!({"type": "object"}));
                    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut)
                    {
                        props.insert(
                            "metadata".into(),
                            json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}],
                                   "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}),
                        );
                    }
                    custom.push((name.clone(), schema));
                    name
                }
            };
            kinds.push((name, def));
            let url = if def.namespaced {
                format!("/{path}/namespaces/{{namespace}}/{}/{{name}}", def.plural)
            } else {
                format!("/{path}/{}/{{name}}", def.plural)
            };
            paths.insert(url, json!({"patch": patch_op(def)}));
        }
        let mut schemas = generator.take_definitions(true);
        for (name, schema) in custom {
            schemas.insert(name, schema);
        }
        schemas.insert(
            "io.k8s.apimachinery.pkg.apis.meta.v1.Patch".into(),
            json!({"type": "object", "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."}),
        );
        for (name, def) in kinds {
            if let Some(s) = schemas.get_mut(&name).and_then(Value::as_object_mut) {
                s.insert(
                    "x-kubernetes-group-version-kind".into(),
                    json!([{"group": def.group, "version": def.version, "kind": def.kind}]),
                );
            }
        }
        let doc = json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.32.0"},
            "paths": paths,
            "components": {"schemas": schemas},
        });
        let bytes = Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
        index.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", fnv(&bytes))}),
        );
        docs.insert(path, bytes);
    }
    Docs {
        index: Bytes::from(serde_json::to_vec(&json!({"paths": index})).unwrap_or_default()),
        docs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_version_has_a_document_with_patch_operations() {
        let docs = build(&Registry::new());
        let index: Value = serde_json::from_slice(&docs.index).expect("json");
        assert!(
            index["paths"]["api/v1"]["serverRelativeURL"]
                .as_str()
                .is_some()
        );
        let core: Value = serde_json::from_slice(&docs.docs["api/v1"]).expect("json");
        let pod_patch = &core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert_eq!(pod_patch["x-kubernetes-group-version-kind"]["kind"], "Pod");
        let pod = &core["components"]["schemas"]["io.k8s.api.core.v1.Pod"];
        assert_eq!(pod["x-kubernetes-group-version-kind"][0]["kind"], "Pod");
        assert!(pod["description"].as_str().is_some());
    }
}
