//! A declared pod's dependencies, copied from the control plane to the member that runs it
//! before the pod itself (as Karmada's dependencies distributor does): the ConfigMaps and
//! Secrets its volumes and environment name, the headless Service its `subdomain` names, and
//! its PriorityClass. Without them a member's kubelet could not start a Volcano Job's pods (the
//! `svc` plugin's hosts ConfigMap, the `ssh` plugin's key pair), their DNS names would not
//! resolve, and the member's Priority admission would refuse a pod whose class it lacks.
//!
//! A copy says where it came from (`tephra.io/source: control-plane`, as a label and an
//! annotation) and which object it copies (`tephra.io/declared-uid`). It is made once; an
//! object of that name the member has of its own is left alone and never adopted, and a copy
//! of an earlier object of the same name (a Job deleted and made again) is replaced. A
//! dependency missing on the control plane is skipped: the kubelet reports it, as it would
//! without tephra.
//!
//! The PriorityClass is copied before the pod (the member's Priority admission needs it); the
//! namespaced dependencies after the pod's copy exists, each naming it in its `ownerReferences`
//! from the moment it is created (or, when another pod's copy made it, added to them), so that
//! the member's garbage collector deletes the copy with the last pod copy using it: a Job's
//! ConfigMaps, Secrets and Service leave the member with its pods, even when tephra is down
//! meanwhile, and no copy is ever left without an owner. The member's kubelet waits for them
//! (`FailedMount` until they exist), as it would for any volume. PriorityClasses
//! (cluster-scoped, shared by every job of that class) and namespaces stay.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, Service};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, Resource};
use serde_json::json;
use tephra_api::well_known::{DECLARED_UID, SOURCE_OBJECT};

/// What a pod needs in its namespace before it can start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deps {
    /// ConfigMaps by name.
    pub config_maps: BTreeSet<String>,
    /// Secrets by name.
    pub secrets: BTreeSet<String>,
    /// The headless Service that gives the pod its DNS name.
    pub service: Option<String>,
    /// Its `priorityClassName` (cluster-scoped).
    pub priority_class: Option<String>,
}

/// The dependencies `pod` names: volumes (also projected), `envFrom` and `valueFrom` of every
/// container and init container, image pull secrets, and the subdomain's Service.
pub fn named(pod: &Pod) -> Deps {
    let mut d = Deps::default();
    let Some(spec) = pod.spec.as_ref() else {
        return d;
    };
    for v in spec.volumes.iter().flatten() {
        if let Some(c) = &v.config_map {
            d.config_maps.insert(c.name.clone());
        }
        if let Some(s) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            d.secrets.insert(s);
        }
        for p in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(c) = &p.config_map {
                d.config_maps.insert(c.name.clone());
            }
            if let Some(s) = &p.secret {
                d.secrets.insert(s.name.clone());
            }
        }
    }
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        for e in c.env_from.iter().flatten() {
            if let Some(r) = &e.config_map_ref {
                d.config_maps.insert(r.name.clone());
            }
            if let Some(r) = &e.secret_ref {
                d.secrets.insert(r.name.clone());
            }
        }
        for e in c.env.iter().flatten() {
            let Some(from) = &e.value_from else { continue };
            if let Some(r) = &from.config_map_key_ref {
                d.config_maps.insert(r.name.clone());
            }
            if let Some(r) = &from.secret_key_ref {
                d.secrets.insert(r.name.clone());
            }
        }
    }
    for s in spec.image_pull_secrets.iter().flatten() {
        d.secrets.insert(s.name.clone());
    }
    d.config_maps.retain(|n| !n.is_empty());
    d.secrets.retain(|n| !n.is_empty());
    d.service = spec.subdomain.clone().filter(|s| !s.is_empty());
    d.priority_class = spec.priority_class_name.clone().filter(|s| !s.is_empty());
    d
}

/// A namespaced kind a pod depends on (ConfigMap, Secret, Service).
trait Namespaced:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + serde::Serialize
    + serde::de::DeserializeOwned
{
}

impl<K> Namespaced for K where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned
{
}

