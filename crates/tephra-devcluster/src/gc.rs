//! The garbage collector's part: when an object is removed, each object that names it in its
//! `ownerReferences` is deleted too (background propagation, Kubernetes' default), and theirs
//! in turn, once none of its owners exists; one that still has an owner only loses the
//! references to the absent ones, as kube-controller-manager's garbage collector does. Any
//! object may own any other; the store counts the references to each uid, so removing an object
//! nothing names (most pods) looks no further. A pod also owns the PodGroup Volcano's PodGroup
//! controller made for it, which it names in `scheduling.k8s.io/group-name` (looked up
//! directly). Events are never collected: kube-controller-manager's garbage collector ignores
//! core/v1 and `events.k8s.io` Events (its `DefaultIgnoredResources`), so an Event keeps an
//! owner reference to an absent owner, is not orphaned and does not block foreground deletion.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::api::{ApiServer, DeleteOpts, Scope, WriteOpts};

use crate::deletion::{FOREGROUND, ORPHAN};
use crate::resource::{Builtin, ResourceDef};
use crate::store::Obj;

/// How the collector writes: a client of the API server as any other (kube-controller-manager's
/// patches), so a field it removes (an owner reference, a finalizer) leaves every manager's
/// `managedFields` too. It only removes, so it gets no entry of its own.
fn collector() -> WriteOpts {
    WriteOpts {
        manager: Some("kube-controller-manager".into()),
        ..WriteOpts::default()
    }
}

/// Whether the garbage collector ignores objects of this resource (Events).
fn ignored(def: &ResourceDef) -> bool {
    matches!(def.builtin, Some(Builtin::Event | Builtin::EventsV1))
}

/// Removes `finalizer` from the `finalizers` of `obj[parent]` (`metadata`, or a namespace's
/// `spec`), and the list when it is left empty.
pub(crate) fn remove_finalizer(obj: &mut Value, parent: &str, finalizer: &str) {
    let Some(m) = obj.get_mut(parent).and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(fs) = m.get_mut("finalizers").and_then(Value::as_array_mut) {
        fs.retain(|f| f.as_str() != Some(finalizer));
        if fs.is_empty() {
            m.remove("finalizers");
        }
    }
}

/// An object's namespace and owner references.
fn namespace_and_owners(obj: &Obj) -> (String, Vec<Value>) {
    let namespace = obj
        .value
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let refs = obj
        .value
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    (namespace, refs)
}

impl ApiServer {
    /// Deletes the dependents of `owner`, which was just removed: at once, or after
    /// [`ServerOptions::collector_lag`](crate::api::ServerOptions::collector_lag) on a task of
    /// its own (each dependent then goes only if none of its owners exists by then, as a
    /// dependent moved to a new owner meanwhile stays).
    pub(crate) fn collect_dependents_after_lag(&self, owner: &Obj, builtin: Option<Builtin>) {
        let lag = self.options.collector_lag;
        if !lag.is_zero()
            && let (Ok(runtime), Some(me)) =
                (tokio::runtime::Handle::try_current(), self.me.upgrade())
        {
            let owner = owner.clone();
            runtime.spawn(async move {
                tokio::time::sleep(lag).await;
                me.collect_dependents(&owner, builtin);
            });
            return;
        }
        self.collect_dependents(owner, builtin);
    }

