//! Simulated kubelets for a real API server: Node objects with a Ready status and a Lease each
//! (no real kubelet runs), and the pods bound to them run as the devcluster's kubelets run
//! theirs, but through the API as any client: admitted with the same kubelet admission
//! (`tephra_devcluster::kubelet::admission`: requests against allocatable, node affinity, host
//! ports, NoExecute taints) or failed with the kubelet's reason; Running after the start delay;
//! Succeeded or Failed after their `tephra.io/sim-duration` (exit code from
//! `tephra.io/sim-exit-code`); removed (a delete with grace 0 and the pod's uid as
//! precondition) once being deleted, as a kubelet confirms a deletion.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use tephra_api::well_known::{SIM_DURATION, SIM_EXIT_CODE};
use tephra_devcluster::kubelet::admission::{self, HostPort, NodeFacts};
use tephra_devcluster::time;
use tokio::task::JoinHandle;

pub use tephra_devcluster::kubelet::NodeSpec;

use crate::Error;

/// How the simulated kubelets behave.
#[derive(Clone, Debug)]
pub struct KubeletOptions {
    /// From admission to Running.
    pub start_delay: Duration,
    /// How often each node's Lease is renewed.
    pub heartbeat: Duration,
}

impl Default for KubeletOptions {
    fn default() -> Self {
        Self {
            start_delay: Duration::from_millis(100),
            heartbeat: Duration::from_secs(5),
        }
    }
}

/// The kubelets of some nodes of one cluster. Dropping it stops them (the nodes stay).
pub struct Kubelets {
    client: kube::Client,
    state: Arc<Mutex<State>>,
    tasks: Vec<JoinHandle<()>>,
}

#[derive(Default)]
struct State {
    nodes: HashMap<String, NodeFacts>,
    not_ready: HashSet<String>,
    /// Admitted, unfinished pods by uid.
    running: HashMap<String, Admitted>,
    /// Pods whose admission was decided.
    seen: HashSet<String>,
    /// Pods whose removal was started.
    removing: HashSet<String>,
}

/// An admitted pod: its node, requests and host ports.
struct Admitted {
    node: String,
    requests: HashMap<String, i128>,
    ports: Vec<HostPort>,
}

impl State {
    fn used(&self, node: &str) -> (HashMap<String, i128>, Vec<HostPort>) {
        let mut used: HashMap<String, i128> = HashMap::new();
        let mut ports = Vec::new();
        for a in self.running.values().filter(|a| a.node == node) {
            for (k, q) in &a.requests {
                *used.entry(k.clone()).or_default() += q;
            }
            ports.extend(a.ports.iter().cloned());
        }
        (used, ports)
    }
}

fn lock(s: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

fn now() -> String {
    time::now_rfc3339()
}

fn ready_condition(ready: bool) -> Value {
    let t = now();
    json!({"type": "Ready", "status": if ready { "True" } else { "False" },
           "reason": if ready { "KubeletReady" } else { "KubeletNotReady" },
           "message": if ready { "kubelet is posting ready status" } else { "simulated outage" },
           "lastHeartbeatTime": t, "lastTransitionTime": t})
}

fn client_err(what: &str) -> impl FnOnce(kube::Error) -> Error + '_ {
    move |e| Error::Client(format!("{what}: {e}"))
}

fn facts_of(spec: &NodeSpec) -> NodeFacts {
    NodeFacts {
        labels: labels_of(spec),
        taints: spec.taints.clone(),
        allocatable: spec
            .capacity
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), tephra_devcluster::quantity::parse_milli(v)?)))
            .collect(),
    }
}

