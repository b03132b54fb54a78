//! Three members from Cluster objects: a gang declared on the control plane lands whole in the
//! one member where it fits, its pods are created there on their nodes, and its
//! ResourceBinding says so (and, in its aggregated status, that it runs there), as do the
//! declared pods (their status, and their member label). A member whose
//! Cluster is deleted stops being watched. A declared pod is bound to the fleet's virtual node
//! once placed: `kubectl logs` on it reaches its member's log through the control plane's own
//! API server, and its deletion is finished there as a kubelet finishes one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, LogParams};
use tephra_api::ResourceBinding;

async fn fleet(backend: Backend) -> Option<TestFleet> {
    fleet_on(backend, &[("east", 2), ("west", 8), ("north", 4)]).await
}

/// Asserts that these members run no pod.
async fn no_pods_in(dev: &TestFleet, members: &[&str]) {
    for m in members {
        let pods: Api<Pod> = Api::namespaced(dev.client(m).await.unwrap(), "default");
        let list = pods.list(&ListParams::default()).await.unwrap();
        assert!(list.items.is_empty(), "pods in {m}");
    }
}

on_both!(
    a_gang_lands_whole_in_the_one_member_where_it_fits,
    a_gang_lands_whole_in_the_one_member_where_it_fits
);
async fn a_gang_lands_whole_in_the_one_member_where_it_fits(backend: Backend) {
    logs();
    let Some(dev) = fleet(backend).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let sched = fleet_scheduler(&cp).await;
    // Four pods of 4 GPUs need 16: only west has them (north has 8, east 4).
    gang(&cp, "default", "llm", "default", 4, 4, 4).await;
    let west = dev.client("west").await.unwrap();
    let placed = all_bound(&west, "default", "llm-", 4, 30).await;
    assert_eq!(placed.len(), 4, "{placed:?}");
    assert!(
        placed.values().flatten().all(|n| n.starts_with("west-")),
        "{placed:?}"
    );
    no_pods_in(&dev, &["east", "north"]).await;
    let rbs: Api<ResourceBinding> = Api::namespaced(cp.clone(), "default");
    let rb = eventually(10, "the ResourceBinding", || async {
        rbs.get("llm").await.ok()
    })
    .await;
    let clusters: Vec<(String, i32)> = rb
        .spec
        .clusters
        .iter()
        .map(|c| (c.name.clone(), c.tasks.values().sum()))
        .collect();
    assert_eq!(clusters, vec![("west".to_string(), 4)]);
    assert_eq!(rb.spec.resource.kind, "PodGroup");
    // The pods declared on the control plane say where and how they run.
    let declared: Api<Pod> = Api::namespaced(cp.clone(), "default");
    eventually(20, "the declared pod Running, placed in west", || async {
        let s = declared.get("llm-worker-0").await.ok()?.status?;
        let placed = s.conditions.iter().flatten().any(|c| {
            c.type_ == "PodScheduled" && c.message.as_deref().is_some_and(|m| m.contains("west"))
        });
        (s.phase.as_deref() == Some("Running") && placed).then_some(())
    })
    .await;
    // Their member label selects them (`kubectl get pods -l tephra.io/member=west`, and
    // `-L tephra.io/member` shows it as a column).
    let in_west = ListParams::default().labels("tephra.io/member=west");
    eventually(
        20,
        "the declared pods labelled with their member",
        || async {
            let n = declared.list(&in_west).await.ok()?.items.len();
            (n == 4).then_some(())
        },
    )
    .await;
    // The pods run in west: the PodGroup on the control plane reaches Running.
    eventually(20, "the PodGroup Running", || async {
        let pg = podgroup(&cp, "default", "llm").await;
        (pg.status.and_then(|s| s.phase) == Some(tephra_api::scheduling::PodGroupPhase::Running))
            .then_some(())
    })
    .await;
    // And the binding's aggregated status says so, per cluster.
    let agg = eventually(20, "the binding's aggregated status Healthy", || async {
        let rb = rbs.get("llm").await.ok()?;
        let items = rb.status?.aggregated_status;
        let healthy =
            items.len() == 1 && items[0].health == Some(tephra_api::work::ResourceHealth::Healthy);
        healthy.then_some(items)
    })
    .await;
    assert_eq!(agg[0].cluster_name, "west");
    assert!(agg[0].applied);
    // Karmada's conditions, which kubectl shows as its printer columns.
    let conditions: Vec<(String, String)> = rbs
        .get("llm")
        .await
        .unwrap()
        .status
        .unwrap()
        .conditions
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert_eq!(
        conditions,
        [
            ("Scheduled".to_string(), "True".to_string()),
            ("FullyApplied".to_string(), "True".to_string())
        ]
    );
    sched.stop().await;
}

