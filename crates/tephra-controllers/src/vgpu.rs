//! What a pod asks of shared GPUs, as Volcano's `deviceshare` reads it: per container of
//! `spec.containers` (init containers take none) that limits `volcano.sh/vgpu-number` or
//! `volcano.sh/vgpu-memory`, the number of GPUs (1 when only memory is named), the memory on
//! each (limit, else request; none: the whole card), the percentage of each card's memory
//! (which wins), and the cores; and the pod annotations that choose among GPUs. A pod that
//! asks no vGPU may ask gpushare cards (`volcano.sh/gpu-memory` or `volcano.sh/gpu-number`
//! limits, containers summed, init containers' largest).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use tephra_scheduler::model::vgpu::{
    self, ContainerAsk, GpuAsk, MEMORY, MEMORY_PERCENTAGE, NUMBER, comma_list,
};
use tephra_scheduler::quantity::{QuantityError, parse_scaled};

/// A vGPU amount a pod names that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}spec.containers[{container}].resources.{field}[{resource}]: {reason}")]
pub struct AskError {
    /// Where the pod spec is (`spec.tasks[0].template.`), empty for a pod.
    pub at: String,
    /// The container's position.
    pub container: usize,
    /// `limits` or `requests`.
    pub field: &'static str,
    /// The resource name.
    pub resource: &'static str,
    /// Why.
    pub reason: String,
}

/// One amount of a container: its limit, else (with `request_too`) its request.
fn amount(
    at: &str,
    c: &Container,
    index: usize,
    resource: &'static str,
    request_too: bool,
) -> Result<Option<u64>, AskError> {
    let r = c.resources.as_ref();
    let from = |field: &'static str,
                m: Option<
        &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| {
        m.and_then(|m| m.get(resource)).map(|q| {
            parse_scaled(&q.0, 1)
                .map_err(|e: QuantityError| e.to_string())
                .and_then(|v| u64::try_from(v).map_err(|_| "must not be negative".to_string()))
                .map_err(|reason| AskError {
                    at: at.to_string(),
                    container: index,
                    field,
                    resource,
                    reason,
                })
        })
    };
    if let Some(v) = from("limits", r.and_then(|r| r.limits.as_ref())) {
        return v.map(Some);
    }
    if request_too && let Some(v) = from("requests", r.and_then(|r| r.requests.as_ref())) {
        return v.map(Some);
    }
    Ok(None)
}

/// What `pod` asks of shared GPUs; `None` when no container limits `volcano.sh/vgpu-number` or
/// `volcano.sh/vgpu-memory`.
pub fn ask(pod: &Pod) -> Result<Option<Arc<GpuAsk>>, AskError> {
    match pod.spec.as_ref() {
        Some(spec) => ask_of(spec, pod.metadata.annotations.as_ref(), ""),
        None => Ok(None),
    }
}

/// [`ask`] of a pod spec with these annotations (a Volcano Job task's template, `at` naming it
/// as `spec.tasks[0].template.`).
pub fn ask_of(
    spec: &PodSpec,
    annotations: Option<&BTreeMap<String, String>>,
    at: &str,
) -> Result<Option<Arc<GpuAsk>>, AskError> {
    let mut asks = Vec::new();
    for (i, c) in spec.containers.iter().enumerate() {
        let number = amount(at, c, i, NUMBER, false)?;
        let memory_limit = amount(at, c, i, MEMORY, false)?;
        let number = match (number, memory_limit) {
            (Some(n), _) => n,
            (None, Some(_)) => 1,
            (None, None) => continue,
        };
        let percent = amount(at, c, i, MEMORY_PERCENTAGE, true)?;
        let cores = amount(at, c, i, vgpu::CORES, true)?.unwrap_or(0);
        asks.push(ContainerAsk {
            index: u32::try_from(i).unwrap_or(u32::MAX),
            number: u32::try_from(number).unwrap_or(u32::MAX),
            memory: amount(at, c, i, MEMORY, true)?.unwrap_or(0),
            percent: percent.map(|p| u32::try_from(p).unwrap_or(u32::MAX)),
            cores: u32::try_from(cores).unwrap_or(u32::MAX),
        });
    }
    if asks.is_empty() {
        return share_ask_of(spec, at);
    }
    let get = |k: &str| annotations.and_then(|a| a.get(k));
    Ok(Some(Arc::new(GpuAsk {
        containers: u32::try_from(spec.containers.len()).unwrap_or(u32::MAX),
        asks,
        mode: get(vgpu::MODE).cloned(),
        use_types: get(vgpu::USE_TYPE).map(|v| v.split(',').map(String::from).collect()),
        nouse_types: get(vgpu::NOUSE_TYPE)
            .map(|v| v.split(',').map(String::from).collect())
            .unwrap_or_default(),
        use_uuids: get(vgpu::USE_UUID).map(|v| comma_list(v)),
        nouse_uuids: get(vgpu::NOUSE_UUID)
            .map(|v| comma_list(v))
            .unwrap_or_default(),
        group_spread: get(vgpu::GROUP_POLICY).is_some_and(|v| v == "spread"),
        share: false,
    })))
}

