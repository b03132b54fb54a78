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
    pub(super) request: crate::workload::Request,
    pub(super) duration_ms: i64,
    /// The shape of each partition's pods (`partitionPolicy`): the role's, labelled with its
    /// `volcano.sh/partition-id` as the job controller labels the pods.
    pub(super) partitions: BTreeMap<String, Arc<TaskShape>>,
}

impl Role {
    /// The shape of a pod of this role labelled `labels` by the job controller: the role's,
    /// or its partition's.
    pub(super) fn shape_for(&mut self, labels: &BTreeMap<String, String>) -> Arc<TaskShape> {
        let Some(p) = labels.get(tephra_api::well_known::PARTITION_ID) else {
            return Arc::clone(&self.shape);
        };
        let role = &self.shape;
        Arc::clone(self.partitions.entry(p.clone()).or_insert_with(|| {
            let mut shape = TaskShape::clone(role);
            shape
                .rules
                .labels
                .insert(tephra_api::well_known::PARTITION_ID.to_string(), p.clone());
            Arc::new(shape)
        }))
    }
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
