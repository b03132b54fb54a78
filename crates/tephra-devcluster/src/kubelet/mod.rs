//! Simulated kubelets: one task per API server plays the kubelet of every node it stores.
//!
//! A pod bound to a node is admitted as the real kubelet admits it (`admission.rs`: its
//! requests against what the node's allocatable leaves free, its node affinity, its host ports,
//! the node's NoExecute taints); otherwise it fails with the kubelet's reason (`OutOf<resource>`,
//! `NodeAffinity`, `NodePorts`, ...) and a Warning Event. An admitted pod starts after the
//! start delay (IP, conditions, container statuses), once its volumes can be mounted
//! (`mounts.rs`: until then it waits with a `FailedMount` Event), and finishes after its
//! `tephra.io/sim-duration` with the exit code in `tephra.io/sim-exit-code` (0: Succeeded,
//! otherwise Failed); without a duration it runs until deleted. A pod being deleted stops within
//! its grace period and is then removed. Nodes renew a Lease in `kube-node-lease`; faults make a
//! node NotReady or remove it (its pods fail with `NodeLost` and are removed, as the pod
//! garbage collector does). Durations are wall-clock time divided by a speed factor.
//!
//! This file runs the pods; `nodes.rs` registers the nodes, keeps their Leases and Ready
//! conditions and fails the pods of a lost node.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::api::{ApiServer, DeleteOpts, Scope, WriteOpts};
use crate::conditions::set_condition;
use crate::quantity;
use crate::resource::Builtin;
use crate::status::ApiError;
use crate::store::{Event, EventType, Obj, Subscriber};
use crate::time;

pub mod admission;
mod mounts;
mod nodes;
mod prepare;
mod vgpu;

pub use admission::pod_requests;
use admission::{HostPort, NodeFacts};

use tephra_api::well_known::{SIM_DURATION, SIM_EXIT_CODE};

/// How the simulated kubelets behave.
#[derive(Clone, Debug)]
pub struct KubeletOptions {
    /// From bind to Running.
    pub start_delay: Duration,
    /// How long a pod takes to stop once deleted (never more than its grace period).
    pub stop_delay: Duration,
    /// How often nodes renew their Lease.
    pub heartbeat: Duration,
    /// Simulated durations are divided by this (1.0: real time).
    pub speed: f64,
}

impl Default for KubeletOptions {
    fn default() -> Self {
        Self {
            start_delay: Duration::from_secs(1),
            stop_delay: Duration::from_secs(1),
            heartbeat: Duration::from_secs(10),
            speed: 1.0,
        }
    }
}

/// A node to register.
#[derive(Clone, Debug, Default)]
pub struct NodeSpec {
    /// Name.
    pub name: String,
    /// Labels (hostname and OS labels are added).
    pub labels: BTreeMap<String, String>,
    /// Taints, as Kubernetes objects (`{key, value, effect}`).
    pub taints: Vec<Value>,
    /// Capacity (also the allocatable), as quantities.
    pub capacity: BTreeMap<String, String>,
    /// Annotations (a device plugin's registration).
    pub annotations: BTreeMap<String, String>,
}

#[derive(Default)]
struct NodeState {
    facts: NodeFacts,
    index: usize,
    next_ip: u32,
}

#[derive(Default)]
struct State {
    nodes: HashMap<String, NodeState>,
    /// Admitted, not finished pods: uid → (node, requests).
    running: HashMap<String, (String, HashMap<String, i128>)>,
    /// The host ports of admitted, not finished pods: uid → (node, ports).
    ports: HashMap<String, (String, Vec<HostPort>)>,
    /// The shared GPUs of admitted, not finished pods: uid → (node, GPUs).
    gpus: HashMap<String, (String, Vec<vgpu::Held>)>,
    /// The sum of `running`'s requests per node name, kept with it by `admit` and `release`
    /// (admission reads it for every pod, so it must not walk every running pod).
    used: HashMap<String, HashMap<String, i128>>,
    /// Pods whose admission was decided.
    seen: HashSet<String>,
    /// Pods whose stop is scheduled.
    stopping: HashSet<String>,
    /// Pods waiting for their volumes or devices: the last message recorded for each.
    mounting: HashMap<String, String>,
    not_ready: HashSet<String>,
    node_count: usize,
}

