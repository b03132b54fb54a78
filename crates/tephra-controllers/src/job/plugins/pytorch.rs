//! Volcano's `pytorch` job plugin: `MASTER_ADDR`, `MASTER_PORT`, `WORLD_SIZE` and `RANK`
//! (master 0, worker i+1) in every container, and the port opened (`--master`, `--worker`,
//! `--port`, default 23456). A Job without the master task is left as it is.

use k8s_openapi::api::core::v1::PodSpec;

use super::plugin::{Ctx, JobPlugin, PodAt};
use super::shared::{Roles, open_port, push_env, roles, task_hosts};

/// The `pytorch` plugin.
pub struct Pytorch;

impl JobPlugin for Pytorch {
    fn name(&self) -> &'static str {
        "pytorch"
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
        let Some(m) = plan.tasks.iter().position(|t| t.name == master) else {
            return;
        };
        let port = ctx.flags.port(23456);
        let addr = task_hosts(job, plan, m)
            .into_iter()
            .next()
            .unwrap_or_default();
        let world: u32 = plan
            .tasks
            .iter()
            .filter(|t| t.name == master || t.name == worker)
            .map(|t| t.replicas)
            .sum();
        let rank = if task_name == worker {
            Some(pod.index + 1)
        } else if task_name == master {
            Some(0)
        } else {
            None
        };
        for c in &mut spec.containers {
            open_port(c, port, "pytorchjob-port");
            push_env(c, "MASTER_ADDR", addr.clone());
            push_env(c, "MASTER_PORT", port.to_string());
            push_env(c, "WORLD_SIZE", world.to_string());
            if let Some(r) = rank {
                push_env(c, "RANK", r.to_string());
            }
        }
    }
}
