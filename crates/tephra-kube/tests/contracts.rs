//! `tephra scheduler` against a devcluster that refuses what a real cluster refuses, and (the
//! same tests, `::on_kube_apiserver`) against the real kube-apiserver: gated pods
//! are never bound (not even tried) until their gates go, pods asking for one host port run on
//! different nodes, a zone spread constraint spreads a gang, and a gang no node could ever take
//! is refused admission while a valid one behind it runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tephra_api::PodGroup;
use tephra_api::scheduling::{PodGroupConditionType, PodGroupPhase};

/// Creates a PodGroup of `min` members and `n` pods of it with `spec` merged into each pod's
/// spec (one CPU each).
async fn gang_with(c: &kube::Client, group: &str, min: i32, n: usize, spec: Value) {
    let pgs: Api<PodGroup> = Api::default_namespaced(c.clone());
    let pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": group}, "spec": {"minMember": min, "queue": "default"}
    }))
    .unwrap();
    pgs.create(&PostParams::default(), &pg).await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    for i in 0..n {
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{group}-{i}"), "labels": {"app": group},
                         "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": {"schedulerName": "volcano", "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}
        });
        for (k, v) in spec.as_object().into_iter().flatten() {
            if k == "ports" {
                pod["spec"]["containers"][0]["ports"] = v.clone();
            } else {
                pod["spec"][k] = v.clone();
            }
        }
        let pod: Pod = serde_json::from_value(pod).unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
}

async fn all_running(c: &kube::Client, prefix: &str, n: usize) -> Vec<Pod> {
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    eventually(30, &format!("{n} {prefix}* pods running"), || async {
        let list: Vec<Pod> = pods
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .filter(|p| {
                p.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(prefix))
            })
            .collect();
        let phases: Vec<_> = list
            .iter()
            .map(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.phase.clone())
                    .unwrap_or_default()
            })
            .collect();
        assert!(
            !phases.iter().any(|p| p == "Failed"),
            "a pod was refused by its kubelet: {:?}",
            list.iter().map(|p| &p.status).collect::<Vec<_>>()
        );
        (list.len() == n && phases.iter().all(|p| p == "Running")).then_some(list)
    })
    .await
}

async fn condition(c: &kube::Client, group: &str, reason: &str) -> String {
    eventually(
        20,
        &format!("{group} Unschedulable with {reason}"),
        || async {
            let pg = podgroup(c, "default", group).await;
            pg.status?
                .conditions
                .into_iter()
                .find(|c| {
                    c.type_ == PodGroupConditionType::Unschedulable
                        && c.reason.as_deref() == Some(reason)
                })
                .and_then(|c| c.message)
        },
    )
    .await
}

on_both!(
    a_gated_gang_is_never_tried_until_its_gates_are_removed,
    gated_gang
);
async fn gated_gang(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0), node("n1", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    gang_with(
        &c,
        "gated",
        2,
        2,
        json!({"schedulingGates": [{"name": "example.com/admit"}]}),
    )
    .await;
    let message = condition(&c, "gated", "SchedulingGated").await;
    assert!(message.contains("example.com/admit"), "{message}");
    // Many sessions later: nothing bound, and no bind was even sent.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert!(
        nodes_of(&c, "default", "gated-")
            .await
            .values()
            .all(Option::is_none)
    );
    assert_eq!(binds_sent(&sched).await, 0);
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    for i in 0..2 {
        let clear = json!({"spec": {"schedulingGates": null}});
        pods.patch(
            &format!("gated-{i}"),
            &PatchParams::default(),
            &Patch::Merge(&clear),
        )
        .await
        .unwrap();
    }
    all_running(&c, "gated-", 2).await;
    sched.stop().await;
}

on_both!(
    pods_asking_for_one_host_port_run_on_different_nodes,
    host_ports
);
async fn host_ports(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0), node("n1", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    let ports = json!({"ports": [{"containerPort": 9000, "hostPort": 9000}]});
    gang_with(&c, "ports", 2, 2, ports.clone()).await;
    let pods = all_running(&c, "ports-", 2).await;
    let nodes: std::collections::BTreeSet<_> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    // A third has no node with the port free: it waits, and says why.
    gang_with(&c, "third", 1, 1, ports).await;
    let message = condition(&c, "third", "NotEnoughResources").await;
    assert!(message.contains("didn't have free ports"), "{message}");
    sched.stop().await;
}