/// The value of [`SOURCE_OBJECT`] on a copy.
const FROM_CONTROL_PLANE: &str = "control-plane";

/// The metadata a copy keeps: name, namespace, labels and annotations, marked as a copy of the
/// object with this uid.
fn copied_meta(m: &ObjectMeta) -> ObjectMeta {
    let mut annotations = m.annotations.clone().unwrap_or_default();
    annotations.insert(SOURCE_OBJECT.into(), FROM_CONTROL_PLANE.into());
    if let Some(uid) = &m.uid {
        annotations.insert(DECLARED_UID.into(), uid.clone());
    }
    let mut labels = m.labels.clone().unwrap_or_default();
    labels.insert(SOURCE_OBJECT.into(), FROM_CONTROL_PLANE.into());
    ObjectMeta {
        name: m.name.clone(),
        namespace: m.namespace.clone(),
        labels: Some(labels),
        annotations: Some(annotations),
        ..ObjectMeta::default()
    }
}

/// Whether a member's object is a copy tephra made.
fn is_copy(m: &ObjectMeta) -> bool {
    m.annotations
        .as_ref()
        .and_then(|a| a.get(SOURCE_OBJECT))
        .is_some_and(|s| s == FROM_CONTROL_PLANE)
}

/// Whether a copy copies the object with this uid (a copy made before copies recorded it
/// counts as another object's).
fn copies(copy: &ObjectMeta, uid: Option<&String>) -> bool {
    let recorded = copy.annotations.as_ref().and_then(|a| a.get(DECLARED_UID));
    recorded.is_some() && recorded == uid
}

/// Creates the pod's namespace in the member unless it is there.
pub async fn ensure_namespace(member: &Client, namespace: &str) -> Result<(), kube::Error> {
    let namespaces: Api<Namespace> = Api::all(member.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.to_string()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Copies one object from the control plane to the member for the pod copy `owner`, unless the
/// member has one of its own or the control plane has none: created naming `owner`, or, if a
/// copy is there already, with `owner` added to its owners; a copy of an earlier object of that
/// name is replaced.
async fn copy_one<K>(
    control: &Client,
    member: &Client,
    namespace: &str,
    name: &str,
    strip: fn(K) -> K,
    owner: &Owner<'_>,
) -> Result<(), kube::Error>
where
    K: Namespaced,
{
    let theirs: Api<K> = Api::namespaced(member.clone(), namespace);
    let existing = theirs.get_opt(name).await?;
    if existing.as_ref().is_some_and(|t| !is_copy(t.meta())) {
        // The member's own object: never touched.
        return Ok(());
    }
    let ours: Api<K> = Api::namespaced(control.clone(), namespace);
    let source = ours.get_opt(name).await?;
    if let Some(old) = &existing {
        let current = source
            .as_ref()
            .is_none_or(|o| copies(old.meta(), o.meta().uid.as_ref()));
        if current {
            // Nothing newer to copy: this pod owns the copy there too.
            let patch = json!({"metadata": {"ownerReferences": [owner.reference()]}});
            return match theirs
                .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                Ok(_) => Ok(()),
                // Collected meanwhile (its last owner went): copied anew below, next time.
                Err(e) if crate::gone::is_gone(&e) => Ok(()),
                Err(e) => Err(e),
            };
        }
        // A copy of an earlier object of this name: it goes, and this one is copied.
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: old.meta().uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match theirs.delete(name, &params).await {
            Ok(_) => {}
            Err(e) if crate::gone::is_gone(&e) || crate::gone::is_conflict(&e) => {}
            Err(e) => return Err(e),
        }
    }
    let Some(obj) = source else {
        return Ok(());
    };
    let mut copy = strip(obj);
    let mut meta = copied_meta(copy.meta());
    meta.owner_references = Some(vec![owner.typed()]);
    *copy.meta_mut() = meta;
    match theirs.create(&PostParams::default(), &copy).await {
        Ok(_) => Ok(()),
        // Another pod of the same job copied it meanwhile: own it too.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let patch = json!({"metadata": {"ownerReferences": [owner.reference()]}});
            theirs
                .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
                .map(|_| ())
        }
        Err(e) => Err(e),
    }
}

