//! What a session's decisions mean for the API servers: the writes, planned without IO.
//! Binds and evictions go out as decided. PodGroup and Queue status are written only when
//! they differ from what was last written, and an Event on a PodGroup only when the reason its
//! job waits changes, so that a waiting job does not produce a write every session. A gang
//! whose pods all exist and that was only admitted (Pending → Inqueue, nothing else new) has
//! that written after [`INQUEUE_HOLD`] seconds: one placed within that time goes from Pending
//! to Running in one write, where writing both cost the API server a PodGroup write per gang
//! while it was busy binding (6,250 of them for 50,000 pods).
//! The kinds of write are in `write.rs`; this file plans them and builds the objects they
//! carry (a member's copy of a pod, a ResourceBinding, a PodGroup's status).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tephra_api::scheduling::{PodGroupCondition, PodGroupConditionType, PodGroupPhase};
use tephra_api::well_known::{
    DECLARED_UID, GANG_MIN_MEMBER, GANG_MIN_TASK_MEMBER, PLANNED_CLUSTER, PLANNED_NODE,
};
use tephra_api::work::{ObjectReference, TargetCluster};
use tephra_api::{PodGroupStatus, ResourceBinding, ResourceBindingSpec};
use tephra_scheduler::Decisions;
use tephra_scheduler::decisions::GroupStatus;

use crate::convert::api_phase;

mod write;

pub use write::{ClaimStep, DeclaredPod, DeviceStep, Involved, Write};

/// What the state loop knows of one PodGroup beyond the cache: its uid (for Events) and its
/// status as last observed (conditions are merged into it when the status is written).
#[derive(Clone, Debug, Default)]
pub struct GroupSeen {
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `status`, as last observed.
    pub status: PodGroupStatus,
    /// The cluster whose API holds the PodGroup.
    pub cluster: Arc<str>,
}

/// How long, in seconds, the admission of a gang whose pods all exist waits to be written
/// (see the module's doc). A gang short of pods is written at once: its controller may be
/// waiting for Inqueue to create them.
pub const INQUEUE_HOLD: i64 = 5;

/// A status held back: an admission not written yet.
#[derive(Clone, Debug)]
struct Held {
    cluster: Arc<str>,
    status: PodGroupStatus,
    /// When it was first held, in seconds.
    since: i64,
}

/// Remembers what was written, to write only changes.
#[derive(Default)]
pub struct Planner {
    groups: HashMap<String, PodGroupStatus>,
    /// Admissions not written yet, by job.
    held: HashMap<String, Held>,
    queues: HashMap<String, serde_json::Value>,
    reasons: HashMap<String, (String, String)>,
}

fn split(key: &str) -> (String, String) {
    match key.split_once('/') {
        Some((ns, n)) => (ns.to_string(), n.to_string()),
        None => ("default".to_string(), key.to_string()),
    }
}

/// What a member that binds through its own kube-scheduler (`bindingMode: Extender`) needs on
/// each copy: the gang's minimums, for the extender's barrier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtenderPlan {
    /// The member's kube-scheduler profile that calls the extender (the Cluster's
    /// `tephra.io/member-scheduler-name`, else `default-scheduler`).
    pub scheduler: String,
    /// The gang's minMember.
    pub min_member: i32,
    /// Each role's minTaskMember.
    pub min_task_member: BTreeMap<String, i32>,
}

