//! tephra's fit checks against kube-scheduler's, differentially, on one real API server: for
//! each seeded case (`cases.rs`) the real kube-scheduler places the pod first (bound to a node,
//! or left Unschedulable), then tephra places the same pod (`schedulerName: volcano`, a bare
//! pod given its PodGroup by tephra's controller). kube-scheduler is the oracle: tephra must
//! agree on whether the pod can be placed, and the node tephra picks must be one
//! kube-scheduler's filters accept (the pod pinned to that node by hostname binds under
//! kube-scheduler too). A pod bound by either must then run: the simulated kubelet, whose
//! admission is the devcluster's, must not refuse it.
//!
//! The suite runs a few seeds; `-- --ignored` runs 1,000 (`TEPHRA_FIT_SEEDS=A..B` or one
//! seed `N` picks others). A disagreement prints the case and the command that replays it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cases;
#[path = "../common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use cases::{Case, ROUNDS, RUNTIME_CLASS, for_round};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};
use tephra_api::PodGroup;
use tephra_envtest::kubelet::Kubelets;
use tephra_envtest::tier::{self, Single};
use tephra_envtest::{ClusterOptions, Release, objects};

/// What a scheduler did with the pod.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Bound(String),
    /// Not placed, with the reason it gave.
    Waits(String),
}

struct Harness {
    real: Single,
    _tephra: tephra_kube::Running,
    _controllers: Vec<tokio::task::JoinHandle<()>>,
}

async fn harness() -> Option<Harness> {
    let real = tier::single(
        &Release::tier(),
        &[],
        ClusterOptions {
            scheduler: Some(Value::Null),
            ..ClusterOptions::default()
        },
    )
    .await
    .expect("the real cluster starts")?;
    let c = real.client.clone();
    objects::create(
        &c,
        &json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": RUNTIME_CLASS}, "handler": "runc",
            "overhead": {"podFixed": {"cpu": "250m", "memory": "128Mi"}}}),
    )
    .await
    .unwrap();
    let tephra = tephra_kube::start(c.clone(), common::scheduler_options())
        .await
        .unwrap();
    let controllers = tephra_kube::bare_pods::start(
        c.clone(),
        Default::default(),
        tephra_kube::leader::Leadership::always(),
    );
    Some(Harness {
        real,
        _tephra: tephra,
        _controllers: controllers,
    })
}

async fn wait<T, F, Fut>(secs: u64, what: &str, mut check: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Creates the case's pod as `name` for `scheduler` in `round` (its own claims), with
/// `extra` merged into its spec.
async fn create(c: &kube::Client, case: &Case, name: &str, scheduler: &str, extra: Value) {
    let round = name.trim_start_matches("q-");
    let mut pod = for_round(&case.pod, round);
    pod["metadata"]["name"] = json!(name);
    pod["spec"]["schedulerName"] = json!(scheduler);
    for (k, v) in extra.as_object().into_iter().flatten() {
        pod["spec"][k] = v.clone();
    }
    let pod: Pod = serde_json::from_value(pod).unwrap();
    Api::<Pod>::namespaced(c.clone(), &case.namespace)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("seed {}: the pod is refused: {e}", case.seed));
}

