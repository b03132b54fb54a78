//! What a session changes, kept apart from the snapshot it reads: a per-node accounting vector
//! (copied from the snapshot's maintained totals, O(nodes)), per-cluster aggregates, each
//! queue's holdings, PodGroup phases set by enqueue, and an overlay of the tasks the session
//! touched, with the change it made to each job's task tally.
//!
//! The overlay is changed only through [`State::set_task`], which keeps the tallies right, so
//! that reading counts never needs a cache of its own.

use std::collections::BTreeMap;

use std::sync::Arc;

use crate::cache::Snapshot;
use crate::cache::topology::Topology;
use crate::hash::HashMap;
use crate::model::{GroupPhase, Id, Job, TaskStatus, TaskTally};
use crate::resources::Resources;

/// Accounting of one node within a session.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NodeState {
    /// Allocatable minus everything held (including this session's allocations).
    pub idle: Resources,
    /// Held by releasing tasks.
    pub releasing: Resources,
    /// Reserved by pipelined tasks.
    pub pipelined: Resources,
}

impl NodeState {
    /// Free once releasing tasks finish, less what is pipelined.
    #[inline(always)]
    pub fn future_idle(&self) -> Resources {
        self.idle.plus(&self.releasing).minus(&self.pipelined)
    }

    /// Whether `request` fits in [`future_idle`](Self::future_idle) (the first slot it does
    /// not fit in otherwise), without making the whole vector; `slots`: how many resource
    /// names are interned.
    #[inline(always)]
    pub fn future_fits(&self, request: &Resources, slots: usize) -> Result<(), usize> {
        request.fits_in_sum(slots, &self.idle, &self.releasing, &self.pipelined)
    }
}

/// Room held on one node for one pod (`holds.rs`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hold {
    /// The pod.
    pub task: Id,
    /// The node.
    pub node: Id,
    /// Taken from the node's free resources.
    pub idle: Resources,
    /// Reserved against what frees up later.
    pub later: Resources,
}

/// A task's place in the session's overlay: its status and node.
pub type Placed = (TaskStatus, Option<Id>);

/// Session-local state.
#[derive(Clone, Debug, Default)]
pub struct State {
    /// Per node slot.
    pub nodes: Vec<NodeState>,
    overlay: HashMap<Id, Placed>,
    /// What the overlay changed in each job's task tally, by job slot (up to the highest slot
    /// changed: a session that places nothing pays nothing for a large backlog).
    tally_delta: Vec<TaskTally>,
    /// Sum of future idle per cluster slot.
    pub cluster_future_idle: Vec<Resources>,
    /// Upper bound of any single node's future idle per cluster slot (only shrinks during a
    /// session, so it never prunes a cluster that could fit).
    pub cluster_max_node_idle: Vec<Resources>,
    /// Resources held by each queue, including this session's allocations.
    pub queue_allocated: BTreeMap<String, Resources>,
    /// PodGroup phases changed in this session (enqueue).
    pub phases: HashMap<Id, GroupPhase>,
    /// Sum of allocatable per cluster slot (every node, ready or not).
    pub cluster_allocatable: Vec<Resources>,
    /// The most of each resource one node of the cluster has (every node, ready or not).
    pub cluster_node_max: Vec<Resources>,
    /// Sum of allocatable over ready nodes of ready clusters: what fair-share plugins divide.
    pub fleet_total: Resources,
    /// Room held for jobs, by job (`holds.rs`).
    pub holds: BTreeMap<Id, Vec<Hold>>,
    /// Claims in use and what the session gave claims (`volumes.rs`).
    pub volumes: super::volumes::VolumeState,
    /// Devices held and what the session allocated (`devices.rs`).
    pub devices: super::devices::DeviceState,
    /// Shared GPUs in use and what the session gave pods (`gpus.rs`).
    pub gpus: super::gpus::GpuState,
    /// Each cluster slot's network topology (`None`: it has no HyperNodes).
    pub topologies: Vec<Option<Arc<Topology>>>,
    /// Sum of future idle of each domain of each cluster slot, kept as the cluster sums are:
    /// placement skips domains that cannot hold a gang without walking their nodes.
    pub domain_future_idle: Vec<Vec<Resources>>,
    /// Sum of allocatable of each domain of each cluster slot (what a HyperNode-level
    /// bin-packing score divides by).
    pub domain_allocatable: Vec<Vec<Resources>>,
}

/// For each cluster slot's topology, the sum of `of(node)` over each domain's nodes.
fn per_domain(
    topologies: &[Option<Arc<Topology>>],
    of: impl Fn(Id) -> Resources,
) -> Vec<Vec<Resources>> {
    topologies
        .iter()
        .map(|t| {
            t.as_ref().map_or_else(Vec::new, |t| {
                t.domains
                    .iter()
                    .map(|d| {
                        d.nodes.iter().fold(Resources::ZERO, |mut sum, &n| {
                            sum.add(&of(n));
                            sum
                        })
                    })
                    .collect()
            })
        })
        .collect()
}

