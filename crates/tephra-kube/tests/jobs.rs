//! The job controller against a one-member devcluster over real HTTP, with the scheduler
//! running: a Volcano Job goes from create to Completed; a failing pod restarts the job under
//! `RestartJob` until `maxRetry`, then the job is Failed; deleting a Job takes its PodGroup and
//! pods with it. Volcano's CronJob, JobFlow and JobTemplate are served, and refused as Volcano
//! refuses them, on the devcluster and on a real API server; the CronJob controller fires on a
//! driven clock under each concurrency policy, keeps its history, catches up after a restart
//! and takes its Jobs when deleted, on both; a JobFlow runs its Jobs in dependency order, fails
//! on a failing middle Job, and deletes a succeeded flow's Jobs when asked to.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};
use tephra_api::batch::JobPhase;
use tephra_api::cronjob::CronJob;
use tephra_api::flow::{FlowPhase, JobFlow, JobTemplate};
use tephra_api::{Job, PodGroup};
use tephra_kube::clock::Clock;

fn job(name: &str, pod_annotations: Value, spec: Value) -> Job {
    let template = |cpu: &str| {
        json!({"metadata": {"annotations": pod_annotations.clone()},
               "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox",
                   "resources": {"requests": {"cpu": cpu}}}]}})
    };
    let mut j = json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "volcano", "queue": "default", "plugins": {"env": [], "svc": []},
            "tasks": [
                {"name": "ps", "replicas": 1, "template": template("1")},
                {"name": "worker", "replicas": 2, "template": template("2")}]}
    });
    if let (Some(s), Some(extra)) = (j["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(j).unwrap()
}

on_both!(
    a_volcano_job_runs_from_create_to_completed,
    a_volcano_job_runs_from_create_to_completed
);
async fn a_volcano_job_runs_from_create_to_completed(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0), node("n1", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_everything(&c).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let created = jobs
        .create(
            &PostParams::default(),
            &job("tf", json!({"tephra.io/sim-duration": "1s"}), json!({})),
        )
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let done = job_reaches(&jobs, "tf", JobPhase::Completed, 40).await;
    let s = done.status.unwrap();
    assert_eq!(s.succeeded, 3);
    assert_eq!(s.min_available, 3);
    let seen: Vec<JobPhase> = s.conditions.iter().map(|c| c.status).collect();
    assert_eq!(
        seen,
        [JobPhase::Pending, JobPhase::Running, JobPhase::Completed]
    );
    let pgs: Api<PodGroup> = Api::namespaced(c.clone(), "default");
    assert!(
        pgs.get(&format!("tf-{uid}")).await.is_err(),
        "a finished job's PodGroup is removed, as Volcano's killJob does"
    );
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let w1 = pods.get("tf-worker-1").await.unwrap();
    let annotations = w1.metadata.annotations.clone().unwrap();
    assert_eq!(
        annotations["scheduling.k8s.io/group-name"],
        format!("tf-{uid}")
    );
    let labels = w1.metadata.labels.unwrap();
    assert_eq!(labels["volcano.sh/job-name"], "tf");
    assert_eq!(labels["volcano.sh/task-spec"], "worker");
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(c.clone(), "default");
    assert!(
        services.get("tf").await.is_ok(),
        "svc plugin: the headless Service"
    );
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(c.clone(), "default");
    let hosts = cms.get("tf-svc").await.unwrap().data.unwrap();
    assert_eq!(hosts["VC_WORKER_HOSTS"], "tf-worker-0.tf,tf-worker-1.tf");
    let env = w1.spec.unwrap().containers[0].env.clone().unwrap();
    assert!(
        env.iter()
            .any(|e| e.name == "VK_TASK_INDEX" && e.value.as_deref() == Some("1"))
    );
    stop_everything(sched, ctl).await;
}

on_both!(
    a_failing_pod_restarts_the_job_until_max_retry_then_the_job_fails,
    a_failing_pod_restarts_the_job_until_max_retry_then_the_job_fails
);
async fn a_failing_pod_restarts_the_job_until_max_retry_then_the_job_fails(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0), node("n1", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_everything(&c).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    jobs.create(
        &PostParams::default(),
        &job(
            "flaky",
            json!({"tephra.io/sim-duration": "300ms", "tephra.io/sim-exit-code": "3"}),
            json!({"maxRetry": 2,
                   "policies": [{"event": "PodFailed", "action": "RestartJob"}]}),
        ),
    )
    .await
    .unwrap();
    let failed = job_reaches(&jobs, "flaky", JobPhase::Failed, 40).await;
    let s = failed.status.unwrap();
    assert_eq!(s.retry_count, 2, "{s:?}");
    assert!(
        s.conditions
            .iter()
            .any(|c| c.status == JobPhase::Restarting),
        "it restarted on the way: {s:?}"
    );
    stop_everything(sched, ctl).await;
}

on_both!(
    deleting_a_job_deletes_its_podgroup_and_pods,
    deleting_a_job_deletes_its_podgroup_and_pods
);
async fn deleting_a_job_deletes_its_podgroup_and_pods(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0), node("n1", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_everything(&c).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    jobs.create(&PostParams::default(), &job("long", json!({}), json!({})))
        .await
        .unwrap();
    job_reaches(&jobs, "long", JobPhase::Running, 40).await;
    jobs.delete("long", &DeleteParams::default()).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pgs: Api<PodGroup> = Api::namespaced(c.clone(), "default");
    eventually(30, "pods and PodGroup gone", || async {
        let p = pods.list(&ListParams::default()).await.ok()?;
        let g = pgs.list(&ListParams::default()).await.ok()?;
        (p.items.is_empty() && g.items.is_empty()).then_some(())
    })
    .await;
    stop_everything(sched, ctl).await;
}

on_both!(
    suspend_and_resume_through_commands_as_vcctl_issues_them,
    suspend_and_resume_through_commands_as_vcctl_issues_them
);
async fn suspend_and_resume_through_commands_as_vcctl_issues_them(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0), node("n1", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_everything(&c).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let job = jobs
        .create(
            &PostParams::default(),
            &job("pausable", json!({}), json!({})),
        )
        .await
        .unwrap();
    job_reaches(&jobs, "pausable", JobPhase::Running, 40).await;
    let commands: Api<tephra_api::Command> = Api::namespaced(c.clone(), "default");
    commands
        .create(&PostParams::default(), &command(&job, "AbortJob"))
        .await
        .unwrap();
    job_reaches(&jobs, "pausable", JobPhase::Aborted, 40).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        commands
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "a command is deleted once carried out"
    );
    commands
        .create(&PostParams::default(), &command(&job, "ResumeJob"))
        .await
        .unwrap();
    let back = job_reaches(&jobs, "pausable", JobPhase::Running, 40).await;
    assert_eq!(back.status.unwrap().retry_count, 1);
    stop_everything(sched, ctl).await;
}