on_both!(
    a_zone_spread_constraint_spreads_a_gang_over_the_zones,
    zone_spread
);
async fn zone_spread(backend: Backend) {
    logs();
    let zoned = |name: &str, zone: &str| {
        let mut n = node(name, "8", 0);
        n.labels
            .insert("topology.kubernetes.io/zone".into(), zone.into());
        n
    };
    let Some(cl) = cluster_on(
        backend,
        vec![zoned("a0", "a"), zoned("b0", "b"), zoned("c0", "c")],
    )
    .await
    else {
        return;
    };
    let c = cl.client.clone();
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    let spread = json!({"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]});
    gang_with(&c, "web", 6, 6, spread).await;
    let pods = all_running(&c, "web-", 6).await;
    let mut per_node = std::collections::BTreeMap::new();
    for p in &pods {
        *per_node
            .entry(p.spec.as_ref().unwrap().node_name.clone().unwrap())
            .or_insert(0) += 1;
    }
    assert_eq!(
        per_node.values().copied().collect::<Vec<_>>(),
        vec![2, 2, 2],
        "{per_node:?}"
    );
    sched.stop().await;
}

#[tokio::test]
async fn a_cluster_that_serves_no_dra_api_is_scheduled_as_one_without_devices() {
    logs();
    // Kubernetes before 1.34 serves no resource.k8s.io/v1.
    let mut options = tephra_devcluster::Options::single();
    options.members[0].nodes = vec![node("n0", "8", 0)];
    options.kubelet = fast_kubelet();
    options.queues = vec![queue_json("default", 1)];
    options.server.unserved_groups = vec!["resource.k8s.io".into()];
    let dev = tephra_devcluster::DevCluster::start(options).await.unwrap();
    let c = client(&dev).await;
    let slices: Api<k8s_openapi::api::resource::v1::ResourceSlice> = Api::all(c.clone());
    match slices.list(&Default::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 404, "{s:?}"),
        other => panic!("a server without the group answers 404, got {other:?}"),
    }
    let _sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    gang_with(&c, "plain", 2, 2, json!({})).await;
    all_running(&c, "plain-", 2).await;
}

on_both!(
    a_gang_no_node_could_take_is_not_inqueueable_and_a_valid_one_behind_it_runs,
    not_inqueueable
);
async fn not_inqueueable(backend: Backend) {
    logs();
    let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0)]).await else {
        return;
    };
    let c = cl.client.clone();
    let sched = tephra_kube::start(c.clone(), scheduler_options())
        .await
        .unwrap();
    for i in 0..3 {
        gang_with(
            &c,
            &format!("bad{i}"),
            2,
            2,
            json!({"nodeSelector": {"nvidia.com/gpu.product": "H100"}}),
        )
        .await;
    }
    gang_with(&c, "good", 2, 2, json!({})).await;
    all_running(&c, "good-", 2).await;
    for i in 0..3 {
        let message = condition(&c, &format!("bad{i}"), "NotInqueueable").await;
        assert!(
            message.contains("didn't match Pod's node affinity/selector"),
            "{message}"
        );
        let pg = podgroup(&c, "default", &format!("bad{i}")).await;
        assert_eq!(pg.status.unwrap().phase, Some(PodGroupPhase::Pending));
    }
    sched.stop().await;
}

mod volumes {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use k8s_openapi::api::storage::v1::StorageClass;

    fn zoned(name: &str, zone: &str) -> tephra_devcluster::kubelet::NodeSpec {
        let mut n = node(name, "8", 0);
        n.labels
            .insert("topology.kubernetes.io/zone".into(), zone.into());
        n.labels
            .insert("kubernetes.io/hostname".into(), name.into());
        n
    }

    async fn class(c: &kube::Client, name: &str, provisioner: &str, zones: &[&str]) {
        let mut sc = json!({"metadata": {"name": name}, "provisioner": provisioner,
            "volumeBindingMode": "WaitForFirstConsumer"});
        if !zones.is_empty() {
            sc["allowedTopologies"] = json!([{"matchLabelExpressions": [
                {"key": "topology.kubernetes.io/zone", "values": zones}]}]);
        }
        let api: Api<StorageClass> = Api::all(c.clone());
        api.create(&PostParams::default(), &serde_json::from_value(sc).unwrap())
            .await
            .unwrap();
    }

