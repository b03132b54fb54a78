//! The shipped Volcano Job examples (`examples/pytorch-distributed.yaml`, `mpi-job.yaml`,
//! `spark-job.yaml`), applied unchanged to a one-member devcluster with the scheduler and the
//! controllers running, run to Completed; the plugins' objects and variables are there with
//! the right content, and the Spark driver runs before its executors exist (`dependsOn`).
//! Each Job goes through the same phases as when `tephra sim` replays the same manifests
//! (`examples/sim/volcano-jobs.yaml`).
//! The pods run for the Jobs' `tephra.io/sim-duration`, sped up 2000 times.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::{Value, json};
use tephra_api::Job;
use tephra_api::batch::JobPhase;
use tephra_devcluster::kubelet::{KubeletOptions, NodeSpec};
use tephra_devcluster::{DevCluster, Options};

fn example(file: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(file);
    let text = std::fs::read_to_string(path).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn gpu_node(i: usize) -> NodeSpec {
    let mut n = node(&format!("a100-{i}"), "96", 8);
    n.capacity.insert("memory".into(), "1Ti".into());
    n.labels.insert(
        "nvidia.com/gpu.product".into(),
        "NVIDIA-A100-SXM4-80GB".into(),
    );
    n.taints
        .push(json!({"key": "nvidia.com/gpu", "effect": "NoSchedule"}));
    n
}

/// Every pod as first seen, and the order pods were first seen in with the driver's phase.
#[derive(Default)]
struct Seen {
    first: BTreeMap<String, Pod>,
    /// Per pod (namespace/name) the first phase seen Running, in the order events came.
    order: Vec<(String, Option<String>)>,
}

fn key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.clone().unwrap_or_default(),
        p.metadata.name.clone().unwrap_or_default()
    )
}

fn env(p: &Pod) -> BTreeMap<String, String> {
    p.spec.as_ref().unwrap().containers[0]
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name, e.value.unwrap_or_else(|| "<from>".into())))
        .collect()
}

