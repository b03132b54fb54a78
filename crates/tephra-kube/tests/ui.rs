//! The web UI's JSON (`/ui/api/v1/fleet`) and page (`/ui/`) on the scheduler's listen address,
//! against the devcluster: a Volcano Job that runs and one that can never fit show with their
//! phase, where they run and why they wait; queues and clusters show what they hold; the view
//! follows the fleet as it changes; a small fleet's JSON is its golden answer
//! (`tests/golden/ui-fleet.json`; `TEPHRA_WRITE_GOLDEN=1` rewrites it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tephra_api::Job;

/// The fleet view once `done` holds for it.
async fn fleet_when(
    addr: std::net::SocketAddr,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    eventually(30, what, || async {
        let (status, body) = http_get(addr, "/ui/api/v1/fleet").await;
        let v: Value = serde_json::from_str(&body).ok()?;
        (status == 200 && done(&v)).then_some(v)
    })
    .await
}

fn job_named<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v["jobs"]
        .as_array()?
        .iter()
        .find(|j| j["name"].as_str().is_some_and(|n| n.starts_with(name)))
}

/// Two 8-CPU nodes, the scheduler and controllers on them, and Volcano Job `small` (two 1-CPU
/// pods) applied; the devcluster's handle is returned to keep it up.
async fn two_nodes_running_small() -> (
    tephra_devcluster::Handle,
    tephra_kube::Running,
    Vec<tokio::task::JoinHandle<()>>,
    Api<Job>,
) {
    logs();
    let dev = cluster(vec![node("n0", "8", 0), node("n1", "8", 0)]).await;
    let c = client(&dev).await;
    let (sched, ctl) = start_everything(&c).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    jobs.create(&PostParams::default(), &cpu_job("small", 2, "1"))
        .await
        .unwrap();
    (dev, sched, ctl, jobs)
}

#[tokio::test]
async fn the_fleet_json_shows_a_running_job_where_it_runs_and_a_job_that_cannot_fit_why() {
    let (_dev, sched, ctl, jobs) = two_nodes_running_small().await;
    let addr = sched.metrics_addr.unwrap();
    jobs.create(&PostParams::default(), &cpu_job("huge", 1, "64"))
        .await
        .unwrap();
    let v = fleet_when(addr, "small Running and huge with a reason", |v| {
        job_named(v, "small").is_some_and(|j| j["phase"] == "Running" && j["running"] == 2)
            && job_named(v, "huge").is_some_and(|j| j["reason"].is_string())
    })
    .await;
    assert_eq!(v["version"], "v1");
    assert_eq!(v["role"], "leader");
    let small = job_named(&v, "small").unwrap();
    assert_eq!(small["queue"], "default");
    assert_eq!(small["clusters"], json!(["local"]));
    let nodes: Vec<&str> = small["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        !nodes.is_empty() && nodes.iter().all(|n| *n == "local/n0" || *n == "local/n1"),
        "{nodes:?}"
    );
    let huge = job_named(&v, "huge").unwrap();
    assert_ne!(huge["phase"], "Running");
    assert_eq!(huge["running"], 0);
    // In the words of its PodGroup's condition.
    let message = huge["message"].as_str().unwrap_or_default();
    assert!(message.contains("cpu"), "{huge}");
    let queue = v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "default")
        .unwrap();
    assert_eq!(queue["allocated"]["cpu"], "2");
    assert_eq!(queue["running"], 1);
    let local = &v["clusters"][0];
    assert_eq!(
        (local["name"].as_str(), local["ready"].as_bool()),
        (Some("local"), Some(true))
    );
    assert_eq!(local["nodes"], 2);
    assert_eq!(local["allocatable"]["cpu"], "16");
    // The history: the queue sampled, the waiting job's reason among its changes.
    let (status, body) = http_get(addr, "/ui/api/v1/history").await;
    assert_eq!(status, 200);
    let h: Value = serde_json::from_str(&body).unwrap();
    assert!(h["queues"]["default"][0]["at"].is_i64(), "{h}");
    // Keyed by the name the user gave: the Volcano Job's, not its PodGroup's generated one.
    assert_eq!(huge["job"], "huge", "{huge}");
    assert_ne!(huge["name"], "huge", "{huge}");
    let path = "/ui/api/v1/history/jobs/default/huge";
    let (status, body) = http_get(addr, path).await;
    assert_eq!(status, 200, "{body}");
    let j: Value = serde_json::from_str(&body).unwrap();
    assert!(
        j["changes"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["reason"].is_string())),
        "{j}"
    );
    let (status, _) = http_get(addr, "/ui/api/v1/history/nothing").await;
    assert_eq!(status, 404);
    // The page itself: one HTML document that renders the JSON.
    let (status, page) = http_get(addr, "/ui/").await;
    assert_eq!(status, 200);
    assert!(page.contains("<title>tephra</title>") && page.contains("api/v1/fleet"));
    // It follows the fleet: the running job, deleted, leaves the view.
    jobs.delete("small", &Default::default()).await.unwrap();
    fleet_when(addr, "small gone", |v| job_named(v, "small").is_none()).await;
    stop_everything(sched, ctl).await;
}

