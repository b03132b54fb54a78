//! The extender's latency as kube-scheduler sees it, over HTTP on localhost with one kept-alive
//! connection: `filter` with 5,000 candidate nodes, by name (`nodeCacheCapable: true`) and as
//! full Node objects (`false`), and `bind` of a gang of one through a devcluster member's API.
//! Prints p50 and p99 of each; README records a run.
//!
//! `cargo bench -p tephra-extender --bench latency`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tephra_devcluster::kubelet::NodeSpec;
use tephra_devcluster::{DevCluster, Options};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const NODES: usize = 5_000;

/// One kept-alive HTTP/1.1 connection.
struct Conn {
    r: BufReader<TcpStream>,
    addr: SocketAddr,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Self {
        let s = TcpStream::connect(addr).await.unwrap();
        s.set_nodelay(true).unwrap();
        Self {
            r: BufReader::new(s),
            addr,
        }
    }

    async fn post(&mut self, verb: &str, body: &[u8]) -> Vec<u8> {
        let head = format!(
            "POST /{verb} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        let s = self.r.get_mut();
        s.write_all(head.as_bytes()).await.unwrap();
        s.write_all(body).await.unwrap();
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            self.r.read_line(&mut line).await.unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
        }
        let mut out = vec![0; len];
        self.r.read_exact(&mut out).await.unwrap();
        out
    }
}

fn quantiles(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1000.0;
    (at(0.5), at(0.99))
}

fn node(i: usize) -> Value {
    json!({"metadata": {"name": format!("node-{i}"), "labels": {"kubernetes.io/hostname": format!("node-{i}"),
            "topology.kubernetes.io/zone": "z1", "nvidia.com/gpu.product": "A100"}},
           "spec": {"podCIDR": "10.0.0.0/24"},
           "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"},
                      "capacity": {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"},
                      "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut options = Options::single();
        options.members[0].nodes = vec![NodeSpec {
            name: "node-0".into(),
            capacity: [("cpu", "96"), ("memory", "1Ti"), ("pods", "100000")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..NodeSpec::default()
        }];
        options.kubelet = None;
        let dev = DevCluster::start(options).await.unwrap();
        let member = dev.client("local").await.unwrap();
        let ext = tephra_extender::Extender::new(member.clone(), &tephra_extender::Options::default())
            .unwrap();
        let (addr, _) = tephra_extender::serve(ext, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let mut conn = Conn::open(addr).await;
        let pod = json!({"metadata": {"name": "llm-0", "namespace": "default", "uid": "u0",
            "annotations": {"scheduling.k8s.io/group-name": "llm", "tephra.io/planned-node": "node-4321",
                            "tephra.io/gang-min-member": "1"}},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}});
        let names: Vec<String> = (0..NODES).map(|i| format!("node-{i}")).collect();
        let by_name = serde_json::to_vec(&json!({"Pod": pod, "Nodes": null, "NodeNames": names})).unwrap();
        let items: Vec<Value> = (0..NODES).map(node).collect();
        let full = serde_json::to_vec(&json!({"Pod": pod, "Nodes": {"metadata": {}, "items": items}, "NodeNames": null})).unwrap();
        // The same work without HTTP: decode, decide, encode.
        {
            let index = tephra_extender::index::Index::default();
            let mut took = Vec::new();
            for _ in 0..2_000 {
                let t = Instant::now();
                let args: tephra_extender::wire::ExtenderArgs = serde_json::from_slice(&by_name).unwrap();
                let out = tephra_extender::verbs::filter(&args, &index);
                let bytes = serde_json::to_vec(&out).unwrap();
                took.push(t.elapsed());
                assert!(!bytes.is_empty());
            }
            let (p50, p99) = quantiles(took);
            println!("filter without HTTP (decode, decide, encode), {NODES} names: p50 {p50:.3} ms, p99 {p99:.3} ms");
        }
        for (label, body, runs) in [("nodeCacheCapable: true", &by_name, 2_000), ("nodeCacheCapable: false", &full, 200)] {
            for _ in 0..20 {
                conn.post("filter", body).await;
            }
            let mut took = Vec::new();
            for _ in 0..runs {
                let t = Instant::now();
                let out = conn.post("filter", body).await;
                took.push(t.elapsed());
                assert!(out.len() > 10);
            }
            let (p50, p99) = quantiles(took);
            println!("filter, {NODES} nodes, {label} ({} KiB request): p50 {p50:.3} ms, p99 {p99:.3} ms", body.len() / 1024);
        }
        // bind: a pod of a gang of one, through the barrier to the member's API.
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(member.clone(), "default");
        let mut took = Vec::new();
        for i in 0..500 {
            let name = format!("b-{i}");
            let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default",
                    "annotations": {"scheduling.k8s.io/group-name": format!("g{i}"), "tephra.io/planned-node": "node-0",
                                    "tephra.io/gang-min-member": "1"}},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]}})).unwrap();
            let created = pods.create(&Default::default(), &p).await.unwrap();
            // kube-scheduler filters before it binds: the extender learns the pod there.
            let f = serde_json::to_vec(&json!({"Pod": created, "NodeNames": ["node-0"]})).unwrap();
            conn.post("filter", &f).await;
            let body = serde_json::to_vec(&json!({"PodName": name, "PodNamespace": "default",
                "PodUID": created.metadata.uid, "Node": "node-0"})).unwrap();
            let t = Instant::now();
            let out = conn.post("bind", &body).await;
            took.push(t.elapsed());
            let v: Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(v["Error"], "", "{v}");
        }
        let (p50, p99) = quantiles(took);
        println!("bind, gang of one, through the member's API: p50 {p50:.3} ms, p99 {p99:.3} ms");
    });
}
