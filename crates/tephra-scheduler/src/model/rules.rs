//! What a pod asks of its surroundings beyond its requests, node selector, required node
//! affinity and tolerations, gathered in one value ([`PodRules`]): its labels, preferred node
//! affinity, inter-pod affinity (`affinity.rs`), topology spread constraints (`spread.rs`),
//! host ports (`ports.rs`), scheduling gates, the volume claims it mounts (`volumes.rs`) and
//! the ResourceClaims whose devices it uses (`devices.rs`).

use super::affinity::{PodTerm, Weighted};
use super::ports::HostPort;
use super::selectors::{Labels, Requirement};
use super::spread::SpreadTerm;

/// The constraints of a pod beyond its requests, node selector, required node affinity and
/// tolerations: what it asks of the pods around it, what it prefers of its node, the host ports
/// it needs and the scheduling gates that hold it back.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PodRules {
    /// The pod's labels.
    pub labels: Labels,
    /// Preferred node affinity: each term's requirements ANDed, its weight added to a node's
    /// score when they match.
    pub preferred_nodes: Vec<Weighted<Vec<Requirement>>>,
    /// Required pod affinity: every term must be satisfied.
    pub affinity: Vec<PodTerm>,
    /// Required pod anti-affinity: no term may be violated.
    pub anti_affinity: Vec<PodTerm>,
    /// Preferred pod affinity.
    pub preferred_affinity: Vec<Weighted<PodTerm>>,
    /// Preferred pod anti-affinity.
    pub preferred_anti_affinity: Vec<Weighted<PodTerm>>,
    /// Topology spread constraints, filters and preferences.
    pub spread: Vec<SpreadTerm>,
    /// Host ports its containers ask for.
    pub host_ports: Vec<HostPort>,
    /// `spec.schedulingGates` by name: while any is left the pod is no candidate for placement.
    pub gates: Vec<String>,
    /// The PersistentVolumeClaims its volumes use, by name in its namespace (a generic
    /// ephemeral volume's claim is `<pod>-<volume>`).
    pub claims: Vec<String>,
    /// Its ResourceClaims (`spec.resourceClaims`), resolved to claim names where they exist.
    pub device_claims: Vec<super::devices::PodClaim>,
    /// What it asks of shared GPUs (Volcano's vGPU resources), if anything.
    pub gpus: Option<std::sync::Arc<super::vgpu::GpuAsk>>,
}

impl PodRules {
    /// Whether the pod has any inter-pod term (required or preferred).
    pub fn has_pod_terms(&self) -> bool {
        !(self.affinity.is_empty()
            && self.anti_affinity.is_empty()
            && self.preferred_affinity.is_empty()
            && self.preferred_anti_affinity.is_empty())
    }
}
