//! Speed of the devcluster's API server over HTTPS with kube-rs, one line per target:
//! a list of 100,000 pods in one request, 10 watchers receiving writes, and creates per second
//! from one client. Run: `cargo bench -p tephra-devcluster --bench devcluster`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use tephra_devcluster::api::{Scope, WriteOpts};
use tephra_devcluster::resource::Builtin;
use tephra_devcluster::{DevCluster, Options, ServerOptions};

fn pod(i: usize) -> serde_json::Value {
    json!({
        "metadata": {"name": format!("pod-{i:06}"), "labels": {"app": "bench", "shard": (i % 16).to_string()}},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "main", "image": "registry.example/train:1.0",
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
    })
}

async fn client(h: &tephra_devcluster::Handle) -> kube::Client {
    let mut config = h.config("local").await.unwrap();
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

async fn list_100k() {
    let mut options = Options::single();
    options.kubelet = None;
    let h = DevCluster::start(options).await.unwrap();
    let api = h.server("local").unwrap().api.clone();
    let pods_def = api.builtin(Builtin::Pod);
    let n = 100_000;
    for i in 0..n {
        api.create(&pods_def, Some("default"), pod(i), &WriteOpts::default())
            .unwrap();
    }
    let pods: Api<Pod> = Api::default_namespaced(client(&h).await);
    // Warm the connection and the objects' cached JSON.
    let _ = pods.list(&ListParams::default().limit(1)).await.unwrap();
    let mut best_raw = Duration::MAX;
    let mut best_typed = Duration::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        let req = http::Request::get("/api/v1/namespaces/default/pods")
            .body(Vec::new())
            .unwrap();
        let text = client(&h).await.request_text(req).await.unwrap();
        best_raw = best_raw.min(t.elapsed());
        assert!(text.len() > 10_000_000);
        let t = Instant::now();
        let list = pods.list(&ListParams::default()).await.unwrap();
        best_typed = best_typed.min(t.elapsed());
        assert_eq!(list.items.len(), n);
    }
    println!(
        "list: {n} pods in one request: {:.0} ms to receive the body, {:.0} ms including kube-rs decoding into typed Pods (best of 3; target < 1000 ms)",
        best_raw.as_secs_f64() * 1e3,
        best_typed.as_secs_f64() * 1e3
    );
}

async fn watch_fan_out() {
    let mut options = Options::single();
    options.kubelet = None;
    options.server = ServerOptions {
        history_limit: 200_000,
        ..ServerOptions::default()
    };
    let h = DevCluster::start(options).await.unwrap();
    let api = h.server("local").unwrap().api.clone();
    let cm_def = api.builtin(Builtin::ConfigMap);
    let keys: Vec<(String, String)> = (0..100)
        .map(|i| ("default".to_string(), format!("cm-{i}")))
        .collect();
    for (_, name) in &keys {
        api.create(
            &cm_def,
            Some("default"),
            json!({"metadata": {"name": name}, "data": {"v": "initial"}}),
            &WriteOpts::default(),
        )
        .unwrap();
    }
    let cms: Api<ConfigMap> = Api::default_namespaced(client(&h).await);
    let start = cms
        .list(&ListParams::default().limit(1))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let writes = 50_000usize;
    let watchers = 10;
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let cms: Api<ConfigMap> = Api::default_namespaced(client(&h).await);
        let start = start.clone();
        tasks.push(tokio::spawn(async move {
            let mut stream = cms
                .watch(&WatchParams::default().timeout(120), &start)
                .await
                .unwrap()
                .boxed();
            let mut n = 0;
            while let Some(ev) = stream.try_next().await.unwrap() {
                if matches!(ev, WatchEvent::Modified(_)) {
                    n += 1;
                    if n == writes {
                        break;
                    }
                }
            }
            Instant::now()
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = Instant::now();
    let writer = tokio::task::spawn_blocking(move || {
        for i in 0..writes {
            let key = &keys[i % keys.len()];
            api.update(
                &cm_def,
                key,
                Scope::Main,
                &WriteOpts::default(),
                &mut |cur| {
                    let mut v = cur.clone();
                    v["data"]["v"] = json!(i.to_string());
                    Ok(v)
                },
            )
            .unwrap();
        }
        Instant::now()
    });
    let wrote = writer.await.unwrap();
    let mut slowest = t;
    for task in tasks {
        slowest = slowest.max(task.await.unwrap());
    }
    let write_s = (wrote - t).as_secs_f64();
    let deliver_s = (slowest - t).as_secs_f64();
    println!(
        "watch: {writes} writes at {:.0}/s, each of {watchers} watchers received all of them at {:.0} events/s (target 5000/s per watcher)",
        writes as f64 / write_s,
        writes as f64 / deliver_s
    );
}

async fn creates_per_second() {
    let mut options = Options::single();
    options.kubelet = None;
    let h = DevCluster::start(options).await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client(&h).await);
    let n = 20_000;
    let in_flight = 64;
    let t = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let p: Pod = serde_json::from_value(pod(i)).unwrap();
                pods.create(&PostParams::default(), &p).await.unwrap();
            }
        })
        .buffer_unordered(in_flight)
        .collect::<Vec<_>>()
        .await;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "create: {n} pods from one kube-rs client ({in_flight} requests in flight) at {:.0}/s (target 5000/s)",
        n as f64 / secs
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        list_100k().await;
        watch_fan_out().await;
        creates_per_second().await;
    });
}
