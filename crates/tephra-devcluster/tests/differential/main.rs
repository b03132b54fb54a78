//! The devcluster proven against kube-apiserver, differentially: seeded sequences of API
//! requests (`generate`) sent to the devcluster and to a real kube-apiserver 1.34 with its
//! controller manager's garbage collector, namespace and service-account controllers
//! (tephra-envtest), and every answer compared but for what legitimately differs (`compare`).
//! A difference is a devcluster bug. A failing seed prints the command that replays it and the
//! first request answered differently, with both answers.
//!
//! `TEPHRA_DIFF_SEEDS=A..B` (or one `N`, or a comma-separated list of both) picks the seeds;
//! `TEPHRA_DIFF_JOBS` how many sequences run at once (default 2); `TEPHRA_DIFF_KEEP_GOING`
//! prints every difference instead of stopping a sequence at its first (the seed still fails);
//! `TEPHRA_DIFF_TRACE` prints every request and both codes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compare;
mod exec;
mod generate;
mod prng;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tephra_devcluster::{DevCluster, Handle, Options};
use tephra_envtest::{Cluster, ClusterOptions, Env, Release, User, require};
use tokio::sync::Mutex;

use crate::exec::{Answer, Call, Side, Step, Who};
use crate::generate::{Gen, HOLD};

/// Requests per sequence, besides its setup.
const STEPS: usize = 40;

/// The two servers, kept alive together.
struct Servers {
    real_admin: kube::Client,
    real_limited: kube::Client,
    dev_admin: kube::Client,
    dev_limited: kube::Client,
    _dev: Handle,
    _real: Cluster,
    _env: Env,
}

fn no_retry(mut config: kube::Config) -> kube::Client {
    config.default_retry = false;
    kube::Client::try_from(config).expect("client")
}

async fn config_of(yaml: &str) -> kube::Config {
    let kc = kube::config::Kubeconfig::from_yaml(yaml).expect("kubeconfig");
    kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .expect("config")
}

async fn send(client: &kube::Client, method: http::Method, path: &str, body: Value) -> Answer {
    let mut side = Side::new(client.clone(), client.clone());
    side.call(&Call {
        method,
        path: path.into(),
        query: Vec::new(),
        content_type: None,
        body: Some(body),
        from_memory: None,
        who: Who::Admin,
        key: None,
    })
    .await
}

