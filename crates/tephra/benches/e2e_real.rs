//! End to end on one real kube-apiserver (`tephra-envtest`, Kubernetes v1.37.2 with
//! `GenericWorkload` and `scheduling.k8s.io/v1beta1`): fake nodes (Node objects, Ready, no
//! kubelet: a bound pod stays Pending-but-bound), then for each contender a fresh namespace of
//! pods created before it starts, and the time from its start to the first bind and to the
//! last, counted from a watch of the namespace's pods. Contenders, in turn on the same server:
//!
//! - `bind-limit`: the API server's physical bind limit, a bind-only client (tephra's HTTP/2
//!   client, `TEPHRA_REAL_STREAMS` binds in flight, 64 by default) posting a Binding for each
//!   pre-created pod, round robin over the nodes;
//! - `bind-limit-watching`: the same client while a second connection lists and watches every
//!   pod, as a scheduler's informer does (what that watch costs the API server beside binds);
//! - `bind-limit-watching-raw` and `bind-limit-watching-protobuf`: the same, the watch (a
//!   streaming list, as tephra's) read as bytes and never decoded, in JSON or in Kubernetes'
//!   protobuf: what the watch costs with no client decoding, and what protobuf would save;
//! - `bind-limit-watching-shared`: the raw JSON watch on the binds' own HTTP/2 connection, as
//!   a scheduler's watches and binds share one: what sharing the connection costs the binds;
//! - `tephra`: `tephra scheduler` (the release binary), pods in Volcano PodGroups of 8;
//! - `tephra-kube-gangs`: `tephra scheduler`, pods in `scheduling.k8s.io` PodGroups of 8, as
//!   `kube-gangs` has them (tephra's second front end);
//! - `kube-scheduler`: the real kube-scheduler, single pods;
//! - `kube-gangs`: the real kube-scheduler, pods in `scheduling.k8s.io` PodGroups of 8 (gang,
//!   `minCount` 8), named by each pod's `spec.schedulingGroup.podGroupName`;
//! - `volcano`: Volcano v1.14.1 built by `.ci/real-components --with-volcano`: its CRDs beside
//!   tephra's, vc-controller-manager started first (it opens the queue), then vc-scheduler with
//!   the configuration Volcano's Helm chart installs, pods in Volcano PodGroups of 8.
//!
//! Each gang contender's namespace also holds one gang of 8 that can never be placed whole
//! (`never-*`: two of its pods select a node label no node has); its pods bound, which a gang
//! scheduler leaves at 0, are printed as `never-fit gang: N of 8 bound`.
//!
//! `cargo bench -p tephra --bench e2e_real`; `TEPHRA_REAL_NODES` (500), `TEPHRA_REAL_PODS`
//! (5,000), `TEPHRA_REAL_RUNS` (the contenders, comma separated, in order; all by default),
//! `TEPHRA_REAL_REPEAT` (rounds of them, alternating, 1), `TEPHRA_REAL_KUBE_QPS` (kube-scheduler's
//! client QPS and burst, 5,000: its default of 50 would measure its rate limit),
//! `TEPHRA_REAL_ARGS` (more `tephra scheduler` flags), `TEPHRA_REAL_PROFILE` (a directory:
//! tephra's run recorded there by `perf record`), `TEPHRA_REAL_SERVER_PROFILE` (a directory:
//! kube-apiserver's CPU profile of each contender's first seconds, from its pprof endpoint,
//! `TEPHRA_REAL_SERVER_PROFILE_SECONDS` long, 6 by default), `TEPHRA_REAL_PIN` (`SERVER/REST`, two CPU
//! lists as `taskset` reads them, e.g. `0/1`: kube-apiserver and etcd on the first, this bench
//! and every contender on the second, so that the bind limit is the server's cores alone and a
//! contender's own CPU does not take from it). Each contender prints one line; that
//! line also says how busy the whole machine was (every core, from /proc/stat) and how much of
//! it the API server, etcd and the bench itself used. The last
//! lines are the ratios: each round's rates against that round's bind limit, from the
//! contender's start and from its first bind to its last (the rate of its binds alone), their
//! medians over the rounds, and tephra's best against each other contender.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use serde_json::{Value, json};
use tephra_envtest::{ClusterOptions, Env, Release, User};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Gang size, for every contender that runs gangs.
const GANG: usize = 8;
/// Pods created or deleted in flight at once.
const CREATES: usize = 64;

/// CPU seconds (user + system) of a process, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    let after = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

/// CPU seconds of every process named `comm` (`/proc/PID/comm`, at most 15 bytes), summed.
fn cpu_of(comm: &str) -> f64 {
    pids_of(comm).into_iter().map(cpu_seconds).sum()
}

/// CPU seconds of the API server, etcd and this bench (its watcher of the pods, and the
/// bind-limit contenders' clients), so that a run says who kept the machine busy.
fn shares() -> [f64; 3] {
    [
        cpu_of("kube-apiserver"),
        cpu_of("etcd"),
        cpu_seconds(std::process::id()),
    ]
}

