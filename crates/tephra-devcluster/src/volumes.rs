//! A small PV controller and provisioner, one per member API server, doing what
//! kube-controller-manager's PersistentVolume controller and a CSI external provisioner do, as
//! far as a scheduler depends on it:
//!
//! - a volume is `Available` while no claim references it, `Bound` once its claim is bound to
//!   it, `Released` when that claim is gone;
//! - a claim pre-bound to a volume (by name, or by a volume's `claimRef` that the scheduler
//!   wrote) is bound to it; an `Immediate` claim is bound to the smallest matching volume, or
//!   provisioned;
//! - a `WaitForFirstConsumer` claim waits (a `WaitForFirstConsumer` Event) until the scheduler
//!   names its node (`volume.kubernetes.io/selected-node`); it is then provisioned on that node,
//!   within the class's `allowedTopologies`, as `pvc-<claim uid>` with the class's provisioner as
//!   CSI driver and node affinity for that node (or for the topology the class allows), or, if
//!   the node lies outside them, the annotation is taken back with a `ProvisioningFailed` Event
//!   (the scheduler then places the pod again);
//! - binding writes the volume's `claimRef`, its phase, the claim's `volumeName`, its
//!   `pv.kubernetes.io/bind-completed` annotation and its status, in the PV controller's order.
//!
//! A class whose provisioner is `kubernetes.io/no-provisioner`, or one of the server's
//! `idle_provisioners`, provisions nothing. Claims are reconciled whenever a claim, volume or
//! class changes.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::{ApiServer, Scope, WriteOpts};
use crate::crd::strings_at as strings;
use crate::quantity;
use crate::resource::Builtin;
use crate::status::ApiError;
use crate::store::{Key, Obj};

const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";
const HOSTNAME: &str = "kubernetes.io/hostname";

fn text<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn storage_of(v: &Value, ptr: &str) -> i128 {
    v.pointer(ptr)
        .and_then(Value::as_str)
        .and_then(quantity::parse_milli)
        .unwrap_or(0)
}

/// The class a claim or volume names (the beta annotation first, as Kubernetes reads it).
fn class_of(v: &Value) -> &str {
    match text(
        v,
        "/metadata/annotations/volume.beta.kubernetes.io~1storage-class",
    ) {
        "" => text(v, "/spec/storageClassName"),
        c => c,
    }
}

/// Starts the PV controller and provisioner of `api`.
pub fn start(api: Arc<ApiServer>) -> crate::controller::Controller {
    crate::controller::Controller::start(
        api,
        &[
            Builtin::PersistentVolumeClaim,
            Builtin::PersistentVolume,
            Builtin::StorageClass,
            Builtin::Node,
        ],
        |api| Volumes { api }.reconcile(),
    )
}

struct Volumes<'a> {
    api: &'a ApiServer,
}

