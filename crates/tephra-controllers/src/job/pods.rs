//! The objects the job controller creates for a Job, as Volcano's makes them: the PodGroup
//! (`<job>-<uid>`, minMember, minTaskMember, minResources, queue, priority class, the Job's
//! labels and annotations) and each pod (`<job>-<task>-<index>`, Volcano's labels and
//! annotations, the Job's scheduler name and priority class, its volumes, and what the job
//! plugins add; its planned node, where a fleet scheduler planned one). Both are owned by the
//! Job, so that deleting the Job deletes them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Pod, Volume, VolumeMount};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tephra_api::scheduling::SubGroupPolicySpec;
use tephra_api::well_known::{
    GROUP_NAME_ANNOTATION, JOB_NAME, JOB_NAMESPACE, JOB_RETRY_COUNT, JOB_VERSION,
    LARGEST_TASK_REQUEST, PARTITION_ID, PLANNED_NODE, PREEMPTABLE, QUEUE_NAME, SIM_DURATION,
    SIM_EXIT_CODE, TASK_INDEX, TASK_SPEC, TEMPLATE_UID, VOLCANO_SCHEDULER_NAME,
};
use tephra_api::{Job, PodGroup, PodGroupSpec};
use tephra_scheduler::resources::{ResourceNames, Resources, format_quantity};

use super::gang::{GangPlan, JobError};
use super::names::{owner, pod_name, podgroup_name};

/// Job annotations and labels that Volcano copies onto every pod.
const COPIED_TO_PODS: [&str; 5] = [
    PREEMPTABLE,
    "volcano.sh/cooldown-time",
    "volcano.sh/revocable-zone",
    "volcano.sh/jdb-min-available",
    "volcano.sh/jdb-max-unavailable",
];

/// The node a fleet scheduler planned for pod `index` of `task`, from the Job's
/// [`PLANNED_NODES`](tephra_api::well_known::PLANNED_NODES) annotation as the gang plan read
/// it. A plan that does not read (not an object of arrays of names) plans nothing: the pods
/// are scheduled as if it were absent.
fn planned_node(plan: &GangPlan, task: &str, index: u32) -> Option<String> {
    plan.planned_nodes
        .get(task)?
        .get(index as usize)
        .filter(|n| !n.is_empty())
        .cloned()
}

/// The PodGroup of a Job, from its gang plan.
pub fn podgroup(job: &Job, plan: &GangPlan) -> Result<PodGroup, JobError> {
    let spec = PodGroupSpec {
        min_member: Some(plan.min_member as i32),
        min_task_member: plan
            .min_task_member
            .iter()
            .map(|(k, v)| (k.clone(), *v as i32))
            .collect(),
        queue: plan.queue.clone(),
        priority_class_name: plan.priority_class.clone(),
        min_resources: Some(min_resources(plan)?),
        network_topology: job.spec.network_topology.clone(),
        sub_group_policy: sub_groups(job),
    };
    let mut pg = PodGroup::new(&podgroup_name(job), spec);
    pg.metadata.namespace = Some(plan.namespace.clone());
    pg.metadata.labels = job.metadata.labels.clone();
    let mut annotations = job.metadata.annotations.clone().unwrap_or_default();
    let largest = largest_task(plan)?;
    if !largest.is_empty() {
        let text = serde_json::Value::Object(
            largest
                .into_iter()
                .map(|(k, v)| (k, serde_json::Value::String(v.0)))
                .collect(),
        );
        annotations.insert(LARGEST_TASK_REQUEST.to_string(), text.to_string());
    }
    pg.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    pg.metadata.owner_references = Some(vec![owner(job)]);
    Ok(pg)
}

/// One sub-group policy for each task with a `partitionPolicy`, as Volcano's job controller
/// writes it: the task's pods (by their task label) split by partition id, `partitionSize` pods
/// each, at least `minPartitions` of them placed, each within the partition's network topology.
fn sub_groups(job: &Job) -> Vec<SubGroupPolicySpec> {
    job.spec
        .tasks
        .iter()
        .filter_map(|t| {
            let p = t.partition_policy.as_ref()?;
            let name = t.name.clone().unwrap_or_default();
            Some(SubGroupPolicySpec {
                name: Some(name.clone()),
                network_topology: p.network_topology.clone(),
                sub_group_size: Some(p.partition_size),
                min_sub_groups: Some(p.min_partitions.unwrap_or(0)),
                label_selector: Some(LabelSelector {
                    match_labels: Some([(TASK_SPEC.to_string(), name)].into()),
                    match_expressions: None,
                }),
                match_label_keys: vec![PARTITION_ID.to_string()],
            })
        })
        .collect()
}