/// CPU seconds the whole machine has been busy (every core, from /proc/stat: all but idle
/// and iowait), so that a run says whether its two cores were saturated.
fn machine_busy() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return 0.0;
    };
    let Some(cpu) = stat.lines().next() else {
        return 0.0;
    };
    let ticks: Vec<f64> = cpu
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let busy: f64 = ticks
        .iter()
        .enumerate()
        .filter(|(i, _)| !matches!(i, 3 | 4))
        .map(|(_, t)| t)
        .sum();
    busy / 100.0
}

/// Every process named `comm`.
fn pids_of(comm: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
        })
        .collect()
}

/// With `TEPHRA_REAL_PIN=SERVER/REST`: kube-apiserver and etcd (every thread) on the CPUs
/// `SERVER`, this bench on `REST`; the contenders it starts later inherit `REST`.
fn pin() {
    let Ok(spec) = std::env::var("TEPHRA_REAL_PIN") else {
        return;
    };
    let Some((server, rest)) = spec.split_once('/') else {
        panic!("TEPHRA_REAL_PIN={spec}: expected SERVER/REST, two CPU lists such as 0/1");
    };
    let mut pinned = vec![("bench", std::process::id(), rest)];
    for comm in ["kube-apiserver", "etcd"] {
        pinned.extend(pids_of(comm).into_iter().map(|pid| (comm, pid, server)));
    }
    for (what, pid, cpus) in pinned {
        let status = Command::new("taskset")
            .args(["-a", "-p", "-c", cpus, &pid.to_string()])
            .stdout(Stdio::null())
            .status()
            .expect("taskset runs");
        assert!(
            status.success(),
            "taskset of {what} ({pid}) to CPUs {cpus} failed"
        );
        eprintln!("pinned {what} ({pid}) to CPUs {cpus}");
    }
}

/// The machine's load average over the last minute.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(String::from))
        .unwrap_or_default()
}

/// Binds seen by a watch of one namespace's pods: when the first and the last came.
#[derive(Default)]
struct Seen {
    bound: usize,
    /// Pods of the gang that never fits (`never-*`) that got a node.
    never_bound: usize,
    first: Option<Instant>,
    last: Option<Instant>,
    /// When each pod was seen bound.
    at: Vec<Instant>,
    synced: bool,
}

/// Watches the pods of `ns` and counts those that have a node, once each.
fn watch_binds(client: kube::Client, ns: &str) -> Arc<Mutex<Seen>> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let out = Arc::clone(&seen);
    let pods: Api<Pod> = Api::namespaced(client, ns);
    tokio::spawn(async move {
        let mut bound = std::collections::HashSet::new();
        let config = watcher::Config::default().page_size(5000);
        let mut s = watcher::watcher(pods, config).boxed();
        while let Ok(Some(ev)) = s.try_next().await {
            let p = match ev {
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) => p,
                watcher::Event::InitDone => {
                    seen.lock().unwrap().synced = true;
                    continue;
                }
                _ => continue,
            };
            let name = p.metadata.name.clone().unwrap_or_default();
            if name.starts_with("never-") {
                if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()
                    && bound.insert(name)
                {
                    seen.lock().unwrap().never_bound += 1;
                }
                continue;
            }
            if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() && bound.insert(name) {
                let now = Instant::now();
                let mut s = seen.lock().unwrap();
                s.bound += 1;
                s.first.get_or_insert(now);
                s.last = Some(now);
                s.at.push(now);
            }
        }
    });
    out
}

/// One contender's result.
struct Outcome {
    first: f64,
    all: f64,
    pods: usize,
    cpu: Option<f64>,
}

impl Outcome {
    /// Pods bound per second from the contender's start: its start-up counts.
    fn rate(&self) -> f64 {
        self.pods as f64 / self.all
    }

    /// Pods bound per second from its first bind to its last: the rate of its binds alone,
    /// what the bind limit bounds (start-up is the first bind's figure).
    fn bind_rate(&self) -> f64 {
        self.pods.saturating_sub(1) as f64 / (self.all - self.first)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Pod `name` of `ns` for a contender of `kind`, in gang `group` where the kind has gangs.
fn pod_of(kind: Pods, ns: &str, name: &str, group: &str) -> Value {
    let mut pod = json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {"schedulerName": "default-scheduler",
            "automountServiceAccountToken": false,
            "containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
    });
    match kind {
        Pods::Unscheduled => pod["spec"]["schedulerName"] = json!("none"),
        Pods::Single => {}
        Pods::VolcanoGangs => {
            pod["spec"]["schedulerName"] = json!("volcano");
            pod["metadata"]["annotations"] = json!({
                "scheduling.k8s.io/group-name": group,
                "volcano.sh/task-spec": "worker"});
        }
        Pods::KubeGangs => {
            pod["spec"]["schedulingGroup"] = json!({"podGroupName": group});
        }
        Pods::TephraKubeGangs => {
            pod["spec"]["schedulerName"] = json!("volcano");
            pod["spec"]["schedulingGroup"] = json!({"podGroupName": group});
        }
    }
    pod
}

/// Which pods a contender gets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pods {
    /// Nobody's: `schedulerName: none` (the bind-limit client binds them).
    Unscheduled,
    /// `volcano` pods in Volcano PodGroups of [`GANG`].
    VolcanoGangs,
    /// `default-scheduler` pods, alone.
    Single,
    /// `default-scheduler` pods in `scheduling.k8s.io` PodGroups of [`GANG`].
    KubeGangs,
    /// `volcano` pods in `scheduling.k8s.io` PodGroups of [`GANG`].
    TephraKubeGangs,
}

