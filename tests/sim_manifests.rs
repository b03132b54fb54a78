//! The simulator fed as a Volcano user would feed it: `workload.manifests` with Jobs, Queues,
//! PodGroups and the pods integrations create, and a scheduler config migrated from Volcano.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::assert_clean;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tephra_sim::{Record, Report, RunOptions, Scenario};

fn run_opts(s: &Scenario, opts: RunOptions) -> Result<(Report, Vec<Record>), String> {
    let mut events = Vec::new();
    let report = tephra_sim::run(s, opts, &mut |r| events.push(r.clone()), &mut |_| {})
        .map_err(|e| e.to_string())?;
    Ok((report, events))
}

fn run(s: &Scenario) -> Result<(Report, Vec<Record>), String> {
    run_opts(s, RunOptions::default())
}

/// A fresh directory with the given files, for scenarios that read manifests.
fn dir_with(test: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "tephra-sim-manifests-{}-{test}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

const FLEET: &str = "fleet:\n  clusters:\n    - name: a\n      nodePools:\n        - {name: p, count: 2, capacity: {cpu: \"8\", memory: 32Gi, pods: \"110\"}}\n";

fn scenario(dir: &Path, rest: &str) -> Result<Scenario, String> {
    Scenario::parse(&format!("{FLEET}{rest}"), "s.yaml", dir).map_err(|e| e.to_string())
}

fn job(name: &str, queue: &str, replicas: u32) -> String {
    format!(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata:\n  name: {name}\n  annotations: {{tephra.io/sim-duration: 10m}}\nspec:\n  queue: {queue}\n  tasks:\n    - name: w\n      replicas: {replicas}\n      template:\n        spec:\n          containers:\n            - {{name: c, image: busybox, resources: {{requests: {{cpu: \"1\"}}}}}}\n"
    )
}

#[test]
fn what_each_integration_creates_replays_to_completion() {
    let s = Scenario::load(&common::repo_root().join("tests/scenarios/integrations.yaml")).unwrap();
    let (r, events) = run(&s).unwrap();
    assert_clean(&r);
    assert_eq!((r.jobs.submitted, r.jobs.completed), (4, 4), "{:?}", r.jobs);
    let submitted: BTreeMap<String, u32> = events
        .iter()
        .filter(|e| e.kind == "submit")
        .map(|e| (e.job.clone().unwrap(), e.min_available.unwrap()))
        .collect();
    assert_eq!(
        submitted,
        BTreeMap::from([
            ("analytics/spark-spark-pi-pg".to_string(), 1),
            ("hpc/pi".to_string(), 3),
            ("ml/mnist".to_string(), 4),
            ("ray/ray-demo-pg".to_string(), 3),
        ]),
        "each PodGroup's own name and minMember"
    );
}

#[test]
fn volcano_hierarchy_annotations_split_the_fleet_by_their_weights() {
    let s =
        Scenario::load(&common::repo_root().join("tests/scenarios/hdrf/scenario.yaml")).unwrap();
    let (r, events) = run(&s).unwrap();
    assert_clean(&r);
    let mut held: BTreeMap<String, u32> = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind == "bind") {
        *held.entry(e.queue.clone().unwrap()).or_default() += 1;
    }
    let get = |q: &str| held.get(q).copied().unwrap_or(0);
    // research weighs 8 against product's 2: 32 of the 40 CPUs; within each, 8 against 2.
    let research = get("research-train") + get("research-eval");
    assert!((30..=34).contains(&research), "{held:?}");
    assert!(
        get("research-train") >= 3 * get("research-eval"),
        "{held:?}"
    );
    assert!(get("product-serve") >= 2 * get("product-batch"), "{held:?}");
    assert!(get("product-batch") >= 1, "{held:?}");
}

#[test]
fn queues_and_jobs_from_manifests_run_and_a_zero_replica_job_runs_with_no_pods() {
    let queue = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata:\n  name: team\n";
    let dir = dir_with(
        "queues",
        &[
            ("queues.yaml", queue),
            (
                "jobs.yaml",
                &format!("{}---\n{}", job("one", "team", 2), job("none", "team", 0)),
            ),
        ],
    );
    let s = scenario(&dir, "workload:\n  manifests: [queues.yaml, jobs.yaml]\n").unwrap();
    let (r, events) = run(&s).unwrap();
    assert_clean(&r);
    // Volcano's job controller keeps a Job with no replicas Running ("when scale down to
    // zero, keep the current job phase").
    assert_eq!(
        (r.jobs.submitted, r.jobs.completed, r.jobs.running_at_end),
        (2, 1, 1),
        "{:?}",
        r.jobs
    );
    assert!(
        !events
            .iter()
            .any(|e| e.kind == "bind" && e.job.as_deref() == Some("default/none")),
        "a job with no replicas binds nothing"
    );
}

#[test]
fn a_job_in_an_undeclared_queue_is_refused_naming_file_and_field() {
    let dir = dir_with("undeclared", &[("jobs.yaml", &job("j", "nowhere", 1))]);
    let s = scenario(&dir, "workload:\n  manifests: [jobs.yaml]\n").unwrap();
    let e = run(&s).unwrap_err();
    assert!(
        e.contains("workload.manifests[0] (jobs.yaml) document 0"),
        "{e}"
    );
    assert!(
        e.contains("spec.queue: queue \"nowhere\" is not declared"),
        "{e}"
    );

    // Generated jobs may name a queue that only a Queue document declares, and no other.
    let generated = "workload:\n  manifests: [jobs.yaml]\n  generate:\n    - {count: 1, arrival: {every: 1s}, queue: {ghost: 1}, template: {name: g, tasks: [{name: w, replicas: 1, resources: {cpu: \"1\"}, duration: 1m}]}}\n";
    let dir = dir_with("undeclared-gen", &[("jobs.yaml", &job("j", "default", 1))]);
    let e = run(&scenario(&dir, generated).unwrap()).unwrap_err();
    assert!(
        e.contains("workload.generate[0].queue: unknown queue \"ghost\""),
        "{e}"
    );
}

#[test]
fn two_jobs_with_one_name_are_refused_naming_both_files() {
    let dir = dir_with(
        "duplicate",
        &[
            ("a.yaml", &job("same", "default", 1)),
            (
                "b.yaml",
                &format!(
                    "{}---\n{}",
                    job("other", "default", 1),
                    job("same", "default", 1)
                ),
            ),
        ],
    );
    let s = scenario(&dir, "workload:\n  manifests: [a.yaml, b.yaml]\n").unwrap();
    let e = run(&s).unwrap_err();
    assert!(
        e.contains("workload.manifests[1] (b.yaml) document 1: Job default/same is already defined as a Job in workload.manifests[0] (a.yaml) document 0"),
        "{e}"
    );
}

#[test]
fn a_podgroup_without_pods_and_a_pod_without_its_podgroup_are_refused() {
    let pg = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: lonely}\nspec: {minMember: 1}\n";
    let dir = dir_with("lonely", &[("pg.yaml", pg)]);
    let e = run(&scenario(&dir, "workload:\n  manifests: [pg.yaml]\n").unwrap()).unwrap_err();
    assert!(
        e.contains("PodGroup default/lonely: no pod in the manifests names it"),
        "{e}"
    );

    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations: {scheduling.k8s.io/group-name: missing}\nspec:\n  containers: [{name: c, image: busybox}]\n";
    let dir = dir_with("orphan", &[("pod.yaml", pod)]);
    let e = run(&scenario(
        &dir,
        "workload:\n  manifestDuration: 1m\n  manifests: [pod.yaml]\n",
    )
    .unwrap())
    .unwrap_err();
    assert!(
        e.contains("metadata.annotations[scheduling.k8s.io/group-name]: PodGroup default/missing is not in the manifests"),
        "{e}"
    );
}

#[test]
fn a_controller_side_rule_refuses_the_manifest_as_the_job_controller_would() {
    let cycle = "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata:\n  name: loop\n  annotations: {tephra.io/sim-duration: 1m}\nspec:\n  tasks:\n    - name: a\n      replicas: 1\n      dependsOn: {name: [b]}\n      template: {spec: {containers: [{name: c, image: busybox}]}}\n    - name: b\n      replicas: 1\n      dependsOn: {name: [a]}\n      template: {spec: {containers: [{name: c, image: busybox}]}}\n";
    let dir = dir_with("cycle", &[("job.yaml", cycle)]);
    let e = run(&scenario(&dir, "workload:\n  manifests: [job.yaml]\n").unwrap()).unwrap_err();
    assert!(e.contains("dependsOn"), "{e}");
}

#[test]
fn an_inert_volcano_plugin_is_noted_in_the_report_and_refused_when_strict() {
    let dir = dir_with("inert", &[("jobs.yaml", &job("j", "default", 1))]);
    let rest = "scheduler:\n  config:\n    actions: \"enqueue, allocate\"\n    tiers:\n      - plugins: [{name: gang}, {name: predicates}, {name: numa-aware}]\nworkload:\n  manifests: [jobs.yaml]\n";
    let s = scenario(&dir, rest).unwrap();
    let (r, _) = run(&s).unwrap();
    assert_eq!(r.jobs.completed, 1);
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("numa-aware") && n.contains("no effect")),
        "{:?}",
        r.notes
    );
    let e = run_opts(
        &s,
        RunOptions {
            strict_config: true,
            ..RunOptions::default()
        },
    )
    .unwrap_err();
    assert!(
        e.contains("numa-aware") && e.contains("--strict-config"),
        "{e}"
    );
}

#[test]
fn a_run_that_ends_with_work_left_says_which_job_waits_and_why() {
    let dir = dir_with("left", &[]);
    let rest = "workload:\n  jobs:\n    - {name: huge, tasks: [{name: w, replicas: 3, resources: {cpu: \"6\"}, duration: 1m}]}\n";
    let (r, _) = run(&scenario(&dir, rest).unwrap()).unwrap();
    assert_eq!(r.jobs.pending_at_end, 1);
    assert!(
        r.notes.iter().any(|n| n.contains("1 job(s) still pending")
            && n.contains("default/huge (")
            && n.contains("minResources")),
        "{:?}",
        r.notes
    );
}

fn job_asking(name: &str, resources: &str) -> String {
    format!(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata:\n  name: {name}\n  annotations: {{tephra.io/sim-duration: 10m}}\nspec:\n  tasks:\n    - name: w\n      replicas: 1\n      template:\n        spec:\n          containers:\n            - {{name: a, image: busybox, resources: {{requests: {{cpu: \"1\"}}}}}}\n            - {{name: b, image: busybox, resources: {resources}}}\n"
    )
}

#[test]
fn a_job_whose_quantity_does_not_parse_is_refused_naming_the_field() {
    // Admission (the CRD schema's quantity pattern) refuses these first in the simulator; the
    // job controller's own refusal is tested in tephra-controllers.
    for (bad, field, value) in [
        ("{requests: {memory: lots}}", "requests.memory", "\"lots\""),
        ("{limits: {cpu: 1.5.5}}", "limits.cpu", "\"1.5.5\""),
        ("{requests: {cpu: \"-1\"}}", "requests.cpu", "\"-1\""),
    ] {
        let dir = dir_with("badqty", &[("job.yaml", &job_asking("j", bad))]);
        let e =
            run(&scenario(&dir, "workload:\n  manifests: [job.yaml]\n").unwrap()).expect_err(bad);
        let at = format!("spec.tasks[0].template.spec.containers[1].resources.{field}");
        assert!(e.contains(&at) && e.contains(value), "{e}");
    }
}

#[test]
fn a_job_asking_more_than_any_node_waits_with_its_reason() {
    let dir = dir_with(
        "9pi",
        &[("job.yaml", &job_asking("big", "{requests: {memory: 9Pi}}"))],
    );
    let s = scenario(&dir, "workload:\n  manifests: [job.yaml]\n").unwrap();
    let (r, events) = run(&s).unwrap();
    assert_eq!(r.jobs.pending_at_end, 1, "{:?}", r.jobs);
    assert!(!events.iter().any(|e| e.kind == "bind"));
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("default/big (") && n.contains("minResources")),
        "{:?}",
        r.notes
    );
}

#[test]
fn pending_reasons_group_waiting_jobs_and_explain_tells_one_jobs_history() {
    let dir = dir_with("reasons", &[]);
    let rest = "workload:\n  jobs:\n    - {name: ok, tasks: [{name: w, replicas: 1, resources: {cpu: \"2\"}, duration: 1m}]}\n    - {name: big1, tasks: [{name: w, replicas: 1, resources: {cpu: \"16\"}, duration: 1m}]}\n    - {name: big2, tasks: [{name: w, replicas: 1, resources: {cpu: \"16\"}, duration: 1m}]}\n    - {name: big3, tasks: [{name: w, replicas: 1, resources: {cpu: \"16\"}, duration: 1m}]}\n";
    let s = scenario(&dir, rest).unwrap();
    let (r, _) = run_opts(
        &s,
        RunOptions {
            explain: Some("default/big2".into()),
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert_eq!(r.jobs.pending_at_end, 3);
    let top = &r.jobs.pending_reasons[0];
    assert_eq!(top.count, 3, "{:?}", r.jobs.pending_reasons);
    assert_eq!(top.jobs, ["default/big1", "default/big2", "default/big3"]);
    assert!(
        top.reason
            .contains("largest task needs more cpu than any node"),
        "{}",
        top.reason
    );
    assert!(
        r.explain[0].contains("submitted to queue default"),
        "{:?}",
        r.explain
    );
    assert!(
        r.explain
            .iter()
            .any(|l| l.contains("waits: NotInqueueable")),
        "{:?}",
        r.explain
    );
    assert!(r.explain.last().unwrap().starts_with("at the end: Pending"));
}

/// A JobTemplate (or, with `cron`, a CronJob's `jobTemplate`) of one 1-CPU pod running `run`,
/// its pods exiting with `exit` (retried once, then Failed).
fn template_spec(run: &str, exit: u32) -> String {
    format!(
        "  minAvailable: 1\n  maxRetry: 1\n  policies: [{{event: PodFailed, action: RestartJob}}]\n  tasks:\n    - name: w\n      replicas: 1\n      template:\n        metadata:\n          annotations: {{tephra.io/sim-exit-code: \"{exit}\", tephra.io/sim-duration: {run}}}\n        spec:\n          containers:\n            - {{name: c, image: busybox, resources: {{requests: {{cpu: \"1\"}}}}}}\n"
    )
}

fn job_template(name: &str, run: &str, exit: u32) -> String {
    format!(
        "apiVersion: flow.volcano.sh/v1alpha1\nkind: JobTemplate\nmetadata:\n  name: {name}\n  annotations: {{tephra.io/sim-duration: {run}}}\nspec:\n{}",
        template_spec(run, exit)
    )
}

/// When each job named with `prefix` was submitted and when it ended (s).
fn spans(events: &[Record], prefix: &str) -> BTreeMap<String, (f64, Option<f64>)> {
    let mut out: BTreeMap<String, (f64, Option<f64>)> = BTreeMap::new();
    for e in events {
        let Some(job) = e.job.clone().filter(|j| j.starts_with(prefix)) else {
            continue;
        };
        if e.kind == "submit" {
            out.insert(job, (e.t, None));
        } else if e.kind == "job"
            && matches!(e.reason.as_deref(), Some("Completed" | "Failed"))
            && let Some(s) = out.get_mut(&job)
        {
            s.1 = Some(e.t);
        }
    }
    out
}

#[test]
fn a_cronjob_makes_its_jobs_at_their_times_and_a_jobflow_starts_each_step_after_its_targets() {
    let cron = format!(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: CronJob\nmetadata:\n  name: nightly\nspec:\n  schedule: \"0 2 * * *\"\n  jobTemplate:\n    spec:\n{}",
        template_spec("1h", 0).replace("\n  ", "\n      ").replacen(
            "  minAvailable",
            "      minAvailable",
            1
        )
    );
    let flow = "apiVersion: flow.volcano.sh/v1alpha1\nkind: JobFlow\nmetadata:\n  name: pipe\n  annotations: {tephra.io/sim-submit-at: 10m}\nspec:\n  flows:\n    - name: prep\n    - name: train\n      dependsOn: {targets: [prep]}\n    - name: eval\n      dependsOn: {targets: [train]}\n";
    let ok_flow = "apiVersion: flow.volcano.sh/v1alpha1\nkind: JobFlow\nmetadata:\n  name: tidy\nspec:\n  jobRetainPolicy: delete\n  flows:\n    - name: prep\n    - name: eval\n      dependsOn: {targets: [prep]}\n";
    let dir = dir_with(
        "cron-flow",
        &[(
            "m.yaml",
            &[
                cron,
                job_template("prep", "30m", 0),
                job_template("train", "20m", 3),
                job_template("eval", "10m", 0),
                flow.to_string(),
                ok_flow.to_string(),
            ]
            .join("---\n"),
        )],
    );
    let s = scenario(
        &dir,
        "run:\n  until: 3d\nworkload:\n  manifests: [m.yaml]\n",
    )
    .unwrap();
    let (r, events) = run(&s).unwrap();
    assert_clean(&r);
    // The CronJob: one Job at 02:00 of each of the three days, named for its minute.
    let nightly = spans(&events, "default/nightly-");
    // (The controller looks 0.1 s after each time, so that it has passed.)
    let made: Vec<(String, i64)> = nightly
        .iter()
        .map(|(k, v)| (k.clone(), v.0.floor() as i64))
        .collect();
    let want: Vec<(String, i64)> = [2, 26, 50]
        .iter()
        .map(|h| (format!("default/nightly-{}", h * 60), h * 3600))
        .collect();
    assert_eq!(made, want);
    assert!(
        nightly.values().all(|(_, end)| end.is_some()),
        "{nightly:?}"
    );
    // The flow: train starts once prep completed, fails; eval is never made.
    let pipe = spans(&events, "default/pipe-");
    let (prep, train) = (pipe["default/pipe-prep"], pipe["default/pipe-train"]);
    assert_eq!(prep.0, 600.0, "submitted at its sim-submit-at");
    assert!(train.0 >= prep.1.unwrap(), "{pipe:?}");
    assert!(!pipe.contains_key("default/pipe-eval"), "{pipe:?}");
    let notes = r.notes.join("\n");
    assert!(
        notes.contains("CronJob default/nightly: 3 job(s) made"),
        "{notes}"
    );
    assert!(
        notes.contains("JobFlow default/pipe: Failed, 2 job(s) made"),
        "{notes}"
    );
    assert!(
        notes.contains("JobFlow default/tidy: Succeed, 2 job(s) made"),
        "{notes}"
    );
}

#[test]
fn a_cronjob_in_a_run_without_an_end_and_a_flow_without_its_template_are_refused() {
    let cron = "apiVersion: batch.volcano.sh/v1alpha1\nkind: CronJob\nmetadata:\n  name: c\nspec:\n  schedule: \"@hourly\"\n  jobTemplate:\n    metadata:\n      annotations: {tephra.io/sim-duration: 1m}\n    spec:\n      tasks: [{name: w, replicas: 1, template: {spec: {containers: [{name: c, image: b}]}}}]\n";
    let dir = dir_with("cron-refused", &[("c.yaml", cron)]);
    let e = scenario(&dir, "workload:\n  manifests: [c.yaml]\n")
        .and_then(|s| run(&s).map(|_| ()))
        .unwrap_err();
    assert!(e.contains("c.yaml") && e.contains("run.until"), "{e}");
    let flow = "apiVersion: flow.volcano.sh/v1alpha1\nkind: JobFlow\nmetadata:\n  name: f\nspec:\n  flows: [{name: missing}]\n";
    let dir = dir_with("flow-refused", &[("f.yaml", flow)]);
    let e = scenario(&dir, "workload:\n  manifests: [f.yaml]\n")
        .and_then(|s| run(&s).map(|_| ()))
        .unwrap_err();
    assert!(
        e.contains("spec.flows[missing]") && e.contains("JobTemplate default/missing"),
        "{e}"
    );
}
