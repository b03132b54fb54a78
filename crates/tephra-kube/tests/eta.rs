//! Expected starts on a running scheduler, against the devcluster: a Volcano Job waiting behind
//! a running one (its pods not created yet: the job controller waits for admission) gets
//! `tephra.io/expected-start` on its PodGroup, when the running one's pod ends by its
//! `tephra.io/expected-duration` counted from its `startTime`; the next job waits for both
//! (the second's expected duration is on the Job, so on its PodGroup); the UI's JSON shows the
//! same; once the first job is gone the second runs and its annotation goes, and the third's
//! moves.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use tephra_api::{Job, PodGroup};
use tephra_kube::eta::{EXPECTED_START, Expected};

/// A Volcano Job of one pod asking the whole 8-CPU node, its pods annotated with `on_pods`,
/// the Job itself (and so its PodGroup) with `on_job`.
fn job(name: &str, on_pods: Option<&str>, on_job: Option<&str>) -> Job {
    let mut j = serde_json::to_value(cpu_job(name, 1, "8")).unwrap();
    if let Some(e) = on_pods {
        j["spec"]["tasks"][0]["template"]["metadata"] =
            json!({"annotations": {"tephra.io/expected-duration": e}});
    }
    if let Some(e) = on_job {
        j["metadata"]["annotations"]["tephra.io/expected-duration"] = json!(e);
    }
    serde_json::from_value(j).unwrap()
}

/// The expected start on the PodGroup of Volcano Job `job`, once `done` holds for it.
async fn expected_when(
    c: &kube::Client,
    job: &str,
    what: &str,
    done: impl Fn(Option<Expected>) -> bool,
) -> Option<Expected> {
    let pgs: Api<PodGroup> = Api::namespaced(c.clone(), "default");
    eventually(30, what, || async {
        let all = pgs.list(&ListParams::default()).await.ok()?;
        let g = all.items.into_iter().find(|g| {
            g.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(job))
        })?;
        let e = g
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(EXPECTED_START))
            .and_then(|t| Expected::parse(t));
        done(e).then_some(e)
    })
    .await
}

#[tokio::test]
async fn a_waiting_job_is_told_when_it_starts_on_its_podgroup_and_in_the_ui() {
    logs();
    let dev = cluster(vec![node("n0", "8", 0)]).await;
    let c = client(&dev).await;
    let mut options = scheduler_options();
    options.ui.eta_every = Duration::from_millis(500);
    let sched = tephra_kube::start(c.clone(), options).await.unwrap();
    let ctl = tephra_kube::jobs::start(
        c.clone(),
        Default::default(),
        tephra_kube::leader::Leadership::always(),
    );
    let addr = sched.metrics_addr.unwrap();
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    jobs.create(&PostParams::default(), &job("first", Some("30m"), None))
        .await
        .unwrap();
    let started = eventually(30, "first's pod started", || async {
        let all = pods.list(&ListParams::default()).await.ok()?;
        all.items.into_iter().find_map(|p| {
            let name = p.metadata.name.as_deref()?;
            name.starts_with("first")
                .then(|| p.status?.start_time.map(|t| t.0.as_second()))?
        })
    })
    .await;
    // Created a second apart, so that their order of creation is certain.
    jobs.create(&PostParams::default(), &job("second", None, Some("10m")))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    jobs.create(&PostParams::default(), &job("third", None, None))
        .await
        .unwrap();
    let end_of_first = started + 30 * 60;
    expected_when(&c, "second", "second expected when first ends", |e| {
        e == Some(Expected::At(end_of_first))
    })
    .await;
    expected_when(&c, "third", "third expected when second ends", |e| {
        e == Some(Expected::At(end_of_first + 10 * 60))
    })
    .await;
    // The UI says the same.
    eventually(30, "the UI shows second's expected start", || async {
        let (_, body) = http_get(addr, "/ui/api/v1/fleet").await;
        let v: Value = serde_json::from_str(&body).ok()?;
        let second = v["jobs"]
            .as_array()?
            .iter()
            .find(|j| j["name"].as_str().is_some_and(|n| n.starts_with("second")))?;
        (second["expected_start"] == json!(end_of_first) && v["forecast"].is_object()).then_some(())
    })
    .await;
    // The rounds are in the metrics.
    let (_, metrics) = http_get(addr, "/metrics").await;
    assert!(
        metrics.contains("tephra_eta_predicted_jobs 2")
            && metrics.contains("tephra_eta_unresolved_jobs 0")
            && metrics.contains("tephra_eta_round_duration_seconds_count"),
        "{metrics}"
    );
    // First gone: second runs (its annotation goes), third now waits only for second.
    jobs.delete("first", &Default::default()).await.unwrap();
    expected_when(
        &c,
        "second",
        "second's annotation removed once it runs",
        |e| e.is_none(),
    )
    .await;
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let third = expected_when(&c, "third", "third expected ten minutes on", |e| {
        e.and_then(|e| e.time()).is_some_and(|t| t < end_of_first)
    })
    .await
    .unwrap();
    assert!(
        third.time().is_some_and(|t| (t - (now + 600)).abs() <= 30),
        "third at {third:?}, ten minutes after {now}"
    );
    for t in ctl {
        t.abort();
    }
    sched.stop().await;
}
