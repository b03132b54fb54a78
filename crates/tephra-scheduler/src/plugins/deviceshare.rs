//! `deviceshare`: Volcano's GPU sharing, vGPU mode (the volcano-vgpu device plugin). Which of a
//! node's shared GPUs a pod takes, and whether it fits at all, is the session's
//! ([`GpuState`](crate::framework::gpus::GpuState), checked with the other predicates, so that
//! no configuration places a vGPU pod without choosing its GPUs); this plugin reads how: whether
//! sharing is on, the order GPUs are tried in, and the node score.
//!
//! Arguments, as Volcano reads them: `deviceshare.VGPUEnable` (bool, default false: pods that
//! ask for `volcano.sh/vgpu-*` are placed nowhere, saying so), `deviceshare.SchedulePolicy`
//! (`binpack` or `spread`; otherwise the last registered GPU first), `deviceshare.ScheduleWeight`
//! (the node score multiplier, default 0: no score), `deviceshare.NodeLockEnable` (bool, default
//! false: binding a vGPU pod takes its node's `hamivgpu` lock, which the device plugin releases;
//! see [`GpuState`](crate::framework::gpus::GpuState)). The gpushare modes and dynamic MIG
//! arguments are accepted with a warning: tephra does not serve them.

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::gpus::{GpuConfig, Policy};
use crate::framework::plugin::{NodeScorer, Plugin};
use crate::framework::view::View;
use crate::model::{Id, Task};

/// The arguments the plugin reads.
pub const ARGS: ArgSpec = ArgSpec {
    keys: &[
        "deviceshare.VGPUEnable",
        "deviceshare.SchedulePolicy",
        "deviceshare.ScheduleWeight",
        "deviceshare.NodeLockEnable",
    ],
    prefixes: &[],
    inert: &[
        (
            "deviceshare.GPUSharingEnable",
            "tephra does not place the deprecated gpushare mode (volcano.sh/gpu-memory); use deviceshare.VGPUEnable",
        ),
        (
            "deviceshare.GPUNumberEnable",
            "tephra counts whole GPUs as a resource without it",
        ),
        (
            "deviceshare.KnownGeometriesCMName",
            "tephra does not place dynamic MIG slices; static MIG profiles are resources",
        ),
        (
            "deviceshare.KnownGeometriesCMNamespace",
            "tephra does not place dynamic MIG slices; static MIG profiles are resources",
        ),
        (
            "deviceshare.GPUExclusiveRules",
            "tephra does not read GPU exclusion rules",
        ),
        (
            "deviceshare.AscendHAMiVNPUEnable",
            "tephra does not place Ascend NPUs",
        ),
        (
            "deviceshare.AscendMindClusterVNPUEnable",
            "tephra does not place Ascend NPUs",
        ),
    ],
};

/// How a `deviceshare` configuration shares GPUs, recording what it gets wrong in `r`.
fn read(r: &ArgReader) -> GpuConfig {
    let enabled = r.bool_or("deviceshare.VGPUEnable", false);
    let policy = match r.string("deviceshare.SchedulePolicy").as_deref() {
        None | Some("") => Policy::Unset,
        Some("binpack") => Policy::Binpack,
        Some("spread") => Policy::Spread,
        Some(other) => {
            r.refuse(
                "deviceshare.SchedulePolicy",
                format!("must be binpack or spread, got {other:?}"),
            );
            Policy::Unset
        }
    };
    let weight = r.f64_or("deviceshare.ScheduleWeight", 0.0);
    GpuConfig {
        enabled,
        policy,
        weight,
        node_lock: r.bool_or("deviceshare.NodeLockEnable", false),
    }
}

/// How the `deviceshare` plugin configured as `cfg` shares GPUs (its arguments were checked
/// when the configuration was read).
pub fn config(cfg: &PluginConfig) -> GpuConfig {
    let r = ArgReader::new(&cfg.arguments, &ARGS);
    let c = read(&r);
    let _ = r.finish();
    c
}

/// The `deviceshare` plugin: the node score of its policy.
pub struct DeviceShare;

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    let r = ArgReader::new(&cfg.arguments, &ARGS);
    read(&r);
    r.finish()?;
    Ok(Box::new(DeviceShare))
}

impl Plugin for DeviceShare {
    fn name(&self) -> &'static str {
        "deviceshare"
    }

    fn node_scorer(&self) -> Option<&dyn NodeScorer> {
        Some(self)
    }
}

impl NodeScorer for DeviceShare {
    fn score(&self, view: &View, task: &Task, node: Id) -> f64 {
        view.state.gpus.score(view.snap, task, node)
    }
}
