//! What a fleet declares besides its clusters' nodes, as the Kubernetes objects `tephra dev`
//! creates in each member and the simulator feeds its cache: StorageClasses, each node's local
//! PersistentVolumes (node affinity by hostname), DeviceClasses, and each node's ResourceSlice
//! of a DRA driver's devices, and the HyperNodes of its network topology. Also each node's name
//! and labels, the same in both.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use tephra_scheduler::model::vgpu;

use super::defs::{ClusterDef, NodePool};

/// The name of node `i` of `pool` in `cluster`.
pub fn node_name(cluster: &ClusterDef, pool: &NodePool, i: usize) -> String {
    format!("{}-{}-{i}", cluster.name, pool.name)
}

/// The labels of node `i` of `pool` in `cluster`: the pool's, its pool name, the cluster's
/// region and zone, and its hostname.
pub fn node_labels(cluster: &ClusterDef, pool: &NodePool, i: usize) -> BTreeMap<String, String> {
    let mut labels = pool.labels.clone();
    labels.insert("tephra.io/node-pool".into(), pool.name.clone());
    if let Some(r) = &cluster.region {
        labels.insert("topology.kubernetes.io/region".into(), r.clone());
    }
    if let Some(z) = &cluster.zone {
        labels.insert("topology.kubernetes.io/zone".into(), z.clone());
    }
    labels.insert("kubernetes.io/hostname".into(), node_name(cluster, pool, i));
    labels
}

/// The shared GPUs node `i` of `pool` registers, as Volcano's vGPU device plugin registers them
/// (`GPU-<node>-<k>`); none for a pool without `vgpus`.
pub fn node_gpus(cluster: &ClusterDef, pool: &NodePool, i: usize) -> Vec<vgpu::Gpu> {
    let Some(v) = &pool.vgpus else {
        return Vec::new();
    };
    let node = node_name(cluster, pool, i);
    (0..v.count)
        .map(|k| vgpu::Gpu {
            uuid: format!("GPU-{node}-{k}"),
            split: v.split,
            memory: v.memory,
            model: v.model.clone(),
            healthy: true,
            mig: false,
        })
        .collect()
}

/// The annotations of node `i` of `pool`: its shared GPUs' registration, if it has any.
pub fn node_annotations(
    cluster: &ClusterDef,
    pool: &NodePool,
    i: usize,
) -> BTreeMap<String, String> {
    let gpus = node_gpus(cluster, pool, i);
    if gpus.is_empty() {
        return BTreeMap::new();
    }
    BTreeMap::from([(vgpu::REGISTER.to_string(), vgpu::encode_register(&gpus))])
}

/// The capacity of each node of `pool`: its own, plus, with `vgpus`, the three resources the
/// vGPU device plugin offers (GPUs × split, their memory, 100 cores each) unless it names them.
pub fn pool_capacity(pool: &NodePool) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = pool
        .capacity
        .iter()
        .map(|(k, q)| (k.clone(), q.0.clone()))
        .collect();
    if let Some(v) = &pool.vgpus {
        let count = v.count as u64;
        for (name, amount) in [
            (vgpu::NUMBER, count * u64::from(v.split)),
            (vgpu::MEMORY, count * v.memory),
            (vgpu::CORES, count * u64::from(vgpu::FULL_CORES)),
        ] {
            out.entry(name.to_string())
                .or_insert_with(|| amount.to_string());
        }
    }
    out
}