    async fn claim(c: &kube::Client, name: &str, class: &str) {
        let api: Api<PersistentVolumeClaim> = Api::default_namespaced(c.clone());
        let pvc = json!({"metadata": {"name": name}, "spec": {"storageClassName": class,
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        api.create(
            &PostParams::default(),
            &serde_json::from_value(pvc).unwrap(),
        )
        .await
        .unwrap();
    }

    fn mounts(claim: &str) -> Value {
        json!({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]})
    }

    #[tokio::test]
    async fn a_gang_sharing_a_wait_for_first_consumer_claim_runs_where_it_is_provisioned() {
        logs();
        let dev = cluster(vec![zoned("a1", "a"), zoned("b1", "b"), zoned("c1", "c")]).await;
        let c = client(&dev).await;
        class(&c, "zonal", "csi.example.com", &["b"]).await;
        claim(&c, "shared", "zonal").await;
        let sched = tephra_kube::start(c.clone(), scheduler_options())
            .await
            .unwrap();
        gang_with(&c, "train", 2, 2, mounts("shared")).await;
        let pods = all_running(&c, "train-", 2).await;
        for p in &pods {
            assert_eq!(p.spec.as_ref().unwrap().node_name.as_deref(), Some("b1"));
        }
        let pvc = Api::<PersistentVolumeClaim>::default_namespaced(c.clone())
            .get("shared")
            .await
            .unwrap();
        let a = pvc.metadata.annotations.unwrap();
        assert_eq!(
            a.get("volume.kubernetes.io/selected-node")
                .map(String::as_str),
            Some("b1")
        );
        assert!(a.contains_key("pv.kubernetes.io/bind-completed"));
        sched.stop().await;
    }

    #[tokio::test]
    async fn pods_with_claims_for_local_volumes_run_on_the_volumes_nodes() {
        logs();
        let dev = cluster(vec![zoned("a1", "a"), zoned("b1", "b")]).await;
        let c = client(&dev).await;
        class(&c, "local", "kubernetes.io/no-provisioner", &[]).await;
        let pvs: Api<PersistentVolume> = Api::all(c.clone());
        for n in ["a1", "b1"] {
            let pv = json!({"metadata": {"name": format!("disk-{n}")}, "spec": {
                "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local", "local": {"path": "/mnt/disk"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [n]}]}]}}}});
            pvs.create(&PostParams::default(), &serde_json::from_value(pv).unwrap())
                .await
                .unwrap();
        }
        claim(&c, "d0", "local").await;
        claim(&c, "d1", "local").await;
        let sched = tephra_kube::start(c.clone(), scheduler_options())
            .await
            .unwrap();
        gang_with(&c, "first", 1, 1, mounts("d0")).await;
        gang_with(&c, "second", 1, 1, mounts("d1")).await;
        let first = all_running(&c, "first-", 1).await;
        let second = all_running(&c, "second-", 1).await;
        let node = |p: &[Pod]| p[0].spec.as_ref().unwrap().node_name.clone().unwrap();
        assert_ne!(
            node(&first),
            node(&second),
            "each took the volume of its own node"
        );
        let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(c.clone());
        for (claim, pod) in [("d0", &first), ("d1", &second)] {
            let v = claims
                .get(claim)
                .await
                .unwrap()
                .spec
                .unwrap()
                .volume_name
                .unwrap();
            assert_eq!(v, format!("disk-{}", node(pod)));
        }
        // A third claim has no volume left and no provisioner: it never fits.
        claim(&c, "d2", "local").await;
        gang_with(&c, "third", 1, 1, mounts("d2")).await;
        let message = condition(&c, "third", "NotInqueueable").await;
        assert!(
            message.contains("didn't find available persistent volumes to bind"),
            "{message}"
        );
        sched.stop().await;
    }
}

mod devices {
    use super::*;
    use k8s_openapi::api::resource::v1::ResourceClaim;
    use kube::api::DynamicObject;
    use kube::discovery::ApiResource;

