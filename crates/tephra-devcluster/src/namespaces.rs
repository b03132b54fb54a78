//! A namespace's deletion, as kube-apiserver's namespace registry and kube-controller-manager's
//! namespace controller do it: a delete marks the namespace (`deletionTimestamp`, phase
//! `Terminating`) and answers it; the controller deletes every object in it (honouring their
//! finalizers and grace periods), reports what is left in five status conditions (a status
//! write by `kube-controller-manager`), and, once nothing is left, removes its `kubernetes`
//! finalizer (`spec.finalizers`), which removes the namespace unless finalizers of its own
//! still hold it. While it terminates, nothing new may be created in it. The devcluster runs the
//! controller at once, in the request that deleted the namespace, and again whenever an object
//! of a terminating namespace goes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::{ApiServer, DeleteOpts, Scope, WriteOpts};
use crate::deletion::{spec_finalized, terminating};
use crate::resource::{Builtin, ResourceDef};
use crate::status::ApiError;
use crate::store::Key;
use crate::time;

/// The finalizer the namespace controller holds a namespace with (`spec.finalizers`).
pub const KUBERNETES: &str = "kubernetes";

/// The controller's conditions, in the order it sets them, with the reason and message of
/// their `False` (all well) variant.
const CONDITIONS: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

/// What is left in a namespace: objects per resource, and per finalizer.
#[derive(Default)]
struct Remaining {
    resources: BTreeMap<String, usize>,
    finalizers: BTreeMap<String, usize>,
}