/// The fleet view with what varies from run to run taken out: the cache's generation, when
/// each job entered its phase, the PodGroup names' UID suffix, and which nodes (whether it has
/// any stays).
fn normalized(mut v: Value) -> Value {
    v["generation"] = json!(0);
    // Whether an expected-start round finished yet (none waits here).
    v["forecast"] = json!(null);
    for j in v["jobs"].as_array_mut().into_iter().flatten() {
        j["phase_since"] = json!(0);
        let name = j["name"].as_str().unwrap_or_default().to_string();
        // A Volcano Job's PodGroup is `<job>-<uid>`, the UID 36 characters long.
        if name.len() > 37 {
            j["name"] = json!(name[..name.len() - 37]);
        }
        let placed = j["nodes"].as_array().is_some_and(|n| !n.is_empty());
        j["nodes"] = json!(placed);
    }
    v
}

/// The JSON of a small fleet (one cluster of two 8-CPU nodes, the default queue, one Volcano
/// Job of two 1-CPU pods running) is the golden answer in `tests/golden/ui-fleet.json`.
#[tokio::test]
async fn the_fleet_json_of_a_small_fleet_is_its_golden_answer() {
    let (_dev, sched, ctl, _) = two_nodes_running_small().await;
    let addr = sched.metrics_addr.unwrap();
    let v = fleet_when(addr, "small Running, its queue counting it", |v| {
        job_named(v, "small").is_some_and(|j| j["running"] == 2)
            && v["queues"].as_array().is_some_and(|q| {
                q.iter()
                    .any(|q| q["name"] == "default" && q["running"] == 1)
            })
    })
    .await;
    let got = normalized(v);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/ui-fleet.json");
    if std::env::var_os("TEPHRA_WRITE_GOLDEN").is_some() {
        std::fs::write(&path, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
    }
    let want: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        got,
        want,
        "the fleet JSON differs from {}:\n{}",
        path.display(),
        serde_json::to_string_pretty(&got).unwrap()
    );
    stop_everything(sched, ctl).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_a_cronjob_or_a_jobflow_made_say_which_in_the_fleet_json_and_on_the_page() {
    let (_dev, sched, mut ctl, jobs) = two_nodes_running_small().await;
    let c = jobs.clone().into_client();
    let clock = tephra_kube::clock::Clock::driven(k8s_openapi::jiff::Timestamp::now());
    ctl.extend(tephra_kube::cronjobs::start(
        c.clone(),
        tephra_kube::cronjobs::CronJobControllerOptions {
            clock: clock.clone(),
            ..Default::default()
        },
        tephra_kube::leader::Leadership::always(),
    ));
    ctl.extend(tephra_kube::jobflows::start(
        c.clone(),
        Default::default(),
        tephra_kube::leader::Leadership::always(),
    ));
    let spec = serde_json::to_value(cpu_job("x", 1, "1").spec).unwrap();
    let dynamic = |kind: &str, group: &str, plural: &str| {
        let ar = kube::discovery::ApiResource {
            group: group.into(),
            version: "v1alpha1".into(),
            api_version: format!("{group}/v1alpha1"),
            kind: kind.into(),
            plural: plural.into(),
        };
        Api::<kube::api::DynamicObject>::namespaced_with(c.clone(), "default", &ar)
    };
    let create = |api: Api<kube::api::DynamicObject>, doc: Value| async move {
        api.create(
            &PostParams::default(),
            &serde_json::from_value(doc).unwrap(),
        )
        .await
        .unwrap();
    };
    create(
        dynamic("JobTemplate", "flow.volcano.sh", "jobtemplates"),
        json!({"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobTemplate",
            "metadata": {"name": "prep"}, "spec": spec.clone()}),
    )
    .await;
    create(
        dynamic("JobFlow", "flow.volcano.sh", "jobflows"),
        json!({"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow",
            "metadata": {"name": "pipe"}, "spec": {"flows": [{"name": "prep"}]}}),
    )
    .await;
    create(
        dynamic("CronJob", "batch.volcano.sh", "cronjobs"),
        json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob",
            "metadata": {"name": "nightly"},
            "spec": {"schedule": "@hourly", "jobTemplate": {"spec": spec}}}),
    )
    .await;
    clock.advance(k8s_openapi::jiff::SignedDuration::from_hours(1));
    let addr = sched.metrics_addr.unwrap();
    let v = fleet_when(addr, "the flow's and the cron's jobs in the view", |v| {
        job_named(v, "pipe-prep").is_some() && job_named(v, "nightly-").is_some()
    })
    .await;
    assert_eq!(job_named(&v, "pipe-prep").unwrap()["owner"], "JobFlow pipe");
    assert_eq!(
        job_named(&v, "nightly-").unwrap()["owner"],
        "CronJob nightly"
    );
    assert!(
        job_named(&v, "small").unwrap().get("owner").is_none(),
        "a Job made by hand names no owner"
    );
    let (_, page) = http_get(addr, "/ui/").await;
    assert!(page.contains("data-owner"), "the page shows it");
    stop_everything(sched, ctl).await;
}
