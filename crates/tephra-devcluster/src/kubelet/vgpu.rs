//! The volcano-vgpu device plugin's Allocate, as the kubelet meets it when it admits a pod whose
//! containers limit `volcano.sh/vgpu-number`: the plugin looks for the pod the scheduler
//! annotated for this node (`volcano.sh/vgpu-node`) and hands each GPU container the GPUs its
//! item of `volcano.sh/devices-to-allocate` names, in order, as many as the container asks.
//! Here, as the plugin would fail it, the pod is refused (`UnexpectedAdmissionError`) when no
//! such annotation names this node, when a container's GPUs are not the number it asks or are
//! not GPUs the node registered (`volcano.sh/node-vgpu-register`), or when a GPU would hold more
//! pods than its split count, more memory than it has or more than all of its cores with the
//! pods the kubelet already runs.
//!
//! Then, as the plugin does, the pod is told how it went ([`written_back`]: `bind-phase`
//! `success` or `failed`, the GPUs handed out taken off `devices-to-allocate`) and the node's
//! lock for shared GPUs (`hamivgpu`, taken by a scheduler with `deviceshare.NodeLockEnable`)
//! is released.
//!
//! Pure functions over the pod's and the node's JSON.

use serde_json::Value;
use tephra_scheduler::model::vgpu;

use super::admission::Refusal;

/// One GPU held by an admitted pod: (uuid, MiB, cores).
pub type Held = (String, u64, u32);

fn refuse(why: String) -> Refusal {
    Refusal {
        reason: "UnexpectedAdmissionError".into(),
        message: format!(
            "Allocate failed due to rpc error: code = Unknown desc = {why}, which is unexpected"
        ),
    }
}

fn annotation<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// How many GPUs each container of `pod` limits (0 for those that limit none).
fn numbers(pod: &Value) -> Vec<u64> {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            c.pointer("/resources/limits")
                .and_then(|l| l.get(vgpu::NUMBER))
                .and_then(|q| {
                    q.as_str()
                        .map(str::to_string)
                        .or_else(|| q.as_i64().map(|n| n.to_string()))
                })
                .and_then(|q| tephra_scheduler::quantity::parse_scaled(&q, 1).ok())
                .and_then(|n| u64::try_from(n).ok())
                .unwrap_or(0)
        })
        .collect()
}

/// Whether `pod` limits `volcano.sh/vgpu-number` in any container: the plugin's business.
pub fn asks(pod: &Value) -> bool {
    numbers(pod).iter().any(|n| *n > 0)
}

/// The annotations the plugin sets on `pod` once its Allocate ended (`ok`): the bind phase,
/// the placement time set past any other (so it is never taken for a pending pod again) and,
/// on success, `devices-to-allocate` with every container's GPUs handed out.
pub fn written_back(pod: &Value, ok: bool) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    let phase = if ok {
        vgpu::BIND_SUCCESS
    } else {
        vgpu::BIND_FAILED
    };
    out.insert(vgpu::BIND_PHASE.into(), Value::from(phase));
    out.insert(
        vgpu::ASSIGNED_TIME.into(),
        Value::from(u64::MAX.to_string()),
    );
    if ok {
        let left = vgpu::Grants::parse(annotation(pod, vgpu::TO_ALLOCATE).unwrap_or_default());
        let emptied = vgpu::Grants(vec![Vec::new(); left.0.len()]);
        out.insert(vgpu::TO_ALLOCATE.into(), Value::from(emptied.encode()));
    }
    out
}