/// The largest request of any one pod of the Job, per resource (tasks without replicas left
/// out): what the scheduler compares with its largest node before the pods exist.
fn largest_task(plan: &GangPlan) -> Result<BTreeMap<String, Quantity>, JobError> {
    let mut names = ResourceNames::default();
    let mut largest = Resources::ZERO;
    for (index, t) in plan.tasks.iter().enumerate() {
        if t.replicas > 0 {
            largest = largest.max(&t.request(index, &mut names)?);
        }
    }
    Ok(quantities(&names, &largest))
}

/// A resource vector as the API's quantities, zero entries left out.
fn quantities(names: &ResourceNames, r: &Resources) -> BTreeMap<String, Quantity> {
    (0..names.len())
        .filter(|&slot| r.get(slot) != 0)
        .map(|slot| {
            (
                names.name(slot).to_string(),
                Quantity(format_quantity(slot, r.get(slot))),
            )
        })
        .collect()
}

/// Whether an existing PodGroup needs its spec brought in line with `want` (Volcano updates
/// minMember, minTaskMember, minResources and the priority class when the Job changes).
pub fn podgroup_drifted(have: &PodGroup, want: &PodGroup) -> bool {
    let (h, w) = (&have.spec, &want.spec);
    h.min_member != w.min_member
        || h.min_task_member != w.min_task_member
        || h.priority_class_name != w.priority_class_name
        || h.min_resources != w.min_resources
}

/// minResources as Volcano computes it: first each task's own minimum, up to minMember; then
/// the tasks' remaining replicas until minMember pods are counted.
fn min_resources(plan: &GangPlan) -> Result<BTreeMap<String, Quantity>, JobError> {
    let mut names = ResourceNames::default();
    let mut per_pod = Vec::new();
    for (index, t) in plan.tasks.iter().enumerate() {
        per_pod.push(t.request(index, &mut names)?);
    }
    let want = plan.min_member;
    let mut total = Resources::ZERO;
    let mut counted = 0u32;
    for (t, r) in plan.tasks.iter().zip(&per_pod) {
        let take = t.min_available.min(want.saturating_sub(counted));
        total.add(&r.times(i64::from(take)));
        counted += take;
    }
    for (t, r) in plan.tasks.iter().zip(&per_pod) {
        if counted >= want {
            break;
        }
        let rest = t.replicas - t.min_available;
        let take = rest.min(want - counted);
        total.add(&r.times(i64::from(take)));
        counted += take;
    }
    Ok(quantities(&names, &total))
}

