//! The workloads beyond `workload`'s that the chart's roles must cover, each written once for
//! both kinds of API server: preemption (with a scheduler configuration that preempts),
//! HyperNodes whose status the scheduler keeps, and a fleet's member-side paths.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};

use super::{
    Guard, Owners, TempDir, chart_dir, claim_workload, create, job_phase, job_status, owned_pods,
    wait_for, workload,
};

/// One cluster's values (preemption on) rendered into `dir`, as `helm template` arguments.
pub fn one_cluster_args(dir: &TempDir) -> Vec<String> {
    let values = dir.write("values.json", &preempting_values());
    vec!["-f".into(), values.to_str().unwrap().into()]
}

/// Everything the components do on one cluster of two 8-CPU nodes, whichever its kind:
/// [`workload`], pods of each kind of owner, pods with claims, a HyperNode, and preemption.
pub async fn one_cluster(admin: &kube::Client, guard: &Guard, owners: Owners) {
    workload(admin, guard).await;
    owned_pods(admin, guard, owners).await;
    claim_workload(admin, &[(admin.clone(), "node-a".into())], guard).await;
    racks(std::slice::from_ref(admin), guard).await;
    preemption(admin, guard, 1).await;
}

/// Values whose scheduler configuration is tephra's default with the `preempt` and `reclaim`
/// actions on, as a cluster shared by priorities runs it.
pub fn preempting_values() -> Value {
    let default = std::fs::read_to_string(chart_dir().join("files/tephra-default.conf")).unwrap();
    let config = default.replace(
        "actions: \"enqueue, allocate, backfill\"",
        "actions: \"enqueue, allocate, preempt, reclaim, backfill\"",
    );
    assert_ne!(config, default, "the default configuration's actions moved");
    json!({"scheduler": {"config": config}})
}

/// A Volcano Job of one task: `replicas` pods of `cpu` each, all needed, running an hour,
/// restarted whole when one is evicted; `extra` is merged into its spec.
fn gang_job(name: &str, replicas: u32, cpu: &str, extra: Value) -> Value {
    let mut job = json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"minAvailable": replicas, "schedulerName": "volcano", "queue": "default",
                 "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
                 "tasks": [{"name": "w", "replicas": replicas, "template": {
                     "metadata": {"annotations": {"tephra.io/sim-duration": "1h"}},
                     "spec": {"restartPolicy": "Never", "containers": [{"name": "main",
                         "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}}}]}
    });
    for (k, v) in extra.as_object().unwrap() {
        job["spec"][k] = v.clone();
    }
    job
}

/// Preemption, where each of `members` (the clusters the jobs run in: one, or a fleet's
/// members) has two 8-CPU nodes: a low-priority job fills each (six pods of 2 CPUs, one
/// needed), then a gang of higher priority arrives whose pods (3 CPUs each) fit on no node.
/// The scheduler evicts filler pods through the Eviction API (each marked DisruptionTarget
/// first) and places the urgent gang; the evicted filler restarts (its PodEvicted policy) with
/// a new PodGroup, and runs again as far as it fits. Every job is deleted at the end.
pub async fn preemption(admin: &kube::Client, guard: &Guard, members: usize) {
    let jobs: Api<tephra_api::Job> = Api::namespaced(admin.clone(), "team-a");
    let fillers: Vec<String> = (0..members).map(|i| format!("filler-{i}")).collect();
    for f in &fillers {
        create(admin, gang_job(f, 6, "2", json!({"minAvailable": 1}))).await;
    }
    for f in &fillers {
        wait_for(guard, &format!("all of job {f} to run"), 60, || async {
            job_status(&jobs, f).await.is_some_and(|s| s.running == 6)
        })
        .await;
    }
    create(
        admin,
        gang_job(
            "urgent",
            2,
            "3",
            json!({"priorityClassName": "team-priority"}),
        ),
    )
    .await;
    wait_for(guard, "job urgent to run, preempting", 60, || async {
        job_phase(&jobs, "urgent").await == "Running"
    })
    .await;
    wait_for(guard, "an evicted filler to run again", 60, || async {
        for f in &fillers {
            if job_status(&jobs, f).await.is_some_and(|s| {
                s.retry_count >= 1
                    && s.running >= 1
                    && s.state.phase == Some(tephra_api::batch::JobPhase::Running)
            }) {
                return true;
            }
        }
        false
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "team-a");
    for j in fillers.iter().map(String::as_str).chain(["urgent"]) {
        jobs.delete(j, &DeleteParams::background()).await.unwrap();
    }
    wait_for(guard, "the preemption's pods gone", 60, || async {
        pods.list(&Default::default()).await.is_ok_and(|l| {
            !l.items.iter().any(|p| {
                p.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("filler-") || n.starts_with("urgent-"))
            })
        })
    })
    .await;
}

/// A tier-1 HyperNode `rack` holding every node of each cluster of `clients` (two nodes each),
/// whose `status.nodeCount` the scheduler keeps, as Volcano's HyperNode controller does.
pub async fn racks(clients: &[kube::Client], guard: &Guard) {
    for c in clients {
        create(
            c,
            json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                   "metadata": {"name": "rack"},
                   "spec": {"tier": 1, "members": [{"type": "Node",
                       "selector": {"regexMatch": {"pattern": ".*"}}}]}}),
        )
        .await;
    }
    for c in clients {
        let hns: Api<tephra_api::HyperNode> = Api::all(c.clone());
        wait_for(guard, "the rack's node count", 60, || async {
            hns.get_opt("rack")
                .await
                .ok()
                .flatten()
                .and_then(|h| h.status)
                .and_then(|s| s.node_count)
                == Some(2)
        })
        .await;
    }
}