/// The annotations a pod given shared GPUs is bound with, as the volcano-vgpu device plugin
/// reads them when the kubelet asks it to allocate (`now` in Unix seconds): the GPUs per
/// container twice (the record, and the list the plugin consumes), the node, the time (the
/// plugin takes the oldest pod first) and the `allocating` phase it answers. Cards of the
/// gpushare mode are written as Volcano writes them: their indices and the time, in
/// nanoseconds.
pub fn gpu_annotations(
    b: &tephra_scheduler::decisions::Bind,
    now: i64,
) -> BTreeMap<String, String> {
    use tephra_scheduler::model::vgpu;
    let Some(grants) = b.gpus.as_ref() else {
        return BTreeMap::new();
    };
    if let Some(indices) = grants.share_indices() {
        let nanos = i128::from(now) * 1_000_000_000;
        return BTreeMap::from([
            (vgpu::SHARE_INDEX.to_string(), indices),
            (vgpu::SHARE_PREDICATE_TIME.to_string(), nanos.to_string()),
        ]);
    }
    let devices = grants.encode();
    BTreeMap::from([
        (vgpu::IDS.to_string(), devices.clone()),
        (vgpu::TO_ALLOCATE.to_string(), devices),
        (vgpu::ASSIGNED_NODE.to_string(), b.node.clone()),
        (vgpu::ASSIGNED_TIME.to_string(), now.to_string()),
        (vgpu::BIND_PHASE.to_string(), "allocating".to_string()),
        (vgpu::BIND_TIME.to_string(), now.to_string()),
    ])
}

/// The copy of a declared pod that a member runs: the same name, labels and annotations (plus
/// the cluster and node it was planned on), bound to its node at creation; or, with
/// `extender`, left for the member's kube-scheduler, which the extender steers to the node.
pub fn member_pod(mut p: Pod, cluster: &str, node: &str, extender: Option<&ExtenderPlan>) -> Pod {
    let meta = &mut p.metadata;
    let declared_uid = meta.uid.take();
    meta.resource_version = None;
    meta.creation_timestamp = None;
    meta.managed_fields = None;
    meta.owner_references = None;
    meta.generate_name = None;
    meta.deletion_timestamp = None;
    meta.generation = None;
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(PLANNED_CLUSTER.into(), cluster.into());
    annotations.insert(PLANNED_NODE.into(), node.into());
    if let Some(uid) = declared_uid {
        annotations.insert(DECLARED_UID.into(), uid);
    }

    if let Some(plan) = extender {
        annotations.insert(GANG_MIN_MEMBER.into(), plan.min_member.to_string());
        if !plan.min_task_member.is_empty() {
            annotations.insert(
                GANG_MIN_TASK_MEMBER.into(),
                serde_json::to_string(&plan.min_task_member).unwrap_or_default(),
            );
        }
        if let Some(spec) = p.spec.as_mut() {
            spec.node_name = None;
            spec.scheduler_name = Some(plan.scheduler.clone());
        }
    } else if let Some(spec) = p.spec.as_mut() {
        spec.node_name = Some(node.into());
    }
    // The member's Priority admission computes these from its own PriorityClass, and refuses
    // a pod that brings values of its own that differ.
    if let Some(spec) = p.spec.as_mut() {
        spec.priority = None;
        spec.preemption_policy = None;
    }
    // A claim its template gave it on the control plane is copied to the member under the same
    // name (`prebind.rs`): the copy names it, or the member would make a claim of its own.
    let generated: BTreeMap<String, String> = p
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|s| Some((s.name.clone(), s.resource_claim_name.clone()?)))
        .collect();
    for rc in p
        .spec
        .as_mut()
        .and_then(|s| s.resource_claims.as_mut())
        .into_iter()
        .flatten()
    {
        if let Some(name) = generated.get(&rc.name) {
            rc.resource_claim_name = Some(name.clone());
            rc.resource_claim_template_name = None;
        }
    }
    p.status = None;
    p
}

/// A ResourceClaim's `status.allocation`, as kube-scheduler writes it: each device with the
/// request it serves (and, for a share of a device, the share's ID and the capacity it
/// consumes), and the nodes it may be used from.
fn allocation(a: &tephra_scheduler::model::ClaimAllocation) -> serde_json::Value {
    let results: Vec<serde_json::Value> = a
        .devices
        .iter()
        .map(|d| {
            let mut r = serde_json::json!({"request": d.request, "driver": d.driver,
                                           "pool": d.pool, "device": d.device});
            if let Some(id) = &d.share {
                r["shareID"] = id.clone().into();
                if !d.consumed.is_empty() {
                    r["consumedCapacity"] = d
                        .consumed
                        .iter()
                        .map(|(k, m)| {
                            (k.clone(), tephra_controllers::dra::quantity_text(*m).into())
                        })
                        .collect::<serde_json::Map<_, _>>()
                        .into();
                }
            }
            r
        })
        .collect();
    let mut out = serde_json::json!({"devices": {"results": results}});
    if let Some(sel) = tephra_controllers::dra::node_selector(&a.nodes) {
        out["nodeSelector"] = sel;
    }
    out
}

