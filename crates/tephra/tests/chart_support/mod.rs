//! What the chart tests share: finding Helm, rendering, installing the rendered objects on a
//! devcluster, running the rendered Deployments as processes, and a workload that makes every
//! controller act.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use serde_json::{Value, json};
use tephra_devcluster::kubelet::{KubeletOptions, NodeSpec};
use tephra_devcluster::{DevCluster, Handle, Options};

mod helm;
pub mod real;
pub mod roles;
pub mod scenarios;
pub use helm::*;

/// Fleet values: one member per `(name, apiEndpoint)`, with a placeholder token.
pub fn fleet_values(members: &[(&str, &str)]) -> Value {
    json!({
        "scheduler": {"members": "clusters"},
        "fleet": {"members": members.iter().map(|(n, e)| json!({
            "name": n, "apiEndpoint": e, "token": "placeholder", "region": "us-east-1",
        })).collect::<Vec<_>>()},
    })
}

/// A node with `cpu` cores and 64Gi.
pub fn node(name: &str, cpu: &str) -> NodeSpec {
    NodeSpec {
        name: name.into(),
        capacity: BTreeMap::from([
            ("cpu".to_string(), cpu.to_string()),
            ("memory".to_string(), "64Gi".to_string()),
            ("pods".to_string(), "110".to_string()),
        ]),
        ..NodeSpec::default()
    }
}

fn fast_kubelet() -> Option<KubeletOptions> {
    Some(KubeletOptions {
        start_delay: Duration::from_millis(100),
        stop_delay: Duration::from_millis(100),
        heartbeat: Duration::from_millis(500),
        speed: 1.0,
    })
}

/// How long the devclusters' garbage collector lags behind a deletion, as
/// kube-controller-manager's does: a restarted job's old ResourceBinding outlives its PodGroup
/// while the job is placed again.
const COLLECTOR_LAG: Duration = Duration::from_secs(2);

/// One cluster named `local` with two nodes, without tephra's CRDs or queues: the chart
/// brings them.
pub async fn single_cluster() -> Handle {
    let mut options = Options::single();
    options.members[0].nodes = vec![node("node-a", "8"), node("node-b", "8")];
    options.install_crds = false;
    options.kubelet = fast_kubelet();
    options.server.collector_lag = COLLECTOR_LAG;
    // Streaming lists refused, as by a Kubernetes before 1.34: the components list in pages
    // (their default now, and their fallback when streaming lists are on), the path whose
    // grants (`list` and `watch`) the chart must cover; a streaming list needs `watch` alone.
    options.server.watch_lists = false;
    DevCluster::start(options).await.expect("devcluster starts")
}

/// A control plane and members `east` and `west` (two nodes each), without tephra's CRDs or
/// Cluster objects: the chart brings them.
pub async fn fleet_cluster() -> Handle {
    let member = |name: &str| tephra_devcluster::fleet::MemberSpec {
        name: name.into(),
        nodes: vec![
            node(&format!("{name}-a"), "8"),
            node(&format!("{name}-b"), "8"),
        ],
        ..Default::default()
    };
    let mut options = Options {
        members: vec![member("east"), member("west")],
        control_plane: true,
        install_crds: false,
        kubelet: fast_kubelet(),
        ..Options::default()
    };
    options.server.collector_lag = COLLECTOR_LAG;
    options.server.idle_provisioners = vec![scenarios::IDLE_PROVISIONER.into()];
    // Streaming lists refused, as by a Kubernetes before 1.34: the components list in pages
    // (their default now, and their fallback when streaming lists are on), the path whose
    // grants (`list` and `watch`) the chart must cover; a streaming list needs `watch` alone.
    options.server.watch_lists = false;
    DevCluster::start(options).await.expect("devcluster starts")
}

/// The member chart (`memberAccess` only, no CRDs) and the HyperNode CRD, which a member that
/// runs Volcano serves: what each member of a test fleet gets installed.
pub fn member_docs(helm: &Path, dir: &TempDir) -> Vec<Value> {
    let values = dir.write("member.json", &member_values());
    let mut docs = render(helm, &["-f", values.to_str().unwrap(), "--skip-crds"]);
    let crd = render(helm, &[])
        .into_iter()
        .find(|d| {
            d["kind"] == "CustomResourceDefinition"
                && d["metadata"]["name"] == "hypernodes.topology.volcano.sh"
        })
        .expect("the chart's HyperNode CRD");
    docs.push(crd);
    docs
}