/// The GPUs the plugin would hand `pod` on `node_name` (whose Node object is `node`), given
/// what the pods the kubelet runs there hold; empty for a pod that asks for none.
pub fn allocate(
    pod: &Value,
    node_name: &str,
    node: Option<&Value>,
    held: &[Held],
) -> Result<Vec<Held>, Refusal> {
    let wants: Vec<u64> = numbers(pod).into_iter().filter(|n| *n > 0).collect();
    if wants.is_empty() {
        return Ok(Vec::new());
    }
    if annotation(pod, vgpu::ASSIGNED_NODE) != Some(node_name) {
        return Err(refuse(format!(
            "no pending pod for node {node_name} asks for these devices ({} is not {node_name})",
            vgpu::ASSIGNED_NODE
        )));
    }
    let registered = node
        .and_then(|n| annotation(n, vgpu::REGISTER))
        .map(vgpu::parse_register)
        .transpose()
        .map_err(|e| refuse(e.to_string()))?
        .unwrap_or_default();
    let devices = vgpu::Grants::parse(annotation(pod, vgpu::TO_ALLOCATE).unwrap_or_default());
    let items: Vec<&Vec<vgpu::Grant>> = devices.0.iter().filter(|c| !c.is_empty()).collect();
    if items.len() != wants.len() {
        return Err(refuse(format!(
            "{} names GPUs for {} container(s), {} ask for them",
            vgpu::TO_ALLOCATE,
            items.len(),
            wants.len()
        )));
    }
    let mut given: Vec<Held> = Vec::new();
    for (i, (item, want)) in items.iter().zip(&wants).enumerate() {
        if item.len() as u64 != *want {
            return Err(refuse(format!(
                "container {i} asks for {want} GPU(s), {} are assigned",
                item.len()
            )));
        }
        for g in item.iter() {
            // A dynamic MIG instance (`<uuid>[<group>-<position>]`) is of its GPU.
            let uuid = tephra_scheduler::model::mig::parse_instance_id(&g.uuid)
                .map_or(g.uuid.as_str(), |(gpu, _, _)| gpu);
            if !registered.iter().any(|r| r.uuid == uuid) {
                return Err(refuse(format!(
                    "device {} is not registered on {node_name}",
                    g.uuid
                )));
            }
            given.push((uuid.to_string(), g.memory, g.cores));
        }
    }
    for r in &registered {
        let on = |list: &[Held]| {
            list.iter()
                .filter(|(u, _, _)| *u == r.uuid)
                .fold((0u64, 0u64, 0u64), |(n, m, c), (_, mm, cc)| {
                    (n + 1, m + mm, c + u64::from(*cc))
                })
        };
        let (n0, m0, c0) = on(held);
        let (n1, m1, c1) = on(&given);
        if n1 == 0 {
            continue;
        }
        if n0 + n1 > u64::from(r.split)
            || m0 + m1 > r.memory
            || c0 + c1 > u64::from(vgpu::FULL_CORES)
        {
            return Err(refuse(format!(
                "device {} has no room: {} pod(s) of {}, {} of {} MiB, {} of 100 cores would be in use",
                r.uuid,
                n0 + n1,
                r.split,
                m0 + m1,
                r.memory,
                c0 + c1
            )));
        }
    }
    Ok(given)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    const NODE: &str = "GPU-a,2,16000,NVIDIA-Tesla T4,true,hami-core:";

    fn node() -> Value {
        json!({"metadata": {"name": "n", "annotations": {vgpu::REGISTER: NODE}}})
    }

    fn pod(assigned: Option<&str>, devices: &str) -> Value {
        let mut a = json!({vgpu::TO_ALLOCATE: devices});
        if let Some(n) = assigned {
            a[vgpu::ASSIGNED_NODE] = json!(n);
        }
        json!({"metadata": {"annotations": a}, "spec": {"containers": [
            {"name": "side"},
            {"name": "main", "resources": {"limits": {vgpu::NUMBER: "1"}}}]}})
    }

    #[test]
    fn the_plugin_hands_out_registered_gpus_with_room_and_refuses_the_rest() {
        let ok = pod(Some("n"), ";GPU-a,NVIDIA,8000,50:");
        let given = allocate(&ok, "n", Some(&node()), &[]).unwrap();
        assert_eq!(given, vec![("GPU-a".to_string(), 8000, 50)]);
        // Full by memory with what runs.
        let e = allocate(&ok, "n", Some(&node()), &[("GPU-a".into(), 9000, 0)]).unwrap_err();
        assert_eq!(e.reason, "UnexpectedAdmissionError");
        assert!(e.message.contains("no room"), "{}", e.message);
        // Full by pods (split 2).
        let two = [("GPU-a".to_string(), 1, 0), ("GPU-a".to_string(), 1, 0)];
        assert!(allocate(&ok, "n", Some(&node()), &two).is_err());
        // Not annotated for this node, not registered, or the wrong number.
        assert!(allocate(&pod(None, ";GPU-a,NVIDIA,1,0:"), "n", Some(&node()), &[]).is_err());
        assert!(
            allocate(
                &pod(Some("n"), ";GPU-z,NVIDIA,1,0:"),
                "n",
                Some(&node()),
                &[]
            )
            .is_err()
        );
        let e = allocate(
            &pod(Some("n"), ";GPU-a,NVIDIA,1,0:GPU-a,NVIDIA,1,0:"),
            "n",
            Some(&node()),
            &[],
        )
        .unwrap_err();
        assert!(
            e.message.contains("asks for 1 GPU(s), 2 are assigned"),
            "{}",
            e.message
        );
        // A pod that asks for no GPU is none of the plugin's business.
        let plain = json!({"spec": {"containers": [{"name": "c"}]}});
        assert_eq!(allocate(&plain, "n", None, &[]).unwrap(), Vec::new());
    }

    #[test]
    fn the_plugin_writes_back_success_with_the_devices_handed_out_or_failure() {
        let p = pod(Some("n"), ";GPU-a,NVIDIA,8000,50:");
        assert!(asks(&p));
        let ok = written_back(&p, true);
        assert_eq!(ok[vgpu::BIND_PHASE], "success");
        assert_eq!(ok[vgpu::TO_ALLOCATE], ";");
        assert_eq!(ok[vgpu::ASSIGNED_TIME], u64::MAX.to_string());
        let failed = written_back(&p, false);
        assert_eq!(failed[vgpu::BIND_PHASE], "failed");
        assert!(!failed.contains_key(vgpu::TO_ALLOCATE));
        assert!(!asks(&json!({"spec": {"containers": [{"name": "c"}]}})));
    }
}