/// What a pod spec asks of gpushare cards (`volcano.sh/gpu-memory`, `volcano.sh/gpu-number`
/// limits, as [`vgpu::share_ask`] sums them).
fn share_ask_of(spec: &PodSpec, at: &str) -> Result<Option<Arc<GpuAsk>>, AskError> {
    let of = |i: usize, c: &Container| -> Result<(u64, u64), AskError> {
        Ok((
            amount(at, c, i, vgpu::SHARE_MEMORY, false)?.unwrap_or(0),
            amount(at, c, i, vgpu::SHARE_NUMBER, false)?.unwrap_or(0),
        ))
    };
    let containers = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| of(i, c))
        .collect::<Result<Vec<_>, _>>()?;
    let mut init = (0, 0);
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let (m, n) = of(i, c)?;
        init = (init.0.max(m), init.1.max(n));
    }
    Ok(vgpu::share_ask(&containers, init).map(Arc::new))
}

/// What a pod of one container with these `resources` asks of shared GPUs (the simulator's own
/// jobs, which name resources rather than containers); `None` when it names neither
/// `volcano.sh/vgpu-number` nor `volcano.sh/vgpu-memory`. Amounts that do not read count as
/// absent: the resources were checked as quantities already.
pub fn ask_of_resources(resources: &[(String, String)]) -> Option<Arc<GpuAsk>> {
    let get = |k: &str| {
        resources
            .iter()
            .find(|(name, _)| name == k)
            .and_then(|(_, q)| parse_scaled(q, 1).ok())
            .and_then(|v| u64::try_from(v).ok())
    };
    let number = match (get(NUMBER), get(MEMORY)) {
        (Some(n), _) => n,
        (None, Some(_)) => 1,
        (None, None) => {
            let share = (
                get(vgpu::SHARE_MEMORY).unwrap_or(0),
                get(vgpu::SHARE_NUMBER).unwrap_or(0),
            );
            return vgpu::share_ask(&[share], (0, 0)).map(Arc::new);
        }
    };
    Some(Arc::new(GpuAsk {
        containers: 1,
        asks: vec![ContainerAsk {
            index: 0,
            number: u32::try_from(number).unwrap_or(u32::MAX),
            memory: get(MEMORY).unwrap_or(0),
            percent: get(MEMORY_PERCENTAGE).map(|p| u32::try_from(p).unwrap_or(u32::MAX)),
            cores: u32::try_from(get(vgpu::CORES).unwrap_or(0)).unwrap_or(u32::MAX),
        }],
        ..GpuAsk::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_container_naming_only_memory_takes_one_card_and_others_take_none() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "p", "annotations": {
                "nvidia.com/use-gputype": "A100,H100", "volcano.sh/vgpu-mode": "hami-core"}},
            "spec": {"containers": [
                {"name": "sidecar", "image": "busybox"},
                {"name": "main", "image": "cuda", "resources": {"limits": {
                    "volcano.sh/vgpu-memory": "3000", "volcano.sh/vgpu-cores": "30"}}},
                {"name": "whole", "image": "cuda", "resources": {"limits": {
                    "volcano.sh/vgpu-number": "2", "volcano.sh/vgpu-memory-percentage": "50"}}}
            ]}
        }));
        let a = ask(&p).unwrap().unwrap();
        assert_eq!(a.containers, 3);
        assert_eq!(
            a.asks,
            vec![
                ContainerAsk {
                    index: 1,
                    number: 1,
                    memory: 3000,
                    percent: None,
                    cores: 30
                },
                ContainerAsk {
                    index: 2,
                    number: 2,
                    memory: 0,
                    percent: Some(50),
                    cores: 0
                },
            ]
        );
        assert_eq!(a.mode.as_deref(), Some("hami-core"));
        assert_eq!(
            a.use_types,
            Some(vec!["A100".to_string(), "H100".to_string()])
        );
        let none = pod(serde_json::json!({
            "metadata": {"name": "q"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}
        }));
        assert_eq!(ask(&none).unwrap(), None);
    }

    #[test]
    fn a_bad_amount_names_the_container_and_resource() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "main", "image": "cuda", "resources": {
                "limits": {"volcano.sh/vgpu-number": "two"}}}]}
        }));
        let e = ask(&p).unwrap_err().to_string();
        assert!(
            e.starts_with("spec.containers[0].resources.limits[volcano.sh/vgpu-number]"),
            "{e}"
        );
    }
}
