//! `clustertaint`: a job is not placed on a cluster with a NoSchedule or NoExecute taint its
//! policy does not tolerate (as set on unhealthy members: `cluster.tephra.io/not-ready`,
//! `cluster.tephra.io/unreachable`).

use super::{ArgError, ArgReader};
use crate::config::Args;
use crate::framework::{Plugin, View};
use crate::model::{Id, TaintEffect, tolerated};

pub struct ClusterTaint;

impl ClusterTaint {
    pub fn new(args: &Args) -> Result<Self, ArgError> {
        ArgReader::new(args, &[], &[])?;
        Ok(Self)
    }
}

impl Plugin for ClusterTaint {
    fn name(&self) -> &'static str {
        "clustertaint"
    }

    fn has_predicate(&self) -> bool {
        false
    }

    fn has_node_score(&self) -> bool {
        false
    }

    fn cluster_filter(&self, view: &View, job: Id, cluster: Id) -> Result<(), String> {
        let Some(c) = view.snap.clusters.get(cluster) else {
            return Ok(());
        };
        let tolerations = view
            .job(job)
            .and_then(|j| j.group.as_ref())
            .map(|g| g.policy.tolerations.as_slice())
            .unwrap_or(&[]);
        for t in &c.taints {
            if t.effect != TaintEffect::PreferNoSchedule && !tolerated(tolerations, t) {
                return Err(format!(
                    "cluster has untolerated taint {{{}: {}}}:{}",
                    t.key,
                    t.value,
                    t.effect.as_str()
                ));
            }
        }
        Ok(())
    }
}
