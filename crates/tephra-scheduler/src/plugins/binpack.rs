//! `binpack`: prefer nodes that are already full, to leave whole nodes free for large gangs.
//! Arguments as Volcano: `binpack.weight` (1), `binpack.cpu` (1), `binpack.memory` (1),
//! `binpack.resources` (extra resource names, comma separated) and
//! `binpack.resources.<name>` (their weights, default 1).

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::plugin::{NodeScorer, Plugin, SessionEvents};
use crate::framework::view::View;
use crate::model::{Id, Task};

/// The `binpack` plugin.
pub struct Binpack {
    weight: f64,
    /// (resource name, weight)
    resources: Vec<(String, f64)>,
    /// (slot, weight), resolved when the session opens.
    slots: Vec<(usize, f64)>,
}

/// What the plugin reads (Volcano's keys).
pub const ARGS: ArgSpec = ArgSpec {
    keys: &[
        "binpack.weight",
        "binpack.cpu",
        "binpack.memory",
        "binpack.resources",
    ],
    prefixes: &["binpack.resources."],
    inert: &[],
};

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    Ok(Box::new(Binpack::new(cfg)?))
}

impl Binpack {
    fn new(cfg: &PluginConfig) -> Result<Self, ArgErrors> {
        let r = ArgReader::new(&cfg.arguments, &ARGS);
        let resources = r.resource_weights("binpack.cpu", "binpack.memory", "binpack.resources");
        let weight = r.f64_or("binpack.weight", 1.0);
        r.finish()?;
        Ok(Self {
            weight,
            resources,
            slots: Vec::new(),
        })
    }
}

impl Plugin for Binpack {
    fn name(&self) -> &'static str {
        "binpack"
    }

    fn node_scorer(&self) -> Option<&dyn NodeScorer> {
        Some(self)
    }

    fn events(&mut self) -> Option<&mut dyn SessionEvents> {
        Some(self)
    }
}

impl SessionEvents for Binpack {
    fn opened(&mut self, view: &View) {
        self.slots = view.snap.names.weighted_slots(&self.resources);
    }
}

impl NodeScorer for Binpack {
    fn score(&self, view: &View, task: &Task, node: Id) -> f64 {
        if self.weight == 0.0 {
            return 0.0;
        }
        let Some(n) = view.node(node) else { return 0.0 };
        let idle = &view.state.nodes[node as usize].idle;
        let req = &task.spec.shape.request;
        let mut total = 0.0;
        let mut weights = 0.0;
        for &(slot, w) in &self.slots {
            if req.get(slot) == 0 {
                continue;
            }
            let cap = n.allocatable_of(slot);
            let used = cap - idle.get(slot) + req.get(slot);
            if cap <= 0 || used > cap {
                return 0.0;
            }
            total += w * used as f64 / cap as f64;
            weights += w;
        }
        if weights == 0.0 {
            return 0.0;
        }
        self.weight * 100.0 * total / weights
    }
}
