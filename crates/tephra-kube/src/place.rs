//! Creating a declared pod's copy in its member (the executor's `Place`): its PriorityClass
//! first (the member's Priority admission needs it), then the pod itself, the same copy taken
//! again when a retry finds it already made, then the ConfigMaps, Secrets and Service it needs,
//! owned by it (`deps.rs`), and its ResourceClaims reserved for it (a copy whose claims were
//! deallocated meanwhile is deleted again, for its gang to be placed anew).

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};

/// Creates `pod` (already made the member's copy) in `namespace` of `member`, with what it
/// depends on copied from `control`.
pub async fn copy(
    control: &Client,
    member: &Client,
    namespace: &str,
    pod: Pod,
) -> Result<(), kube::Error> {
    let deps = crate::deps::named(&pod);
    let pods: Api<Pod> = Api::namespaced(member.clone(), namespace);
    if deps != crate::deps::Deps::default() {
        crate::deps::ensure_namespace(member, namespace).await?;
    }
    if let Some(pc) = &deps.priority_class {
        crate::deps::copy_priority_class(control, member, pc).await?;
    }
    let created = match pods.create(&PostParams::default(), &pod).await {
        // The member lacks the namespace the job lives in on the control plane.
        Err(kube::Error::Api(s)) if s.code == 404 => {
            crate::deps::ensure_namespace(member, namespace).await?;
            pods.create(&PostParams::default(), &pod).await?
        }
        // A retry after the copy was made (what followed failed): the copy of this same
        // declared pod is the one made then.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let name = pod.metadata.name.clone().unwrap_or_default();
            match pods.get_opt(&name).await? {
                Some(p) if declared_uid(&p).is_some() && declared_uid(&p) == declared_uid(&pod) => {
                    p
                }
                _ => return Err(kube::Error::Api(s)),
            }
        }
        Err(e) => return Err(e),
        Ok(p) => p,
    };
    let uid = created.metadata.uid.clone().unwrap_or_default();
    let name = created.metadata.name.clone().unwrap_or_default();
    // Its ConfigMaps, Secrets and Service, owned by it (the kubelet waits for them): they go
    // with the last pod copy using them.
    crate::deps::copy_owned(control, member, namespace, &deps, &name, &uid).await?;
    // Its ResourceClaims were allocated before it existed: reserved for it now.
    let claims: Vec<String> = created
        .spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
        .filter_map(|c| c.resource_claim_name.clone())
        .collect();
    if !claims.is_empty()
        && let Err(e) = crate::prebind::reserve(member, namespace, &claims, &name, &uid).await
    {
        // A claim deallocated since the session allocated it: the API server refuses a
        // reservation without an allocation, and the copy would wait for its devices for
        // good. It goes (a retry would meet the same refusal); the gang is placed again and
        // its claims allocated again.
        if matches!(&e, kube::Error::Api(s) if s.code == 422) {
            let gone = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid.clone()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            if let Err(d) = pods.delete(&name, &gone).await {
                tracing::warn!(pod = %name, namespace, error = %d, "a pod copy whose claims could not be reserved was not deleted");
            }
        }
        return Err(e);
    }
    Ok(())
}

/// The declared pod a copy copies (`tephra.io/declared-uid`).
fn declared_uid(p: &Pod) -> Option<&String> {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(tephra_api::well_known::DECLARED_UID))
}
