//! The queue controller against a one-member devcluster over real HTTP, with the scheduler and
//! the job controller running: `CloseQueue` and `OpenQueue` Commands (as `vcctl queue operate`
//! creates them) close and open a queue; a closing queue admits nothing new and keeps its
//! running jobs, and settles as Closed when they are gone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use tephra_api::batch::JobPhase;
use tephra_api::scheduling::QueueState;
use tephra_api::{Command, Job, Queue};
use tephra_kube::leader::Leadership;
use tephra_kube::queues::{self, QueueControllerOptions};

fn job(name: &str, queue: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "volcano", "queue": queue, "tasks": [{"name": "w", "replicas": 2,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c",
                "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}]}
    }))
    .unwrap()
}

async fn operate(c: &kube::Client, q: &Queue, action: &str) {
    let commands: Api<Command> = Api::namespaced(c.clone(), "default");
    let mut cmd = Command::default();
    cmd.metadata.generate_name = Some(format!(
        "{}-{}-",
        q.metadata.name.clone().unwrap(),
        action.to_lowercase()
    ));
    cmd.fields.action = Some(action.into());
    cmd.fields.target = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "scheduling.volcano.sh/v1beta1".into(),
            kind: "Queue".into(),
            name: q.metadata.name.clone().unwrap(),
            uid: q.metadata.uid.clone().unwrap(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
    );
    commands.create(&PostParams::default(), &cmd).await.unwrap();
}

async fn state_is(c: &kube::Client, name: &str, want: QueueState) -> Queue {
    // Closing settles into Closed when the queue's last PodGroup goes: with a deleted Job's
    // PodGroup, when a real garbage collector has found the Job kind at its discovery resync
    // (every 30 s), so it may take that long.
    eventually(60, &format!("queue {name} {want:?}"), || async {
        let q = queue(c, name).await;
        (q.status.as_ref()?.state == Some(want)).then_some(q)
    })
    .await
}

