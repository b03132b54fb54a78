//! The node-class index: the nodes of each cluster grouped by which extended resources (GPUs,
//! ...) they offer and whether they reach any DRA device, so that a scan skips whole classes
//! that lack what a task asks for. Each class keeps where its next scan starts (round robin, as
//! kube-scheduler does).
//!
//! A [`Placer`] holds the index for one session; actions get it next to the session.

use crate::framework::session::Session;
use crate::model::Id;
use crate::resources::{MAX_RESOURCES, Resources};

/// Nodes of one cluster that offer the same set of extended resources.
#[derive(Clone, Debug, Default)]
pub struct NodeClass {
    /// Bit `i` set when the nodes offer slot `i` (extended slots only).
    pub mask: u32,
    /// Whether the nodes have GPUs.
    pub gpu: bool,
    /// Whether the nodes reach a ResourceSlice (DRA devices).
    pub devices: bool,
    /// Node slots.
    pub nodes: Vec<Id>,
    /// Where the next scan starts.
    pub start: usize,
}

/// The extended-resource bit mask of a vector: bit `i` for every slot `i >= 3` above zero.
pub fn extended_mask(r: &Resources) -> u32 {
    (3..MAX_RESOURCES)
        .filter(|i| r.get(*i) > 0)
        .fold(0, |m, i| m | (1 << i))
}

/// Placement's own state for one session: the node classes of every cluster, with their scan
/// positions.
#[derive(Clone, Debug, Default)]
pub struct Placer {
    classes: Vec<Vec<NodeClass>>,
}

impl Placer {
    /// Groups the nodes of every cluster of the session's snapshot, classes without GPUs or
    /// devices first, then those with the fewest extended resources: O(nodes).
    pub fn new(ssn: &Session) -> Self {
        let snap = &ssn.snap;
        let mut all = vec![Vec::new(); snap.clusters.capacity()];
        for (cluster, nodes) in snap.cluster_nodes.iter().enumerate() {
            let mut classes: Vec<NodeClass> = Vec::new();
            for &n in nodes {
                let Some(node) = snap.nodes.get(n) else {
                    continue;
                };
                let mask = extended_mask(&node.spec.allocatable);
                let devices = snap.dra.get(&node.spec.cluster).is_some_and(|d| {
                    d.slices_for(&node.spec.name, &node.spec.labels)
                        .next()
                        .is_some()
                });
                match classes
                    .iter_mut()
                    .find(|c| c.mask == mask && c.devices == devices)
                {
                    Some(c) => c.nodes.push(n),
                    None => classes.push(NodeClass {
                        mask,
                        gpu: node.has_gpu,
                        devices,
                        nodes: vec![n],
                        start: 0,
                    }),
                }
            }
            classes.sort_by_key(|c| (c.gpu, c.devices, c.mask.count_ones(), c.mask));
            if let Some(slot) = all.get_mut(cluster) {
                *slot = classes;
            }
        }
        Self { classes: all }
    }

    /// The classes of a cluster, if it has any.
    pub fn classes_mut(&mut self, cluster: Id) -> Option<&mut Vec<NodeClass>> {
        self.classes.get_mut(cluster as usize)
    }

    /// Where each class of a cluster starts its next scan.
    pub fn starts(&self, cluster: Id) -> Vec<usize> {
        self.classes
            .get(cluster as usize)
            .map(|c| c.iter().map(|class| class.start).collect())
            .unwrap_or_default()
    }

    /// Sets where each class of a cluster starts its next scan (as [`Placer::starts`] gave).
    pub fn set_starts(&mut self, cluster: Id, starts: &[usize]) {
        if let Some(classes) = self.classes.get_mut(cluster as usize) {
            for (class, start) in classes.iter_mut().zip(starts) {
                class.start = *start;
            }
        }
    }
}
