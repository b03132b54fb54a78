//! A member with `bindingMode: Extender` in a devcluster fleet: tephra's scheduler places a
//! gang there and creates its pods unbound, with their planned nodes and the gang's minimum;
//! the member's "kube-scheduler" (the tests' stand-in, calling the extender as kube-scheduler
//! does) binds them through the extender, each on its planned node, and they run; a gang held
//! to one rack is bound within one rack; slices of shared GPUs run with the GPUs tephra chose.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use tephra_api::PodGroup;

use common::fleet::{
    PROFILE, declare_gang, declare_gang_of, extender_and_kube_scheduler, extender_fleet,
    extender_fleet_of, fleet_scheduler, node, until_running,
};

#[tokio::test]
async fn a_gang_placed_in_an_extender_member_is_bound_by_its_kube_scheduler_on_the_plan() {
    let (_dev, cp, east) = extender_fleet().await;
    let _driver = extender_and_kube_scheduler(&east).await;
    let sched = fleet_scheduler(&cp).await;
    // A gang of three one-CPU pods on two-CPU nodes: it must span both nodes.
    declare_gang(&cp, 3).await;

    let placed = until_running(&east, 3).await;
    for p in &placed {
        let a = p.metadata.annotations.clone().unwrap_or_default();
        let spec = p.spec.clone().unwrap_or_default();
        assert_eq!(spec.scheduler_name.as_deref(), Some(PROFILE));
        assert_eq!(
            a.get("tephra.io/gang-min-member").map(String::as_str),
            Some("3")
        );
        assert_eq!(
            spec.node_name.as_ref(),
            a.get("tephra.io/planned-node"),
            "bound on the plan"
        );
    }
    let nodes: BTreeSet<String> = placed
        .iter()
        .filter_map(|p| p.spec.clone()?.node_name)
        .collect();
    assert_eq!(nodes.len(), 2, "the plan spans both nodes: {nodes:?}");
    sched.stop().await;
}

