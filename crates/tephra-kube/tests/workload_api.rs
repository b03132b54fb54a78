//! Kubernetes' own gang API (the Workload API, `scheduling.k8s.io/v1beta1`) as tephra's second
//! front end: pods that name a tephra scheduler and a Kubernetes PodGroup in
//! `spec.schedulingGroup` are one gang of the PodGroup's `minCount`, placed whole or not at all,
//! and the PodGroup says so in the condition kube-scheduler writes there
//! (`PodGroupInitiallyScheduled`). On the devcluster and on a real kube-apiserver v1.37 with the
//! `GenericWorkload` gate and that API version on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1beta1::PodGroup as KubePodGroup;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use tephra_api::PodGroup;

/// A Kubernetes PodGroup `name` with a gang policy of `min` pods, in the `default` queue (by
/// Volcano's label).
async fn kube_group(c: &kube::Client, name: &str, min: i32) {
    kube_group_of(c, name, min, None).await;
}

/// [`kube_group`], made from template `(workload, template)` of a Workload.
async fn kube_group_of(c: &kube::Client, name: &str, min: i32, from: Option<(&str, &str)>) {
    let groups: Api<KubePodGroup> = Api::namespaced(c.clone(), "default");
    let mut doc = json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "labels": {"volcano.sh/queue-name": "default"}},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min}}}});
    if let Some((workload, template)) = from {
        doc["spec"]["workloadRef"] = json!({"workloadName": workload, "templateName": template});
    }
    let g: KubePodGroup = serde_json::from_value(doc).unwrap();
    groups
        .create(&PostParams::default(), &g)
        .await
        .expect("the PodGroup is created");
}

/// `n` pods `<group>-<i>` of `cpu` CPUs each, for tephra (`schedulerName: volcano`), in the
/// Kubernetes PodGroup `group`.
async fn pods_of(c: &kube::Client, group: &str, n: usize, cpu: &str) {
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    for i in 0..n {
        let p: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{group}-{i}")},
            "spec": {"schedulerName": "volcano",
                "schedulingGroup": {"podGroupName": group},
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &p)
            .await
            .expect("the pod is created");
    }
}

/// The `PodGroupInitiallyScheduled` condition of PodGroup `name`: (status, reason, message).
async fn scheduled(c: &kube::Client, name: &str) -> Option<(String, String, String)> {
    let groups: Api<KubePodGroup> = Api::namespaced(c.clone(), "default");
    let g = groups.get(name).await.ok()?;
    g.status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "PodGroupInitiallyScheduled")
        .map(|c| (c.status, c.reason, c.message))
}

/// Two 8-CPU nodes where the Workload API is served: the devcluster, or a real kube-apiserver
/// of the newest release (the API is served from 1.37 on; the rest of the tier runs the
/// oldest, which has none of it) with the `GenericWorkload` gate, `more_gates`, and
/// `scheduling.k8s.io/v1beta1` and `more_versions` on, and kube-scheduler when `scheduler`.
async fn workload_cluster(
    backend: Backend,
    more_gates: &[&str],
    more_versions: &[&str],
    scheduler: bool,
) -> Option<TestCluster> {
    let gates = ["GenericWorkload=true"].iter().chain(more_gates);
    let versions = ["scheduling.k8s.io/v1beta1=true"]
        .iter()
        .chain(more_versions);
    let options = tephra_envtest::ClusterOptions {
        feature_gates: gates.map(|g| g.to_string()).collect(),
        runtime_config: versions.map(|v| v.to_string()).collect(),
        scheduler: scheduler.then_some(serde_json::Value::Null),
        ..Default::default()
    };
    let nodes = vec![node("n0", "8", 0), node("n1", "8", 0)];
    let release = tephra_envtest::Release::Newest;
    cluster_on_release(backend, &release, nodes, options).await
}