impl State {
    /// The state of a session opening on `snap`: O(nodes), no copy of pods.
    pub fn open(snap: &Snapshot) -> Self {
        let mut state = State {
            nodes: vec![NodeState::default(); snap.nodes.capacity()],
            cluster_future_idle: vec![Resources::ZERO; snap.clusters.capacity()],
            cluster_max_node_idle: vec![Resources::ZERO; snap.clusters.capacity()],
            queue_allocated: snap.queue_used.clone(),
            cluster_allocatable: vec![Resources::ZERO; snap.clusters.capacity()],
            cluster_node_max: vec![Resources::ZERO; snap.clusters.capacity()],
            volumes: super::volumes::VolumeState::open(snap),
            devices: super::devices::DeviceState::open(snap),
            gpus: super::gpus::GpuState::open(snap),
            ..State::default()
        };
        for (id, node) in snap.nodes.iter() {
            let alloc = node.allocatable();
            let ns = NodeState {
                idle: alloc.minus(&node.used),
                releasing: node.releasing,
                pipelined: Resources::ZERO,
            };
            let c = node.cluster as usize;
            state.cluster_allocatable[c].add(&alloc);
            state.cluster_node_max[c] = state.cluster_node_max[c].max(&alloc);
            if node.spec.ready && snap.clusters.get(node.cluster).is_some_and(|c| c.ready) {
                state.fleet_total.add(&alloc);
            }
            // An over-used node (allocatable shrank under running pods) offers nothing, and
            // must not hide what other nodes of the cluster have free.
            let fi = ns.future_idle().max(&Resources::ZERO);
            state.cluster_future_idle[c].add(&fi);
            state.cluster_max_node_idle[c] = state.cluster_max_node_idle[c].max(&fi);
            state.nodes[id as usize] = ns;
        }
        state.topologies = (0..snap.clusters.capacity())
            .map(|c| snap.topology(c as Id))
            .collect();
        let idle = |n: Id| state.nodes[n as usize].future_idle().max(&Resources::ZERO);
        state.domain_future_idle = per_domain(&state.topologies, idle);
        let alloc = |n: Id| {
            snap.nodes
                .get(n)
                .map_or(Resources::ZERO, |n| n.allocatable())
        };
        state.domain_allocatable = per_domain(&state.topologies, alloc);
        state
    }

    /// Adds `delta` to the future idle of every domain holding `node` (of cluster slot `c`), as
    /// the cluster's sum changes by it.
    #[inline]
    pub fn domains_add(&mut self, c: usize, node: Id, delta: &Resources) {
        let Some(Some(t)) = self.topologies.get(c) else {
            return;
        };
        if let (Some(ds), Some(sums)) = (
            t.node_domains.get(&node),
            self.domain_future_idle.get_mut(c),
        ) {
            for &d in ds {
                if let Some(s) = sums.get_mut(d as usize) {
                    s.add(delta);
                }
            }
        }
    }

    /// The session status of a task.
    #[inline]
    pub fn status(&self, snap: &Snapshot, id: Id) -> TaskStatus {
        match self.overlay.get(&id) {
            Some((s, _)) => *s,
            None => snap
                .tasks
                .get(id)
                .map_or(TaskStatus::Unknown, |t| t.spec.status),
        }
    }

    /// The node of a task in this session.
    #[inline]
    pub fn task_node(&self, snap: &Snapshot, id: Id) -> Option<Id> {
        match self.overlay.get(&id) {
            Some((_, n)) => *n,
            None => snap.tasks.get(id).and_then(|t| t.node),
        }
    }

    /// The task's overlay entry, if the session changed it.
    #[inline]
    pub fn overlay(&self, id: Id) -> Option<Placed> {
        self.overlay.get(&id).copied()
    }

    /// Sets (`Some`) or drops (`None`) a task's overlay entry, keeping its job's tally right.
    pub fn set_task(&mut self, snap: &Snapshot, id: Id, placed: Option<Placed>) {
        let before = self.status(snap, id);
        match placed {
            Some(p) => self.overlay.insert(id, p),
            None => self.overlay.remove(&id),
        };
        let after = self.status(snap, id);
        if before != after
            && let Some(job) = snap.tasks.get(id).map(|t| t.job as usize)
        {
            if self.tally_delta.len() <= job {
                self.tally_delta.resize(job + 1, TaskTally::default());
            }
            let delta = &mut self.tally_delta[job];
            delta.count(before, -1);
            delta.count(after, 1);
        }
    }

    /// The job's task tally in this session: the cache's, plus what the session changed.
    #[inline]
    pub fn tally(&self, job: &Job, id: Id) -> TaskTally {
        match self.tally_delta.get(id as usize) {
            Some(delta) => job.tally.plus(delta),
            None => job.tally,
        }
    }

    /// The phase of a job's PodGroup in this session.
    pub fn phase(&self, snap: &Snapshot, job: Id) -> Option<GroupPhase> {
        self.phases.get(&job).copied().or_else(|| {
            snap.jobs
                .get(job)
                .and_then(|j| j.group.as_ref().map(|g| g.phase))
        })
    }
}
