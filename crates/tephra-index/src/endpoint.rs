//! Where a member is reached: the name the control plane goes by, and what a member's
//! connection depends on (its Cluster's endpoint, credentials and TLS choice).

use tephra_api::Cluster as ApiCluster;

/// The control plane's name as a cluster, in writes and Events about the control plane itself.
pub const CONTROL_PLANE: &str = "control-plane";

/// What a member's connection depends on: a change restarts its watchers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `spec.apiEndpoint`.
    pub url: String,
    /// `spec.secretRef` as `namespace/name`.
    pub secret: String,
    /// `spec.insecureSkipTLSVerification`.
    pub insecure: bool,
}

impl Endpoint {
    /// The endpoint of a Cluster, if it names one (Pull-mode clusters do not).
    pub fn of(c: &ApiCluster) -> Option<Self> {
        let r = c.spec.secret_ref.as_ref()?;
        Some(Self {
            url: c.spec.api_endpoint.clone()?,
            secret: format!("{}/{}", r.namespace, r.name),
            insecure: c.spec.insecure_skip_tls_verification,
        })
    }
}
