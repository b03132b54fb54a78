//! The extender under the real kube-scheduler (real-cluster tier): a fleet whose member `east`
//! binds through its own kube-scheduler (`bindingMode: Extender`), run with the configuration
//! the project ships (`examples/kube-scheduler-extender.yaml`, only the extender's address
//! changed); tephra's scheduler on the control plane places a GPU gang there and creates its
//! pods unbound with their planned nodes; kube-scheduler calls the extender, which passes each
//! pod only on its planned node and holds the binds until the whole gang has reached bind. A
//! gang that cannot be whole is never bound in part. Slices of shared GPUs bound that way carry
//! the GPUs tephra chose, as the volcano-vgpu device plugin reads them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tephra_api::{Cluster, PodGroup};
use tephra_envtest::Release;
use tephra_envtest::kubelet::NodeSpec;
use tephra_envtest::tier::{self, Fleet};

fn gpu_node(name: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        capacity: BTreeMap::from([
            ("cpu".to_string(), "4".to_string()),
            ("memory".to_string(), "16Gi".to_string()),
            ("pods".to_string(), "110".to_string()),
            ("nvidia.com/gpu".to_string(), "2".to_string()),
        ]),
        ..NodeSpec::default()
    }
}

/// The fleet, the extender for `east`, east's real kube-scheduler with the shipped
/// configuration, and tephra's scheduler on the control plane.
async fn setup() -> Option<(Fleet, tephra_kube::Running)> {
    setup_with(vec![gpu_node("east-0"), gpu_node("east-1")]).await
}

/// [`setup`] with east's nodes as given.
async fn setup_with(nodes: Vec<NodeSpec>) -> Option<(Fleet, tephra_kube::Running)> {
    let fleet = tier::fleet(&Release::tier(), &[("east", nodes)])
        .await
        .unwrap()?;
    let cp = fleet.control_plane_client.clone();
    let east = fleet.client("east").unwrap();
    let ext =
        tephra_extender::Extender::new(east.clone(), &tephra_extender::Options::default()).unwrap();
    tephra_extender::watch::start(ext.clone(), east.clone());
    let (addr, _) = tephra_extender::serve(ext, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    fleet
        .member("east")
        .unwrap()
        .cluster
        .start_scheduler(
            tier::shipped_extender_config(&format!("http://{addr}")).unwrap(),
            &[],
        )
        .unwrap();
    Api::<Cluster>::all(cp.clone())
        .patch(
            "east",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"bindingMode": "Extender"}})),
        )
        .await
        .unwrap();
    let sched = tephra_kube::start(
        cp.clone(),
        tephra_kube::Options {
            members: tephra_kube::MemberSource::Clusters,
            period: Duration::from_millis(200),
            ..tephra_kube::Options::default()
        },
    )
    .await
    .unwrap();
    Some((fleet, sched))
}

/// A PodGroup of `min` and `n` pods asking one CPU and one GPU each, declared on the control
/// plane.
async fn declare(cp: &kube::Client, name: &str, min: usize, n: usize) {
    declare_asking(cp, name, min, n, json!({"cpu": "1", "nvidia.com/gpu": "1"})).await;
}

/// [`declare`], each pod asking `request` (and as much as its limits).
async fn declare_asking(
    cp: &kube::Client,
    name: &str,
    min: usize,
    n: usize,
    request: serde_json::Value,
) {
    let pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min, "queue": "default"}
    }))
    .unwrap();
    Api::<PodGroup>::namespaced(cp.clone(), "default")
        .create(&PostParams::default(), &pg)
        .await
        .unwrap();
    for i in 0..n {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{name}-{i}"), "namespace": "default",
                "annotations": {"scheduling.k8s.io/group-name": name}},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "main",
                "image": "busybox", "resources": {"requests": request, "limits": request}}]}
        }))
        .unwrap();
        Api::<Pod>::namespaced(cp.clone(), "default")
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
    }
}