impl ApiServer {
    /// The namespace registry's delete: marks the namespace terminating (with the garbage
    /// collector's finalizer its propagation policy asks for) and answers it; one marked
    /// already is removed only when neither its controller nor its finalizers hold it.
    pub(crate) fn delete_namespace(
        &self,
        def: &Arc<ResourceDef>,
        key: &Key,
        opts: &DeleteOpts,
    ) -> Result<crate::api::Deleted, ApiError> {
        let cur = self
            .get(def, key)
            .ok_or_else(|| ApiError::not_found("", "namespaces", &key.1))?;
        // The NamespaceLifecycle admission plugin keeps the system's namespaces.
        if matches!(key.1.as_str(), "default" | "kube-system" | "kube-public") {
            return Err(ApiError::forbidden(
                "",
                "namespaces",
                &key.1,
                "this namespace may not be deleted",
            ));
        }
        let conflict = |why: String| ApiError::conflict("", "namespaces", &key.1, &why);
        if let Some(uid) = &opts.uid
            && uid != cur.uid()
        {
            return Err(conflict(format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                cur.uid()
            )));
        }
        if let Some(rv) = &opts.resource_version
            && *rv != cur.rv.to_string()
        {
            return Err(conflict(format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion \
                 in object meta: {}",
                cur.rv
            )));
        }
        if terminating(&cur.value) && !spec_finalized(&cur.value) {
            return Ok(crate::api::Deleted {
                obj: cur,
                removed: false,
            });
        }
        if terminating(&cur.value) {
            return self.delete_plain(def, key, opts);
        }
        // The registry writes the mark to storage itself (past the update strategy, which
        // would keep the deletion state as it was).
        let mut ns = cur.value.clone();
        ns["metadata"]["deletionTimestamp"] = json!(time::now_rfc3339());
        if !ns.get("status").is_some_and(Value::is_object) {
            ns["status"] = json!({});
        }
        ns["status"]["phase"] = json!("Terminating");
        let before = crate::api::string_list(&ns, "/metadata/finalizers");
        let after = crate::api::gc_finalizers(def, &before, opts.propagation.as_deref());
        if after != before {
            ns["metadata"]["finalizers"] = json!(after);
        }
        if opts.dry_run {
            return Ok(crate::api::Deleted {
                obj: crate::store::Stored::detached(ns),
                removed: false,
            });
        }
        let stored = match self.store.replace(&def.storage_key(), key, cur.rv, ns) {
            Ok(o) => o,
            Err(crate::store::StoreError::Conflict) => {
                return self.delete_namespace(def, key, opts);
            }
            Err(crate::store::StoreError::NotFound) => {
                return Err(ApiError::not_found("", "namespaces", &key.1));
            }
            Err(crate::store::StoreError::AlreadyExists) => {
                return Err(ApiError::internal(
                    "the namespace changed while it was deleted",
                ));
            }
        };
        let written = crate::api::Deleted {
            obj: stored,
            removed: false,
        };
        if !opts.dry_run {
            for f in [crate::deletion::ORPHAN, crate::deletion::FOREGROUND] {
                if written
                    .obj
                    .value
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_some_and(|fs| fs.iter().any(|x| x.as_str() == Some(f)))
                {
                    self.collect_for_policy(def, &written.obj, f);
                }
            }
            self.finalize_namespace(&key.1);
        }
        Ok(crate::api::Deleted {
            obj: written.obj,
            removed: false,
        })
    }

    /// The namespace controller's pass over a terminating namespace: deletes what is in it,
    /// reports what is left, and finalizes the namespace once it is empty.
    pub(crate) fn finalize_namespace(&self, name: &str) {
        let def = self.builtin(Builtin::Namespace);
        let key = (String::new(), name.to_string());
        let Some(ns) = self.get(&def, &key) else {
            return;
        };
        if !terminating(&ns.value) || spec_finalized(&ns.value) {
            return;
        }
        let remaining = self.delete_content(name);
        self.report_content(&def, &key, &remaining);
        if !remaining.resources.is_empty() {
            return;
        }
        let _ = self.update(&def, &key, Scope::All, &WriteOpts::default(), &mut |cur| {
            let mut ns = cur.clone();
            crate::gc::remove_finalizer(&mut ns, "spec", KUBERNETES);
            Ok(ns)
        });
    }

    /// Deletes every object of the namespace (in the background, as the controller does);
    /// what is left afterwards.
    fn delete_content(&self, namespace: &str) -> Remaining {
        let mut remaining = Remaining::default();
        let registry = self.registry();
        let mut seen = BTreeSet::new();
        for def in registry.resources().iter().filter(|d| d.namespaced) {
            let kind = def.storage_key();
            if !seen.insert(kind.clone()) {
                continue;
            }
            let (objs, _) = self.store.list(&kind, Some(namespace), None);
            for o in objs {
                let opts = DeleteOpts {
                    propagation: Some("Background".into()),
                    ..DeleteOpts::default()
                };
                let _ = self.delete(def, &o.key(), &opts);
            }
            let (left, _) = self.store.list(&kind, Some(namespace), None);
            if left.is_empty() {
                continue;
            }
            let label = format!("{}.{}", def.plural, def.group);
            remaining.resources.insert(label, left.len());
            for o in &left {
                for f in o
                    .value
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    *remaining.finalizers.entry(f.to_string()).or_default() += 1;
                }
            }
        }
        remaining
    }

    /// The controller's status conditions for what is left, written when they change.
    fn report_content(&self, def: &Arc<ResourceDef>, key: &Key, remaining: &Remaining) {
        let now = time::now_rfc3339();
        let wanted: Vec<Value> = CONDITIONS
            .iter()
            .map(|(t, reason, message)| match *t {
                "NamespaceContentRemaining" if !remaining.resources.is_empty() => {
                    let what: Vec<String> = remaining
                        .resources
                        .iter()
                        .map(|(r, n)| format!("{r} has {n} resource instances"))
                        .collect();
                    json!({"type": t, "status": "True", "lastTransitionTime": now,
                        "reason": "SomeResourcesRemain",
                        "message": format!("Some resources are remaining: {}", what.join(", "))})
                }
                "NamespaceFinalizersRemaining" if !remaining.finalizers.is_empty() => {
                    let what: Vec<String> = remaining
                        .finalizers
                        .iter()
                        .map(|(f, n)| format!("{f} in {n} resource instances"))
                        .collect();
                    json!({"type": t, "status": "True", "lastTransitionTime": now,
                    "reason": "SomeFinalizersRemain",
                    "message": format!(
                        "Some content in the namespace has finalizers remaining: {}",
                        what.join(", ")
                    )})
                }
                _ => json!({"type": t, "status": "False", "lastTransitionTime": now,
                    "reason": reason, "message": message}),
            })
            .collect();
        let opts = WriteOpts {
            manager: Some("kube-controller-manager".into()),
            ..WriteOpts::default()
        };
        let _ = self.update(def, key, Scope::Status, &opts, &mut |cur| {
            let mut ns = cur.clone();
            let mut conditions: Vec<Value> = ns
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for w in &wanted {
                match conditions
                    .iter_mut()
                    .find(|c| c.get("type") == w.get("type"))
                {
                    None => conditions.push(w.clone()),
                    Some(c) => {
                        let same = |f: &str| c.get(f) == w.get(f);
                        if !(same("status") && same("reason") && same("message")) {
                            let transition = if same("status") {
                                c.get("lastTransitionTime").cloned()
                            } else {
                                w.get("lastTransitionTime").cloned()
                            };
                            *c = w.clone();
                            if let Some(t) = transition {
                                c["lastTransitionTime"] = t;
                            }
                        }
                    }
                }
            }
            ns["status"]["conditions"] = json!(conditions);
            Ok(ns)
        });
    }
}
