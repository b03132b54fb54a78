//! `spread`: spread constraints over cluster groups (cluster, region, zone or provider). A gang
//! that may not be split cannot satisfy `minGroups` above 1, which is reported instead of
//! silently ignored. Among allowed clusters, those in the least loaded group score highest, so
//! successive jobs spread over regions (or zones, or providers). `maxGroups` bounds how many
//! groups a split gang may use (the allocate action enforces it).

use std::collections::BTreeMap;

use super::{ArgError, ArgReader};
use crate::config::Args;
use crate::framework::{Plugin, View};
use crate::model::{Cluster, Id, SpreadField};
use crate::resources::Resources;

pub struct Spread {
    weight: f64,
}

impl Spread {
    pub fn new(args: &Args) -> Result<Self, ArgError> {
        let r = ArgReader::new(args, &["spread.weight"], &[])?;
        Ok(Self {
            weight: r.f64_or("spread.weight", 1.0)?,
        })
    }
}

/// The group a cluster belongs to for `field`.
pub fn group_key(cluster: &Cluster, field: SpreadField) -> String {
    match field {
        SpreadField::Cluster => cluster.name.clone(),
        SpreadField::Region => cluster.region.clone().unwrap_or_default(),
        SpreadField::Zone => cluster.zones.first().cloned().unwrap_or_default(),
        SpreadField::Provider => cluster.provider.clone().unwrap_or_default(),
    }
}

impl Plugin for Spread {
    fn name(&self) -> &'static str {
        "spread"
    }

    fn has_predicate(&self) -> bool {
        false
    }

    fn has_node_score(&self) -> bool {
        false
    }

    fn cluster_filter(&self, view: &View, job: Id, _cluster: Id) -> Result<(), String> {
        let Some(g) = view.job(job).and_then(|j| j.group.as_ref()) else {
            return Ok(());
        };
        for c in &g.policy.spread {
            if c.min_groups > 1 && !g.policy.splittable {
                return Err(format!(
                    "spreadConstraints need at least {} {:?} groups, but the gang may not be split (placement.allowGangSplit is false)",
                    c.min_groups, c.field
                ));
            }
        }
        Ok(())
    }

    fn cluster_scores(&self, view: &View, job: Id, clusters: &[Id], scores: &mut [f64]) {
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
            let key = group_key(c, field);
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
            let key = group_key(c, field);
            let (a, f) = (
                alloc.get(&key).copied().unwrap_or_default(),
                free.get(&key).copied().unwrap_or_default(),
            );
            let used = super::drf::dominant_share(&a.minus(&f), &a);
            scores[i] += self.weight * 100.0 * (1.0 - used);
        }
    }
}