/// Copies a PriorityClass to the member unless it has one of that name (its own value then
/// holds there) or the control plane has none. The copy is never the member's global default.
pub async fn copy_priority_class(
    control: &Client,
    member: &Client,
    name: &str,
) -> Result<(), kube::Error> {
    let theirs: Api<PriorityClass> = Api::all(member.clone());
    if theirs.get_opt(name).await?.is_some() {
        return Ok(());
    }
    let Some(pc) = Api::<PriorityClass>::all(control.clone())
        .get_opt(name)
        .await?
    else {
        return Ok(());
    };
    let copy = PriorityClass {
        metadata: copied_meta(&pc.metadata),
        global_default: None,
        ..pc
    };
    match theirs.create(&PostParams::default(), &copy).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Copies the namespaced dependencies `deps` names into the member, in `namespace`, for the
/// pod copy `pod` (with `uid`), which owns each.
pub async fn copy_owned(
    control: &Client,
    member: &Client,
    namespace: &str,
    deps: &Deps,
    pod: &str,
    uid: &str,
) -> Result<(), kube::Error> {
    let owner = Owner { pod, uid };
    let (c, m, ns) = (control, member, namespace);
    for name in &deps.config_maps {
        copy_one::<ConfigMap>(c, m, ns, name, |c| c, &owner).await?;
    }
    for name in &deps.secrets {
        copy_one::<Secret>(c, m, ns, name, |s| s, &owner).await?;
    }
    if let Some(name) = &deps.service {
        copy_one::<Service>(c, m, ns, name, strip_service, &owner).await?;
    }
    Ok(())
}

/// A Service as the member may take it: the member allocates its own addresses; a headless
/// Service stays headless.
fn strip_service(mut s: Service) -> Service {
    if let Some(spec) = s.spec.as_mut() {
        let headless = spec.cluster_ip.as_deref() == Some("None");
        spec.cluster_ip = headless.then(|| "None".to_string());
        spec.cluster_ips = headless.then(|| vec!["None".to_string()]);
    }
    s.status = None;
    s
}

/// The pod copy that owns a dependency copy.
struct Owner<'a> {
    pod: &'a str,
    uid: &'a str,
}

impl Owner<'_> {
    /// As a strategic-merge item of `ownerReferences` (merged by uid).
    fn reference(&self) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "Pod", "name": self.pod, "uid": self.uid})
    }

    fn typed(&self) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: self.pod.to_string(),
            uid: self.uid.to_string(),
            ..OwnerReference::default()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_volcano_pods_plugin_objects_are_its_dependencies() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "mpi-master-0", "namespace": "hpc"},
            "spec": {
                "subdomain": "mpi",
                "volumes": [
                    {"name": "hosts", "configMap": {"name": "mpi-svc"}},
                    {"name": "ssh", "secret": {"secretName": "mpi-ssh"}},
                    {"name": "p", "projected": {"sources": [{"configMap": {"name": "extra"}}]}}],
                "imagePullSecrets": [{"name": "registry"}],
                "priorityClassName": "high-priority",
                "containers": [{"name": "c", "image": "i",
                    "envFrom": [{"secretRef": {"name": "creds"}}],
                    "env": [{"name": "VC_WORKER_HOSTS", "valueFrom":
                        {"configMapKeyRef": {"name": "mpi-svc", "key": "VC_WORKER_HOSTS"}}}]}]}
        }))
        .unwrap();
        let d = named(&pod);
        assert_eq!(
            d.config_maps,
            BTreeSet::from(["mpi-svc".to_string(), "extra".to_string()])
        );
        assert_eq!(
            d.secrets,
            BTreeSet::from(["mpi-ssh".into(), "registry".into(), "creds".into()])
        );
        assert_eq!(d.service.as_deref(), Some("mpi"));
        assert_eq!(d.priority_class.as_deref(), Some("high-priority"));
    }

    #[test]
    fn a_plain_pod_needs_nothing() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}))
        .unwrap();
        assert_eq!(named(&pod), Deps::default());
    }
}