/// The ServiceAccount the member chart makes for the fleet.
pub fn member_account(member_docs: &[Value]) -> String {
    of_kind(member_docs, "ServiceAccount")[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Control-plane values for `members` (each `fleet.members` entry: endpoint, CA and the
/// member ServiceAccount's token): members from the Cluster objects, preemption on, a short
/// volume-bind timeout, and members probed every second, not Ready a second after they stop
/// answering and tainted NoExecute a second later.
pub fn fleet_values_for(members: Vec<Value>) -> Value {
    let mut values = scenarios::preempting_values();
    values["scheduler"]["members"] = json!("clusters");
    values["scheduler"]["extraArgs"] = json!(["--volume-bind-timeout=5s"]);
    values["fleet"] = json!({"members": members});
    values["controllerManager"] = json!({"extraArgs": [
        "--cluster-status-update-frequency=1s", "--cluster-success-threshold=1s",
        "--cluster-failure-threshold=1s", "--no-execute-taint-grace=1s"]});
    values
}

/// Installs the member chart in each member and returns the control-plane values for them
/// ([`fleet_values_for`]).
pub async fn install_members(helm: &Path, dev: &Handle, dir: &TempDir) -> Value {
    let docs = member_docs(helm, dir);
    let account = member_account(&docs);
    let mut members = Vec::new();
    for server in dev.members() {
        let name = server.api.name.clone();
        install(&dev.client(&name).await.unwrap(), &docs).await;
        let entry = server.service_account_entry(NS, &account);
        members.push(
            json!({"name": name, "apiEndpoint": entry.server, "token": entry.token,
                            "caBundle": entry.ca_pem, "region": "us-east-1"}),
        );
    }
    fleet_values_for(members)
}

/// The processes of the rendered Deployments; killed on drop.
pub struct Running(Vec<(String, Child)>);

impl Drop for Running {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Running {
    /// Panics if a process has exited (with its log).
    pub fn assert_alive(&mut self, dir: &Path) {
        for (name, child) in &mut self.0 {
            if let Ok(Some(status)) = child.try_wait() {
                let log =
                    std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
                panic!("{name} exited with {status}:\n{log}");
            }
        }
    }
}

/// [`run_deployments_as`] with the devcluster `server`'s tokens.
pub fn run_deployments(dev: &Handle, server: &str, docs: &[Value], dir: &TempDir) -> Running {
    run_deployments_as(docs, dir, &|sa| {
        dev.service_account_kubeconfig(server, NS, sa).unwrap()
    })
}

/// The ServiceAccount each rendered Deployment runs as.
pub fn deployment_accounts(docs: &[Value]) -> Vec<String> {
    of_kind(docs, "Deployment")
        .into_iter()
        .filter_map(|d| d["spec"]["template"]["spec"]["serviceAccountName"].as_str())
        .map(str::to_string)
        .collect()
}

/// Runs every replica of every rendered Deployment whose image is tephra's, as the kubelet
/// would: the container's arguments, POD_NAME, POD_NAMESPACE and POD_IP (loopback), each ConfigMap volume written
/// out as files at a stand-in for its mount path, and the ServiceAccount's token in a
/// kubeconfig (`kubeconfig` gives it for a ServiceAccount of the release's namespace). Listen
/// addresses move to free loopback ports.
pub fn run_deployments_as(
    docs: &[Value],
    dir: &TempDir,
    kubeconfig_of: &dyn Fn(&str) -> String,
) -> Running {
    let mut running = Vec::new();
    for d in of_kind(docs, "Deployment") {
        let name = d["metadata"]["name"].as_str().unwrap();
        let pod = &d["spec"]["template"]["spec"];
        let sa = pod["serviceAccountName"].as_str().unwrap();
        let kubeconfig = dir.0.join(format!("{name}.kubeconfig"));
        std::fs::write(&kubeconfig, kubeconfig_of(sa)).unwrap();
        let volumes = config_volumes(docs, pod, &dir.0.join(name));
        for c in pod["containers"].as_array().unwrap() {
            if !c["image"]
                .as_str()
                .unwrap_or_default()
                .starts_with("tephra")
            {
                continue;
            }
            let mut mounts: Vec<(String, PathBuf)> = Vec::new();
            for m in c["volumeMounts"].as_array().into_iter().flatten() {
                if let Some(path) = volumes.get(m["name"].as_str().unwrap()) {
                    mounts.push((m["mountPath"].as_str().unwrap().to_string(), path.clone()));
                }
            }
            let args: Vec<String> = c["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| {
                    let mut a = a.as_str().unwrap().to_string();
                    if a.starts_with("--listen-address=") {
                        a = "--listen-address=127.0.0.1:0".into();
                    }
                    if a.starts_with("--virtual-node-port=") {
                        a = "--virtual-node-port=0".into();
                    }
                    // The kubelet expands $(VAR) from the container's env.
                    a = a.replace("$(POD_IP)", "127.0.0.1");
                    for (mount, path) in &mounts {
                        a = a.replace(mount.as_str(), path.to_str().unwrap());
                    }
                    a
                })
                .collect();
            let replicas = d["spec"]["replicas"].as_u64().unwrap_or(1);
            for i in 0..replicas {
                let pod_name = format!("{name}-{i}");
                let log = std::fs::File::create(dir.0.join(format!("{pod_name}.log"))).unwrap();
                let child = Command::new(env!("CARGO_BIN_EXE_tephra"))
                    .args(&args)
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .env("POD_NAME", &pod_name)
                    .env("POD_NAMESPACE", NS)
                    .env("POD_IP", "127.0.0.1")
                    .env("RUST_LOG", "info")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(log)
                    .spawn()
                    .expect("tephra starts");
                running.push((pod_name, child));
            }
        }
    }
    Running(running)
}

/// Each ConfigMap volume of a pod, written under `dir/<volume>`.
fn config_volumes(docs: &[Value], pod: &Value, dir: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    for v in pod["volumes"].as_array().into_iter().flatten() {
        let Some(cm) = v["configMap"]["name"].as_str() else {
            continue;
        };
        let map = of_kind(docs, "ConfigMap")
            .into_iter()
            .find(|m| m["metadata"]["name"] == cm)
            .unwrap_or_else(|| panic!("the pod mounts ConfigMap {cm}, which is not rendered"));
        let path = dir.join(v["name"].as_str().unwrap());
        std::fs::create_dir_all(&path).unwrap();
        for (k, text) in map["data"].as_object().into_iter().flatten() {
            std::fs::write(path.join(k), text.as_str().unwrap()).unwrap();
        }
        out.insert(v["name"].as_str().unwrap().to_string(), path);
    }
    out
}

/// The API servers whose refusals of the chart's ServiceAccounts end a wait at once.
pub enum Guard {
    /// Devcluster servers: their access logs.
    Dev(Vec<Arc<tephra_devcluster::api::ApiServer>>),
    /// Real API servers: their audit logs.
    Real(Vec<Arc<real::AuditTail>>),
}

impl Guard {
    /// Every server of `dev`.
    pub fn of(dev: &Handle) -> Self {
        Self::Dev(dev.servers().map(|s| s.api.clone()).collect())
    }

    /// Every refused request so far, one line each.
    pub fn denied(&self) -> Vec<String> {
        let mut out = Vec::new();
        match self {
            Self::Dev(apis) => {
                for api in apis {
                    for (a, n) in api.access.entries() {
                        if !a.allowed {
                            out.push(format!(
                                "{}: {} {} {}/{} in {:?} (x{n})",
                                api.name, a.user, a.verb, a.group, a.resource, a.namespace
                            ));
                        }
                    }
                }
            }
            Self::Real(tails) => {
                for t in tails {
                    out.extend(t.refusals());
                }
            }
        }
        out
    }
}

/// Polls `check` every 100 ms for up to `secs`; a request the roles refused fails at once.
pub async fn wait_for<F, Fut>(guard: &Guard, what: &str, secs: u64, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        let denied = guard.denied();
        assert!(
            denied.is_empty(),
            "waiting for {what}, requests the chart's roles refused:\n{}",
            denied.join("\n")
        );
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn create(client: &kube::Client, doc: Value) {
    apply(client, &doc)
        .await
        .unwrap_or_else(|e| panic!("{} {}: {e}", doc["kind"], doc["metadata"]["name"]));
}

fn job(name: &str, duration: &str) -> Value {
    job_with(name, duration, "1", json!({}))
}

/// A Volcano Job of a ps and two workers; `extra` is merged into its spec.
fn job_with(name: &str, duration: &str, ps_cpu: &str, extra: Value) -> Value {
    let template = |cpu: &str| {
        json!({"metadata": {"annotations": {"tephra.io/sim-duration": duration}},
               "spec": {"containers": [{"name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": cpu}}}],
                        "restartPolicy": "Never"}})
    };
    let mut job = json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"minAvailable": 3, "schedulerName": "volcano", "queue": "default",
                 "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
                 "tasks": [
                    {"name": "ps", "replicas": 1, "template": template(ps_cpu)},
                    {"name": "worker", "replicas": 2, "template": template("2"),
                     "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}]}]}
    });
    for (k, v) in extra.as_object().unwrap() {
        job["spec"][k] = v.clone();
    }
    job
}

/// A bus Command for the object `target` (as `tephra job suspend` and `tephra queue operate`
/// write them): the target as an owner reference, with its uid.
fn command(ns: &str, name: &str, action: &str, target: &Value) -> Value {
    json!({"apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
           "metadata": {"name": name, "namespace": ns},
           "action": action,
           "target": {"apiVersion": target["apiVersion"], "kind": target["kind"],
                      "name": target["metadata"]["name"], "uid": target["metadata"]["uid"],
                      "controller": true}})
}

/// What makes every controller act, and waits until each has happened:
/// - a Volcano Job with the `svc` and `ssh` plugins (a Service, ConfigMap and Secret, which a
///   fleet copies to the member) and a PriorityClass (copied too) that runs to completion;
/// - one aborted through a Command, one removed after `ttlSecondsAfterFinished`, and one too
///   big for any node (the scheduler says why it waits) whose minAvailable is then lowered
///   (the job controller updates its PodGroup);
/// - a bare pod that gets its PodGroup from the pg-controller;
/// - a queue closed through a Command, which closes its child queue.
pub async fn workload(admin: &kube::Client, guard: &Guard) {
    create(
        admin,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
    )
    .await;
    create(
        admin,
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
               "metadata": {"name": "research"}, "spec": {"weight": 1}}),
    )
    .await;
    create(
        admin,
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
               "metadata": {"name": "research-child"},
               "spec": {"weight": 1, "parent": "research"}}),
    )
    .await;
    // A class the members do not have: a fleet copies it with the pods that name it.
    create(
        admin,
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
               "metadata": {"name": "team-priority"}, "value": 100}),
    )
    .await;
    let plugins = json!({"plugins": {"svc": [], "ssh": []}, "priorityClassName": "team-priority"});
    create(admin, job_with("train", "2s", "1", plugins)).await;
    create(admin, job("long", "1h")).await;
    create(
        admin,
        job_with("ttl", "1s", "1", json!({"ttlSecondsAfterFinished": 0})),
    )
    .await;
    create(admin, job_with("huge", "1s", "100", json!({}))).await;
    create(admin, short_pod("solo", json!({}))).await;
    let jobs: Api<tephra_api::Job> = Api::namespaced(admin.clone(), "team-a");
    let phase = |name: &'static str| {
        let jobs = jobs.clone();
        async move { job_phase(&jobs, name).await }
    };
    // Running on the control plane: in a fleet, every member copy's status reached its
    // declared pod, in order (a lost or reordered status would leave it Pending).
    wait_for(guard, "job long to run", 60, || async {
        phase("long").await == "Running"
    })
    .await;
    let long = serde_json::to_value(jobs.get("long").await.unwrap()).unwrap();
    create(admin, command("team-a", "abort-long", "AbortJob", &long)).await;
    wait_for(
        guard,
        "job ttl to be removed after it finished",
        60,
        || async { jobs.get_opt("ttl").await.ok().flatten().is_none() },
    )
    .await;
    let queues: Api<tephra_api::Queue> = Api::all(admin.clone());
    let research = serde_json::to_value(queues.get("research").await.unwrap()).unwrap();
    create(
        admin,
        command("default", "close-research", "CloseQueue", &research),
    )
    .await;
    wait_for(guard, "job train to complete", 60, || async {
        phase("train").await == "Completed"
    })
    .await;
    wait_for(guard, "job long to be aborted", 60, || async {
        phase("long").await == "Aborted"
    })
    .await;
    // The scheduler says why the job too big for any node waits, on its PodGroup.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(admin.clone(), "team-a");
    wait_for(guard, "an Event on job huge's PodGroup", 60, || async {
        events.list(&Default::default()).await.is_ok_and(|l| {
            l.items.iter().any(|e| {
                e.involved_object.kind.as_deref() == Some("PodGroup")
                    && e.involved_object
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with("huge"))
            })
        })
    })
    .await;
    // Fewer of it needed: the job controller updates its PodGroup to match.
    jobs.patch(
        "huge",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"spec": {"minAvailable": 2}})),
    )
    .await
    .unwrap();
    let groups: Api<tephra_api::PodGroup> = Api::namespaced(admin.clone(), "team-a");
    wait_for(guard, "job huge's PodGroup to need 2", 60, || async {
        groups.list(&Default::default()).await.is_ok_and(|l| {
            l.items.iter().any(|g| {
                g.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("huge"))
                    && g.spec.min_member == Some(2)
            })
        })
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "team-a");
    wait_for(guard, "bare pod solo to succeed", 60, || async {
        phase_of(&pods, "solo").await == "Succeeded"
    })
    .await;
    for q in ["research", "research-child"] {
        wait_for(guard, &format!("queue {q} to close"), 60, || async {
            queues.get_opt(q).await.ok().flatten().is_some_and(|queue| {
                let closed = queue
                    .status
                    .as_ref()
                    .and_then(|s| s.state)
                    .is_some_and(|s| format!("{s:?}") == "Closed");
                // The child is also marked closed by its parent (written after its state).
                let marked = q == "research"
                    || queue.metadata.annotations.as_ref().is_some_and(|a| {
                        a.get("volcano.sh/closed-by-parent").map(String::as_str) == Some("true")
                    });
                closed && marked
            })
        })
        .await;
    }
}

