//! `cost`: prefer the cluster where the gang costs least per hour, from each Cluster's
//! `spec.price` (per core of cpu, per GiB of memory, per unit of anything else). The cheapest
//! candidate scores 100, others in proportion; a cluster without prices scores 50.
//!
//! Arguments: `cost.weight` (default 1).

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::plugin::{ClusterScorer, Plugin};
use crate::framework::view::View;
use crate::model::Id;
use crate::placement::gang::job_needs;
use crate::resources::{CPU, MEMORY};

/// The `cost` plugin.
pub struct Cost {
    weight: f64,
}

/// The plugin reads `cost.weight` (default 1.0).
pub const ARGS: ArgSpec = ArgSpec {
    keys: &["cost.weight"],
    prefixes: &[],
    inert: &[],
};

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    let r = ArgReader::new(&cfg.arguments, &ARGS);
    let weight = r.f64_or("cost.weight", 1.0);
    r.finish()?;
    Ok(Box::new(Cost { weight }))
}

impl Plugin for Cost {
    fn name(&self) -> &'static str {
        "cost"
    }

    fn cluster_scorer(&self) -> Option<&dyn ClusterScorer> {
        Some(self)
    }
}

impl ClusterScorer for Cost {
    fn score(&self, view: &View, job: Id, clusters: &[Id], scores: &mut [f64]) {
        let (need, _) = job_needs(view, job);
        let costs: Vec<Option<f64>> = clusters
            .iter()
            .map(|&c| {
                let cluster = view.snap.clusters.get(c)?;
                if cluster.price.is_empty() {
                    return None;
                }
                let mut total = 0.0;
                for (name, price) in &cluster.price {
                    let Some(slot) = view.snap.names.get(name) else {
                        continue;
                    };
                    let amount = need.get(slot) as f64;
                    let units = match slot {
                        CPU => amount / 1000.0,
                        MEMORY => amount / (1u64 << 30) as f64,
                        _ => amount,
                    };
                    total += price * units;
                }
                Some(total)
            })
            .collect();
        let cheapest = costs
            .iter()
            .flatten()
            .copied()
            .fold(f64::INFINITY, f64::min);
        for (i, cost) in costs.iter().enumerate() {
            let s = match cost {
                None => 50.0,
                Some(c) if *c <= 0.0 || !cheapest.is_finite() => 100.0,
                Some(c) => 100.0 * cheapest / c,
            };
            scores[i] += self.weight * s;
        }
    }
}