async fn eventually<F, Fut>(what: &str, secs: u64, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a differential compares: the kinds its sequences send and the real server they are
/// compared with.
#[derive(Clone, Copy)]
struct Front {
    kinds: &'static [(generate::Kind, usize)],
    /// The Workload API's: kube-apiserver 1.37 with it on, else the oldest release.
    workload_api: bool,
}

/// Every kind but the Workload API's, on the oldest release (the tier's).
const CORE: Front = Front {
    kinds: generate::KINDS,
    workload_api: false,
};

/// The Workload API's kinds on kube-apiserver 1.37, the `GenericWorkload` gate and
/// `scheduling.k8s.io/v1beta1` on.
const WORKLOAD_API: Front = Front {
    kinds: generate::WORKLOAD_KINDS,
    workload_api: true,
};

/// Dynamic resource allocation's kinds (claims and device classes), on the oldest release.
const DRA: Front = Front {
    kinds: generate::DRA_KINDS,
    workload_api: false,
};

/// Starts both servers; `None` when the real components are not built (outside CI).
async fn start(front: Front) -> Option<Servers> {
    let release = if front.workload_api {
        Release::Newest
    } else {
        Release::Oldest
    };
    let bins = require(&release)?;
    let env = Env::start(bins).await.expect("etcd starts");
    // What the compared behaviour needs and nothing that writes to the objects the sequences
    // make (no deployment controller, no node lifecycle); the PodGroup protection controller
    // where PodGroups are compared.
    let mut controllers =
        "garbage-collector-controller,namespace-controller,serviceaccount-controller".to_string();
    let mut options = ClusterOptions {
        controller_manager: true,
        ..ClusterOptions::default()
    };
    if front.workload_api {
        controllers.push_str(",podgroup-protection-controller");
        options.feature_gates = vec!["GenericWorkload=true".into()];
        options.runtime_config = vec!["scheduling.k8s.io/v1beta1=true".into()];
    }
    options.controllers = Some(controllers);
    let real = env
        .cluster("diff", options)
        .await
        .expect("kube-apiserver starts");
    let real_admin = no_retry(config_of(&real.kubeconfig(&User::Admin).unwrap()).await);
    tephra_envtest::objects::install_tephra_crds(&real_admin)
        .await
        .expect("CRDs installed");
    let token = real
        .service_account_token("diff-rbac", "limited")
        .await
        .expect("token");
    let real_limited = no_retry(config_of(&real.kubeconfig(&User::Token(token)).unwrap()).await);

    let mut options = Options::single();
    options.kubelet = None;
    let dev = DevCluster::start(options).await.expect("devcluster starts");
    let dev_admin = no_retry(dev.config("local").await.unwrap());
    for (path, body) in [
        (
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "diff-rbac"}}),
        ),
        (
            "/api/v1/namespaces/diff-rbac/serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "limited"}}),
        ),
    ] {
        send(&dev_admin, http::Method::POST, path, body).await;
    }
    let dev_limited = no_retry(
        config_of(
            &dev.service_account_kubeconfig("local", "diff-rbac", "limited")
                .unwrap(),
        )
        .await,
    );
    // The differential's own CRD, with CEL rules, on both servers, which must answer alike;
    // served once established.
    let mut created = Vec::new();
    for client in [&real_admin, &dev_admin] {
        let crd = send(
            client,
            http::Method::POST,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            generate::widget_crd(),
        )
        .await;
        created.push((crd.code, crd.body.pointer("/details/causes").cloned()));
    }
    assert_eq!(created[0], created[1], "the widget CRD is answered alike");
    assert_eq!(
        created[0].0, 201,
        "the widget CRD is created: {:?}",
        created[0]
    );
    for crd in generate::refused_crds() {
        let mut answers = Vec::new();
        for client in [&real_admin, &dev_admin] {
            let a = send(
                client,
                http::Method::POST,
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                crd.clone(),
            )
            .await;
            answers.push((a.code, a.body.pointer("/details/causes").cloned()));
        }
        let name = &crd["metadata"]["name"];
        assert_eq!(answers[0], answers[1], "CRD {name} is answered alike");
        assert_eq!(answers[0].0, 422, "CRD {name} is refused");
    }
    for client in [&real_admin, &dev_admin] {
        eventually("widgets to be served", 30, || async {
            let a = send(
                client,
                http::Method::GET,
                "/apis/diff.tephra.io/v1/widgets",
                Value::Null,
            )
            .await;
            a.code == 200
        })
        .await;
    }
    let servers = Servers {
        real_admin,
        real_limited,
        dev_admin,
        dev_limited,
        _dev: dev,
        _real: real,
        _env: env,
    };
    gc_ready(&servers.real_admin).await;
    Some(servers)
}

/// Waits until the real garbage collector watches the custom resources (it finds new
/// kinds by discovery, every 30 s): a PodGroup owned by a removed ConfigMap goes.
async fn gc_ready(client: &kube::Client) {
    let ns = "diff-gc-probe";
    send(
        client,
        http::Method::POST,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )
    .await;
    let owner = send(
        client,
        http::Method::POST,
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}),
    )
    .await;
    let uid = owner
        .body
        .pointer("/metadata/uid")
        .cloned()
        .unwrap_or_default();
    let owner_ref = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]);
    let pg_path = format!("/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups");
    let widget_path = format!("/apis/diff.tephra.io/v1/namespaces/{ns}/widgets");
    send(
        client,
        http::Method::POST,
        &pg_path,
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "owned", "ownerReferences": owner_ref},
            "spec": {"minMember": 1}}),
    )
    .await;
    send(
        client,
        http::Method::POST,
        &widget_path,
        json!({"apiVersion": "diff.tephra.io/v1", "kind": "Widget",
            "metadata": {"name": "owned", "ownerReferences": owner_ref},
            "spec": {"size": 1}}),
    )
    .await;
    send(
        client,
        http::Method::DELETE,
        &format!("/api/v1/namespaces/{ns}/configmaps/owner"),
        json!({}),
    )
    .await;
    for path in [pg_path, widget_path] {
        eventually(
            &format!("the garbage collector to know {path}"),
            90,
            || async {
                let a = send(
                    client,
                    http::Method::GET,
                    &format!("{path}/owned"),
                    Value::Null,
                )
                .await;
                a.code == 404
            },
        )
        .await;
    }
}