/// Waits (60 s) until `n` pods of `prefix` run in the member, saying what kube-scheduler said
/// if they do not.
async fn until_running(fleet: &Fleet, prefix: &str, n: usize) -> Vec<Pod> {
    let east = fleet.client("east").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pods = pods_of(&east, prefix).await;
        let running = pods
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if pods.len() == n && running == n {
            return pods;
        }
        assert!(
            Instant::now() < deadline,
            "the gang never ran: {:#?}\nkube-scheduler: {}",
            pods.iter().map(|p| &p.status).collect::<Vec<_>>(),
            fleet
                .member("east")
                .unwrap()
                .cluster
                .log_tail("kube-scheduler", 20)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn pods_of(c: &kube::Client, prefix: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(c.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_kube_scheduler_binds_a_planned_gang_whole_on_its_plan_through_the_extender() {
    let Some((fleet, sched)) = setup().await else {
        return;
    };
    let cp = fleet.control_plane_client.clone();
    // Three GPU pods on two nodes of two GPUs: the plan spans both nodes.
    declare(&cp, "llm", 3, 3).await;
    let placed = until_running(&fleet, "llm-", 3).await;
    for p in &placed {
        let a = p.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            p.spec.as_ref().and_then(|s| s.node_name.as_ref()),
            a.get("tephra.io/planned-node"),
            "bound on the plan"
        );
    }
    let nodes: BTreeSet<String> = placed
        .iter()
        .filter_map(|p| p.spec.clone()?.node_name)
        .collect();
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    // The binds went through kube-scheduler (its identity in the member's audit log), not
    // around it.
    let audit = fleet.member("east").unwrap().cluster.audit().unwrap();
    let binders: BTreeSet<String> = audit
        .iter()
        .filter(|e| e.resource_path() == "pods/binding" && e.code == 201)
        .map(|e| e.user.clone())
        .collect();
    assert!(!binders.is_empty());
    assert!(
        binders.iter().all(|u| u != "system:kube-scheduler"),
        "the extender binds (bindVerb), kube-scheduler does not bind itself: {binders:?}"
    );
    sched.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_bound_by_the_real_kube_scheduler_carry_the_gpus_tephra_chose() {
    // east-0 registers two 16000 MiB GPUs as the volcano-vgpu device plugin does.
    let mut node = gpu_node("east-0");
    for (k, v) in [
        ("volcano.sh/vgpu-number", "20"),
        ("volcano.sh/vgpu-memory", "32000"),
        ("volcano.sh/vgpu-cores", "200"),
    ] {
        node.capacity.insert(k.into(), v.into());
    }
    node.annotations.insert(
        "volcano.sh/node-vgpu-register".into(),
        "GPU-a,10,16000,NVIDIA-Tesla T4,true,hami-core:GPU-b,10,16000,NVIDIA-Tesla T4,true,hami-core:"
            .into(),
    );
    let Some((fleet, sched)) = setup_with(vec![node, gpu_node("east-1")]).await else {
        return;
    };
    let cp = fleet.control_plane_client.clone();
    // Two slices of 10000 MiB: one per GPU of east-0.
    let slice =
        json!({"cpu": "1", "volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "10000"});
    declare_asking(&cp, "slices", 2, 2, slice).await;
    let placed = until_running(&fleet, "slices-", 2).await;
    let mut gpus = BTreeSet::new();
    for p in &placed {
        let a = p.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            p.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            Some("east-0")
        );
        // What the device plugin reads at Allocate, on the pod kube-scheduler bound.
        assert_eq!(
            a.get("volcano.sh/vgpu-node").map(String::as_str),
            Some("east-0")
        );
        let ids = a
            .get("volcano.sh/vgpu-ids-new")
            .cloned()
            .unwrap_or_default();
        assert!(ids.ends_with(",NVIDIA,10000,0:"), "{ids}");
        assert_eq!(a.get("volcano.sh/devices-to-allocate"), Some(&ids));
        gpus.insert(ids.split(',').next().unwrap_or_default().to_string());
    }
    assert_eq!(
        gpus,
        BTreeSet::from(["GPU-a".to_string(), "GPU-b".to_string()])
    );
    sched.stop().await;
}
