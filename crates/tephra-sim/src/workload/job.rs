//! A job as a source hands it to the simulator, and how it becomes a gang; what every source
//! shares.

use std::collections::BTreeMap;
use std::sync::Arc;

use tephra_controllers::job::{GangPlan, JobError};
use tephra_controllers::podgroup::{Gang, GangSpec, GangTask, gang};
use tephra_scheduler::model::{
    JobPolicy, Requirement, SelectorOp, TaintEffect, TaskShape, Toleration,
};
use tephra_scheduler::resources::{PODS, ResourceError, ResourceNames};

use tephra_scheduler::model::topology::{NetworkTopology, TopologyMode};

use crate::scenario::{Effect, NetworkTopologyDef, PolicyDef, TopologyModeDef};

/// Why a job cannot become a gang when it is submitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GangError {
    /// The job controller refused a Volcano Job.
    #[error(transparent)]
    Plan(#[from] JobError),
    /// A task's requests cannot be read.
    #[error(transparent)]
    Resources(#[from] ResourceError),
}

/// One task (role) of a job to submit.
/// A pod's request as (resource, quantity) pairs, shared by every pod made from one task and
/// every record and check that names it, so that none of them copies it.
pub type Request = std::sync::Arc<[(String, String)]>;

#[derive(Clone, Debug, PartialEq)]
pub struct SimTask {
    /// Role name.
    pub role: String,
    /// Replicas.
    pub replicas: u32,
    /// The role's gang minimum.
    pub min: Option<u32>,
    /// Per-pod request, as (resource, quantity) pairs.
    pub request: Request,
    /// Run time of each pod, in ms.
    pub duration_ms: i64,
    /// Node selector.
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: terms ORed, requirements within a term ANDed.
    pub affinity: Vec<Vec<Requirement>>,
    /// Node tolerations.
    pub tolerations: Vec<Toleration>,
}

/// A job to submit.
#[derive(Clone, Debug, PartialEq)]
pub struct SimJob {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Queue.
    pub queue: String,
    /// Submission time, ms.
    pub submit_ms: i64,
    /// Priority value.
    pub priority: i32,
    /// Gang size (None: all replicas).
    pub min_member: Option<u32>,
    /// Tasks.
    pub tasks: Vec<SimTask>,
    /// Placement policy.
    pub policy: JobPolicy,
    /// Network topology.
    pub topology: Option<NetworkTopology>,
    /// For a Volcano Job: the job controller's plan, which gives the gang (the other fields
    /// carry what the simulator itself needs: roles, replicas, requests, run times).
    pub plan: Option<Box<GangPlan>>,
    /// For a Volcano Job: the Job itself, which the job controller runs in the simulator.
    pub volcano: Option<VolcanoJob>,
}

/// A Volcano Job as read from a manifest.
#[derive(Clone, Debug)]
pub struct VolcanoJob(pub Box<tephra_api::Job>);

impl PartialEq for VolcanoJob {
    fn eq(&self, other: &Self) -> bool {
        serde_json::to_value(&*self.0).ok() == serde_json::to_value(&*other.0).ok()
    }
}

impl SimJob {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Total replicas.
    pub fn replicas(&self) -> u32 {
        self.tasks.iter().map(|t| t.replicas).sum()
    }

    /// The gang the scheduler sees, as the job controller makes it: from its plan for a
    /// Volcano Job, else from the job's own fields. Resource names are interned in `names`;
    /// the PodGroup is created at `created` (seconds).
    pub fn gang(&self, names: &mut ResourceNames, created: i64) -> Result<Gang, GangError> {
        if let Some(plan) = &self.plan {
            return Ok(plan.gang(names, created)?);
        }
        let mut tasks = Vec::new();
        for t in &self.tasks {
            let mut request =
                names.parse(t.request.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
            request.set(PODS, 1);
            tasks.push(GangTask {
                shape: Arc::new(TaskShape {
                    role: t.role.clone(),
                    request,
                    node_selector: t.node_selector.clone(),
                    affinity: t.affinity.clone(),
                    tolerations: t.tolerations.clone(),
                    priority: self.priority,
                    preemptable: true,
                    namespace: self.namespace.clone(),
                    priority_class: None,
                    rules: tephra_scheduler::model::PodRules {
                        gpus: tephra_controllers::vgpu::ask_of_resources(&t.request),
                        ..Default::default()
                    },
                }),
                replicas: t.replicas,
                min_available: t.min,
            });
        }
        Ok(gang(
            GangSpec {
                namespace: self.namespace.clone(),
                name: self.name.clone(),
                queue: self.queue.clone(),
                min_member: self.min_member,
                priority: Some(self.priority),
                priority_class: None,
                policy: Arc::new(self.policy.clone()),
                topology: self.topology.clone(),
                tasks,
            },
            created,
        ))
    }
}

/// Converts a scenario's network topology into the scheduler's.
pub fn topology(def: Option<&NetworkTopologyDef>) -> Option<NetworkTopology> {
    def.map(|d| NetworkTopology {
        mode: match d.mode {
            TopologyModeDef::Hard => TopologyMode::Hard,
            TopologyModeDef::Soft => TopologyMode::Soft,
        },
        highest_tier: d.highest_tier_allowed,
        highest_tier_name: d.highest_tier_name.clone(),
    })
}

/// Converts a scenario policy into the scheduler's.
pub fn policy(def: Option<&PolicyDef>) -> JobPolicy {
    let Some(def) = def else {
        return JobPolicy::default();
    };
    let mut p = JobPolicy {
        splittable: def.splittable,
        ..JobPolicy::default()
    };
    if let Some(a) = &def.cluster_affinity {
        p.cluster_names = a.cluster_names.clone();
        p.exclude = a.exclude.clone();
        for (key, values) in [
            ("region", &a.regions),
            ("zone", &a.zones),
            ("provider", &a.providers),
        ] {
            if !values.is_empty() {
                p.field_requirements.push(Requirement {
                    key: key.into(),
                    op: SelectorOp::In,
                    values: values.clone(),
                });
            }
        }
        for (k, v) in &a.labels {
            p.cluster_labels.push(Requirement {
                key: k.clone(),
                op: SelectorOp::In,
                values: vec![v.clone()],
            });
        }
    }
    p.tolerations = def
        .cluster_tolerations
        .iter()
        .map(|t| Toleration {
            key: t.key.clone(),
            exists: t.operator.as_deref() == Some("Exists"),
            value: t.value.clone(),
            effect: t.effect.map(effect),
            seconds: t.toleration_seconds,
        })
        .collect();
    p
}

/// Converts a scenario taint effect.
pub fn effect(e: Effect) -> TaintEffect {
    match e {
        Effect::NoSchedule => TaintEffect::NoSchedule,
        Effect::PreferNoSchedule => TaintEffect::PreferNoSchedule,
        Effect::NoExecute => TaintEffect::NoExecute,
    }
}

/// What a trace reader skipped, by reason.
pub type Skipped = BTreeMap<String, u64>;

/// A lazy source of jobs in arrival order.
pub trait JobSource {
    /// Arrival time of the next job, if any.
    fn peek(&mut self) -> Option<i64>;
    /// The next job.
    fn next_job(&mut self) -> Option<SimJob>;
    /// Rows skipped so far, by reason (traces only).
    fn skipped(&self) -> Skipped {
        Skipped::new()
    }
    /// Notes for the report (e.g. how fractional GPUs were treated).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Picks a name by weight, deterministically from `pick`.
pub fn weighted(weights: &BTreeMap<String, u32>, pick: u64) -> &str {
    let total: u64 = weights.values().map(|w| u64::from(*w)).sum();
    if total == 0 {
        return "default";
    }
    let mut x = pick % total;
    for (q, w) in weights {
        if x < u64::from(*w) {
            return q;
        }
        x -= u64::from(*w);
    }
    "default"
}

/// A task's requests, as (resource, quantity) pairs.
pub fn request(res: &crate::scenario::Resources) -> Vec<(String, String)> {
    res.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect()
}