#[tokio::test]
async fn a_declared_pod_is_not_scheduled_until_its_member_copy_has_a_node() {
    let (_dev, cp, east) = extender_fleet().await;
    // No kube-scheduler runs in east: the copies are created there and stay unbound.
    let sched = fleet_scheduler(&cp).await;
    declare_gang(&cp, 3).await;
    let copies: Api<Pod> = Api::namespaced(east.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while copies
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len()
        < 3
    {
        assert!(tokio::time::Instant::now() < deadline, "no copies in east");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Time for any status the copies would bring back to the control plane.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let declared: Api<Pod> = Api::namespaced(cp.clone(), "default");
    for i in 0..3 {
        let p = declared.get(&format!("llm-{i}")).await.unwrap();
        let scheduled = p
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "PodScheduled")
            .expect("a PodScheduled condition");
        assert_eq!(scheduled.status, "False", "{scheduled:?}");
        assert_eq!(scheduled.reason.as_deref(), Some("WaitingInMember"));
        let message = scheduled.message.unwrap_or_default();
        assert!(message.contains("east"), "{message}");
        assert!(message.contains(PROFILE), "{message}");
    }
    let pg = Api::<PodGroup>::namespaced(cp.clone(), "default")
        .get("llm")
        .await
        .unwrap();
    // Volcano's phase counts pods allocated to nodes, but none runs.
    let status = pg.status.unwrap_or_default();
    assert_eq!(status.running, 0, "{status:?}");
    sched.stop().await;
}

/// The extender carries out the same topology-aware plan: a gang held to one rack
/// (`networkTopology` hard, tier 1) in an Extender member whose racks interleave its nodes
/// (s0: east-0, east-2; s1: east-1, east-3) is bound by the member's kube-scheduler within one
/// rack, though filling nodes in order would span both.
#[tokio::test]
async fn a_gang_held_to_a_rack_is_bound_through_the_extender_within_one_rack() {
    let rack = |name: &str, pattern: &str| {
        serde_json::json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {"tier": 1, "members": [
                {"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}]}})
    };
    let (_dev, cp, east) = extender_fleet_of(tephra_devcluster::fleet::MemberSpec {
        name: "east".into(),
        nodes: (0..4).map(|i| node(&format!("east-{i}"))).collect(),
        objects: vec![rack("s0", "^east-[02]$"), rack("s1", "^east-[13]$")],
        ..tephra_devcluster::fleet::MemberSpec::default()
    })
    .await;
    let _driver = extender_and_kube_scheduler(&east).await;
    let sched = fleet_scheduler(&cp).await;
    // Two pods of two CPUs: one per node, both in one rack.
    declare_gang_of(
        &cp,
        2,
        "2",
        Some(serde_json::json!({"mode": "hard", "highestTierAllowed": 1})),
    )
    .await;
    let nodes: BTreeSet<String> = until_running(&east, 2)
        .await
        .into_iter()
        .filter_map(|p| p.spec?.node_name)
        .collect();
    let racks: BTreeSet<bool> = nodes
        .iter()
        .map(|n| n == "east-0" || n == "east-2")
        .collect();
    assert_eq!(racks.len(), 1, "within one rack: {nodes:?}");
    sched.stop().await;
}

#[tokio::test]
async fn a_slice_placed_in_an_extender_member_carries_its_gpus_and_runs_there() {
    // east's node registers two 16000 MiB GPUs as the volcano-vgpu device plugin does.
    let mut gpu_node = node("east-0");
    for (k, v) in [
        ("volcano.sh/vgpu-number", "20"),
        ("volcano.sh/vgpu-memory", "32000"),
        ("volcano.sh/vgpu-cores", "200"),
    ] {
        gpu_node.capacity.insert(k.into(), v.into());
    }
    gpu_node.annotations.insert(
        "volcano.sh/node-vgpu-register".into(),
        "GPU-a,10,16000,NVIDIA-Tesla T4,true,hami-core:GPU-b,10,16000,NVIDIA-Tesla T4,true,hami-core:"
            .into(),
    );
    let (_dev, cp, east) = extender_fleet_of(tephra_devcluster::fleet::MemberSpec {
        name: "east".into(),
        nodes: vec![gpu_node, node("east-1")],
        ..Default::default()
    })
    .await;
    let _driver = extender_and_kube_scheduler(&east).await;
    let sched = fleet_scheduler(&cp).await;
    // A gang of two 10000 MiB slices: one per GPU.
    declare_slices(&cp, 2, "10000").await;
    let placed = until_running(&east, 2).await;
    let mut gpus = BTreeSet::new();
    for p in &placed {
        let a = p.metadata.annotations.clone().unwrap_or_default();
        let spec = p.spec.clone().unwrap_or_default();
        // The member's kube-scheduler bound it through the extender, on the plan, and the
        // device plugin (the member's kubelet) found the GPUs tephra chose written on it.
        assert_eq!(spec.scheduler_name.as_deref(), Some(PROFILE));
        assert_eq!(spec.node_name.as_deref(), Some("east-0"));
        assert_eq!(
            a.get("volcano.sh/vgpu-node").map(String::as_str),
            Some("east-0")
        );
        assert_eq!(
            a.get("volcano.sh/bind-phase").map(String::as_str),
            Some("success")
        );
        let ids = a
            .get("volcano.sh/vgpu-ids-new")
            .cloned()
            .unwrap_or_default();
        assert!(ids.ends_with(",NVIDIA,10000,0:"), "{ids}");
        gpus.insert(ids.split(',').next().unwrap_or_default().to_string());
    }
    assert_eq!(
        gpus,
        BTreeSet::from(["GPU-a".to_string(), "GPU-b".to_string()])
    );
    sched.stop().await;
}

/// A PodGroup `slices` of `n` pods `slice-<i>`, each one GPU slice of `mib` MiB, declared on
/// the control plane.
async fn declare_slices(cp: &kube::Client, n: usize, mib: &str) {
    let pg: PodGroup = serde_json::from_value(serde_json::json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "slices", "namespace": "default"},
        "spec": {"minMember": n, "queue": "default"}
    }))
    .unwrap();
    Api::<PodGroup>::namespaced(cp.clone(), "default")
        .create(&kube::api::PostParams::default(), &pg)
        .await
        .unwrap();
    let limits = serde_json::json!({"cpu": "1", "volcano.sh/vgpu-number": "1",
        "volcano.sh/vgpu-memory": mib});
    for i in 0..n {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("slice-{i}"), "namespace": "default",
                         "annotations": {"scheduling.k8s.io/group-name": "slices"}},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "main",
                "image": "cuda", "resources": {"requests": limits, "limits": limits}}]}
        }))
        .unwrap();
        Api::<Pod>::namespaced(cp.clone(), "default")
            .create(&kube::api::PostParams::default(), &pod)
            .await
            .unwrap();
    }
}