on_both!(
    an_unreachable_member_takes_no_pods_until_it_answers_again,
    an_unreachable_member_takes_no_pods_until_it_answers_again
);
async fn an_unreachable_member_takes_no_pods_until_it_answers_again(backend: Backend) {
    logs();
    let Some(dev) = fleet(backend).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let sched = fleet_scheduler(&cp).await;
    until_ready(&sched).await;
    dev.stop_member("west").await.unwrap();
    let ready =
        |m: &tephra_kube::metrics::Metrics| m.cluster_ready.with_label_values(&["west"]).get();
    eventually(20, "west marked not ready", || async {
        (ready(&sched.metrics) == 0).then_some(())
    })
    .await;
    gang(&cp, "default", "waits", "default", 4, 4, 4).await;
    // Only west could hold the gang; while it is down nothing is even tried there.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let places = sched
        .metrics
        .write_latency
        .with_label_values(&["place"])
        .get_sample_count();
    assert_eq!(places, 0, "pods were sent to an unreachable member");
    dev.restore_member("west").await.unwrap();
    let west = dev.client("west").await.unwrap();
    all_bound(&west, "default", "waits-", 4, 40).await;
    sched.stop().await;
}

on_both!(
    a_propagation_policy_keeps_the_jobs_it_selects_in_its_clusters,
    a_propagation_policy_keeps_the_jobs_it_selects_in_its_clusters
);
async fn a_propagation_policy_keeps_the_jobs_it_selects_in_its_clusters(backend: Backend) {
    logs();
    let Some(dev) = fleet(backend).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let policies: Api<tephra_api::PropagationPolicy> = Api::namespaced(cp.clone(), "default");
    let pp: tephra_api::PropagationPolicy = serde_json::from_value(serde_json::json!({
        "apiVersion": "policy.tephra.io/v1alpha1", "kind": "PropagationPolicy",
        "metadata": {"name": "team-a-east", "namespace": "default"},
        "spec": {"resourceSelectors": [{"apiVersion": "scheduling.volcano.sh/v1beta1",
                    "kind": "PodGroup", "labelSelector": {"matchLabels": {"team": "a"}}}],
                 "placement": {"clusterAffinity": {"clusterNames": ["east"]}}}
    }))
    .unwrap();
    policies.create(&Default::default(), &pp).await.unwrap();
    let sched = fleet_scheduler(&cp).await;
    let pgs: Api<tephra_api::PodGroup> = Api::namespaced(cp.clone(), "default");
    for g in ["a0", "a1", "a2"] {
        let pg: tephra_api::PodGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": g, "namespace": "default", "labels": {"team": "a"}},
            "spec": {"minMember": 1, "queue": "default"}
        }))
        .unwrap();
        pgs.create(&Default::default(), &pg).await.unwrap();
        create_pod(
            &cp,
            "default",
            &format!("{g}-worker-0"),
            Some(g),
            1,
            "volcano",
        )
        .await;
    }
    let east = dev.client("east").await.unwrap();
    // Every team-a pod is bound in east.
    all_bound(&east, "default", "a", 3, 30).await;
    no_pods_in(&dev, &["west", "north"]).await;
    sched.stop().await;
}

