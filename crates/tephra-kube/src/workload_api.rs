//! Which version of Kubernetes' own gang API (`scheduling.k8s.io` PodGroups, the Workload API)
//! a cluster serves, found by discovery: `v1beta1` (Kubernetes 1.37 with that version on),
//! else `v1alpha3` (1.37's alpha version, which the Job controller's gangs also come through
//! when only it is on), else none. The two versions' PodGroups have the same fields, so both
//! are read as one type; tephra writes to them, and names them, at the version the cluster
//! serves.

use dashmap::DashMap;
use k8s_openapi::api::scheduling::v1alpha3::PodGroup as AlphaPodGroup;
use k8s_openapi::api::scheduling::v1beta1::PodGroup as KubePodGroup;
use kube::Client;

/// The API group.
pub const GROUP: &str = "scheduling.k8s.io";
/// The versions read, in the order they are preferred.
pub const VERSIONS: [&str; 2] = ["v1beta1", "v1alpha3"];

/// The version of PodGroups `client`'s cluster serves: `None` when it serves none of
/// [`VERSIONS`] (an older Kubernetes, or the gate off).
pub async fn served(client: &Client) -> Result<Option<&'static str>, kube::Error> {
    for version in VERSIONS {
        match client
            .list_api_group_resources(&format!("{GROUP}/{version}"))
            .await
        {
            Ok(list) if list.resources.iter().any(|r| r.name == "podgroups") => {
                return Ok(Some(version));
            }
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// A `v1alpha3` PodGroup read as the `v1beta1` one it is the same as.
pub fn from_alpha(g: AlphaPodGroup) -> Option<KubePodGroup> {
    let mut value = serde_json::to_value(g).ok()?;
    value["apiVersion"] = serde_json::json!(format!("{GROUP}/v1beta1"));
    serde_json::from_value(value).ok()
}

/// The versions each cluster was found to serve, kept once found (a cluster that serves
/// none is asked again next time).
#[derive(Default)]
pub struct Versions(DashMap<String, &'static str>);

impl Versions {
    /// `cluster`'s version, by discovery the first time; `v1beta1` when discovery fails or
    /// finds none (the write then fails as it would have).
    pub async fn of(&self, cluster: &str, client: &Client) -> &'static str {
        if let Some(v) = self.0.get(cluster) {
            return *v;
        }
        match served(client).await {
            Ok(Some(v)) => {
                self.0.insert(cluster.to_string(), v);
                v
            }
            Ok(None) => VERSIONS[0],
            Err(e) => {
                tracing::warn!(cluster, error = %e, "which version of scheduling.k8s.io the cluster serves is not known");
                VERSIONS[0]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_alpha_podgroup_reads_as_the_beta_one_with_its_fields() {
        let alpha: AlphaPodGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ns"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}},
                     "workloadRef": {"workloadName": "w", "templateName": "t"}},
            "status": {"conditions": [{"type": "PodGroupInitiallyScheduled",
                "status": "True", "reason": "Scheduled", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .unwrap();
        let beta = from_alpha(alpha).expect("the same fields");
        let gang = beta
            .spec
            .scheduling_policy
            .gang
            .as_ref()
            .map(|g| g.min_count);
        assert_eq!(gang, Some(3));
        assert_eq!(
            beta.spec.workload_ref.map(|w| w.template_name).as_deref(),
            Some("t")
        );
        assert_eq!(
            beta.status.and_then(|s| s.conditions).map(|c| c.len()),
            Some(1)
        );
    }
}