/// The HyperNodes of a cluster's `topology`: tier 1 over every `size` nodes (in pool order),
/// each tier above over every `size` HyperNodes of the tier below; `<tier name>-<index>`, each
/// member by its exact name, as a Volcano user writes them.
pub fn hypernodes(cluster: &ClusterDef) -> Vec<Value> {
    let Some(t) = &cluster.topology else {
        return Vec::new();
    };
    let mut below: Vec<String> = cluster
        .node_pools
        .iter()
        .flat_map(|p| (0..p.count).map(move |i| node_name(cluster, p, i)))
        .collect();
    let mut out = Vec::new();
    for (k, tier) in t.tiers.iter().enumerate() {
        let kind = if k == 0 { "Node" } else { "HyperNode" };
        let mut names = Vec::new();
        for (i, group) in below.chunks(tier.size.max(1)).enumerate() {
            let name = format!("{}-{i}", tier.name);
            let members: Vec<Value> = group
                .iter()
                .map(|m| json!({"type": kind, "selector": {"exactMatch": {"name": m}}}))
                .collect();
            out.push(json!({
                "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                "metadata": {"name": name},
                "spec": {"tier": k + 1, "tierName": tier.name, "members": members},
            }));
            names.push(name);
        }
        below = names;
    }
    out
}

/// A JSON value of a device attribute: `{string}`, `{int}` or `{bool}`.
fn attribute(v: &Value) -> Value {
    match v {
        Value::Bool(b) => json!({"bool": b}),
        Value::Number(n) if n.is_i64() => json!({"int": n}),
        other => json!({"string": other.as_str().map_or_else(|| other.to_string(), String::from)}),
    }
}

/// The objects `cluster` declares besides its nodes, in the order they are created.
pub fn objects(cluster: &ClusterDef) -> Vec<Value> {
    let mut out = hypernodes(cluster);
    for sc in &cluster.storage_classes {
        let mut obj = json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": sc.name},
            "provisioner": sc.provisioner,
            "volumeBindingMode": sc.volume_binding_mode.as_deref().unwrap_or("Immediate"),
        });
        if !sc.allowed_topologies.is_empty() {
            let exprs: Vec<Value> = sc
                .allowed_topologies
                .iter()
                .map(|(k, v)| json!({"key": k, "values": v}))
                .collect();
            obj["allowedTopologies"] = json!([{"matchLabelExpressions": exprs}]);
        }
        if sc.default {
            obj["metadata"]["annotations"] =
                json!({"storageclass.kubernetes.io/is-default-class": "true"});
        }
        out.push(obj);
    }
    for dc in &cluster.device_classes {
        let selectors: Vec<Value> = dc
            .selectors
            .iter()
            .map(|e| json!({"cel": {"expression": e}}))
            .collect();
        out.push(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": dc.name},
            "spec": {"selectors": selectors},
        }));
    }
    for pool in &cluster.node_pools {
        for i in 0..pool.count {
            let node = node_name(cluster, pool, i);
            for v in &pool.volumes {
                let modes = if v.access_modes.is_empty() {
                    vec!["ReadWriteOnce".to_string()]
                } else {
                    v.access_modes.clone()
                };
                for k in 0..v.count {
                    out.push(json!({
                        "apiVersion": "v1", "kind": "PersistentVolume",
                        "metadata": {"name": format!("{node}-{}-{k}", v.storage_class)},
                        "spec": {
                            "capacity": {"storage": v.capacity.0},
                            "accessModes": modes,
                            "storageClassName": v.storage_class,
                            "local": {"path": format!("/mnt/disks/{k}")},
                            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
                        },
                    }));
                }
            }
            if let Some(d) = &pool.devices {
                let devices: Vec<Value> = (0..d.count)
                    .map(|k| {
                        let attributes: serde_json::Map<String, Value> = d
                            .attributes
                            .iter()
                            .map(|(n, v)| (n.clone(), attribute(v)))
                            .collect();
                        let capacity: serde_json::Map<String, Value> = d
                            .capacity
                            .iter()
                            .map(|(n, q)| (n.clone(), json!({"value": q.0})))
                            .collect();
                        json!({"name": format!("dev-{k}"), "attributes": attributes,
                               "capacity": capacity})
                    })
                    .collect();
                out.push(json!({
                    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                    "metadata": {"name": format!("{node}-{}", d.driver.replace('/', "-"))},
                    "spec": {"driver": d.driver, "nodeName": node,
                             "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                             "devices": devices},
                }));
            }
        }
    }
    out
}