on_both!(
    closing_a_queue_stops_new_admissions_and_keeps_running_jobs,
    closing_a_queue_stops_new_admissions_and_keeps_running_jobs
);
async fn closing_a_queue_stops_new_admissions_and_keeps_running_jobs(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let queues_api: Api<Queue> = Api::all(c.clone());
    let ml: Queue = serde_json::from_value(queue_json("ml", 1)).unwrap();
    queues_api
        .create(&PostParams::default(), &ml)
        .await
        .unwrap();
    let (sched, ctl) = start_everything(&c).await;
    let jobs_api: Api<Job> = Api::namespaced(c.clone(), "default");
    jobs_api
        .create(&PostParams::default(), &job("old", "ml"))
        .await
        .unwrap();
    job_reaches(&jobs_api, "old", JobPhase::Running, 30).await;

    let ml = state_is(&c, "ml", QueueState::Open).await;
    operate(&c, &ml, "CloseQueue").await;
    let closing = state_is(&c, "ml", QueueState::Closing).await;
    assert_eq!(
        closing.status.unwrap().running,
        1,
        "the running job is counted"
    );

    jobs_api
        .create(&PostParams::default(), &job("new", "ml"))
        .await
        .unwrap();
    let held = job_reaches(&jobs_api, "new", JobPhase::Pending, 30).await;
    assert!(held.status.is_some());
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let new = jobs_api.get("new").await.unwrap();
    assert_eq!(
        new.status.unwrap().state.phase,
        Some(JobPhase::Pending),
        "a closing queue admits nothing new"
    );
    let old = jobs_api.get("old").await.unwrap();
    assert_eq!(
        old.status.unwrap().state.phase,
        Some(JobPhase::Running),
        "its running job keeps running"
    );

    for name in ["old", "new"] {
        jobs_api
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    let closed = state_is(&c, "ml", QueueState::Closed).await;
    operate(&c, &closed, "OpenQueue").await;
    state_is(&c, "ml", QueueState::Open).await;
    jobs_api
        .create(&PostParams::default(), &job("after", "ml"))
        .await
        .unwrap();
    job_reaches(&jobs_api, "after", JobPhase::Running, 30).await;
    stop_everything(sched, ctl).await;
}

on_both!(
    a_child_queue_closes_with_its_parent_and_reopens_with_it,
    a_child_queue_closes_with_its_parent_and_reopens_with_it
);
async fn a_child_queue_closes_with_its_parent_and_reopens_with_it(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let queues_api: Api<Queue> = Api::all(c.clone());
    let org: Queue = serde_json::from_value(queue_json("org", 1)).unwrap();
    let mut team = queue_json("team", 1);
    team["spec"]["parent"] = json!("org");
    let team: Queue = serde_json::from_value(team).unwrap();
    let org = queues_api
        .create(&PostParams::default(), &org)
        .await
        .unwrap();
    queues_api
        .create(&PostParams::default(), &team)
        .await
        .unwrap();
    let ctl = queues::start(
        c.clone(),
        QueueControllerOptions::default(),
        Leadership::always(),
    );
    operate(&c, &org, "CloseQueue").await;
    state_is(&c, "org", QueueState::Closed).await;
    let team = state_is(&c, "team", QueueState::Closed).await;
    assert_eq!(
        team.metadata.annotations.unwrap()["volcano.sh/closed-by-parent"],
        "true"
    );
    operate(&c, &org, "OpenQueue").await;
    state_is(&c, "team", QueueState::Open).await;
    for t in ctl {
        t.abort();
    }
}

on_both!(
    a_queue_under_a_missing_parent_or_in_a_cycle_is_told_once_and_admits_nothing,
    a_queue_under_a_missing_parent_or_in_a_cycle_is_told_once_and_admits_nothing
);
async fn a_queue_under_a_missing_parent_or_in_a_cycle_is_told_once_and_admits_nothing(
    backend: Backend,
) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let queues_api: Api<Queue> = Api::all(c.clone());
    let with_parent = |name: &str, parent: &str| -> Queue {
        let mut q = queue_json(name, 1);
        q["spec"]["parent"] = json!(parent);
        serde_json::from_value(q).unwrap()
    };
    // The scheduler, the job controller and the queue controller.
    let (sched, ctl) = start_everything(&c).await;
    let pp = PostParams::default();
    queues_api
        .create(&pp, &with_parent("orphan", "gone"))
        .await
        .unwrap();
    queues_api
        .create(&pp, &with_parent("a", "b"))
        .await
        .unwrap();
    queues_api
        .create(&pp, &with_parent("b", "a"))
        .await
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    jobs.create(&pp, &job("stray", "orphan")).await.unwrap();
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(c.clone(), "default");
    let told = || async {
        events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.involved_object.kind.as_deref() == Some("Queue"))
            .filter_map(|e| Some((e.involved_object.name?, e.reason?, e.message?)))
            .collect::<Vec<_>>()
    };
    let said = eventually(20, "an Event on each broken queue", || async {
        let t = told().await;
        let has = |q: &str, r: &str| t.iter().any(|(n, reason, _)| n == q && reason == r);
        (has("orphan", "ParentNotFound") && has("a", "ParentCycle") && has("b", "ParentCycle"))
            .then_some(t)
    })
    .await;
    let orphan = said.iter().find(|(n, _, _)| n == "orphan").unwrap();
    assert!(
        orphan.2.contains("spec.parent \"gone\" does not exist"),
        "{}",
        orphan.2
    );
    // The job in the orphaned queue is not admitted, and its PodGroup says why.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let j = jobs.get("stray").await.unwrap();
    assert_eq!(j.status.unwrap().state.phase, Some(JobPhase::Pending));
    let pgs: Api<tephra_api::PodGroup> = Api::namespaced(c.clone(), "default");
    let pg = pgs
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .pop()
        .unwrap();
    let conditions = pg.status.unwrap_or_default().conditions;
    assert!(
        conditions.iter().any(|c| c
            .message
            .as_deref()
            .is_some_and(|m| m.contains("spec.parent \"gone\" does not exist"))),
        "{conditions:?}"
    );
    // Once: the controller's resyncs and the other queues' changes say nothing new.
    let once = told()
        .await
        .iter()
        .filter(|(n, _, _)| n == "orphan")
        .count();
    assert_eq!(once, 1, "{:?}", told().await);
    stop_everything(sched, ctl).await;
}
