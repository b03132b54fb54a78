//! The `core/v1` Binding that places a pod on a node, as a scheduler posts it to the pod's
//! `binding` subresource. Both ways tephra binds (the scheduler's executor and the extender's
//! bind verb) send this one body.

use k8s_openapi::api::core::v1::{Binding, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The Binding of pod `namespace/name` to `node`.
pub fn pod_binding(namespace: &str, name: &str, node: &str) -> Binding {
    Binding {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..ObjectReference::default()
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_binding_names_the_pod_and_targets_its_node() {
        let body = serde_json::to_value(pod_binding("ns", "p-0", "n1")).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": "p-0", "namespace": "ns"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
            })
        );
    }
}
