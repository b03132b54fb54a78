//! Shared GPUs (Volcano's vGPU) against a real API server and the devcluster: a node whose
//! vGPU device plugin registered two GPUs takes one slice per GPU that fits, each pod bound
//! with the annotations the device plugin reads at Allocate (set by the binding, as the API
//! server copies a Binding's annotations onto its pod), and the pod that no GPU has room for
//! waits, its PodGroup saying why.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::*;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tephra_api::PodGroup;
use tephra_scheduler::model::vgpu;

const REGISTER: &str =
    "GPU-a,10,16000,NVIDIA-Tesla T4,true,hami-core:GPU-b,10,16000,NVIDIA-Tesla T4,true,hami-core:";

fn vgpu_node() -> tephra_devcluster::kubelet::NodeSpec {
    let mut n = node("g", "8", 0);
    for (k, v) in [
        (vgpu::NUMBER, "20"),
        (vgpu::MEMORY, "32000"),
        (vgpu::CORES, "200"),
    ] {
        n.capacity.insert(k.into(), v.into());
    }
    n
}

fn slice_pod(name: &str) -> Pod {
    let limits =
        json!({"cpu": "1", "volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "10000"});
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default",
            "annotations": {"scheduling.k8s.io/group-name": name,
                            "tephra.io/sim-duration": "1h"}},
        "spec": {"schedulerName": "volcano", "containers": [
            {"name": "main", "image": "cuda", "resources": {"requests": limits, "limits": limits}}]}
    }))
    .unwrap()
}

on_both!(
    slices_are_bound_with_the_annotations_the_device_plugin_reads,
    slices_are_bound_with_the_annotations_the_device_plugin_reads
);
async fn slices_are_bound_with_the_annotations_the_device_plugin_reads(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![vgpu_node()]).await else {
        return;
    };
    let c = cl.client.clone();
    let nodes: Api<Node> = Api::all(c.clone());
    nodes
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {vgpu::REGISTER: REGISTER}}})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pgs: Api<PodGroup> = Api::namespaced(c.clone(), "default");
    for name in ["s0", "s1", "s2"] {
        let pg: PodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": 1, "queue": "default"}
        }))
        .unwrap();
        pgs.create(&PostParams::default(), &pg).await.unwrap();
        pods.create(&PostParams::default(), &slice_pod(name))
            .await
            .unwrap();
    }
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    // Two slices of 10000 MiB: one on each 16000 MiB GPU; the 12000 MiB the node has left in
    // all would take a third, no one GPU can.
    let bound: BTreeMap<String, BTreeMap<String, String>> =
        eventually(30, "two slices bound", || async {
            let mut out = BTreeMap::new();
            for name in ["s0", "s1", "s2"] {
                let p = pods.get(name).await.ok()?;
                if p.spec.as_ref()?.node_name.is_some() {
                    out.insert(name.to_string(), p.metadata.annotations.unwrap_or_default());
                }
            }
            (out.len() == 2).then_some(out)
        })
        .await;
    let mut gpus = Vec::new();
    for (name, a) in &bound {
        let ids = &a[vgpu::IDS];
        assert_eq!(a[vgpu::TO_ALLOCATE], *ids, "{name}");
        assert_eq!(a[vgpu::ASSIGNED_NODE], "g", "{name}");
        assert_eq!(a[vgpu::BIND_PHASE], "allocating", "{name}");
        assert!(a[vgpu::ASSIGNED_TIME].parse::<u64>().is_ok(), "{name}");
        let grants = vgpu::Grants::parse(ids);
        let all: Vec<_> = grants.all().collect();
        assert_eq!(all.len(), 1, "{name}: {ids}");
        assert_eq!((all[0].memory, all[0].cores), (10000, 0), "{name}: {ids}");
        assert!(ids.ends_with(",NVIDIA,10000,0:"), "{name}: {ids}");
        gpus.push(all[0].uuid.clone());
    }
    gpus.sort();
    assert_eq!(gpus, vec!["GPU-a".to_string(), "GPU-b".to_string()]);
    // The UI shows what the node's GPUs hold, and the metrics each GPU's, under Volcano's names.
    let addr = sched.metrics_addr.expect("listens");
    eventually(20, "the UI shows the node's GPU memory held", || async {
        let (_, body) = http_get(addr, "/ui/api/v1/fleet").await;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let g = &v["clusters"][0]["shared_gpus"][0];
        let shown = g["node"] == "g"
            && g["used_memory"] == 20000
            && g["memory"] == 32000
            && g["slices"] == 2;
        shown.then_some(())
    })
    .await;
    let (_, metrics) = http_get(addr, "/metrics").await;
    for (name, value) in [
        ("volcano_vgpu_device_allocated_memory", "10000"),
        ("volcano_vgpu_device_memory_limit", "16000"),
        ("volcano_vgpu_device_shared_number", "1"),
    ] {
        assert!(
            metrics.lines().any(|l| l.starts_with(name)
                && l.contains("devID=\"GPU-a\"")
                && l.contains("NodeName=\"g\"")
                && l.ends_with(&format!(" {value}"))),
            "{name} of GPU-a is {value}:\n{metrics}"
        );
    }
    let waiting = ["s0", "s1", "s2"]
        .into_iter()
        .find(|n| !bound.contains_key(*n))
        .unwrap();
    eventually(20, "the waiting slice's PodGroup says why", || async {
        let pg = pgs.get(waiting).await.ok()?;
        let said = pg.status?.conditions.iter().any(|c| {
            c.message
                .as_deref()
                .is_some_and(|m| m.contains("not enough gpu fitted on this node"))
        });
        said.then_some(())
    })
    .await;
    sched.stop().await;
}