impl State {
    fn admit(&mut self, uid: String, node: String, requests: HashMap<String, i128>) {
        let used = self.used.entry(node.clone()).or_default();
        for (k, q) in &requests {
            *used.entry(k.clone()).or_default() += q;
        }
        if let Some((old_node, old)) = self.running.insert(uid, (node, requests)) {
            self.take_off(&old_node, &old);
        }
    }

    fn release(&mut self, uid: &str) {
        if let Some((node, requests)) = self.running.remove(uid) {
            self.take_off(&node, &requests);
        }
        self.ports.remove(uid);
        self.gpus.remove(uid);
    }

    /// The shared GPUs the admitted pods of `node` hold.
    fn gpus_on(&self, node: &str) -> Vec<vgpu::Held> {
        self.gpus
            .values()
            .filter(|(n, _)| n == node)
            .flat_map(|(_, g)| g.iter().cloned())
            .collect()
    }

    /// The host ports the admitted pods of `node` hold.
    fn ports_on(&self, node: &str) -> Vec<HostPort> {
        self.ports
            .values()
            .filter(|(n, _)| n == node)
            .flat_map(|(_, p)| p.iter().cloned())
            .collect()
    }

    fn take_off(&mut self, node: &str, requests: &HashMap<String, i128>) {
        if let Some(used) = self.used.get_mut(node) {
            for (k, q) in requests {
                if let Some(u) = used.get_mut(k) {
                    *u -= q;
                }
            }
            if used.values().all(|u| *u == 0) {
                self.used.remove(node);
            }
        }
    }
}

/// The kubelets of one API server.
pub struct Kubelet {
    api: Arc<ApiServer>,
    opts: KubeletOptions,
    state: Mutex<State>,
    tasks: Mutex<Tasks>,
}

/// The kubelet's running tasks, so that shutdown can stop them. Finished ones are dropped
/// once the list has doubled since the last sweep: a sweep per push scanned every pending
/// start, which made admitting a backlog quadratic.
#[derive(Default)]
struct Tasks {
    handles: Vec<JoinHandle<()>>,
    sweep_at: usize,
}

impl Tasks {
    fn push(&mut self, t: JoinHandle<()>) {
        if self.handles.len() >= self.sweep_at {
            self.handles.retain(|t| !t.is_finished());
            self.sweep_at = (self.handles.len() * 2).max(64);
        }
        self.handles.push(t);
    }

    fn abort_all(&mut self) {
        for t in self.handles.drain(..) {
            t.abort();
        }
    }
}

fn scaled(d: Duration, speed: f64) -> Duration {
    if speed > 0.0 && speed.is_finite() {
        d.div_f64(speed)
    } else {
        d
    }
}

/// The string at a JSON pointer of plain keys (no `~` escapes), or "". Unlike
/// `Value::pointer` it allocates nothing, and the kubelet reads several per pod event.
fn str_at<'a>(v: &'a Value, p: &str) -> &'a str {
    p.split('/')
        .skip(1)
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

impl Kubelet {
    /// Starts the kubelets of `api`'s nodes.
    pub fn start(api: Arc<ApiServer>, opts: KubeletOptions) -> Arc<Self> {
        let k = Arc::new(Self {
            api,
            opts,
            state: Mutex::new(State::default()),
            tasks: Mutex::new(Tasks::default()),
        });
        let (pods_tx, pods_rx) = mpsc::unbounded_channel();
        let (nodes_tx, nodes_rx) = mpsc::unbounded_channel();
        let nodes_start = k
            .api
            .store
            .watch("/nodes", None, Subscriber::Unbounded(nodes_tx));
        let pods_start = k
            .api
            .store
            .watch("/pods", None, Subscriber::Unbounded(pods_tx));
        let initial_nodes = nodes_start.map(|s| s.initial).unwrap_or_default();
        let initial_pods = pods_start.map(|s| s.initial).unwrap_or_default();
        let me = k.clone();
        let main = tokio::spawn(async move {
            me.run(initial_nodes, initial_pods, nodes_rx, pods_rx).await;
        });
        let me = k.clone();
        let heartbeat = tokio::spawn(async move { me.heartbeats().await });
        k.tasks_push(main);
        k.tasks_push(heartbeat);
        k
    }

