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

/// A vGPU node `name` whose plugin registered `gpus` (MiB each, split 10).
fn registered_node(name: &str, gpus: &[u64]) -> tephra_devcluster::kubelet::NodeSpec {
    let mut n = node(name, "16", 0);
    let memory: u64 = gpus.iter().sum();
    for (k, v) in [
        (vgpu::NUMBER, (gpus.len() * 10).to_string()),
        (vgpu::MEMORY, memory.to_string()),
        (vgpu::CORES, (gpus.len() * 100).to_string()),
    ] {
        n.capacity.insert(k.into(), v);
    }
    let list: Vec<vgpu::Gpu> = gpus
        .iter()
        .enumerate()
        .map(|(i, m)| vgpu::Gpu {
            uuid: format!("GPU-{name}-{i}"),
            split: 10,
            memory: *m,
            model: "NVIDIA-A100".into(),
            healthy: true,
            mig: false,
        })
        .collect();
    n.annotations
        .insert(vgpu::REGISTER.into(), vgpu::encode_register(&list));
    n
}

/// A fleet whose member `east` has more GPU memory in all and `west` the GPUs that hold a
/// 12000 MiB slice.
async fn vgpu_fleet(backend: Backend) -> Option<TestFleet> {
    let members = [
        ("east", vec![registered_node("east-0", &[8000, 8000, 8000])]),
        ("west", vec![registered_node("west-0", &[12000])]),
    ];
    match backend {
        Backend::Devcluster => {
            let options = tephra_devcluster::Options {
                members: members
                    .iter()
                    .map(|(name, nodes)| tephra_devcluster::fleet::MemberSpec {
                        name: (*name).into(),
                        nodes: nodes.clone(),
                        ..Default::default()
                    })
                    .collect(),
                control_plane: true,
                queues: vec![queue_json("default", 1)],
                kubelet: fast_kubelet(),
                ..Default::default()
            };
            let dev = tephra_devcluster::DevCluster::start(options)
                .await
                .expect("devcluster starts");
            Some(TestFleet {
                dev: Some(dev),
                real: None,
            })
        }
        Backend::KubeApiserver => {
            let specs: Vec<(&str, Vec<_>)> = members
                .iter()
                .map(|(n, nodes)| (*n, nodes.clone()))
                .collect();
            let real = tephra_envtest::tier::fleet_with(
                &tephra_envtest::Release::tier(),
                &specs,
                Default::default(),
            )
            .await
            .expect("the real fleet starts")?;
            Some(TestFleet {
                dev: None,
                real: Some(real),
            })
        }
    }
}

on_both!(
    a_declared_slice_goes_to_the_member_whose_gpu_holds_it_with_its_annotations,
    a_declared_slice_goes_to_the_member_whose_gpu_holds_it_with_its_annotations
);
async fn a_declared_slice_goes_to_the_member_whose_gpu_holds_it_with_its_annotations(
    backend: Backend,
) {
    logs();
    let Some(fleet) = vgpu_fleet(backend).await else {
        return;
    };
    let cp = fleet.client("control-plane").await.unwrap();
    let sched = fleet_scheduler(&cp).await;
    let pgs: Api<PodGroup> = Api::namespaced(cp.clone(), "default");
    let pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "s0", "namespace": "default"},
        "spec": {"minMember": 1, "queue": "default"}
    }))
    .unwrap();
    pgs.create(&PostParams::default(), &pg).await.unwrap();
    let mut pod = slice_pod("s0");
    let limits =
        json!({"cpu": "1", "volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "12000"});
    pod.spec.as_mut().unwrap().containers[0].resources =
        Some(serde_json::from_value(json!({"requests": limits, "limits": limits})).unwrap());
    Api::<Pod>::namespaced(cp.clone(), "default")
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    // east's 24000 MiB would take it by totals; only west's GPU holds 12000.
    let west: Api<Pod> = Api::namespaced(fleet.client("west").await.unwrap(), "default");
    let copy = eventually(30, "the member copy in west, on its node", || async {
        let p = west.get("s0").await.ok()?;
        (p.spec.as_ref()?.node_name.as_deref() == Some("west-0")).then_some(p)
    })
    .await;
    let a = copy.metadata.annotations.unwrap_or_default();
    assert_eq!(a[vgpu::IDS], "GPU-west-0-0,NVIDIA,12000,0:");
    assert_eq!(a[vgpu::TO_ALLOCATE], a[vgpu::IDS]);
    assert_eq!(a[vgpu::ASSIGNED_NODE], "west-0");
    let east: Api<Pod> = Api::namespaced(fleet.client("east").await.unwrap(), "default");
    assert!(east.get_opt("s0").await.unwrap().is_none());
    // The member's kubelet admits it (the plugin's Allocate would): it runs.
    eventually(30, "the copy Running", || async {
        let p = west.get("s0").await.ok()?;
        (p.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await;
    sched.stop().await;
}
