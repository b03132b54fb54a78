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

/// A pod of one GPU slice of `mib` MiB, of its own PodGroup `name`.
fn slice_pod_of(name: &str, mib: &str) -> Pod {
    let limits = json!({"cpu": "1", "volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": mib});
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

/// Registers node `g`'s two GPUs (`register`, as its device plugin would) and creates a
/// slice of `mib` MiB per name, each with its PodGroup.
async fn registered_slices(c: &kube::Client, register: &str, names: &[&str], mib: &str) {
    let nodes: Api<Node> = Api::all(c.clone());
    nodes
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {vgpu::REGISTER: register}}})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pgs: Api<PodGroup> = Api::namespaced(c.clone(), "default");
    for name in names {
        let pg: PodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": 1, "queue": "default"}
        }))
        .unwrap();
        pgs.create(&PostParams::default(), &pg).await.unwrap();
        pods.create(&PostParams::default(), &slice_pod_of(name, mib))
            .await
            .unwrap();
    }
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
    registered_slices(&c, REGISTER, &["s0", "s1", "s2"], "10000").await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pgs: Api<PodGroup> = Api::namespaced(c.clone(), "default");
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
        assert_eq!(a[vgpu::ASSIGNED_NODE], "g", "{name}");
        // The devcluster's kubelet plays the device plugin: once it allocated the pod it says
        // so, with the devices handed out taken off the list.
        match a[vgpu::BIND_PHASE].as_str() {
            "allocating" => assert_eq!(a[vgpu::TO_ALLOCATE], *ids, "{name}"),
            "success" => assert!(
                vgpu::Grants::parse(&a[vgpu::TO_ALLOCATE])
                    .all()
                    .next()
                    .is_none(),
                "{name}: {}",
                a[vgpu::TO_ALLOCATE]
            ),
            other => panic!("{name}: bind phase {other}"),
        }
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
    let pod = slice_pod_of("s0", "12000");
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
    // Still to allocate, or (the member's kubelet plays the plugin) allocated.
    let allocated = a[vgpu::BIND_PHASE] == "success" && a[vgpu::TO_ALLOCATE].is_empty();
    assert!(allocated || a[vgpu::TO_ALLOCATE] == a[vgpu::IDS], "{a:?}");
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

/// Writes a scheduler configuration whose `deviceshare` has `arguments` (YAML lines, indented
/// six spaces), returning its path.
fn config_file(kind: &str, tag: &str, arguments: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tephra-{kind}-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("scheduler.conf");
    std::fs::write(
        &path,
        format!("actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n  - name: drf\n  - name: predicates\n  - name: proportion\n  - name: deviceshare\n    arguments:\n{arguments}"),
    )
    .unwrap();
    path
}

/// Writes a scheduler configuration with the node lock on, returning its path.
fn locking_config(tag: &str) -> std::path::PathBuf {
    config_file(
        "vgpu-lock",
        tag,
        "      deviceshare.VGPUEnable: true\n      deviceshare.SchedulePolicy: binpack\n      deviceshare.NodeLockEnable: true\n",
    )
}

