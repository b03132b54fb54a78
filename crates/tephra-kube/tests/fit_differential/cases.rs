//! The seeded generator of fit cases: a few nodes (capacity and allocatable, labels, taints,
//! cordons), pods already on them (bound by name: running, finished or refused, with labels,
//! host ports and anti-affinity), and one pod to place, whose spec draws from everything
//! kube-scheduler's default filters read: requests of containers, init containers and
//! sidecars, pod overhead (through a RuntimeClass), extended resources, node selectors, node
//! affinity (matchExpressions of every operator, matchFields), tolerations, host ports, pod
//! affinity and anti-affinity, topology spread, scheduling gates.

use serde_json::{Value, json};

/// SplitMix64: small, seedable, and the same on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// 0..n.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// The label every node of a case carries, so that its pods see only its nodes.
pub const CASE_LABEL: &str = "tephra.test/case";
/// The RuntimeClass whose overhead the generated pods may ask for.
pub const RUNTIME_CLASS: &str = "with-overhead";

/// One case: where the pod may go is the question.
#[derive(Clone, Debug)]
pub struct Case {
    pub seed: u64,
    pub namespace: String,
    /// Node manifests (with status).
    pub nodes: Vec<Value>,
    /// Pods bound by name before the question (with `tephra.io/sim-duration` for finished ones
    /// and the node's name).
    pub existing: Vec<Value>,
    /// The pod to place (no schedulerName, no name). `{round}` in it stands for the round
    /// (`kube`, `tephra`, `check`): each round's pod has claims of its own.
    pub pod: Value,
    /// Storage and device objects both rounds see, created before the question.
    pub shared: Vec<Value>,
    /// Objects each round gets a copy of (`{round}` in them stands for it): a claim and the
    /// volumes only it may bind, so that one round's binding leaves the next round's question
    /// the same.
    pub per_round: Vec<Value>,
}

/// The rounds of a case, in order.
pub const ROUNDS: [&str; 3] = ["kube", "tephra", "check"];

