//! A devcluster fleet whose member `east` binds through its own kube-scheduler profile and
//! tephra's extender: the fleet, the kube-scheduler stand-in, the scheduler on the control plane
//! and a gang declared there.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tephra_api::{Cluster, PodGroup};
use tephra_devcluster::fleet::MemberSpec;
use tephra_devcluster::kubelet::{KubeletOptions, NodeSpec};
use tephra_devcluster::{DevCluster, Options};

pub fn node(name: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        capacity: BTreeMap::from([
            ("cpu".to_string(), "2".to_string()),
            ("memory".to_string(), "64Gi".to_string()),
            ("pods".to_string(), "110".to_string()),
        ]),
        ..NodeSpec::default()
    }
}

/// The member's kube-scheduler profile that calls the extender, named on its Cluster (as the
/// chart's example runs one beside the member's default-scheduler).
pub const PROFILE: &str = "tephra-extender";

/// kube-scheduler's stand-in on a member: every pending pod of its profile (`PROFILE`) goes
/// through the extender, one scheduling cycle at a time per pod, binds in flight at once.
pub fn kube_scheduler(
    member: kube::Client,
    addr: std::net::SocketAddr,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let busy: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let nodes: Vec<Node> = Api::<Node>::all(member.clone())
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            let names: Vec<String> = nodes
                .iter()
                .filter_map(|n| n.metadata.name.clone())
                .collect();
            let pods = Api::<Pod>::all(member.clone())
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            for p in pods {
                let spec = p.spec.clone().unwrap_or_default();
                if spec.node_name.is_some() || spec.scheduler_name.as_deref() != Some(PROFILE) {
                    continue;
                }
                let key = format!("{:?}/{:?}", p.metadata.namespace, p.metadata.name);
                if !busy.lock().unwrap().insert(key.clone()) {
                    continue;
                }
                let (busy, nodes, names) = (busy.clone(), nodes.clone(), names.clone());
                tokio::spawn(async move {
                    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                    let _ = super::schedule(addr, &refs, &nodes, &p, true).await;
                    busy.lock().unwrap().remove(&key);
                });
            }
        }
    })
}

/// A control plane and one member, `east` (two 2-CPU nodes), that binds through its own
/// kube-scheduler profile [`PROFILE`].
pub async fn extender_fleet() -> (tephra_devcluster::Handle, kube::Client, kube::Client) {
    extender_fleet_of(MemberSpec {
        name: "east".into(),
        nodes: vec![node("east-0"), node("east-1")],
        ..MemberSpec::default()
    })
    .await
}

/// [`extender_fleet`] with the member `east` as given (its nodes, its objects).
pub async fn extender_fleet_of(
    east: MemberSpec,
) -> (tephra_devcluster::Handle, kube::Client, kube::Client) {
    let options = Options {
        members: vec![east],
        control_plane: true,
        queues: vec![json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "default"}, "spec": {"weight": 1, "reclaimable": true}
        })],
        kubelet: Some(KubeletOptions {
            start_delay: Duration::from_millis(100),
            stop_delay: Duration::from_millis(100),
            heartbeat: Duration::from_millis(200),
            speed: 1.0,
        }),
        ..Options::default()
    };
    let dev = DevCluster::start(options).await.unwrap();
    let cp = dev.client("control-plane").await.unwrap();
    let east = dev.client("east").await.unwrap();
    Api::<Cluster>::all(cp.clone())
        .patch(
            "east",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {"tephra.io/member-scheduler-name": PROFILE}},
                "spec": {"bindingMode": "Extender"}})),
        )
        .await
        .unwrap();
    (dev, cp, east)
}

/// The extender for the member `east` (watching it, serving on a free port) and the member's
/// kube-scheduler stand-in calling it.
pub async fn extender_and_kube_scheduler(east: &kube::Client) -> tokio::task::JoinHandle<()> {
    let ext =
        tephra_extender::Extender::new(east.clone(), &tephra_extender::Options::default()).unwrap();
    tephra_extender::watch::start(ext.clone(), east.clone());
    let (addr, _) = tephra_extender::serve(ext, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    kube_scheduler(east.clone(), addr)
}

/// Waits (up to 30 s) until `n` pods run in the member's `default` namespace: every pod there.
pub async fn until_running(east: &kube::Client, n: usize) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(east.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let list = pods.list(&ListParams::default()).await.unwrap().items;
        let running = list
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if running == n {
            return list;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gang never ran: {list:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The scheduler on the control plane, with members from its Cluster objects.
pub async fn fleet_scheduler(cp: &kube::Client) -> tephra_kube::Running {
    tephra_kube::start(
        cp.clone(),
        tephra_kube::Options {
            members: tephra_kube::MemberSource::Clusters,
            period: Duration::from_millis(200),
            listen: Some("127.0.0.1:0".parse().unwrap()),
            ..tephra_kube::Options::default()
        },
    )
    .await
    .unwrap()
}

/// A PodGroup `llm` of `n` one-CPU pods `llm-<i>`, declared on the control plane.
pub async fn declare_gang(cp: &kube::Client, n: usize) {
    declare_gang_of(cp, n, "1", None).await;
}

/// [`declare_gang`] of pods asking `cpu` each, with the PodGroup's `networkTopology`.
pub async fn declare_gang_of(
    cp: &kube::Client,
    n: usize,
    cpu: &str,
    topology: Option<serde_json::Value>,
) {
    let mut pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "llm", "namespace": "default"},
        "spec": {"minMember": n, "queue": "default"}
    }))
    .unwrap();
    if let Some(t) = topology {
        pg.spec.network_topology = Some(serde_json::from_value(t).unwrap());
    }
    Api::<PodGroup>::namespaced(cp.clone(), "default")
        .create(&PostParams::default(), &pg)
        .await
        .unwrap();
    for i in 0..n {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("llm-{i}"), "namespace": "default",
                         "annotations": {"scheduling.k8s.io/group-name": "llm",
                                         "volcano.sh/task-spec": "worker"}},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "main", "image": "busybox",
                     "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}
        }))
        .unwrap();
        Api::<Pod>::namespaced(cp.clone(), "default")
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
    }
}
