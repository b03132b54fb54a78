//! The extender end to end on a devcluster member, called as kube-scheduler calls it: a small
//! driver sends `filter` (both `nodeCacheCapable` modes), `prioritize` and then `bind` for each
//! pending pod over HTTP, binds concurrently, and the member's API shows where pods landed. The
//! real kube-scheduler is not available here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use common::schedule;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use tephra_devcluster::kubelet::{KubeletOptions, NodeSpec};
use tephra_devcluster::{DevCluster, Handle, Options};

const NODES: [&str; 3] = ["m-0", "m-1", "m-2"];

async fn member() -> Handle {
    let mut options = Options::single();
    options.members[0].nodes = NODES
        .iter()
        .map(|n| NodeSpec {
            name: (*n).into(),
            capacity: BTreeMap::from([
                ("cpu".to_string(), "16".to_string()),
                ("memory".to_string(), "64Gi".to_string()),
                ("pods".to_string(), "110".to_string()),
            ]),
            ..NodeSpec::default()
        })
        .collect();
    options.kubelet = Some(KubeletOptions {
        start_delay: Duration::from_millis(100),
        stop_delay: Duration::from_millis(100),
        heartbeat: Duration::from_millis(200),
        speed: 1.0,
    });
    DevCluster::start(options).await.expect("devcluster starts")
}

async fn create(client: &kube::Client, name: &str, annotations: Value) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"schedulerName": "default-scheduler",
                 "containers": [{"name": "main", "image": "busybox",
                                 "resources": {"requests": {"cpu": "1"}}}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap()
}

fn planned(group: &str, node: &str, min: u32) -> Value {
    json!({"scheduling.k8s.io/group-name": group, "tephra.io/planned-node": node,
           "tephra.io/gang-min-member": min.to_string()})
}

async fn node_of(client: &kube::Client, name: &str) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.get(name).await.ok()?.spec?.node_name
}

async fn start(client: &kube::Client, timeout: Duration) -> SocketAddr {
    let ext = tephra_extender::Extender::new(
        client.clone(),
        &tephra_extender::Options {
            bind_timeout: timeout,
        },
    )
    .unwrap();
    tephra_extender::watch::start(ext.clone(), client.clone());
    let (addr, _) = tephra_extender::serve(ext, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    addr
}

#[tokio::test]
async fn a_planned_gang_is_bound_whole_on_its_planned_nodes_through_the_extender() {
    let dev = member().await;
    let c = dev.client("local").await.unwrap();
    let addr = start(&c, Duration::from_secs(5)).await;
    let nodes: Vec<Node> = Api::<Node>::all(c.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    // Three pods planned on the nodes in reverse, so that the extender's plan, not the
    // driver's order, decides.
    let mut pods = Vec::new();
    for (i, node) in NODES.iter().rev().enumerate() {
        pods.push(create(&c, &format!("llm-{i}"), planned("llm", node, 3)).await);
    }
    // kube-scheduler binds asynchronously: the three binds are in flight at once.
    let mut tasks = Vec::new();
    for (i, pod) in pods.iter().enumerate() {
        let (pod, nodes) = (pod.clone(), nodes.clone());
        tasks.push(tokio::spawn(async move {
            schedule(addr, &NODES, &nodes, &pod, i % 2 == 0).await
        }));
    }
    for t in tasks {
        assert_eq!(
            t.await.unwrap(),
            Ok(String::new()),
            "every bind of the gang succeeds"
        );
    }
    for (i, node) in NODES.iter().rev().enumerate() {
        assert_eq!(
            node_of(&c, &format!("llm-{i}")).await.as_deref(),
            Some(*node)
        );
    }
    // A pod tephra does not manage passes untouched and is bound at once.
    let web = create(&c, "web", json!({})).await;
    assert_eq!(
        schedule(addr, &NODES, &nodes, &web, true).await,
        Ok(String::new())
    );
    assert!(node_of(&c, "web").await.is_some());
    // A pod of a gang tephra has not planned fits nowhere, and says why.
    let waiting = create(
        &c,
        "bert-0",
        json!({"scheduling.k8s.io/group-name": "bert"}),
    )
    .await;
    let err = schedule(addr, &NODES, &nodes, &waiting, false)
        .await
        .unwrap_err();
    assert!(err.contains("gang default/bert waiting"), "{err}");
}

#[tokio::test]
async fn a_gang_short_of_its_minimum_is_not_bound_at_all_and_its_binds_fail_at_the_timeout() {
    let dev = member().await;
    let c = dev.client("local").await.unwrap();
    let addr = start(&c, Duration::from_millis(500)).await;
    let nodes: Vec<Node> = Vec::new();
    // minMember 3, but only two pods exist.
    let a = create(&c, "vit-0", planned("vit", "m-0", 3)).await;
    let b = create(&c, "vit-1", planned("vit", "m-1", 3)).await;
    let started = std::time::Instant::now();
    let (ra, rb) = tokio::join!(
        schedule(addr, &NODES, &nodes, &a, true),
        schedule(addr, &NODES, &nodes, &b, true)
    );
    let waited = started.elapsed();
    for r in [ra, rb] {
        let err = r.unwrap();
        assert!(err.contains("nothing was bound"), "{err}");
    }
    assert!(waited >= Duration::from_millis(450), "{waited:?}");
    assert_eq!(node_of(&c, "vit-0").await, None);
    assert_eq!(node_of(&c, "vit-1").await, None);
}

#[tokio::test]
async fn a_request_that_is_not_the_verbs_json_is_refused_with_400_saying_where() {
    let dev = member().await;
    let c = dev.client("local").await.unwrap();
    let addr = start(&c, Duration::from_secs(5)).await;
    let (status, body) = common::post_raw(addr, "filter", br#"{"Pod": {"metadata": 7}}"#).await;
    assert!(status.contains(" 400 "), "{status}");
    assert!(body.contains("line 1"), "{body}");
    let (status, _) = common::post_raw(addr, "prioritize", b"not json").await;
    assert!(status.contains(" 400 "), "{status}");
}
