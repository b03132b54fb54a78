//! Watches that drop mid-stream and resume past the API server's history (410 Gone) relist and
//! replace what the scheduler knew: a pod deleted meanwhile frees its node, a pod created
//! meanwhile is scheduled, and nothing is counted twice.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;
use tephra_devcluster::api::DeleteOpts;
use tephra_devcluster::resource::Builtin;
use tephra_devcluster::{DevCluster, Options};

#[tokio::test]
async fn a_relist_after_410_replaces_state_without_losing_or_double_counting() {
    logs();
    let mut options = Options::single();
    options.members[0].nodes = vec![node("n0", "16", 8)];
    options.server.history_limit = 4;
    options.queues = vec![queue_json("default", 1)];
    options.kubelet = Some(tephra_devcluster::kubelet::KubeletOptions {
        start_delay: Duration::from_millis(100),
        stop_delay: Duration::from_millis(100),
        ..Default::default()
    });
    let dev = DevCluster::start(options).await.unwrap();
    let c = client(&dev).await;
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    // a: two pods of 3 GPUs (6 of 8).
    gang(&c, "default", "a", "default", 2, 2, 3).await;
    all_bound(&c, "default", "a-", 2, 20).await;
    // The member goes away: every watch drops mid-stream.
    let server = dev.server("local").unwrap().clone();
    server.stop().await;
    // Meanwhile: one of a's pods is deleted (3 GPUs free), b (2 GPUs) arrives, and enough
    // other pod changes happen that the watches' resourceVersion leaves the history.
    let api = &server.api;
    let pods = api.builtin(Builtin::Pod);
    api.delete(
        &pods,
        &("default".to_string(), "a-worker-1".to_string()),
        &DeleteOpts {
            grace: Some(0),
            ..DeleteOpts::default()
        },
    )
    .unwrap();
    let mut objects = vec![json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "b", "namespace": "default"},
        "spec": {"minMember": 1, "queue": "default"}
    })];
    objects.push(pod_json("b-worker-0", Some("b"), 2, "volcano"));
    for i in 0..8 {
        objects.push(pod_json(&format!("other-{i}"), None, 0, "someone-else"));
    }
    tephra_devcluster::cluster::create_objects(api, &objects).unwrap();
    server.resume().await.unwrap();
    all_bound(&c, "default", "b-", 1, 30).await;
    // 3 (a-worker-0) + 2 (b) of 8 GPUs are held: c's three GPUs fit only if the deleted pod
    // was forgotten and b was not counted twice.
    gang(&c, "default", "c", "default", 1, 1, 3).await;
    all_bound(&c, "default", "c-", 1, 20).await;
    let relists = sched
        .metrics
        .api_errors
        .with_label_values(&["local", "watch", "410"])
        .get();
    assert!(relists > 0, "the watches never saw 410 Gone");
    sched.stop().await;
}

fn pod_json(name: &str, group: Option<&str>, gpus: u32, scheduler: &str) -> serde_json::Value {
    let mut requests = json!({"cpu": "1"});
    if gpus > 0 {
        requests["nvidia.com/gpu"] = json!(gpus.to_string());
    }
    let mut annotations = json!({});
    if let Some(g) = group {
        annotations["scheduling.k8s.io/group-name"] = json!(g);
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"schedulerName": scheduler, "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": requests, "limits": requests}}]}
    })
}