on_both!(
    a_kubernetes_podgroup_is_one_gang_placed_whole_or_not_at_all_and_says_so,
    a_kubernetes_podgroup_is_one_gang_placed_whole_or_not_at_all_and_says_so
);
async fn a_kubernetes_podgroup_is_one_gang_placed_whole_or_not_at_all_and_says_so(
    backend: Backend,
) {
    logs();
    // 16 CPUs in all: a gang of 4 × 2 CPUs fits, a gang of 8 × 4 CPUs never does.
    let Some(cl) = workload_cluster(backend, &[], &[], false).await else {
        return;
    };
    let c = cl.client.clone();
    kube_group(&c, "fits", 4).await;
    pods_of(&c, "fits", 4, "2").await;
    kube_group(&c, "too-big", 8).await;
    pods_of(&c, "too-big", 8, "4").await;
    let (sched, ctl) = start_everything(&c).await;

    all_bound(&c, "default", "fits-", 4, 30).await;
    let (status, reason, _) = eventually(30, "fits says it was scheduled", || async {
        scheduled(&c, "fits").await.filter(|s| s.0 == "True")
    })
    .await;
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Scheduled"));

    let (_, reason, message) = eventually(30, "too-big says why it waits", || async {
        scheduled(&c, "too-big").await.filter(|s| s.0 == "False")
    })
    .await;
    assert_eq!(reason, "Unschedulable");
    assert!(!message.is_empty(), "the condition says why");
    // Several sessions later, still none of its pods holds a node: no partial gang.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let bound = nodes_of(&c, "default", "too-big-").await;
    assert_eq!(bound.len(), 8);
    assert!(
        bound.values().all(Option::is_none),
        "a gang that cannot fit binds nothing: {bound:?}"
    );
    // The pods were taken as the Kubernetes PodGroup's: no Volcano PodGroup was made for them.
    let volcano: Api<PodGroup> = Api::namespaced(c.clone(), "default");
    let made = volcano.list(&ListParams::default()).await.unwrap();
    assert!(
        made.items.is_empty(),
        "no Volcano PodGroup for pods in a Kubernetes PodGroup: {:?}",
        made.items
            .iter()
            .map(|g| g.metadata.name.clone())
            .collect::<Vec<_>>()
    );
    // `kubectl get podgroups.scheduling.k8s.io` prints the policy, Workload and status.
    let mut rows = table_rows(&c).await;
    for row in &mut rows {
        row.pop(); // the age
    }
    assert_eq!(
        rows,
        [
            ["fits", "Gang", "<none>", "Scheduled"],
            ["too-big", "Gang", "<none>", "Unschedulable"]
        ]
    );
    stop_everything(sched, ctl).await;
}

/// The cells of the rows of `kubectl get podgroups.scheduling.k8s.io` in `default`.
async fn table_rows(c: &kube::Client) -> Vec<Vec<String>> {
    let request =
        http::Request::get("/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups")
            .header(
                http::header::ACCEPT,
                "application/json;as=Table;v=v1;g=meta.k8s.io",
            )
            .body(Vec::new())
            .unwrap();
    let table: serde_json::Value = c.request(request).await.expect("a Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Policy", "Workload", "Status", "Age"]);
    table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["cells"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .collect()
}