// A task larger than any node, in a cluster whose nodes together could hold it: the Job says
// `NotInqueueable`, naming the resource, from the scheduler's first verdict, before any pod
// exists (a Volcano Job's pods are created once its PodGroup is admitted).
on_both!(
    a_task_larger_than_any_node_is_not_inqueueable_on_the_job_before_its_pods_exist,
    a_task_larger_than_any_node_is_not_inqueueable_on_the_job_before_its_pods_exist
);
async fn a_task_larger_than_any_node_is_not_inqueueable_on_the_job_before_its_pods_exist(
    backend: Backend,
) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0), node("n1", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_everything(&c).await;
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let big: Job = serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "big", "namespace": "default"},
        "spec": {"schedulerName": "volcano", "queue": "default", "tasks": [
            {"name": "w", "replicas": 1, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "12"}}}]}}}]}
    }))
    .unwrap();
    jobs.create(&PostParams::default(), &big).await.unwrap();
    let state = eventually(20, "the Job says why it waits", || async {
        let state = jobs.get("big").await.ok()?.status?.state;
        state.reason.is_some().then_some(state)
    })
    .await;
    assert_eq!(state.reason.as_deref(), Some("NotInqueueable"), "{state:?}");
    let message = state.message.unwrap_or_default();
    assert!(
        message.contains("its largest task needs more cpu than any node"),
        "{message}"
    );
    // Never admitted, so its pod was never created.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    assert!(
        pods.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let pgs: Api<PodGroup> = Api::namespaced(c.clone(), "default");
    let pg = pgs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .remove(0);
    assert_eq!(
        pg.status.and_then(|s| s.phase).map(|p| format!("{p:?}")),
        Some("Pending".to_string())
    );
    stop_everything(sched, ctl).await;
}

