//! Volcano's `mpi` job plugin: `MPI_HOST` (the workers' hosts, comma separated) on the
//! master's containers, and the port opened on every pod's (`--master`, `--worker`, `--port`,
//! default 22).

use k8s_openapi::api::core::v1::PodSpec;

use super::plugin::{Ctx, JobPlugin, PodAt};
use super::shared::{Roles, every_container, open_port, push_env, roles, task_hosts};

/// The `mpi` plugin.
pub struct Mpi;

impl JobPlugin for Mpi {
    fn name(&self) -> &'static str {
        "mpi"
    }

    fn on_pod(&self, ctx: &Ctx<'_>, pod: &PodAt<'_>, spec: &mut PodSpec) {
        let (job, plan) = (ctx.job, ctx.plan);
        let Some(Roles {
            task: task_name,
            master,
            worker,
        }) = roles(ctx, pod)
        else {
            return;
        };
        let port = ctx.flags.port(22);
        let hosts = plan
            .tasks
            .iter()
            .position(|t| t.name == worker)
            .map(|w| task_hosts(job, plan, w).join(","));
        let is_master = task_name == master && hosts.is_some();
        every_container(spec, &|c| {
            open_port(c, port, "mpijob-port");
            if is_master && let Some(h) = &hosts {
                push_env(c, "MPI_HOST", h.clone());
            }
        });
    }
}