/// A Kubernetes Job with a gang scheduling policy (`spec.scheduling`, the `WorkloadWithJob`
/// gate): the Job controller makes its Workload and PodGroup and its pods name the PodGroup,
/// and tephra places them as one gang, with nothing from the user but the Job. Only on a real
/// kube-apiserver v1.37 with its controller manager: the devcluster runs no Job controller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_gang_made_by_the_job_controller_is_placed_whole_on_kube_apiserver() {
    use k8s_openapi::api::batch::v1::Job as KubeJob;
    logs();
    let Some(cl) = workload_cluster(
        Backend::KubeApiserver,
        &["WorkloadWithJob=true"],
        &["scheduling.k8s.io/v1alpha3=true"],
        false,
    )
    .await
    else {
        return;
    };
    let c = cl.client.clone();
    let (sched, ctl) = start_everything(&c).await;
    let job = |name: &str, n: i32, cpu: &str| -> KubeJob {
        serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name},
            "spec": {"parallelism": n, "completions": n,
                "scheduling": {"schedulingPolicy": {"gang": {"minCount": n}}},
                "template": {"spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox",
                        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}}}))
        .unwrap()
    };
    let jobs: Api<KubeJob> = Api::namespaced(c.clone(), "default");
    jobs.create(&PostParams::default(), &job("train", 4, "2"))
        .await
        .expect("the Job is created");
    jobs.create(&PostParams::default(), &job("huge", 6, "4"))
        .await
        .expect("the Job is created");
    // The Job controller named a PodGroup in each pod.
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let group_of = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.scheduling_group.as_ref())
            .and_then(|g| g.pod_group_name.clone())
    };
    eventually(
        60,
        "train's 4 pods bound, each naming its PodGroup",
        || async {
            let list = pods
                .list(&ListParams::default().labels("job-name=train"))
                .await
                .ok()?;
            (list.items.len() == 4
                && list.items.iter().all(|p| {
                    group_of(p).is_some() && p.spec.as_ref().is_some_and(|s| s.node_name.is_some())
                }))
            .then_some(())
        },
    )
    .await;
    eventually(60, "huge's PodGroup says why it waits", || async {
        let list = pods
            .list(&ListParams::default().labels("job-name=huge"))
            .await
            .ok()?;
        let group = list.items.first().and_then(group_of)?;
        scheduled(&c, &group).await.filter(|s| s.0 == "False")
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let huge = pods
        .list(&ListParams::default().labels("job-name=huge"))
        .await
        .unwrap();
    assert_eq!(huge.items.len(), 6);
    assert!(
        huge.items
            .iter()
            .all(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_none())),
        "a Job's gang that cannot fit binds none of its pods"
    );
    stop_everything(sched, ctl).await;
}

// Across a fleet: a Kubernetes PodGroup and its pods declared on the control plane go whole
// to one member, the PodGroup owns the ResourceBinding as a Volcano one does and says it was
// scheduled.
on_both!(
    a_kubernetes_podgroup_declared_on_the_control_plane_lands_whole_in_one_member,
    a_kubernetes_podgroup_declared_on_the_control_plane_lands_whole_in_one_member
);
async fn a_kubernetes_podgroup_declared_on_the_control_plane_lands_whole_in_one_member(
    backend: Backend,
) {
    logs();
    // Two members of two 16-CPU nodes: a gang of 3 × 8 CPUs fits in either, not split.
    let options = tephra_envtest::ClusterOptions {
        feature_gates: vec!["GenericWorkload=true".into()],
        runtime_config: vec!["scheduling.k8s.io/v1beta1=true".into()],
        ..Default::default()
    };
    let release = tephra_envtest::Release::Newest;
    let members = [("east", 0), ("west", 0)];
    let Some(dev) = fleet_on_release(backend, &release, &members, options).await else {
        return;
    };
    let cp = dev.client("control-plane").await.unwrap();
    let sched = fleet_scheduler(&cp).await;
    kube_group(&cp, "spread", 3).await;
    pods_of(&cp, "spread", 3, "8").await;
    let declared: Api<Pod> = Api::namespaced(cp.clone(), "default");
    let member = eventually(30, "the declared pods labelled with one member", || async {
        let list = declared.list(&ListParams::default()).await.ok()?;
        let members: std::collections::BTreeSet<String> = list
            .items
            .iter()
            .filter_map(|p| p.metadata.labels.as_ref()?.get("tephra.io/member").cloned())
            .collect();
        let all = list.items.iter().all(|p| {
            p.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("tephra.io/member"))
        });
        (list.items.len() == 3 && all && members.len() == 1)
            .then(|| members.into_iter().next())
            .flatten()
    })
    .await;
    let there = dev.client(&member).await.unwrap();
    all_bound(&there, "default", "spread-", 3, 30).await;
    let other = if member == "east" { "west" } else { "east" };
    let elsewhere: Api<Pod> = Api::namespaced(dev.client(other).await.unwrap(), "default");
    assert!(
        elsewhere
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "nothing of the gang in {other}"
    );
    let rbs: Api<tephra_api::ResourceBinding> = Api::namespaced(cp.clone(), "default");
    let rb = eventually(20, "the ResourceBinding", || async {
        rbs.get("spread").await.ok()
    })
    .await;
    assert_eq!(
        (
            rb.spec.resource.api_version.as_str(),
            rb.spec.resource.kind.as_str()
        ),
        ("scheduling.k8s.io/v1beta1", "PodGroup")
    );
    eventually(30, "the PodGroup says it was scheduled", || async {
        scheduled(&cp, "spread").await.filter(|s| s.0 == "True")
    })
    .await;
    sched.stop().await;
}

