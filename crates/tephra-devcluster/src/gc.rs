//! The garbage collector's part: when an object is removed, the objects that name it in their
//! `ownerReferences` are deleted too (background propagation, Kubernetes' default), and theirs
//! in turn. Events, Nodes and Leases own nothing here, so removing them looks no further; a pod
//! owns at most the PodGroup Volcano's PodGroup controller made for it, which it names in
//! `scheduling.k8s.io/group-name` (looked up directly, so that deleting pods stays cheap).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::api::{ApiServer, DeleteOpts};
use crate::resource::{Builtin, ResourceDef};
use crate::store::Obj;

impl ApiServer {
    /// Deletes the dependents of `owner`, which was just removed.
    pub(crate) fn collect_dependents(&self, owner: &Obj, builtin: Option<Builtin>) {
        if matches!(
            builtin,
            Some(Builtin::Event | Builtin::EventsV1 | Builtin::Node | Builtin::Lease)
        ) {
            return;
        }
        let uid = owner.uid().to_string();
        if uid.is_empty() {
            return;
        }
        if builtin == Some(Builtin::Pod) {
            self.collect_pods_podgroup(owner, &uid);
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

    /// An object created naming owners none of which exists (by uid) is deleted at once, as the
    /// garbage collector deletes a dependent whose owners are all absent (an owner deleted while
    /// its dependent was being written). An owner of a kind this server does not serve is
    /// taken to exist: a real cluster serves it.
    pub(crate) fn collect_if_ownerless(&self, def: &std::sync::Arc<ResourceDef>, obj: &Obj) {
        let Some(refs) = obj
            .value
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .filter(|r| !r.is_empty())
        else {
            return;
        };
        let namespace = obj
            .value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let registry = self.registry();
        let text = |r: &Value, f: &str| {
            r.get(f)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let some_owner = refs.iter().any(|r| {
            let Some(owner) = registry.by_kind(&text(r, "apiVersion"), &text(r, "kind")) else {
                return true;
            };
            let ns = if owner.namespaced { namespace } else { "" };
            self.get(&owner, &(ns.to_string(), text(r, "name")))
                .is_some_and(|o| o.uid() == text(r, "uid"))
        });
        if !some_owner {
            let _ = self.delete(def, &obj.key(), &DeleteOpts::default());
        }
    }

    /// The PodGroup a removed pod names, if the pod owns it.
    fn collect_pods_podgroup(&self, pod: &Obj, uid: &str) {
        let Some(group) = pod
            .value
            .pointer("/metadata/annotations/scheduling.k8s.io~1group-name")
            .and_then(Value::as_str)
        else {
            return;
        };
        let Some(def) = self
            .registry()
            .by_kind("scheduling.volcano.sh/v1beta1", "PodGroup")
        else {
            return;
        };
        let namespace = pod
            .value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let key = (namespace.to_string(), group.to_string());
        let Some(pg) = self.get(&def, &key) else {
            return;
        };
        let owned = pg
            .value
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| {
                refs.iter()
                    .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
            });
        if owned {
            let _ = self.delete(&def, &key, &DeleteOpts::default());
        }
    }
}