on_both!(
    a_volcano_jobs_plugin_objects_follow_its_pods_into_the_member,
    a_volcano_jobs_plugin_objects_follow_its_pods_into_the_member
);
async fn a_volcano_jobs_plugin_objects_follow_its_pods_into_the_member(backend: Backend) {
    logs();
    let Some(dev) = fleet(backend).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let (sched, ctl) = fleet_scheduler_and_jobs(&cp).await;
    // Two pods of 8 GPUs: only west can run them.
    let job: tephra_api::Job = serde_json::from_value(serde_json::json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "mpi", "namespace": "default",
            "annotations": {"tephra.io/sim-duration": "1s"}},
        "spec": {"schedulerName": "volcano", "queue": "default",
            "plugins": {"svc": [], "ssh": []},
            "tasks": [{"name": "w", "replicas": 2, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "8"},
                                  "limits": {"nvidia.com/gpu": "8"}}}]}}}]}
    }))
    .unwrap();
    let jobs: Api<tephra_api::Job> = Api::namespaced(cp.clone(), "default");
    jobs.create(&Default::default(), &job).await.unwrap();
    let west = dev.client("west").await.unwrap();
    all_bound(&west, "default", "mpi-w-", 2, 30).await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(west.clone(), "default");
    // Copied right after the pods' copies, owned by them (the kubelet waits for them).
    let hosts = eventually(10, "the hosts ConfigMap in west", || async {
        cms.get_opt("mpi-svc").await.ok().flatten()
    })
    .await;
    assert_eq!(hosts.data.unwrap()["VC_W_HOSTS"], "mpi-w-0.mpi,mpi-w-1.mpi");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(west.clone(), "default");
    let keys = eventually(10, "the ssh Secret in west", || async {
        secrets.get_opt("mpi-ssh").await.ok().flatten()
    })
    .await;
    assert!(keys.data.unwrap().contains_key("id_rsa"));
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(west.clone(), "default");
    let svc = eventually(10, "the headless Service in west", || async {
        services.get_opt("mpi").await.ok().flatten()
    })
    .await;
    assert_eq!(svc.spec.unwrap().cluster_ip.as_deref(), Some("None"));
    job_reaches(&jobs, "mpi", tephra_api::batch::JobPhase::Completed, 30).await;
    stop_everything(sched, ctl).await;
}

on_both!(
    a_pod_with_a_priority_class_runs_in_a_member_that_lacked_the_class,
    a_pod_with_a_priority_class_runs_in_a_member_that_lacked_the_class
);
async fn a_pod_with_a_priority_class_runs_in_a_member_that_lacked_the_class(backend: Backend) {
    logs();
    let Some(dev) = fleet(backend).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let classes: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = Api::all(cp.clone());
    classes
        .create(
            &Default::default(),
            &serde_json::from_value(serde_json::json!({
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": "high-priority"}, "value": 1000, "globalDefault": true}))
            .unwrap(),
        )
        .await
        .unwrap();
    let sched = fleet_scheduler(&cp).await;
    let pods: Api<Pod> = Api::namespaced(cp.clone(), "default");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "urgent", "namespace": "default"},
        "spec": {"schedulerName": "volcano", "priorityClassName": "high-priority",
            "containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "8"},
                              "limits": {"nvidia.com/gpu": "8"}}}]}
    }))
    .unwrap();
    pods.create(&Default::default(), &pod).await.unwrap();
    // Only west has 8 GPUs on a node; it had no such class until the pod needed it.
    let west = dev.client("west").await.unwrap();
    all_bound(&west, "default", "urgent", 1, 30).await;
    let copy = Api::<Pod>::namespaced(west.clone(), "default")
        .get("urgent")
        .await
        .unwrap();
    assert_eq!(copy.spec.unwrap().priority, Some(1000));
    let theirs = Api::<k8s_openapi::api::scheduling::v1::PriorityClass>::all(west)
        .get("high-priority")
        .await
        .unwrap();
    assert_eq!(theirs.value, Some(1000));
    assert_ne!(
        theirs.global_default,
        Some(true),
        "a copy is never the member's default"
    );
    sched.stop().await;
}

