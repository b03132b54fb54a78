//! Volcano's job plugins (`spec.plugins`), with Volcano's names, arguments and effects, one
//! file each: [`env`], [`svc`], [`pytorch`], [`mpi`] and [`ssh`] (its key pair's format in
//! [`ssh_key`]). [`plugin`] says what a plugin is; [`REGISTRY`] lists them in the order they
//! apply to a pod. The names a Job may give are [`tephra_api::batch::JOB_PLUGINS`] (the CRD's
//! CEL rule is made from that list); `tensorflow`, `ray` and `hcclrank` are accepted there and
//! not applied yet ([`NOT_APPLIED`]).
//!
//! To add a plugin: a file here with a type implementing [`JobPlugin`], an entry in
//! [`REGISTRY`], and its name in `JOB_PLUGINS`.

pub mod env;
pub mod mpi;
pub mod plugin;
pub mod pytorch;
pub mod shared;
pub mod ssh;
pub mod ssh_key;
pub mod svc;

use k8s_openapi::api::core::v1::PodSpec;
use tephra_api::Job;

pub use plugin::{Ctx, Flags, JobPlugin, Objects, PodAt, made, made_key};
pub use ssh_key::SshKey;

use super::gang::GangPlan;

/// Every plugin applied, in the order it applies to a pod (a later one sees what an earlier one
/// did: `svc` sets the hostname before `ssh` mounts its keys).
pub const REGISTRY: &[&dyn JobPlugin] = &[
    &env::Env,
    &svc::Svc,
    &pytorch::Pytorch,
    &mpi::Mpi,
    &ssh::Ssh,
];

/// Names a Job may give that no plugin applies yet.
pub const NOT_APPLIED: &[&str] = &["tensorflow", "ray", "hcclrank"];

/// The plugins `job` asks for, in [`REGISTRY`] order, each with what it sees of the Job.
pub fn asked<'a>(
    job: &'a Job,
    plan: &'a GangPlan,
    key: Option<&'a SshKey>,
) -> impl Iterator<Item = (&'static dyn JobPlugin, Ctx<'a>)> {
    REGISTRY.iter().filter_map(move |p| {
        let args = job.spec.plugins.get(p.name())?;
        let ctx = Ctx {
            job,
            plan,
            flags: Flags(args.as_slice()),
            key,
        };
        Some((*p, ctx))
    })
}

/// What the Job's plugins do to pod `index` of task `task` (its name `pod`).
pub fn on_pod(job: &Job, plan: &GangPlan, task: usize, index: u32, pod: &str, spec: &mut PodSpec) {
    if plan.tasks.get(task).is_none() {
        return;
    }
    let at = PodAt {
        task,
        index,
        name: pod,
    };
    for (plugin, ctx) in asked(job, plan, None) {
        plugin.on_pod(&ctx, &at, spec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_the_crd_accepts_is_a_plugin_or_said_to_be_not_applied() {
        let mut known: Vec<&str> = REGISTRY.iter().map(|p| p.name()).collect();
        known.extend(NOT_APPLIED);
        known.sort_unstable();
        let mut accepted = tephra_api::batch::JOB_PLUGINS.to_vec();
        accepted.sort_unstable();
        assert_eq!(known, accepted);
    }
}