on_both!(
    with_the_node_lock_slices_of_one_node_bind_one_at_a_time,
    with_the_node_lock_slices_of_one_node_bind_one_at_a_time
);
/// With `deviceshare.NodeLockEnable`, tephra takes the node's `hamivgpu` lock (an RFC 3339
/// time) before it binds a slice there, and binds no other slice to the node until the device
/// plugin has released it: on the devcluster its kubelet plays the plugin (writes
/// `bind-phase: success` and removes the lock), on a real API server the test does. So no
/// slice is bound while another of the node is still being allocated, which is what keeps
/// the plugin from handing one pod's GPUs to another.
async fn with_the_node_lock_slices_of_one_node_bind_one_at_a_time(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![vgpu_node()]).await else {
        return;
    };
    let c = cl.client.clone();
    let names = ["s0", "s1", "s2"];
    registered_slices(&c, REGISTER, &names, "3000").await;
    let nodes: Api<Node> = Api::all(c.clone());
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let options = tephra_kube::run::Options {
        config_path: Some(locking_config(&format!("{backend:?}"))),
        ..scheduler_options()
    };
    let sched = tephra_kube::start(c.clone(), options).await.unwrap();
    let real = backend == Backend::KubeApiserver;
    let mut seen_bound: Vec<String> = Vec::new();
    for round in 0..names.len() {
        // The next slice binds, alone: every slice bound before it was allocated already.
        let now_bound: Vec<(String, BTreeMap<String, String>)> =
            eventually(30, "the next slice bound", || async {
                let mut out = Vec::new();
                for name in names {
                    let p = pods.get(name).await.ok()?;
                    if p.spec.as_ref()?.node_name.is_some() {
                        out.push((name.to_string(), p.metadata.annotations.unwrap_or_default()));
                    }
                }
                (out.len() > round).then_some(out)
            })
            .await;
        assert_eq!(
            now_bound.len(),
            round + 1,
            "one slice per lock: {now_bound:?}"
        );
        let (fresh, annotations) = now_bound
            .iter()
            .find(|(n, _)| !seen_bound.contains(n))
            .unwrap()
            .clone();
        seen_bound.push(fresh.clone());
        if real {
            // tephra took the lock: a time of now.
            let node = nodes.get("g").await.unwrap();
            let at = node.metadata.annotations.unwrap_or_default()[vgpu::NODE_LOCK].clone();
            let at: k8s_openapi::jiff::Timestamp = at.parse().unwrap();
            let age = k8s_openapi::jiff::Timestamp::now().as_second() - at.as_second();
            assert!((0..60).contains(&age), "lock taken {age} s ago");
            assert_eq!(annotations[vgpu::BIND_PHASE], "allocating");
            // Nothing else binds while it stands.
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
            let bound = pods
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .iter()
                .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
                .count();
            assert_eq!(bound, round + 1, "nothing binds while the lock stands");
            // The device plugin allocated it: it says so and lets the lock go.
            pods.patch(
                &fresh,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {vgpu::BIND_PHASE: "success"}}})),
            )
            .await
            .unwrap();
            nodes
                .patch(
                    "g",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"annotations": {vgpu::NODE_LOCK: null}}})),
                )
                .await
                .unwrap();
        } else {
            for (name, a) in &now_bound {
                if *name != fresh {
                    assert_eq!(
                        a[vgpu::BIND_PHASE],
                        "success",
                        "{name} allocated before {fresh} bound"
                    );
                }
            }
        }
    }
    // Binpack: the three slices share one GPU, each told apart by the plugin in turn.
    let mut gpus = std::collections::BTreeSet::new();
    for name in names {
        let p = pods.get(name).await.unwrap();
        let a = p.metadata.annotations.unwrap_or_default();
        gpus.extend(
            vgpu::Grants::parse(&a[vgpu::IDS])
                .all()
                .map(|g| g.uuid.clone()),
        );
    }
    assert_eq!(gpus.len(), 1, "{gpus:?}");
    if !real {
        eventually(20, "the kubelet released the last lock", || async {
            let n = nodes.get("g").await.ok()?;
            (!n.metadata
                .annotations
                .unwrap_or_default()
                .contains_key(vgpu::NODE_LOCK))
            .then_some(())
        })
        .await;
    }
    sched.stop().await;
}

const MIG_REGISTER: &str =
    "GPU-a,10,81920,NVIDIA-A100-PCIE-80GB,true,mig:GPU-b,10,81920,NVIDIA-A100-PCIE-80GB,true,mig:";

/// Volcano's device configuration with the A100 80GB's geometries (seven 1g.10gb, or one
/// 7g.80gb).
const DEVICE_CONFIG: &str = "nvidia:
  knownMigGeometries:
  - models: [A100-PCIE-80GB]
    allowedGeometries:
      - {group: group1, geometries: [{name: 1g.10gb, memory: 10240, count: 7}]}
      - {group: group4, geometries: [{name: 7g.80gb, memory: 81920, count: 1}]}
";

