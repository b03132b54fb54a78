//! The enable switches of a configured plugin, with Volcano's exact keys (including the
//! irregular `enabledOverused`, `enabledAllocatable`, `enabledVictim` and friends) plus tephra's
//! own hooks.

/// The enable switches of a plugin. `None` means enabled (Volcano's default).
#[derive(Clone, Debug, Default, PartialEq)]
#[allow(missing_docs)]
pub struct Enables {
    pub job_order: Option<bool>,
    pub hierarchy: Option<bool>,
    pub job_ready: Option<bool>,
    pub job_pipelined: Option<bool>,
    pub task_order: Option<bool>,
    pub preemptable: Option<bool>,
    pub reclaimable: Option<bool>,
    pub preemptive: Option<bool>,
    pub queue_order: Option<bool>,
    pub cluster_order: Option<bool>,
    pub predicate: Option<bool>,
    pub best_node: Option<bool>,
    pub node_order: Option<bool>,
    pub target_job: Option<bool>,
    pub reserved_nodes: Option<bool>,
    pub job_enqueued: Option<bool>,
    pub victim: Option<bool>,
    pub job_starving: Option<bool>,
    pub overused: Option<bool>,
    pub allocatable: Option<bool>,
    pub hyper_node_order: Option<bool>,
    pub sub_job_ready: Option<bool>,
    pub sub_job_pipelined: Option<bool>,
    pub sub_job_order: Option<bool>,
    pub hyper_node_gradient: Option<bool>,
    pub job_valid: Option<bool>,
    pub job_enqueueable: Option<bool>,
    pub cluster_filter: Option<bool>,
    pub cluster_score: Option<bool>,
}

impl Enables {
    /// The switch behind a Volcano key, spelled exactly as Volcano spells it.
    pub fn slot(&mut self, key: &str) -> Option<&mut Option<bool>> {
        Some(match key {
            "enableJobOrder" => &mut self.job_order,
            "enableHierarchy" => &mut self.hierarchy,
            "enableJobReady" => &mut self.job_ready,
            "enableJobPipelined" => &mut self.job_pipelined,
            "enableTaskOrder" => &mut self.task_order,
            "enablePreemptable" => &mut self.preemptable,
            "enableReclaimable" => &mut self.reclaimable,
            "enablePreemptive" => &mut self.preemptive,
            "enableQueueOrder" => &mut self.queue_order,
            "enabledClusterOrder" => &mut self.cluster_order,
            "enablePredicate" => &mut self.predicate,
            "enableBestNode" => &mut self.best_node,
            "enableNodeOrder" => &mut self.node_order,
            "enableTargetJob" => &mut self.target_job,
            "enableReservedNodes" => &mut self.reserved_nodes,
            "enableJobEnqueued" => &mut self.job_enqueued,
            "enabledVictim" => &mut self.victim,
            "enableJobStarving" => &mut self.job_starving,
            "enabledOverused" => &mut self.overused,
            "enabledAllocatable" => &mut self.allocatable,
            "enabledHyperNodeOrder" => &mut self.hyper_node_order,
            "enabledSubJobReady" => &mut self.sub_job_ready,
            "enabledSubJobPipelined" => &mut self.sub_job_pipelined,
            "enabledSubJobOrder" => &mut self.sub_job_order,
            "enabledHyperNodeGradient" => &mut self.hyper_node_gradient,
            // tephra's own hooks
            "enableJobValid" => &mut self.job_valid,
            "enableJobEnqueueable" => &mut self.job_enqueueable,
            "enableClusterFilter" => &mut self.cluster_filter,
            "enableClusterScore" => &mut self.cluster_score,
            _ => return None,
        })
    }
}

/// Switches older Volcano configurations carry that Volcano no longer reads
/// (`enableNamespaceOrder` was removed in 2023): accepted with a warning.
pub const OBSOLETE: &[&str] = &["enableNamespaceOrder"];

/// Whether an optional switch is on (absent means on).
pub fn on(switch: Option<bool>) -> bool {
    switch.unwrap_or(true)
}
