//! A gang placed on room that is still being freed (pods terminating there) waits with its
//! pods nominated to that node (`status.nominatedNodeName`, as kube-scheduler shows a
//! preemptor's), and is bound there once the room is free.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use tephra_devcluster::kubelet::KubeletOptions;
use tephra_devcluster::{DevCluster, Options};

#[tokio::test]
async fn a_gang_waiting_for_terminating_pods_is_nominated_to_their_node() {
    logs();
    let mut options = Options::single();
    options.members[0].nodes = vec![node("n0", "2", 0)];
    options.kubelet = Some(KubeletOptions {
        start_delay: Duration::from_millis(100),
        // Terminating pods hold their node for 3 s.
        stop_delay: Duration::from_secs(3),
        heartbeat: Duration::from_millis(200),
        speed: 1.0,
    });
    options.queues = vec![queue_json("default", 1)];
    let dev = DevCluster::start(options).await.unwrap();
    let c = client(&dev).await;
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    gang(&c, "default", "old", "default", 2, 2, 0).await;
    all_bound(&c, "default", "old-", 2, 20).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    for name in ["old-worker-0", "old-worker-1"] {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    gang(&c, "default", "new", "default", 2, 2, 0).await;
    eventually(5, "the new gang nominated to n0 while it waits", || async {
        let mut ok = true;
        for name in ["new-worker-0", "new-worker-1"] {
            let p = pods.get(name).await.ok()?;
            let waiting = p.spec.as_ref()?.node_name.is_none();
            let nominated = p.status.as_ref()?.nominated_node_name.as_deref() == Some("n0");
            ok &= waiting && nominated;
        }
        ok.then_some(())
    })
    .await;
    let placed = all_bound(&c, "default", "new-", 2, 20).await;
    assert!(placed.values().all(|n| n.as_deref() == Some("n0")));
    sched.stop().await;
}