struct Bench {
    client: kube::Client,
    /// For clients of their own (a connection of their own).
    config: kube::Config,
    cluster: tephra_envtest::Cluster,
    kubeconfig: PathBuf,
    nodes: Vec<String>,
    pods: usize,
    kube_qps: usize,
    _env: Env,
}

fn dynamic(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

impl Bench {
    async fn start(nodes: usize, pods: usize) -> Option<Self> {
        let bins = tephra_envtest::require(&Release::Newest)?;
        assert!(
            bins.minor >= 37,
            "the newest Kubernetes built is {}; the bench needs v1.37 (scheduling.k8s.io/v1beta1)",
            bins.version
        );
        // The first start of a binary reads it from disk: warm page caches for every
        // contender, so that no first round measures the disk.
        let _ = std::fs::read(&bins.kube_scheduler);
        let _ = std::fs::read(env!("CARGO_BIN_EXE_tephra"));
        let env = Env::start(bins).await.unwrap();
        let cluster = env
            .cluster(
                "real",
                ClusterOptions {
                    feature_gates: vec!["GenericWorkload=true".into()],
                    runtime_config: vec!["scheduling.k8s.io/v1beta1=true".into()],
                    // No audit log: it would cost the API server a write per request.
                    apiserver_args: [
                        "--audit-log-path=".to_string(),
                        format!(
                            "--profiling={}",
                            std::env::var_os("TEPHRA_REAL_SERVER_PROFILE").is_some()
                        ),
                    ]
                    .into(),
                    ..ClusterOptions::default()
                },
            )
            .await
            .unwrap();
        let kubeconfig = cluster.admin_kubeconfig().unwrap();
        let yaml = cluster.kubeconfig(&User::Admin).unwrap();
        let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        let client = tephra_kube::connect::client(config.clone()).unwrap();
        tephra_envtest::objects::install_tephra_crds(&client)
            .await
            .unwrap();
        tephra_envtest::objects::create(
            &client,
            &json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                "metadata": {"name": "default"}, "spec": {"weight": 1, "reclaimable": true}}),
        )
        .await
        .unwrap();
        let names: Vec<String> = (0..nodes).map(|i| format!("n{i}")).collect();
        let api: Api<Node> = Api::all(client.clone());
        futures::stream::iter(names.clone())
            .for_each_concurrent(CREATES, |name| {
                let api = api.clone();
                async move {
                    let node: Node = serde_json::from_value(json!({
                        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                        "status": {
                            "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                            "conditions": [{"type": "Ready", "status": "True",
                                "reason": "KubeletReady", "message": "fake node",
                                "lastHeartbeatTime": k8s_openapi::jiff::Timestamp::now().to_string(),
                                "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string()}]
                        }
                    }))
                    .unwrap();
                    api.create(&PostParams::default(), &node).await.unwrap();
                    // The API server taints a new node not-ready; no controller manager runs
                    // to take the taint off.
                    api.patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"taints": null}})),
                    )
                    .await
                    .unwrap();
                }
            })
            .await;
        Some(Self {
            client,
            config,
            cluster,
            kubeconfig,
            nodes: names,
            pods,
            kube_qps: env_kube_qps(),
            _env: env,
        })
    }

    /// A namespace with its `default` service account (no controller manager makes it).
    async fn namespace(&self, ns: &str) {
        for manifest in [
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": "default", "namespace": ns}}),
        ] {
            tephra_envtest::objects::create(&self.client, &manifest)
                .await
                .unwrap();
        }
    }

    /// Creates the contender's pods (and their groups) in `ns`.
    async fn create(&self, ns: &str, kind: Pods) {
        let gangs = self.pods.div_ceil(GANG);
        let volcano: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            ns,
            &dynamic("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups"),
        );
        let kube: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            ns,
            &dynamic("scheduling.k8s.io", "v1beta1", "PodGroup", "podgroups"),
        );
        let groups = match kind {
            Pods::VolcanoGangs => Some((
                volcano,
                json!({
                "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "spec": {"minMember": GANG, "queue": "default"}}),
            )),
            Pods::KubeGangs | Pods::TephraKubeGangs => Some((
                kube,
                json!({
                "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                "metadata": {"labels": {"volcano.sh/queue-name": "default"}},
                "spec": {"schedulingPolicy": {"gang": {"minCount": GANG}}}}),
            )),
            _ => None,
        };
        if let Some((api, template)) = &groups {
            futures::stream::iter(0..gangs)
                .for_each_concurrent(CREATES, |g| async move {
                    let mut pg = template.clone();
                    pg["metadata"]["name"] = json!(format!("g{g}"));
                    pg["metadata"]["namespace"] = json!(ns);
                    let pg: DynamicObject = serde_json::from_value(pg).unwrap();
                    api.create(&PostParams::default(), &pg).await.unwrap();
                })
                .await;
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        futures::stream::iter(0..self.pods)
            .for_each_concurrent(CREATES, |i| {
                let pods = pods.clone();
                async move {
                    let group = format!("g{}", i / GANG);
                    let pod = pod_of(kind, ns, &format!("p{i}"), &group);
                    let pod: Pod = serde_json::from_value(pod).unwrap();
                    pods.create(&PostParams::default(), &pod).await.unwrap();
                }
            })
            .await;
        if let Some((api, template)) = &groups {
            // The gang that never fits whole: its group, then its pods, two of which select
            // a label no node has.
            let mut pg = template.clone();
            pg["metadata"]["name"] = json!("never");
            pg["metadata"]["namespace"] = json!(ns);
            let pg: DynamicObject = serde_json::from_value(pg).unwrap();
            api.create(&PostParams::default(), &pg).await.unwrap();
            for i in 0..GANG {
                let mut pod = pod_of(kind, ns, &format!("never-{i}"), "never");
                if i < 2 {
                    pod["spec"]["nodeSelector"] = json!({"tephra.io/bench": "nowhere"});
                }
                let pod: Pod = serde_json::from_value(pod).unwrap();
                pods.create(&PostParams::default(), &pod).await.unwrap();
            }
        }
    }

    /// Deletes every pod of `ns` at once (grace 0: no kubelet confirms a deletion) and waits
    /// until they are gone, so that the next contender finds the nodes empty.
    async fn clear(&self, ns: &str) {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        // A collection of tens of thousands of pods outlasts one request's timeout: the delete
        // is asked again until none is left.
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let _ = pods.delete_collection(&dp, &ListParams::default()).await;
            let left = pods.list_metadata(&ListParams::default().limit(1)).await;
            if left.is_ok_and(|l| l.items.is_empty()) {
                break;
            }
            assert!(Instant::now() < deadline, "pods of {ns} not deleted");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Runs one contender on its own namespace and measures it.
    async fn run(&self, name: &'static str, round: usize) -> Option<Outcome> {
        let kind = match name {
            "bind-limit"
            | "bind-limit-watching"
            | "bind-limit-watching-raw"
            | "bind-limit-watching-shared"
            | "bind-limit-watching-protobuf" => Pods::Unscheduled,
            "tephra" | "volcano" => Pods::VolcanoGangs,
            "kube-scheduler" => Pods::Single,
            "kube-gangs" => Pods::KubeGangs,
            "tephra-kube-gangs" => Pods::TephraKubeGangs,
            other => panic!("unknown contender {other}"),
        };
        let volcano = volcano_dir();
        if name == "volcano" && volcano.is_none() {
            println!(
                "volcano: not built (`bash .ci/real-components --with-volcano`; the module \
                 proxy must serve volcano.sh/apis): skipped"
            );
            return None;
        }
        let controllers = match volcano.as_ref().filter(|_| name == "volcano") {
            Some(dir) => Some(self.volcano_before(dir).await),
            None => None,
        };
        let ns = format!("{name}-{round}");
        self.namespace(&ns).await;
        let created = Instant::now();
        self.create(&ns, kind).await;
        eprintln!(
            "{name}: {} pods created in {:.1?}",
            self.pods,
            created.elapsed()
        );
        let seen = watch_binds(self.client.clone(), &ns);
        while !seen.lock().unwrap().synced {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let load_before = load();
        let requests_before = self.requests().await;
        let busy_before = machine_busy();
        let shares_before = shares();
        let start = Instant::now();
        let mut process: Option<Child> = None;
        let mut profiler: Option<Child> = None;
        let mut bind_task = None;
        let mut watch_task: Option<tokio::task::JoinHandle<()>> = None;
        let watched = Arc::new(AtomicUsize::new(0));
        let server_profile = server_profile(&self.client, name, round);
        match name {
            "bind-limit"
            | "bind-limit-watching"
            | "bind-limit-watching-raw"
            | "bind-limit-watching-shared"
            | "bind-limit-watching-protobuf" => {
                // What a scheduler's informer costs the API server beside its binds: a list
                // and watch of every pod, on a connection of its own, for the run.
                let client = || tephra_kube::connect::client(self.config.clone()).unwrap();
                watch_task = match name {
                    "bind-limit" => None,
                    "bind-limit-watching" => {
                        let pods: Api<Pod> = Api::all(client());
                        Some(tokio::spawn(async move {
                            let mut s = watcher::watcher(pods, watcher::Config::default()).boxed();
                            while let Ok(Some(_)) = s.try_next().await {}
                        }))
                    }
                    // The same raw watch on the binds' own connection, as a scheduler's
                    // watches and binds share one: what sharing it costs the binds.
                    "bind-limit-watching-shared" => {
                        let read = Arc::clone(&watched);
                        Some(tokio::spawn(watch_raw(self.client.clone(), false, read)))
                    }
                    _ => {
                        let protobuf = name.ends_with("protobuf");
                        let read = Arc::clone(&watched);
                        Some(tokio::spawn(watch_raw(client(), protobuf, read)))
                    }
                };
                bind_task = Some(tokio::spawn(bind_all(
                    self.client.clone(),
                    ns.clone(),
                    self.nodes.clone(),
                    self.pods,
                )))
            }
            "tephra" | "tephra-kube-gangs" => {
                let p = tephra_scheduler(&self.kubeconfig);
                profiler = profile(p.id(), name);
                process = Some(p);
            }
            "kube-scheduler" | "kube-gangs" => {
                let config = json!({
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {"qps": self.kube_qps, "burst": self.kube_qps}});
                self.cluster
                    .start_scheduler(config, &["GenericWorkload=true".to_string()])
                    .unwrap();
            }
            "volcano" => process = volcano.map(|dir| volcano_scheduler(&dir, &self.kubeconfig)),
            _ => {}
        }
        let deadline = start + Duration::from_secs(900);
        loop {
            if seen.lock().unwrap().bound >= self.pods {
                break;
            }
            if Instant::now() > deadline {
                eprintln!("{name}: not every pod bound in 15 min");
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let cpu = process.as_ref().map(|p| cpu_seconds(p.id()));
        let (busy, wall) = (machine_busy() - busy_before, start.elapsed().as_secs_f64());
        let [apiserver, etcd, bench] = {
            let now = shares();
            [0, 1, 2].map(|i| now[i] - shares_before[i])
        };
        let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
        if let Some(mut perf) = profiler {
            // SIGINT: perf writes its data and exits.
            let _ = Command::new("kill")
                .args(["-INT", &perf.id().to_string()])
                .status();
            let _ = perf.wait();
        }
        for mut p in process.into_iter().chain(controllers) {
            let _ = p.kill();
            let _ = p.wait();
        }
        if let Some(t) = bind_task {
            let _ = t.await;
        }
        if let Some(t) = server_profile {
            let _ = t.await;
        }
        if let Some(t) = watch_task {
            t.abort();
        }
        let watched = watched.load(Ordering::Relaxed);
        if watched > 0 {
            eprintln!("{name}: its watch read {:.1} MB", watched as f64 / 1e6);
        }
        if matches!(name, "kube-scheduler" | "kube-gangs") {
            self.cluster.stop_scheduler();
        }
        let (first, last, bound, never_bound) = {
            let s = seen.lock().unwrap();
            (s.first, s.last, s.bound, s.never_bound)
        };
        // Binds a half second, from the start: a stall shows as a dip, a slow start as a ramp.
        let timeline: Vec<usize> = {
            let s = seen.lock().unwrap();
            let mut buckets = Vec::new();
            for t in &s.at {
                let i = (t.saturating_duration_since(start).as_millis() / 500) as usize;
                if buckets.len() <= i {
                    buckets.resize(i + 1, 0);
                }
                buckets[i] += 1;
            }
            buckets
        };
        println!(
            "{name}: binds per 0.5 s from start: {}",
            timeline
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        );
        if !matches!(kind, Pods::Unscheduled | Pods::Single) {
            println!("{name}: never-fit gang: {never_bound} of {GANG} bound");
        }
        let result = Outcome {
            first: first.map_or(f64::NAN, |t| (t - start).as_secs_f64()),
            all: last.map_or(f64::NAN, |t| (t - start).as_secs_f64()),
            pods: bound,
            cpu,
        };
        println!(
            "{name}: {} nodes, {bound}/{} pods bound; first bind {:.2} s after start, all {:.2} s ({:.0} pods/s from start){}; the machine busy {busy:.1} of {:.1} core-seconds ({:.0}%: kube-apiserver {apiserver:.1}, etcd {etcd:.1}, this bench {bench:.1}); load {load_before} → {}",
            self.nodes.len(),
            self.pods,
            result.first,
            result.all,
            result.rate(),
            result
                .cpu
                .map(|c| format!("; its CPU {c:.1} s"))
                .unwrap_or_default(),
            wall * cores,
            100.0 * busy / (wall * cores),
            load(),
        );
        let requests = self.requests().await;
        let mut made: Vec<(String, u64)> = requests
            .into_iter()
            .map(|(k, n)| {
                let was = requests_before.get(&k).copied().unwrap_or(0);
                (k, n.saturating_sub(was))
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        made.sort_by_key(|m| std::cmp::Reverse(m.1));
        let (reads, writes): (Vec<_>, Vec<_>) = made.iter().partition(|(k, _)| {
            k.starts_with("LIST ") || k.starts_with("WATCH ") || k.starts_with("GET ")
        });
        let writes: Vec<String> = writes
            .iter()
            .filter(|(_, n)| *n >= (self.pods as u64 / 100).max(1))
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let reads: Vec<String> = reads.iter().map(|(k, n)| format!("{k} {n}")).collect();
        println!(
            "{name}: writes the API server served (one in 100 pods or more): {}",
            writes.join(", ")
        );
        println!(
            "{name}: reads the API server served (lists, watches and gets, every one): {}",
            reads.join(", ")
        );
        self.clear(&ns).await;
        Some(result)
    }

    /// What a cluster that runs Volcano has before its scheduler starts: Volcano's CRDs
    /// (vc-scheduler's informers wait for kinds tephra does not serve, Numatopology and
    /// NodeShard; tephra's own are left as they are), and vc-controller-manager, waited for
    /// until it has opened the `default` queue (vc-scheduler enqueues nothing into a queue
    /// whose state is not Open); it keeps PodGroup status during the run. The caller kills
    /// and waits for the process this returns.
    #[allow(clippy::zombie_processes)]
    async fn volcano_before(&self, dir: &std::path::Path) -> Child {
        let crds = tephra_envtest::objects::crds_in(&dir.join("crds"), "Volcano's CRDs").unwrap();
        tephra_envtest::objects::install_crds(&self.client, &crds)
            .await
            .unwrap();
        let mut child = volcano_process(dir, "vc-controller-manager", &self.kubeconfig, &[]);
        let queues: Api<DynamicObject> = Api::all_with(
            self.client.clone(),
            &dynamic("scheduling.volcano.sh", "v1beta1", "Queue", "queues"),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let state = queues
                .get("default")
                .await
                .ok()
                .and_then(|q| q.data["status"]["state"].as_str().map(String::from));
            if state.as_deref() == Some("Open") {
                return child;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "vc-controller-manager did not open the default queue in 60 s (its log: vc-controller-manager.log in the temporary directory)"
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The API server's count of requests so far, by verb, resource and subresource
    /// (`apiserver_request_total`), so that a run says which writes and reads shared the
    /// server with its binds (the bench's own among them: its watch of the namespace, this
    /// read of `/metrics`).
    async fn requests(&self) -> BTreeMap<String, u64> {
        let text = self
            .client
            .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
            .await
            .unwrap_or_default();
        let mut out = BTreeMap::new();
        for line in text
            .lines()
            .filter(|l| l.starts_with("apiserver_request_total{"))
        {
            let label = |name: &str| {
                let at = line.find(&format!("{name}=\""))? + name.len() + 2;
                let len = line[at..].find('"')?;
                Some(line[at..at + len].to_string())
            };
            let verb = label("verb").unwrap_or_default();
            let resource = label("resource").unwrap_or_default();
            let sub = label("subresource").filter(|s| !s.is_empty());
            let key = match sub {
                Some(sub) => format!("{verb} {resource}/{sub}"),
                None => format!("{verb} {resource}"),
            };
            let n: f64 = line
                .rsplit(' ')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            *out.entry(key).or_default() += n as u64;
        }
        out
    }
}

fn env_kube_qps() -> usize {
    env("TEPHRA_REAL_KUBE_QPS", 5000)
}

/// Posts a Binding for each of the `pods` pods of `ns`, round robin over `nodes`, with
/// `TEPHRA_REAL_STREAMS` in flight over one HTTP/2 connection.
async fn bind_all(client: kube::Client, ns: String, nodes: Vec<String>, pods: usize) {
    let streams = env("TEPHRA_REAL_STREAMS", 64);
    let api: Api<Pod> = Api::namespaced(client, &ns);
    futures::stream::iter(0..pods)
        .for_each_concurrent(streams, |i| {
            let api = api.clone();
            let node = nodes[i % nodes.len()].clone();
            let ns = ns.clone();
            async move {
                let name = format!("p{i}");
                let body = tephra_api::binding::pod_binding(&ns, &name, &node);
                api.create_subresource::<_, Value>("binding", &name, &PostParams::default(), &body)
                    .await
                    .unwrap();
            }
        })
        .await;
}

/// With `TEPHRA_REAL_PROFILE=DIR`: `perf record` of the process `pid` (499 Hz, flat)
/// into `DIR/<contender>.perf.data`, from its start until every pod is bound.
fn profile(pid: u32, name: &str) -> Option<Child> {
    let dir = std::env::var("TEPHRA_REAL_PROFILE").ok()?;
    let out = PathBuf::from(dir).join(format!("{name}.perf.data"));
    Command::new("perf")
        // cpu-clock: a software event, so that it samples where hardware counters are not
        // offered (a virtual machine's).
        .args([
            "record",
            "-e",
            "cpu-clock",
            "-F",
            "499",
            "-p",
            &pid.to_string(),
            "-o",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .inspect_err(|e| eprintln!("TEPHRA_REAL_PROFILE: perf does not start: {e}"))
        .ok()
}

/// With `TEPHRA_REAL_SERVER_PROFILE=DIR`: kube-apiserver's CPU profile (its Go pprof
/// endpoint, which `Bench::start` turns on, `--profiling`, only then) over the contender's first
/// `TEPHRA_REAL_SERVER_PROFILE_SECONDS` (6), written to `DIR/NAME-ROUND.pprof` for
/// `go tool pprof -top`: where the API server's time goes under each contender's binds.
fn server_profile(
    client: &kube::Client,
    name: &str,
    round: usize,
) -> Option<tokio::task::JoinHandle<()>> {
    let dir = PathBuf::from(std::env::var_os("TEPHRA_REAL_SERVER_PROFILE")?);
    let seconds: u32 = std::env::var("TEPHRA_REAL_SERVER_PROFILE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    let out = dir.join(format!("{name}-{round}.pprof"));
    let client = client.clone();
    Some(tokio::spawn(async move {
        use futures::AsyncReadExt;
        let request = http::Request::get(format!("/debug/pprof/profile?seconds={seconds}"))
            .body(Vec::new())
            .unwrap();
        let mut body = Vec::new();
        match client.request_stream(request).await {
            Ok(mut r) => {
                if let Err(e) = r.read_to_end(&mut body).await {
                    eprintln!("TEPHRA_REAL_SERVER_PROFILE: reading the profile: {e}");
                    return;
                }
            }
            Err(e) => {
                eprintln!("TEPHRA_REAL_SERVER_PROFILE: kube-apiserver's profile: {e}");
                return;
            }
        }
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&out, body).unwrap();
        eprintln!("kube-apiserver's profile: {}", out.display());
    }))
}

fn tephra_scheduler(kubeconfig: &std::path::Path) -> Child {
    let mut args = vec![
        "scheduler".to_string(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--listen-address".into(),
        "127.0.0.1:0".into(),
    ];
    if let Ok(extra) = std::env::var("TEPHRA_REAL_ARGS") {
        args.extend(extra.split_whitespace().map(String::from));
    }
    Command::new(env!("CARGO_BIN_EXE_tephra"))
        .args(&args)
        .env(
            "RUST_LOG",
            std::env::var("TEPHRA_REAL_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("tephra scheduler starts")
}

/// Where `.ci/real-components --with-volcano` put vc-scheduler, if it could.
fn volcano_dir() -> Option<PathBuf> {
    let cache = tephra_envtest::components::cache_dir();
    let versions = std::fs::read_to_string(cache.join("versions")).ok()?;
    let v = versions
        .lines()
        .find_map(|l| l.strip_prefix("volcano="))?
        .trim()
        .to_string();
    let dir = cache.join(format!("volcano-{v}"));
    dir.join(".complete").is_file().then_some(dir)
}

/// Volcano's default scheduler configuration, as its Helm chart installs it.
const VOLCANO_CONF: &str = r#"actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"#;

/// vc-scheduler with Volcano's default configuration.
fn volcano_scheduler(dir: &std::path::Path, kubeconfig: &std::path::Path) -> Child {
    let conf = std::env::temp_dir().join("tephra-bench-volcano-scheduler.conf");
    std::fs::write(&conf, VOLCANO_CONF).unwrap();
    volcano_process(
        dir,
        "vc-scheduler",
        kubeconfig,
        &[
            format!("--scheduler-conf={}", conf.display()),
            "--scheduler-name=volcano".into(),
        ],
    )
}

/// One of Volcano's binaries on the bench's API server, without leader election, its
/// client limits raised as kube-scheduler's are, listening on loopback only, with `args`
/// besides; its log goes to `<binary>.log` in the temporary directory.
fn volcano_process(
    dir: &std::path::Path,
    binary: &str,
    kubeconfig: &std::path::Path,
    args: &[String],
) -> Child {
    let log = std::fs::File::create(std::env::temp_dir().join(format!("{binary}.log"))).unwrap();
    Command::new(dir.join(binary))
        .args([
            format!("--kubeconfig={}", kubeconfig.display()),
            "--leader-elect=false".into(),
            "--listen-address=127.0.0.1:0".into(),
            "--healthz-address=127.0.0.1:0".into(),
            "--kube-api-qps=5000".into(),
            "--kube-api-burst=5000".into(),
        ])
        .args(args)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("{binary} does not start: {e}"))
}

/// Lists and watches every pod as a streaming list (`sendInitialEvents`), in JSON or in
/// protobuf, reading the bytes and decoding none; counts them in `read`.
async fn watch_raw(client: kube::Client, protobuf: bool, read: Arc<AtomicUsize>) {
    use futures::AsyncReadExt;
    let accept = if protobuf {
        "application/vnd.kubernetes.protobuf"
    } else {
        "application/json"
    };
    let request = http::Request::get(
        "/api/v1/pods?watch=true&sendInitialEvents=true&allowWatchBookmarks=true\
         &resourceVersionMatch=NotOlderThan",
    )
    .header(http::header::ACCEPT, accept)
    .body(Vec::new())
    .unwrap();
    let mut body = match client.request_stream(request).await {
        Ok(b) => Box::pin(b),
        Err(e) => {
            eprintln!("raw watch ({accept}) refused: {e}");
            return;
        }
    };
    let mut buf = vec![0u8; 1 << 16];
    while let Ok(n) = body.read(&mut buf).await {
        if n == 0 {
            break;
        }
        read.fetch_add(n, Ordering::Relaxed);
    }
}

fn main() {
    let nodes = env("TEPHRA_REAL_NODES", 500);
    let pods = env("TEPHRA_REAL_PODS", 5000);
    let repeat = env("TEPHRA_REAL_REPEAT", 1).max(1);
    let runs: Vec<&'static str> = std::env::var("TEPHRA_REAL_RUNS")
        .unwrap_or_else(|_| {
            "bind-limit,bind-limit-watching,tephra,tephra-kube-gangs,kube-scheduler,kube-gangs,volcano".into()
        })
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s {
            "bind-limit" => "bind-limit",
            "bind-limit-watching" => "bind-limit-watching",
            "bind-limit-watching-raw" => "bind-limit-watching-raw",
            "bind-limit-watching-shared" => "bind-limit-watching-shared",
            "bind-limit-watching-protobuf" => "bind-limit-watching-protobuf",
            "tephra" => "tephra",
            "kube-scheduler" => "kube-scheduler",
            "kube-gangs" => "kube-gangs",
            "tephra-kube-gangs" => "tephra-kube-gangs",
            "volcano" => "volcano",
            other => panic!("unknown contender {other} in TEPHRA_REAL_RUNS"),
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let started = Instant::now();
        let Some(bench) = Bench::start(nodes, pods).await else {
            return;
        };
        pin();
        eprintln!(
            "kube-apiserver {} with {nodes} fake nodes up in {:.1?}; load {}",
            bench.cluster.env().binaries().version,
            started.elapsed(),
            load()
        );
        let mut results: BTreeMap<&str, Vec<Outcome>> = BTreeMap::new();
        for round in 0..repeat {
            for name in &runs {
                if let Some(r) = bench.run(name, round).await {
                    results.entry(name).or_default().push(r);
                }
            }
        }
        let best = |name: &str| {
            results
                .get(name)
                .and_then(|rs| rs.iter().map(Outcome::rate).reduce(f64::max))
        };
        // Each round against its own round's bind limit (the limit moves between rounds
        // on a shared machine as much as contenders differ), then the medians over rounds.
        if let Some(limits) = results.get("bind-limit") {
            for (name, rs) in results.iter().filter(|(n, _)| **n != "bind-limit") {
                let (mut from_start, mut binding) = (Vec::new(), Vec::new());
                for (round, (r, limit)) in rs.iter().zip(limits).enumerate() {
                    let (a, b) = (r.rate() / limit.rate(), r.bind_rate() / limit.bind_rate());
                    println!(
                        "ratio: round {} {name}: {:.0} pods/s from start = {:.0}% of the bind limit's {:.0}; {:.0} pods/s from first to last bind = {:.0}% of its {:.0}",
                        round + 1,
                        r.rate(),
                        100.0 * a,
                        limit.rate(),
                        r.bind_rate(),
                        100.0 * b,
                        limit.bind_rate()
                    );
                    from_start.push(a);
                    binding.push(b);
                }
                println!(
                    "ratio: {name}, median of {} rounds: {:.0}% of the bind limit from start, {:.0}% from first to last bind",
                    from_start.len(),
                    100.0 * median(from_start),
                    100.0 * median(binding)
                );
            }
        }
        if let Some(tephra) = best("tephra") {
            for (name, rs) in results.iter().filter(|(n, _)| **n != "tephra") {
                for r in rs {
                    println!(
                        "ratio: tephra (best {tephra:.0} pods/s) / {name} ({:.0} pods/s) = {:.2}",
                        r.rate(),
                        tephra / r.rate()
                    );
                }
            }
        }
    });
}
