//! Well-known labels, annotations and taint keys. The Volcano keys use Volcano's exact strings,
//! because integrations and existing pods carry them.

/// Pod annotation naming the PodGroup a pod belongs to.
pub const GROUP_NAME_ANNOTATION: &str = "scheduling.k8s.io/group-name";
/// Pod label and annotation: the Volcano Job a pod belongs to.
pub const JOB_NAME: &str = "volcano.sh/job-name";
/// Pod label and annotation: namespace of that Job.
pub const JOB_NAMESPACE: &str = "volcano.sh/job-namespace";
/// Pod annotation: the task (role) of the Job the pod was created from.
pub const TASK_SPEC: &str = "volcano.sh/task-spec";
/// Pod annotation: index of the pod within its task.
pub const TASK_INDEX: &str = "volcano.sh/task-index";
/// Pod label: which partition of its task (a task with a `partitionPolicy`) the pod is in, its
/// index divided by the partition size. The PodGroup's sub-groups split pods by it.
pub const PARTITION_ID: &str = "volcano.sh/partition-id";
/// Pod label and annotation: the queue of the pod's Job.
pub const QUEUE_NAME: &str = "volcano.sh/queue-name";
/// Pod annotation: whether the pod may be preempted or reclaimed (`"true"` or `"false"`;
/// default true).
pub const PREEMPTABLE: &str = "volcano.sh/preemptable";
/// Pod annotation: the Job version (restart count) the pod was created for.
pub const JOB_VERSION: &str = "volcano.sh/job-version";
/// Pod annotation: the Job's retry count when the pod was created.
pub const JOB_RETRY_COUNT: &str = "volcano.sh/job-retry-count";
/// Pod annotation: the pod's template (`<job>-<task>`), an equivalence class of pods.
pub const TEMPLATE_UID: &str = "volcano.sh/template-uid";
/// Pod annotation the job controller sets before it deletes a pod itself: the pod's failure or
/// deletion is then not an event for the Job's lifecycle policies.
pub const OUT_OF_SYNC: &str = "volcano.sh/controller-out-of-sync";
/// Node label grouping nodes for queue affinity.
pub const NODE_GROUP_NAME: &str = "volcano.sh/nodegroup-name";
/// The scheduler name that Volcano workloads ask for.
pub const VOLCANO_SCHEDULER_NAME: &str = "volcano";

/// Pod annotation: the member cluster tephra planned the pod for.
pub const PLANNED_CLUSTER: &str = "tephra.io/planned-cluster";
/// Pod annotation: the node tephra planned the pod for; the extender binds it there, and a
/// member's tephra scheduler tries it first.
pub const PLANNED_NODE: &str = "tephra.io/planned-node";
/// Volcano Job annotation: the node planned for each pod of each task, a JSON object of task
/// name to node names by pod index (`{"worker": ["n-3", "n-1"]}`). tephra's Karmada mode puts
/// it on the member's copy of the Job (through an OverridePolicy); the job controller writes
/// each pod's [`PLANNED_NODE`] from it.
pub const PLANNED_NODES: &str = "tephra.io/planned-nodes";
/// Pod annotation on a member's copy: the uid of the pod declared on the control plane that it
/// is a copy of. A copy whose declared pod is gone, or was made anew (a new uid), is deleted.
pub const DECLARED_UID: &str = "tephra.io/declared-uid";
/// PodGroup annotation the job controller sets: the largest request of any one pod of the Job
/// (per resource, a JSON object of quantities), so that the scheduler can tell a task larger than
/// any node before the pods exist (a Volcano Job's pods are created once its PodGroup is
/// admitted).
pub const LARGEST_TASK_REQUEST: &str = "tephra.io/largest-task-request";
/// Pod annotation on a member's copy (`bindingMode: Extender`): its gang's minMember, for the
/// extender's barrier.
pub const GANG_MIN_MEMBER: &str = "tephra.io/gang-min-member";
/// Pod annotation on a member's copy (`bindingMode: Extender`): its gang's per-role minimums,
/// a JSON object.
pub const GANG_MIN_TASK_MEMBER: &str = "tephra.io/gang-min-task-member";
/// The scheduler name of a member's copy under `bindingMode: Extender`: the member's own
/// kube-scheduler places it, through tephra's extender.
pub const MEMBER_SCHEDULER: &str = "default-scheduler";
/// Cluster annotation: the schedulerName its copies get under `bindingMode: Extender` when the
/// kube-scheduler profile that calls tephra's extender is not the member's `default-scheduler`
/// (the chart's extender example runs one named `tephra-extender`).
pub const MEMBER_SCHEDULER_NAME: &str = "tephra.io/member-scheduler-name";
/// Annotation on objects tephra created in a member: the control-plane object they come from.
pub const SOURCE_OBJECT: &str = "tephra.io/source";
/// Pod or PodGroup annotation: how long it runs (Go duration), for expected start times.
pub const EXPECTED_DURATION: &str = "tephra.io/expected-duration";
/// PodGroup annotation the scheduler writes on a waiting job: its expected start (RFC 3339),
/// or `after <time>` when it does not start within the forecast's horizon.
pub const EXPECTED_START: &str = "tephra.io/expected-start";
/// PodGroup annotation saying what its expected start assumes: how sure it is and which
/// running jobs it assumes end first, with where each expected run comes from.
pub const EXPECTED_START_BASIS: &str = "tephra.io/expected-start-basis";
/// Simulator annotation on a Job manifest: when it is submitted (a duration such as `10m`).
pub const SIM_SUBMIT_AT: &str = "tephra.io/sim-submit-at";
/// Simulator annotation on a Job manifest: how long its pods run (a duration such as `2h`).
pub const SIM_DURATION: &str = "tephra.io/sim-duration";
/// On a Job a CronJob made: the CronJob's name (tephra's controller writes it; Volcano's
/// copies only the template's). The job controller carries it to the PodGroup, so the
/// scheduler and the UI can say which CronJob a job came from.
pub const CREATED_BY_CRONJOB: &str = "tephra.io/created-by-cronjob";
/// How a simulated pod ends: its exit code (0 succeeds). Read by `tephra dev`'s kubelets.
pub const SIM_EXIT_CODE: &str = "tephra.io/sim-exit-code";

