//! Volcano's `env` job plugin: `VK_TASK_INDEX` and `VC_TASK_INDEX` (the pod's index in its
//! task) in every container and init container.

use k8s_openapi::api::core::v1::PodSpec;

use super::plugin::{Ctx, JobPlugin, PodAt};
use super::shared::{every_container, push_env};

/// The `env` plugin.
pub struct Env;

impl JobPlugin for Env {
    fn name(&self) -> &'static str {
        "env"
    }

    fn on_pod(&self, _ctx: &Ctx<'_>, pod: &PodAt<'_>, spec: &mut PodSpec) {
        let index = pod.index;
        every_container(spec, &|c| {
            push_env(c, "VK_TASK_INDEX", index.to_string());
            push_env(c, "VC_TASK_INDEX", index.to_string());
        });
    }
}
