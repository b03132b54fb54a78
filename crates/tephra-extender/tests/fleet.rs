//! A member with `bindingMode: Extender` in a devcluster fleet: tephra's scheduler places a
//! gang there and creates its pods unbound, with their planned nodes and the gang's minimum;
//! the member's "kube-scheduler" (the tests' stand-in, calling the extender as kube-scheduler
//! does) binds them through the extender, each on its planned node, and they run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

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

fn node(name: &str) -> NodeSpec {
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
const PROFILE: &str = "tephra-extender";

/// kube-scheduler's stand-in on a member: every pending pod of its profile (`PROFILE`) goes
/// through the extender, one scheduling cycle at a time per pod, binds in flight at once.
fn kube_scheduler(member: kube::Client, addr: std::net::SocketAddr) -> tokio::task::JoinHandle<()> {
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
                    let _ = common::schedule(addr, &refs, &nodes, &p, true).await;
                    busy.lock().unwrap().remove(&key);
                });
            }
        }
    })
}

/// A control plane and one member, `east` (two 2-CPU nodes), that binds through its own
/// kube-scheduler profile [`PROFILE`].
async fn extender_fleet() -> (tephra_devcluster::Handle, kube::Client, kube::Client) {
    let options = Options {
        members: vec![MemberSpec {
            name: "east".into(),
            nodes: vec![node("east-0"), node("east-1")],
            ..MemberSpec::default()
        }],
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

/// The scheduler on the control plane, with members from its Cluster objects.
async fn fleet_scheduler(cp: &kube::Client) -> tephra_kube::Running {
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
async fn declare_gang(cp: &kube::Client, n: usize) {
    let pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "llm", "namespace": "default"},
        "spec": {"minMember": n, "queue": "default"}
    }))
    .unwrap();
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
                     "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}]}
        }))
        .unwrap();
        Api::<Pod>::namespaced(cp.clone(), "default")
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_gang_placed_in_an_extender_member_is_bound_by_its_kube_scheduler_on_the_plan() {
    let (_dev, cp, east) = extender_fleet().await;
    let ext =
        tephra_extender::Extender::new(east.clone(), &tephra_extender::Options::default()).unwrap();
    tephra_extender::watch::start(ext.clone(), east.clone());
    let (addr, _) = tephra_extender::serve(ext, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let _driver = kube_scheduler(east.clone(), addr);
    let sched = fleet_scheduler(&cp).await;
    // A gang of three one-CPU pods on two-CPU nodes: it must span both nodes.
    declare_gang(&cp, 3).await;

    let pods: Api<Pod> = Api::namespaced(east.clone(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let placed = loop {
        let list = pods.list(&ListParams::default()).await.unwrap().items;
        let running: Vec<&Pod> = list
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .collect();
        if running.len() == 3 {
            break list;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gang never ran: {list:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
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
