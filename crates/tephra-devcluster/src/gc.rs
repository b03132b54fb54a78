//! The garbage collector's part: when an object is removed, the objects that name it in their
//! `ownerReferences` are deleted too (background propagation, Kubernetes' default), and theirs
//! in turn. Pods, Events, Nodes and Leases own nothing here, so removing them looks no further.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::api::{ApiServer, DeleteOpts};
use crate::resource::Builtin;
use crate::store::Obj;

impl ApiServer {
    /// Deletes the dependents of `owner`, which was just removed.
    pub(crate) fn collect_dependents(&self, owner: &Obj, builtin: Option<Builtin>) {
        if matches!(
            builtin,
            Some(
                Builtin::Pod | Builtin::Event | Builtin::EventsV1 | Builtin::Node | Builtin::Lease
            )
        ) {
            return;
        }
        let uid = owner.uid().to_string();
        if uid.is_empty() {
            return;
        }
        let namespace = owner
            .value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_string);
        let registry = self.registry();
        let mut seen = BTreeSet::new();
        for def in registry.resources().iter().filter(|d| d.namespaced) {
            let kind = def.storage_key();
            if !seen.insert(kind.clone()) {
                continue;
            }
            let (objs, _) = self.store.list(&kind, namespace.as_deref(), None);
            for o in objs {
                let owned = o
                    .value
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .is_some_and(|refs| {
                        refs.iter()
                            .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid.as_str()))
                    });
                if owned {
                    let _ = self.delete(def, &o.key(), &DeleteOpts::default());
                }
            }
        }
    }
}