on_both!(
    a_members_rotated_token_is_used_once_written_into_its_secret,
    a_members_rotated_token_is_used_once_written_into_its_secret
);
async fn a_members_rotated_token_is_used_once_written_into_its_secret(backend: Backend) {
    logs();
    let Some(dev) = fleet(backend).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let sched = fleet_scheduler(&cp).await;
    until_ready(&sched).await;
    // west is rebuilt: its old token is refused, and an operator writes the new one into the
    // same Secret (no new Secret name, no change to the Cluster).
    let token = dev.rotate_member_token("west").await.unwrap();
    // The devcluster cuts the watches at once; a real API server keeps streaming the watches
    // it authenticated before, and refuses the next request (the probe's).
    let refused = || {
        ["watch", "probe"]
            .iter()
            .map(|verb| {
                sched
                    .metrics
                    .api_errors
                    .with_label_values(&["west", verb, "401"])
                    .get()
            })
            .sum::<u64>()
    };
    eventually(20, "west's requests refused", || async {
        (refused() > 0).then_some(())
    })
    .await;
    use base64::Engine;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(cp.clone(), "tephra-system");
    secrets
        .patch(
            "west-credentials",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"data": {
                "token": base64::engine::general_purpose::STANDARD.encode(&token)}})),
        )
        .await
        .unwrap();
    // Only west can hold this gang.
    gang(&cp, "default", "after", "default", 4, 4, 4).await;
    let west = dev.client("west").await.unwrap();
    all_bound(&west, "default", "after-", 4, 30).await;
    // The watchers with the old token are gone: no refusal comes any more.
    let before = refused();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(refused(), before, "a watcher with the old token still runs");
    sched.stop().await;
}

on_both!(
    a_deleted_cluster_is_no_longer_watched_nor_in_the_metrics,
    a_deleted_cluster_is_no_longer_watched_nor_in_the_metrics
);
async fn a_deleted_cluster_is_no_longer_watched_nor_in_the_metrics(backend: Backend) {
    logs();
    let Some(dev) = fleet(backend).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let sched = fleet_scheduler(&cp).await;

    eventually(10, "north in the metrics", || async {
        sched
            .metrics
            .render()
            .contains("tephra_cluster_ready{cluster=\"north\"} 1")
            .then_some(())
    })
    .await;
    Api::<tephra_api::Cluster>::all(cp.clone())
        .delete("north", &Default::default())
        .await
        .unwrap();
    eventually(10, "north's series gone", || async {
        let text = sched.metrics.render();
        (!text.contains("cluster=\"north\"")).then_some(())
    })
    .await;
    // Its watchers are stopped: north going down is not even noticed.
    dev.stop_member("north").await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let text = sched.metrics.render();
    assert!(!text.contains("cluster=\"north\""), "{text}");
    sched.stop().await;
}

on_both!(
    a_pod_made_in_a_member_is_bound_there_or_nowhere,
    a_pod_made_in_a_member_is_bound_there_or_nowhere
);
async fn a_pod_made_in_a_member_is_bound_there_or_nowhere(backend: Backend) {
    logs();
    let Some(dev) = fleet(backend).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let sched = fleet_scheduler(&cp).await;
    until_ready(&sched).await;
    // Made in east, whose nodes have 2 GPUs each: one pod fits there, the other only in west
    // or north, where it does not exist.
    let east = dev.client("east").await.unwrap();
    create_pod(&east, "default", "small", None, 1, "volcano").await;
    create_pod(&east, "default", "big", None, 4, "volcano").await;
    let placed = eventually(30, "pod small bound", || async {
        let on = nodes_of(&east, "default", "small").await;
        on.get("small").cloned().flatten()
    })
    .await;
    assert!(placed.starts_with("east-"), "{placed}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        nodes_of(&east, "default", "big").await.get("big"),
        Some(&None),
        "big fits in no node of east"
    );
    assert_eq!(
        binds_sent(&sched).await,
        1,
        "no bind of big was sent to a member where it does not exist"
    );
    sched.stop().await;
}