impl Volumes<'_> {
    fn list(&self, kind: Builtin) -> Vec<Obj> {
        crate::controller::list(self.api, kind)
    }

    /// One pass over every claim and volume.
    fn reconcile(&self) {
        let classes: BTreeMap<String, Value> = self
            .list(Builtin::StorageClass)
            .iter()
            .map(|c| {
                (
                    text(&c.value, "/metadata/name").to_string(),
                    c.value.clone(),
                )
            })
            .collect();
        for claim in self.list(Builtin::PersistentVolumeClaim) {
            if let Err(e) = self.claim(&claim.value, &classes)
                && e.code != 409
                && e.code != 404
            {
                tracing::warn!(server = %self.api.name, claim = %text(&claim.value, "/metadata/name"),
                    error = %e, "volume controller: claim not reconciled");
            }
        }
        let claims: BTreeMap<Key, Value> = self
            .list(Builtin::PersistentVolumeClaim)
            .into_iter()
            .map(|c| (c.key(), c.value.clone()))
            .collect();
        for pv in self.list(Builtin::PersistentVolume) {
            let _ = self.volume_phase(&pv, &claims);
        }
    }

    /// A volume's phase from its claim reference.
    fn volume_phase(&self, pv: &Obj, claims: &BTreeMap<Key, Value>) -> Result<(), ApiError> {
        let v = &pv.value;
        let claim_name = text(v, "/spec/claimRef/name");
        let phase = if claim_name.is_empty() {
            "Available"
        } else {
            let key = (
                text(v, "/spec/claimRef/namespace").to_string(),
                claim_name.to_string(),
            );
            match claims.get(&key) {
                Some(c) if text(c, "/spec/volumeName") == text(v, "/metadata/name") => "Bound",
                Some(c)
                    if text(v, "/spec/claimRef/uid").is_empty()
                        || text(v, "/spec/claimRef/uid") == text(c, "/metadata/uid") =>
                {
                    // Pre-bound, not yet completed.
                    "Available"
                }
                _ => "Released",
            }
        };
        if text(v, "/status/phase") == phase {
            return Ok(());
        }
        let def = self.api.builtin(Builtin::PersistentVolume);
        self.api.update(
            &def,
            &pv.key(),
            Scope::Status,
            &WriteOpts::default(),
            &mut |cur| {
                let mut n = cur.clone();
                n["status"]["phase"] = json!(phase);
                Ok(n)
            },
        )?;
        Ok(())
    }

    fn claim(&self, c: &Value, classes: &BTreeMap<String, Value>) -> Result<(), ApiError> {
        if c.pointer("/metadata/annotations/pv.kubernetes.io~1bind-completed")
            .is_some()
            || c.pointer("/metadata/deletionTimestamp").is_some()
        {
            return Ok(());
        }
        let volumes = self.list(Builtin::PersistentVolume);
        let (ns, name, uid) = (
            text(c, "/metadata/namespace"),
            text(c, "/metadata/name"),
            text(c, "/metadata/uid"),
        );
        // Pre-bound: by the claim's volumeName, or by a volume's claimRef.
        let wanted = text(c, "/spec/volumeName");
        let pre_bound = volumes.iter().find(|pv| {
            let v = &pv.value;
            let refers = text(v, "/spec/claimRef/namespace") == ns
                && text(v, "/spec/claimRef/name") == name
                && (text(v, "/spec/claimRef/uid").is_empty()
                    || text(v, "/spec/claimRef/uid") == uid);
            let named = !wanted.is_empty()
                && text(v, "/metadata/name") == wanted
                && (refers || text(v, "/spec/claimRef/name").is_empty());
            refers || named
        });
        if let Some(pv) = pre_bound {
            return self.bind(&pv.value, c);
        }
        if !wanted.is_empty() {
            return Ok(());
        }
        let class_name = class_of(c);
        let class = classes.get(class_name);
        let delayed =
            class.is_some_and(|k| text(k, "/volumeBindingMode") == "WaitForFirstConsumer");
        let selected = text(
            c,
            "/metadata/annotations/volume.kubernetes.io~1selected-node",
        );
        if delayed && selected.is_empty() {
            return Ok(());
        }
        if !delayed && let Some(pv) = self.matching(c, &volumes) {
            return self.bind(&pv, c);
        }
        let Some(class) = class else { return Ok(()) };
        let provisioner = text(class, "/provisioner");
        if provisioner.is_empty()
            || provisioner == NO_PROVISIONER
            || self
                .api
                .options
                .idle_provisioners
                .iter()
                .any(|p| p == provisioner)
        {
            return Ok(());
        }
        self.provision(c, class, (!selected.is_empty()).then_some(selected))
    }

    /// The smallest available volume of the claim's class with its size and access modes.
    fn matching(&self, c: &Value, volumes: &[Obj]) -> Option<Value> {
        let want = storage_of(c, "/spec/resources/requests/storage");
        let modes = strings(c, "/spec/accessModes");
        volumes
            .iter()
            .map(|o| &o.value)
            .filter(|v| text(v, "/spec/claimRef/name").is_empty())
            .filter(|v| class_of(v) == class_of(c))
            .filter(|v| storage_of(v, "/spec/capacity/storage") >= want)
            .filter(|v| {
                let have = strings(v, "/spec/accessModes");
                modes.iter().all(|m| have.contains(m))
            })
            .min_by_key(|v| storage_of(v, "/spec/capacity/storage"))
            .cloned()
    }

    /// Creates a volume for the claim (on `node`, when it was given one) and binds it.
    fn provision(&self, c: &Value, class: &Value, node: Option<&str>) -> Result<(), ApiError> {
        let provisioner = text(class, "/provisioner");
        let (ns, name, uid) = (
            text(c, "/metadata/namespace"),
            text(c, "/metadata/name"),
            text(c, "/metadata/uid"),
        );
        let terms: Vec<Value> = class
            .get("allowedTopologies")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let affinity = match node {
            Some(node) => {
                let labels = self
                    .api
                    .store
                    .get("/nodes", &(String::new(), node.to_string()))
                    .and_then(|n| n.value.pointer("/metadata/labels").cloned())
                    .unwrap_or(json!({}));
                let label = |k: &str| labels.get(k).and_then(Value::as_str).map(String::from);
                let allowed = terms.is_empty()
                    || terms.iter().any(|t| {
                        let exprs = t.get("matchLabelExpressions").and_then(Value::as_array);
                        exprs.is_some_and(|e| {
                            !e.is_empty()
                                && e.iter().all(|x| {
                                    label(text(x, "/key"))
                                        .is_some_and(|v| strings(x, "/values").contains(&v))
                                })
                        })
                    });
                if !allowed {
                    return self.give_up(c, &format!(
                        "failed to provision volume with StorageClass \"{}\": node {node} is not in the class's allowedTopologies",
                        text(class, "/metadata/name")
                    ));
                }
                // The topology the class allows, with the node's values; else the node itself.
                let keys: Vec<String> = terms
                    .first()
                    .and_then(|t| t.get("matchLabelExpressions"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|x| text(x, "/key").to_string())
                    .collect();
                let exprs: Vec<Value> = if keys.is_empty() {
                    vec![json!({"key": HOSTNAME, "operator": "In", "values": [node]})]
                } else {
                    keys.iter()
                        .map(|k| json!({"key": k, "operator": "In", "values": [label(k).unwrap_or_default()]}))
                        .collect()
                };
                Some(json!({"required": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}))
            }
            None => None,
        };
        let pv_name = format!("pvc-{uid}");
        let mut pv = json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": pv_name, "annotations": {PROVISIONED_BY: provisioner}},
            "spec": {
                "capacity": {"storage": c.pointer("/spec/resources/requests/storage").cloned().unwrap_or(json!("0"))},
                "accessModes": c.pointer("/spec/accessModes").cloned().unwrap_or(json!(["ReadWriteOnce"])),
                "persistentVolumeReclaimPolicy": class.get("reclaimPolicy").cloned().unwrap_or(json!("Delete")),
                "storageClassName": class_of(c),
                "volumeMode": c.pointer("/spec/volumeMode").cloned().unwrap_or(json!("Filesystem")),
                "csi": {"driver": provisioner, "volumeHandle": pv_name},
                "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": ns, "name": name, "uid": uid},
            },
        });
        if let Some(a) = affinity {
            pv["spec"]["nodeAffinity"] = a;
        }
        let def = self.api.builtin(Builtin::PersistentVolume);
        let created = match self.api.create(&def, None, pv, &WriteOpts::default()) {
            Ok(w) => w.obj.value.clone(),
            Err(e) if e.code == 409 => match self
                .api
                .store
                .get(&def.storage_key(), &(String::new(), pv_name.clone()))
            {
                Some(o) => o.value.clone(),
                None => return Err(e),
            },
            Err(e) => return Err(e),
        };
        crate::events::record(
            self.api,
            c,
            "Normal",
            "ProvisioningSucceeded",
            &format!("Successfully provisioned volume {pv_name}"),
            "persistentvolume-controller",
            None,
        );
        self.bind(&created, c)
    }

    /// The provisioner cannot serve the node: the scheduler's choice is taken back.
    fn give_up(&self, c: &Value, message: &str) -> Result<(), ApiError> {
        crate::events::record(
            self.api,
            c,
            "Warning",
            "ProvisioningFailed",
            message,
            "persistentvolume-controller",
            None,
        );
        let def = self.api.builtin(Builtin::PersistentVolumeClaim);
        self.api.update(
            &def,
            &crate::store::key_of(c),
            Scope::Main,
            &WriteOpts::default(),
            &mut |cur| {
                let mut n = cur.clone();
                if let Some(a) = n
                    .pointer_mut("/metadata/annotations")
                    .and_then(Value::as_object_mut)
                {
                    a.remove(SELECTED_NODE);
                }
                Ok(n)
            },
        )?;
        Ok(())
    }

    /// Binds `pv` and claim `c` to each other, in the PV controller's order.
    fn bind(&self, pv: &Value, c: &Value) -> Result<(), ApiError> {
        let pv_def = self.api.builtin(Builtin::PersistentVolume);
        let pvc_def = self.api.builtin(Builtin::PersistentVolumeClaim);
        let pv_key = crate::store::key_of(pv);
        let claim_ref = json!({"kind": "PersistentVolumeClaim", "apiVersion": "v1",
            "namespace": text(c, "/metadata/namespace"), "name": text(c, "/metadata/name"),
            "uid": text(c, "/metadata/uid")});
        let opts = WriteOpts::default();
        self.api
            .update(&pv_def, &pv_key, Scope::Main, &opts, &mut |cur| {
                let mut n = cur.clone();
                if n.pointer("/spec/claimRef/uid")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    n["spec"]["claimRef"] = claim_ref.clone();
                    n["metadata"]["annotations"][BOUND_BY_CONTROLLER] = json!("yes");
                }
                Ok(n)
            })?;
        self.api
            .update(&pv_def, &pv_key, Scope::Status, &opts, &mut |cur| {
                let mut n = cur.clone();
                n["status"]["phase"] = json!("Bound");
                Ok(n)
            })?;
        let pv_name = text(pv, "/metadata/name").to_string();
        let c_key = crate::store::key_of(c);
        self.api
            .update(&pvc_def, &c_key, Scope::Main, &opts, &mut |cur| {
                let mut n = cur.clone();
                if text(&n, "/spec/volumeName").is_empty() {
                    n["spec"]["volumeName"] = json!(pv_name);
                    n["metadata"]["annotations"][BOUND_BY_CONTROLLER] = json!("yes");
                }
                n["metadata"]["annotations"][BIND_COMPLETED] = json!("yes");
                if let Some(p) = pv.pointer("/spec/csi/driver").and_then(Value::as_str) {
                    n["metadata"]["annotations"][STORAGE_PROVISIONER] = json!(p);
                }
                Ok(n)
            })?;
        self.api
            .update(&pvc_def, &c_key, Scope::Status, &opts, &mut |cur| {
                let mut n = cur.clone();
                n["status"]["phase"] = json!("Bound");
                n["status"]["accessModes"] = pv
                    .pointer("/spec/accessModes")
                    .cloned()
                    .unwrap_or(json!([]));
                n["status"]["capacity"] =
                    pv.pointer("/spec/capacity").cloned().unwrap_or(json!({}));
                Ok(n)
            })?;
        Ok(())
    }
}
