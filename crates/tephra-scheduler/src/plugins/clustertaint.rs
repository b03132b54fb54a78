//! `clustertaint`: a job is not placed on a cluster with a NoSchedule or NoExecute taint its
//! policy does not tolerate (as set on unhealthy members: `cluster.tephra.io/not-ready`,
//! `cluster.tephra.io/unreachable`).

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::fit::{ClusterUnfit, Room};
use crate::framework::plugin::{ClusterFilter, Plugin};
use crate::framework::view::View;
use crate::model::{Id, TaintEffect, tolerated};

/// The `clustertaint` plugin.
pub struct ClusterTaint;

/// The plugin reads no arguments.
pub const ARGS: ArgSpec = ArgSpec::NONE;

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    ArgReader::new(&cfg.arguments, &ARGS).finish()?;
    Ok(Box::new(ClusterTaint))
}

impl Plugin for ClusterTaint {
    fn name(&self) -> &'static str {
        "clustertaint"
    }

    fn cluster_filter(&self) -> Option<&dyn ClusterFilter> {
        Some(self)
    }
}

impl ClusterFilter for ClusterTaint {
    fn filter(&self, view: &View, job: Id, cluster: Id, _room: Room) -> Result<(), ClusterUnfit> {
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
                return Err(ClusterUnfit::unresolvable(format!(
                    "cluster has untolerated taint {{{}: {}}}:{}",
                    t.key,
                    t.value,
                    t.effect.as_str()
                )));
            }
        }
        Ok(())
    }
}