/// Pods with claims, which the scheduler binds or allocates before the pods: one volume claim
/// to provision on the pod's node (a `WaitForFirstConsumer` class), one local volume taken by
/// its claim (the volume's claimRef), and a ResourceClaim from a template allocated a device of
/// a DRA driver's slice. The claims and pods are made through `claims` (a fleet's control
/// plane declares them), the classes, volumes and slices in each cluster of `infra` (with the
/// node its local volume is on), where the pods run. Waits until the three pods succeed.
pub async fn claim_workload(
    claims: &kube::Client,
    infra: &[(kube::Client, String)],
    guard: &Guard,
) {
    for (cluster, node) in infra {
        for doc in [
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                   "metadata": {"name": "fast"}, "provisioner": "csi.example.com",
                   "volumeBindingMode": "WaitForFirstConsumer"}),
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                   "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
                   "volumeBindingMode": "WaitForFirstConsumer"}),
            json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "disk-0"},
                   "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                            "storageClassName": "local", "local": {"path": "/mnt/disk"},
                            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In",
                                 "values": [node]}]}]}}}}),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                   "metadata": {"name": "gpu"},
                   "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                   "metadata": {"name": "all-gpus"},
                   "spec": {"driver": "gpu.example.com", "allNodes": true,
                            "pool": {"name": "shared", "generation": 1, "resourceSliceCount": 1},
                            "devices": [{"name": "gpu-0"}]}}),
        ] {
            create(cluster, doc).await;
        }
    }
    for doc in [
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
               "metadata": {"name": "one-gpu", "namespace": "team-a"},
               "spec": {"spec": {"devices": {"requests": [
                   {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}}),
        short_pod(
            "uses-gpu",
            json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                   "containers": [{"name": "main", "image": "busybox",
                                   "resources": {"requests": {"cpu": "1"},
                                                 "claims": [{"name": "gpu"}]}}]}),
        ),
    ] {
        create(claims, doc).await;
    }
    for (claim, class) in [("scratch", "fast"), ("data", "local")] {
        create(
            claims,
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": claim, "namespace": "team-a"},
                   "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}}}),
        )
        .await;
        create(claims, short_pod(&format!("uses-{claim}"), claimed(claim))).await;
    }
    let pods: Api<Pod> = Api::namespaced(claims.clone(), "team-a");
    for pod in ["uses-scratch", "uses-data", "uses-gpu"] {
        wait_for(guard, &format!("pod {pod} to succeed"), 60, || async {
            phase_of(&pods, pod).await == "Succeeded"
        })
        .await;
    }
}