on_both!(
    a_declared_pods_log_is_read_from_its_member_through_the_virtual_node,
    a_declared_pods_log_is_read_from_its_member_through_the_virtual_node
);
async fn a_declared_pods_log_is_read_from_its_member_through_the_virtual_node(backend: Backend) {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Node;
    use tephra_kube::virtual_node::VirtualNodeOptions;
    logs();
    let Some(dev) = fleet_on(backend, &[("east", 0)]).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let options = tephra_kube::Options {
        members: tephra_kube::MemberSource::Clusters,
        virtual_node: Some(VirtualNodeOptions {
            name: "tephra".into(),
            address: "127.0.0.1".into(),
            listen: "127.0.0.1:0".parse().unwrap(),
            client_ca: dev.ca_der(),
            client_names: vec![VirtualNodeOptions::KUBEADM_CLIENT.into()],
            serving: None,
        }),
        ..scheduler_options()
    };
    let sched = tephra_kube::start(cp.clone(), options).await.unwrap();
    assert!(sched.virtual_node_addr.is_some());
    gang(&cp, "default", "solo", "default", 1, 1, 0).await;
    let declared: Api<Pod> = Api::namespaced(cp.clone(), "default");
    let pod = "solo-worker-0";
    eventually(
        60,
        "the declared pod bound to the virtual node, running",
        || async {
            let p = declared.get(pod).await.ok()?;
            let bound = p.spec.as_ref()?.node_name.as_deref() == Some("tephra");
            let running = p.status.as_ref()?.phase.as_deref() == Some("Running");
            (bound && running).then_some(())
        },
    )
    .await;
    // The node a kubelet keeps: Ready, its Lease renewed, tainted against other pods.
    let node = Api::<Node>::all(cp.clone()).get("tephra").await.unwrap();
    let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    assert!(
        taints
            .iter()
            .any(|t| t.key == "virtual-kubelet.io/provider" && t.effect == "NoSchedule"),
        "{taints:?}"
    );
    let lease = Api::<Lease>::namespaced(cp.clone(), "kube-node-lease")
        .get("tephra")
        .await
        .unwrap();
    assert!(lease.spec.and_then(|s| s.renew_time).is_some());
    let answer = declared.logs(pod, &LogParams::default()).await;
    match backend {
        // The member's simulated kubelet wrote it: read from east, through the control plane.
        Backend::Devcluster => {
            let text = answer.unwrap();
            assert!(
                text.contains("simulated container main") && text.contains("on node east-"),
                "{text}"
            );
        }
        // The real member's nodes have no kubelet to ask: the answer names the command that
        // reads the log there.
        Backend::KubeApiserver => {
            let err = answer.unwrap_err().to_string();
            assert!(
                err.contains("member cluster east")
                    && err.contains("kubectl --context east logs -n default solo-worker-0 -c main"),
                "{err}"
            );
        }
    }
    // Deleting it waits for its kubelet, which tephra is: the copy goes, then the pod.
    declared
        .delete(pod, &DeleteParams::default())
        .await
        .unwrap();
    let copies: Api<Pod> = Api::namespaced(dev.client("east").await.unwrap(), "default");
    eventually(60, "the declared pod and its copy gone", || async {
        let here = declared.get_opt(pod).await.ok()?;
        let there = copies.get_opt(pod).await.ok()?;
        (here.is_none() && there.is_none()).then_some(())
    })
    .await;
    sched.stop().await;
}
