//! A Volcano Job behaves the same in `tephra sim` and on a cluster: the same manifests run in
//! the simulator and on a one-member devcluster (scheduler and controllers running, kubelets
//! sped up) go through the same sequence of Job phases, because both run the same job
//! controller.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;
use tephra_devcluster::kubelet::KubeletOptions;
use tephra_devcluster::{DevCluster, Options};
use tephra_sim::{RunOptions, Scenario};

/// Three Jobs: one that completes when its master does, one whose failing pod restarts it
/// until `maxRetry`, and one an exit code aborts.
const MANIFESTS: &str = r#"
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: hello
  namespace: default
  annotations: {tephra.io/sim-duration: "20s"}
spec:
  schedulerName: volcano
  queue: default
  tasks:
    - name: master
      replicas: 1
      policies: [{event: TaskCompleted, action: CompleteJob}]
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
    - name: worker
      replicas: 2
      template:
        metadata: {annotations: {tephra.io/sim-duration: "60s"}}
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: flaky
  namespace: default
  annotations: {tephra.io/sim-duration: "10s", tephra.io/sim-exit-code: "3"}
spec:
  schedulerName: volcano
  queue: default
  maxRetry: 2
  policies: [{event: PodFailed, action: RestartJob}]
  tasks:
    - name: w
      replicas: 2
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: coded
  namespace: default
  annotations: {tephra.io/sim-duration: "10s", tephra.io/sim-exit-code: "7"}
spec:
  schedulerName: volcano
  queue: default
  policies: [{exitCode: 7, action: AbortJob}]
  tasks:
    - name: w
      replicas: 1
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
"#;

const JOBS: [&str; 3] = ["hello", "flaky", "coded"];

fn final_phase(p: &str) -> bool {
    matches!(p, "Completed" | "Failed" | "Aborted" | "Terminated")
}

/// Each Job's phases in order, as the simulator records them.
fn in_the_simulator() -> Vec<Vec<String>> {
    let dir = std::env::temp_dir().join(format!("tephra-parity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("jobs.yaml"), MANIFESTS).unwrap();
    let scenario = "fleet:\n  clusters:\n    - name: local\n      nodePools:\n        - {name: n, count: 2, capacity: {cpu: \"8\", memory: 64Gi, pods: \"110\"}}\nqueues:\n  - {name: default, weight: 1}\nworkload:\n  manifests: [jobs.yaml]\n";
    let s = Scenario::parse(scenario, "parity.yaml", &dir).unwrap();
    let mut records = Vec::new();
    let report = tephra_sim::run(
        &s,
        RunOptions::default(),
        &mut |r| records.push(r.clone()),
        &mut |_| {},
    )
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(report.jobs.lost, 0, "{:?}", report.jobs);
    JOBS.iter()
        .map(|j| simulated_phases(&records, &format!("default/{j}")))
        .collect()
}

/// Each Job's phases in order, as a watch on the devcluster sees them.
async fn on_the_devcluster() -> Vec<Vec<String>> {
    let mut options = Options::single();
    options.members[0].nodes = vec![node("n0", "8", 0), node("n1", "8", 0)];
    options.kubelet = Some(KubeletOptions {
        start_delay: Duration::from_millis(100),
        stop_delay: Duration::from_millis(100),
        heartbeat: Duration::from_millis(200),
        speed: 100.0,
    });
    options.queues = vec![queue_json("default", 1)];
    let dev = DevCluster::start(options).await.unwrap();
    let c = client(&dev).await;
    let (seen, recorder) = watch_job_phases(&c);
    let (sched, ctl) = start_everything(&c).await;
    let docs: Vec<Value> = serde_saphyr::from_multiple(MANIFESTS).unwrap();
    let api = &dev.server("local").unwrap().api;
    tephra_devcluster::cluster::create_objects(api, &docs).unwrap();
    let of = |p: &std::collections::BTreeMap<String, Vec<String>>| -> Vec<Vec<String>> {
        JOBS.iter()
            .map(|j| p.get(&format!("default/{j}")).cloned().unwrap_or_default())
            .collect()
    };
    eventually(60, "every Job in a final phase", || async {
        let s = of(&seen.lock().unwrap());
        s.iter()
            .all(|p| p.last().is_some_and(|p| final_phase(p)))
            .then_some(())
    })
    .await;
    recorder.abort();
    stop_everything(sched, ctl).await;
    of(&seen.lock().unwrap())
}

#[tokio::test]
async fn a_volcano_job_goes_through_the_same_phases_in_the_simulator_and_on_a_cluster() {
    logs();
    let sim = in_the_simulator();
    let cluster = on_the_devcluster().await;
    for (i, job) in JOBS.iter().enumerate() {
        assert_eq!(
            sim[i], cluster[i],
            "job {job}: simulator (left) and cluster (right)"
        );
    }
    assert_eq!(
        sim[0],
        ["Pending", "Running", "Completing", "Completed"],
        "hello"
    );
    assert_eq!(sim[2].last().map(String::as_str), Some("Aborted"), "coded");
    assert_eq!(sim[1].last().map(String::as_str), Some("Failed"), "flaky");
    assert!(
        sim[1].iter().filter(|p| *p == "Restarting").count() >= 2,
        "{:?}",
        sim[1]
    );
}