on_both!(
    a_workloads_pod_groups_are_each_placed_whole_and_deleted_pods_free_their_room,
    a_workloads_pod_groups_are_each_placed_whole_and_deleted_pods_free_their_room
);
async fn a_workloads_pod_groups_are_each_placed_whole_and_deleted_pods_free_their_room(
    backend: Backend,
) {
    use k8s_openapi::api::scheduling::v1beta1::Workload;
    logs();
    let Some(cl) = workload_cluster(backend, &[], &[], false).await else {
        return;
    };
    let c = cl.client.clone();
    // A Workload of a driver (a gang of 1) and workers (a gang of 8), as a training operator
    // declares one; a PodGroup of each template, and their pods.
    let workloads: Api<Workload> = Api::namespaced(c.clone(), "default");
    let w: Workload = serde_json::from_value(json!({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": "train"},
        "spec": {"podGroupTemplates": [
            {"name": "driver", "schedulingPolicy": {"gang": {"minCount": 1}}},
            {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 8}}}]}}))
    .unwrap();
    workloads
        .create(&PostParams::default(), &w)
        .await
        .expect("the Workload is created");
    kube_group_of(&c, "train-driver", 1, Some(("train", "driver"))).await;
    kube_group_of(&c, "train-workers", 8, Some(("train", "workers"))).await;
    pods_of(&c, "train-driver", 1, "1").await;
    pods_of(&c, "train-workers", 8, "1").await;
    let (sched, ctl) = start_everything(&c).await;
    all_bound(&c, "default", "train-driver-", 1, 30).await;
    all_bound(&c, "default", "train-workers-", 8, 30).await;
    // 7 CPUs left: a gang of 4 × 3 CPUs waits, whole.
    kube_group(&c, "next", 4).await;
    pods_of(&c, "next", 4, "3").await;
    eventually(30, "next says why it waits", || async {
        scheduled(&c, "next").await.filter(|s| s.0 == "False")
    })
    .await;
    assert!(
        nodes_of(&c, "default", "next-")
            .await
            .values()
            .all(Option::is_none),
        "nothing of a gang that does not fit yet is bound"
    );
    // The workers' pods go: their room is free, and the waiting gang takes it, whole.
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    for i in 0..8 {
        pods.delete(&format!("train-workers-{i}"), &Default::default())
            .await
            .expect("the pod is deleted");
    }
    all_bound(&c, "default", "next-", 4, 60).await;
    eventually(30, "next says it was scheduled", || async {
        scheduled(&c, "next").await.filter(|s| s.0 == "True")
    })
    .await;
    stop_everything(sched, ctl).await;
}

