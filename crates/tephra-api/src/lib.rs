//! tephra's API: Volcano's own `batch.volcano.sh` and `scheduling.volcano.sh` kinds, with
//! Volcano's exact field names, and tephra's multi-cluster kinds, whose names follow Karmada's.
//!
//! [`crds()`] generates every CustomResourceDefinition from these types; the committed YAML under
//! `crds/` is checked against it by the test suite.

// kube's derive takes repeated `printcolumn(..)` and `validation = ..` arguments, which
// clippy mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

#[cfg(feature = "validate")]
pub mod admission;
pub mod batch;
pub mod binding;
pub mod bus;
#[cfg(feature = "validate")]
pub mod celcheck;
pub mod checks;
pub mod cluster;
pub mod crd;
pub mod cronjob;
pub mod defaults;
pub mod flow;
pub mod names;
pub mod policy;
pub mod reasons;
mod root;
pub mod scheduling;
pub mod topology;
pub mod well_known;
pub mod work;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub use batch::{Job, JobSpec, JobStatus};
pub use bus::Command;
pub use cluster::{Cluster, ClusterSpec, ClusterStatus};
pub use cronjob::CronJob;
pub use flow::{JobFlow, JobTemplate};
pub use policy::{PropagationPolicy, PropagationPolicySpec};
pub use scheduling::{PodGroup, PodGroupSpec, PodGroupStatus, Queue, QueueSpec, QueueStatus};
pub use topology::HyperNode;
pub use work::{ResourceBinding, ResourceBindingSpec, ResourceBindingStatus};

/// Every CRD tephra serves, in a stable order, each paired with the file name it is committed
/// under in `crds/`.
pub fn crds() -> Result<Vec<(&'static str, CustomResourceDefinition)>, crd::CrdError> {
    let derived = [
        (
            "batch.volcano.sh_jobs.yaml",
            Job::crd(),
            "A Volcano batch job: a gang of tasks (roles), each a pod template with a replica count. \
             The scheduler places at least minAvailable pods together, or none.",
        ),
        (
            "batch.volcano.sh_cronjobs.yaml",
            CronJob::crd(),
            "A Volcano CronJob: a Volcano Job made on a schedule, as Kubernetes' CronJob makes \
             Jobs (time zone, concurrency policy, starting deadline, suspend, history limits).",
        ),
        (
            "flow.volcano.sh_jobtemplates.yaml",
            JobTemplate::crd(),
            "A Volcano JobTemplate: the spec of a Volcano Job, kept for JobFlows to make Jobs \
             from.",
        ),
        (
            "flow.volcano.sh_jobflows.yaml",
            JobFlow::crd(),
            "A Volcano JobFlow: Jobs made from JobTemplates, each once the flows it depends on \
             are done and its probes pass.",
        ),
        (
            "scheduling.volcano.sh_podgroups.yaml",
            scheduling::PodGroupCrd::crd(),
            "A gang of pods that the scheduler places together (at least minMember) or not at all. \
             Volcano Jobs, Kubeflow, KubeRay, Spark and MPI operators create them.",
        ),
        (
            "scheduling.volcano.sh_queues.yaml",
            scheduling::QueueCrd::crd(),
            "A queue: a share of the fleet that PodGroups are admitted through. Queues form a tree \
             through spec.parent, rooted at the queue named root.",
        ),
        (
            "bus.volcano.sh_commands.yaml",
            bus::CommandCrd::crd(),
            "A command for the controller that owns its target: vcctl job suspend and resume \
             (AbortJob, ResumeJob), queue open and close. The controller carries it out and \
             deletes it.",
        ),
        (
            "cluster.tephra.io_clusters.yaml",
            Cluster::crd(),
            "A member cluster that tephra places jobs onto. The cluster tephra runs in is the \
             member named local.",
        ),
        (
            "policy.tephra.io_propagationpolicies.yaml",
            PropagationPolicy::crd(),
            "Where the jobs it selects may be placed: allowed clusters, tolerated cluster taints, \
             spread, gang splitting and failover.",
        ),
        (
            "topology.volcano.sh_hypernodes.yaml",
            HyperNode::crd(),
            "A network-topology domain of a member cluster (Volcano's HyperNode): the nodes, or \
             the lower HyperNodes, under one switch. Tier 1 is the closest. A gang with \
             networkTopology is kept within one HyperNode of its allowed tier.",
        ),
        (
            "work.tephra.io_resourcebindings.yaml",
            ResourceBinding::crd(),
            "The scheduler's placement of one job: target clusters with per-task replicas, \
             graceful-eviction tasks, and aggregated status.",
        ),
    ];
    derived
        .into_iter()
        .map(|(file, mut crd, doc)| {
            if matches!(crd.spec.names.kind.as_str(), "PodGroup" | "Queue") {
                crd::make_spec_optional(&mut crd);
            }
            if crd.spec.names.kind == "Command" {
                crd::hoist_spec(&mut crd);
            }
            if crd.spec.names.kind == "PodGroup" {
                // Volcano's PodGroup has no status subresource: KubeRay and the Spark operator
                // create PodGroups with `status.phase: Pending`, which a status subresource
                // would drop, and controllers write status with plain updates.
                crd::drop_status_subresource(&mut crd);
            }
            Ok((file, crd::tidy(crd, doc)?))
        })
        .collect()
}
