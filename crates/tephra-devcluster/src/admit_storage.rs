//! What the API server does to a new storage object: a claim without a class gets the default
//! StorageClass (the `DefaultStorageClass` admission plugin), claims and volumes start
//! `Pending`, and the defaults of each kind's fields (a volume's reclaim policy and mode, a
//! class's binding mode and reclaim policy).

use serde_json::{Value, json};

use crate::resource::Builtin;

/// The annotation that marks the default StorageClass.
pub const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// Defaults of a new storage object of `kind`; `default_class` is the name of the default
/// StorageClass, if there is one.
pub fn default_storage(kind: Builtin, obj: &mut Value, default_class: Option<String>) {
    let set = |obj: &mut Value, ptr: &str, key: &str, v: Value| {
        if let Some(m) = obj.pointer_mut(ptr).and_then(Value::as_object_mut)
            && !m.contains_key(key)
        {
            m.insert(key.to_string(), v);
        }
    };
    if !obj.get("spec").is_some_and(Value::is_object) && kind != Builtin::StorageClass {
        obj["spec"] = json!({});
    }
    match kind {
        Builtin::PersistentVolumeClaim => {
            let named = obj.pointer("/spec/storageClassName").is_some()
                || obj
                    .pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
                    .is_some();
            if !named && let Some(c) = default_class {
                obj["spec"]["storageClassName"] = json!(c);
            }
            set(obj, "/spec", "volumeMode", json!("Filesystem"));
            obj["status"] = json!({"phase": "Pending"});
        }
        Builtin::PersistentVolume => {
            set(
                obj,
                "/spec",
                "persistentVolumeReclaimPolicy",
                json!("Retain"),
            );
            set(obj, "/spec", "volumeMode", json!("Filesystem"));
            obj["status"] = json!({"phase": "Pending"});
        }
        Builtin::StorageClass => {
            set(obj, "", "reclaimPolicy", json!("Delete"));
            set(obj, "", "volumeBindingMode", json!("Immediate"));
        }
        _ => {}
    }
}

/// Whether a StorageClass is marked the default.
pub fn is_default_class(class: &Value) -> bool {
    class
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(DEFAULT_CLASS))
        .and_then(Value::as_str)
        == Some("true")
}