/// Coexistence on one real cluster: kube-scheduler's own gang scheduling places its
/// Workload API gang, tephra places its own, and a third gang that would need room the first
/// two hold binds nothing: tephra counts what kube-scheduler bound, no node is asked for more
/// than it has. Only on a real kube-apiserver v1.37 with kube-scheduler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_schedulers_gangs_and_tephras_never_share_room_on_kube_apiserver() {
    logs();
    let Some(cl) = workload_cluster(Backend::KubeApiserver, &[], &[], true).await else {
        return;
    };
    let c = cl.client.clone();
    // kube-scheduler's gang: 4 pods of 3 CPUs, scheduled by default-scheduler (two on each
    // node: 2 CPUs left on each).
    kube_group(&c, "theirs", 4).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    for i in 0..4 {
        let p: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("theirs-{i}")},
            "spec": {"schedulingGroup": {"podGroupName": "theirs"},
                "containers": [{"name": "c", "image": "busybox",
                    "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    all_bound(&c, "default", "theirs-", 4, 60).await;
    // tephra's: a gang of 2 × 2 CPUs fits in the 4 CPUs left (2 on each node); a gang of
    // 4 × 2 CPUs more would need room kube-scheduler's pods hold.
    kube_group(&c, "ours", 2).await;
    pods_of(&c, "ours", 2, "2").await;
    kube_group(&c, "more", 4).await;
    pods_of(&c, "more", 4, "2").await;
    let (sched, ctl) = start_everything(&c).await;
    all_bound(&c, "default", "ours-", 2, 30).await;
    eventually(30, "more says why it waits", || async {
        scheduled(&c, "more").await.filter(|s| s.0 == "False")
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(
        nodes_of(&c, "default", "more-")
            .await
            .values()
            .all(Option::is_none),
        "nothing of a gang without room is bound"
    );
    // kube-scheduler's PodGroup has no pod of tephra's: tephra wrote nothing on it.
    let theirs = scheduled(&c, "theirs")
        .await
        .expect("kube-scheduler's condition");
    assert_eq!(
        (theirs.0.as_str(), theirs.1.as_str(), theirs.2.as_str()),
        ("True", "Scheduled", ""),
        "kube-scheduler's own words"
    );
    // No node holds more than its 8 CPUs.
    let mut per_node: std::collections::BTreeMap<String, f64> = Default::default();
    for p in pods.list(&ListParams::default()).await.unwrap().items {
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            continue;
        };
        let cpu: f64 = p
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get("cpu"))
            .filter_map(|q| q.0.parse::<f64>().ok())
            .sum();
        *per_node.entry(node).or_default() += cpu;
    }
    assert!(
        per_node.values().all(|&cpu| cpu <= 8.0),
        "a node asked for more than it has: {per_node:?}"
    );
    stop_everything(sched, ctl).await;
}

/// A kube-apiserver 1.37 that serves the Workload API only at `v1alpha3` (its beta version
/// off, as an operator who turned on only the alpha version has it): tephra finds that
/// version, reads its PodGroups as the same gangs and writes their condition there, so a gang
/// that fits is placed whole and one that cannot binds nothing, each saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_serving_only_the_alpha_podgroups_gets_the_same_gangs() {
    use k8s_openapi::api::scheduling::v1alpha3::PodGroup as AlphaPodGroup;
    logs();
    let options = tephra_envtest::ClusterOptions {
        feature_gates: vec!["GenericWorkload=true".into()],
        runtime_config: vec!["scheduling.k8s.io/v1alpha3=true".into()],
        ..Default::default()
    };
    let nodes = vec![node("n0", "8", 0), node("n1", "8", 0)];
    let release = tephra_envtest::Release::Newest;
    let Some(cl) = cluster_on_release(Backend::KubeApiserver, &release, nodes, options).await
    else {
        return;
    };
    let c = cl.client.clone();
    let beta: Api<KubePodGroup> = Api::namespaced(c.clone(), "default");
    assert!(
        beta.list(&ListParams::default()).await.is_err(),
        "v1beta1 is not served here"
    );
    let alpha: Api<AlphaPodGroup> = Api::namespaced(c.clone(), "default");
    for (name, min) in [("fits", 4), ("too-big", 8)] {
        let g: AlphaPodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup",
            "metadata": {"name": name, "labels": {"volcano.sh/queue-name": "default"}},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min}}}}))
        .unwrap();
        alpha
            .create(&PostParams::default(), &g)
            .await
            .expect("the PodGroup is created");
    }
    pods_of(&c, "fits", 4, "2").await;
    pods_of(&c, "too-big", 8, "4").await;
    let (sched, ctl) = start_everything(&c).await;
    all_bound(&c, "default", "fits-", 4, 30).await;
    let condition = |name: &'static str, want: &'static str| {
        let alpha = alpha.clone();
        async move {
            let g = alpha.get(name).await.ok()?;
            g.status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "PodGroupInitiallyScheduled" && c.status == want)
                .map(|c| c.reason)
        }
    };
    let reason = eventually(30, "fits says it was scheduled", || {
        condition("fits", "True")
    })
    .await;
    assert_eq!(reason, "Scheduled");
    let reason = eventually(30, "too-big says why it waits", || {
        condition("too-big", "False")
    })
    .await;
    assert_eq!(reason, "Unschedulable");
    let bound = nodes_of(&c, "default", "too-big-").await;
    assert!(
        bound.values().all(Option::is_none),
        "a gang that cannot fit binds nothing: {bound:?}"
    );
    stop_everything(sched, ctl).await;
}
