//! Helpers for the runtime's tests against the devcluster: a one-member cluster with nodes,
//! Volcano-shaped PodGroups and pods, the scheduler started on it, and waiting for a condition.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use tephra_api::batch::JobPhase;
use tephra_api::{Job, PodGroup, Queue};
use tephra_devcluster::kubelet::{KubeletOptions, NodeSpec};
use tephra_devcluster::{DevCluster, Handle, Options};
use tephra_kube::run::Options as SchedulerOptions;

/// A node with `cpu` cores, 64Gi of memory and `gpus` GPUs.
pub fn node(name: &str, cpu: &str, gpus: u32) -> NodeSpec {
    let mut capacity = BTreeMap::from([
        ("cpu".to_string(), cpu.to_string()),
        ("memory".to_string(), "64Gi".to_string()),
        ("pods".to_string(), "110".to_string()),
    ]);
    if gpus > 0 {
        capacity.insert("nvidia.com/gpu".into(), gpus.to_string());
    }
    NodeSpec {
        name: name.into(),
        capacity,
        ..NodeSpec::default()
    }
}

/// Kubelets that start and stop pods in 100 ms and heartbeat every 200 ms.
pub fn fast_kubelet() -> Option<KubeletOptions> {
    Some(KubeletOptions {
        start_delay: Duration::from_millis(100),
        stop_delay: Duration::from_millis(100),
        heartbeat: Duration::from_millis(200),
        speed: 1.0,
    })
}

/// One member named `local` with these nodes, fast kubelets and a `default` queue.
pub async fn cluster(nodes: Vec<NodeSpec>) -> Handle {
    let mut options = Options::single();
    options.members[0].nodes = nodes;
    options.kubelet = fast_kubelet();
    options.queues = vec![queue_json("default", 1)];
    DevCluster::start(options).await.expect("devcluster starts")
}

/// A Volcano Job of one task `t0` of `replicas` pods asking `cpu` each, all needed, running an
/// hour in the devcluster's kubelet.
pub fn cpu_job(name: &str, replicas: u32, cpu: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default",
            "annotations": {"tephra.io/sim-duration": "1h"}},
        "spec": {"schedulerName": "volcano", "minAvailable": replicas,
            "tasks": [{"name": "t0", "replicas": replicas, "template": {"spec": {"containers": [
                {"name": "c0", "image": "nginx:latest",
                 "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}}}]}
    }))
    .expect("a Volcano Job")
}

/// A Queue manifest.
pub fn queue_json(name: &str, weight: i32) -> Value {
    json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight, "reclaimable": true}
    })
}

/// A kube-rs client for the member.
pub async fn client(handle: &Handle) -> kube::Client {
    handle.client("local").await.expect("client")
}

/// Scheduler options for tests: a short period and metrics on a free port.
pub fn scheduler_options() -> SchedulerOptions {
    SchedulerOptions {
        period: Duration::from_millis(200),
        listen: Some("127.0.0.1:0".parse().unwrap()),
        ..SchedulerOptions::default()
    }
}

/// Creates a PodGroup and `n` pods of it (`<group>-worker-<i>`), each asking `gpus` GPUs and
/// one CPU, as training-operator does: the PodGroup first, then pods naming it.
pub async fn gang(
    client: &kube::Client,
    ns: &str,
    group: &str,
    queue: &str,
    min: i32,
    n: usize,
    gpus: u32,
) {
    let pgs: Api<PodGroup> = Api::namespaced(client.clone(), ns);
    let pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": group, "namespace": ns},
        "spec": {"minMember": min, "queue": queue}
    }))
    .unwrap();
    pgs.create(&PostParams::default(), &pg)
        .await
        .expect("podgroup created");
    for i in 0..n {
        create_pod(
            client,
            ns,
            &format!("{group}-worker-{i}"),
            Some(group),
            gpus,
            "volcano",
        )
        .await;
    }
}

