//! Volcano's lifecycle policies on a one-member devcluster over real HTTP, with the scheduler
//! and the controllers running, one behaviour per test: `RestartTask` restarts only the task,
//! `minSuccess` completes a Job early and `ttlSecondsAfterFinished` then deletes it with its
//! pods, an `exitCode` policy fires on its code only, `PodPending` with a timeout acts once
//! a pod has waited that long, and a pod template the API server refuses leaves the Job
//! waiting with the refusal, naming the field, in its state and one Event.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use tephra_api::Job;
use tephra_api::batch::JobPhase;

/// A task `name` of `replicas` pods asking one CPU; `run` is the pods' simulated duration and
/// exit code (None: they run until deleted), `extra` more task fields.
fn task(name: &str, replicas: i32, run: Option<(&str, i32)>, extra: Value) -> Value {
    let annotations = match run {
        Some((d, code)) => {
            json!({"tephra.io/sim-duration": d, "tephra.io/sim-exit-code": code.to_string()})
        }
        None => json!({}),
    };
    let mut t = json!({"name": name, "replicas": replicas, "template": {
        "metadata": {"annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
            "resources": {"requests": {"cpu": "1"}}}]}}});
    if let (Some(o), Some(e)) = (t.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            o.insert(k.clone(), v.clone());
        }
    }
    t
}

fn job(name: &str, tasks: Vec<Value>, spec: Value) -> Job {
    let mut j = json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "volcano", "queue": "default", "tasks": tasks}
    });
    if let (Some(s), Some(e)) = (j["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(j).unwrap()
}

async fn uid_of(pods: &Api<Pod>, name: &str) -> Option<String> {
    pods.get(name).await.ok()?.metadata.uid
}

on_both!(
    restart_task_restarts_only_the_failing_task,
    restart_task_restarts_only_the_failing_task
);
async fn restart_task_restarts_only_the_failing_task(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_everything(&c).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let spec = json!({"minAvailable": 1});
    let flaky = task(
        "flaky",
        1,
        Some(("500ms", 1)),
        json!({"policies": [{"event": "PodFailed", "action": "RestartTask"}]}),
    );
    jobs.create(
        &PostParams::default(),
        &job("rt", vec![task("steady", 1, None, json!({})), flaky], spec),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let (steady, first) = eventually(20, "both pods", || async {
        Some((
            uid_of(&pods, "rt-steady-0").await?,
            uid_of(&pods, "rt-flaky-0").await?,
        ))
    })
    .await;
    eventually(20, "the flaky task restarted", || async {
        let now = uid_of(&pods, "rt-flaky-0").await?;
        (now != first).then_some(())
    })
    .await;
    assert_eq!(
        uid_of(&pods, "rt-steady-0").await,
        Some(steady),
        "the other task's pod is untouched"
    );
    stop_everything(sched, ctl).await;
}

on_both!(
    min_success_completes_the_job_and_ttl_deletes_it_with_its_pods,
    min_success_completes_the_job_and_ttl_deletes_it_with_its_pods
);
async fn min_success_completes_the_job_and_ttl_deletes_it_with_its_pods(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_everything(&c).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    // A watch sees every phase, however briefly the Job stays Completed before its TTL ends.
    let (phases, watch) = watch_job_phases(&c);
    jobs.create(
        &PostParams::default(),
        &job(
            "ms",
            vec![
                task("fast", 2, Some(("300ms", 0)), json!({})),
                task("slow", 1, None, json!({})),
            ],
            json!({"minSuccess": 2, "ttlSecondsAfterFinished": 1}),
        ),
    )
    .await
    .unwrap();
    eventually(30, "job ms Completed", || async {
        let seen = phases
            .lock()
            .ok()?
            .get("default/ms")
            .cloned()
            .unwrap_or_default();
        seen.contains(&"Completed".to_string()).then_some(())
    })
    .await;
    watch.abort();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    eventually(20, "the job and its pods deleted after the TTL", || async {
        let gone = jobs.get("ms").await.is_err();
        let left = pods.list(&ListParams::default()).await.ok()?.items.len();
        (gone && left == 0).then_some(())
    })
    .await;
    stop_everything(sched, ctl).await;
}

on_both!(
    an_exit_code_policy_fires_on_its_code_only,
    an_exit_code_policy_fires_on_its_code_only
);
async fn an_exit_code_policy_fires_on_its_code_only(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_everything(&c).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let policies = json!({"policies": [{"exitCode": 3, "action": "AbortJob"}]});
    for (name, code) in [("code3", 3), ("code4", 4)] {
        jobs.create(
            &PostParams::default(),
            &job(
                name,
                vec![task("w", 1, Some(("300ms", code)), json!({}))],
                policies.clone(),
            ),
        )
        .await
        .unwrap();
    }
    job_reaches(&jobs, "code3", JobPhase::Aborted, 30).await;
    let other = job_reaches(&jobs, "code4", JobPhase::Failed, 30).await;
    assert!(
        other
            .status
            .unwrap()
            .conditions
            .iter()
            .all(|c| c.status != JobPhase::Aborting),
        "exit code 4 matches no policy: the job fails on its own"
    );
    stop_everything(sched, ctl).await;
}

on_both!(
    a_pod_pending_past_its_timeout_triggers_the_policy,
    a_pod_pending_past_its_timeout_triggers_the_policy
);
async fn a_pod_pending_past_its_timeout_triggers_the_policy(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_everything(&c).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    // Admitted (the queue has room) but placeable nowhere: no node has the label.
    let mut stuck = task("w", 1, None, json!({}));
    stuck["template"]["spec"]["nodeSelector"] = json!({"pool": "absent"});
    jobs.create(
        &PostParams::default(),
        &job(
            "waits",
            vec![stuck],
            json!({"policies": [{"event": "PodPending", "action": "TerminateJob", "timeout": "2s"}]}),
        ),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    eventually(20, "the pod created and pending", || async {
        pods.get("waits-w-0").await.ok().map(|_| ())
    })
    .await;
    let early = jobs.get("waits").await.unwrap();
    assert_eq!(early.status.unwrap().state.phase, Some(JobPhase::Pending));
    tokio::time::sleep(Duration::from_millis(500)).await;
    job_reaches(&jobs, "waits", JobPhase::Terminated, 30).await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(c.clone(), "default");
    let said = events.list(&ListParams::default()).await.unwrap().items;
    let action = said
        .iter()
        .find(|e| e.reason.as_deref() == Some("ExecuteAction"))
        .and_then(|e| e.message.clone())
        .unwrap_or_default();
    assert!(
        action.contains("TerminateJob") && action.contains("PodPending"),
        "{action}"
    );
    stop_everything(sched, ctl).await;
}

/// How many Events in `default` give `reason`.
async fn events_with_reason(c: &kube::Client, reason: &str) -> usize {
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(c.clone(), "default");
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .count()
}

on_both!(
    a_template_the_api_server_refuses_is_named_on_the_job_and_retried,
    a_template_the_api_server_refuses_is_named_on_the_job_and_retried
);
async fn a_template_the_api_server_refuses_is_named_on_the_job_and_retried(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_everything(&c).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    // The Job's schema accepts a container without an image; the pod's validation does not.
    let mut bad = task("w", 1, None, json!({}));
    bad["template"]["spec"]["containers"][0]["image"] = json!("");
    jobs.create(
        &PostParams::default(),
        &job("noimage", vec![bad], json!({})),
    )
    .await
    .unwrap();
    let waiting = eventually(20, "the refusal on the Job", || async {
        let j = jobs.get("noimage").await.ok()?;
        let state = j.status?.state;
        (state.reason.as_deref() == Some("FailedCreatePod")).then_some(state)
    })
    .await;
    assert_eq!(waiting.phase, Some(JobPhase::Pending));
    let message = waiting.message.unwrap_or_default();
    assert!(message.contains("spec.containers[0].image"), "{message}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let refusals = events_with_reason(&c, "FailedCreatePod").await;
    assert_eq!(refusals, 1, "one Event, though the creation is retried");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let pgs: Api<tephra_api::PodGroup> = Api::namespaced(c.clone(), "default");
    assert_eq!(
        pgs.list(&ListParams::default()).await.unwrap().items.len(),
        1,
        "the PodGroup stays for the retries"
    );
    stop_everything(sched, ctl).await;
}

on_both!(
    a_pod_refused_for_a_missing_priority_class_is_named_on_the_job_until_it_exists,
    a_pod_refused_for_a_missing_priority_class_is_named_on_the_job_until_it_exists
);
async fn a_pod_refused_for_a_missing_priority_class_is_named_on_the_job_until_it_exists(
    backend: Backend,
) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_everything(&c).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    // Admission, not validation, refuses this one: a 403 from the Priority plugin.
    let mut w = task("w", 1, None, json!({}));
    w["template"]["spec"]["priorityClassName"] = json!("high-priority");
    jobs.create(&PostParams::default(), &job("prio", vec![w], json!({})))
        .await
        .unwrap();
    let waiting = eventually(20, "the refusal on the Job", || async {
        let j = jobs.get("prio").await.ok()?;
        let state = j.status?.state;
        (state.reason.as_deref() == Some("FailedCreatePod")).then_some(state)
    })
    .await;
    let message = waiting.message.unwrap_or_default();
    assert!(
        message.contains("no PriorityClass with name high-priority was found"),
        "{message}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let refusals = events_with_reason(&c, "FailedCreatePod").await;
    assert_eq!(refusals, 1, "one Event, though the creation is retried");
    // Once the class exists, the retried creation goes through and the job runs.
    let classes: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = Api::all(c.clone());
    classes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "high-priority"}, "value": 1000}))
            .unwrap(),
        )
        .await
        .unwrap();
    job_reaches(&jobs, "prio", JobPhase::Running, 40).await;
    stop_everything(sched, ctl).await;
}