/// After its API server was down a while (every watch failing over and over), the job
/// controller sees a Job created once the server is back within seconds, not minutes: each of
/// its watches backs off on its own, and the errors they had piled up during the outage do
/// not each pause the controller again (kube's default trigger backoff, up to 30 s a time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_created_right_after_an_api_server_outage_gets_its_pods_at_once() {
    logs();
    let Some(c) = cluster_on(Backend::KubeApiserver, vec![node("n0", "16", 0)]).await else {
        return;
    };
    let (sched, ctl) = start_everything(&c.client).await;
    let real = c.real.as_ref().unwrap();
    // Down long enough for every watch to fail several times.
    real.cluster.stop_apiserver();
    tokio::time::sleep(std::time::Duration::from_secs(20)).await;
    real.cluster.start_apiserver().await.unwrap();
    let jobs: Api<Job> = Api::namespaced(c.client.clone(), "default");
    jobs.create(&PostParams::default(), &cpu_job("after", 2, "1"))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    // 14 s before the fix on a quiet machine, 4 s after.
    eventually(12, "the Job's pods created", || async {
        let pods: Api<Pod> = Api::namespaced(c.client.clone(), "default");
        let list = pods
            .list(&ListParams::default().labels("volcano.sh/job-name=after"))
            .await
            .ok()?;
        (list.items.len() == 2).then_some(())
    })
    .await;
    eprintln!(
        "pods created {:.1} s after the Job",
        started.elapsed().as_secs_f64()
    );
    stop_everything(sched, ctl).await;
}

/// The `tests/volcano` manifests of Volcano's CronJob, JobFlow and JobTemplate: (file, the
/// document, what its refusal must say, if it is meant to be refused).
fn flow_and_cron_manifests() -> Vec<(String, Value, Option<String>)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/volcano");
    let mut out = Vec::new();
    for sub in ["valid", "invalid"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(sub))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        files.sort();
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            let expect = text
                .lines()
                .find_map(|l| l.strip_prefix("# expect: "))
                .map(String::from);
            let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text).unwrap();
            for doc in docs {
                let kind = doc["kind"].as_str().unwrap_or_default();
                if matches!(kind, "CronJob" | "JobFlow" | "JobTemplate") {
                    let name = path.file_name().unwrap().to_string_lossy().to_string();
                    out.push((name, doc, expect.clone()));
                }
            }
        }
    }
    out
}

