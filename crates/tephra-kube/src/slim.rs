//! Pods and Nodes as the watchers decode them: every field but `metadata.managedFields`.
//!
//! Nothing in tephra reads managedFields, yet a plain `Pod` decodes each entry's `fieldsV1`
//! into a JSON tree (a map and a string for every field some manager set), for every pod
//! listed and every change watched: on the bench's pods that is most of what decoding a pod
//! allocates. [`Watched`] decodes the same JSON with managedFields skipped unread, and holds
//! the object as k8s-openapi's type, so everything after the watcher is unchanged.
//! (`cargo bench -p tephra-kube --bench decode` measures both decoders on a pod of each kind.)

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};

/// A watched object of kind `K` (a [`Pod`](k8s_openapi::api::core::v1::Pod) or a
/// [`Node`](k8s_openapi::api::core::v1::Node)), decoded without its managedFields (always
/// `None` here). An `Api<Watched<K>>` lists and watches what an `Api<K>` does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Watched<K>(pub K);

impl<K> Watched<K> {
    /// The object.
    pub fn into_inner(self) -> K {
        self.0
    }
}

/// A kind whose spec and status decode as k8s-openapi's do, with its metadata decoded by
/// [`Meta`].
pub trait Slim: k8s_openapi::Resource + k8s_openapi::Metadata<Ty = ObjectMeta> + Sized {
    /// The kind's `spec`.
    type Spec: for<'de> Deserialize<'de>;
    /// The kind's `status`.
    type Status: for<'de> Deserialize<'de>;
    /// The object made of its parts.
    fn assemble(
        metadata: ObjectMeta,
        spec: Option<Self::Spec>,
        status: Option<Self::Status>,
    ) -> Self;
}

/// `Slim` for a kind made of `metadata`, `spec` and `status`.
macro_rules! slim {
    ($kind:ty, $spec:ty, $status:ty) => {
        impl Slim for $kind {
            type Spec = $spec;
            type Status = $status;
            fn assemble(
                metadata: ObjectMeta,
                spec: Option<$spec>,
                status: Option<$status>,
            ) -> Self {
                Self {
                    metadata,
                    spec,
                    status,
                }
            }
        }
    };
}

slim!(
    k8s_openapi::api::core::v1::Pod,
    k8s_openapi::api::core::v1::PodSpec,
    k8s_openapi::api::core::v1::PodStatus
);
slim!(
    k8s_openapi::api::core::v1::Node,
    k8s_openapi::api::core::v1::NodeSpec,
    k8s_openapi::api::core::v1::NodeStatus
);

impl<K: Slim> k8s_openapi::Resource for Watched<K> {
    const API_VERSION: &'static str = K::API_VERSION;
    const GROUP: &'static str = K::GROUP;
    const KIND: &'static str = K::KIND;
    const VERSION: &'static str = K::VERSION;
    const URL_PATH_SEGMENT: &'static str = K::URL_PATH_SEGMENT;
    type Scope = K::Scope;
}

impl<K: Slim> k8s_openapi::Metadata for Watched<K> {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        self.0.metadata()
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        self.0.metadata_mut()
    }
}

impl<'de, K: Slim> Deserialize<'de> for Watched<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // `apiVersion` and `kind` are not checked: the watch's URL chose them.
        #[derive(Deserialize)]
        #[serde(bound = "")]
        struct Wire<K: Slim> {
            #[serde(default)]
            metadata: Meta,
            #[serde(default = "none")]
            spec: Option<K::Spec>,
            #[serde(default = "none")]
            status: Option<K::Status>,
        }
        fn none<T>() -> Option<T> {
            None
        }
        let w = Wire::<K>::deserialize(d)?;
        Ok(Self(K::assemble(w.metadata.into(), w.spec, w.status)))
    }
}

/// `ObjectMeta` less `managedFields`, which the decoder skips without building it.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Meta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl From<Meta> for ObjectMeta {
    fn from(m: Meta) -> Self {
        // Written out field by field (no `..Default::default()`), so that a field a newer
        // k8s-openapi adds to ObjectMeta fails to compile here instead of going unread.
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::api::core::v1::{Node, Pod};
    use kube::api::WatchEvent;
    use serde_json::json;

    /// Every ObjectMeta field set, managedFields included.
    fn metadata() -> serde_json::Value {
        json!({
            "name": "p", "namespace": "ns", "uid": "u-1", "resourceVersion": "42",
            "generation": 3, "generateName": "p-", "selfLink": "/api/v1/x",
            "creationTimestamp": "2026-12-01T10:00:00Z",
            "deletionTimestamp": "2026-12-01T11:00:00Z", "deletionGracePeriodSeconds": 30,
            "finalizers": ["f/one"],
            "labels": {"a": "1"}, "annotations": {"scheduling.k8s.io/group-name": "g"},
            "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                "name": "j", "uid": "u-0", "controller": true}],
            "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:a": {}}}}}],
        })
    }

    /// The slim decoder gives what k8s-openapi's does, managedFields aside: a field it named
    /// wrongly would be lost here.
    #[test]
    fn a_watched_pod_or_node_is_the_object_without_its_managed_fields() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": metadata(),
            "spec": {"nodeName": "n1", "schedulerName": "volcano",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Pending"},
        });
        let mut full: Pod = serde_json::from_value(pod.clone()).unwrap();
        assert!(full.metadata.managed_fields.is_some());
        full.metadata.managed_fields = None;
        let slim: Watched<Pod> = serde_json::from_value(pod).unwrap();
        assert_eq!(slim.0, full);

        let node = json!({
            "apiVersion": "v1", "kind": "Node", "metadata": metadata(),
            "spec": {"unschedulable": true}, "status": {"allocatable": {"cpu": "8"}},
        });
        let mut full: Node = serde_json::from_value(node.clone()).unwrap();
        full.metadata.managed_fields = None;
        let slim: Watched<Node> = serde_json::from_value(node).unwrap();
        assert_eq!(slim.into_inner(), full);
    }

    #[test]
    fn a_pod_without_spec_status_or_metadata_decodes_as_k8s_openapi_decodes_it() {
        let bare = json!({"apiVersion": "v1", "kind": "Pod"});
        let full: Pod = serde_json::from_value(bare.clone()).unwrap();
        let slim: Watched<Pod> = serde_json::from_value(bare).unwrap();
        assert_eq!(slim.0, full);
        let nulls = json!({"metadata": {"labels": null}, "spec": null, "status": null});
        let slim: Watched<Pod> = serde_json::from_value(nulls).unwrap();
        assert_eq!(slim.0, Pod::default());
    }

    /// A watch event decodes as kube's watcher decodes it (the `type`/`object` envelope), and
    /// a malformed field is an error, not a default.
    #[test]
    fn watch_events_decode_and_a_malformed_field_is_an_error() {
        let line = json!({"type": "MODIFIED", "object": {"apiVersion": "v1", "kind": "Pod",
            "metadata": metadata(), "spec": {"containers": []}}})
        .to_string();
        match serde_json::from_str::<WatchEvent<Watched<Pod>>>(&line).unwrap() {
            WatchEvent::Modified(p) => {
                assert_eq!(p.0.metadata.name.as_deref(), Some("p"));
                assert_eq!(p.0.metadata.managed_fields, None);
            }
            other => panic!("{other:?}"),
        }
        let bad = json!({"metadata": {"generation": "three"}});
        let e = serde_json::from_value::<Watched<Pod>>(bad).unwrap_err();
        assert!(e.to_string().contains("invalid type"), "{e}");
    }
}
