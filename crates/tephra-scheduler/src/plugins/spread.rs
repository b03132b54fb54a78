//! `spread`: spread constraints over cluster groups (cluster, region, zone or provider). A gang
//! that may not be split cannot satisfy `minGroups` above 1, which is reported instead of
//! silently ignored. Among allowed clusters, those in the least loaded group score highest, so
//! successive jobs spread over regions (or zones, or providers). `maxGroups` bounds how many
//! groups a split gang may use (the allocate action enforces it).

use std::collections::BTreeMap;

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::fit::{ClusterUnfit, Room};
use crate::framework::plugin::{ClusterFilter, ClusterScorer, Plugin};
use crate::framework::view::View;
use crate::model::Id;
use crate::resources::{Resources, dominant_share};

/// The `spread` plugin.
pub struct Spread {
    weight: f64,
}

/// The plugin reads `spread.weight` (default 1.0).
pub const ARGS: ArgSpec = ArgSpec {
    keys: &["spread.weight"],
    prefixes: &[],
    inert: &[],
};

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    let r = ArgReader::new(&cfg.arguments, &ARGS);
    let weight = r.f64_or("spread.weight", 1.0);
    r.finish()?;
    Ok(Box::new(Spread { weight }))
}

impl Plugin for Spread {
    fn name(&self) -> &'static str {
        "spread"
    }

    fn cluster_filter(&self) -> Option<&dyn ClusterFilter> {
        Some(self)
    }

    fn cluster_scorer(&self) -> Option<&dyn ClusterScorer> {
        Some(self)
    }
}

impl ClusterFilter for Spread {
    fn filter(&self, view: &View, job: Id, _cluster: Id, _room: Room) -> Result<(), ClusterUnfit> {
        let Some(g) = view.job(job).and_then(|j| j.group.as_ref()) else {
            return Ok(());
        };
        for c in &g.policy.spread {
            if c.min_groups > 1 && !g.policy.splittable {
                return Err(ClusterUnfit::unresolvable(format!(
                    "spreadConstraints need at least {} {:?} groups, but the gang may not be split (placement.allowGangSplit is false)",
                    c.min_groups, c.field
                )));
            }
        }
        Ok(())
    }
}

impl ClusterScorer for Spread {
    fn score(&self, view: &View, job: Id, clusters: &[Id], scores: &mut [f64]) {
        let Some(g) = view.job(job).and_then(|j| j.group.as_ref()) else {
            return;
        };
        let Some(field) = g.policy.spread.first().map(|c| c.field) else {
            return;
        };
        // Load of each group: largest used fraction over resources.
        let mut alloc: BTreeMap<String, Resources> = BTreeMap::new();
        let mut free: BTreeMap<String, Resources> = BTreeMap::new();
        for (id, c) in view.snap.clusters.iter() {
            let key = c.group_key(field);
            free.entry(key.clone())
                .or_default()
                .add(&view.state.cluster_future_idle[id as usize]);
            alloc
                .entry(key)
                .or_default()
                .add(&view.state.cluster_allocatable[id as usize]);
        }
        for (i, &cluster) in clusters.iter().enumerate() {
            let Some(c) = view.snap.clusters.get(cluster) else {
                continue;
            };
            let key = c.group_key(field);
            let (a, f) = (
                alloc.get(&key).copied().unwrap_or_default(),
                free.get(&key).copied().unwrap_or_default(),
            );
            let used = dominant_share(&a.minus(&f), &a);
            scores[i] += self.weight * 100.0 * (1.0 - used);
        }
    }
}