#[tokio::test]
async fn the_shipped_pytorch_mpi_and_spark_jobs_run_to_completed_as_in_the_simulator() {
    logs();
    let mut options = Options::single();
    let mut nodes: Vec<NodeSpec> = (0..6).map(gpu_node).collect();
    for i in 0..4 {
        let mut n = node(&format!("cpu-{i}"), "64", 0);
        n.capacity.insert("memory".into(), "256Gi".into());
        nodes.push(n);
    }
    options.members[0].nodes = nodes;
    options.kubelet = Some(KubeletOptions {
        start_delay: Duration::from_millis(100),
        stop_delay: Duration::from_millis(100),
        heartbeat: Duration::from_millis(200),
        speed: 2000.0,
    });
    // The examples bring their PriorityClass and the batch queue themselves.
    options.queues = ["default", "research"].map(|q| queue_json(q, 1)).to_vec();
    let dev = DevCluster::start(options).await.unwrap();
    let api = &dev.server("local").unwrap().api;
    let c = client(&dev).await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let recorder = {
        let seen = seen.clone();
        let pods: Api<Pod> = Api::all(c.clone());
        tokio::spawn(async move {
            let stream = watcher::watcher(pods, watcher::Config::default());
            futures::pin_mut!(stream);
            while let Some(Ok(ev)) = stream.next().await {
                let (watcher::Event::Apply(p) | watcher::Event::InitApply(p)) = ev else {
                    continue;
                };
                let k = key(&p);
                let phase = p.status.as_ref().and_then(|s| s.phase.clone());
                let mut s = seen.lock().unwrap();
                s.first.entry(k.clone()).or_insert_with(|| p.clone());
                s.order.push((k, phase));
            }
        })
    };
    let (phases, job_watch) = watch_job_phases(&c);
    let (sched, ctl) = start_everything(&c).await;
    for file in ["pytorch-distributed.yaml", "mpi-job.yaml", "spark-job.yaml"] {
        tephra_devcluster::cluster::create_objects(api, &example(file)).unwrap();
    }
    for (ns, name) in [
        ("ml", "llama-finetune"),
        ("hpc", "lm-mpi"),
        ("analytics", "nightly-etl"),
    ] {
        let jobs_api: Api<Job> = Api::namespaced(c.clone(), ns);
        job_reaches(&jobs_api, name, JobPhase::Completed, 60).await;
    }
    let s = std::mem::take(&mut *seen.lock().unwrap());

    // PyTorch: svc, env and pytorch.
    let services: Api<Service> = Api::namespaced(c.clone(), "ml");
    assert!(
        services.get("llama-finetune").await.is_ok(),
        "svc: the headless Service"
    );
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "ml");
    let hosts = cms.get("llama-finetune-svc").await.unwrap().data.unwrap();
    assert_eq!(hosts["VC_WORKER_NUM"], "4");
    assert_eq!(
        hosts["worker.host"].lines().next(),
        Some("llama-finetune-worker-0.llama-finetune")
    );
    let w2 = env(&s.first["ml/llama-finetune-worker-2"]);
    assert_eq!(w2["VC_TASK_INDEX"], "2");
    assert_eq!(w2["MASTER_ADDR"], "llama-finetune-master-0.llama-finetune");
    assert_eq!(w2["MASTER_PORT"], "29500");
    assert_eq!(w2["WORLD_SIZE"], "5");
    assert_eq!(w2["RANK"], "3");

    // MPI: ssh, svc and mpi.
    let secrets: Api<Secret> = Api::namespaced(c.clone(), "hpc");
    let keys = secrets.get("lm-mpi-ssh").await.unwrap().data.unwrap();
    let text = |k: &str| String::from_utf8(keys[k].0.clone()).unwrap();
    assert!(text("id_rsa").starts_with("-----BEGIN OPENSSH PRIVATE KEY-----"));
    assert_eq!(text("id_rsa.pub"), text("authorized_keys"));
    assert!(
        text("config")
            .contains("Host lm-mpi-mpiworker-3\n  HostName lm-mpi-mpiworker-3.lm-mpi\n  Port 22\n"),
        "{}",
        text("config")
    );
    let master = &s.first["hpc/lm-mpi-mpimaster-0"];
    assert_eq!(
        env(master)["MPI_HOST"],
        "lm-mpi-mpiworker-0.lm-mpi,lm-mpi-mpiworker-1.lm-mpi,lm-mpi-mpiworker-2.lm-mpi,lm-mpi-mpiworker-3.lm-mpi"
    );
    let mounts = master.spec.as_ref().unwrap().containers[0]
        .volume_mounts
        .clone()
        .unwrap();
    assert!(mounts.iter().any(|m| m.mount_path == "/root/.ssh"));

    // Spark: no executor exists before the driver runs.
    let first_executor = s
        .order
        .iter()
        .position(|(k, _)| k.starts_with("analytics/nightly-etl-executor-"))
        .expect("executors were created");
    let driver_ran = s.order[..first_executor].iter().any(|(k, phase)| {
        k == "analytics/nightly-etl-driver-0" && phase.as_deref() == Some("Running")
    });
    assert!(driver_ran, "the driver runs before any executor exists");
    recorder.abort();
    job_watch.abort();
    stop_everything(sched, ctl).await;

    // The simulator replays the same manifests through the same job controller.
    let scenario =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/sim/volcano-jobs.yaml");
    let scenario = tephra_sim::Scenario::load(&scenario).unwrap();
    let mut records = Vec::new();
    tephra_sim::run(
        &scenario,
        tephra_sim::RunOptions::default(),
        &mut |r| records.push(r.clone()),
        &mut |_| {},
    )
    .unwrap();
    let on_cluster = phases.lock().unwrap().clone();
    for job in ["ml/llama-finetune", "hpc/lm-mpi", "analytics/nightly-etl"] {
        let simulated = simulated_phases(&records, job);
        assert_eq!(
            on_cluster.get(job),
            Some(&simulated),
            "{job}: the cluster (left) and the simulator (right)"
        );
        assert_eq!(
            simulated,
            ["Pending", "Running", "Completing", "Completed"],
            "{job}"
        );
    }
}