    fn tasks_push(&self, t: JoinHandle<()>) {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner()).push(t);
    }

    /// Stops every kubelet task.
    pub fn shutdown(&self) {
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .abort_all();
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn run(
        self: Arc<Self>,
        nodes: Vec<Obj>,
        pods: Vec<Obj>,
        mut nodes_rx: mpsc::UnboundedReceiver<Arc<Event>>,
        mut pods_rx: mpsc::UnboundedReceiver<Arc<Event>>,
    ) {
        for n in &nodes {
            self.on_node(EventType::Added, n);
        }
        for p in &pods {
            self.on_pod(EventType::Added, p);
        }
        loop {
            tokio::select! {
                biased;
                ev = nodes_rx.recv() => match ev {
                    Some(ev) => self.on_node(ev.type_, &ev.object),
                    None => return,
                },
                ev = pods_rx.recv() => match ev {
                    Some(ev) => self.on_pod(ev.type_, &ev.object),
                    None => return,
                },
            }
        }
    }

    fn on_node(self: &Arc<Self>, type_: EventType, node: &Obj) {
        let name = str_at(&node.value, "/metadata/name").to_string();
        // A node whose kubelet is served elsewhere (a virtual kubelet) runs its own pods.
        if type_ != EventType::Deleted && crate::kubelet_proxy::endpoint(&node.value).is_some() {
            return;
        }
        let mut st = self.state();
        if type_ == EventType::Deleted {
            st.nodes.remove(&name);
            drop(st);
            self.node_lost(&name);
            return;
        }
        let alloc = node
            .value
            .pointer("/status/allocatable")
            .or_else(|| node.value.pointer("/status/capacity"))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| {
                        v.as_str()
                            .and_then(quantity::parse_milli)
                            .map(|q| (k.clone(), q))
                    })
                    .collect()
            })
            .unwrap_or_default();
        if !st.nodes.contains_key(&name) {
            // A Node made through the API: its kubelet runs it, so it is not tainted
            // not-ready for long.
            let me = self.clone();
            let new_node = name.clone();
            tokio::spawn(async move {
                let _ = me.lift_not_ready(&new_node);
            });
            let index = st.node_count;
            st.node_count += 1;
            st.nodes.insert(
                name.clone(),
                NodeState {
                    index,
                    next_ip: 2,
                    ..NodeState::default()
                },
            );
        }
        if let Some(n) = st.nodes.get_mut(&name) {
            n.facts = NodeFacts {
                labels: node
                    .value
                    .pointer("/metadata/labels")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                            .collect()
                    })
                    .unwrap_or_default(),
                taints: node
                    .value
                    .pointer("/spec/taints")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                allocatable: alloc,
            };
        }
    }

    fn on_pod(self: &Arc<Self>, type_: EventType, pod: &Obj) {
        let uid = pod.uid().to_string();
        let v = &pod.value;
        let mut st = self.state();
        if type_ == EventType::Deleted {
            st.release(&uid);
            st.seen.remove(&uid);
            st.stopping.remove(&uid);
            st.mounting.remove(&uid);
            return;
        }
        let node = str_at(v, "/spec/nodeName").to_string();
        if node.is_empty() || !st.nodes.contains_key(&node) {
            return;
        }
        let phase = str_at(v, "/status/phase");
        if matches!(phase, "Succeeded" | "Failed") {
            st.release(&uid);
        }
        let terminating = v.pointer("/metadata/deletionTimestamp").is_some();
        if terminating {
            if st.stopping.insert(uid.clone()) {
                let grace = v
                    .pointer("/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    .max(0) as u64;
                let delay = if st.running.contains_key(&uid) {
                    scaled(self.opts.stop_delay, self.opts.speed).min(Duration::from_secs(grace))
                } else {
                    Duration::ZERO
                };
                drop(st);
                self.later(delay, pod.key(), uid, Action::Remove);
            }
            return;
        }
        if !st.seen.insert(uid.clone()) || phase != "Pending" {
            return;
        }
        // Admission, as the kubelet's predicate handler decides it.
        let requests = pod_requests(v);
        let used = st.used.get(&node).cloned().unwrap_or_default();
        let ports = if v.pointer("/spec/containers").is_some() {
            st.ports_on(&node)
        } else {
            Vec::new()
        };
        let facts = st.nodes.get(&node).map(|n| &n.facts);
        let verdict = match facts {
            Some(f) => admission::admit(v, &requests, &node, f, &used, &ports),
            None => Ok(()),
        };
        // The device plugin's Allocate, for a pod that asks for shared GPUs.
        let verdict = verdict.and_then(|()| {
            let node_obj = crate::kubelet_proxy::node(&self.api, &node);
            vgpu::allocate(v, &node, node_obj.as_ref(), &st.gpus_on(&node))
        });
        // The plugin writes back how its Allocate went and lets the node's lock go.
        if vgpu::asks(v) {
            let ok = verdict.is_ok();
            self.later(
                Duration::ZERO,
                pod.key(),
                uid.clone(),
                Action::Allocated(ok, node.clone()),
            );
        }
        match verdict {
            Err(refusal) => {
                drop(st);
                tracing::info!(server = %self.api.name, pod = %pod.key().1, node = %node,
                    reason = %refusal.reason, "kubelet refused pod");
                crate::events::record(
                    &self.api,
                    v,
                    "Warning",
                    &refusal.reason,
                    &refusal.message,
                    "kubelet",
                    Some(&node),
                );
                self.later(
                    Duration::ZERO,
                    pod.key(),
                    uid,
                    Action::Reject(
                        refusal.reason,
                        format!("Pod was rejected: {}", refusal.message),
                    ),
                );
            }
            Ok(gpus) => {
                let ip = st.nodes.get_mut(&node).map(|n| {
                    n.next_ip += 1;
                    format!(
                        "10.{}.{}.{}",
                        64 + (n.index >> 8) % 64,
                        n.index & 0xff,
                        n.next_ip % 250 + 2
                    )
                });
                let held = admission::host_ports(v);
                if !held.is_empty() {
                    st.ports.insert(uid.clone(), (node.clone(), held));
                }
                if !gpus.is_empty() {
                    st.gpus.insert(uid.clone(), (node.clone(), gpus));
                }
                st.admit(uid.clone(), node, requests);
                drop(st);
                let delay = scaled(self.opts.start_delay, self.opts.speed);
                self.later(delay, pod.key(), uid, Action::Start(ip.unwrap_or_default()));
            }
        }
    }

    fn later(
        self: &Arc<Self>,
        delay: Duration,
        key: (String, String),
        uid: String,
        action: Action,
    ) {
        let me = self.clone();
        let task = tokio::spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if let Err(e) = me.act(&key, &uid, action)
                && e.code != 404
            {
                tracing::warn!(server = %me.api.name, pod = %key.1, error = %e, "kubelet write failed");
            }
        });
        self.tasks_push(task);
    }

    fn act(
        self: &Arc<Self>,
        key: &(String, String),
        uid: &str,
        action: Action,
    ) -> Result<(), ApiError> {
        let pods = self.api.builtin(Builtin::Pod);
        let same = |cur: &Value| str_at(cur, "/metadata/uid") == uid;
        let opts = WriteOpts::default();
        match action {
            Action::Allocated(ok, node) => {
                self.api
                    .update(&pods, key, Scope::Main, &opts, &mut |cur| {
                        let mut v = cur.clone();
                        if same(cur) {
                            let set = vgpu::written_back(cur, ok);
                            let a = &mut v["metadata"]["annotations"];
                            if !a.is_object() {
                                *a = json!({});
                            }
                            if let Some(a) = a.as_object_mut() {
                                a.extend(set);
                            }
                        }
                        Ok(v)
                    })?;
                let nodes = self.api.builtin(Builtin::Node);
                let at = (String::new(), node);
                let locked = |n: &Value| {
                    n.pointer("/metadata/annotations")
                        .and_then(|a| a.get(tephra_scheduler::model::vgpu::NODE_LOCK))
                        .is_some()
                };
                if self.api.get(&nodes, &at).is_some_and(|n| locked(&n.value)) {
                    self.api
                        .update(&nodes, &at, Scope::Main, &opts, &mut |cur| {
                            let mut v = cur.clone();
                            if let Some(a) = v
                                .pointer_mut("/metadata/annotations")
                                .and_then(Value::as_object_mut)
                            {
                                a.remove(tephra_scheduler::model::vgpu::NODE_LOCK);
                            }
                            Ok(v)
                        })?;
                }
            }
            Action::Remove => {
                self.api.delete(
                    &pods,
                    key,
                    &DeleteOpts {
                        grace: Some(0),
                        uid: Some(uid.to_string()),
                        ..DeleteOpts::default()
                    },
                )?;
            }
            Action::Reject(reason, message) => {
                self.api
                    .update(&pods, key, Scope::Status, &opts, &mut |cur| {
                        let mut v = cur.clone();
                        if same(cur) && str_at(cur, "/status/phase") == "Pending" {
                            v["status"]["phase"] = json!("Failed");
                            v["status"]["reason"] = json!(reason);
                            v["status"]["message"] = json!(message);
                            v["status"]["startTime"] = json!(time::now_rfc3339());
                        }
                        Ok(v)
                    })?;
            }
            Action::Start(ip) => {
                if self.waits_to_start(key, uid, &ip) {
                    return Ok(());
                }
                let mut started = false;
                let w = self.api.update(&pods, key, Scope::Status, &opts, &mut |cur| {
                    let mut v = cur.clone();
                    started = false;
                    if !same(cur) || str_at(cur, "/status/phase") != "Pending" || cur.pointer("/metadata/deletionTimestamp").is_some() {
                        return Ok(v);
                    }
                    started = true;
                    let now = time::now_rfc3339();
                    v["status"]["phase"] = json!("Running");
                    v["status"]["podIP"] = json!(ip);
                    v["status"]["podIPs"] = json!([{"ip": ip}]);
                    v["status"]["hostIP"] = json!(format!("192.168.0.{}", 1));
                    v["status"]["startTime"] = json!(now);
                    for t in ["PodScheduled", "Initialized", "PodReadyToStartContainers", "ContainersReady", "Ready"] {
                        set_condition(&mut v, json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": now}));
                    }
                    let statuses: Vec<Value> = cur
                        .pointer("/spec/containers")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|c| {
                            let name = str_at(c, "/name");
                            json!({"name": name, "image": str_at(c, "/image"), "imageID": "",
                                   "containerID": format!("sim://{uid}/{name}"), "ready": true, "started": true,
                                   "restartCount": 0, "state": {"running": {"startedAt": now}}})
                        })
                        .collect();
                    v["status"]["containerStatuses"] = json!(statuses);
                    Ok(v)
                })?;
                if started {
                    let annotations = w.obj.value.pointer("/metadata/annotations");
                    let duration = annotations
                        .and_then(|a| a.get(SIM_DURATION))
                        .and_then(Value::as_str)
                        .and_then(time::parse_duration);
                    if let Some(d) = duration {
                        let code = annotations
                            .and_then(|a| a.get(SIM_EXIT_CODE))
                            .and_then(|c| {
                                c.as_str()
                                    .and_then(|s| s.trim().parse().ok())
                                    .or_else(|| c.as_i64())
                            })
                            .unwrap_or(0);
                        self.later(
                            scaled(d, self.opts.speed),
                            key.clone(),
                            uid.to_string(),
                            Action::Finish(code),
                        );
                    }
                }
            }
            Action::Finish(code) => {
                self.api.update(&pods, key, Scope::Status, &opts, &mut |cur| {
                    let mut v = cur.clone();
                    if !same(cur) || str_at(cur, "/status/phase") != "Running" {
                        return Ok(v);
                    }
                    let now = time::now_rfc3339();
                    let ok = code == 0;
                    v["status"]["phase"] = json!(if ok { "Succeeded" } else { "Failed" });
                    let reason = if ok { "PodCompleted" } else { "PodFailed" };
                    for t in ["Ready", "ContainersReady"] {
                        set_condition(&mut v, json!({"type": t, "status": "False", "reason": reason, "lastProbeTime": null, "lastTransitionTime": now}));
                    }
                    if let Some(list) = v.pointer_mut("/status/containerStatuses").and_then(Value::as_array_mut) {
                        for cs in list {
                            let started = cs.pointer("/state/running/startedAt").cloned().unwrap_or(json!(now));
                            cs["ready"] = json!(false);
                            cs["started"] = json!(false);
                            cs["state"] = json!({"terminated": {"exitCode": code, "reason": if ok { "Completed" } else { "Error" },
                                                               "startedAt": started, "finishedAt": now,
                                                               "containerID": cs.get("containerID").cloned().unwrap_or(Value::Null)}});
                        }
                    }
                    Ok(v)
                })?;
            }
        }
        Ok(())
    }
}

