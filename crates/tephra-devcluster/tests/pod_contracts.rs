//! The devcluster refuses what a real cluster refuses, so that a scheduler that ignores a
//! contract fails a test: kube-apiserver's rules for scheduling gates (no binding while gated,
//! the `SchedulingGated` condition, gates may only be removed) and the kubelet's admission
//! (host ports, node affinity, NoExecute taints), and the Priority admission plugin's, with
//! their status codes and wording.

#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn pod(name: &str, spec: Value) -> Pod {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "main", "image": "busybox",
        "resources": {"requests": {"cpu": "100m"}},
        "ports": spec.get("ports").cloned().unwrap_or(json!([]))}]);
    if let Some(s) = spec.as_object_mut() {
        s.remove("ports");
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

async fn bind(c: &kube::Client, name: &str, node: &str) -> Result<(), kube::Error> {
    let req = http::Request::post(format!("/api/v1/namespaces/default/pods/{name}/binding"))
        .header("content-type", "application/json")
        .body(
            serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name}, "target": {"kind": "Node", "name": node}}))
            .unwrap(),
        )
        .unwrap();
    c.request::<Value>(req).await.map(|_| ())
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test]
async fn a_pod_may_not_bring_a_priority_its_class_does_not_give() {
    let h = common::single().await;
    let c = h.client("local").await.unwrap();
    let pods: Api<Pod> = Api::default_namespaced(c);
    let err = pods
        .create(&PostParams::default(), &pod("p", json!({"priority": 7})))
        .await
        .unwrap_err();
    let s = api_error(err);
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        "pods \"p\" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name"
    );
    let created = pods
        .create(&PostParams::default(), &pod("q", json!({"priority": 0})))
        .await
        .unwrap();
    assert_eq!(created.spec.unwrap().priority, Some(0));
}