/// Creates one pod asking one CPU and `gpus` GPUs, scheduled by `scheduler`.
pub async fn create_pod(
    client: &kube::Client,
    ns: &str,
    name: &str,
    group: Option<&str>,
    gpus: u32,
    scheduler: &str,
) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let mut requests = json!({"cpu": "1"});
    if gpus > 0 {
        requests["nvidia.com/gpu"] = json!(gpus.to_string());
    }
    let mut annotations = json!({"volcano.sh/task-spec": "worker"});
    if let Some(g) = group {
        annotations["scheduling.k8s.io/group-name"] = json!(g);
    }
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {"schedulerName": scheduler, "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": requests, "limits": requests}}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod created");
}

/// The node of every pod in `ns` whose name starts with `prefix` (None: not bound).
pub async fn nodes_of(
    client: &kube::Client,
    ns: &str,
    prefix: &str,
) -> BTreeMap<String, Option<String>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| {
            let name = p.metadata.name.clone()?;
            name.starts_with(prefix)
                .then(|| (name, p.spec.and_then(|s| s.node_name)))
        })
        .collect()
}

/// A PodGroup as the API server has it.
pub async fn podgroup(client: &kube::Client, ns: &str, name: &str) -> PodGroup {
    let pgs: Api<PodGroup> = Api::namespaced(client.clone(), ns);
    pgs.get(name).await.expect("podgroup")
}

/// A Queue as the API server has it.
pub async fn queue(client: &kube::Client, name: &str) -> Queue {
    let qs: Api<Queue> = Api::all(client.clone());
    qs.get(name).await.expect("queue")
}

// Not every test binary waits.
#[allow(unused_imports)]
pub use tephra_devcluster::wait::eventually;

/// GETs a path from a plain-HTTP address and returns the status code and body.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// How many binds the scheduler has sent (each attempt), from its own `/metrics`.
pub async fn binds_sent(sched: &tephra_kube::Running) -> u64 {
    let (_, body) = http_get(sched.metrics_addr.unwrap(), "/metrics").await;
    body.lines()
        .find(|l| l.starts_with("tephra_executor_write_latency_milliseconds_count{verb=\"bind\"}"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Shows the scheduler's logs in a failing test's output (`RUST_LOG` filters them).
pub fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("tephra_kube=info")),
        )
        .with_test_writer()
        .try_init();
}

/// Waits until `count` pods in `ns` are named `<prefix>…` and every one is bound, and returns
/// where each went.
pub async fn all_bound(
    c: &kube::Client,
    ns: &str,
    prefix: &str,
    count: usize,
    secs: u64,
) -> BTreeMap<String, Option<String>> {
    eventually(secs, &format!("{count} {prefix}* pods bound"), || async {
        let nodes = nodes_of(c, ns, prefix).await;
        (nodes.len() == count && nodes.values().all(Option::is_some)).then_some(nodes)
    })
    .await
}

/// Waits up to `secs` seconds until the Volcano Job `name` is in phase `want`, and returns it.
pub async fn job_reaches(jobs: &Api<Job>, name: &str, want: JobPhase, secs: u64) -> Job {
    eventually(secs, &format!("job {name} {want:?}"), || async {
        let j = jobs.get(name).await.ok()?;
        (j.status.as_ref()?.state.phase == Some(want)).then_some(j)
    })
    .await
}

/// The scheduler and the three controllers (jobs, PodGroups for bare pods, queues), as
/// `tephra dev` runs them.
pub async fn start_everything(
    c: &kube::Client,
) -> (tephra_kube::Running, Vec<tokio::task::JoinHandle<()>>) {
    use tephra_kube::leader::Leadership;
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .expect("scheduler starts");
    let mut ctl = tephra_kube::jobs::start(c.clone(), Default::default(), Leadership::always());
    ctl.extend(tephra_kube::bare_pods::start(
        c.clone(),
        Default::default(),
        Leadership::always(),
    ));
    ctl.extend(tephra_kube::queues::start(
        c.clone(),
        Default::default(),
        Leadership::always(),
    ));
    (sched, ctl)
}

