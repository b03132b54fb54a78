//! What is removed or stopped on the control plane is removed or stopped in the members: a
//! deleted Volcano Job takes its member copies and its ResourceBinding with it; a suspended Job
//! has none left running and runs there again when resumed; a declared pod deleted while its
//! member is down is deleted there once the member answers, even by a scheduler that was
//! restarted meanwhile. Three members and the control plane of a devcluster, over HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use tephra_api::batch::JobPhase;
use tephra_api::{Job, ResourceBinding};

async fn fleet() -> tephra_devcluster::Handle {
    fleet_of(&[("east", 2), ("west", 8), ("north", 4)]).await
}

/// Two pods of 8 GPUs that run for an hour: only west can hold them.
fn long_job(name: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default",
            "annotations": {"tephra.io/sim-duration": "1h"}},
        "spec": {"schedulerName": "volcano", "queue": "default", "minAvailable": 2,
            "tasks": [{"name": "w", "replicas": 2, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "8"},
                                  "limits": {"nvidia.com/gpu": "8"}}}]}}}]}
    }))
    .unwrap()
}

/// The names of the pods in `member` (namespace `default`) whose names start with `prefix`.
async fn member_pods(dev: &tephra_devcluster::Handle, member: &str, prefix: &str) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(dev.client(member).await.unwrap(), "default");
    pods.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