on_both!(
    dynamic_mig_slices_take_instances_of_the_geometries_volcanos_config_map_names,
    dynamic_mig_slices_take_instances_of_the_geometries_volcanos_config_map_names
);
/// A node whose vGPU plugin registered its GPUs in dynamic MIG mode, and Volcano's device
/// configuration ConfigMap (`kube-system/volcano-vgpu-device-config`) with the A100's
/// geometries: each 8000 MiB slice is given its own 1g.10gb instance, named as the plugin reads
/// it (`GPU-a[group1-0]`, 10240 MiB), packed onto one GPU. On the devcluster its kubelet then
/// admits them as the plugin would.
async fn dynamic_mig_slices_take_instances_of_the_geometries_volcanos_config_map_names(
    backend: Backend,
) {
    logs();
    let Some(cl) = cluster_on(backend, vec![vgpu_node()]).await else {
        return;
    };
    let c = cl.client.clone();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(c.clone(), "kube-system");
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "volcano-vgpu-device-config", "namespace": "kube-system"},
        "data": {"device-config.yaml": DEVICE_CONFIG}
    }))
    .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let names = ["s0", "s1", "s2"];
    registered_slices(&c, MIG_REGISTER, &names, "8000").await;
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let ids: Vec<String> = eventually(30, "three slices bound", || async {
        let mut out = Vec::new();
        for name in names {
            let p = pods.get(name).await.ok()?;
            p.spec.as_ref()?.node_name.as_ref()?;
            out.push(p.metadata.annotations?.get(vgpu::IDS)?.clone());
        }
        Some(out)
    })
    .await;
    let mut instances = std::collections::BTreeSet::new();
    for ids in &ids {
        let grants = vgpu::Grants::parse(ids);
        let all: Vec<_> = grants.all().collect();
        assert_eq!(all.len(), 1, "{ids}");
        assert_eq!(all[0].memory, 10240, "{ids}");
        let (gpu, group, position) =
            tephra_scheduler::model::mig::parse_instance_id(&all[0].uuid).expect("an instance");
        assert_eq!(group, "group1", "{ids}");
        instances.insert((gpu.to_string(), position));
    }
    assert_eq!(instances.len(), 3, "each its own instance: {instances:?}");
    let gpus: std::collections::BTreeSet<&str> =
        instances.iter().map(|(g, _)| g.as_str()).collect();
    assert_eq!(gpus.len(), 1, "packed onto one GPU: {instances:?}");
    if backend == Backend::Devcluster {
        eventually(20, "the kubelet admitted them", || async {
            let mut running = 0;
            for name in names {
                let p = pods.get(name).await.ok()?;
                if p.status?.phase.as_deref() == Some("Running") {
                    running += 1;
                }
            }
            (running == 3).then_some(())
        })
        .await;
    }
    sched.stop().await;
}

/// A scheduler whose credentials may do everything it needs but read ConfigMaps (an install
/// that predates the device configuration's grant) takes the refusal as "no device
/// configuration": it becomes ready, and a `mig`-mode GPU is shared as any other, rather than
/// never counting the kind as listed. On the devcluster, whose RBAC is held to kube-apiserver's
/// by the chart tests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_forbidden_the_device_config_is_ready_and_shares_mig_gpus_as_any_other() {
    logs();
    let Some(cl) = cluster_on(Backend::Devcluster, vec![vgpu_node()]).await else {
        return;
    };
    let admin = cl.client.clone();
    let dev = cl.dev.as_ref().unwrap();
    // Every group the scheduler reads or writes, the core group without configmaps.
    let core = [
        "pods",
        "pods/binding",
        "pods/eviction",
        "pods/status",
        "nodes",
        "nodes/status",
        "events",
        "persistentvolumeclaims",
        "persistentvolumes",
        "namespaces",
    ];
    let role: k8s_openapi::api::rbac::v1::ClusterRole = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "no-configmaps"},
        "rules": [
            {"apiGroups": [""], "resources": core, "verbs": ["*"]},
            {"apiGroups": ["scheduling.volcano.sh", "batch.volcano.sh", "bus.volcano.sh",
                           "topology.volcano.sh", "storage.k8s.io", "resource.k8s.io",
                           "policy", "scheduling.k8s.io", "coordination.k8s.io",
                           "events.k8s.io"],
             "resources": ["*"], "verbs": ["*"]}
        ]
    }))
    .unwrap();
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "no-configmaps"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "no-configmaps"},
        "subjects": [{"kind": "ServiceAccount", "name": "sched", "namespace": "default"}]
    }))
    .unwrap();
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let yaml = dev
        .service_account_kubeconfig("local", "default", "sched")
        .unwrap();
    let config = tephra_devcluster::kubeconfig::config(&yaml, "local")
        .await
        .unwrap();
    let sched_client = kube::Client::try_from(config).unwrap();
    registered_slices(&admin, MIG_REGISTER, &["s0"], "8000").await;
    let sched = tephra_kube::start(sched_client, scheduler_options())
        .await
        .unwrap();
    let addr = sched.metrics_addr.expect("listens");
    eventually(30, "the scheduler is ready", || async {
        (http_get(addr, "/readyz").await.0 == 200).then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    let ids = eventually(30, "the slice bound", || async {
        let p = pods.get("s0").await.ok()?;
        p.spec.as_ref()?.node_name.as_ref()?;
        p.metadata.annotations?.get(vgpu::IDS).cloned()
    })
    .await;
    // A whole GPU's slice, not an instance.
    assert!(!ids.contains('['), "{ids}");
    sched.stop().await;
}

/// Writes a scheduler configuration with Volcano's gpushare mode on, returning its path.
fn gpushare_config(tag: &str) -> std::path::PathBuf {
    config_file(
        "gpushare",
        tag,
        "      deviceshare.GPUSharingEnable: true\n",
    )
}

/// A pod of `mib` MiB of one gpushare card, of its own PodGroup `name`.
async fn gpushare_pod(c: &kube::Client, name: &str, mib: &str) {
    let pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": 1, "queue": "default"}
    }))
    .unwrap();
    Api::<PodGroup>::namespaced(c.clone(), "default")
        .create(&PostParams::default(), &pg)
        .await
        .unwrap();
    let limits = json!({"cpu": "1", "volcano.sh/gpu-memory": mib});
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default",
            "annotations": {"scheduling.k8s.io/group-name": name}},
        "spec": {"schedulerName": "volcano", "containers": [
            {"name": "main", "image": "cuda", "resources": {"requests": limits, "limits": limits}}]}
    }))
    .unwrap();
    Api::<Pod>::namespaced(c.clone(), "default")
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
}