    async fn create(c: &kube::Client, kind: &str, plural: &str, namespaced: bool, obj: Value) {
        let ar = ApiResource {
            group: "resource.k8s.io".into(),
            version: "v1".into(),
            api_version: "resource.k8s.io/v1".into(),
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = if namespaced {
            Api::default_namespaced_with(c.clone(), &ar)
        } else {
            Api::all_with(c.clone(), &ar)
        };
        api.create(
            &PostParams::default(),
            &serde_json::from_value(obj).unwrap(),
        )
        .await
        .unwrap();
    }

    /// A DRA driver's slice of `n` GPUs of `model` on `node`.
    async fn gpus(c: &kube::Client, node: &str, n: usize, model: &str) {
        let devices: Vec<Value> = (0..n)
            .map(|i| {
                json!({"name": format!("gpu-{i}"),
                            "attributes": {"model": {"string": model}},
                            "capacity": {"memory": {"value": "80Gi"}}})
            })
            .collect();
        create(
            c,
            "ResourceSlice",
            "resourceslices",
            false,
            json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{node}-gpu.example.com")},
            "spec": {"driver": "gpu.example.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}),
        )
        .await;
    }

    #[tokio::test]
    async fn a_gang_of_pods_each_claiming_one_gpu_runs_on_the_nodes_that_have_them() {
        logs();
        let dev = cluster(vec![
            node("n0", "8", 0),
            node("n1", "8", 0),
            node("n2", "8", 0),
        ])
        .await;
        let c = client(&dev).await;
        create(&c, "DeviceClass", "deviceclasses", false, json!({"apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}})).await;
        create(&c, "ResourceClaimTemplate", "resourceclaimtemplates", true, json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-h100"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.example.com",
                "selectors": [{"cel": {"expression":
                    "device.attributes['gpu.example.com'].model == 'h100' && device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0"}}]}}]}}}})).await;
        gpus(&c, "n0", 1, "h100").await;
        gpus(&c, "n1", 1, "a100").await;
        gpus(&c, "n2", 1, "h100").await;
        let sched = tephra_kube::start(c.clone(), scheduler_options())
            .await
            .unwrap();
        let claim =
            json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-h100"}]});
        gang_with(&c, "train", 2, 2, claim.clone()).await;
        let pods = all_running(&c, "train-", 2).await;
        let nodes: std::collections::BTreeSet<_> = pods
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        assert_eq!(nodes, ["n0".to_string(), "n2".to_string()].into());
        let claims: Api<ResourceClaim> = Api::default_namespaced(c.clone());
        for p in &pods {
            let name = p
                .status
                .as_ref()
                .unwrap()
                .resource_claim_statuses
                .as_ref()
                .unwrap()[0]
                .resource_claim_name
                .clone()
                .unwrap();
            let rc = claims.get(&name).await.unwrap();
            let s = rc.status.unwrap();
            let r = &s.allocation.unwrap().devices.unwrap().results.unwrap()[0];
            assert_eq!(
                &r.pool,
                p.spec.as_ref().unwrap().node_name.as_ref().unwrap()
            );
            assert_eq!(
                s.reserved_for.unwrap()[0].uid,
                p.metadata.uid.clone().unwrap()
            );
        }
        // A third pod finds no free H100: it waits, saying so.
        gang_with(&c, "third", 1, 1, claim).await;
        let message = condition(&c, "third", "NotEnoughResources").await;
        assert!(message.contains("cannot allocate all claims"), "{message}");
        sched.stop().await;
    }

    on_both!(
        a_gang_sharing_one_claim_allocates_it_once_and_runs_with_its_device,
        shared_claim
    );
    async fn shared_claim(backend: Backend) {
        logs();
        let nodes = vec![node("n0", "8", 0), node("n1", "8", 0)];
        let Some(cl) = cluster_on(backend, nodes).await else {
            return;
        };
        let c = cl.client.clone();
        create(&c, "DeviceClass", "deviceclasses", false, json!({"apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}})).await;
        create(
            &c,
            "ResourceClaim",
            "resourceclaims",
            true,
            json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "shared"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.example.com"}}]}}}),
        )
        .await;
        gpus(&c, "n1", 1, "h100").await;
        let sched = tephra_kube::start(c.clone(), scheduler_options())
            .await
            .unwrap();
        // Three pods of one gang name the same claim: one device, allocated once, the pods
        // on its node, each reserving it (a second allocation would be refused).
        let claim = json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}]});
        gang_with(&c, "infer", 3, 3, claim).await;
        eventually(60, "the gang bound with the shared claim", || async {
            let bound = nodes_of(&c, "default", "infer-").await;
            (bound.len() == 3 && bound.values().all(|n| n.as_deref() == Some("n1"))).then_some(())
        })
        .await;
        let claims: Api<ResourceClaim> = Api::default_namespaced(c.clone());
        let rc = claims.get("shared").await.unwrap();
        let s = rc.status.unwrap();
        let results = s.allocation.unwrap().devices.unwrap().results.unwrap();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].pool, "n1");
        assert_eq!(s.reserved_for.unwrap_or_default().len(), 3);
        // No write of the gang was refused on the way (a gang seen before all its pods exist
        // may wait, saying so; that is not a refused write).
        let events: Api<k8s_openapi::api::core::v1::Event> = Api::default_namespaced(c.clone());
        let failed: Vec<String> = events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some("FailedScheduling")
                    && e.message.as_deref().is_some_and(|m| m.contains("PreBind"))
                    && e.involved_object
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with("infer-"))
            })
            .filter_map(|e| e.message)
            .collect();
        assert!(failed.is_empty(), "{failed:?}");
        sched.stop().await;
    }

    /// Node `n`'s shared devices, as a driver on Kubernetes 1.36+ publishes them: one 80Gi GPU
    /// cut in halves (40Gi) and quarters (20Gi) that draw on one counter set (a counter slice
    /// and a device slice of one pool), and a NIC whose 10G of bandwidth pods share (at least
    /// 1G, in steps of 1G, 1G by default).
    async fn shared_devices(c: &kube::Client, n: &str) {
        let slice = |name: String, pool: &str, spec: Value| {
            let mut s = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": name},
                "spec": {"nodeName": n, "pool": {"name": pool, "generation": 1,
                    "resourceSliceCount": 1}}});
            for (k, v) in spec.as_object().unwrap() {
                s["spec"][k] = v.clone();
            }
            s
        };
        let part = |name: &str, profile: &str, memory: &str| {
            json!({"name": name, "attributes": {"profile": {"string": profile}},
                "consumesCounters": [{"counterSet": "gpu-0",
                    "counters": {"memory": {"value": memory}}}]})
        };
        let mut gpu = slice(
            format!("{n}-gpu"),
            n,
            json!({"driver": "gpu.example.com",
            "devices": [part("half-0", "half", "40Gi"), part("half-1", "half", "40Gi"),
                part("quarter-0", "quarter", "20Gi"), part("quarter-1", "quarter", "20Gi"),
                part("quarter-2", "quarter", "20Gi"), part("quarter-3", "quarter", "20Gi")]}),
        );
        gpu["spec"]["pool"]["resourceSliceCount"] = json!(2);
        let mut counters = slice(
            format!("{n}-counters"),
            n,
            json!({"driver": "gpu.example.com",
            "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]}),
        );
        counters["spec"]["pool"]["resourceSliceCount"] = json!(2);
        let nic = slice(
            format!("{n}-nics"),
            &format!("{n}-nics"),
            json!({
            "driver": "nic.example.com",
            "devices": [{"name": "eth0", "allowMultipleAllocations": true,
                "capacity": {"bandwidth": {"value": "10G", "requestPolicy": {"default": "1G",
                    "validRange": {"min": "1G", "step": "1G"}}}}}]}),
        );
        for s in [counters, gpu, nic] {
            create(c, "ResourceSlice", "resourceslices", false, s).await;
        }
    }

    /// `prefix-h0..2` each claiming half a GPU and `prefix-n0..3` each claiming 2500M of the
    /// NIC, kept to node `prefix`: tephra's in PodGroups of one, or kube-scheduler's bare pods.
    async fn sharing_pods(c: &kube::Client, prefix: &str, tephra: bool) {
        let mut claims = Vec::new();
        for i in 0..3 {
            claims.push((
                format!("{prefix}-h{i}"),
                json!({"name": "gpu", "exactly": {
                "deviceClassName": "gpu.example.com", "selectors": [{"cel": {"expression":
                    "device.attributes['gpu.example.com'].profile == 'half'"}}]}}),
            ));
        }
        for i in 0..4 {
            claims.push((
                format!("{prefix}-n{i}"),
                json!({"name": "nic", "exactly": {
                "deviceClassName": "nic.example.com",
                "capacity": {"requests": {"bandwidth": "2500M"}}}}),
            ));
        }
        let pods: Api<Pod> = Api::default_namespaced(c.clone());
        for (name, request) in claims {
            create(
                c,
                "ResourceClaim",
                "resourceclaims",
                true,
                json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name}, "spec": {"devices": {"requests": [request]}}}),
            )
            .await;
            let spec = json!({"nodeSelector": {"kubernetes.io/hostname": prefix},
                "resourceClaims": [{"name": "dev", "resourceClaimName": name}]});
            if tephra {
                gang_with(c, &name, 1, 1, spec).await;
            } else {
                let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("{name}-0")},
                    "spec": {"containers": [{"name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": "100m"}}}]}});
                for (k, v) in spec.as_object().unwrap() {
                    pod["spec"][k] = v.clone();
                }
                pods.create(
                    &PostParams::default(),
                    &serde_json::from_value(pod).unwrap(),
                )
                .await
                .unwrap();
            }
        }
    }

    /// How many pods of `prefix` are bound.
    async fn bound(c: &kube::Client, prefix: &str) -> usize {
        nodes_of(c, "default", prefix)
            .await
            .values()
            .filter(|n| n.is_some())
            .count()
    }

    /// What each allocated share of `prefix`'s NIC claims consumes, in thousandths, and
    /// whether it is named by a share ID.
    async fn nic_shares(c: &kube::Client, prefix: &str) -> Vec<(i128, bool)> {
        let claims: Api<ResourceClaim> = Api::default_namespaced(c.clone());
        let mut out = Vec::new();
        for rc in claims.list(&Default::default()).await.unwrap().items {
            let name = rc.metadata.name.clone().unwrap_or_default();
            if !name.starts_with(&format!("{prefix}-n")) {
                continue;
            }
            let results = rc
                .status
                .and_then(|s| s.allocation)
                .and_then(|a| a.devices)
                .and_then(|d| d.results)
                .unwrap_or_default();
            for r in results {
                let q = r.consumed_capacity.unwrap_or_default();
                let m =
                    tephra_scheduler::quantity::parse_scaled_wide(&q["bandwidth"].0, 1000).unwrap();
                out.push((m, r.share_id.is_some()));
            }
        }
        out
    }

    on_both!(
        partitions_and_shares_of_devices_bind_as_kube_scheduler_allocates_them,
        device_sharing
    );
    async fn device_sharing(backend: Backend) {
        logs();
        let real = backend == Backend::KubeApiserver;
        // Partitionable devices and consumable capacity are served (beta) from 1.36. On the
        // real cluster kube-scheduler places the same pods on a twin node: the oracle.
        let options = tephra_envtest::ClusterOptions {
            scheduler: real.then_some(Value::Null),
            ..Default::default()
        };
        let nodes = vec![node("t", "8", 0), node("k", "8", 0)];
        let Some(cl) =
            cluster_on_release(backend, &tephra_envtest::Release::Newest, nodes, options).await
        else {
            return;
        };
        let c = cl.client.clone();
        for driver in ["gpu.example.com", "nic.example.com"] {
            create(
                &c,
                "DeviceClass",
                "deviceclasses",
                false,
                json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": driver}, "spec": {"selectors": [{"cel": {"expression":
                    format!("device.driver == '{driver}'")}}]}}),
            )
            .await;
        }
        shared_devices(&c, "t").await;
        shared_devices(&c, "k").await;
        let sched = tephra_kube::start(c.clone(), scheduler_options())
            .await
            .unwrap();
        sharing_pods(&c, "t", true).await;
        if real {
            sharing_pods(&c, "k", false).await;
        }
        // Two halves fill the GPU's counters; 2500M rounds up to 3G, so three shares fit the
        // NIC's 10G and a fourth does not.
        eventually(60, "tephra bound two halves and three shares", || async {
            (bound(&c, "t-h").await == 2 && bound(&c, "t-n").await == 3).then_some(())
        })
        .await;
        let waiting = nodes_of(&c, "default", "t-")
            .await
            .into_iter()
            .filter(|(_, n)| n.is_none())
            .map(|(p, _)| p.trim_end_matches("-0").to_string())
            .collect::<Vec<_>>();
        assert_eq!(waiting.len(), 2, "{waiting:?}");
        for group in &waiting {
            let message = condition(&c, group, "NotEnoughResources").await;
            assert!(message.contains("cannot allocate all claims"), "{message}");
        }
        let shares = nic_shares(&c, "t").await;
        assert_eq!(shares, vec![(3_000_000_000_000, true); 3]);
        if real {
            eventually(60, "kube-scheduler bound its pods", || async {
                (bound(&c, "k-h").await == 2 && bound(&c, "k-n").await == 3).then_some(())
            })
            .await;
            let mut theirs = nic_shares(&c, "k").await;
            theirs.sort();
            assert_eq!(
                theirs, shares,
                "kube-scheduler's shares consume what tephra's do"
            );
        }
        // Neither scheduler gives more than there is, given time.
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        assert_eq!((bound(&c, "t-h").await, bound(&c, "t-n").await), (2, 3));
        if real {
            assert_eq!((bound(&c, "k-h").await, bound(&c, "k-n").await), (2, 3));
        }
        // The kubelets start what tephra bound: each claim was reserved for its pod.
        let pods: Api<Pod> = Api::default_namespaced(c.clone());
        eventually(30, "tephra's bound pods running", || async {
            let list = pods.list(&Default::default()).await.ok()?.items;
            let running = list
                .iter()
                .filter(|p| {
                    p.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with("t-"))
                })
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count();
            (running == 5).then_some(())
        })
        .await;
        // A share is named by a UUID in its normalized form: both servers refuse another.
        create(
            &c,
            "ResourceClaim",
            "resourceclaims",
            true,
            json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "named"}, "spec": {"devices": {"requests": [{"name": "nic",
                "exactly": {"deviceClassName": "nic.example.com"}}]}}}),
        )
        .await;
        let claims: Api<ResourceClaim> = Api::default_namespaced(c.clone());
        let status = |id: &str| {
            json!({"status": {"allocation": {"devices": {"results": [{"request": "nic",
                "driver": "nic.example.com", "pool": "t-nics", "device": "eth0",
                "shareID": id}]}}}})
        };
        let upper = "AAAAAAAA-AAAA-5AAA-AAAA-AAAAAAAAAAAA";
        match claims
            .patch_status(
                "named",
                &PatchParams::default(),
                &Patch::Merge(status(upper)),
            )
            .await
        {
            Err(kube::Error::Api(e)) => {
                assert_eq!(e.code, 422, "{e:?}");
                assert!(e.message.contains("shareID"), "{}", e.message);
            }
            other => panic!("an upper-case share ID is refused, got {other:?}"),
        }
        claims
            .patch_status(
                "named",
                &PatchParams::default(),
                &Patch::Merge(status(&upper.to_lowercase())),
            )
            .await
            .unwrap();
        sched.stop().await;
    }

    /// A DeviceClass, node `n1`'s slice of two GPUs and the claims `names` (one GPU each).
    async fn two_gpus_and_claims(c: &kube::Client, names: &[&str]) {
        create(c, "DeviceClass", "deviceclasses", false, json!({"apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}})).await;
        gpus(c, "n1", 2, "h100").await;
        for name in names {
            create(
                c,
                "ResourceClaim",
                "resourceclaims",
                true,
                json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": name},
                    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                        "deviceClassName": "gpu.example.com"}}]}}}),
            )
            .await;
        }
    }

    /// What a scheduler writes allocating `device` of `n1` to a claim.
    fn allocation(device: &str) -> Value {
        json!({"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
                                         "pool": "n1", "device": device}]},
               "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                   {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}})
    }

    /// A pod named `name` using the claim `claim`, held by a scheduling gate (so that nothing
    /// binds it).
    async fn gated_claimant(c: &kube::Client, name: &str, claim: &str) -> String {
        let pods: Api<Pod> = Api::default_namespaced(c.clone());
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"schedulerName": "volcano", "schedulingGates": [{"name": "example.com/hold"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                "containers": [{"name": "main", "image": "busybox",
                    "resources": {"claims": [{"name": "gpu"}]}}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &pod)
            .await
            .unwrap()
            .metadata
            .uid
            .unwrap()
    }

    /// The claim's allocation, its reservations by pod name, and whether it holds the
    /// `delete-protection` finalizer.
    async fn claim_state(c: &kube::Client, name: &str) -> Option<(bool, Vec<String>, bool)> {
        let claims: Api<ResourceClaim> = Api::default_namespaced(c.clone());
        let rc = claims.get_opt(name).await.unwrap()?;
        let s = rc.status.unwrap_or_default();
        let protected = rc
            .metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == tephra_kube::prebind::DELETE_PROTECTION);
        let reserved = s
            .reserved_for
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.name)
            .collect();
        Some((s.allocation.is_some(), reserved, protected))
    }

    on_both!(
        a_claim_is_deallocated_when_its_last_pod_goes_not_while_reserved_for_nobody,
        claim_release
    );
    /// The claim controller's contract tephra relies on (kube-controller-manager's
    /// `resourceclaim` controller, and the devcluster's): a claim loses its allocation when the
    /// last pod it was reserved for goes, not merely for being reserved for nobody (a
    /// scheduler may allocate before it reserves, and kube-scheduler's Unreserve leaves the
    /// allocation); a deleted claim reserved for nobody is deallocated and goes.
    async fn claim_release(backend: Backend) {
        logs();
        let Some(cl) = cluster_on(backend, vec![node("n1", "8", 0)]).await else {
            return;
        };
        let c = cl.client.clone();
        two_gpus_and_claims(&c, &["idle", "used"]).await;
        let uid = gated_claimant(&c, "user", "used").await;
        let claims: Api<ResourceClaim> = Api::default_namespaced(c.clone());
        let protect =
            json!({"metadata": {"finalizers": [tephra_kube::prebind::DELETE_PROTECTION]}});
        for (name, device, reserved) in [
            ("idle", "gpu-0", json!(null)),
            (
                "used",
                "gpu-1",
                json!([{"resource": "pods", "name": "user", "uid": uid}]),
            ),
        ] {
            claims
                .patch(name, &PatchParams::default(), &Patch::Merge(&protect))
                .await
                .unwrap();
            let status =
                json!({"status": {"allocation": allocation(device), "reservedFor": reserved}});
            claims
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .unwrap();
        }
        // The pod goes: its claim is deallocated and may go.
        let pods: Api<Pod> = Api::default_namespaced(c.clone());
        pods.delete("user", &Default::default()).await.unwrap();
        eventually(30, "the claim of the deleted pod deallocated", || async {
            (claim_state(&c, "used").await? == (false, vec![], false)).then_some(())
        })
        .await;
        // The claim reserved for nobody from the start stays allocated (the controller has
        // seen both claims by now; a moment more for a late pass).
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        assert_eq!(claim_state(&c, "idle").await, Some((true, vec![], true)));
        // Deleted, it is deallocated and goes.
        claims.delete("idle", &Default::default()).await.unwrap();
        eventually(30, "the deleted unreserved claim gone", || async {
            claim_state(&c, "idle").await.is_none().then_some(())
        })
        .await;
    }

    on_both!(
        a_bind_refused_after_its_prebind_gives_the_pods_claim_reservation_back,
        refused_bind_unreserves
    );
    /// kube-scheduler's Unreserve: a gang's PreBind allocated and reserved a claim for a pod
    /// whose bind is then refused (here: the pod is gated, which the API server refuses to
    /// bind); the pod's reservation is taken back, the allocation stays, as kube-scheduler
    /// leaves it.
    async fn refused_bind_unreserves(backend: Backend) {
        use std::collections::BTreeMap;
        use std::sync::Arc;
        use tephra_kube::clients::Clients;
        use tephra_kube::executor::{Executor, Outcome, RateLimiter, Settings};
        use tephra_kube::prebind::DeviceStep;
        use tephra_kube::writes::Write;
        logs();
        let Some(cl) = cluster_on(backend, vec![node("n1", "8", 0)]).await else {
            return;
        };
        let c = cl.client.clone();
        two_gpus_and_claims(&c, &["gpu"]).await;
        gated_claimant(&c, "held", "gpu").await;
        let (done, mut results) = tokio::sync::mpsc::unbounded_channel();
        let executor = Executor::new(
            Clients {
                control: c.clone(),
                members: Arc::new(std::sync::RwLock::new(BTreeMap::from([(
                    "local".to_string(),
                    c.clone(),
                )]))),
            },
            Settings {
                concurrency: 2,
                limiter: RateLimiter::new(0.0, 0),
                identity: "test".into(),
                volume_bind_timeout: std::time::Duration::from_secs(10),
                virtual_node: None,
            },
            tephra_kube::leader::Leadership::always(),
            Arc::new(tephra_kube::metrics::Metrics::new().unwrap()),
            done,
        );
        executor.submit(vec![Write::PreBind {
            cluster: "local".into(),
            job: "default/held".into(),
            steps: vec![],
            devices: vec![DeviceStep {
                namespace: "default".into(),
                claim: "gpu".into(),
                pod: "held".into(),
                allocation: Some(allocation("gpu-0")),
                reserve: true,
            }],
            then: vec![Write::Bind {
                annotations: Default::default(),
                gpu_lock: false,
                cluster: "local".into(),
                namespace: "default".into(),
                name: "held".into(),
                node: "n1".into(),
                job: "default/held".into(),
            }],
        }]);
        let mut bind = None;
        while bind.is_none() {
            let d = tokio::time::timeout(std::time::Duration::from_secs(30), results.recv())
                .await
                .expect("the writes ended")
                .unwrap();
            match d.write {
                Write::PreBind { .. } => assert_eq!(d.outcome, Outcome::Ok),
                Write::Bind { .. } => bind = Some(d.outcome),
                _ => {}
            }
        }
        assert!(
            matches!(&bind, Some(Outcome::Failed { message, .. }) if message.contains("schedulingGates")),
            "the gated pod's bind is refused: {bind:?}"
        );
        eventually(30, "the refused pod's reservation given back", || async {
            (claim_state(&c, "gpu").await? == (true, vec![], true)).then_some(())
        })
        .await;
    }

    on_both!(
        a_claim_allocated_where_its_pod_cannot_go_is_deallocated_and_allocated_again,
        stranded_claim
    );
    /// kube-scheduler's DynamicResources PostFilter: a claim allocated before (a bind that
    /// failed after its PreBind left it so) to a GPU of a node that is cordoned since, reserved
    /// for nobody, keeps its pod off every node; tephra deallocates it and allocates it again
    /// on a node the pod can use, and the pod runs there.
    async fn stranded_claim(backend: Backend) {
        logs();
        let Some(cl) = cluster_on(backend, vec![node("n0", "8", 0), node("n1", "8", 0)]).await
        else {
            return;
        };
        let c = cl.client.clone();
        create(&c, "DeviceClass", "deviceclasses", false, json!({"apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}})).await;
        gpus(&c, "n0", 1, "h100").await;
        gpus(&c, "n1", 1, "h100").await;
        create(
            &c,
            "ResourceClaim",
            "resourceclaims",
            true,
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": "pinned"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": "gpu.example.com"}}]}}}),
        )
        .await;
        let claims: Api<ResourceClaim> = Api::default_namespaced(c.clone());
        let protect =
            json!({"metadata": {"finalizers": [tephra_kube::prebind::DELETE_PROTECTION]}});
        claims
            .patch("pinned", &PatchParams::default(), &Patch::Merge(&protect))
            .await
            .unwrap();
        claims
            .patch_status(
                "pinned",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"allocation": allocation("gpu-0")}})),
            )
            .await
            .unwrap();
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(c.clone());
        nodes
            .patch(
                "n1",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"unschedulable": true}})),
            )
            .await
            .unwrap();
        let sched = tephra_kube::start(c.clone(), scheduler_options())
            .await
            .unwrap();
        let claim = json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": "pinned"}]});
        gang_with(&c, "moved", 1, 1, claim).await;
        let pods = all_running(&c, "moved-", 1).await;
        assert_eq!(
            pods[0].spec.as_ref().unwrap().node_name.as_deref(),
            Some("n0")
        );
        let rc = claims.get("pinned").await.unwrap();
        let s = rc.status.unwrap();
        let results = s.allocation.unwrap().devices.unwrap().results.unwrap();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].pool, "n0");
        assert_eq!(
            s.reserved_for.unwrap()[0].uid,
            pods[0].metadata.uid.clone().unwrap()
        );
        sched.stop().await;
    }

    on_both!(
        a_pod_copy_whose_claim_was_deallocated_meanwhile_is_deleted_again,
        copy_of_deallocated_claim
    );
    /// A declared pod's member copy (fleet mode) is made after its claims were allocated, and
    /// then reserves them. A claim deallocated in between cannot be reserved (the API server
    /// refuses a reservation without an allocation): the copy goes again, for the gang to be
    /// placed anew, rather than wait for its devices for good. With the allocation in place,
    /// the copy stays and holds its claim.
    async fn copy_of_deallocated_claim(backend: Backend) {
        logs();
        let Some(cl) = cluster_on(backend, vec![node("n1", "8", 0)]).await else {
            return;
        };
        let c = cl.client.clone();
        two_gpus_and_claims(&c, &["loose", "kept"]).await;
        let claims: Api<ResourceClaim> = Api::default_namespaced(c.clone());
        claims
            .patch_status(
                "kept",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"allocation": allocation("gpu-0")}})),
            )
            .await
            .unwrap();
        let copy = |name: &str, claim: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
                "spec": {"nodeName": "n1",
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                    "containers": [{"name": "main", "image": "busybox",
                        "resources": {"claims": [{"name": "gpu"}]}}]}}))
            .unwrap()
        };
        let refused = tephra_kube::place::copy(&c, &c, "default", copy("loose-0", "loose")).await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(s)) if s.code == 422),
            "{refused:?}"
        );
        let pods: Api<Pod> = Api::default_namespaced(c.clone());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while pods.get_opt("loose-0").await.unwrap().is_some() {
            assert!(std::time::Instant::now() < deadline, "the copy is deleted");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert_eq!(claim_state(&c, "loose").await, Some((false, vec![], false)));
        tephra_kube::place::copy(&c, &c, "default", copy("kept-0", "kept"))
            .await
            .unwrap();
        assert!(pods.get_opt("kept-0").await.unwrap().is_some());
        assert_eq!(
            claim_state(&c, "kept").await,
            Some((true, vec!["kept-0".to_string()], false))
        );
    }

    on_both!(
        an_allocated_claim_of_a_pod_made_on_its_node_is_reserved_for_it_by_the_claim_controller,
        bound_by_hand
    );
    /// kube-controller-manager's claim controller reserves an allocated claim for a pod that
    /// is on a node already (made with `spec.nodeName`), so its kubelet can prepare it; an
    /// unallocated claim it leaves alone. The devcluster's controller does the same (a fleet's
    /// pod copies are made so, and race it to their reservations).
    async fn bound_by_hand(backend: Backend) {
        logs();
        let Some(cl) = cluster_on(backend, vec![node("n1", "8", 0)]).await else {
            return;
        };
        let c = cl.client.clone();
        two_gpus_and_claims(&c, &["ready", "bare"]).await;
        let claims: Api<ResourceClaim> = Api::default_namespaced(c.clone());
        claims
            .patch_status(
                "ready",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"allocation": allocation("gpu-1")}})),
            )
            .await
            .unwrap();
        let pods: Api<Pod> = Api::default_namespaced(c.clone());
        for (pod, claim) in [("on-ready", "ready"), ("on-bare", "bare")] {
            let p: Pod = serde_json::from_value(json!({"metadata": {"name": pod},
                "spec": {"nodeName": "n1", "schedulerName": "volcano",
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                    "containers": [{"name": "main", "image": "busybox",
                        "resources": {"claims": [{"name": "gpu"}]}}]}}))
            .unwrap();
            pods.create(&PostParams::default(), &p).await.unwrap();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let state = claim_state(&c, "ready").await;
            if state == Some((true, vec!["on-ready".to_string()], false)) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the allocated claim is reserved for its pod: {state:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert_eq!(claim_state(&c, "bare").await, Some((false, vec![], false)));
    }
}