on_both!(
    a_refused_pod_is_retried_with_backoff_not_every_second_and_counted_by_reason,
    a_refused_pod_is_retried_with_backoff_not_every_second_and_counted_by_reason
);
async fn a_refused_pod_is_retried_with_backoff_not_every_second_and_counted_by_reason(
    backend: Backend,
) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let errors = prometheus::IntCounterVec::new(
        prometheus::Opts::new("errors", "failed passes"),
        &["controller", "reason"],
    )
    .unwrap();
    // The scheduler admits the PodGroup; then the job controller creates the pod.
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    let ctl = tephra_kube::jobs::start(
        c.clone(),
        tephra_kube::jobs::JobControllerOptions {
            errors: tephra_kube::reconciler::ErrorCounter::new(errors.clone()),
            ..Default::default()
        },
        tephra_kube::leader::Leadership::always(),
    );
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let mut w = task("w", 1, None, json!({}));
    w["template"]["spec"]["priorityClassName"] = json!("missing");
    jobs.create(&PostParams::default(), &job("refused", vec![w], json!({})))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(8)).await;
    let failed = errors.with_label_values(&["job", "Forbidden"]).get();
    // 1 s, 2 s, 4 s apart (and one pass for the Job's own status change): a fixed one-second
    // retry would have failed at least eight times by now.
    assert!((2..=6).contains(&failed), "{failed} failed passes in 8 s");
    stop_everything(sched, ctl).await;
}
