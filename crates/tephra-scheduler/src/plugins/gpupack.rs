//! `gpupack`: whole-GPU placement. A GPU task prefers the node where its GPUs leave the least
//! free (best fit) and nodes already holding tasks of the same job, so one job lands on few
//! nodes and whole GPU nodes stay free for large gangs. A CPU-only task gets a negative score
//! on GPU nodes, so it goes to CPU nodes while any can take it (and to a GPU node only when
//! none can). In a cluster whose nodes all have GPUs there is nothing to prefer, and no
//! penalty: it would only push every node's score below zero. GPU model selection is by node
//! label, e.g. `nodeSelector: {nvidia.com/gpu.product: A100}`, which the predicates enforce.
//!
//! Arguments: `gpupack.weight` (default 10).

use std::sync::OnceLock;

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::plugin::{NodeScorer, Plugin, SessionEvents};
use crate::framework::view::View;
use crate::hash::HashMap;
use crate::model::{Id, Task};

/// The `gpupack` plugin.
pub struct GpuPack {
    weight: f64,
    gpu_slots: Vec<usize>,
    /// By cluster slot: the cluster has a node without GPUs (found when first needed: most
    /// sessions score no CPU task on a GPU node).
    has_cpu_nodes: OnceLock<Vec<bool>>,
    /// (job, node) → tasks of the job placed there.
    job_nodes: HashMap<(Id, Id), u32>,
}

/// The plugin reads `gpupack.weight` (default 10.0).
pub const ARGS: ArgSpec = ArgSpec {
    keys: &["gpupack.weight"],
    prefixes: &[],
    inert: &[],
};

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    let r = ArgReader::new(&cfg.arguments, &ARGS);
    let weight = r.f64_or("gpupack.weight", 10.0);
    r.finish()?;
    Ok(Box::new(GpuPack {
        weight,
        gpu_slots: Vec::new(),
        has_cpu_nodes: OnceLock::new(),
        job_nodes: HashMap::default(),
    }))
}

impl GpuPack {
    fn cluster_has_cpu_nodes(&self, view: &View, cluster: Id) -> bool {
        let found = self.has_cpu_nodes.get_or_init(|| {
            let mut found = vec![false; view.snap.clusters.capacity()];
            for (_, n) in view.snap.nodes.iter() {
                if !n.has_gpu
                    && let Some(c) = found.get_mut(n.cluster as usize)
                {
                    *c = true;
                }
            }
            found
        });
        found.get(cluster as usize).copied().unwrap_or(false)
    }

    fn requests_gpu(&self, task: &Task) -> bool {
        self.gpu_slots
            .iter()
            .any(|s| task.spec.shape.request.get(*s) > 0)
    }
}

impl Plugin for GpuPack {
    fn name(&self) -> &'static str {
        "gpupack"
    }

    fn node_scorer(&self) -> Option<&dyn NodeScorer> {
        Some(self)
    }

    fn events(&mut self) -> Option<&mut dyn SessionEvents> {
        Some(self)
    }
}

impl SessionEvents for GpuPack {
    fn opened(&mut self, view: &View) {
        self.gpu_slots = (0..view.snap.names.len())
            .filter(|&i| view.snap.names.is_gpu(i))
            .collect();
        self.has_cpu_nodes = OnceLock::new();
        for &job in &view.snap.active_jobs {
            let Some(j) = view.job(job) else { continue };
            if view.state.tally(j, job).holds_nothing() {
                continue;
            }
            for &t in &j.tasks {
                if let Some(node) = view.task_node(t)
                    && view.status(t).holds_node()
                {
                    *self.job_nodes.entry((job, node)).or_insert(0) += 1;
                }
            }
        }
    }

    fn allocated(&mut self, view: &View, task: Id) {
        if let (Some(t), Some(node)) = (view.task(task), view.task_node(task)) {
            *self.job_nodes.entry((t.job, node)).or_insert(0) += 1;
        }
    }

    fn deallocated(&mut self, view: &View, task: Id) {
        if let (Some(t), Some(node)) = (view.task(task), view.task_node(task))
            && let Some(c) = self.job_nodes.get_mut(&(t.job, node))
        {
            *c = c.saturating_sub(1);
            if *c == 0 {
                self.job_nodes.remove(&(t.job, node));
            }
        }
    }
}

impl NodeScorer for GpuPack {
    fn score(&self, view: &View, task: &Task, node: Id) -> f64 {
        let Some(n) = view.node(node) else { return 0.0 };
        if !self.requests_gpu(task) {
            return if n.has_gpu && self.cluster_has_cpu_nodes(view, n.cluster) {
                -100.0 * self.weight
            } else {
                0.0
            };
        }
        let alloc = n.allocatable();
        let idle = view.state.nodes[node as usize].idle;
        let mut fill = 0.0;
        let mut count = 0.0;
        for &s in &self.gpu_slots {
            let req = task.spec.shape.request.get(s);
            let cap = alloc.get(s);
            if req == 0 || cap <= 0 {
                continue;
            }
            fill += (cap - idle.get(s) + req) as f64 / cap as f64;
            count += 1.0;
        }
        let packing = if count > 0.0 {
            100.0 * fill / count
        } else {
            0.0
        };
        let together = if self.job_nodes.contains_key(&(task.job, node)) {
            50.0
        } else {
            0.0
        };
        self.weight * (packing + together)
    }
}