#[tokio::test]
async fn a_gated_pod_cannot_be_bound_and_says_why() {
    let h = common::single_with(vec![common::node("n1", "4", 0)]).await;
    let c = common::client(&h, "local").await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    pods.create(
        &PostParams::default(),
        &pod(
            "gated",
            json!({"schedulingGates": [{"name": "example.com/quota"}]}),
        ),
    )
    .await
    .unwrap();
    let p = pods.get("gated").await.unwrap();
    let cond = p
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .expect("the API server marks a gated pod");
    assert_eq!(
        (
            cond.status.as_str(),
            cond.reason.as_deref(),
            cond.message.as_deref()
        ),
        (
            "False",
            Some("SchedulingGated"),
            Some("Scheduling is blocked due to non-empty scheduling gates")
        )
    );
    let e = api_error(bind(&c, "gated", "n1").await.unwrap_err());
    assert_eq!(e.code, 409);
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on pods/binding \"gated\": pod gated has non-empty .spec.schedulingGates"
    );
    // A gate may not be added, only removed.
    let add =
        json!({"spec": {"schedulingGates": [{"name": "example.com/quota"}, {"name": "more"}]}});
    let e = api_error(
        pods.patch("gated", &PatchParams::default(), &Patch::Merge(&add))
            .await
            .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert!(
        e.message
            .contains("only deletion is allowed, but found new scheduling gate 'more'"),
        "{}",
        e.message
    );
    let clear = json!({"spec": {"schedulingGates": null}});
    pods.patch("gated", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    bind(&c, "gated", "n1").await.unwrap();
    // A pod created bound cannot carry gates.
    let e = api_error(
        pods.create(
            &PostParams::default(),
            &pod(
                "both",
                json!({"nodeName": "n1", "schedulingGates": [{"name": "g"}]}),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(e.code, 422);
    assert!(
        e.message
            .contains("cannot be set until all schedulingGates have been cleared"),
        "{}",
        e.message
    );
}

async fn refused(pods: &Api<Pod>, name: &str) -> (String, String) {
    common::eventually(10, &format!("the kubelet refuses {name}"), || async {
        let s = pods.get(name).await.ok()?.status?;
        (s.phase.as_deref() == Some("Failed"))
            .then(|| (s.reason.unwrap_or_default(), s.message.unwrap_or_default()))
    })
    .await
}

async fn running(pods: &Api<Pod>, name: &str) {
    common::eventually(10, &format!("{name} running"), || async {
        let s = pods.get(name).await.ok()?.status?;
        (s.phase.as_deref() == Some("Running")).then_some(())
    })
    .await
}

#[tokio::test]
async fn the_kubelet_refuses_a_second_pod_on_a_host_port_and_records_why() {
    let h = common::single_with(vec![common::node("n1", "4", 0)]).await;
    let c = common::client(&h, "local").await;
    let pods: Api<Pod> = Api::default_namespaced(c.clone());
    let port = json!([{"containerPort": 8080, "hostPort": 8080}]);
    pods.create(
        &PostParams::default(),
        &pod("first", json!({"nodeName": "n1", "ports": port})),
    )
    .await
    .unwrap();
    running(&pods, "first").await;
    // Another protocol on the same port is fine.
    let udp = json!([{"containerPort": 8080, "hostPort": 8080, "protocol": "UDP"}]);
    pods.create(
        &PostParams::default(),
        &pod("udp", json!({"nodeName": "n1", "ports": udp})),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &pod("second", json!({"nodeName": "n1", "ports": port})),
    )
    .await
    .unwrap();
    let (reason, message) = refused(&pods, "second").await;
    assert_eq!(reason, "NodePorts");
    assert_eq!(
        message,
        "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
    );
    running(&pods, "udp").await;
    let events: Api<Event> = Api::default_namespaced(c.clone());
    let e = common::eventually(10, "a NodePorts Event", || async {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.involved_object.name.as_deref() == Some("second"))
    })
    .await;
    assert_eq!(
        (e.type_.as_deref(), e.reason.as_deref()),
        (Some("Warning"), Some("NodePorts"))
    );
}

#[tokio::test]
async fn the_kubelet_refuses_a_pod_its_node_does_not_match_or_whose_taint_it_does_not_tolerate() {
    let mut n1 = common::node("n1", "4", 0);
    n1.labels.insert("disk".into(), "hdd".into());
    n1.taints = vec![json!({"key": "drain", "value": "now", "effect": "NoExecute"})];
    let h = common::single_with(vec![n1]).await;
    let pods: Api<Pod> = Api::default_namespaced(common::client(&h, "local").await);
    let tolerate = json!([{"key": "drain", "operator": "Exists"}]);
    pods.create(
        &PostParams::default(),
        &pod(
            "wants-ssd",
            json!({"nodeName": "n1", "nodeSelector": {"disk": "ssd"}, "tolerations": tolerate}),
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        refused(&pods, "wants-ssd").await,
        (
            "NodeAffinity".into(),
            "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector".into()
        )
    );
    pods.create(
        &PostParams::default(),
        &pod("intolerant", json!({"nodeName": "n1"})),
    )
    .await
    .unwrap();
    assert_eq!(refused(&pods, "intolerant").await.0, "TaintToleration");
    pods.create(
        &PostParams::default(),
        &pod(
            "fine",
            json!({"nodeName": "n1", "nodeSelector": {"disk": "hdd"}, "tolerations": tolerate}),
        ),
    )
    .await
    .unwrap();
    running(&pods, "fine").await;
}

mod volumes {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use k8s_openapi::api::storage::v1::StorageClass;

    async fn apply<K>(c: &kube::Client, obj: Value)
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        let api: Api<K> = Api::default_namespaced(c.clone());
        api.create(
            &PostParams::default(),
            &serde_json::from_value(obj).unwrap(),
        )
        .await
        .unwrap();
    }

    async fn class(c: &kube::Client, obj: Value) {
        let api: Api<StorageClass> = Api::all(c.clone());
        api.create(
            &PostParams::default(),
            &serde_json::from_value(obj).unwrap(),
        )
        .await
        .unwrap();
    }

    fn zoned(name: &str, zone: &str) -> tephra_devcluster::kubelet::NodeSpec {
        let mut n = common::node(name, "4", 0);
        n.labels
            .insert("topology.kubernetes.io/zone".into(), zone.into());
        n
    }

    fn claim(name: &str, class: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"storageClassName": class,
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    }

    fn mounting(name: &str, node: &str, claim: &str) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": name}, "spec": {"nodeName": node,
            "containers": [{"name": "main", "image": "busybox"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}}),
        )
        .unwrap()
    }

    pub async fn event(c: &kube::Client, object: &str, reason: &str) -> String {
        let events: Api<Event> = Api::default_namespaced(c.clone());
        common::eventually(10, &format!("a {reason} Event on {object}"), || async {
            events
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| {
                    e.involved_object.name.as_deref() == Some(object)
                        && e.reason.as_deref() == Some(reason)
                })
                .and_then(|e| e.message)
        })
        .await
    }

    #[tokio::test]
    async fn a_wait_for_first_consumer_claim_is_provisioned_on_the_node_the_scheduler_names() {
        let h = common::single_with(vec![zoned("a1", "a"), zoned("b1", "b")]).await;
        let c = common::client(&h, "local").await;
        class(
            &c,
            json!({"metadata": {"name": "zonal"}, "provisioner": "csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [
                {"key": "topology.kubernetes.io/zone", "values": ["b"]}]}]}),
        )
        .await;
        apply::<PersistentVolumeClaim>(&c, claim("data", "zonal")).await;
        let pods: Api<Pod> = Api::default_namespaced(c.clone());
        // A pod bound without the claim being given its node: the kubelet waits for it.
        pods.create(&PostParams::default(), &mounting("early", "b1", "data"))
            .await
            .unwrap();
        let why = event(&c, "early", "FailedMount").await;
        assert!(
            why.ends_with("error processing PVC default/data: PVC is not bound"),
            "{why}"
        );
        assert_eq!(
            pods.get("early")
                .await
                .unwrap()
                .status
                .unwrap()
                .phase
                .as_deref(),
            Some("Pending")
        );
        // The scheduler's choice: node b1, inside the allowed zone.
        let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(c.clone());
        let select =
            json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "b1"}}});
        claims
            .patch("data", &PatchParams::default(), &Patch::Merge(&select))
            .await
            .unwrap();
        running(&pods, "early").await;
        let pvc = claims.get("data").await.unwrap();
        let volume = pvc.spec.unwrap().volume_name.unwrap();
        assert_eq!(volume, format!("pvc-{}", pvc.metadata.uid.unwrap()));
        assert_eq!(pvc.status.unwrap().phase.as_deref(), Some("Bound"));
        let pv = Api::<PersistentVolume>::all(c.clone())
            .get(&volume)
            .await
            .unwrap();
        let spec = pv.spec.unwrap();
        assert_eq!(spec.csi.unwrap().driver, "csi.example.com");
        let term = &spec
            .node_affinity
            .unwrap()
            .required
            .unwrap()
            .node_selector_terms[0];
        let e = &term.match_expressions.as_ref().unwrap()[0];
        assert_eq!(
            (e.key.as_str(), e.values.clone().unwrap()),
            ("topology.kubernetes.io/zone", vec!["b".to_string()])
        );
        // Outside the allowed zone the provisioner gives up and takes the node back.
        apply::<PersistentVolumeClaim>(&c, claim("other", "zonal")).await;
        let select =
            json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "a1"}}});
        claims
            .patch("other", &PatchParams::default(), &Patch::Merge(&select))
            .await
            .unwrap();
        let why = event(&c, "other", "ProvisioningFailed").await;
        assert!(why.contains("allowedTopologies"), "{why}");
        common::eventually(10, "the selected node taken back", || async {
            let a = claims
                .get("other")
                .await
                .ok()?
                .metadata
                .annotations
                .unwrap_or_default();
            (!a.contains_key("volume.kubernetes.io/selected-node")).then_some(())
        })
        .await;
    }

    /// As on a cluster where that CSI driver's external provisioner is not running.
    #[tokio::test]
    async fn a_claim_of_an_idle_provisioners_class_waits_on_the_node_it_was_given() {
        let mut options = tephra_devcluster::Options::single();
        options.members[0].nodes = vec![zoned("a1", "a")];
        options.server.idle_provisioners = vec!["csi.down.example.com".into()];
        let h = tephra_devcluster::DevCluster::start(options).await.unwrap();
        let c = common::client(&h, "local").await;
        for (name, provisioner) in [("down", "csi.down.example.com"), ("up", "csi.example.com")] {
            class(
                &c,
                json!({"metadata": {"name": name}, "provisioner": provisioner,
                       "volumeBindingMode": "WaitForFirstConsumer"}),
            )
            .await;
            apply::<PersistentVolumeClaim>(&c, claim(name, name)).await;
        }
        let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(c.clone());
        let select =
            json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "a1"}}});
        for name in ["down", "up"] {
            claims
                .patch(name, &PatchParams::default(), &Patch::Merge(&select))
                .await
                .unwrap();
        }
        common::eventually(10, "the running provisioner's claim bound", || async {
            let phase = claims.get("up").await.ok()?.status?.phase?;
            (phase == "Bound").then_some(())
        })
        .await;
        let down = claims.get("down").await.unwrap();
        assert_eq!(down.spec.unwrap().volume_name, None);
        assert_eq!(down.status.unwrap().phase.as_deref(), Some("Pending"));
    }

    #[tokio::test]
    async fn a_volume_given_to_a_claim_is_bound_to_it_and_its_node_affinity_holds_at_the_kubelet() {
        let h = common::single_with(vec![zoned("a1", "a"), zoned("b1", "b")]).await;
        let c = common::client(&h, "local").await;
        class(
            &c,
            json!({"metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer"}),
        )
        .await;
        let pvs: Api<PersistentVolume> = Api::all(c.clone());
        let pv = json!({"metadata": {"name": "disk-a1"}, "spec": {"capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"], "storageClassName": "local", "local": {"path": "/mnt/disk"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a1"]}]}]}}}});
        pvs.create(&PostParams::default(), &serde_json::from_value(pv).unwrap())
            .await
            .unwrap();
        common::eventually(10, "the volume Available", || async {
            let p = pvs.get("disk-a1").await.ok()?;
            (p.status?.phase.as_deref() == Some("Available")).then_some(())
        })
        .await;
        apply::<PersistentVolumeClaim>(&c, claim("data", "local")).await;
        // What the scheduler writes for a static choice: the volume's claimRef.
        let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(c.clone());
        let uid = claims.get("data").await.unwrap().metadata.uid.unwrap();
        let take = json!({"spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
            "namespace": "default", "name": "data", "uid": uid}}});
        pvs.patch("disk-a1", &PatchParams::default(), &Patch::Merge(&take))
            .await
            .unwrap();
        common::eventually(10, "the claim bound to it", || async {
            let p = claims.get("data").await.ok()?;
            let bound = p
                .metadata
                .annotations?
                .contains_key("pv.kubernetes.io/bind-completed");
            (bound && p.spec?.volume_name.as_deref() == Some("disk-a1")).then_some(())
        })
        .await;
        // A pod bound to the wrong node cannot mount it.
        let pods: Api<Pod> = Api::default_namespaced(c.clone());
        pods.create(&PostParams::default(), &mounting("wrong", "b1", "data"))
            .await
            .unwrap();
        let why = event(&c, "wrong", "FailedMount").await;
        assert_eq!(
            why,
            "MountVolume.NodeAffinity check failed for volume \"disk-a1\" : no matching NodeSelectorTerms"
        );
        pods.create(&PostParams::default(), &mounting("right", "a1", "data"))
            .await
            .unwrap();
        running(&pods, "right").await;
    }

    #[tokio::test]
    async fn a_pod_waits_for_the_configmap_and_secret_its_volumes_name_unless_optional() {
        let h = common::single_with(vec![common::node("n1", "4", 0)]).await;
        let c = common::client(&h, "local").await;
        let pods: Api<Pod> = Api::default_namespaced(c.clone());
        let p: Pod = serde_json::from_value(json!({"metadata": {"name": "needs"},
            "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "busybox"}],
                "volumes": [
                    {"name": "hosts", "configMap": {"name": "cfg"}},
                    {"name": "maybe", "configMap": {"name": "absent", "optional": true}},
                    {"name": "keys", "projected": {"sources": [{"secret": {"name": "ssh"}}]}}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &p).await.unwrap();
        let why = event(&c, "needs", "FailedMount").await;
        assert_eq!(
            why,
            "MountVolume.SetUp failed for volume \"hosts\" : configmap \"cfg\" not found"
        );
        let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::default_namespaced(c.clone());
        cms.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "cfg"}})).unwrap(),
        )
        .await
        .unwrap();
        // Still the Secret of the projected volume.
        common::eventually(10, "the FailedMount for the Secret", || async {
            let events: Api<Event> = Api::default_namespaced(c.clone());
            let list = events.list(&ListParams::default()).await.ok()?.items;
            list.into_iter()
                .filter_map(|e| e.message)
                .find(|m| m.ends_with("secret \"ssh\" not found"))
        })
        .await;
        assert_eq!(
            pods.get("needs")
                .await
                .unwrap()
                .status
                .unwrap()
                .phase
                .as_deref(),
            Some("Pending")
        );
        let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::default_namespaced(c.clone());
        secrets
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "ssh"}})).unwrap(),
            )
            .await
            .unwrap();
        running(&pods, "needs").await;
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

    #[tokio::test]
    async fn a_pods_template_claim_is_generated_and_the_kubelet_runs_it_only_once_reserved() {
        let h = common::single_with(vec![common::node("n1", "4", 0)]).await;
        let c = common::client(&h, "local").await;
        create(&c, "DeviceClass", "deviceclasses", false, json!({"apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass", "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}})).await;
        create(&c, "ResourceClaimTemplate", "resourceclaimtemplates", true, json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}})).await;
        let pods: Api<Pod> = Api::default_namespaced(c.clone());
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "trainer",
                "annotations": {"tephra.io/sim-duration": "300ms"}},
            "spec": {"nodeName": "n1", "restartPolicy": "Never",
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                "containers": [{"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        // The controller generates the claim and records it on the pod.
        let claim_name = common::eventually(10, "the generated claim recorded", || async {
            let p = pods.get("trainer").await.ok()?;
            let s = p.status?.resource_claim_statuses?;
            s.first()?.resource_claim_name.clone()
        })
        .await;
        assert!(claim_name.starts_with("trainer-gpu-"), "{claim_name}");
        // Not allocated or reserved: the kubelet does not start it.
        let why = super::volumes::event(&c, "trainer", "FailedPrepareDynamicResources").await;
        assert!(why.contains("is not allowed to use ResourceClaim"), "{why}");
        // What the scheduler writes: the allocation and the pod's reservation.
        let claims: Api<ResourceClaim> = Api::default_namespaced(c.clone());
        let uid = pods.get("trainer").await.unwrap().metadata.uid.unwrap();
        let status = json!({"status": {
            "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
                                                     "pool": "n1", "device": "gpu-0"}]},
                           "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                               {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
            "reservedFor": [{"resource": "pods", "name": "trainer", "uid": uid}]}});
        let finalizer =
            json!({"metadata": {"finalizers": ["resource.kubernetes.io/delete-protection"]}});
        claims
            .patch(
                &claim_name,
                &PatchParams::default(),
                &Patch::Merge(&finalizer),
            )
            .await
            .unwrap();
        claims
            .patch_status(&claim_name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
        // It runs, finishes, and the claim is released and deallocated.
        common::eventually(10, "the pod to succeed", || async {
            let s = pods.get("trainer").await.ok()?.status?;
            (s.phase.as_deref() == Some("Succeeded")).then_some(())
        })
        .await;
        common::eventually(10, "the claim deallocated", || async {
            let c = claims.get(&claim_name).await.ok()?;
            let s = c.status.unwrap_or_default();
            let free = s.allocation.is_none() && s.reserved_for.unwrap_or_default().is_empty();
            (free && c.metadata.finalizers.unwrap_or_default().is_empty()).then_some(())
        })
        .await;
    }
}