on_both!(
    gpushare_pods_are_bound_with_the_card_index_volcano_writes,
    gpushare_pods_are_bound_with_the_card_index_volcano_writes
);
/// Volcano's older gpushare mode (`deviceshare.GPUSharingEnable`): a node offering
/// `volcano.sh/gpu-memory` over `volcano.sh/gpu-number` cards; pods limiting
/// `volcano.sh/gpu-memory` are bound with `volcano.sh/gpu-index` (the card) and
/// `volcano.sh/predicate-time`, the lowest card with room first, and the cards held by pods
/// running are read back from their annotations.
async fn gpushare_pods_are_bound_with_the_card_index_volcano_writes(backend: Backend) {
    logs();
    let mut n = node("g", "8", 0);
    n.capacity.insert(vgpu::SHARE_MEMORY.into(), "32000".into());
    n.capacity.insert(vgpu::SHARE_NUMBER.into(), "2".into());
    let Some(cl) = cluster_on(backend, vec![n]).await else {
        return;
    };
    let c = cl.client.clone();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let options = tephra_kube::run::Options {
        config_path: Some(gpushare_config(&format!("{backend:?}"))),
        ..scheduler_options()
    };
    let sched = tephra_kube::start(c.clone(), options).await.unwrap();
    let index = |name: &'static str| {
        let pods = pods.clone();
        async move {
            let p = pods.get(name).await.ok()?;
            p.spec.as_ref()?.node_name.as_ref()?;
            let a = p.metadata.annotations.unwrap_or_default();
            assert!(
                a.get(vgpu::SHARE_PREDICATE_TIME)
                    .is_some_and(|t| t.parse::<i128>().is_ok()),
                "{a:?}"
            );
            a.get(vgpu::SHARE_INDEX).cloned()
        }
    };
    // 10000 MiB on card 0; the next 10000 does not fit beside it (16000 each): card 1.
    gpushare_pod(&c, "a", "10000").await;
    assert_eq!(eventually(30, "a bound", || index("a")).await, "0");
    gpushare_pod(&c, "b", "10000").await;
    assert_eq!(eventually(30, "b bound", || index("b")).await, "1");
    // A scheduler started afresh knows the cards held only from the pods' annotations: 6000
    // fits beside either, and the lowest card goes first.
    sched.stop().await;
    let options = tephra_kube::run::Options {
        config_path: Some(gpushare_config(&format!("{backend:?}"))),
        ..scheduler_options()
    };
    let sched = tephra_kube::start(c.clone(), options).await.unwrap();
    gpushare_pod(&c, "c", "6000").await;
    assert_eq!(eventually(30, "c bound", || index("c")).await, "0");
    gpushare_pod(&c, "d", "7000").await;
    let message = eventually(30, "d waits, saying why", || async {
        let pg = Api::<PodGroup>::namespaced(c.clone(), "default")
            .get("d")
            .await
            .ok()?;
        pg.status?
            .conditions
            .iter()
            .find_map(|c| c.message.clone().filter(|m| m.contains("not enough gpu")))
    })
    .await;
    assert!(message.contains("not enough gpu fitted"), "{message}");
    sched.stop().await;
}