/// Stops what [`start_everything`] started.
pub async fn stop_everything(sched: tephra_kube::Running, ctl: Vec<tokio::task::JoinHandle<()>>) {
    for t in ctl {
        t.abort();
    }
    sched.stop().await;
}

/// A fleet: a control plane (with a `default` queue) and one member per `(name, gpus)`, each
/// with two 16-CPU nodes `<name>-0` and `<name>-1`, and fast kubelets.
pub async fn fleet_of(members: &[(&str, u32)]) -> Handle {
    fleet_with(members, false).await
}

/// [`fleet_of`], each member's two nodes under one HyperNode `<name>-rack` (so each member
/// serves the HyperNode CRD, and the scheduler keeps their status).
pub async fn fleet_with_racks(members: &[(&str, u32)]) -> Handle {
    fleet_with(members, true).await
}

async fn fleet_with(members: &[(&str, u32)], racks: bool) -> Handle {
    let options = Options {
        members: members
            .iter()
            .map(|(name, gpus)| tephra_devcluster::fleet::MemberSpec {
                name: (*name).into(),
                nodes: vec![
                    node(&format!("{name}-0"), "16", *gpus),
                    node(&format!("{name}-1"), "16", *gpus),
                ],
                objects: if racks {
                    vec![json!({"apiVersion": "topology.volcano.sh/v1alpha1",
                        "kind": "HyperNode", "metadata": {"name": format!("{name}-rack")},
                        "spec": {"tier": 1, "members": [{"type": "Node",
                            "selector": {"regexMatch": {"pattern": format!("^{name}-")}}}]}})]
                } else {
                    Vec::new()
                },
                ..tephra_devcluster::fleet::MemberSpec::default()
            })
            .collect(),
        control_plane: true,
        queues: vec![queue_json("default", 1)],
        kubelet: fast_kubelet(),
        ..Options::default()
    };
    DevCluster::start(options).await.expect("devcluster starts")
}

/// Each Volcano Job's phases in order (`namespace/name` → phases), as a watch sees them.
pub type JobPhases = std::sync::Arc<std::sync::Mutex<BTreeMap<String, Vec<String>>>>;

/// Watches every Job and records each one's phase changes, until the task is aborted.
pub fn watch_job_phases(c: &kube::Client) -> (JobPhases, tokio::task::JoinHandle<()>) {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let phases: JobPhases = Default::default();
    let seen = phases.clone();
    let jobs: Api<Job> = Api::all(c.clone());
    let task = tokio::spawn(async move {
        // An error (the Job kind not served yet, a watch cut) is retried, not the end: the
        // phases after it would be missed.
        let stream = watcher::watcher(jobs, watcher::Config::default()).default_backoff();
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            let Ok(ev) = ev else {
                continue;
            };
            let (watcher::Event::Apply(j) | watcher::Event::InitApply(j)) = ev else {
                continue;
            };
            let Some(phase) = j.status.as_ref().and_then(|s| s.state.phase) else {
                continue;
            };
            let phase = serde_json::to_value(phase).unwrap();
            let phase = phase.as_str().unwrap_or_default().to_string();
            let key = format!(
                "{}/{}",
                j.metadata.namespace.clone().unwrap_or_default(),
                j.metadata.name.clone().unwrap_or_default()
            );
            let mut p = seen.lock().unwrap();
            let list = p.entry(key).or_default();
            if list.last() != Some(&phase) {
                list.push(phase);
            }
        }
    });
    (phases, task)
}

/// A Job's phases in order, from the `kind: job` events of a `tephra sim` run.
pub fn simulated_phases(records: &[tephra_sim::Record], job: &str) -> Vec<String> {
    records
        .iter()
        .filter(|r| r.kind == "job" && r.job.as_deref() == Some(job))
        .filter_map(|r| r.reason.clone())
        .collect()
}

/// The scheduler on a fleet's control plane, with members from its Cluster objects.
pub async fn fleet_scheduler(cp: &kube::Client) -> tephra_kube::Running {
    let options = tephra_kube::Options {
        members: tephra_kube::MemberSource::Clusters,
        ..scheduler_options()
    };
    tephra_kube::start(cp.clone(), options).await.unwrap()
}

