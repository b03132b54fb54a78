//! A PropagationPolicy's cluster affinity, as a rule of the model: which clusters a job's
//! policy allows (listed names, not excluded, matching cluster labels, matching
//! provider/region/zone field selectors). The `clusteraffinity` plugin filters with it, and
//! admission's "never" verdict keeps a down member the policy allows.

use super::{Cluster, JobPolicy, SelectorOp};

/// Which rule of a policy's cluster affinity refuses a cluster.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AffinityMismatch {
    /// The policy lists clusters, and not this one.
    #[error("not in clusterAffinity.clusterNames")]
    NotListed,
    /// The policy excludes the cluster.
    #[error("excluded by clusterAffinity.exclude")]
    Excluded,
    /// The cluster's labels do not match.
    #[error("cluster labels do not match clusterAffinity.labelSelector")]
    Labels,
    /// A provider, region or zone requirement does not match.
    #[error(
        "cluster {key} {found} does not match clusterAffinity.fieldSelector {key} {op:?} {values:?}"
    )]
    Field {
        /// `provider`, `region` or `zone`.
        key: String,
        /// The cluster's value(s), or `(none)`.
        found: String,
        /// The operator.
        op: SelectorOp,
        /// The values required.
        values: Vec<String>,
    },
}

/// Whether `policy` allows `cluster`; the error says which rule refuses it.
pub fn allows(policy: &JobPolicy, cluster: &Cluster) -> Result<(), AffinityMismatch> {
    if !policy.cluster_names.is_empty() && !policy.cluster_names.contains(&cluster.name) {
        return Err(AffinityMismatch::NotListed);
    }
    if policy.exclude.contains(&cluster.name) {
        return Err(AffinityMismatch::Excluded);
    }
    if !policy
        .cluster_labels
        .iter()
        .all(|r| r.matches(&cluster.labels))
    {
        return Err(AffinityMismatch::Labels);
    }
    for r in &policy.field_requirements {
        let values: Vec<&str> = match r.key.as_str() {
            "provider" => cluster.provider.as_deref().into_iter().collect(),
            "region" => cluster.region.as_deref().into_iter().collect(),
            "zone" => cluster.zones.iter().map(String::as_str).collect(),
            _ => Vec::new(),
        };
        let any_in = values.iter().any(|v| r.values.iter().any(|w| w == v));
        let ok = match r.op {
            SelectorOp::In => any_in,
            SelectorOp::NotIn => !any_in,
            SelectorOp::Exists => !values.is_empty(),
            SelectorOp::DoesNotExist => values.is_empty(),
            SelectorOp::Gt | SelectorOp::Lt => false,
        };
        if !ok {
            return Err(AffinityMismatch::Field {
                key: r.key.clone(),
                found: if values.is_empty() {
                    "(none)".to_string()
                } else {
                    values.join(",")
                },
                op: r.op,
                values: r.values.clone(),
            });
        }
    }
    Ok(())
}