async fn none_left_in(dev: &tephra_devcluster::Handle, member: &str, prefix: &str, secs: u64) {
    eventually(
        secs,
        &format!("no {prefix}* pods left in {member}"),
        || async {
            member_pods(dev, member, prefix)
                .await
                .is_empty()
                .then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn deleting_a_job_removes_its_member_copies_and_its_binding() {
    logs();
    let dev = fleet().await;
    let cp = dev.client("control-plane").await.unwrap();
    let (sched, ctl) = fleet_scheduler_and_jobs(&cp).await;
    let jobs: Api<Job> = Api::namespaced(cp.clone(), "default");
    jobs.create(&PostParams::default(), &long_job("train"))
        .await
        .unwrap();
    let west = dev.client("west").await.unwrap();
    all_bound(&west, "default", "train-w-", 2, 30).await;
    // The binding is named after the job's PodGroup, `train-<job uid>`.
    let rbs: Api<ResourceBinding> = Api::namespaced(cp.clone(), "default");
    let bindings = || async {
        rbs.list(&ListParams::default())
            .await
            .map(|l| l.items.len())
            .unwrap_or_default()
    };
    eventually(10, "the ResourceBinding", || async {
        (bindings().await == 1).then_some(())
    })
    .await;
    jobs.delete("train", &DeleteParams::default())
        .await
        .unwrap();
    none_left_in(&dev, "west", "train-", 20).await;
    eventually(20, "the ResourceBinding gone with its job", || async {
        (bindings().await == 0).then_some(())
    })
    .await;
    stop_everything(sched, ctl).await;
}

#[tokio::test]
async fn a_suspended_job_runs_nothing_in_its_member_and_runs_there_again_when_resumed() {
    logs();
    let dev = fleet().await;
    let cp = dev.client("control-plane").await.unwrap();
    let (sched, ctl) = fleet_scheduler_and_jobs(&cp).await;
    let jobs: Api<Job> = Api::namespaced(cp.clone(), "default");
    let job = jobs
        .create(&PostParams::default(), &long_job("pausable"))
        .await
        .unwrap();
    let west = dev.client("west").await.unwrap();
    let first = all_bound(&west, "default", "pausable-w-", 2, 30).await;
    job_reaches(&jobs, "pausable", JobPhase::Running, 30).await;
    let uids = |pods: Vec<Pod>| -> Vec<String> {
        pods.into_iter().filter_map(|p| p.metadata.uid).collect()
    };
    let west_pods: Api<Pod> = Api::namespaced(west.clone(), "default");
    let before = uids(west_pods.list(&ListParams::default()).await.unwrap().items);
    let commands: Api<tephra_api::Command> = Api::namespaced(cp.clone(), "default");
    commands
        .create(&PostParams::default(), &command(&job, "AbortJob"))
        .await
        .unwrap();
    job_reaches(&jobs, "pausable", JobPhase::Aborted, 30).await;
    none_left_in(&dev, "west", "pausable-", 20).await;
    commands
        .create(&PostParams::default(), &command(&job, "ResumeJob"))
        .await
        .unwrap();
    // New copies, of the new pods: none of the old ones comes back or counts.
    let again = all_bound(&west, "default", "pausable-w-", 2, 30).await;
    assert_eq!(again.len(), first.len());
    let after = uids(west_pods.list(&ListParams::default()).await.unwrap().items);
    assert!(
        after.iter().all(|u| !before.contains(u)),
        "an old copy survived the suspension"
    );
    job_reaches(&jobs, "pausable", JobPhase::Running, 30).await;
    let pgs: Api<tephra_api::PodGroup> = Api::namespaced(cp.clone(), "default");
    eventually(
        20,
        "the PodGroup counts the two pods running again",
        || async {
            let list = pgs.list(&ListParams::default()).await.ok()?;
            let running: Vec<i32> = list
                .items
                .into_iter()
                .filter_map(|g| Some(g.status?.running))
                .collect();
            (running == [2]).then_some(())
        },
    )
    .await;
    stop_everything(sched, ctl).await;
}

#[tokio::test]
async fn a_pod_deleted_while_its_member_is_down_goes_there_when_it_answers_even_after_a_restart() {
    logs();
    let dev = fleet().await;
    let cp = dev.client("control-plane").await.unwrap();
    let sched = fleet_scheduler(&cp).await;
    // Four pods of 4 GPUs: only west holds 16.
    gang(&cp, "default", "llm", "default", 4, 4, 4).await;
    let west = dev.client("west").await.unwrap();
    all_bound(&west, "default", "llm-", 4, 30).await;
    dev.stop_member("west").await.unwrap();
    let declared: Api<Pod> = Api::namespaced(cp.clone(), "default");
    for i in 0..4 {
        declared
            .delete(&format!("llm-worker-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    // The scheduler restarts while west is down: what it has to delete there is not
    // remembered anywhere but in what the two sides show.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    sched.stop().await;
    let sched = fleet_scheduler(&cp).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    dev.restore_member("west").await.unwrap();
    none_left_in(&dev, "west", "llm-", 30).await;
    sched.stop().await;
}

#[tokio::test]
async fn a_deleted_jobs_configmaps_secret_and_service_leave_the_member_with_its_pods() {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
    logs();
    let dev = fleet().await;
    let cp = dev.client("control-plane").await.unwrap();
    let west = dev.client("west").await.unwrap();
    // `settings` exists on both sides: the member's own object must never be taken over.
    for (client, value) in [(&cp, "control-plane"), (&west, "west's own")] {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "settings", "namespace": "default"},
            "data": {"who": value}}))
        .unwrap();
        Api::<ConfigMap>::namespaced(client.clone(), "default")
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let (sched, ctl) = fleet_scheduler_and_jobs(&cp).await;
    let mut job = long_job("mpi");
    let mut spec = serde_json::to_value(&job.spec).unwrap();
    spec["plugins"] = json!({"svc": [], "ssh": []});
    spec["tasks"][0]["template"]["spec"]["volumes"] =
        json!([{"name": "settings", "configMap": {"name": "settings"}}]);
    job.spec = serde_json::from_value(spec).unwrap();
    let jobs: Api<Job> = Api::namespaced(cp.clone(), "default");
    jobs.create(&PostParams::default(), &job).await.unwrap();
    all_bound(&west, "default", "mpi-w-", 2, 30).await;
    let pod_uids: std::collections::BTreeSet<String> =
        Api::<Pod>::namespaced(west.clone(), "default")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| {
                p.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("mpi-w-"))
            })
            .filter_map(|p| p.metadata.uid)
            .collect();
    let owners = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        m.owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.clone())
            .collect::<std::collections::BTreeSet<_>>()
    };
    let cms: Api<ConfigMap> = Api::namespaced(west.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(west.clone(), "default");
    let services: Api<Service> = Api::namespaced(west.clone(), "default");
    // Each copy is made right after the pod copies and names both as owners.
    eventually(
        10,
        "both pod copies own the ConfigMap, Secret and Service copies",
        || async {
            let hosts = cms.get_opt("mpi-svc").await.ok()??;
            let key = secrets.get_opt("mpi-ssh").await.ok()??;
            let svc = services.get_opt("mpi").await.ok()??;
            (owners(&hosts.metadata) == pod_uids
                && owners(&key.metadata) == pod_uids
                && owners(&svc.metadata) == pod_uids)
                .then_some(())
        },
    )
    .await;
    let theirs = cms.get("settings").await.unwrap();
    assert!(
        owners(&theirs.metadata).is_empty(),
        "the member's own ConfigMap was adopted"
    );

    jobs.delete("mpi", &DeleteParams::default()).await.unwrap();
    none_left_in(&dev, "west", "mpi-", 20).await;
    eventually(10, "the job's copies gone from west", || async {
        let cm = cms.get_opt("mpi-svc").await.ok()?;
        let secret = secrets.get_opt("mpi-ssh").await.ok()?;
        let service = services.get_opt("mpi").await.ok()?;
        (cm.is_none() && secret.is_none() && service.is_none()).then_some(())
    })
    .await;
    let theirs = cms.get("settings").await.unwrap();
    assert_eq!(
        theirs
            .data
            .unwrap_or_default()
            .get("who")
            .map(String::as_str),
        Some("west's own"),
        "the member's own ConfigMap stays as it was"
    );
    stop_everything(sched, ctl).await;
}