async fn delete_and_wait(c: &kube::Client, ns: &str, name: &str) {
    let pods: Api<Pod> = Api::namespaced(c.clone(), ns);
    let _ = pods
        .delete(
            name,
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            },
        )
        .await;
    wait(30, &format!("{name} gone"), || async {
        pods.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await
    .unwrap();
}

/// Deletes the DRA claims of `round` (its devices free again for the next round; the volumes
/// a round bound are its own).
async fn release_round(c: &kube::Client, case: &Case, round: &str) -> Result<(), String> {
    for o in case
        .per_round
        .iter()
        .filter(|o| o["kind"] == "ResourceClaim")
    {
        objects::delete(c, &for_round(o, round), 30)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// For a bound pod, whether the kubelet runs it (`Err` with its refusal otherwise).
async fn runs(
    c: &kube::Client,
    ns: &str,
    name: &str,
    outcome: &Outcome,
) -> Result<Result<(), String>, String> {
    if !matches!(outcome, Outcome::Bound(_)) {
        return Ok(Ok(()));
    }
    let pods: Api<Pod> = Api::namespaced(c.clone(), ns);
    wait(30, &format!("{name} running or refused"), || async {
        let p = pods.get(name).await.ok()?;
        match phase(&p) {
            "Running" | "Succeeded" => Some(Ok(())),
            "Failed" => {
                let s = p.status.unwrap_or_default();
                Some(Err(format!(
                    "{}: {}",
                    s.reason.unwrap_or_default(),
                    s.message.unwrap_or_default()
                )))
            }
            _ => None,
        }
    })
    .await
}

/// kube-scheduler's outcome: bound, or a PodScheduled=False condition.
async fn kube_outcome(c: &kube::Client, ns: &str, name: &str) -> Result<Outcome, String> {
    let pods: Api<Pod> = Api::namespaced(c.clone(), ns);
    wait(
        30,
        &format!("kube-scheduler's answer for {name}"),
        || async {
            let p = pods.get(name).await.ok()?;
            if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
                return Some(Outcome::Bound(n));
            }
            let cond = p
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")?;
            let reason = cond.reason.unwrap_or_default();
            (reason == "Unschedulable" || reason == "SchedulingGated")
                .then(|| Outcome::Waits(format!("{reason}: {}", cond.message.unwrap_or_default())))
        },
    )
    .await
}

/// tephra's outcome: bound, or its PodGroup still unplaced after several sessions with a
/// condition saying why.
async fn tephra_outcome(c: &kube::Client, ns: &str, name: &str) -> Result<Outcome, String> {
    let pods: Api<Pod> = Api::namespaced(c.clone(), ns);
    let pgs: Api<PodGroup> = Api::namespaced(c.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut waiting_since: Option<Instant> = None;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let Ok(p) = pods.get(name).await else {
            continue;
        };
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
            return Ok(Outcome::Bound(n));
        }
        let reason = pgs.list(&ListParams::default()).await.ok().and_then(|l| {
            l.items.into_iter().find_map(|pg| {
                pg.status?
                    .conditions
                    .into_iter()
                    .find(|c| c.status == "True" && c.reason.is_some())
                    .map(|c| {
                        format!(
                            "{}: {}",
                            c.reason.unwrap_or_default(),
                            c.message.unwrap_or_default()
                        )
                    })
            })
        });
        match (reason, waiting_since) {
            (Some(r), Some(t)) if t.elapsed() > Duration::from_millis(1500) => {
                return Ok(Outcome::Waits(r));
            }
            (Some(_), None) => waiting_since = Some(Instant::now()),
            (None, _) => waiting_since = None,
            _ => {}
        }
    }
    Err(format!("timed out waiting for tephra's answer for {name}"))
}

/// Runs one case; `Err` describes a disagreement (or a case that could not be run).
async fn run(h: &Harness, seed: u64) -> Result<(), String> {
    run_case(h, seed).await.map_err(|e| {
        if e.starts_with("seed ") {
            e
        } else {
            format!("seed {seed}: could not run: {e}")
        }
    })
}

async fn run_case(h: &Harness, seed: u64) -> Result<(), String> {
    let case = Case::generate(seed);
    let c = &h.real.client;
    let ns = case.namespace.clone();
    tier::namespace(c, &ns).await.map_err(|e| e.to_string())?;
    let kubelets: &Kubelets = &h.real.kubelets;
    for n in &case.nodes {
        kubelets
            .register(n.clone())
            .await
            .map_err(|e| e.to_string())?;
    }
    for o in case.shared.iter().cloned().chain(
        ROUNDS
            .iter()
            .flat_map(|r| case.per_round.iter().map(|o| for_round(o, r))),
    ) {
        objects::create(c, &o).await.map_err(|e| e.to_string())?;
    }
    // A claim bound by name to its volume: bound (by the controller manager) before the
    // question.
    if case
        .shared
        .iter()
        .any(|o| o["kind"] == "PersistentVolumeClaim")
    {
        let pvcs: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
            Api::namespaced(c.clone(), &ns);
        wait(30, "the claim bound to its volume", || async {
            let p = pvcs.get("bound").await.ok()?;
            (p.status?.phase.as_deref() == Some("Bound")).then_some(())
        })
        .await?;
    }
    let pods: Api<Pod> = Api::namespaced(c.clone(), &ns);
    for p in &case.existing {
        let pod: Pod = serde_json::from_value(p.clone()).unwrap();
        pods.create(&PostParams::default(), &pod)
            .await
            .map_err(|e| format!("existing pod: {e}"))?;
    }
    // Existing pods settle first: running, finished, or refused by their kubelet.
    for p in &case.existing {
        let name = p["metadata"]["name"].as_str().unwrap().to_string();
        let finishes = p.pointer("/metadata/annotations").is_some();
        wait(30, &format!("{name} settled"), || async {
            let p = pods.get(&name).await.ok()?;
            let ph = phase(&p);
            let settled = if finishes {
                ph == "Succeeded" || ph == "Failed"
            } else {
                ph != "Pending" && !ph.is_empty()
            };
            settled.then_some(())
        })
        .await?;
    }
    create(c, &case, "q-kube", "default-scheduler", json!({})).await;
    let kube = kube_outcome(c, &ns, "q-kube").await?;
    let kube_ran = runs(c, &ns, "q-kube", &kube).await?;
    delete_and_wait(c, &ns, "q-kube").await;
    release_round(c, &case, "kube").await?;
    // tephra's watch sees the deletion before its next session.
    tokio::time::sleep(Duration::from_millis(300)).await;
    create(c, &case, "q-tephra", "volcano", json!({})).await;
    let tephra = tephra_outcome(c, &ns, "q-tephra").await?;
    let tephra_ran = runs(c, &ns, "q-tephra", &tephra).await?;
    delete_and_wait(c, &ns, "q-tephra").await;
    release_round(c, &case, "tephra").await?;
    let mut verdict = Ok(());
    // A pod bound by either must then run: the simulated kubelet (the devcluster's kubelet
    // admission) refusing it means the devcluster's kubelet and kube-scheduler's filters
    // disagree, or tephra bound where a kubelet would not run it.
    for (who, ran) in [("kube-scheduler", &kube_ran), ("tephra", &tephra_ran)] {
        if let Err(why) = ran {
            verdict = Err(format!("the kubelet refused the pod {who} bound: {why}"));
        }
    }
    match (&kube, &tephra) {
        (Outcome::Bound(_), Outcome::Waits(why)) => {
            verdict = Err(format!(
                "kube-scheduler placed it ({kube:?}); tephra did not: {why}"
            ));
        }
        (Outcome::Waits(why), Outcome::Bound(n)) => {
            verdict = Err(format!(
                "tephra bound it to {n}; kube-scheduler did not: {why}"
            ));
        }
        (Outcome::Bound(_), Outcome::Bound(n)) => {
            // The node tephra chose must pass kube-scheduler's filters.
            let mut selector = case.pod["spec"]["nodeSelector"].clone();
            selector["kubernetes.io/hostname"] = json!(n);
            create(
                c,
                &case,
                "q-check",
                "default-scheduler",
                json!({"nodeSelector": selector}),
            )
            .await;
            let check = kube_outcome(c, &ns, "q-check").await?;
            delete_and_wait(c, &ns, "q-check").await;
            release_round(c, &case, "check").await?;
            if check != Outcome::Bound(n.clone()) {
                verdict = Err(format!(
                    "tephra bound it to {n}, which kube-scheduler's filters refuse: {check:?}"
                ));
            }
        }
        (Outcome::Waits(_), Outcome::Waits(_)) => {}
    }
    // Clean up: the case's pods and nodes.
    let _ = pods
        .delete_collection(
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            },
            &ListParams::default(),
        )
        .await;
    for n in &case.nodes {
        let name = n["metadata"]["name"].as_str().unwrap_or_default();
        kubelets.remove(name).await.map_err(|e| e.to_string())?;
    }
    for o in case.shared.iter().chain(&case.per_round).rev() {
        for r in ROUNDS {
            objects::delete(c, &for_round(o, r), 30)
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    // The bare pods' PodGroups go with their pods (garbage collection); gone before the next
    // case, whose queue they would otherwise still hold room in.
    let pgs: Api<PodGroup> = Api::namespaced(c.clone(), &ns);
    let _ = pgs
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
    wait(30, "the case's PodGroups gone", || async {
        pgs.list(&ListParams::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await?;
    verdict.map_err(|v| {
        format!(
            "seed {seed}: {v}\nnodes: {}\nexisting: {}\npod: {}\nshared: {}\nper round: {}\n\
             replay: TEPHRA_FIT_SEEDS={seed} \
             cargo test -p tephra-kube --test fit_differential -- --ignored --nocapture",
            serde_json::to_string(&case.nodes).unwrap_or_default(),
            serde_json::to_string(&case.existing).unwrap_or_default(),
            serde_json::to_string(&case.pod).unwrap_or_default(),
            serde_json::to_string(&case.shared).unwrap_or_default(),
            serde_json::to_string(&case.per_round).unwrap_or_default(),
        )
    })
}

fn seeds(default: std::ops::Range<u64>) -> Vec<u64> {
    match std::env::var("TEPHRA_FIT_SEEDS") {
        Ok(s) => match s.split_once("..") {
            Some((a, b)) => (a.parse().unwrap()..b.parse().unwrap()).collect(),
            None => vec![s.parse().unwrap()],
        },
        Err(_) => default.collect(),
    }
}

async fn run_seeds(seeds: Vec<u64>) {
    common::logs();
    let Some(h) = harness().await else {
        return;
    };
    let mut failures = Vec::new();
    for seed in &seeds {
        if let Err(e) = run(&h, *seed).await {
            eprintln!("{e}\n");
            failures.push(*seed);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} seeds disagree with kube-scheduler: {failures:?}",
        failures.len(),
        seeds.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tephra_places_pods_where_kube_scheduler_would_on_a_few_seeds() {
    run_seeds(seeds(0..12)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "1,000 cases against the real kube-scheduler: about half an hour"]
async fn tephra_places_pods_where_kube_scheduler_would_on_1000_seeds() {
    run_seeds(seeds(0..1000)).await;
}
