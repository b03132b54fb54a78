//! The workloads beyond `workload`'s that the chart's roles must cover, each written once for
//! both kinds of API server: all of one cluster's, all of a fleet's (with what happens in its
//! members: pods made there, claims bound and not bound there, preemption there, an outage),
//! preemption (with a scheduler configuration that preempts), and HyperNodes whose status the
//! scheduler keeps.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};

use super::{
    Guard, Owners, TempDir, chart_dir, claim_workload, claimed, create, job_phase, job_status,
    none_named, owned_pods, short_pod, wait_for, workload,
};

/// One cluster's values (preemption on) rendered into `dir`, as `helm template` arguments.
pub fn one_cluster_args(dir: &TempDir) -> Vec<String> {
    let values = dir.write("values.json", &preempting_values());
    vec!["-f".into(), values.to_str().unwrap().into()]
}

/// Everything the components do on one cluster of two 8-CPU nodes, whichever its kind:
/// [`workload`], pods of each kind of owner, pods with claims, a HyperNode, and preemption.
pub async fn one_cluster(admin: &kube::Client, guard: &Guard, owners: Owners) {
    workload(admin, guard).await;
    kube_gang(admin, guard).await;
    owned_pods(admin, guard, owners).await;
    claim_workload(admin, &[(admin.clone(), "node-a".into())], guard).await;
    racks(std::slice::from_ref(admin), guard).await;
    preemption(admin, guard, 1).await;
    scheduled(admin, guard).await;
    restart(admin, guard).await;
}

/// Whether the server serves Kubernetes' own PodGroups (`scheduling.k8s.io/v1beta1`: from
/// 1.37, with the API version and the `GenericWorkload` gate on).
pub async fn serves_workload_api(admin: &kube::Client) -> bool {
    admin
        .list_api_group_resources("scheduling.k8s.io/v1beta1")
        .await
        .is_ok_and(|l| l.resources.iter().any(|r| r.name == "podgroups"))
}

/// Where the server serves it, a gang of Kubernetes' own PodGroup (the Workload API): two
/// pods naming it in `spec.schedulingGroup`, placed together, the PodGroup's
/// `PodGroupInitiallyScheduled` condition written; all deleted at the end.
pub async fn kube_gang(admin: &kube::Client, guard: &Guard) {
    if !serves_workload_api(admin).await {
        return;
    }
    create(
        admin,
        json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "kgang", "namespace": "team-a",
                "labels": {"volcano.sh/queue-name": "default"}},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}),
    )
    .await;
    for i in 0..2 {
        create(
            admin,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("kgang-{i}"), "namespace": "team-a"},
                "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                    "schedulingGroup": {"podGroupName": "kgang"},
                    "containers": [{"name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": "100m"}}}]}}),
        )
        .await;
    }
    let groups: Api<k8s_openapi::api::scheduling::v1beta1::PodGroup> =
        Api::namespaced(admin.clone(), "team-a");
    wait_for(
        guard,
        "the Workload API gang to be scheduled",
        60,
        || async {
            groups
                .get("kgang")
                .await
                .ok()
                .and_then(|g| g.status?.conditions)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "PodGroupInitiallyScheduled" && c.status == "True")
                })
        },
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "team-a");
    for i in 0..2 {
        let _ = pods
            .delete(&format!("kgang-{i}"), &DeleteParams::default())
            .await;
    }
    let _ = groups.delete("kgang", &DeleteParams::default()).await;
}

/// Values whose scheduler configuration is tephra's default with the `preempt` and `reclaim`
/// actions on, as a cluster shared by priorities runs it.
pub fn preempting_values() -> Value {
    let default = std::fs::read_to_string(chart_dir().join("files/tephra-default.conf")).unwrap();
    let config = default.replace(
        "actions: \"enqueue, allocate, backfill\"",
        "actions: \"enqueue, allocate, preempt, reclaim, backfill\"",
    );
    assert_ne!(config, default, "the default configuration's actions moved");
    json!({"scheduler": {"config": config}})
}

