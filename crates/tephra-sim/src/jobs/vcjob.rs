//! A Volcano Job in flight, as the simulator keeps it: the API objects the job controller reads
//! and writes and the roles its pods run as ([`VcJob`]), and what can happen to one of its pods
//! ([`PodChange`]). Data only: the controller's passes over it are `jobs/mod.rs`'s.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use tephra_api::{Job, PodGroup};
use tephra_scheduler::model::TaskShape;

/// One role of a Volcano Job, as its pods run in the simulator.
pub(crate) struct Role {
    pub(super) shape: Arc<TaskShape>,
    pub(super) request: Vec<(String, String)>,
    pub(super) duration_ms: i64,
}

/// A Volcano Job in flight: the API objects the job controller reads and writes.
pub(crate) struct VcJob {
    pub(crate) job: Job,
    pub(crate) podgroup: Option<PodGroup>,
    pub(crate) pods: BTreeMap<String, Pod>,
    pub(super) roles: BTreeMap<String, Role>,
    /// The wake-up already on the agenda.
    pub(super) wake_at: Option<i64>,
}

/// What happened to a pod of a Volcano Job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PodChange {
    /// Bound to a node.
    Bound,
    /// Running.
    Started,
    /// Its gang moved off its member: it waits to be placed again ([`crate::failover`]).
    Replaced,
    /// Exited with this code.
    Finished(i32),
    /// Being evicted (preemption, reclaim, a fault).
    Evicted,
}