/// A job's ResourceBinding: the clusters it runs in with each task's replicas there, and its
/// node plan (`pod → cluster/node`) in the `tephra.io/node-plan` annotation. Its PodGroup owns
/// it (as Karmada's resource template owns its binding), so that deleting the job, or the
/// PodGroup, takes the binding with it. `replaces`: the binding there was written for an
/// earlier PodGroup of the job, and is deleted first. `kube`: the PodGroup is Kubernetes' own
/// (`scheduling.k8s.io/v1beta1`); its ownership then does not block its deletion (that would
/// need its `podgroups/finalizers`, which no other write of the scheduler does).
pub fn resource_binding(
    job: &str,
    uid: Option<String>,
    replaces: bool,
    placed: &[(String, String, String, String)],
    kube: bool,
) -> Write {
    let api_version = if kube {
        "scheduling.k8s.io/v1beta1"
    } else {
        "scheduling.volcano.sh/v1beta1"
    };
    let (namespace, name) = split(job);
    let mut clusters: BTreeMap<String, BTreeMap<String, i32>> = BTreeMap::new();
    let mut plan = BTreeMap::new();
    for (pod, role, cluster, node) in placed {
        *clusters
            .entry(cluster.clone())
            .or_default()
            .entry(role.clone())
            .or_default() += 1;
        plan.insert(pod.clone(), format!("{cluster}/{node}"));
    }
    let mut rb = ResourceBinding::new(
        &name,
        ResourceBindingSpec {
            resource: ObjectReference {
                api_version: api_version.into(),
                kind: "PodGroup".into(),
                namespace: Some(namespace.clone()),
                name: name.clone(),
                uid: uid.clone(),
            },
            clusters: clusters
                .into_iter()
                .map(|(name, tasks)| TargetCluster { name, tasks })
                .collect(),
            graceful_eviction_tasks: Vec::new(),
            reschedule_triggered_at: None,
        },
    );
    rb.metadata.namespace = Some(namespace.clone());
    rb.metadata.owner_references = uid.map(|uid| {
        vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: api_version.into(),
                kind: "PodGroup".into(),
                name: name.clone(),
                uid,
                controller: Some(true),
                block_owner_deletion: Some(!kube),
            },
        ]
    });
    rb.metadata.annotations = Some(BTreeMap::from([(
        NODE_PLAN_ANNOTATION.to_string(),
        serde_json::to_string(&plan).unwrap_or_default(),
    )]));
    Write::Binding {
        namespace,
        name,
        object: Box::new(rb),
        replaces,
    }
}

/// The writes that take a gang left below its minimum back whole: an eviction of every pod
/// that holds a node, and an Event on its PodGroup saying why.
pub fn evict_gang(
    job: &str,
    held: &[(String, String)],
    seen: Option<GroupSeen>,
    deadline: i64,
) -> Vec<Write> {
    let reason = format!(
        "gang below minMember {deadline}s after failed binds: evicted whole to be placed again"
    );
    let mut out: Vec<Write> = held
        .iter()
        .map(|(task, cluster)| {
            let (namespace, name) = split(task);
            Write::Evict {
                cluster: cluster.clone(),
                namespace,
                name,
                reason: reason.clone(),
            }
        })
        .collect();
    if let Some(known) = seen {
        let (namespace, group) = split(job);
        out.push(Write::Event {
            kind: Involved::PodGroup,
            cluster: known.cluster.to_string(),
            namespace,
            group,
            uid: known.uid,
            reason: "GangBindTimeout".into(),
            message: reason,
            warning: true,
        });
    }
    out
}

/// The annotation of a ResourceBinding that holds its node plan (`pod → cluster/node`, JSON).
pub const NODE_PLAN_ANNOTATION: &str = "tephra.io/node-plan";