    /// Deletes the dependents of `owner`, which was just removed.
    pub(crate) fn collect_dependents(&self, owner: &Obj, builtin: Option<Builtin>) {
        self.release_blocked_owners(owner);
        let uid = owner.uid().to_string();
        if builtin == Some(Builtin::Pod) {
            self.collect_pods_podgroup(owner, &uid);
        }
        // The store counts the references to each uid: most removed objects own nothing, and
        // finding that out costs no walk.
        if uid.is_empty() || !self.store.is_named_as_owner(&uid) {
            return;
        }
        let namespace = owner
            .value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_string);
        let registry = self.registry();
        let defs: Vec<std::sync::Arc<ResourceDef>> = registry
            .resources()
            .iter()
            .filter(|d| d.namespaced && !ignored(d))
            .cloned()
            .collect();
        let mut seen = BTreeSet::new();
        for def in &defs {
            let kind = def.storage_key();
            if !seen.insert(kind.clone()) {
                continue;
            }
            let (objs, _) = self.store.list(&kind, namespace.as_deref(), None);
            for o in objs {
                if names_owner(&o, &uid) {
                    self.collect_dependent(def, &o);
                }
            }
        }
    }

    /// The objects of the owner's namespace (or every namespace, for a cluster-scoped owner)
    /// whose `ownerReferences` name `uid`.
    fn dependents_of(&self, owner: &Obj) -> Vec<(std::sync::Arc<ResourceDef>, Obj)> {
        let uid = owner.uid().to_string();
        let namespace = owner
            .value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_string);
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        let registry = self.registry();
        for def in registry.resources().iter().filter(|d| !ignored(d)) {
            let kind = def.storage_key();
            if !seen.insert(kind.clone()) {
                continue;
            }
            let ns = if def.namespaced {
                namespace.as_deref()
            } else {
                None
            };
            if namespace.is_some() && !def.namespaced {
                continue;
            }
            let (objs, _) = self.store.list(&kind, ns, None);
            for o in objs {
                if names_owner(&o, &uid) {
                    out.push((def.clone(), o));
                }
            }
        }
        out
    }

    /// The collector's part of a delete that asked for orphaning or foreground deletion:
    /// dependents lose their references to `owner` (orphan) or are deleted (foreground), and
    /// then the owner's finalizer is removed, once no dependent that blocks it is left.
    pub(crate) fn collect_for_policy(
        &self,
        def: &std::sync::Arc<ResourceDef>,
        owner: &Obj,
        finalizer: &str,
    ) {
        let uid = owner.uid().to_string();
        for (dep_def, dep) in self.dependents_of(owner) {
            if finalizer == ORPHAN {
                let dep_uid = dep.uid().to_string();
                let _ = self.update(&dep_def, &dep.key(), Scope::All, &collector(), &mut |cur| {
                    let mut new = cur.clone();
                    if new.pointer("/metadata/uid").and_then(Value::as_str)
                        != Some(dep_uid.as_str())
                    {
                        return Ok(new);
                    }
                    if let Some(refs) = new
                        .pointer_mut("/metadata/ownerReferences")
                        .and_then(Value::as_array_mut)
                    {
                        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(&uid));
                        if refs.is_empty()
                            && let Some(m) = new["metadata"].as_object_mut()
                        {
                            m.remove("ownerReferences");
                        }
                    }
                    Ok(new)
                });
            } else {
                let _ = self.delete(&dep_def, &dep.key(), &DeleteOpts::default());
            }
        }
        self.release(def, owner, finalizer);
    }

    /// Removes the collector's `finalizer` from `owner` unless a dependent still blocks it.
    fn release(&self, def: &std::sync::Arc<ResourceDef>, owner: &Obj, finalizer: &str) {
        let uid = owner.uid().to_string();
        let blocked = finalizer == FOREGROUND
            && self.dependents_of(owner).iter().any(|(_, d)| {
                d.value
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .any(|r| {
                        r.get("uid").and_then(Value::as_str) == Some(uid.as_str())
                            && r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
                    })
            });
        if blocked {
            return;
        }
        let _ = self.update(def, &owner.key(), Scope::All, &collector(), &mut |cur| {
            let mut new = cur.clone();
            if new.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid.as_str()) {
                return Ok(new);
            }
            remove_finalizer(&mut new, "metadata", finalizer);
            Ok(new)
        });
    }

    /// After a dependent went: each owner it blocked in foreground deletion may go now.
    fn release_blocked_owners(&self, dependent: &Obj) {
        let (namespace, refs) = namespace_and_owners(dependent);
        let namespace = namespace.as_str();
        for r in refs {
            let text = |f: &str| {
                r.get(f)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let Some(owner_def) = self.registry().by_kind(&text("apiVersion"), &text("kind"))
            else {
                continue;
            };
            let ns = if owner_def.namespaced { namespace } else { "" };
            if let Some(owner) = self.get(&owner_def, &(ns.to_string(), text("name")))
                && owner.uid() == text("uid")
                && owner
                    .value
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .is_some_and(|f| f.iter().any(|f| f.as_str() == Some(FOREGROUND)))
            {
                self.release(&owner_def, &owner, FOREGROUND);
            }
        }
    }

    /// Whether the owner a reference names exists (by uid). An owner of a kind this server
    /// does not serve is taken to exist: a real cluster serves it.
    fn owner_exists(&self, r: &Value, namespace: &str) -> bool {
        let text = |f: &str| {
            r.get(f)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let Some(owner) = self.registry().by_kind(&text("apiVersion"), &text("kind")) else {
            return true;
        };
        // A cluster-scoped object cannot be owned by a namespaced one: the garbage collector
        // reports the reference as invalid and leaves the object alone.
        if owner.namespaced && namespace.is_empty() {
            return true;
        }
        let ns = if owner.namespaced { namespace } else { "" };
        self.get(&owner, &(ns.to_string(), text("name")))
            .is_some_and(|o| o.uid() == text("uid"))
    }

    /// A dependent one of whose owners went: deleted when none of its owners exists; otherwise
    /// the references to absent owners are removed and it stays.
    fn collect_dependent(&self, def: &std::sync::Arc<ResourceDef>, obj: &Obj) {
        let (namespace, refs) = namespace_and_owners(obj);
        let namespace = namespace.as_str();
        let solid: Vec<Value> = refs
            .into_iter()
            .filter(|r| self.owner_exists(r, namespace))
            .collect();
        if solid.is_empty() {
            let _ = self.delete(def, &obj.key(), &DeleteOpts::default());
            return;
        }
        let uid = obj.uid().to_string();
        let _ = self.update(def, &obj.key(), Scope::All, &collector(), &mut |cur| {
            let mut new = cur.clone();
            if new.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid.as_str()) {
                return Ok(new);
            }
            if let Some(m) = new.get_mut("metadata") {
                m["ownerReferences"] = Value::Array(solid.clone());
            }
            Ok(new)
        });
    }

    /// An object created naming owners none of which exists (by uid) is deleted at once, as the
    /// garbage collector deletes a dependent whose owners are all absent (an owner deleted while
    /// its dependent was being written). An owner of a kind this server does not serve is
    /// taken to exist: a real cluster serves it.
    pub(crate) fn collect_if_ownerless(&self, def: &std::sync::Arc<ResourceDef>, obj: &Obj) {
        if ignored(def) {
            return;
        }
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
        let some_owner = refs.iter().any(|r| self.owner_exists(r, namespace));
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

/// Whether `o`'s `ownerReferences` name the owner `uid`.
fn names_owner(o: &Obj, uid: &str) -> bool {
    o.value
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
        })
}
