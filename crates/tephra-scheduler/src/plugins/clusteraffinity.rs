//! `clusteraffinity`: a job goes only to clusters its PropagationPolicy allows: listed names,
//! not excluded, matching cluster labels, and matching provider/region/zone field selectors.

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::fit::{ClusterUnfit, Room};
use crate::framework::plugin::{ClusterFilter, Plugin};
use crate::framework::view::View;
use crate::model::Id;

/// The `clusteraffinity` plugin.
pub struct ClusterAffinity;

/// The plugin reads no arguments.
pub const ARGS: ArgSpec = ArgSpec::NONE;

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    ArgReader::new(&cfg.arguments, &ARGS).finish()?;
    Ok(Box::new(ClusterAffinity))
}

pub use crate::model::cluster_affinity::{AffinityMismatch, allows};

impl Plugin for ClusterAffinity {
    fn name(&self) -> &'static str {
        "clusteraffinity"
    }

    fn cluster_filter(&self) -> Option<&dyn ClusterFilter> {
        Some(self)
    }
}

impl ClusterFilter for ClusterAffinity {
    fn filter(&self, view: &View, job: Id, cluster: Id, _room: Room) -> Result<(), ClusterUnfit> {
        let (Some(j), Some(c)) = (view.job(job), view.snap.clusters.get(cluster)) else {
            return Ok(());
        };
        match &j.group {
            Some(g) => allows(&g.policy, c).map_err(|e| ClusterUnfit::unresolvable(e.to_string())),
            None => Ok(()),
        }
    }
}
