//! What several plugins do alike: the hosts of a task as Volcano writes them, the environment
//! key of a task's name, and environment variables and ports put on containers.

use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar, PodSpec};
use tephra_api::Job;

use super::plugin::{Ctx, PodAt};
use crate::job::gang::GangPlan;
use crate::job::names::pod_name;

/// What a master/worker plugin (`pytorch`, `mpi`) sees of a pod: its task's name and the
/// names of the master and worker tasks (`--master`, `--worker`, by default `master` and
/// `worker`).
pub struct Roles<'a> {
    /// The pod's task.
    pub task: &'a str,
    /// The master task.
    pub master: String,
    /// The worker task.
    pub worker: String,
}

/// The roles of `pod`, or `None` if its task is not in the plan.
pub fn roles<'a>(ctx: &Ctx<'a>, pod: &PodAt<'_>) -> Option<Roles<'a>> {
    let task = ctx.plan.tasks.get(pod.task)?.name.as_str();
    Some(Roles {
        task,
        master: ctx.flags.text("master", "master"),
        worker: ctx.flags.text("worker", "worker"),
    })
}

/// The hosts of one task: `<hostname>.<subdomain>` per replica (one, if the template names a
/// hostname), as Volcano writes them.
pub fn task_hosts(job: &Job, plan: &GangPlan, task: usize) -> Vec<String> {
    let job_name = job.metadata.name.clone().unwrap_or_default();
    let (Some(t), Some(p)) = (job.spec.tasks.get(task), plan.tasks.get(task)) else {
        return Vec::new();
    };
    let spec = t.template.spec.as_ref();
    let hostname = spec
        .and_then(|s| s.hostname.clone())
        .filter(|h| !h.is_empty());
    let subdomain = spec
        .and_then(|s| s.subdomain.clone())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| job_name.clone());
    match hostname {
        Some(h) => vec![format!("{h}.{subdomain}")],
        None => (0..p.replicas)
            .map(|i| format!("{}.{subdomain}", pod_name(&job_name, &p.name, i)))
            .collect(),
    }
}

/// A task's name as it appears in environment keys (`VC_<TASK>_HOSTS`).
pub fn env_key(task: &str) -> String {
    task.replace('-', "_").to_uppercase()
}

/// Applies `f` to every container and init container of `spec`.
pub fn every_container(spec: &mut PodSpec, f: &dyn Fn(&mut Container)) {
    spec.containers.iter_mut().for_each(f);
    spec.init_containers.iter_mut().flatten().for_each(f);
}

/// Appends an environment variable with a value.
pub fn push_env(c: &mut Container, name: &str, value: String) {
    c.env.get_or_insert_with(Vec::new).push(EnvVar {
        name: name.into(),
        value: Some(value),
        value_from: None,
    });
}

/// Opens `port` on the container under `name`, unless it is open already.
pub fn open_port(c: &mut Container, port: i32, name: &str) {
    let ports = c.ports.get_or_insert_with(Vec::new);
    if !ports.iter().any(|p| p.container_port == port) {
        ports.push(ContainerPort {
            name: Some(name.into()),
            container_port: port,
            ..ContainerPort::default()
        });
    }
}
