//! The node-class index: the nodes of each cluster grouped by which extended resources (GPUs,
//! ...) they offer and whether they reach any DRA device, so that a scan skips whole classes
//! that lack what a task asks for. Each class keeps where its next scan starts (round robin, as
//! kube-scheduler does).
//!
//! A [`Placer`] holds the index for one session; actions get it next to the session. A gang
//! kept within one network-topology domain scans that domain's own classes, made on first use.

use crate::cache::Snapshot;
use crate::framework::session::Session;
use crate::hash::HashMap;
use crate::model::Id;
use crate::resources::{MAX_RESOURCES, Resources};

/// Where a gang is being placed: a whole cluster, or one network-topology domain of it (an index
/// into the cluster's [`Topology`](crate::cache::topology::Topology) domains).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Within {
    /// The cluster.
    pub cluster: Id,
    /// The domain, if the gang must stay in one.
    pub domain: Option<usize>,
}

impl Within {
    /// The whole cluster.
    pub fn cluster(cluster: Id) -> Self {
        Self {
            cluster,
            domain: None,
        }
    }
}

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
    domains: HashMap<(Id, usize), Vec<NodeClass>>,
}

/// Groups nodes into classes, those without GPUs or devices first, then those with the fewest
/// extended resources: O(nodes).
fn classify(snap: &Snapshot, nodes: &[Id]) -> Vec<NodeClass> {
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
    classes
}

impl Placer {
    /// Groups the nodes of every cluster of the session's snapshot, classes without GPUs or
    /// devices first, then those with the fewest extended resources: O(nodes).
    pub fn new(ssn: &Session) -> Self {
        let snap = &ssn.snap;
        let mut all = vec![Vec::new(); snap.clusters.capacity()];
        for (cluster, nodes) in snap.cluster_nodes.iter().enumerate() {
            if let Some(slot) = all.get_mut(cluster) {
                *slot = classify(snap, nodes);
            }
        }
        Self {
            classes: all,
            domains: HashMap::default(),
        }
    }

    /// The classes of a cluster, or of one of its domains (made on first use), if it has any.
    pub fn classes_mut(&mut self, snap: &Snapshot, at: Within) -> Option<&mut Vec<NodeClass>> {
        match at.domain {
            None => self.classes.get_mut(at.cluster as usize),
            Some(d) => match self.domains.entry((at.cluster, d)) {
                std::collections::hash_map::Entry::Occupied(e) => Some(e.into_mut()),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let topology = snap.topology(at.cluster)?;
                    let domain = topology.domains.get(d)?;
                    Some(e.insert(classify(snap, &domain.nodes)))
                }
            },
        }
    }

    /// Where each class of a cluster, and of each of its domains, starts its next scan.
    pub fn starts(&self, cluster: Id) -> Starts {
        let of = |c: &[NodeClass]| c.iter().map(|class| class.start).collect::<Vec<_>>();
        Starts {
            cluster: self
                .classes
                .get(cluster as usize)
                .map(|c| of(c))
                .unwrap_or_default(),
            domains: self
                .domains
                .iter()
                .filter(|((c, _), _)| *c == cluster)
                .map(|(&(_, d), classes)| (d, of(classes)))
                .collect(),
        }
    }

    /// Sets where each class of a cluster and of its domains starts its next scan, as
    /// [`Placer::starts`] gave; a domain first scanned since starts afresh.
    pub fn set_starts(&mut self, cluster: Id, starts: &Starts) {
        let set = |classes: &mut [NodeClass], to: Option<&Vec<usize>>| {
            for (i, class) in classes.iter_mut().enumerate() {
                class.start = to.and_then(|s| s.get(i)).copied().unwrap_or(0);
            }
        };
        if let Some(classes) = self.classes.get_mut(cluster as usize) {
            set(classes, Some(&starts.cluster));
        }
        for ((c, d), classes) in self.domains.iter_mut() {
            if *c == cluster {
                set(classes, starts.domains.get(d));
            }
        }
    }
}

/// Where the scans of one cluster's classes start ([`Placer::starts`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Starts {
    cluster: Vec<usize>,
    domains: HashMap<usize, Vec<usize>>,
}