/// A pod of `team-a` scheduled by tephra that asks one CPU and runs a second; `spec` is
/// merged into its spec (volumes, claims).
pub fn short_pod(name: &str, spec: Value) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "team-a",
                        "annotations": {"tephra.io/sim-duration": "1s"}},
           "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox",
                                    "resources": {"requests": {"cpu": "1"}}}]}});
    for (k, v) in spec.as_object().unwrap() {
        pod["spec"][k] = v.clone();
    }
    pod
}

/// A pod spec's volume of the claim `name`.
pub fn claimed(name: &str) -> Value {
    json!({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": name}}]})
}

/// Whether `pods` has none whose name starts with one of `prefixes` (false when the list
/// fails).
pub async fn none_named(pods: &Api<Pod>, prefixes: &[&str]) -> bool {
    pods.list(&Default::default()).await.is_ok_and(|l| {
        !l.items.iter().any(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| prefixes.iter().any(|x| n.starts_with(x)))
        })
    })
}

/// A Volcano Job's status, when it exists and has one.
pub async fn job_status(
    jobs: &Api<tephra_api::Job>,
    name: &str,
) -> Option<tephra_api::batch::JobStatus> {
    jobs.get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|j| j.status)
}

/// A Volcano Job's phase (`Running`, ...), or "".
pub async fn job_phase(jobs: &Api<tephra_api::Job>, name: &str) -> String {
    job_status(jobs, name)
        .await
        .and_then(|s| s.state.phase)
        .map(|p| format!("{p:?}"))
        .unwrap_or_default()
}