/// Label tephra sets on a pod declared on the control plane (fleet mode): the member cluster
/// whose copy of it counts now; absent while it waits to be placed. `kubectl get pods -L
/// tephra.io/member` shows it as a column and `-l tephra.io/member=NAME` selects by it.
pub const MEMBER: &str = "tephra.io/member";

/// Label of the fleet's virtual node: the Node on the control plane that declared pods are
/// bound to once a member has their copy (tephra serves its kubelet endpoint).
pub const VIRTUAL_NODE: &str = "tephra.io/virtual-node";

/// Cluster taint added while a member's Ready condition is False.
pub const TAINT_CLUSTER_NOT_READY: &str = "cluster.tephra.io/not-ready";
/// Cluster taint added while a member's Ready condition is Unknown (unreachable).
pub const TAINT_CLUSTER_UNREACHABLE: &str = "cluster.tephra.io/unreachable";
/// Cluster taint added while a member is being terminated.
pub const TAINT_CLUSTER_TERMINATING: &str = "cluster.tephra.io/terminating";

/// Well-known resource names.
pub mod resources {
    /// CPU, in cores (quantities such as `500m`).
    pub const CPU: &str = "cpu";
    /// Memory, in bytes.
    pub const MEMORY: &str = "memory";
    /// Pod slots.
    pub const PODS: &str = "pods";
    /// NVIDIA GPUs, whole devices.
    pub const NVIDIA_GPU: &str = "nvidia.com/gpu";
    /// Node label naming the GPU model.
    pub const GPU_PRODUCT_LABEL: &str = "nvidia.com/gpu.product";
}

/// A declared pod's `PodScheduled` condition once a member runs its copy (fleet mode): reason
/// [`placed::REASON`], and a message naming the member, the node and the `kubectl` command for
/// its logs (the control plane's pod has no node, so `kubectl logs` there cannot serve them).
/// The index writes it; `tephra job view` reads the member and node back.
pub mod placed {
    /// The condition's reason.
    pub const REASON: &str = "PlacedInMember";

    /// The condition's message for pod `namespace/name` running in `cluster` on `node`.
    pub fn message(cluster: &str, node: &str, namespace: &str, name: &str) -> String {
        format!(
            "running in member cluster {cluster} on node {node}; its logs: kubectl --context \
             {cluster} logs -n {namespace} {name}"
        )
    }

    /// The member and node a [`message`] names.
    pub fn parse(message: &str) -> Option<(&str, &str)> {
        let rest = message.strip_prefix("running in member cluster ")?;
        let (cluster, rest) = rest.split_once(" on node ")?;
        let node = rest.split(';').next()?.trim();
        (!cluster.is_empty() && !node.is_empty()).then_some((cluster, node))
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn the_member_and_node_are_read_back_from_the_message() {
            let m = super::message("us-east", "gpu-3", "ml", "train-worker-0");
            assert_eq!(super::parse(&m), Some(("us-east", "gpu-3")));
            assert!(m.ends_with("kubectl --context us-east logs -n ml train-worker-0"));
            assert_eq!(super::parse("waits for a node"), None);
        }
    }
}