fn labels_of(spec: &NodeSpec) -> BTreeMap<String, String> {
    let mut labels = spec.labels.clone();
    for (k, v) in [
        ("kubernetes.io/hostname", spec.name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
    ] {
        labels.entry(k.into()).or_insert_with(|| v.into());
    }
    labels
}

impl Kubelets {
    /// Registers `nodes` (Node with status, and a Lease in `kube-node-lease`), waits until
    /// they are schedulable (the controller manager must run) and starts their kubelets.
    pub async fn start(
        client: kube::Client,
        nodes: &[NodeSpec],
        options: KubeletOptions,
    ) -> Result<Self, Error> {
        let state = Arc::new(Mutex::new(State::default()));
        for spec in nodes {
            register(&client, spec).await?;
            lock(&state).nodes.insert(spec.name.clone(), facts_of(spec));
        }
        for spec in nodes {
            until_schedulable(&client, &spec.name).await?;
        }
        let mut tasks = Vec::new();
        let k = Runner {
            client: client.clone(),
            state: state.clone(),
            options: options.clone(),
        };
        let pods = k.clone();
        tasks.push(tokio::spawn(async move { pods.watch_pods().await }));
        let nodes_task = k.clone();
        tasks.push(tokio::spawn(async move { nodes_task.watch_nodes().await }));
        tasks.push(tokio::spawn(async move { k.heartbeats().await }));
        Ok(Self {
            client,
            state,
            tasks,
        })
    }

    /// Registers a node from its whole manifest (status included: capacity, allocatable,
    /// conditions) with its Lease, and runs its pods from then on.
    pub async fn register(&self, manifest: Value) -> Result<(), Error> {
        let node: Node =
            serde_json::from_value(manifest.clone()).map_err(|e| Error::Client(e.to_string()))?;
        let name = node.metadata.name.clone().unwrap_or_default();
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes
            .create(&PostParams::default(), &node)
            .await
            .map_err(client_err("node"))?;
        if let Some(status) = manifest.get("status") {
            nodes
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": status})),
                )
                .await
                .map_err(client_err("node status"))?;
        }
        lease(&self.client, &name).await?;
        until_schedulable(&self.client, &name).await?;
        let allocatable = manifest
            .pointer("/status/allocatable")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| {
                        let q = tephra_devcluster::quantity::parse_milli(v.as_str()?)?;
                        Some((k.clone(), q))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let facts = NodeFacts {
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: manifest
                .pointer("/spec/taints")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            allocatable,
        };
        lock(&self.state).nodes.insert(name, facts);
        Ok(())
    }

    /// Deletes a node and stops running its pods.
    pub async fn remove(&self, name: &str) -> Result<(), Error> {
        lock(&self.state).nodes.remove(name);
        let nodes: Api<Node> = Api::all(self.client.clone());
        match nodes.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(client_err("node delete")(e)),
        }
    }

    /// Marks a node NotReady (Ready=False, no more Lease renewals) or Ready again.
    pub async fn set_ready(&self, node: &str, ready: bool) -> Result<(), Error> {
        {
            let mut st = lock(&self.state);
            if ready {
                st.not_ready.remove(node);
            } else {
                st.not_ready.insert(node.to_string());
            }
        }
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes
            .patch_status(
                node,
                &PatchParams::default(),
                &Patch::Strategic(json!({"status": {"conditions": [ready_condition(ready)]}})),
            )
            .await
            .map_err(client_err("node status"))?;
        Ok(())
    }
}

impl Drop for Kubelets {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn register(client: &kube::Client, spec: &NodeSpec) -> Result<(), Error> {
    let mut node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels_of(spec), "annotations": spec.annotations},
        "spec": {},
        "status": {
            "capacity": spec.capacity, "allocatable": spec.capacity,
            "conditions": [ready_condition(true)],
            "addresses": [{"type": "Hostname", "address": spec.name}],
            "nodeInfo": {"kubeletVersion": "v1.34.0-tephra-envtest", "kubeProxyVersion": "",
                "osImage": "simulated", "kernelVersion": "", "containerRuntimeVersion": "sim://1",
                "operatingSystem": "linux", "architecture": "amd64", "machineID": "",
                "systemUUID": "", "bootID": ""},
        },
    });
    if !spec.taints.is_empty() {
        node["spec"]["taints"] = json!(spec.taints);
    }
    let node: Node = serde_json::from_value(node).map_err(|e| Error::Client(e.to_string()))?;
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .create(&PostParams::default(), &node)
        .await
        .map_err(client_err("node"))?;
    // Status on create is kept, but write it again as a kubelet does, in case a version drops it.
    nodes
        .patch_status(
            &spec.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"capacity": spec.capacity,
                "allocatable": spec.capacity}})),
        )
        .await
        .map_err(client_err("node status"))?;
    lease(client, &spec.name).await
}

/// The taint the API server's TaintNodesByCondition admission puts on every new node, which
/// the controller manager's node lifecycle controller takes off once the node is Ready.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// Waits until the controller manager has taken the not-ready taint off `node`, as it does
/// for a new Ready node: until then kube-scheduler refuses the node, so a test must not start
/// before (without a controller manager the taint stays, as on a real cluster).
async fn until_schedulable(client: &kube::Client, node: &str) -> Result<(), Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let n = nodes.get(node).await.map_err(client_err("node"))?;
        let tainted = n
            .spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == NOT_READY_TAINT);
        if !tainted {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(Error::Timeout {
                what: format!(
                    "the controller manager to take {NOT_READY_TAINT} off node {node} \
                     (is it running?)"
                ),
                log: String::new(),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The node's Lease in `kube-node-lease`, as a kubelet makes it.
async fn lease(client: &kube::Client, node: &str) -> Result<(), Error> {
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": micro_now()}
    }))
    .map_err(|e| Error::Client(e.to_string()))?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    match leases.create(&PostParams::default(), &lease).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(client_err("lease")(e)),
    }
}