/// `v` with `{round}` replaced by `round`.
pub fn for_round(v: &Value, round: &str) -> Value {
    let text = v.to_string().replace("{round}", round);
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// The driver of the generated ResourceSlices.
pub const DRIVER: &str = "gpu.example.com";

const ZONES: &[&str] = &["a", "b", "c"];
const APPS: &[&str] = &["web", "db", "cache"];

fn node_name(seed: u64, i: usize) -> String {
    format!("s{seed}-n{i}")
}

fn requests(rng: &mut Rng, big: bool) -> Value {
    let cpu = rng.pick(if big {
        &["500m", "1", "2", "3", "6"][..]
    } else {
        &["100m", "250m", "500m", "1"][..]
    });
    let mem = rng.pick(&["64Mi", "512Mi", "1Gi", "3Gi"]);
    let mut r = json!({"cpu": cpu, "memory": mem});
    if rng.chance(25) {
        r["example.com/gpu"] = json!(rng.pick(&["1", "2", "3"]).to_string());
    }
    if rng.chance(10) {
        r["ephemeral-storage"] = json!(rng.pick(&["1Gi", "20Gi"]).to_string());
    }
    r
}

fn container(name: &str, requests: Value, port: Option<Value>) -> Value {
    let mut c = json!({"name": name, "image": "busybox",
        "resources": {"requests": requests.clone(), "limits": requests}});
    // Extended resources must have limits equal to requests; cpu and memory limits are kept
    // equal too, for simplicity.
    if let Some(p) = port {
        c["ports"] = json!([p]);
    }
    c
}

fn host_port(rng: &mut Rng) -> Value {
    let mut p = json!({"containerPort": 80, "hostPort": rng.pick(&[8080, 9090])});
    if rng.chance(30) {
        p["protocol"] = json!("UDP");
    }
    if rng.chance(30) {
        p["hostIP"] = json!("127.0.0.1");
    }
    p
}

fn taint(rng: &mut Rng) -> Value {
    match rng.below(4) {
        0 => json!({"key": "dedicated", "value": rng.pick(&["gpu", "ml"]).to_string(),
            "effect": rng.pick(&["NoSchedule", "PreferNoSchedule", "NoExecute"]).to_string()}),
        1 => json!({"key": "spot", "effect": "NoSchedule"}),
        2 => json!({"key": "example.com/maintenance", "value": "true", "effect": "NoExecute"}),
        _ => json!({"key": "team", "value": rng.pick(&["a", "b"]).to_string(),
            "effect": "NoSchedule"}),
    }
}

fn toleration(rng: &mut Rng) -> Value {
    match rng.below(6) {
        0 => json!({"key": "dedicated", "operator": "Equal",
            "value": rng.pick(&["gpu", "ml"]).to_string(),
            "effect": rng.pick(&["NoSchedule", "NoExecute", ""]).to_string()}),
        1 => json!({"key": "dedicated", "operator": "Exists"}),
        2 => json!({"key": "spot", "operator": "Exists", "effect": "NoSchedule"}),
        3 => json!({"operator": "Exists"}),
        4 => json!({"key": "example.com/maintenance", "operator": "Exists",
            "effect": "NoExecute", "tolerationSeconds": 60}),
        _ => json!({"key": "team", "operator": "Equal", "value": "a"}),
    }
}

fn expression(rng: &mut Rng) -> Value {
    match rng.below(7) {
        0 => json!({"key": "topology.kubernetes.io/zone", "operator": "In",
            "values": [rng.pick(ZONES).to_string(), rng.pick(ZONES).to_string()]}),
        1 => json!({"key": "topology.kubernetes.io/zone", "operator": "NotIn",
            "values": [rng.pick(ZONES).to_string()]}),
        2 => json!({"key": "disk", "operator": "Exists"}),
        3 => json!({"key": "disk", "operator": "DoesNotExist"}),
        4 => json!({"key": "size", "operator": "Gt",
            "values": [rng.below(8).to_string()]}),
        5 => json!({"key": "size", "operator": "Lt",
            "values": [(rng.below(8) + 1).to_string()]}),
        _ => json!({"key": "disk", "operator": "In", "values": ["ssd"]}),
    }
}

fn selector(app: &str) -> Value {
    json!({"matchLabels": {"app": app}})
}

fn pod_term(rng: &mut Rng) -> Value {
    json!({"labelSelector": selector(rng.pick(APPS)),
        "topologyKey": rng.pick(&["kubernetes.io/hostname", "topology.kubernetes.io/zone"]).to_string()})
}

impl Case {
    /// The case of `seed`.
    pub fn generate(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let namespace = format!("case-{seed}");
        let n_nodes = 1 + rng.below(4);
        let mut nodes = Vec::new();
        for i in 0..n_nodes {
            let name = node_name(seed, i);
            let cpu = rng.pick(&["2", "4", "8"]);
            let mut capacity = json!({"cpu": cpu, "memory": rng.pick(&["4Gi", "8Gi"]),
                "pods": rng.pick(&["2", "3", "110"]), "ephemeral-storage": "50Gi"});
            if rng.chance(50) {
                capacity["example.com/gpu"] = json!(rng.pick(&["1", "2", "4"]).to_string());
            }
            let mut allocatable = capacity.clone();
            if rng.chance(30) {
                allocatable["cpu"] = json!(format!(
                    "{}m",
                    cpu.parse::<u32>().unwrap_or(2) * 1000 - 1500
                ));
            }
            let mut labels = json!({CASE_LABEL: seed.to_string(),
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                "topology.kubernetes.io/zone": rng.pick(ZONES)});
            if rng.chance(60) {
                labels["disk"] = json!(rng.pick(&["ssd", "hdd"]).to_string());
            }
            if rng.chance(70) {
                labels["size"] = json!(rng.below(10).to_string());
            }
            // Taints are unique by key and effect (the API server refuses others).
            let mut taints: Vec<Value> = Vec::new();
            for _ in 0..rng.below(3) {
                let t = taint(&mut rng);
                if !taints
                    .iter()
                    .any(|o| o["key"] == t["key"] && o["effect"] == t["effect"])
                {
                    taints.push(t);
                }
            }
            let mut node = json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "spec": {},
                "status": {"capacity": capacity, "allocatable": allocatable,
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "ready"}]}});
            if !taints.is_empty() {
                node["spec"]["taints"] = json!(taints);
            }
            if rng.chance(10) {
                node["spec"]["unschedulable"] = json!(true);
            }
            nodes.push(node);
        }
        let mut existing = Vec::new();
        for j in 0..rng.below(5) {
            let node = node_name(seed, rng.below(n_nodes));
            let app = rng.pick(APPS);
            let port = rng.chance(25).then(|| host_port(&mut rng));
            let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("old-{j}"), "namespace": namespace,
                    "labels": {"app": app}},
                "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}],
                    "containers": [container("main", requests(&mut rng, false), port)]}});
            if rng.chance(20) {
                pod["metadata"]["annotations"] = json!({"tephra.io/sim-duration": "1s"});
            }
            if rng.chance(20) {
                pod["spec"]["affinity"] = json!({"podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [pod_term(&mut rng)]}});
            }
            existing.push(pod);
        }
        let mut pod = Self::question(&mut rng, seed, &namespace);
        let (shared, per_round) = Self::storage(&mut rng, seed, &namespace, n_nodes, &mut pod);
        Self {
            seed,
            namespace,
            nodes,
            existing,
            pod,
            shared,
            per_round,
        }
    }

    /// Volumes and devices for the pod, one kind at a time: a claim bound to a local volume on
    /// one node (or a node that does not exist), a `WaitForFirstConsumer` claim that local
    /// volumes on some nodes could take (each round its own claim and volumes), a claim that
    /// does not exist, or a DRA claim for devices that some nodes' ResourceSlices offer.
    fn storage(
        rng: &mut Rng,
        seed: u64,
        namespace: &str,
        n_nodes: usize,
        pod: &mut Value,
    ) -> (Vec<Value>, Vec<Value>) {
        let mut shared = Vec::new();
        let mut per_round = Vec::new();
        let local_pv = |name: String, node: String, size: &str, class: &str, labels: Value| {
            json!({"apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": name, "labels": labels},
                "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain", "storageClassName": class,
                    "local": {"path": "/mnt/disk"},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}})
        };
        let mut volume = |claim: String| {
            pod["spec"]["volumes"] =
                json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]);
        };
        match rng.below(100) {
            // A claim bound (by name) to a local volume on one node.
            0..=14 => {
                let pv = format!("s{seed}-bound");
                let node = node_name(seed, rng.below(n_nodes + 1));
                shared.push(local_pv(pv.clone(), node, "1Gi", "", json!({})));
                shared.push(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "bound", "namespace": namespace},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                        "volumeName": pv, "resources": {"requests": {"storage": "1Gi"}}}}));
                volume("bound".into());
            }
            // WaitForFirstConsumer: local volumes on some nodes, some too small.
            15..=29 => {
                let class = format!("s{seed}-wffc");
                shared.push(
                    json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                    "metadata": {"name": class}, "provisioner": "kubernetes.io/no-provisioner",
                    "volumeBindingMode": "WaitForFirstConsumer"}),
                );
                for i in 0..1 + rng.below(3) {
                    let node = node_name(seed, rng.below(n_nodes));
                    let size = rng.pick(&["1Gi", "10Gi"]);
                    per_round.push(local_pv(
                        format!("s{seed}-{{round}}-{i}"),
                        node,
                        size,
                        &class,
                        json!({"tephra.test/round": "{round}"}),
                    ));
                }
                per_round.push(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "data-{round}", "namespace": namespace},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                        "selector": {"matchLabels": {"tephra.test/round": "{round}"}},
                        "resources": {"requests": {"storage": "5Gi"}}}}));
                volume("data-{round}".into());
            }
            // A claim that does not exist.
            30..=33 => volume("absent".into()),
            // DRA: devices in some nodes' ResourceSlices, a claim for some of them.
            34..=48 => {
                let class = format!("s{seed}-gpu");
                shared.push(
                    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                    "metadata": {"name": class},
                    "spec": {"selectors": [{"cel": {"expression":
                        format!("device.driver == '{DRIVER}'")}}]}}),
                );
                for i in 0..n_nodes {
                    if rng.chance(30) {
                        continue;
                    }
                    let node = node_name(seed, i);
                    let devices: Vec<Value> = (0..rng.below(4))
                        .map(|d| {
                            json!({"name": format!("gpu-{d}"),
                            "attributes": {"model": {"string": "a100"}}})
                        })
                        .collect();
                    shared.push(json!({"apiVersion": "resource.k8s.io/v1",
                        "kind": "ResourceSlice", "metadata": {"name": format!("{node}-gpus")},
                        "spec": {"driver": DRIVER, "nodeName": node,
                            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                            "devices": devices}}));
                }
                per_round.push(json!({"apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {"name": "gpu-{round}", "namespace": namespace},
                    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                        "deviceClassName": class, "allocationMode": "ExactCount",
                        "count": 1 + rng.below(3)}}]}}}));
                pod["spec"]["resourceClaims"] =
                    json!([{"name": "gpu", "resourceClaimName": "gpu-{round}"}]);
                pod["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
            }
            _ => {}
        }
        (shared, per_round)
    }

    fn question(rng: &mut Rng, seed: u64, namespace: &str) -> Value {
        let app = rng.pick(APPS);
        let port = rng.chance(20).then(|| host_port(rng));
        let mut containers = vec![container("main", requests(rng, true), port)];
        if rng.chance(30) {
            containers.push(container("helper", requests(rng, false), None));
        }
        let mut spec = json!({"containers": containers,
            "nodeSelector": {CASE_LABEL: seed.to_string()}});
        let mut init = Vec::new();
        if rng.chance(30) {
            init.push(container("init", requests(rng, true), None));
        }
        if rng.chance(25) {
            let mut sidecar = container("sidecar", requests(rng, false), None);
            sidecar["restartPolicy"] = json!("Always");
            init.push(sidecar);
        }
        if !init.is_empty() {
            spec["initContainers"] = json!(init);
        }
        if rng.chance(20) {
            spec["runtimeClassName"] = json!(RUNTIME_CLASS);
        }
        if rng.chance(25) {
            spec["nodeSelector"]["topology.kubernetes.io/zone"] =
                json!(rng.pick(ZONES).to_string());
        }
        let mut affinity = json!({});
        if rng.chance(40) {
            let terms: Vec<Value> = (0..1 + rng.below(2))
                .map(|_| {
                    let mut t = json!({"matchExpressions":
                        (0..1 + rng.below(2)).map(|_| expression(rng)).collect::<Vec<_>>()});
                    if rng.chance(15) {
                        t["matchFields"] = json!([{"key": "metadata.name",
                            "operator": rng.pick(&["In", "NotIn"]).to_string(),
                            "values": [node_name(seed, rng.below(3))]}]);
                    }
                    t
                })
                .collect();
            affinity["nodeAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": terms}});
        }
        if rng.chance(15) {
            affinity["podAffinity"] =
                json!({"requiredDuringSchedulingIgnoredDuringExecution": [pod_term(rng)]});
        }
        if rng.chance(15) {
            affinity["podAntiAffinity"] =
                json!({"requiredDuringSchedulingIgnoredDuringExecution": [pod_term(rng)]});
        }
        if affinity.as_object().is_some_and(|a| !a.is_empty()) {
            spec["affinity"] = affinity;
        }
        let tolerations: Vec<Value> = (0..rng.below(3)).map(|_| toleration(rng)).collect();
        if !tolerations.is_empty() {
            spec["tolerations"] = json!(tolerations);
        }
        if rng.chance(20) {
            let mut c = json!({"maxSkew": 1 + rng.below(2),
                "topologyKey": rng.pick(&["kubernetes.io/hostname", "topology.kubernetes.io/zone"]).to_string(),
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector(app)});
            if rng.chance(20) {
                c["minDomains"] = json!(1 + rng.below(3));
            }
            if rng.chance(20) {
                c["nodeTaintsPolicy"] = json!("Honor");
            }
            spec["topologySpreadConstraints"] = json!([c]);
        }
        if rng.chance(5) {
            spec["schedulingGates"] = json!([{"name": "example.com/hold"}]);
        }
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": namespace, "labels": {"app": app}},
            "spec": spec})
    }
}
