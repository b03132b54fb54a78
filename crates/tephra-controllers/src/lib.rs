//! tephra's controllers, as pure functions over state (no IO, no clock). The Kubernetes
//! runtime and the simulator call the same functions.
//!
//! - [`job`]: a Volcano Job's gang plan (Volcano's defaults), and the gang the scheduler sees;
//! - [`pod`]: what one pod asks of the scheduler (requests, selectors, affinity, tolerations);
//! - [`podgroup`]: a gang's PodGroup (minMember, minTaskMember, minResources), and re-queueing;
//! - [`requeue_on_fault`]: the stand-in failover rule, until the failover chain lands.

pub mod job;
pub mod pod;
pub mod podgroup;
pub mod requeue_on_fault;
