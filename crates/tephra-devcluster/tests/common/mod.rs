//! Helpers shared by the devcluster's integration tests: start a server (or a small fleet),
//! kube-rs clients without retries, and waiting for a condition.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use tephra_devcluster::fleet::MemberSpec;
use tephra_devcluster::kubelet::{KubeletOptions, NodeSpec};
use tephra_devcluster::{DevCluster, Handle, Options};

/// A node with `cpu` cores, `memory` and `gpus` GPUs.
pub fn node(name: &str, cpu: &str, gpus: u32) -> NodeSpec {
    let mut capacity = BTreeMap::from([
        ("cpu".to_string(), cpu.to_string()),
        ("memory".to_string(), "64Gi".to_string()),
        ("pods".to_string(), "110".to_string()),
    ]);
    if gpus > 0 {
        capacity.insert("nvidia.com/gpu".into(), gpus.to_string());
    }
    NodeSpec {
        name: name.into(),
        capacity,
        ..NodeSpec::default()
    }
}

/// Fast kubelets for tests.
pub fn fast_kubelet() -> KubeletOptions {
    KubeletOptions {
        start_delay: Duration::from_millis(100),
        stop_delay: Duration::from_millis(100),
        heartbeat: Duration::from_millis(200),
        speed: 1.0,
    }
}

/// One member named `local` with the CRDs and the given nodes.
pub async fn single_with(nodes: Vec<NodeSpec>) -> Handle {
    let mut options = Options::single();
    options.members[0].nodes = nodes;
    options.kubelet = Some(fast_kubelet());
    DevCluster::start(options).await.expect("devcluster starts")
}

/// One member named `local` with the CRDs and no nodes.
pub async fn single() -> Handle {
    single_with(Vec::new()).await
}

/// A control plane and two members.
pub async fn fleet() -> Handle {
    let options = Options {
        members: vec![
            MemberSpec {
                name: "east".into(),
                nodes: vec![node("east-0", "8", 4), node("east-1", "8", 4)],
                ..MemberSpec::default()
            },
            MemberSpec {
                name: "west".into(),
                nodes: vec![node("west-0", "16", 0)],
                ..MemberSpec::default()
            },
        ],
        control_plane: true,
        kubelet: Some(fast_kubelet()),
        ..Options::default()
    };
    DevCluster::start(options).await.expect("devcluster starts")
}

/// A kube-rs client for a server, without retries (so a 429 or 5xx reaches the test).
pub async fn client(handle: &Handle, name: &str) -> kube::Client {
    let mut config = handle.config(name).await.expect("config");
    config.default_retry = false;
    kube::Client::try_from(config).expect("client")
}

// Not every test binary waits.
#[allow(unused_imports)]
pub use tephra_devcluster::wait::eventually;
