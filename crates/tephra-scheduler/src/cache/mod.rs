//! The scheduler cache: it takes incremental events (add, update, delete of clusters, nodes,
//! pods, PodGroups, queues and priority classes) and hands out snapshots without deep-copying
//! the world.
//!
//! The world lives behind an `Arc`, and every object inside it behind its own `Arc`. A snapshot
//! is a clone of the outer `Arc`: O(1). When an event arrives while a snapshot is still held,
//! `Arc::make_mut` copies the tables of pointers once (not the objects), and then only the
//! objects the event touches. Derived state (node usage, queue usage, the set of jobs with work
//! to place) is maintained incrementally, so opening a session never walks every pod.

pub mod backlog;
pub mod counts;
pub mod event;
pub mod follow;
mod nominations;
mod parking;
pub mod slab;
pub mod topology;
pub mod world;

#[cfg(test)]
mod tests;

use std::sync::Arc;

pub use event::{CacheError, DraChange, Event, StorageChange};
pub use follow::{Taken, ghost, ghost_name};
pub use slab::Slab;
pub use world::World;

use crate::resources::ResourceNames;

impl World {
    /// A cluster's HyperNodes resolved into domains (`None` when it has none; `topology.rs`).
    pub fn topology(&self, cluster: crate::model::Id) -> Option<Arc<topology::Topology>> {
        let name = &self.clusters.get(cluster)?.name;
        let nodes = self.cluster_nodes.get(cluster as usize)?;
        self.hypernodes.of(name, nodes, &self.nodes)
    }

    /// The job `namespace/name`, if the cache has it.
    pub fn job(&self, key: &str) -> Option<&crate::model::Job> {
        self.jobs.get(self.job_id(key)?)
    }
}

/// The cache. Feed it events; take a [`Snapshot`] per session.
#[derive(Clone, Debug, Default)]
pub struct Cache {
    world: Arc<World>,
}

impl Cache {
    /// An empty cache with the `default` and `root` queues, as Volcano always has them.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes this cache's world its own (a copy, if another cache shares it), so that the
    /// other's next change copies nothing: for a cache handed to another thread.
    pub fn detach(&mut self) {
        Arc::make_mut(&mut self.world);
    }

    /// Applies one event. On error nothing changes.
    pub fn apply(&mut self, event: Event) -> Result<(), CacheError> {
        if let Event::NodeUpsert(spec) = &event
            && self.world.cluster_id(&spec.cluster).is_none()
        {
            return Err(CacheError::UnknownCluster {
                node: spec.name.clone(),
                cluster: spec.cluster.clone(),
            });
        }
        Arc::make_mut(&mut self.world).apply(event)
    }

    /// Sets where the implicit job of a pod without a PodGroup may be placed (a runtime whose
    /// pods can only be bound in one cluster pins them there).
    pub fn set_implicit_policy(&mut self, policy: Arc<crate::model::JobPolicy>) {
        Arc::make_mut(&mut self.world).implicit_policy = policy;
    }

    /// Discovers HyperNodes from node labels too, as Volcano's label discovery does: `labels[k]`
    /// is the node label whose values make the domains of tier `k + 1`.
    pub fn discover_topology_from(&mut self, labels: Vec<String>) {
        let w = Arc::make_mut(&mut self.world);
        let clusters: Vec<String> = w.clusters.iter().map(|(_, c)| c.name.clone()).collect();
        w.hypernodes
            .discover_from(labels, clusters.iter().map(String::as_str));
        w.fleet_changed();
    }

    /// Sets the fleet's tiers above its clusters, lowest first: a hard gang allowed up to one
    /// of them may be split (when its policy allows) over clusters of one of its domains only.
    pub fn set_fleet_tiers(&mut self, tiers: Vec<crate::model::topology::FleetKey>) {
        let w = Arc::make_mut(&mut self.world);
        w.hypernodes.fleet_tiers = tiers;
        w.fleet_changed();
    }

    /// Interns resource names and parses quantities against this cache's name table.
    pub fn names_mut(&mut self) -> &mut ResourceNames {
        &mut Arc::make_mut(&mut self.world).names
    }

    /// Forgets which jobs changed, so that the next session recomputes PodGroup status only
    /// for jobs that change since ([`Cache::take`] calls it).
    pub fn clear_changed(&mut self) {
        if !self.world.changed_jobs.is_empty() {
            Arc::make_mut(&mut self.world).changed_jobs.clear();
        }
    }

    /// Sets aside the jobs a session found can never be placed (see `parking.rs`), unless
    /// they or the fleet changed since its snapshot.
    pub fn park(&mut self, park: &crate::decisions::Park) {
        if !park.jobs.is_empty() {
            Arc::make_mut(&mut self.world).park(park);
        }
    }

    /// Lets the jobs a session's votes refused rest, and wakes the others it decided a status
    /// for (see `parking.rs`); works out again what the backlog's buckets ask at least, where a
    /// job left one.
    pub fn rest(
        &mut self,
        park: &crate::decisions::Park,
        decided: &[crate::decisions::GroupStatus],
    ) {
        let wakes = decided.iter().any(|g| {
            self.world
                .job_id(&g.job)
                .is_some_and(|id| self.world.resting.contains(&id))
        });
        if !park.refused.is_empty() || wakes || self.world.backlog.stale() {
            Arc::make_mut(&mut self.world).rest(park, decided);
        }
    }

    /// Keeps the room a session reserved for late gangs
    /// ([`Decisions::nominations`](crate::Decisions::nominations)) for the next session, in
    /// place of the last one's.
    pub fn nominate<'a>(&mut self, binds: impl Iterator<Item = &'a crate::decisions::Bind>) {
        let mut binds = binds.peekable();
        if binds.peek().is_none() && self.world.nominated.is_empty() {
            // Nothing was nominated and nothing is: no copy of the world.
            return;
        }
        let next = nominations::of(&self.world, binds);
        Arc::make_mut(&mut self.world).nominated = next;
    }

    /// Brings every parked job back and wakes every resting one: call it when the scheduler
    /// configuration changes, as that may change what can be placed.
    pub fn unpark_all(&mut self) {
        if !self.world.parked.is_empty() || !self.world.resting.is_empty() {
            Arc::make_mut(&mut self.world).unpark_all();
        }
    }

    /// The current state, shared: O(1), no copy.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            world: Arc::clone(&self.world),
        }
    }

    /// Read access to the current state.
    pub fn world(&self) -> &World {
        &self.world
    }
}

/// An immutable view of the world for one session.
#[derive(Clone, Debug)]
pub struct Snapshot {
    world: Arc<World>,
}

impl std::ops::Deref for Snapshot {
    type Target = World;
    fn deref(&self) -> &World {
        &self.world
    }
}