on_both!(
    volcanos_cronjob_and_jobflow_kinds_are_served_and_refused_as_volcano_refuses_them,
    cron_and_flow_kinds
);
/// The CRDs of Volcano's CronJob, JobFlow and JobTemplate, as a kube-apiserver serves them:
/// the manifests Volcano accepts are created, those its webhook refuses are refused with a
/// message that names the field. The same on the devcluster and on a real API server.
async fn cron_and_flow_kinds(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "4", 0)]).await else {
        return;
    };
    let manifests = flow_and_cron_manifests();
    assert!(manifests.len() >= 10, "{}", manifests.len());
    let mut failures = Vec::new();
    for (file, doc, expect) in manifests {
        let (group, version) = doc["apiVersion"].as_str().unwrap().split_once('/').unwrap();
        let kind = doc["kind"].as_str().unwrap().to_string();
        let ar = kube::discovery::ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: doc["apiVersion"].as_str().unwrap().into(),
            plural: format!("{}s", kind.to_lowercase()),
            kind,
        };
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(cl.client.clone(), "default", &ar);
        let obj: kube::api::DynamicObject = serde_json::from_value(doc).unwrap();
        match (api.create(&PostParams::default(), &obj).await, &expect) {
            (Ok(_), None) => {}
            (Ok(_), Some(e)) => failures.push(format!("{file}: created, Volcano refuses: {e}")),
            (Err(kube::Error::Api(s)), Some(e)) if s.code == 422 && s.message.contains(e) => {}
            (Err(err), _) => failures.push(format!("{file}: {err}")),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// A CronJob whose Jobs run one 1-CPU pod for `run` (the fast kubelet's simulated duration),
/// hourly, with `extra` in its spec.
fn cronjob(name: &str, run: &str, extra: Value) -> CronJob {
    let mut spec = json!({
        "schedule": "0 * * * *",
        "jobTemplate": {"metadata": {"labels": {"made-by": name}}, "spec": {
            "schedulerName": "volcano", "queue": "default", "minAvailable": 1,
            "tasks": [{"name": "w", "replicas": 1, "template": {
                "metadata": {"annotations": {"tephra.io/sim-duration": run}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c",
                    "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}]}}});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec}))
    .unwrap()
}

/// The CronJob controller on `clock`, as the controller manager starts it.
fn cron_controller(c: &kube::Client, clock: &Clock) -> Vec<tokio::task::JoinHandle<()>> {
    let options = tephra_kube::cronjobs::CronJobControllerOptions {
        clock: clock.clone(),
        ..Default::default()
    };
    tephra_kube::cronjobs::start(
        c.clone(),
        options,
        tephra_kube::leader::Leadership::always(),
    )
}

/// The names of the Jobs `cron` controls that are not being deleted, sorted.
async fn jobs_of(c: &kube::Client, cron: &CronJob) -> Vec<String> {
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let uid = cron.metadata.uid.clone().unwrap();
    let mut names: Vec<String> = jobs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .filter(|j| {
            j.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == uid && r.controller == Some(true))
        })
        .map(|j| j.metadata.name.unwrap())
        .collect();
    names.sort();
    names
}

/// The Job a CronJob makes for the scheduled time `t`.
fn run_name(cron: &str, t: Timestamp) -> String {
    format!("{cron}-{}", t.as_second() / 60)
}

/// The first whole hour after the newest of these CronJobs was created.
fn hour_after(crons: &[CronJob]) -> Timestamp {
    let newest = crons
        .iter()
        .map(|c| c.metadata.creation_timestamp.as_ref().unwrap().0)
        .max()
        .unwrap();
    Timestamp::from_second((newest.as_second() / 3600 + 1) * 3600).unwrap()
}

/// The reasons of the Events recorded on the CronJob `name`.
async fn cron_events(c: &kube::Client, name: &str) -> Vec<String> {
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(c.clone(), "default");
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("CronJob")
                && e.involved_object.name.as_deref() == Some(name)
        })
        .filter_map(|e| e.reason)
        .collect()
}

on_both!(
    a_cronjob_fires_on_a_driven_clock_and_allows_forbids_or_replaces_a_running_job,
    concurrency_policies
);
/// Three hourly CronJobs whose Jobs run for an hour, one per concurrency policy, on a clock
/// the test drives: at the first hour each makes its Job (named for the time, owned by the
/// CronJob, listed active by UID); at the next, with the first still running, `Allow` makes a
/// second, `Forbid` skips with a Warning, `Replace` deletes the first and makes the second.
async fn concurrency_policies(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0), node("n1", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, mut ctl) = start_everything(&c).await;
    let clock = Clock::driven(Timestamp::now());
    ctl.extend(cron_controller(&c, &clock));
    let api: Api<CronJob> = Api::namespaced(c.clone(), "default");
    let mut crons = Vec::new();
    for policy in ["Allow", "Forbid", "Replace"] {
        let name = policy.to_lowercase();
        let made = api
            .create(
                &PostParams::default(),
                &cronjob(&name, "1h", json!({"concurrencyPolicy": policy})),
            )
            .await
            .unwrap();
        crons.push(made);
    }
    let first = hour_after(&crons);
    let second = first + SignedDuration::from_hours(1);
    clock.set(first + SignedDuration::from_secs(5));
    for cron in &crons {
        let name = cron.metadata.name.clone().unwrap();
        let want = vec![run_name(&name, first)];
        eventually(30, &format!("{name}'s first job"), || async {
            (jobs_of(&c, cron).await == want).then_some(())
        })
        .await;
        let job_uid = Api::<Job>::namespaced(c.clone(), "default")
            .get(&want[0])
            .await
            .unwrap()
            .metadata
            .uid;
        eventually(30, &format!("{name}'s status lists its job"), || async {
            let s = api.get(&name).await.ok()?.status?;
            let listed: Vec<_> = s.active.iter().map(|r| r.uid.clone()).collect();
            (listed == [job_uid.clone()] && s.last_schedule_time.map(|t| t.0) == Some(first))
                .then_some(())
        })
        .await;
        let job = Api::<Job>::namespaced(c.clone(), "default")
            .get(&want[0])
            .await
            .unwrap();
        let annotations = job.metadata.annotations.unwrap();
        assert_eq!(
            annotations["volcano.sh/cronjob-scheduled-timestamp"]
                .parse::<Timestamp>()
                .unwrap(),
            first
        );
        assert_eq!(job.metadata.labels.unwrap()["made-by"], name);
    }
    // Running, the first hour's jobs meet the second hour.
    for cron in &crons {
        let name = run_name(cron.metadata.name.as_deref().unwrap(), first);
        job_reaches(
            &Api::namespaced(c.clone(), "default"),
            &name,
            JobPhase::Running,
            40,
        )
        .await;
    }
    clock.set(second + SignedDuration::from_secs(5));
    let expect = [
        (
            "allow",
            vec![run_name("allow", first), run_name("allow", second)],
        ),
        ("forbid", vec![run_name("forbid", first)]),
        ("replace", vec![run_name("replace", second)]),
    ];
    for (cron, (name, want)) in crons.iter().zip(expect) {
        eventually(
            30,
            &format!("{name} at the second hour: {want:?}"),
            || async { (jobs_of(&c, cron).await == want).then_some(()) },
        )
        .await;
        eventually(
            30,
            &format!("{name}'s status after the second hour"),
            || async {
                let s = api.get(name).await.ok()?.status?;
                let active: Vec<String> = s.active.iter().filter_map(|r| r.name.clone()).collect();
                let mut active = active;
                active.sort();
                (active == want && s.active.iter().all(|r| r.uid.is_some())).then_some(())
            },
        )
        .await;
    }
    // Events are recorded after the writes they tell of: waited for.
    eventually(30, "Forbid's ForbidConcurrent event", || async {
        let forbid = cron_events(&c, "forbid").await;
        forbid.iter().any(|r| r == "ForbidConcurrent").then_some(())
    })
    .await;
    eventually(
        30,
        "Replace's ReplaceConcurrent and two SuccessfulCreate events",
        || async {
            let replace = cron_events(&c, "replace").await;
            (replace.iter().any(|r| r == "ReplaceConcurrent")
                && replace.iter().filter(|r| *r == "SuccessfulCreate").count() == 2)
                .then_some(())
        },
    )
    .await;
    // A forbidden time is not marked run (it runs late if the first job ends within the
    // starting deadline, as Kubernetes' does).
    let forbid_status = api.get("forbid").await.unwrap().status.unwrap();
    assert_eq!(
        forbid_status.last_schedule_time.map(|t| t.0),
        Some(first),
        "Forbid does not mark the skipped time as run"
    );
    stop_everything(sched, ctl).await;
}

on_both!(
    a_cronjob_keeps_its_history_runs_the_latest_missed_time_after_a_restart_and_takes_its_jobs_when_deleted,
    history_restart_and_deletion
);
/// An hourly CronJob with a short Job and history limits of one: each finished run moves
/// `lastSuccessfulTime` and leaves the active list, and the older one is deleted; a failed run
/// is kept beside it. With the controller stopped for three hours, the restarted controller
/// runs only the latest missed time. Deleting the CronJob deletes its Jobs.
async fn history_restart_and_deletion(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0), node("n1", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_everything(&c).await;
    let clock = Clock::driven(Timestamp::now());
    let mut cron_ctl = cron_controller(&c, &clock);
    let api: Api<CronJob> = Api::namespaced(c.clone(), "default");
    let made = api
        .create(
            &PostParams::default(),
            &cronjob(
                "nightly",
                "200ms",
                json!({"successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 1}),
            ),
        )
        .await
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let mut hour = hour_after(std::slice::from_ref(&made));
    let mut runs = Vec::new();
    for _ in 0..2 {
        clock.set(hour + SignedDuration::from_secs(5));
        let name = run_name("nightly", hour);
        job_reaches(&jobs, &name, JobPhase::Completed, 40).await;
        runs.push(name);
        eventually(30, "the finished run leaves the active list", || async {
            let s = api.get("nightly").await.ok()?.status?;
            (s.active.is_empty() && s.last_successful_time.is_some()).then_some(())
        })
        .await;
        hour += SignedDuration::from_hours(1);
    }
    eventually(30, "only the newest success is kept", || async {
        (jobs_of(&c, &made).await == runs[1..]).then_some(())
    })
    .await;

    // Away for three hours and back: the latest missed hour runs, once.
    for t in cron_ctl.drain(..) {
        t.abort();
    }
    clock.set(hour + SignedDuration::from_hours(2) + SignedDuration::from_secs(5));
    let latest = run_name("nightly", hour + SignedDuration::from_hours(2));
    let cron_ctl = cron_controller(&c, &clock);
    job_reaches(&jobs, &latest, JobPhase::Completed, 40).await;
    eventually(
        30,
        "after the restart, one run for the latest time",
        || async { (jobs_of(&c, &made).await == [latest.clone()]).then_some(()) },
    )
    .await;
    let s = api.get("nightly").await.unwrap().status.unwrap();
    assert_eq!(
        s.last_schedule_time.map(|t| t.0),
        Some(hour + SignedDuration::from_hours(2))
    );

    // Deleting the CronJob takes its Jobs with it.
    api.delete("nightly", &DeleteParams::background())
        .await
        .unwrap();
    eventually(60, "the CronJob's jobs are deleted with it", || async {
        let left = jobs.list(&ListParams::default()).await.ok()?.items;
        left.iter()
            .all(|j| {
                !j.metadata
                    .name
                    .as_deref()
                    .unwrap_or_default()
                    .starts_with("nightly-")
            })
            .then_some(())
    })
    .await;
    for t in cron_ctl {
        t.abort();
    }
    stop_everything(sched, ctl).await;
}

/// A JobTemplate whose Job runs one 1-CPU pod for `run`, exiting with `exit`, retried once on
/// failure (then Failed).
fn job_template(name: &str, run: &str, exit: u32) -> JobTemplate {
    serde_json::from_value(json!({
        "apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "volcano", "queue": "default", "minAvailable": 1, "maxRetry": 1,
            "policies": [{"event": "PodFailed", "action": "RestartJob"}],
            "tasks": [{"name": "w", "replicas": 1, "template": {
                "metadata": {"annotations": {"tephra.io/sim-duration": run,
                    "tephra.io/sim-exit-code": exit.to_string()}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c",
                    "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}]}}))
    .unwrap()
}

/// [`start_everything`] and the JobFlow controller.
async fn start_with_flows(
    c: &kube::Client,
) -> (tephra_kube::Running, Vec<tokio::task::JoinHandle<()>>) {
    let (sched, mut ctl) = start_everything(c).await;
    ctl.extend(tephra_kube::jobflows::start(
        c.clone(),
        Default::default(),
        tephra_kube::leader::Leadership::always(),
    ));
    (sched, ctl)
}

fn flow_phase(f: &JobFlow) -> Option<FlowPhase> {
    f.status.as_ref()?.state.as_ref()?.phase
}

on_both!(
    a_jobflow_runs_its_jobs_in_dependency_order_fails_on_a_failing_middle_job_and_deletes_a_succeeded_flows_jobs,
    flows_of_three_jobs
);
/// Two flows of templates. `pipe`: prepare → train → evaluate, where train fails: prepare's Job
/// completes, train's is made only then and fails, the flow is Failed and evaluate's Job is
/// never made; each template lists the Jobs made from it; deleting the flow deletes its Jobs.
/// `tidy`: two steps that succeed under `jobRetainPolicy: delete`: the flow Succeeds and its
/// Jobs are deleted.
async fn flows_of_three_jobs(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0), node("n1", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_with_flows(&c).await;
    let templates: Api<JobTemplate> = Api::namespaced(c.clone(), "default");
    for t in [
        job_template("prepare", "300ms", 0),
        job_template("train", "300ms", 3),
        job_template("evaluate", "300ms", 0),
        job_template("step-a", "200ms", 0),
        job_template("step-b", "200ms", 0),
    ] {
        templates.create(&PostParams::default(), &t).await.unwrap();
    }
    let flows: Api<JobFlow> = Api::namespaced(c.clone(), "default");
    let flow = |name: &str, steps: Value, extra: Value| -> JobFlow {
        let mut spec = json!({"flows": steps});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        serde_json::from_value(
            json!({"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}),
        )
        .unwrap()
    };
    flows
        .create(
            &PostParams::default(),
            &flow(
                "pipe",
                json!([{"name": "prepare"},
                       {"name": "train", "dependsOn": {"targets": ["prepare"]}},
                       {"name": "evaluate", "dependsOn": {"targets": ["train"]}}]),
                json!({}),
            ),
        )
        .await
        .unwrap();
    flows
        .create(
            &PostParams::default(),
            &flow(
                "tidy",
                json!([{"name": "step-a"}, {"name": "step-b", "dependsOn": {"targets": ["step-a"]}}]),
                json!({"jobRetainPolicy": "delete"}),
            ),
        )
        .await
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    let failed = eventually(90, "flow pipe Failed", || async {
        let f = flows.get("pipe").await.ok()?;
        (flow_phase(&f) == Some(FlowPhase::Failed)).then_some(f)
    })
    .await;
    let prepared = jobs.get("pipe-prepare").await.unwrap();
    let trained = jobs.get("pipe-train").await.unwrap();
    assert_eq!(
        prepared.status.as_ref().unwrap().state.phase,
        Some(JobPhase::Completed)
    );
    assert_eq!(
        trained.status.as_ref().unwrap().state.phase,
        Some(JobPhase::Failed)
    );
    let done_at = prepared
        .status
        .as_ref()
        .unwrap()
        .state
        .last_transition_time
        .clone()
        .unwrap();
    assert!(
        trained.metadata.creation_timestamp.unwrap().0 >= done_at.0,
        "train is made only once prepare completed"
    );
    let labels = trained.metadata.labels.unwrap();
    assert_eq!(labels["volcano.sh/createdByJobFlow"], "default.pipe");
    assert_eq!(labels["volcano.sh/createdByJobTemplate"], "default.train");
    let s = failed.status.unwrap();
    assert_eq!(s.completed_jobs, ["pipe-prepare"]);
    assert_eq!(s.failed_jobs, ["pipe-train"]);
    assert_eq!(s.conditions["pipe-train"].phase.as_deref(), Some("Failed"));
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(
        jobs.get("pipe-evaluate").await.is_err(),
        "evaluate waits on a failed job: never made"
    );
    eventually(30, "template train lists its job", || async {
        let t = templates.get("train").await.ok()?;
        (t.status?.job_depends_on_list == ["pipe-train"]).then_some(())
    })
    .await;

    let tidy = eventually(90, "flow tidy Succeed", || async {
        let f = flows.get("tidy").await.ok()?;
        (flow_phase(&f) == Some(FlowPhase::Succeed)).then_some(f)
    })
    .await;
    assert_eq!(
        tidy.status.unwrap().completed_jobs,
        ["tidy-step-a", "tidy-step-b"]
    );
    eventually(
        30,
        "a succeeded flow's jobs deleted (jobRetainPolicy: delete)",
        || async {
            let left = jobs.list(&ListParams::default()).await.ok()?.items;
            (!left.iter().any(|j| {
                j.metadata.deletion_timestamp.is_none()
                    && j.metadata
                        .name
                        .as_deref()
                        .unwrap_or_default()
                        .starts_with("tidy-")
            }))
            .then_some(())
        },
    )
    .await;
    assert!(flows.get("tidy").await.is_ok(), "the flow itself stays");

    flows
        .delete("pipe", &DeleteParams::background())
        .await
        .unwrap();
    eventually(60, "a deleted flow's jobs deleted with it", || async {
        let left = jobs.list(&ListParams::default()).await.ok()?.items;
        (!left.iter().any(|j| {
            j.metadata
                .name
                .as_deref()
                .unwrap_or_default()
                .starts_with("pipe-")
        }))
        .then_some(())
    })
    .await;
    stop_everything(sched, ctl).await;
}

/// Every document of a file of Volcano's corpus (`../shared/volcano-corpus/volcano/<rel>`),
/// `None` when the corpus is not there.
fn corpus(rel: &str) -> Option<Vec<Value>> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/volcano-corpus/volcano")
        .join(rel);
    let text = std::fs::read_to_string(&path).ok()?;
    Some(serde_saphyr::from_str_multiple(&text).unwrap())
}

on_both!(
    volcanos_jobflow_example_runs_unchanged_to_succeed_and_deletes_its_jobs,
    volcanos_jobflow_example
);
/// Volcano's own JobFlow example (`example/jobflow`: five templates, a diamond of
/// dependencies, `jobRetainPolicy: delete`) applied unchanged; the test plays the containers'
/// part (each pod that runs exits 0). Each Job starts only after its targets completed, the flow
/// Succeeds and its Jobs are deleted.
async fn volcanos_jobflow_example(backend: Backend) {
    logs();
    let (Some(templates), Some(flows)) = (
        corpus("example/jobflow/JobTemplate.yaml"),
        corpus("example/jobflow/JobFlow.yaml"),
    ) else {
        tephra_envtest::skip("../shared/volcano-corpus is absent");
        return;
    };
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0), node("n1", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_with_flows(&c).await;
    let t_api: Api<JobTemplate> = Api::namespaced(c.clone(), "default");
    for t in templates {
        t_api
            .create(&PostParams::default(), &serde_json::from_value(t).unwrap())
            .await
            .unwrap();
    }
    let f_api: Api<JobFlow> = Api::namespaced(c.clone(), "default");
    for f in flows {
        f_api
            .create(&PostParams::default(), &serde_json::from_value(f).unwrap())
            .await
            .unwrap();
    }
    // The containers' part: a running pod of the flow exits 0.
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let jobs: Api<Job> = Api::namespaced(c.clone(), "default");
    // The poll in which each Job was first seen, and first seen Completed: one list is one
    // snapshot, so a Job made after its target completed is never seen before it.
    let mut created: std::collections::BTreeMap<String, u32> = Default::default();
    let mut completed: std::collections::BTreeMap<String, u32> = Default::default();
    let mut poll = 0u32;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let f = f_api.get("test").await.unwrap();
        if flow_phase(&f) == Some(FlowPhase::Succeed) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "flow test: {:?}",
            f.status
        );
        poll += 1;
        for j in jobs.list(&ListParams::default()).await.unwrap().items {
            let name = j.metadata.name.clone().unwrap();
            created.entry(name.clone()).or_insert(poll);
            if j.status.as_ref().and_then(|s| s.state.phase) == Some(JobPhase::Completed) {
                completed.entry(name).or_insert(poll);
            }
        }
        for p in pods.list(&ListParams::default()).await.unwrap().items {
            if p.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running") {
                continue;
            }
            let now = k8s_openapi::jiff::Timestamp::now();
            let status = json!({"status": {"phase": "Succeeded", "containerStatuses": [{
                "name": "nginx", "image": "nginx:1.14.2", "imageID": "", "ready": false,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                    "startedAt": now, "finishedAt": now}}}]}});
            let _ = pods
                .patch_status(
                    p.metadata.name.as_deref().unwrap(),
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&status),
                )
                .await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // The diamond: b after a, c and d after b, e after both.
    for (job, targets) in [
        ("test-b", &["test-a"][..]),
        ("test-c", &["test-b"]),
        ("test-d", &["test-b"]),
        ("test-e", &["test-c", "test-d"]),
    ] {
        for t in targets {
            assert!(
                created[job] >= completed[*t],
                "{job} seen before {t} completed: {created:?} {completed:?}"
            );
        }
    }
    eventually(
        30,
        "the succeeded flow's jobs deleted (jobRetainPolicy: delete)",
        || async {
            let left = jobs.list(&ListParams::default()).await.ok()?.items;
            (!left.iter().any(|j| j.metadata.deletion_timestamp.is_none())).then_some(())
        },
    )
    .await;
    stop_everything(sched, ctl).await;
}