/// A Volcano Job of one task: `replicas` pods of `cpu` each, all needed, running an hour,
/// restarted whole when one is evicted; `extra` is merged into its spec.
fn gang_job(name: &str, replicas: u32, cpu: &str, extra: Value) -> Value {
    let mut job = json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"minAvailable": replicas, "schedulerName": "volcano", "queue": "default",
                 "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
                 "tasks": [{"name": "w", "replicas": replicas, "template": {
                     "metadata": {"annotations": {"tephra.io/sim-duration": "1h"}},
                     "spec": {"restartPolicy": "Never", "containers": [{"name": "main",
                         "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}}}]}
    });
    for (k, v) in extra.as_object().unwrap() {
        job["spec"][k] = v.clone();
    }
    job
}

/// Preemption, where each of `members` (the clusters the jobs run in: one, or a fleet's
/// members) has two 8-CPU nodes: a low-priority job fills each (six pods of 2 CPUs, one
/// needed), then a gang of higher priority arrives whose pods (3 CPUs each) fit on no node.
/// The scheduler evicts filler pods through the Eviction API (each marked DisruptionTarget
/// first) and places the urgent gang. Every job is deleted at the end.
pub async fn preemption(admin: &kube::Client, guard: &Guard, members: usize) {
    let jobs: Api<tephra_api::Job> = Api::namespaced(admin.clone(), "team-a");
    let fillers: Vec<String> = (0..members).map(|i| format!("filler-{i}")).collect();
    for f in &fillers {
        create(admin, gang_job(f, 6, "2", json!({"minAvailable": 1}))).await;
    }
    for f in &fillers {
        wait_for(guard, &format!("all of job {f} to run"), 60, || async {
            job_status(&jobs, f).await.is_some_and(|s| s.running == 6)
        })
        .await;
    }
    create(
        admin,
        gang_job(
            "urgent",
            2,
            "3",
            json!({"priorityClassName": "team-priority"}),
        ),
    )
    .await;
    wait_for(guard, "job urgent to run, preempting", 60, || async {
        job_phase(&jobs, "urgent").await == "Running"
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "team-a");
    for j in fillers.iter().map(String::as_str).chain(["urgent"]) {
        jobs.delete(j, &DeleteParams::background()).await.unwrap();
    }
    wait_for(guard, "the preemption's pods gone", 60, || {
        none_named(&pods, &["filler-", "urgent-"])
    })
    .await;
}

/// A CronJob due at once (its `lastScheduleTime` set two minutes back): the controller
/// manager makes its Job and lists it active; deleting the CronJob takes the Job with it.
/// Then a JobFlow of one JobTemplate: its Job made and completed, the flow Succeed, the
/// template listing the Job; deleting the flow takes the Job with it.
pub async fn scheduled(admin: &kube::Client, guard: &Guard) {
    cron(admin, guard).await;
    flow(admin, guard).await;
}

async fn flow(admin: &kube::Client, guard: &Guard) {
    let mut job = gang_job("etl", 1, "100m", json!({}));
    job["spec"]["tasks"][0]["template"]["metadata"]["annotations"]["tephra.io/sim-duration"] =
        json!("1s");
    create(
        admin,
        json!({"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobTemplate",
            "metadata": {"name": "etl", "namespace": "team-a"}, "spec": job["spec"]}),
    )
    .await;
    create(
        admin,
        json!({"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow",
            "metadata": {"name": "daily", "namespace": "team-a"},
            "spec": {"flows": [{"name": "etl"}]}}),
    )
    .await;
    let flows: Api<tephra_api::flow::JobFlow> = Api::namespaced(admin.clone(), "team-a");
    let templates: Api<tephra_api::flow::JobTemplate> = Api::namespaced(admin.clone(), "team-a");
    wait_for(guard, "the JobFlow to succeed", 90, || async {
        flows
            .get("daily")
            .await
            .ok()
            .and_then(|f| f.status?.state?.phase)
            == Some(tephra_api::flow::FlowPhase::Succeed)
    })
    .await;
    wait_for(guard, "the JobTemplate to list its job", 30, || async {
        templates
            .get("etl")
            .await
            .ok()
            .and_then(|t| t.status)
            .is_some_and(|s| s.job_depends_on_list == ["daily-etl"])
    })
    .await;
    flows
        .delete("daily", &DeleteParams::background())
        .await
        .unwrap();
    templates
        .delete("etl", &DeleteParams::background())
        .await
        .unwrap();
    let jobs: Api<tephra_api::Job> = Api::namespaced(admin.clone(), "team-a");
    wait_for(guard, "the JobFlow's job deleted with it", 60, || async {
        jobs.get_opt("daily-etl").await.is_ok_and(|j| j.is_none())
    })
    .await;
}

async fn cron(admin: &kube::Client, guard: &Guard) {
    let mut cron = gang_job("nightly", 1, "100m", json!({}));
    cron["spec"]["tasks"][0]["template"]["metadata"]["annotations"]["tephra.io/sim-duration"] =
        json!("1s");
    create(
        admin,
        json!({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob",
            "metadata": {"name": "nightly", "namespace": "team-a"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": cron["spec"]}}}),
    )
    .await;
    let crons: Api<tephra_api::cronjob::CronJob> = Api::namespaced(admin.clone(), "team-a");
    let back =
        k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_mins(2);
    crons
        .patch_status(
            "nightly",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"status": {"lastScheduleTime": back}})),
        )
        .await
        .unwrap();
    wait_for(
        guard,
        "the CronJob's job to be made and listed",
        60,
        || async {
            crons
                .get("nightly")
                .await
                .ok()
                .and_then(|c| c.status)
                .is_some_and(|s| s.active.iter().any(|r| r.uid.is_some()))
        },
    )
    .await;
    crons
        .delete("nightly", &DeleteParams::background())
        .await
        .unwrap();
    let jobs: Api<tephra_api::Job> = Api::namespaced(admin.clone(), "team-a");
    wait_for(guard, "the CronJob's jobs deleted with it", 60, || async {
        jobs.list(&Default::default()).await.is_ok_and(|l| {
            !l.items.iter().any(|j| {
                j.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("nightly-"))
            })
        })
    })
    .await;
}

/// A tier-1 HyperNode `rack` holding every node of each cluster of `clients` (two nodes each),
/// whose `status.nodeCount` the scheduler keeps, as Volcano's HyperNode controller does.
pub async fn racks(clients: &[kube::Client], guard: &Guard) {
    for c in clients {
        create(
            c,
            json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                   "metadata": {"name": "rack"},
                   "spec": {"tier": 1, "members": [{"type": "Node",
                       "selector": {"regexMatch": {"pattern": ".*"}}}]}}),
        )
        .await;
    }
    for c in clients {
        let hns: Api<tephra_api::HyperNode> = Api::all(c.clone());
        wait_for(guard, "the rack's node count", 60, || async {
            hns.get_opt("rack")
                .await
                .ok()
                .flatten()
                .and_then(|h| h.status)
                .and_then(|s| s.node_count)
                == Some(2)
        })
        .await;
    }
}

/// A placed job restarted through a bus Command (RestartJob): the job controller deletes its
/// pods and PodGroup and makes them anew, and the scheduler replaces the job's
/// ResourceBinding, which was written for the deleted PodGroup, by one owned by the new
/// PodGroup (it does not move the old one: that would change its owner). The job is deleted
/// then.
async fn restart(admin: &kube::Client, guard: &Guard) {
    let jobs: Api<tephra_api::Job> = Api::namespaced(admin.clone(), "team-a");
    create(admin, gang_job("again", 2, "1", json!({}))).await;
    let rbs: Api<tephra_api::ResourceBinding> = Api::namespaced(admin.clone(), "team-a");
    let binding = || async {
        let rb = rbs
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|rb| rb.spec.resource.name.starts_with("again-"))?;
        let owner = rb.metadata.owner_references.as_ref()?.first()?.uid.clone();
        Some((rb.metadata.uid.clone()?, owner))
    };
    wait_for(guard, "job again to run", 60, || async {
        job_phase(&jobs, "again").await == "Running" && binding().await.is_some()
    })
    .await;
    let (before, owner_before) = binding().await.unwrap();
    let job = serde_json::to_value(jobs.get("again").await.unwrap()).unwrap();
    create(
        admin,
        super::command("team-a", "restart-again", "RestartJob", &job),
    )
    .await;
    wait_for(
        guard,
        "job again to run again, with a new binding",
        60,
        || async {
            let restarted = job_status(&jobs, "again").await.is_some_and(|s| {
                s.retry_count >= 1 && s.state.phase == Some(tephra_api::batch::JobPhase::Running)
            });
            restarted
                && binding()
                    .await
                    .is_some_and(|(uid, owner)| uid != before && owner != owner_before)
        },
    )
    .await;
    jobs.delete("again", &DeleteParams::background())
        .await
        .unwrap();
}

/// The members of the test fleets.
pub const MEMBERS: [&str; 2] = ["east", "west"];

/// A provisioner no member runs (its claims are never bound).
pub const IDLE_PROVISIONER: &str = "csi.idle.example.com";

/// A fleet a scenario runs on, whichever its kind: its clusters' admin clients and a member's
/// outage.
pub enum Fleet<'a> {
    /// Devcluster servers.
    Dev(&'a tephra_devcluster::Handle),
    /// Real API servers.
    Real(&'a super::real::Real),
}

impl Fleet<'_> {
    /// An admin client of `name` (a member, or `control-plane`).
    pub async fn client(&self, name: &str) -> kube::Client {
        match self {
            Self::Dev(d) => d.client(name).await.unwrap(),
            Self::Real(r) => r.get(name).client.clone(),
        }
    }

    /// Stops `member`'s API server: it refuses connections.
    async fn stop(&self, member: &str) {
        match self {
            Self::Dev(d) => d.stop_member(member).await.unwrap(),
            Self::Real(r) => {
                r.get(member).audit.restarting();
                r.get(member).cluster.stop_apiserver();
            }
        }
    }

    /// Starts `member`'s API server again, on its data.
    async fn restore(&self, member: &str) {
        match self {
            Self::Dev(d) => d.restore_member(member).await.unwrap(),
            Self::Real(r) => {
                r.get(member).cluster.start_apiserver().await.unwrap();
                r.get(member).audit.restarted();
            }
        }
    }
}

/// Everything the components do in a fleet of two members of two 8-CPU nodes each: the
/// control plane's [`workload`] (its copies in the members), pods of each kind of owner, pods
/// with claims (the claims declared on the control plane, the classes, volumes and slices in
/// the members), a pod made in a member itself, a claim no member provisions, a HyperNode in
/// each member, preemption in a member, and a member's outage.
pub async fn fleet(fleet: &Fleet<'_>, guard: &Guard, owners: Owners) {
    let cp = fleet.client("control-plane").await;
    let mut members = Vec::new();
    for m in MEMBERS {
        members.push(fleet.client(m).await);
    }
    workload(&cp, guard).await;
    clusters_ready(&cp, guard, &MEMBERS).await;
    // The aborted job's copies were deleted in the members, under the members' roles.
    for (m, c) in MEMBERS.iter().zip(&members) {
        let pods: Api<Pod> = Api::namespaced(c.clone(), "team-a");
        wait_for(
            guard,
            &format!("no copy of job long left in {m}"),
            60,
            || none_named(&pods, &["long-"]),
        )
        .await;
    }
    owned_pods(&cp, guard, owners).await;
    let infra: Vec<(kube::Client, String)> = MEMBERS
        .iter()
        .zip(&members)
        .map(|(m, c)| (c.clone(), format!("{m}-a")))
        .collect();
    tokio::join!(
        claim_workload(&cp, &infra, guard),
        member_pod(&members[0], guard),
        unbound_claim(&cp, &members, guard),
        racks(&members, guard),
    );
    declared_log(&cp, guard).await;
    preemption(&cp, guard, MEMBERS.len()).await;
    scheduled(&cp, guard).await;
    restart(&cp, guard).await;
    outage(fleet, &cp, guard).await;
}

/// `kubectl logs` on a declared pod: the control plane's API server asks the virtual node's
/// kubelet endpoint, which the scheduler serves by reading the copy's log in its member (the
/// member role's `pods/log`); a real member has no kubelet to ask, and the answer names the
/// `kubectl --context` to use. Deleting the pod then waits for its kubelet: the scheduler
/// removes it once its copy is gone.
async fn declared_log(cp: &kube::Client, guard: &Guard) {
    create_admitted(cp, guard, short_pod("logged", json!({}))).await;
    let pods: Api<Pod> = Api::namespaced(cp.clone(), "team-a");
    wait_for(
        guard,
        "pod logged bound to the virtual node",
        60,
        || async {
            pods.get_opt("logged")
                .await
                .ok()
                .flatten()
                .is_some_and(|p| {
                    p.spec.and_then(|s| s.node_name).as_deref() == Some("tephra")
                        && p.status.and_then(|s| s.phase).as_deref() == Some("Succeeded")
                })
        },
    )
    .await;
    match pods.logs("logged", &Default::default()).await {
        Ok(text) => assert!(text.contains("simulated container main"), "{text}"),
        Err(e) => assert!(
            e.to_string().contains("kubectl --context"),
            "the log is read from the member or its command is named: {e}"
        ),
    }
    pods.delete("logged", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(guard, "pod logged gone", 60, || async {
        pods.get_opt("logged").await.is_ok_and(|p| p.is_none())
    })
    .await;
}

/// Waits until the controller-manager finds each of `members` Ready (their Cluster status).
async fn clusters_ready(cp: &kube::Client, guard: &Guard, members: &[&str]) {
    let clusters: Api<tephra_api::Cluster> = Api::all(cp.clone());
    wait_for(
        guard,
        &format!("Clusters {members:?} Ready"),
        60,
        || async {
            clusters.list(&Default::default()).await.is_ok_and(|l| {
                members.iter().all(|m| {
                    l.items.iter().any(|c| {
                        c.metadata.name.as_deref() == Some(m)
                            && c.status.as_ref().is_some_and(|s| {
                                s.conditions
                                    .iter()
                                    .any(|k| k.type_ == "Ready" && k.status == "True")
                            })
                    })
                })
            })
        },
    )
    .await;
}

/// Applies `doc` once the server admits it (a new namespace's pods wait for its default
/// ServiceAccount on kube-apiserver).
async fn create_admitted(client: &kube::Client, guard: &Guard, doc: Value) {
    let what = format!("{} {} admitted", doc["kind"], doc["metadata"]["name"]);
    wait_for(guard, &what, 60, || async {
        super::apply(client, &doc).await.is_ok()
    })
    .await;
}

/// A pod made in a member itself with tephra's schedulerName: the scheduler binds it there
/// (`pods/binding`).
async fn member_pod(member: &kube::Client, guard: &Guard) {
    create(
        member,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
    )
    .await;
    create_admitted(member, guard, short_pod("made-here", json!({}))).await;
    let pods: Api<Pod> = Api::namespaced(member.clone(), "team-a");
    wait_for(
        guard,
        "pod made-here to succeed in its member",
        60,
        || async { super::phase_of(&pods, "made-here").await == "Succeeded" },
    )
    .await;
}

/// A declared pod whose claim's class no member provisions: its member copy's claim is never
/// bound, so after the volume-bind timeout the scheduler records why on the pod in the member
/// (a FailedScheduling Event) and places it again. The pod and claim are deleted then.
async fn unbound_claim(cp: &kube::Client, members: &[kube::Client], guard: &Guard) {
    for m in members {
        create(
            m,
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                   "metadata": {"name": "idle"}, "provisioner": IDLE_PROVISIONER,
                   "volumeBindingMode": "WaitForFirstConsumer"}),
        )
        .await;
    }
    create(
        cp,
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": "never", "namespace": "team-a"},
               "spec": {"storageClassName": "idle", "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}}}),
    )
    .await;
    create(cp, short_pod("uses-never", claimed("never"))).await;
    wait_for(
        guard,
        "a FailedScheduling Event on uses-never in a member",
        60,
        || async {
            for m in members {
                let events: Api<k8s_openapi::api::core::v1::Event> =
                    Api::namespaced(m.clone(), "team-a");
                let told = events.list(&Default::default()).await.is_ok_and(|l| {
                    l.items.iter().any(|e| {
                        e.involved_object.name.as_deref() == Some("uses-never")
                            && e.reason.as_deref() == Some("FailedScheduling")
                    })
                });
                if told {
                    return true;
                }
            }
            false
        },
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(cp.clone(), "team-a");
    pods.delete("uses-never", &DeleteParams::default())
        .await
        .unwrap();
    let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        Api::namespaced(cp.clone(), "team-a");
    claims
        .delete("never", &DeleteParams::default())
        .await
        .unwrap();
}

/// A member's outage: the member a job runs in stops answering; the controller-manager finds
/// it not Ready and taints it (NoSchedule, then NoExecute), the taint manager takes the job
/// off it (the binding's eviction tasks) and the scheduler places it in the other member. The
/// member then answers again and is Ready, and the old copy goes. The job is deleted then.
async fn outage(fleet: &Fleet<'_>, cp: &kube::Client, guard: &Guard) {
    let jobs: Api<tephra_api::Job> = Api::namespaced(cp.clone(), "team-a");
    create(cp, gang_job("moved", 2, "1", json!({}))).await;
    let rbs: Api<tephra_api::ResourceBinding> = Api::namespaced(cp.clone(), "team-a");
    let placed = || async {
        rbs.list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|rb| rb.spec.resource.name.starts_with("moved-"))
    };
    let running_in = std::sync::Mutex::new(String::new());
    wait_for(guard, "job moved placed in a member", 60, || async {
        let Some(rb) = placed().await else {
            return false;
        };
        let Some(first) = rb.spec.clusters.first() else {
            return false;
        };
        *running_in.lock().unwrap() = first.name.clone();
        job_phase(&jobs, "moved").await == "Running"
    })
    .await;
    let down = running_in.into_inner().unwrap();
    fleet.stop(&down).await;
    wait_for(
        guard,
        "job moved placed in the other member",
        60,
        || async {
            placed().await.is_some_and(|rb| {
                !rb.spec.clusters.is_empty() && rb.spec.clusters.iter().all(|c| c.name != down)
            })
        },
    )
    .await;
    fleet.restore(&down).await;
    clusters_ready(cp, guard, &MEMBERS).await;
    let there: Api<Pod> = Api::namespaced(fleet.client(&down).await, "team-a");
    wait_for(guard, "the old copy of job moved deleted", 60, || {
        none_named(&there, &["moved-"])
    })
    .await;
    jobs.delete("moved", &DeleteParams::background())
        .await
        .unwrap();
}