/// A bus Command with `action` for the Volcano Job `job`, as `vcctl job suspend|resume` makes.
pub fn command(job: &tephra_api::Job, action: &str) -> tephra_api::Command {
    let mut c = tephra_api::Command::default();
    c.metadata.generate_name = Some(format!(
        "{}-{}-",
        job.metadata.name.clone().unwrap(),
        action.to_lowercase()
    ));
    c.metadata.namespace = job.metadata.namespace.clone();
    c.fields.action = Some(action.into());
    c.fields.target = Some(tephra_controllers::job::names::owner(job));
    c
}

/// A fleet's scheduler and job controller on the control plane `cp`.
pub async fn fleet_scheduler_and_jobs(
    cp: &kube::Client,
) -> (tephra_kube::Running, Vec<tokio::task::JoinHandle<()>>) {
    let sched = fleet_scheduler(cp).await;
    let ctl = tephra_kube::jobs::start(
        cp.clone(),
        Default::default(),
        tephra_kube::leader::Leadership::always(),
    );
    (sched, ctl)
}

/// Waits until the scheduler's watchers have all synced.
pub async fn until_ready(sched: &tephra_kube::Running) {
    eventually(10, "ready", || async {
        sched
            .ready
            .load(std::sync::atomic::Ordering::SeqCst)
            .then_some(())
    })
    .await;
}

/// Where a test runs: the devcluster, or the real kube-apiserver (with the real
/// kube-controller-manager) of the real-cluster tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// tephra's own Kubernetes on one machine.
    Devcluster,
    /// The real components (`tephra-envtest`).
    KubeApiserver,
}

/// One member named `local` on a backend, with these nodes, fast kubelets, tephra's CRDs and a
/// `default` queue.
pub struct TestCluster {
    /// An admin client.
    pub client: kube::Client,
    /// The devcluster, on that backend.
    pub dev: Option<Handle>,
    /// The real cluster, on that backend.
    pub real: Option<tephra_envtest::tier::Single>,
}

/// [`cluster`] on `backend`; `None` when the real components are not built (the test skips,
/// saying so; under `CI` it fails instead).
pub async fn cluster_on(backend: Backend, nodes: Vec<NodeSpec>) -> Option<TestCluster> {
    cluster_on_with(backend, nodes, Default::default()).await
}

/// [`cluster_on`], with `options` for the real cluster (the devcluster has none of them).
pub async fn cluster_on_with(
    backend: Backend,
    nodes: Vec<NodeSpec>,
    options: tephra_envtest::ClusterOptions,
) -> Option<TestCluster> {
    cluster_on_release(backend, &tephra_envtest::Release::tier(), nodes, options).await
}

/// [`cluster_on_with`], the real cluster of `release` (for what only newer releases serve).
pub async fn cluster_on_release(
    backend: Backend,
    release: &tephra_envtest::Release,
    nodes: Vec<NodeSpec>,
    options: tephra_envtest::ClusterOptions,
) -> Option<TestCluster> {
    match backend {
        Backend::Devcluster => {
            let dev = cluster(nodes).await;
            let client = client(&dev).await;
            Some(TestCluster {
                client,
                dev: Some(dev),
                real: None,
            })
        }
        Backend::KubeApiserver => {
            let real = tephra_envtest::tier::single(release, &nodes, options)
                .await
                .expect("the real cluster starts")?;
            Some(TestCluster {
                client: real.client.clone(),
                dev: None,
                real: Some(real),
            })
        }
    }
}

/// Two tests of one body `async fn(Backend)`: `NAME::on_the_devcluster` and
/// `NAME::on_kube_apiserver`.
#[macro_export]
macro_rules! on_both {
    ($name:ident, $body:ident) => {
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_the_devcluster() {
                super::$body(super::Backend::Devcluster).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_kube_apiserver() {
                super::$body(super::Backend::KubeApiserver).await;
            }
        }
    };
}

