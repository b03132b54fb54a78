//! tephra's controllers, as pure functions over state (no IO, no clock). The Kubernetes
//! runtime and the simulator call the same functions.
//!
//! - [`job`]: the Volcano job controller: gang plan, state machine, policies, pods to create;
//! - [`members`]: a PodGroup someone else created and the pods that name it, as a gang plan;
//! - [`pod`]: what one pod asks of the scheduler (requests, selectors, affinity, tolerations);
//! - [`podgroup`]: a gang's PodGroup (minMember, minTaskMember, minResources), and re-queueing;
//! - [`queue`]: a Queue as the scheduler sees it (Volcano's defaults and hierarchy annotations);
//! - [`requeue_on_fault`]: the stand-in failover rule, until the failover chain lands.

pub mod job;
pub mod members;
pub mod pod;
pub mod podgroup;
pub mod propagation;
pub mod queue;
pub mod requeue_on_fault;