/// The seeds to run: `TEPHRA_DIFF_SEEDS` (`A..B` or `N`), else `default`.
fn seeds(default: std::ops::Range<u64>) -> Vec<u64> {
    let Ok(text) = std::env::var("TEPHRA_DIFF_SEEDS") else {
        return default.collect();
    };
    let seed = |s: &str| -> u64 { s.trim().parse().expect("a seed") };
    text.split(',')
        .flat_map(|part| match part.split_once("..") {
            Some((a, b)) => (seed(a)..seed(b)).collect(),
            None => vec![seed(part)],
        })
        .collect()
}

/// A difference, as the failing seed reports it.
struct Failure {
    seq: u64,
    text: String,
}

fn report(seq: u64, step: usize, what: &str, real: &str, dev: &str, diffs: &[String]) -> Failure {
    Failure {
        seq,
        text: format!(
            "seed {seq}: step {step} ({what}) answered differently\n  differences:\n    {}\n  \
             kube-apiserver: {real}\n  devcluster:     {dev}\n  replay: \
             TEPHRA_DIFF_SEEDS={seq} cargo test -p tephra-devcluster --test differential -- \
             --include-ignored --nocapture",
            diffs.join("\n    ")
        ),
    }
}

fn brief(a: &Answer) -> String {
    let text = a.body.to_string();
    let cut: String = text.chars().take(1500).collect();
    format!("{} {cut}", a.code)
}

/// Every object of the sequence on one side, per kind: the namespace's and the cluster-scoped
/// ones labelled with its number.
async fn snapshot(side: &mut Side, plan: &Gen) -> BTreeMap<String, Vec<Value>> {
    let mut out = BTreeMap::new();
    for kind in plan.kinds() {
        let mut call = Call {
            method: http::Method::GET,
            path: kind.collection(&plan.ns),
            query: Vec::new(),
            content_type: None,
            body: None,
            from_memory: None,
            who: Who::Admin,
            key: None,
        };
        if !kind.namespaced {
            call.query
                .push(("labelSelector".into(), format!("diff={}", plan.seq)));
        }
        let a = side.call(&call).await;
        let items: Vec<Value> = a
            .body
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for i in &items {
            side.memory.learn_uid(kind.id(), i);
        }
        out.insert(kind.id().to_string(), items);
    }
    out
}

/// Whether the garbage collector and the namespace controller have nothing left to do on
/// these objects: nothing waits on their finalizers, and no reference names an absent owner.
fn quiescent(snap: &BTreeMap<String, Vec<Value>>) -> bool {
    let uids: BTreeSet<&str> = snap
        .values()
        .flatten()
        .filter_map(|o| o.pointer("/metadata/uid").and_then(Value::as_str))
        .collect();
    let namespaced = |pred: &dyn Fn(&generate::Kind) -> bool| {
        generate::all_kinds()
            .find(|k| pred(k))
            .is_some_and(|k| k.namespaced)
    };
    snap.iter().all(|(plural, items)| {
        let cluster_scoped = !namespaced(&|k| k.id() == plural.as_str());
        items.iter().all(|o| {
            let deleting = o.pointer("/metadata/deletionTimestamp").is_some();
            let finalizers: Vec<&str> = o
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let waits =
                deleting && (finalizers.iter().any(|f| *f != HOLD) || plural == "namespaces");
            // The garbage collector ignores Events: their references may dangle for good.
            let dangling = plural != "events"
                && o.pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .any(|r| {
                        let kind = r.get("kind").and_then(Value::as_str).unwrap_or_default();
                        // A namespaced owner of a cluster-scoped object is an invalid reference,
                        // which the garbage collector leaves.
                        let invalid = cluster_scoped && namespaced(&|k| k.kind == kind);
                        !invalid
                            && r.get("uid")
                                .and_then(Value::as_str)
                                .is_some_and(|u| !uids.contains(u))
                    });
            !waits && !dangling
        })
    })
}

/// Waits until a side's objects stop changing and nothing is left to collect; its objects.
async fn settle(side: &mut Side, plan: &Gen) -> BTreeMap<String, Vec<Value>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = snapshot(side, plan).await;
    loop {
        tokio::time::sleep(Duration::from_millis(150)).await;
        let next = snapshot(side, plan).await;
        if (quiescent(&next) && next == last) || Instant::now() > deadline {
            return next;
        }
        last = next;
    }
}

/// `TEPHRA_DIFF_KEEP_GOING`: print every difference and go on (to survey many at once).
fn keep_going() -> bool {
    std::env::var_os("TEPHRA_DIFF_KEEP_GOING").is_some()
}