/// Two statuses say the same when phase, counts and each condition's type, status, reason
/// and message agree (timestamps and transition ids aside).
fn same(a: &PodGroupStatus, b: &PodGroupStatus) -> bool {
    let conds = |s: &PodGroupStatus| {
        s.conditions
            .iter()
            .map(|c| {
                (
                    c.type_,
                    c.status.clone(),
                    c.reason.clone(),
                    c.message.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    a.phase == b.phase
        && a.running == b.running
        && a.succeeded == b.succeeded
        && a.failed == b.failed
        && conds(a) == conds(b)
}

/// Whether `new` says nothing that `old` does not but that the gang was admitted: Pending (or
/// no phase yet) to Inqueue, with the same counts and conditions.
fn only_admitted(old: &PodGroupStatus, new: &PodGroupStatus) -> bool {
    let was_waiting = matches!(old.phase, None | Some(PodGroupPhase::Pending));
    let mut probe = new.clone();
    probe.phase = old.phase;
    was_waiting && new.phase == Some(PodGroupPhase::Inqueue) && same(&probe, old)
}

/// The PodGroup status a session's decision gives, merged into the status last observed: one
/// condition per type, replaced when it says something new.
pub fn group_status(seen: &PodGroupStatus, g: &GroupStatus, now: &Time) -> PodGroupStatus {
    let mut out = seen.clone();
    out.phase = Some(api_phase(g.phase));
    out.running = i32::try_from(g.running).unwrap_or(i32::MAX);
    out.succeeded = i32::try_from(g.succeeded).unwrap_or(i32::MAX);
    out.failed = i32::try_from(g.failed).unwrap_or(i32::MAX);
    for c in &g.conditions {
        let type_ = match c.kind {
            "Scheduled" => PodGroupConditionType::Scheduled,
            _ => PodGroupConditionType::Unschedulable,
        };
        let status = if c.status { "True" } else { "False" }.to_string();
        let fresh = PodGroupCondition {
            type_,
            status: status.clone(),
            transition_id: Some(c.transition_id.to_string()),
            last_transition_time: Some(now.clone()),
            reason: Some(c.reason.clone()),
            message: Some(c.message.clone()),
        };
        match out.conditions.iter_mut().find(|o| o.type_ == type_) {
            Some(old)
                if old.status == status
                    && old.reason.as_deref() == Some(c.reason.as_str())
                    && old.message.as_deref() == Some(c.message.as_str()) => {}
            Some(old) => *old = fresh,
            None => out.conditions.push(fresh),
        }
    }
    // Scheduled and Unschedulable cannot both be true: the newer one wins.
    if let Some(newest) = g.conditions.last() {
        let newest_type = if newest.kind == "Scheduled" {
            PodGroupConditionType::Scheduled
        } else {
            PodGroupConditionType::Unschedulable
        };
        for o in &mut out.conditions {
            if o.type_ != newest_type && newest.status && o.status == "True" {
                o.status = "False".into();
                o.last_transition_time = Some(now.clone());
            }
        }
    }
    out
}

impl Planner {
    /// Forgets a PodGroup that is gone.
    pub fn forget_group(&mut self, job: &str) {
        self.groups.remove(job);
        self.held.remove(job);
        self.reasons.remove(job);
    }

    /// The writes `d` calls for. `seen` gives what is known of each PodGroup, `declared` the
    /// pods declared on the control plane that no member has yet (fleet mode).
    pub fn plan(
        &mut self,
        d: &Decisions,
        seen: &dyn Fn(&str) -> Option<GroupSeen>,
        declared: &dyn Fn(&str) -> Option<DeclaredPod>,
        extender: &dyn Fn(&str, &str) -> Option<ExtenderPlan>,
        now: &Time,
    ) -> Vec<Write> {
        let mut out = Vec::new();
        // A gang with claims to bind first is bound after them, as a whole (`prebind.rs`).
        let mut claims: HashMap<&str, Vec<ClaimStep>> = HashMap::new();
        for p in &d.prebinds {
            for v in &p.volumes {
                let (namespace, claim) = split(&v.claim);
                claims.entry(p.task.as_str()).or_default().push(ClaimStep {
                    namespace,
                    claim,
                    volume: v.volume.clone(),
                    node: p.node.clone(),
                });
            }
        }
        let mut devices: HashMap<&str, Vec<DeviceStep>> = HashMap::new();
        for p in &d.prebinds {
            for b in &p.devices {
                let (namespace, claim) = split(&b.claim);
                let (_, pod) = split(&p.task);
                devices
                    .entry(p.task.as_str())
                    .or_default()
                    .push(DeviceStep {
                        namespace,
                        claim,
                        pod,
                        allocation: b.allocation.as_ref().map(allocation),
                        // A declared pod's copy does not exist yet: it is reserved for the copy
                        // once the copy is made (executor.rs, Place).
                        reserve: declared(&p.task).is_none(),
                    });
            }
        }
        let gated: std::collections::HashSet<&str> = d
            .binds
            .iter()
            .filter(|b| {
                claims.contains_key(b.task.as_str()) || devices.contains_key(b.task.as_str())
            })
            .map(|b| b.job.as_str())
            .collect();
        let mut held: BTreeMap<(String, String), Write> = BTreeMap::new();
        for b in &d.binds {
            let (namespace, name) = split(&b.task);
            let annotations = gpu_annotations(b, now.0.as_second());
            let w = match declared(&b.task) {
                Some(p) => Write::Place {
                    pod: p,
                    annotations,
                    gpu_lock: b.gpu_lock,
                    extender: extender(&b.cluster, &b.job),
                    node: b.node.clone(),
                    cluster: b.cluster.clone(),
                    namespace,
                    name,
                },
                None => Write::Bind {
                    cluster: b.cluster.clone(),
                    namespace,
                    name,
                    node: b.node.clone(),
                    job: b.job.clone(),
                    annotations,
                    gpu_lock: b.gpu_lock,
                },
            };
            if !gated.contains(b.job.as_str()) {
                out.push(w);
                continue;
            }
            let gang = held
                .entry((b.job.clone(), b.cluster.clone()))
                .or_insert_with(|| Write::PreBind {
                    cluster: b.cluster.clone(),
                    job: b.job.clone(),
                    steps: Vec::new(),
                    devices: Vec::new(),
                    then: Vec::new(),
                });
            if let Write::PreBind {
                steps,
                devices: gang_devices,
                then,
                ..
            } = gang
            {
                gang_devices.extend(devices.remove(b.task.as_str()).unwrap_or_default());
                for s in claims.get(b.task.as_str()).into_iter().flatten() {
                    if !steps
                        .iter()
                        .any(|x| x.namespace == s.namespace && x.claim == s.claim)
                    {
                        steps.push(s.clone());
                    }
                }
                then.push(w);
            }
        }
        // A claim the gang's pods share is allocated by one step and reserved by the others:
        // the allocation goes first.
        for w in held.values_mut() {
            if let Write::PreBind { devices, .. } = w {
                devices.sort_by_key(|d| d.allocation.is_none());
            }
        }
        out.extend(held.into_values());
        for x in &d.deallocations {
            let (namespace, claim) = split(&x.claim);
            let (_, pod) = split(&x.task);
            out.push(Write::Deallocate {
                cluster: x.cluster.clone(),
                namespace,
                claim,
                pod,
                resource_version: x.resource_version.clone(),
            });
        }
        for e in &d.evictions {
            let (namespace, name) = split(&e.task);
            out.push(Write::Evict {
                cluster: e.cluster.clone(),
                namespace,
                name,
                reason: e.reason.clone(),
            });
        }
        let now_s = now.0.as_second();
        for g in &d.groups {
            let Some(known) = seen(&g.job) else {
                // An implicit job (a pod without a PodGroup) has no object to write to.
                continue;
            };
            let written = self.groups.get(&g.job);
            let base = written.unwrap_or(&known.status);
            let status = group_status(base, g, now);
            // A newer status replaces one held: it was computed from what was written.
            let held = self.held.remove(&g.job);
            if same(&status, base) {
                continue;
            }
            if !g.short_of_pods && only_admitted(base, &status) {
                let since = held.map_or(now_s, |h| h.since);
                self.held.insert(
                    g.job.clone(),
                    Held {
                        cluster: Arc::clone(&known.cluster),
                        status,
                        since,
                    },
                );
                continue;
            }
            self.groups.insert(g.job.clone(), status.clone());
            let (namespace, name) = split(&g.job);
            out.push(Write::GroupStatus {
                cluster: known.cluster.to_string(),
                namespace,
                name,
                status,
            });
        }
        let due: Vec<String> = self
            .held
            .iter()
            .filter(|(_, h)| now_s - h.since >= INQUEUE_HOLD)
            .map(|(job, _)| job.clone())
            .collect();
        for job in due {
            if let Some(h) = self.held.remove(&job) {
                out.push(self.release(job, h));
            }
        }
        self.said(d, seen, &mut out);
        self.queues(d, &mut out);
        out
    }

    /// Status writes for jobs whose running, succeeded or failed counts changed while their
    /// phase did not (the session reports phase and condition changes only).
    pub fn recount(
        &mut self,
        d: &Decisions,
        changed: &[(String, [i32; 3])],
        seen: &dyn Fn(&str) -> Option<GroupSeen>,
    ) -> Vec<Write> {
        let mut out = Vec::new();
        if changed.is_empty() {
            return out;
        }
        // The session's own status writes win; a set, since both lists can hold every job.
        let decided: std::collections::HashSet<&str> =
            d.groups.iter().map(|g| g.job.as_str()).collect();
        for (job, [running, succeeded, failed]) in changed {
            if decided.contains(job.as_str()) {
                continue;
            }
            let Some(known) = seen(job) else { continue };
            // A held admission goes out now, with the new counts.
            if let Some(mut h) = self.held.remove(job) {
                h.status.running = *running;
                h.status.succeeded = *succeeded;
                h.status.failed = *failed;
                out.push(self.release(job.clone(), h));
                continue;
            }
            let mut status = self.groups.get(job).unwrap_or(&known.status).clone();
            if (status.running, status.succeeded, status.failed) == (*running, *succeeded, *failed)
            {
                continue;
            }
            status.running = *running;
            status.succeeded = *succeeded;
            status.failed = *failed;
            self.groups.insert(job.clone(), status.clone());
            let (namespace, name) = split(job);
            out.push(Write::GroupStatus {
                cluster: known.cluster.to_string(),
                namespace,
                name,
                status,
            });
        }
        out
    }

    /// The write of a held status, now remembered as written.
    fn release(&mut self, job: String, h: Held) -> Write {
        let (namespace, name) = split(&job);
        self.groups.insert(job, h.status.clone());
        Write::GroupStatus {
            cluster: h.cluster.to_string(),
            namespace,
            name,
            status: h.status,
        }
    }

    /// Admissions held back now (see [`INQUEUE_HOLD`]).
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// An Event for each job whose reason to wait changed.
    fn said(
        &mut self,
        d: &Decisions,
        seen: &dyn Fn(&str) -> Option<GroupSeen>,
        out: &mut Vec<Write>,
    ) {
        for e in &d.events {
            let Some(known) = seen(&e.job) else {
                continue;
            };
            let said = (e.reason.to_string(), e.message.clone());
            if self.reasons.get(&e.job) == Some(&said) {
                continue;
            }
            self.reasons.insert(e.job.clone(), said);
            let (namespace, group) = split(&e.job);
            out.push(Write::Event {
                kind: Involved::PodGroup,
                cluster: known.cluster.to_string(),
                namespace,
                group,
                uid: known.uid.clone(),
                reason: e.reason.to_string(),
                message: e.message.clone(),
                warning: true,
            });
        }
    }

    /// Each queue's status, when it changed.
    fn queues(&mut self, d: &Decisions, out: &mut Vec<Write>) {
        for q in &d.queues {
            let allocated: BTreeMap<String, Quantity> = q
                .allocated
                .iter()
                .map(|(k, v)| (k.clone(), Quantity(v.clone())))
                .collect();
            let status = serde_json::json!({
                "allocated": allocated,
                "pending": q.pending,
                "inqueue": q.inqueue,
                "running": q.running,
                "unknown": q.unknown,
                "completed": q.completed,
            });
            if self.queues.get(&q.name) == Some(&status) {
                continue;
            }
            self.queues.insert(q.name.clone(), status.clone());
            out.push(Write::QueueStatus {
                name: q.name.clone(),
                status,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tephra_scheduler::decisions::{Condition, JobEvent};
    use tephra_scheduler::model::GroupPhase;

    #[test]
    fn a_declared_pod_reads_back_as_it_was_kept() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a-0", "namespace": "ns", "labels": {"app": "x"},
                         "annotations": {"scheduling.k8s.io/group-name": "a"}},
            "spec": {"schedulerName": "volcano", "priorityClassName": "high",
                     "tolerations": [{"key": "k", "operator": "Exists"}],
                     "containers": [{"name": "c", "image": "busybox", "env": [{"name": "E", "value": "v"}],
                                     "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}}}]}
        }))
        .unwrap();
        let kept = DeclaredPod::new(&pod).unwrap();
        assert_eq!(kept.pod().unwrap(), pod);
        let copy = member_pod(kept.pod().unwrap(), "east", "n1", None);
        assert_eq!(copy.spec.unwrap().node_name.as_deref(), Some("n1"));
    }

    fn waiting(msg: &str) -> GroupStatus {
        GroupStatus {
            job: "ns/pg".into(),
            phase: GroupPhase::Inqueue,
            conditions: vec![Condition {
                kind: "Unschedulable",
                status: true,
                reason: "NotEnoughResources".into(),
                message: msg.into(),
                transition_id: 3,
            }],
            running: 0,
            succeeded: 0,
            failed: 0,
            short_of_pods: false,
        }
    }

    fn seen(_: &str) -> Option<GroupSeen> {
        Some(GroupSeen::default())
    }

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn a_job_that_keeps_waiting_for_the_same_reason_is_written_once() {
        let mut p = Planner::default();
        let d = Decisions {
            groups: vec![waiting("0/1 nodes are available")],
            events: vec![JobEvent {
                job: "ns/pg".into(),
                reason: "Unschedulable",
                message: "0/1 nodes are available".into(),
            }],
            ..Decisions::default()
        };
        let first = p.plan(&d, &seen, &|_| None, &|_, _| None, &now());
        assert_eq!(first.len(), 2, "{first:?}");
        assert!(
            p.plan(&d, &seen, &|_| None, &|_, _| None, &now())
                .is_empty()
        );
        let changed = Decisions {
            groups: vec![waiting("0/2 nodes are available")],
            ..d.clone()
        };
        let again = p.plan(&changed, &seen, &|_| None, &|_, _| None, &now());
        assert_eq!(again.len(), 1, "only the status changed: {again:?}");
    }

    #[test]
    fn scheduled_clears_an_old_unschedulable_condition() {
        let mut g = waiting("no room");
        let first = group_status(&PodGroupStatus::default(), &g, &now());
        g.phase = GroupPhase::Running;
        g.conditions = vec![Condition {
            kind: "Scheduled",
            status: true,
            reason: "tasks in gang are ready to be scheduled".into(),
            message: String::new(),
            transition_id: 4,
        }];
        let second = group_status(&first, &g, &now());
        let unsched = second
            .conditions
            .iter()
            .find(|c| c.type_ == PodGroupConditionType::Unschedulable)
            .unwrap();
        assert_eq!(unsched.status, "False");
        assert_eq!(second.conditions.len(), 2);
    }

    fn run(
        p: &mut Planner,
        d: &Decisions,
        seen: &dyn Fn(&str) -> Option<GroupSeen>,
        t: i64,
    ) -> Vec<Write> {
        p.plan(d, seen, &|_| None, &|_, _| None, &at(t))
    }

    fn at(s: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap())
    }

    fn admitted(phase: GroupPhase, short_of_pods: bool) -> Decisions {
        Decisions {
            groups: vec![GroupStatus {
                job: "ns/pg".into(),
                phase,
                conditions: Vec::new(),
                running: 0,
                succeeded: 0,
                failed: 0,
                short_of_pods,
            }],
            ..Decisions::default()
        }
    }

    fn phases(w: &[Write]) -> Vec<Option<PodGroupPhase>> {
        w.iter()
            .filter_map(|w| match w {
                Write::GroupStatus { status, .. } => Some(status.phase),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_gang_whose_pods_exist_placed_soon_after_admission_is_written_once_as_running() {
        let mut p = Planner::default();
        let first = run(&mut p, &admitted(GroupPhase::Inqueue, false), &seen, 100);
        assert!(first.is_empty(), "{first:?}");
        assert_eq!(p.held(), 1);
        let placed = run(&mut p, &admitted(GroupPhase::Running, false), &seen, 102);
        assert_eq!(phases(&placed), vec![Some(PodGroupPhase::Running)]);
        assert_eq!(p.held(), 0);
        let later = run(&mut p, &Decisions::default(), &seen, 200);
        assert!(later.is_empty(), "nothing held is left to write: {later:?}");
    }

    #[test]
    fn an_admission_still_waiting_after_the_hold_is_written() {
        let mut p = Planner::default();
        let none = Decisions::default();
        assert!(run(&mut p, &admitted(GroupPhase::Inqueue, false), &seen, 100).is_empty());
        assert!(run(&mut p, &none, &seen, 100 + INQUEUE_HOLD - 1).is_empty());
        // The same admission decided again keeps its first time.
        assert!(
            run(
                &mut p,
                &admitted(GroupPhase::Inqueue, false),
                &seen,
                100 + INQUEUE_HOLD - 1
            )
            .is_empty()
        );
        let due = run(&mut p, &none, &seen, 100 + INQUEUE_HOLD);
        assert_eq!(phases(&due), vec![Some(PodGroupPhase::Inqueue)]);
        assert!(run(&mut p, &none, &seen, 100 + 2 * INQUEUE_HOLD).is_empty());
    }

    #[test]
    fn a_gang_short_of_pods_is_written_inqueue_at_once_for_its_controller() {
        let mut p = Planner::default();
        let w = run(&mut p, &admitted(GroupPhase::Inqueue, true), &seen, 100);
        assert_eq!(phases(&w), vec![Some(PodGroupPhase::Inqueue)]);
        assert_eq!(p.held(), 0);
    }

    #[test]
    fn an_admission_with_a_reason_or_new_counts_is_written_at_once() {
        let mut p = Planner::default();
        let w = run(
            &mut p,
            &Decisions {
                groups: vec![waiting("no room")],
                ..Decisions::default()
            },
            &seen,
            100,
        );
        assert_eq!(phases(&w), vec![Some(PodGroupPhase::Inqueue)]);
        let mut q = Planner::default();
        assert!(run(&mut q, &admitted(GroupPhase::Inqueue, false), &seen, 100).is_empty());
        let w = q.recount(
            &Decisions::default(),
            &[("ns/pg".to_string(), [1, 0, 0])],
            &seen,
        );
        assert_eq!(phases(&w), vec![Some(PodGroupPhase::Inqueue)]);
        assert!(matches!(&w[0], Write::GroupStatus { status, .. } if status.running == 1));
        assert_eq!(q.held(), 0);
    }

    #[test]
    fn an_admission_taken_back_before_it_was_written_is_never_written() {
        let mut p = Planner::default();
        let seen = |_: &str| {
            Some(GroupSeen {
                status: PodGroupStatus {
                    phase: Some(PodGroupPhase::Pending),
                    ..PodGroupStatus::default()
                },
                ..GroupSeen::default()
            })
        };
        assert!(run(&mut p, &admitted(GroupPhase::Inqueue, false), &seen, 100).is_empty());
        let back = run(&mut p, &admitted(GroupPhase::Pending, false), &seen, 101);
        assert!(back.is_empty(), "{back:?}");
        assert!(run(&mut p, &Decisions::default(), &seen, 200).is_empty());
    }
}