/// A pod's phase, or "" when it is gone or has none.
pub async fn phase_of(pods: &Api<Pod>, name: &str) -> String {
    pods.get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|p| p.status)
        .and_then(|s| s.phase)
        .unwrap_or_default()
}

/// Where the pods' owners come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owners {
    /// Owners that only the pods name: the devcluster, which serves no ReplicaSets,
    /// StatefulSets, DaemonSets or batch Jobs, takes such an owner to exist.
    StandIns,
    /// Real objects whose controllers (kube-controller-manager's) make the pods; the
    /// DaemonSet is for no node, and a pod of its own stands in for its pods.
    Real,
}

/// The kinds a bare pod's controller can be whose annotations its PodGroup inherits, as
/// (apiVersion, kind, name): the pg-controller reads each, and the PodGroup it makes blocks
/// each one's deletion.
const OWNER_KINDS: [(&str, &str, &str); 4] = [
    ("apps/v1", "ReplicaSet", "web"),
    ("apps/v1", "StatefulSet", "db"),
    ("apps/v1", "DaemonSet", "agent"),
    ("batch/v1", "Job", "batch"),
];

/// Pods of a ReplicaSet, a StatefulSet, a DaemonSet and a batch Job, scheduled by tephra: each
/// gets a PodGroup from the pg-controller, which reads its owner (for annotations to inherit)
/// and makes the PodGroup block the owner's deletion. Waits until each owner has such a
/// PodGroup and its pods run (the Job's have succeeded; a real DaemonSet's stand-in is not
/// waited for).
pub async fn owned_pods(admin: &kube::Client, guard: &Guard, owners: Owners) {
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "team-a");
    let spec = |restart: &str| {
        json!({"schedulerName": "volcano", "restartPolicy": restart,
               "containers": [{"name": "main", "image": "busybox",
                               "resources": {"requests": {"cpu": "100m"}}}]})
    };
    let stand_in = |api_version: &str, kind: &str, name: &str, uid: &str, restart: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": format!("{name}-0"), "namespace": "team-a",
                            "labels": {"app": name},
                            "ownerReferences": [{"apiVersion": api_version, "kind": kind,
                                "name": name, "uid": uid,
                                "controller": true, "blockOwnerDeletion": true}]},
               "spec": spec(restart)})
    };
    for (i, (api_version, kind, name)) in OWNER_KINDS.into_iter().enumerate() {
        let batch = kind == "Job";
        let restart = if batch { "Never" } else { "Always" };
        // A batch Job's pod runs a second; the others run until the test ends.
        let annotations = if batch {
            json!({"tephra.io/sim-duration": "1s"})
        } else {
            json!({})
        };
        if owners == Owners::StandIns {
            let uid = format!("0b3c0e9a-4d6c-4a8e-9a51-3f0f7d7f000{i}");
            let mut pod = stand_in(api_version, kind, name, &uid, restart);
            pod["metadata"]["annotations"] = annotations;
            create(admin, pod).await;
            continue;
        }
        let labels = json!({"app": name});
        let mut template = json!({"metadata": {"labels": labels, "annotations": annotations},
                   "spec": spec(restart)});
        if kind == "DaemonSet" {
            // For no node: its pods would name their node in a required node affinity's
            // matchFields, which the scheduler does not read yet. A pod of its own stands in.
            template["spec"]["nodeSelector"] = json!({"tephra.io/no-such-node": "true"});
        }
        let mut object = json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"selector": {"matchLabels": labels}, "template": template}});
        match kind {
            "ReplicaSet" => object["spec"]["replicas"] = json!(1),
            "StatefulSet" => {
                object["spec"]["replicas"] = json!(1);
                object["spec"]["serviceName"] = json!(name);
            }
            // A Job's controller picks its own selector.
            "Job" => drop(object["spec"].as_object_mut().unwrap().remove("selector")),
            _ => {}
        }
        create(admin, object).await;
        if kind == "DaemonSet" {
            let sets: Api<k8s_openapi::api::apps::v1::DaemonSet> =
                Api::namespaced(admin.clone(), "team-a");
            let uid = sets.get(name).await.unwrap().metadata.uid.unwrap();
            create(admin, stand_in(api_version, kind, name, &uid, restart)).await;
        }
    }
    let groups: Api<tephra_api::PodGroup> = Api::namespaced(admin.clone(), "team-a");
    for (_, kind, name) in OWNER_KINDS {
        wait_for(
            guard,
            &format!("a PodGroup that blocks the deletion of {kind} {name}"),
            60,
            || async {
                groups.list(&Default::default()).await.is_ok_and(|l| {
                    l.items.iter().any(|g| {
                        g.metadata.owner_references.iter().flatten().any(|r| {
                            r.kind == kind && r.name == name && r.block_owner_deletion == Some(true)
                        })
                    })
                })
            },
        )
        .await;
        // The real DaemonSet's controller deletes the stand-in once it runs on a node the
        // DaemonSet is not for.
        if kind == "DaemonSet" && owners == Owners::Real {
            continue;
        }
        let want = if kind == "Job" {
            "Succeeded"
        } else {
            "Running"
        };
        wait_for(
            guard,
            &format!("the pods of {kind} {name} to be {want}"),
            60,
            || async {
                let Ok(list) = pods.list(&Default::default()).await else {
                    return false;
                };
                let mine: Vec<&Pod> = list
                    .items
                    .iter()
                    .filter(|p| {
                        p.metadata
                            .owner_references
                            .iter()
                            .flatten()
                            .any(|r| r.kind == kind && r.name == name)
                    })
                    .collect();
                !mine.is_empty()
                    && mine
                        .iter()
                        .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(want))
            },
        )
        .await;
    }
}
