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

/// One cluster named `local` with two nodes, without tephra's CRDs or queues: the chart
/// brings them.
pub async fn single_cluster() -> Handle {
    let mut options = Options::single();
    options.members[0].nodes = vec![node("node-a", "8"), node("node-b", "8")];
    options.install_crds = false;
    options.kubelet = fast_kubelet();
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
    let options = Options {
        members: vec![member("east"), member("west")],
        control_plane: true,
        install_crds: false,
        kubelet: fast_kubelet(),
        ..Options::default()
    };
    DevCluster::start(options).await.expect("devcluster starts")
}

/// Installs the member chart in each member and returns control-plane values whose
/// `fleet.members` hold each member's endpoint, CA and its tephra ServiceAccount's token.
pub async fn install_members(helm: &Path, dev: &Handle, dir: &TempDir) -> Value {
    let values = dir.write("member.json", &member_values());
    let docs = render(helm, &["-f", values.to_str().unwrap(), "--skip-crds"]);
    let account = of_kind(&docs, "ServiceAccount")[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
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
    json!({"scheduler": {"members": "clusters"}, "fleet": {"members": members},
           "controllerManager": {"extraArgs": [
               "--cluster-status-update-frequency=1s", "--cluster-success-threshold=1s"]}})
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

/// Runs every replica of every rendered Deployment whose image is tephra's, as the kubelet
/// would: the container's arguments, POD_NAME and POD_NAMESPACE, each ConfigMap volume written
/// out as files at a stand-in for its mount path, and the ServiceAccount's token (issued by
/// `server`) in a kubeconfig. Listen addresses move to free loopback ports.
pub fn run_deployments(dev: &Handle, server: &str, docs: &[Value], dir: &TempDir) -> Running {
    let mut running = Vec::new();
    for d in of_kind(docs, "Deployment") {
        let name = d["metadata"]["name"].as_str().unwrap();
        let pod = &d["spec"]["template"]["spec"];
        let sa = pod["serviceAccountName"].as_str().unwrap();
        let kubeconfig = dir.0.join(format!("{name}.kubeconfig"));
        std::fs::write(
            &kubeconfig,
            dev.service_account_kubeconfig(server, NS, sa).unwrap(),
        )
        .unwrap();
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

/// The API servers whose RBAC refusals end a wait at once.
pub struct Guard(pub Vec<Arc<tephra_devcluster::api::ApiServer>>);

impl Guard {
    /// Every server of `dev`.
    pub fn of(dev: &Handle) -> Self {
        Self(dev.servers().map(|s| s.api.clone()).collect())
    }

    /// Every refused request so far, one line each.
    pub fn denied(&self) -> Vec<String> {
        let mut out = Vec::new();
        for api in &self.0 {
            for (a, n) in api.access.entries() {
                if !a.allowed {
                    out.push(format!(
                        "{}: {} {} {}/{} in {:?} (x{n})",
                        api.name, a.user, a.verb, a.group, a.resource, a.namespace
                    ));
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
///   big for any node (the scheduler says why it waits);
/// - bare pods that get their PodGroup from the pg-controller, one owned by a ReplicaSet;
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
    create(
        admin,
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "web-1", "namespace": "team-a",
                            "annotations": {"tephra.io/sim-duration": "1s"},
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                "name": "web", "uid": "0b3c0e9a-4d6c-4a8e-9a51-3f0f7d7f0001",
                                "controller": true, "blockOwnerDeletion": true}]},
               "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "busybox",
                                        "resources": {"requests": {"cpu": "1"}}}]}}),
    )
    .await;
    create(
        admin,
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "solo", "namespace": "team-a",
                            "annotations": {"tephra.io/sim-duration": "1s"}},
               "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "busybox",
                                        "resources": {"requests": {"cpu": "1"}}}]}}),
    )
    .await;
    let jobs: Api<tephra_api::Job> = Api::namespaced(admin.clone(), "team-a");
    let phase = |name: &'static str| {
        let jobs = jobs.clone();
        async move {
            jobs.get_opt(name)
                .await
                .ok()
                .flatten()
                .and_then(|j| j.status)
                .and_then(|s| s.state.phase)
                .map(|p| format!("{p:?}"))
                .unwrap_or_default()
        }
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
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "team-a");
    for bare in ["solo", "web-1"] {
        wait_for(
            guard,
            &format!("bare pod {bare} to succeed"),
            60,
            || async {
                pods.get_opt(bare)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|p| p.status)
                    .and_then(|s| s.phase)
                    .is_some_and(|p| p == "Succeeded")
            },
        )
        .await;
    }
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
/// a DRA driver's slice. Waits until the three pods succeed.
pub async fn claim_workload(admin: &kube::Client, guard: &Guard) {
    for doc in [
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
               "metadata": {"name": "gpu"},
               "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
               "metadata": {"name": "all-gpus"},
               "spec": {"driver": "gpu.example.com", "allNodes": true,
                        "pool": {"name": "shared", "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": "gpu-0"}]}}),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
               "metadata": {"name": "one-gpu", "namespace": "team-a"},
               "spec": {"spec": {"devices": {"requests": [
                   {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}}),
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "uses-gpu", "namespace": "team-a",
                            "annotations": {"tephra.io/sim-duration": "1s"}},
               "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                        "containers": [{"name": "main", "image": "busybox",
                                        "resources": {"requests": {"cpu": "1"},
                                                      "claims": [{"name": "gpu"}]}}]}}),
    ] {
        create(admin, doc).await;
    }
    volume_workload(admin, guard).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "team-a");
    wait_for(guard, "pod uses-gpu to succeed", 60, || async {
        pods.get_opt("uses-gpu")
            .await
            .ok()
            .flatten()
            .and_then(|p| p.status)
            .and_then(|s| s.phase)
            .is_some_and(|p| p == "Succeeded")
    })
    .await;
}

/// Pods with volume claims, whose volumes the scheduler binds before the pods: one claim to
/// provision on the pod's node (a `WaitForFirstConsumer` class) and one local volume taken by
/// its claim (the volume's claimRef). Waits until both pods succeed.
async fn volume_workload(admin: &kube::Client, guard: &Guard) {
    create(
        admin,
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               "metadata": {"name": "fast"}, "provisioner": "csi.example.com",
               "volumeBindingMode": "WaitForFirstConsumer"}),
    )
    .await;
    create(
        admin,
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
               "volumeBindingMode": "WaitForFirstConsumer"}),
    )
    .await;
    create(
        admin,
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "disk-0"},
               "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "local", "local": {"path": "/mnt/disk"}}}),
    )
    .await;
    for (claim, class) in [("scratch", "fast"), ("data", "local")] {
        create(
            admin,
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": claim, "namespace": "team-a"},
                   "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}}}),
        )
        .await;
        create(
            admin,
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": format!("uses-{claim}"), "namespace": "team-a",
                                "annotations": {"tephra.io/sim-duration": "1s"}},
                   "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}],
                            "containers": [{"name": "main", "image": "busybox",
                                            "resources": {"requests": {"cpu": "1"}}}]}}),
        )
        .await;
    }
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "team-a");
    for claim in ["scratch", "data"] {
        wait_for(
            guard,
            &format!("pod uses-{claim} to succeed"),
            60,
            || async {
                pods.get_opt(&format!("uses-{claim}"))
                    .await
                    .ok()
                    .flatten()
                    .and_then(|p| p.status)
                    .and_then(|s| s.phase)
                    .is_some_and(|p| p == "Succeeded")
            },
        )
        .await;
    }
}
