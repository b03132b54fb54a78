//! Why a PodGroup is (or is not) scheduled: the condition types, and the one-word reasons that
//! the scheduler puts on PodGroup conditions and on the events that explain a waiting job.
//!
//! Volcano's strings are used where Volcano has them (they come from
//! `scheduling.volcano.sh/v1beta1`, see [`crate::scheduling::reasons`]); the others are
//! tephra's, for waits that Volcano reports only in a message.

pub use crate::scheduling::reasons::{
    NOT_ENOUGH_PODS_OF_TASK, NOT_ENOUGH_RESOURCES, NOT_ENOUGH_TASKS, POD_DELETED, POD_FAILED,
};

/// PodGroup condition types (Volcano's `PodGroupConditionType`).
pub mod conditions {
    /// The gang was placed (Volcano's `PodGroupScheduled`).
    pub const SCHEDULED: &str = "Scheduled";
    /// The gang could not be placed (Volcano's `PodGroupUnschedulableType`).
    pub const UNSCHEDULABLE: &str = "Unschedulable";
}

/// The gang was placed and binds.
pub const SCHEDULED: &str = "Scheduled";
/// The gang was placed on resources still being released, and waits for them (pipelined).
pub const PIPELINED: &str = "Pipelined";
/// The job waited past its SLA and reserves what it can get until the whole gang fits.
pub const RESERVING: &str = "Reserving";
/// The job's queue is at or over its deserved share; its jobs wait this session.
pub const QUEUE_OVERUSED: &str = "QueueOverused";
/// The job's queue is fifo and an earlier job of it is still waiting.
pub const QUEUE_BLOCKED: &str = "QueueBlocked";
/// The job's queue does not exist, or is Closed or Closing.
pub const QUEUE_NOT_OPEN: &str = "QueueNotOpen";
/// Enqueue did not admit the job: its minResources do not fit what the fleet and its queue
/// have free. Volcano's reason, spelled as Volcano spells it, so that tooling written for
/// Volcano's PodGroup conditions keeps working.
pub const NOT_ENQUEUEABLE: &str = "NotInqueueable";
/// An admitted job could not be placed for longer than enqueue's `inqueueTimeout`: it goes
/// back to Pending, so that it stops holding its queue's admission budget.
pub const INQUEUE_TIMEOUT: &str = "InqueueTimeout";
/// Pods of the gang are held back by `spec.schedulingGates` and the gang cannot be complete
/// without them (kube-scheduler's pod condition reason for a gated pod).
pub const SCHEDULING_GATED: &str = "SchedulingGated";