/// Pod `index` of task number `task` (in spec order) of a Job at its current version.
pub fn pod(job: &Job, plan: &GangPlan, task: usize, index: u32) -> Option<Pod> {
    let t = job.spec.tasks.get(task)?;
    let name = &plan.tasks.get(task)?.name;
    let job_name = job.metadata.name.clone().unwrap_or_default();
    let status = job.status.clone().unwrap_or_default();
    let template = t.template.clone();
    let tmeta = template.metadata.unwrap_or_default();
    let mut spec = template.spec.unwrap_or_default();
    if spec.scheduler_name.as_deref().is_none_or(str::is_empty) {
        spec.scheduler_name = Some(
            job.spec
                .scheduler_name
                .clone()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| VOLCANO_SCHEDULER_NAME.into()),
        );
    }
    if spec
        .priority_class_name
        .as_deref()
        .is_none_or(str::is_empty)
    {
        spec.priority_class_name = job.spec.priority_class_name.clone();
    }
    for (i, v) in job.spec.volumes.iter().enumerate() {
        let Some(claim) = v.volume_claim_name.clone().filter(|c| !c.is_empty()) else {
            continue;
        };
        let vname = format!("{job_name}-volume-{i}");
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: vname.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim,
                read_only: None,
            }),
            ..Volume::default()
        });
        for c in &mut spec.containers {
            c.volume_mounts
                .get_or_insert_with(Vec::new)
                .push(VolumeMount {
                    name: vname.clone(),
                    mount_path: v.mount_path.clone(),
                    ..VolumeMount::default()
                });
        }
    }
    super::plugins::on_pod(
        job,
        plan,
        task,
        index,
        &pod_name(&job_name, name, index),
        &mut spec,
    );
    let idx = index.to_string();
    let mut annotations = tmeta.annotations.unwrap_or_default();
    for (k, v) in [
        (TASK_INDEX, idx.clone()),
        (TASK_SPEC, name.clone()),
        (GROUP_NAME_ANNOTATION, podgroup_name(job)),
        (JOB_NAME, job_name.clone()),
        (QUEUE_NAME, job.spec.queue.clone()),
        (JOB_VERSION, status.version.to_string()),
        (TEMPLATE_UID, format!("{job_name}-{name}")),
        (JOB_RETRY_COUNT, status.retry_count.to_string()),
    ] {
        annotations.insert(k.to_string(), v);
    }
    let mut labels = tmeta.labels.unwrap_or_default();
    if let Some(p) = t.partition_policy.as_ref().filter(|p| p.partition_size > 0) {
        let partition = index / p.partition_size.unsigned_abs();
        labels.insert(PARTITION_ID.to_string(), partition.to_string());
    }
    for (k, v) in [
        (TASK_INDEX, idx),
        (JOB_NAME, job_name.clone()),
        (TASK_SPEC, name.clone()),
        (JOB_NAMESPACE, plan.namespace.clone()),
        (QUEUE_NAME, job.spec.queue.clone()),
    ] {
        labels.insert(k.to_string(), v);
    }
    for key in COPIED_TO_PODS {
        if let Some(v) = job.metadata.annotations.as_ref().and_then(|a| a.get(key)) {
            annotations.insert(key.into(), v.clone());
        }
    }
    if let Some(node) = planned_node(plan, name, index) {
        annotations.insert(PLANNED_NODE.to_string(), node);
    }
    // tephra's own: how long a simulated kubelet runs the pod, unless its template says.
    for key in [SIM_DURATION, SIM_EXIT_CODE] {
        if let Some(v) = job.metadata.annotations.as_ref().and_then(|a| a.get(key)) {
            annotations.entry(key.into()).or_insert_with(|| v.clone());
        }
    }
    for key in &COPIED_TO_PODS[..2] {
        if let Some(v) = job.metadata.labels.as_ref().and_then(|a| a.get(*key)) {
            labels.insert((*key).into(), v.clone());
        }
    }
    Some(Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(&job_name, name, index)),
            namespace: Some(plan.namespace.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![owner(job)]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::plan;

    fn job() -> Job {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "llm", "namespace": "ml", "uid": "u1",
                "annotations": {"volcano.sh/preemptable": "false"}},
            "spec": {"queue": "research", "minAvailable": 3, "plugins": {"env": []},
                "priorityClassName": "high",
                "tasks": [
                    {"name": "ps", "replicas": 1, "template": {"spec": {"containers": [
                        {"name": "c", "image": "i", "resources": {"requests": {"cpu": "2"}}}]}}},
                    {"name": "worker", "replicas": 4, "minAvailable": 2, "template": {
                        "metadata": {"labels": {"app": "w"}},
                        "spec": {"containers": [
                        {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}]}}}
                ]},
            "status": {"version": 2, "retryCount": 1, "state": {"phase": "Running"}}
        }))
        .expect("valid job")
    }

    #[test]
    fn the_podgroup_is_named_after_the_job_and_its_uid_with_volcanos_min_resources() {
        let j = job();
        let p = plan(&j).expect("plan");
        let pg = podgroup(&j, &p).expect("podgroup");
        assert_eq!(pg.metadata.name.as_deref(), Some("llm-u1"));
        assert_eq!(pg.spec.min_member, Some(3));
        assert_eq!(pg.spec.min_task_member.get("worker"), Some(&2));
        let min = pg.spec.min_resources.expect("minResources");
        assert_eq!(min.get("cpu").map(|q| q.0.as_str()), Some("4"));
        assert_eq!(min.get("nvidia.com/gpu").map(|q| q.0.as_str()), Some("2"));
        assert_eq!(pg.metadata.owner_references.expect("owner")[0].uid, "u1");
    }

    /// Volcano's own guide's Job (network topology, a partitioned task), as its controller fills
    /// the PodGroup: the Job's networkTopology, one sub-group policy per partitioned task, and
    /// each pod labelled with its partition.
    #[test]
    fn a_partitioned_topology_job_fills_the_podgroups_topology_and_sub_groups() {
        let j: Job = serde_json::from_value(serde_json::json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "nt", "namespace": "default", "uid": "u2"},
            "spec": {"minAvailable": 4, "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
                "tasks": [{"name": "t0", "replicas": 8,
                    "partitionPolicy": {"totalPartitions": 2, "partitionSize": 4,
                        "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
                    "template": {"spec": {"containers": [{"name": "c0", "image": "nginx",
                        "resources": {"requests": {"cpu": "4"}}}]}}}]}
        }))
        .expect("valid job");
        let p = plan(&j).expect("plan");
        let pg = podgroup(&j, &p).expect("podgroup");
        let t = pg.spec.network_topology.expect("networkTopology");
        assert_eq!(t.highest_tier_allowed, Some(2));
        let sg = &pg.spec.sub_group_policy;
        assert_eq!(sg.len(), 1);
        assert_eq!(sg[0].name.as_deref(), Some("t0"));
        assert_eq!(sg[0].sub_group_size, Some(4));
        assert_eq!(sg[0].min_sub_groups, Some(0));
        assert_eq!(sg[0].match_label_keys, [PARTITION_ID]);
        let sel = sg[0]
            .label_selector
            .as_ref()
            .and_then(|s| s.match_labels.as_ref());
        assert_eq!(sel.expect("selector")[TASK_SPEC], "t0");
        let inner = sg[0].network_topology.as_ref().expect("partition topology");
        assert_eq!(inner.highest_tier_allowed, Some(1));
        let label = |i| {
            pod(&j, &p, 0, i)
                .expect("pod")
                .metadata
                .labels
                .expect("labels")[PARTITION_ID]
                .clone()
        };
        assert_eq!(
            [label(0), label(3), label(4), label(7)],
            ["0", "0", "1", "1"]
        );
    }

    #[test]
    fn the_podgroup_declares_the_largest_request_of_any_one_pod() {
        let j = job();
        let pg = podgroup(&j, &plan(&j).expect("plan")).expect("podgroup");
        let a = pg.metadata.annotations.expect("annotations");
        // ps asks 2 CPUs, a worker one CPU and a GPU: per resource, the larger.
        let largest: serde_json::Value =
            serde_json::from_str(&a[LARGEST_TASK_REQUEST]).expect("JSON");
        assert_eq!(
            largest,
            serde_json::json!({"cpu": "2", "nvidia.com/gpu": "1"})
        );
        assert_eq!(a[PREEMPTABLE], "false", "the Job's own annotations stay");
    }

    #[test]
    fn a_pod_carries_volcanos_names_labels_annotations_and_env() {
        let j = job();
        let p = plan(&j).expect("plan");
        let pod = pod(&j, &p, 1, 3).expect("pod");
        let meta = &pod.metadata;
        assert_eq!(meta.name.as_deref(), Some("llm-worker-3"));
        let a = meta.annotations.as_ref().expect("annotations");
        assert_eq!(a[GROUP_NAME_ANNOTATION], "llm-u1");
        assert_eq!(a[JOB_VERSION], "2");
        assert_eq!(a[JOB_RETRY_COUNT], "1");
        assert_eq!(a[TASK_SPEC], "worker");
        assert_eq!(a[PREEMPTABLE], "false");
        let l = meta.labels.as_ref().expect("labels");
        assert_eq!(l["app"], "w");
        assert_eq!(l[JOB_NAMESPACE], "ml");
        assert_eq!(l[TASK_INDEX], "3");
        let spec = pod.spec.expect("spec");
        assert_eq!(spec.scheduler_name.as_deref(), Some("volcano"));
        assert_eq!(spec.priority_class_name.as_deref(), Some("high"));
        let env = spec.containers[0].env.as_ref().expect("env");
        assert!(
            env.iter()
                .any(|e| e.name == "VC_TASK_INDEX" && e.value.as_deref() == Some("3"))
        );
        assert!(!a.contains_key(PLANNED_NODE));
    }

    #[test]
    fn each_pod_carries_the_node_its_jobs_plan_names_for_its_task_and_index() {
        let mut j = job();
        j.metadata.annotations.get_or_insert_default().insert(
            tephra_api::well_known::PLANNED_NODES.into(),
            r#"{"worker": ["n-7", "n-2"], "ps": []}"#.into(),
        );
        let planned = |j: &Job, task, index| {
            let p = plan(j).expect("plan");
            pod(j, &p, task, index)
                .and_then(|pod| pod.metadata.annotations?.get(PLANNED_NODE).cloned())
        };
        assert_eq!(planned(&j, 1, 0).as_deref(), Some("n-7"));
        assert_eq!(planned(&j, 1, 1).as_deref(), Some("n-2"));
        // Beyond the plan, and a task it names no node for: scheduled as usual.
        assert_eq!(planned(&j, 1, 2), None);
        assert_eq!(planned(&j, 0, 0), None);
        // A plan that does not read plans nothing.
        j.metadata.annotations.get_or_insert_default().insert(
            tephra_api::well_known::PLANNED_NODES.into(),
            "worker=n-7".into(),
        );
        assert_eq!(planned(&j, 1, 0), None);
    }
}
