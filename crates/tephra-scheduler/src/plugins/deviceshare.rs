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
//! see [`GpuState`](crate::framework::gpus::GpuState)), `deviceshare.KnownGeometriesCMName` and
//! `deviceshare.KnownGeometriesCMNamespace` (the ConfigMap of the dynamic MIG geometries,
//! [`device_config_map`]; read by the runtime when it starts), `deviceshare.GPUExclusiveRules`
//! (a list of label maps: pods carrying every label of one rule never share a GPU with another
//! pod matching that rule; pods matching different rules, or none, may),
//! `deviceshare.GPUSharingEnable` and `deviceshare.GPUNumberEnable` (Volcano's gpushare mode:
//! pods limiting `volcano.sh/gpu-memory` share cards by memory, pods limiting
//! `volcano.sh/gpu-number` take idle cards whole; neither together, nor with vGPU, as Volcano
//! refuses to start with them).

use crate::config::{ArgErrors, ArgReader, ArgSpec, ArgValue, PluginConfig};
use crate::framework::gpus::{GpuConfig, Policy};
use crate::framework::plugin::{NodeScorer, Plugin};
use crate::framework::view::View;
use crate::model::{Id, Labels, Task};

/// The arguments the plugin reads.
pub const ARGS: ArgSpec = ArgSpec {
    keys: &[
        "deviceshare.VGPUEnable",
        "deviceshare.SchedulePolicy",
        "deviceshare.ScheduleWeight",
        "deviceshare.NodeLockEnable",
        "deviceshare.GPUExclusiveRules",
        "deviceshare.GPUSharingEnable",
        "deviceshare.GPUNumberEnable",
        "deviceshare.KnownGeometriesCMName",
        "deviceshare.KnownGeometriesCMNamespace",
    ],
    prefixes: &[],
    inert: &[
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
    let share_memory = r.bool_or("deviceshare.GPUSharingEnable", false);
    let share_number = r.bool_or("deviceshare.GPUNumberEnable", false);
    // Volcano refuses to start with these together.
    if share_memory && share_number {
        r.refuse(
            "deviceshare.GPUNumberEnable",
            "cannot be true with deviceshare.GPUSharingEnable",
        );
    }
    if (share_memory || share_number) && enabled {
        r.refuse(
            "deviceshare.VGPUEnable",
            "gpushare (deviceshare.GPUSharingEnable, deviceshare.GPUNumberEnable) and vGPU cannot be used together",
        );
    }
    GpuConfig {
        enabled,
        share_memory,
        share_number,
        policy,
        weight,
        node_lock: r.bool_or("deviceshare.NodeLockEnable", false),
        exclusive: exclusive_rules(r).into(),
    }
}

/// `deviceshare.GPUExclusiveRules`: a list of label maps. A value written as a number or a
/// boolean counts as its text (Volcano drops it, and with it, often, the rule); anything else
/// is refused naming the argument.
fn exclusive_rules(r: &ArgReader) -> Vec<Labels> {
    const KEY: &str = "deviceshare.GPUExclusiveRules";
    let refuse = |what: String| {
        r.refuse(
            KEY,
            format!("must be a list of maps of label to value, {what}"),
        );
        Vec::new()
    };
    let items = match r.value(KEY) {
        None | Some(ArgValue::Null) => return Vec::new(),
        Some(ArgValue::List(items)) => items,
        Some(other) => return refuse(format!("got {:?}", other.as_string())),
    };
    let mut rules = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let ArgValue::Map(m) = item else {
            return refuse(format!("item {i} is {:?}", item.as_string()));
        };
        let mut labels = Labels::new();
        for (k, v) in m {
            match v {
                ArgValue::Str(_) | ArgValue::Int(_) | ArgValue::Bool(_) | ArgValue::Float(_) => {
                    labels.insert(k.clone(), v.as_string());
                }
                _ => return refuse(format!("item {i} gives {k} the value {:?}", v.as_string())),
            }
        }
        if !labels.is_empty() {
            rules.push(labels);
        }
    }
    rules
}

/// How the `deviceshare` plugin configured as `cfg` shares GPUs (its arguments were checked
/// when the configuration was read).
pub fn config(cfg: &PluginConfig) -> GpuConfig {
    let r = ArgReader::new(&cfg.arguments, &ARGS);
    let c = read(&r);
    let _ = r.finish();
    c
}

/// The ConfigMap Volcano reads the vGPU device configuration (dynamic MIG geometries) from,
/// when `deviceshare` does not name one.
pub const DEVICE_CONFIG_MAP: (&str, &str) = ("kube-system", "volcano-vgpu-device-config");

/// The (namespace, name) of the ConfigMap the device configuration is read from: the
/// `deviceshare` arguments `deviceshare.KnownGeometriesCMNamespace` and
/// `deviceshare.KnownGeometriesCMName` of `config`, or Volcano's [`DEVICE_CONFIG_MAP`].
pub fn device_config_map(config: &crate::config::SchedulerConfig) -> (String, String) {
    let (mut ns, mut name) = (
        DEVICE_CONFIG_MAP.0.to_string(),
        DEVICE_CONFIG_MAP.1.to_string(),
    );
    if let Some(p) = config
        .tiers
        .iter()
        .flatten()
        .find(|p| p.name == "deviceshare")
    {
        let r = ArgReader::new(&p.arguments, &ARGS);
        if let Some(n) = r
            .string("deviceshare.KnownGeometriesCMNamespace")
            .filter(|s| !s.is_empty())
        {
            ns = n;
        }
        if let Some(n) = r
            .string("deviceshare.KnownGeometriesCMName")
            .filter(|s| !s.is_empty())
        {
            name = n;
        }
        let _ = r.finish();
    }
    (ns, name)
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
