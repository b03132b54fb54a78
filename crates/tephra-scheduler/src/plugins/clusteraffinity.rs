//! `clusteraffinity`: a job goes only to clusters its PropagationPolicy allows: listed names,
//! not excluded, matching cluster labels, and matching provider/region/zone field selectors.

use super::{ArgError, ArgReader};
use crate::config::Args;
use crate::framework::{Plugin, View};
use crate::model::{Cluster, Id, JobPolicy, SelectorOp};

pub struct ClusterAffinity;

impl ClusterAffinity {
    pub fn new(args: &Args) -> Result<Self, ArgError> {
        ArgReader::new(args, &[], &[])?;
        Ok(Self)
    }
}

/// Whether `policy` allows `cluster`; the error says which rule refuses it.
pub fn allows(policy: &JobPolicy, cluster: &Cluster) -> Result<(), String> {
    if !policy.cluster_names.is_empty() && !policy.cluster_names.contains(&cluster.name) {
        return Err("not in clusterAffinity.clusterNames".into());
    }
    if policy.exclude.contains(&cluster.name) {
        return Err("excluded by clusterAffinity.exclude".into());
    }
    if !policy
        .cluster_labels
        .iter()
        .all(|r| r.matches(&cluster.labels))
    {
        return Err("cluster labels do not match clusterAffinity.labelSelector".into());
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
            return Err(format!(
                "cluster {} {} does not match clusterAffinity.fieldSelector {} {:?} {:?}",
                r.key,
                if values.is_empty() {
                    "(none)".to_string()
                } else {
                    values.join(",")
                },
                r.key,
                r.op,
                r.values
            ));
        }
    }
    Ok(())
}

impl Plugin for ClusterAffinity {
    fn name(&self) -> &'static str {
        "clusteraffinity"
    }

    fn has_predicate(&self) -> bool {
        false
    }

    fn has_node_score(&self) -> bool {
        false
    }

    fn cluster_filter(&self, view: &View, job: Id, cluster: Id) -> Result<(), String> {
        let (Some(j), Some(c)) = (view.job(job), view.snap.clusters.get(cluster)) else {
            return Ok(());
        };
        match &j.group {
            Some(g) => allows(&g.policy, c),
            None => Ok(()),
        }
    }
}