fn micro_now() -> String {
    time::now_rfc3339_micro()
}

#[derive(Clone)]
struct Runner {
    client: kube::Client,
    state: Arc<Mutex<State>>,
    options: KubeletOptions,
}

enum Action {
    Start,
    Finish(i64),
    Remove,
    Reject(String, String),
}

impl Runner {
    async fn heartbeats(self) {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), "kube-node-lease");
        let mut tick = tokio::time::interval(self.options.heartbeat);
        loop {
            tick.tick().await;
            let names: Vec<String> = {
                let st = lock(&self.state);
                st.nodes
                    .keys()
                    .filter(|n| !st.not_ready.contains(*n))
                    .cloned()
                    .collect()
            };
            for n in names {
                let patch = json!({"spec": {"renewTime": micro_now()}});
                if let Err(e) = leases
                    .patch(&n, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                {
                    tracing::debug!(node = %n, error = %e, "lease renewal failed");
                }
            }
        }
    }

    async fn watch_nodes(self) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let stream = watcher::watcher(nodes, watcher::Config::default()).default_backoff();
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            let Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) = ev else {
                continue;
            };
            let name = n.metadata.name.clone().unwrap_or_default();
            let mut st = lock(&self.state);
            if let Some(f) = st.nodes.get_mut(&name) {
                f.labels = n.metadata.labels.clone().unwrap_or_default();
                f.taints = n
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .map(|t| {
                        t.iter()
                            .filter_map(|t| serde_json::to_value(t).ok())
                            .collect()
                    })
                    .unwrap_or_default();
            }
        }
    }

    async fn watch_pods(self) {
        let pods: Api<Pod> = Api::all(self.client.clone());
        let stream = watcher::watcher(pods, watcher::Config::default()).default_backoff();
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => self.on_pod(&p),
                Ok(watcher::Event::Delete(p)) => {
                    let uid = p.metadata.uid.clone().unwrap_or_default();
                    let mut st = lock(&self.state);
                    st.running.remove(&uid);
                    st.seen.remove(&uid);
                    st.removing.remove(&uid);
                }
                _ => {}
            }
        }
    }

    fn on_pod(&self, pod: &Pod) {
        let Ok(v) = serde_json::to_value(pod) else {
            return;
        };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        let mut st = lock(&self.state);
        if node.is_empty() || !st.nodes.contains_key(&node) {
            return;
        }
        if matches!(phase.as_str(), "Succeeded" | "Failed") {
            st.running.remove(&uid);
        }
        if pod.metadata.deletion_timestamp.is_some() {
            if st.removing.insert(uid.clone()) {
                st.running.remove(&uid);
                drop(st);
                self.later(Duration::ZERO, pod, Action::Remove);
            }
            return;
        }
        if phase != "Pending" || !st.seen.insert(uid.clone()) {
            return;
        }
        let requests = admission::pod_requests(&v);
        let (used, ports) = st.used(&node);
        let verdict = match st.nodes.get(&node) {
            Some(f) => admission::admit(&v, &requests, &node, f, &used, &ports),
            None => Ok(()),
        };
        match verdict {
            Err(r) => {
                drop(st);
                tracing::info!(pod = ?pod.metadata.name, node = %node, reason = %r.reason,
                    "simulated kubelet refused pod");
                self.later(
                    Duration::ZERO,
                    pod,
                    Action::Reject(r.reason, format!("Pod was rejected: {}", r.message)),
                );
            }
            Ok(()) => {
                let held = admission::host_ports(&v);
                st.running.insert(
                    uid,
                    Admitted {
                        node,
                        requests,
                        ports: held,
                    },
                );
                drop(st);
                self.later(self.options.start_delay, pod, Action::Start);
            }
        }
    }

    fn later(&self, delay: Duration, pod: &Pod, action: Action) {
        let me = self.clone();
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        let containers: Vec<(String, String)> = pod
            .spec
            .as_ref()
            .map(|s| {
                s.containers
                    .iter()
                    .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default();
        tokio::spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let pods: Api<Pod> = Api::namespaced(me.client.clone(), &ns);
            let result = match action {
                Action::Remove => pods
                    .delete(
                        &name,
                        &DeleteParams {
                            grace_period_seconds: Some(0),
                            preconditions: Some(Preconditions {
                                uid: Some(uid.clone()),
                                resource_version: None,
                            }),
                            ..DeleteParams::default()
                        },
                    )
                    .await
                    .map(|_| ()),
                Action::Reject(reason, message) => pods
                    .patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Strategic(json!({"status": {"phase": "Failed",
                            "reason": reason, "message": message, "startTime": now()}})),
                    )
                    .await
                    .map(|_| ()),
                Action::Start => {
                    let r = me.start(&pods, &name, &uid, &containers).await;
                    if r.is_ok()
                        && let Some(d) = annotations
                            .get(SIM_DURATION)
                            .and_then(|d| time::parse_duration(d))
                    {
                        let code = annotations
                            .get(SIM_EXIT_CODE)
                            .and_then(|c| c.trim().parse().ok())
                            .unwrap_or(0);
                        let pod_now = pods.get(&name).await;
                        if let Ok(p) = pod_now {
                            me.later(d, &p, Action::Finish(code));
                        }
                    }
                    r
                }
                Action::Finish(code) => me.finish(&pods, &name, &uid, &containers, code).await,
            };
            match result {
                Ok(()) => {}
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(e) => tracing::warn!(pod = %name, error = %e, "simulated kubelet write failed"),
            }
        });
    }

    async fn start(
        &self,
        pods: &Api<Pod>,
        name: &str,
        uid: &str,
        containers: &[(String, String)],
    ) -> Result<(), kube::Error> {
        let cur = pods.get(name).await?;
        let phase = cur.status.as_ref().and_then(|s| s.phase.as_deref());
        if cur.metadata.uid.as_deref() != Some(uid)
            || phase != Some("Pending")
            || cur.metadata.deletion_timestamp.is_some()
        {
            return Ok(());
        }
        let t = now();
        let conditions: Vec<Value> = [
            "PodScheduled",
            "Initialized",
            "PodReadyToStartContainers",
            "ContainersReady",
            "Ready",
        ]
        .iter()
        .map(|c| json!({"type": c, "status": "True", "lastProbeTime": null, "lastTransitionTime": t}))
        .collect();
        let statuses: Vec<Value> = containers
            .iter()
            .map(|(n, image)| {
                json!({"name": n, "image": image, "imageID": "", "containerID":
                    format!("sim://{uid}/{n}"), "ready": true, "started": true,
                    "restartCount": 0, "state": {"running": {"startedAt": t}}})
            })
            .collect();
        let ip = pod_ip(uid);
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"metadata": {"uid": uid}, "status": {"phase": "Running",
                "conditions": conditions, "containerStatuses": statuses, "startTime": t,
                "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "192.168.0.1",
                "hostIPs": [{"ip": "192.168.0.1"}]}}),
            ),
        )
        .await
        .map(|_| ())
    }

    async fn finish(
        &self,
        pods: &Api<Pod>,
        name: &str,
        uid: &str,
        containers: &[(String, String)],
        code: i64,
    ) -> Result<(), kube::Error> {
        let cur = pods.get(name).await?;
        let phase = cur.status.as_ref().and_then(|s| s.phase.as_deref());
        if cur.metadata.uid.as_deref() != Some(uid) || phase != Some("Running") {
            return Ok(());
        }
        let t = now();
        let ok = code == 0;
        let reason = if ok { "PodCompleted" } else { "PodFailed" };
        let started = cur
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|s| s.0.to_string())
            .unwrap_or_else(|| t.clone());
        let statuses: Vec<Value> = containers
            .iter()
            .map(|(n, image)| {
                json!({"name": n, "image": image, "imageID": "", "ready": false, "started": false,
                    "restartCount": 0, "containerID": format!("sim://{uid}/{n}"),
                    "state": {"terminated": {"exitCode": code,
                    "reason": if ok { "Completed" } else { "Error" },
                    "startedAt": started, "finishedAt": t}}})
            })
            .collect();
        let conditions: Vec<Value> = ["Ready", "ContainersReady"]
            .iter()
            .map(|c| {
                json!({"type": c, "status": "False", "reason": reason,
                "lastProbeTime": null, "lastTransitionTime": t})
            })
            .collect();
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"uid": uid}, "status": {
                "phase": if ok { "Succeeded" } else { "Failed" },
                "conditions": conditions, "containerStatuses": statuses}})),
        )
        .await
        .map(|_| ())
    }
}

/// A pod IP derived from its uid, in 10.244.0.0/16.
fn pod_ip(uid: &str) -> String {
    let h = uid
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    format!("10.244.{}.{}", (h >> 8) % 256, h % 250 + 2)
}
