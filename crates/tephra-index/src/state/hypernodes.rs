//! HyperNode status, as Volcano's HyperNode controller keeps it: `status.nodeCount`, the nodes
//! a HyperNode holds with its lower HyperNodes', as the cache resolves its members. Each
//! member's HyperNode objects are remembered with the count they show; a write is due when the
//! resolved count differs, once per value (a write whose result the watch has not shown yet is
//! not repeated).

use std::collections::BTreeMap;

use tephra_scheduler::cache::World;

use crate::writes::Write;

/// Each HyperNode object: (cluster, name) → the count it shows, and the count last written.
#[derive(Debug, Default)]
pub(super) struct HyperNodes(BTreeMap<(String, String), (Option<i64>, Option<i64>)>);

impl HyperNodes {
    /// A HyperNode object was seen showing `count`.
    pub(super) fn seen(&mut self, cluster: &str, name: &str, count: Option<i64>) {
        let e = self
            .0
            .entry((cluster.to_string(), name.to_string()))
            .or_default();
        e.0 = count;
        if e.1 == count {
            e.1 = None;
        }
    }

    /// A HyperNode object is gone.
    pub(super) fn gone(&mut self, cluster: &str, name: &str) {
        self.0.remove(&(cluster.to_string(), name.to_string()));
    }

    /// The status writes due: each HyperNode whose count differs from what `world` resolves.
    pub(super) fn writes(&mut self, world: &World) -> Vec<Write> {
        let mut out = Vec::new();
        for ((cluster, name), (shown, written)) in &mut self.0 {
            let count = world
                .cluster_id(cluster)
                .and_then(|c| world.topology(c))
                .and_then(|t| {
                    t.domains
                        .iter()
                        .find(|d| d.name == *name)
                        .map(|d| d.nodes.len())
                })
                .unwrap_or(0);
            let count = i64::try_from(count).unwrap_or(i64::MAX);
            if *shown == Some(count) || *written == Some(count) {
                continue;
            }
            *written = Some(count);
            out.push(Write::HyperNodeStatus {
                cluster: cluster.clone(),
                name: name.clone(),
                node_count: count,
            });
        }
        out
    }
}