/// A fleet on a backend: a control plane and members, as [`fleet_of`] makes them.
pub struct TestFleet {
    /// The devcluster, on that backend.
    pub dev: Option<Handle>,
    /// The real fleet, on that backend.
    pub real: Option<tephra_envtest::tier::Fleet>,
}

impl TestFleet {
    /// An admin client of a member or of `control-plane`.
    pub async fn client(&self, name: &str) -> Result<kube::Client, String> {
        match (&self.dev, &self.real) {
            (Some(d), _) => d.client(name).await.map_err(|e| e.to_string()),
            (_, Some(r)) => r.client(name).map_err(|e| e.to_string()),
            _ => Err("no fleet".into()),
        }
    }

    /// Stops a member's API server.
    pub async fn stop_member(&self, name: &str) -> Result<(), String> {
        match (&self.dev, &self.real) {
            (Some(d), _) => d.stop_member(name).await.map_err(|e| e.to_string()),
            (_, Some(r)) => r.stop_member(name).map_err(|e| e.to_string()),
            _ => Err("no fleet".into()),
        }
    }

    /// Starts it again.
    pub async fn restore_member(&self, name: &str) -> Result<(), String> {
        match (&self.dev, &self.real) {
            (Some(d), _) => d.restore_member(name).await.map_err(|e| e.to_string()),
            (_, Some(r)) => r.restore_member(name).await.map_err(|e| e.to_string()),
            _ => Err("no fleet".into()),
        }
    }

    /// The CA (DER) that signed the control plane's certificates, its kubelet client
    /// certificate's included.
    pub fn ca_der(&self) -> Vec<Vec<u8>> {
        match (&self.dev, &self.real) {
            (Some(d), _) => vec![d.ca_der().to_vec()],
            (_, Some(r)) => tephra_kube::virtual_node::tls::certificates(r.env.ca_pem().as_bytes())
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// Refuses the member's current token from now on and returns a new one.
    pub async fn rotate_member_token(&self, name: &str) -> Result<String, String> {
        match (&self.dev, &self.real) {
            (Some(d), _) => d.rotate_member_token(name).map_err(|e| e.to_string()),
            (_, Some(r)) => r.rotate_member_token(name).await.map_err(|e| e.to_string()),
            _ => Err("no fleet".into()),
        }
    }
}

/// [`fleet_of`] on `backend`; `None` when the real components are not built (outside CI).
pub async fn fleet_on(backend: Backend, members: &[(&str, u32)]) -> Option<TestFleet> {
    let release = tephra_envtest::Release::tier();
    fleet_on_release(backend, &release, members, Default::default()).await
}

/// [`fleet_on`], the real fleet of `release`, each of its clusters with `options` (the
/// devcluster has none of them).
pub async fn fleet_on_release(
    backend: Backend,
    release: &tephra_envtest::Release,
    members: &[(&str, u32)],
    options: tephra_envtest::ClusterOptions,
) -> Option<TestFleet> {
    match backend {
        Backend::Devcluster => Some(TestFleet {
            dev: Some(fleet_of(members).await),
            real: None,
        }),
        Backend::KubeApiserver => {
            let specs: Vec<(&str, Vec<NodeSpec>)> = members
                .iter()
                .map(|(name, gpus)| {
                    (
                        *name,
                        vec![
                            node(&format!("{name}-0"), "16", *gpus),
                            node(&format!("{name}-1"), "16", *gpus),
                        ],
                    )
                })
                .collect();
            let real = tephra_envtest::tier::fleet_with(release, &specs, options)
                .await
                .expect("the real fleet starts")?;
            Some(TestFleet {
                dev: None,
                real: Some(real),
            })
        }
    }
}

/// A counter or gauge of the scheduler's own `/metrics` (the first line starting with
/// `series`), 0 when absent.
pub async fn metric(sched: &tephra_kube::Running, series: &str) -> u64 {
    let (_, body) = http_get(sched.metrics_addr.unwrap(), "/metrics").await;
    body.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// A small deterministic generator (xorshift64*), so a seed replays exactly.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % (n as u64)).unwrap()
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.below(items.len())])
    }
}