/// `TEPHRA_DIFF_TRACE`: print each request and both codes (to follow a failing seed).
fn trace(seq: u64, step: usize, what: &str, real: &Answer, dev: &Answer) {
    if std::env::var_os("TEPHRA_DIFF_TRACE").is_some() {
        let what: String = what.chars().take(300).collect();
        eprintln!(
            "seed {seq} step {step}: {what} -> {} / {}",
            real.code, dev.code
        );
    }
}

/// The seeds that answered differently while surveying (their sequences went on).
static SURVEYED: std::sync::Mutex<BTreeSet<u64>> = std::sync::Mutex::new(BTreeSet::new());

/// A difference ends the sequence, or is printed (and the seed noted) when surveying.
fn found(f: Failure) -> Result<(), Failure> {
    if keep_going() {
        eprintln!("{}", f.text);
        SURVEYED.lock().unwrap().insert(f.seq);
        Ok(())
    } else {
        Err(f)
    }
}

/// Runs one sequence on both sides; the first difference, if any.
async fn run(seq: u64, front: Front, real: &mut Side, dev: &mut Side) -> Result<usize, Failure> {
    real.reset();
    dev.reset();
    let mut plan = Gen::of(seq, STEPS, front.kinds);
    let mut step_no = 0;
    for call in plan.setup() {
        let (a, b) = (real.call(&call).await, dev.call(&call).await);
        trace(seq, step_no, &real.describe(&call), &a, &b);
        if let Err(d) = compare::answers(&a, &real.memory, &b, &dev.memory) {
            found(report(
                seq,
                step_no,
                &real.describe(&call),
                &brief(&a),
                &brief(&b),
                &d,
            ))?;
        }
        step_no += 1;
        if call.key.as_deref() == Some(&format!("namespaces/{}", plan.ns)) {
            // Pods need the namespace's `default` service account, which the real
            // controller manager makes.
            let path = format!("/api/v1/namespaces/{}/serviceaccounts/default", plan.ns);
            let admin = real.admin.clone();
            eventually("the default service account", 60, || async {
                send(&admin, http::Method::GET, &path, Value::Null)
                    .await
                    .code
                    == 200
            })
            .await;
        }
    }
    rbac_ready(real, &plan).await;
    while let Some(step) = plan.next() {
        match &step {
            Step::Call(call) => {
                let what = real.describe(call);
                let (a, b) = (real.call(call).await, dev.call(call).await);
                trace(seq, step_no, &what, &a, &b);
                if let Err(d) = compare::answers(&a, &real.memory, &b, &dev.memory) {
                    found(report(seq, step_no, &what, &brief(&a), &brief(&b), &d))?;
                }
            }
            Step::WatchOpen { id, path, query } => {
                let a = real.watch_open(*id, path, query).await;
                let b = dev.watch_open(*id, path, query).await;
                if a.code != b.code {
                    let what = format!("watch {path} {query:?}");
                    let d = vec![format!("code: real={} dev={}", a.code, b.code)];
                    found(report(seq, step_no, &what, &brief(&a), &brief(&b), &d))?;
                }
            }
            Step::WatchClose { id } => {
                let quiet = Duration::from_millis(400);
                let limit = Duration::from_secs(5);
                let a = real.watch_close(*id, quiet, limit).await;
                let b = dev.watch_close(*id, quiet, limit).await;
                let (na, nb) = (
                    compare::watch_events(&a, &real.memory),
                    compare::watch_events(&b, &dev.memory),
                );
                let d = compare::differences(&json!(na), &json!(nb), 12);
                if !d.is_empty() {
                    let what = format!("watch {id}'s events");
                    found(report(
                        seq,
                        step_no,
                        &what,
                        &json!(a).to_string(),
                        &json!(b).to_string(),
                        &d,
                    ))?;
                }
            }
            Step::Settle => {
                let what = "the objects once the garbage collector is done";
                compare_settled(seq, step_no, what, &plan, real, dev).await?;
            }
        }
        step_no += 1;
    }
    compare_settled(seq, step_no, "the objects at the end", &plan, real, dev).await?;
    Ok(step_no)
}

/// Lets both sides settle, then compares every object of the sequence.
async fn compare_settled(
    seq: u64,
    step_no: usize,
    what: &str,
    plan: &Gen,
    real: &mut Side,
    dev: &mut Side,
) -> Result<(), Failure> {
    let (a, b) = (settle(real, plan).await, settle(dev, plan).await);
    let (na, nb) = (snapshot_normalized(&a, real), snapshot_normalized(&b, dev));
    let d = compare::differences(&na, &nb, 12);
    if d.is_empty() {
        return Ok(());
    }
    found(report(
        seq,
        step_no,
        what,
        &json!(a).to_string(),
        &json!(b).to_string(),
        &d,
    ))
}

