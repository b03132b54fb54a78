//! tephra's controllers, as pure functions over state (no IO, no clock). The Kubernetes
//! runtime and the simulator call the same functions.
//!
//! - [`application_failover`]: which clusters a binding loses to a job that stays unhealthy there;
//! - [`bare_pod`]: Volcano's PodGroup controller: a PodGroup for a pod that comes without one;
//! - [`cluster_health`]: a member's `Ready` condition from its health probes, with thresholds;
//! - [`cluster_taints`]: a member's taints from its `Ready` condition;
//! - [`cron_schedule`]: a CronJob's schedule, and its next run in its time zone;
//! - [`cronjob`]: Volcano's CronJob controller: which Job to make, which to delete, the status;
//! - [`taint_manager`]: which clusters a binding loses to NoExecute taints it does not tolerate;
//! - [`topology`]: Volcano's HyperNodes as the scheduler reads them;
//! - [`vgpu`]: what a pod asks of shared GPUs (Volcano's vGPU resources and annotations);
//! - [`graceful_eviction`]: when the old copy of a moved gang may be deleted;
//! - [`job`]: the Volcano job controller: gang plan, state machine, policies, pods to create;
//! - [`jobflow`]: Volcano's JobFlow controller: which Jobs a flow starts, deletes, its status;
//! - [`members`]: a PodGroup someone else created and the pods that name it, as a gang plan;
//! - [`pod`]: what one pod asks of the scheduler (requests, selectors, affinity, tolerations);
//! - [`podgroup`]: a gang's PodGroup (minMember, minTaskMember, minResources), and re-queueing;
//! - [`queue`]: a Queue as the scheduler sees it (Volcano's defaults and hierarchy annotations);
//! - [`queue_state`]: Volcano's queue controller: open, closing and closed, and the counts;

pub mod application_failover;
pub mod bare_pod;
pub mod cluster_health;
pub mod cluster_taints;
pub mod cron_schedule;
pub mod cronjob;
pub mod dra;
pub mod graceful_eviction;
pub mod job;
pub mod jobflow;
pub mod members;
pub mod pod;
pub mod podgroup;
pub mod propagation;
pub mod queue;
pub mod queue_state;
pub mod storage;
pub mod taint_manager;
pub mod topology;
pub mod vgpu;
