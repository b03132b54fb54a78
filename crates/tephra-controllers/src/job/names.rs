//! The names a Job gives the objects it owns, and the reference that ties them to it: its
//! PodGroup (`<job>-<uid>`), its pods (`<job>-<task>-<index>`), and the owner reference
//! (controller, blocking the Job's deletion) that each of its objects carries.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use tephra_api::Job;

/// The name of a Job's PodGroup: `<job>-<uid>`, as Volcano names it (the Job's name alone
/// while it has no uid, as in the simulator).
pub fn podgroup_name(job: &Job) -> String {
    let name = job.metadata.name.clone().unwrap_or_default();
    match job.metadata.uid.as_deref() {
        Some(uid) if !uid.is_empty() => format!("{name}-{uid}"),
        _ => name,
    }
}

/// The name of a task's pod: `<job>-<task>-<index>`.
pub fn pod_name(job: &str, task: &str, index: u32) -> String {
    format!("{job}-{task}-{index}")
}

/// The `apiVersion` of a Volcano Job.
pub const JOB_API_VERSION: &str = "batch.volcano.sh/v1alpha1";

/// Whether a reference (an owner, a Command's target) names a Volcano Job.
pub fn names_a_job(r: &OwnerReference) -> bool {
    r.kind == "Job" && r.api_version.starts_with("batch.volcano.sh/")
}

/// The owner reference that ties an object to its Job (as the Job's controller).
pub fn owner(job: &Job) -> OwnerReference {
    OwnerReference {
        api_version: JOB_API_VERSION.into(),
        kind: "Job".into(),
        name: job.metadata.name.clone().unwrap_or_default(),
        uid: job.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}