fn snapshot_normalized(snap: &BTreeMap<String, Vec<Value>>, side: &Side) -> Value {
    let lists: serde_json::Map<String, Value> = snap
        .iter()
        .map(|(k, items)| {
            let kind = generate::all_kinds()
                .find(|kd| kd.id() == k)
                .map_or("", |kd| kd.kind);
            let list = json!({"kind": format!("{kind}List"), "items": items});
            (
                k.clone(),
                compare::normalize_body(&list, &side.memory)["items"].clone(),
            )
        })
        .collect();
    Value::Object(lists)
}

/// Waits until the real server's RBAC knows the sequence's RoleBinding: the limited account
/// reads ConfigMaps (a 404 rather than a 403) when granted `get`, or, when not, waits a moment.
async fn rbac_ready(real: &Side, plan: &Gen) {
    let path = format!("/api/v1/namespaces/{}/configmaps/rbac-probe", plan.ns);
    if plan.granted().contains(&"get") {
        let limited = real.limited.clone();
        eventually("the RoleBinding in effect", 30, || async {
            send(&limited, http::Method::GET, &path, Value::Null)
                .await
                .code
                == 404
        })
        .await;
    } else {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Runs `seeds` (`TEPHRA_DIFF_JOBS` at a time) and fails with every failing seed's report.
async fn differential(default: std::ops::Range<u64>, front: Front) {
    let Some(servers) = start(front).await else {
        return;
    };
    let seeds = seeds(default);
    let jobs: usize = std::env::var("TEPHRA_DIFF_JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or(2);
    let queue = Arc::new(Mutex::new(seeds.clone().into_iter()));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let passed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let servers = Arc::new(servers);
    let mut workers = Vec::new();
    for _ in 0..jobs {
        let (queue, failures, passed, s) = (
            queue.clone(),
            failures.clone(),
            passed.clone(),
            servers.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut real = Side::new(s.real_admin.clone(), s.real_limited.clone());
            let mut dev = Side::new(s.dev_admin.clone(), s.dev_limited.clone());
            loop {
                let Some(seq) = queue.lock().await.next() else {
                    break;
                };
                let started = Instant::now();
                match run(seq, front, &mut real, &mut dev).await {
                    // Surveyed to its end, with differences printed on the way.
                    Ok(steps) if SURVEYED.lock().unwrap().contains(&seq) => {
                        let text = format!("seed {seq}: {steps} steps, some answered differently");
                        eprintln!("{text}");
                        failures.lock().await.push(Failure { seq, text });
                    }
                    Ok(steps) => {
                        passed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        eprintln!(
                            "seed {seq}: {steps} steps agree ({:.1?})",
                            started.elapsed()
                        );
                    }
                    Err(f) => {
                        eprintln!("{}", f.text);
                        failures.lock().await.push(f);
                    }
                }
                real.reset();
                dev.reset();
            }
        }));
    }
    for w in workers {
        w.await.expect("a worker");
    }
    let failures = failures.lock().await;
    let passed = passed.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("{passed} of {} seeds agree", seeds.len());
    if !failures.is_empty() {
        let mut seqs: Vec<u64> = failures.iter().map(|f| f.seq).collect();
        seqs.sort_unstable();
        panic!(
            "{} seeds answered differently: {seqs:?}; the first:\n{}",
            failures.len(),
            failures
                .iter()
                .min_by_key(|f| f.seq)
                .map(|f| f.text.as_str())
                .unwrap_or_default()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_few_seeded_request_sequences_answer_as_kube_apiserver_does() {
    differential(0..4, CORE).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_few_seeded_workload_api_sequences_answer_as_kube_apiserver_1_37_does() {
    differential(0..4, WORKLOAD_API).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_few_seeded_resource_claim_sequences_answer_as_kube_apiserver_does() {
    differential(0..4, DRA).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "many sequences take a while: run with --ignored"]
async fn many_seeded_resource_claim_sequences_answer_as_kube_apiserver_does() {
    differential(0..300, DRA).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "many sequences take a while: run with --ignored"]
async fn many_seeded_workload_api_sequences_answer_as_kube_apiserver_1_37_does() {
    differential(0..150, WORKLOAD_API).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a thousand sequences take a while: run with --ignored"]
async fn a_thousand_seeded_request_sequences_answer_as_kube_apiserver_does() {
    differential(0..1000, CORE).await;
}