impl Kubelet {
    /// Whether the pod must wait for its volumes or devices before it starts: then a
    /// `FailedMount` or `FailedPrepareDynamicResources` Event says why (once per distinct
    /// reason) and the start is tried again shortly.
    fn waits_to_start(self: &Arc<Self>, key: &(String, String), uid: &str, ip: &str) -> bool {
        let Some(pod) = self.api.store.get("/pods", key) else {
            return false;
        };
        let checks = pod.value.pointer("/spec/volumes").is_some()
            || pod.value.pointer("/spec/resourceClaims").is_some();
        if pod.uid() != uid || !checks {
            return false;
        }
        let node = str_at(&pod.value, "/spec/nodeName").to_string();
        let labels = self
            .state()
            .nodes
            .get(&node)
            .map(|n| n.facts.labels.clone())
            .unwrap_or_default();
        let waiting = match mounts::not_mountable(&self.api, &pod.value, &node, &labels) {
            Some(why) => Some(("FailedMount", why)),
            None => prepare::not_prepared(&self.api, &pod.value)
                .map(|why| ("FailedPrepareDynamicResources", why)),
        };
        let Some((reason, why)) = waiting else {
            self.state().mounting.remove(uid);
            return false;
        };
        let fresh = self.state().mounting.insert(uid.to_string(), why.clone()) != Some(why.clone());
        if fresh {
            crate::events::record(
                &self.api,
                &pod.value,
                "Warning",
                reason,
                &why,
                "kubelet",
                Some(&node),
            );
        }
        let retry = scaled(self.opts.start_delay, self.opts.speed).max(Duration::from_millis(200));
        self.later(
            retry,
            key.clone(),
            uid.to_string(),
            Action::Start(ip.to_string()),
        );
        true
    }
}

enum Action {
    /// The vGPU device plugin's Allocate ended (whether it succeeded, on which node).
    Allocated(bool, String),
    Start(String),
    Reject(String, String),
    Finish(i64),
    Remove,
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .abort_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn finished_tasks_are_swept_so_the_list_stays_bounded() {
        let mut tasks = Tasks::default();
        let pending = tokio::spawn(std::future::pending::<()>());
        tasks.push(pending);
        for _ in 0..1000 {
            let t = tokio::spawn(async {});
            while !t.is_finished() {
                tokio::task::yield_now().await;
            }
            tasks.push(t);
        }
        assert!(tasks.handles.len() <= 64, "{} kept", tasks.handles.len());
        assert!(
            !tasks.handles[0].is_finished(),
            "a running task is kept, first"
        );
        tasks.abort_all();
        assert!(tasks.handles.is_empty());
    }
}
