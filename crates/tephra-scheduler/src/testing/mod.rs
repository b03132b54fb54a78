//! Builders for fleets and gang jobs, feeding a [`Cache`] through its ordinary event API, for
//! tests and benchmarks (feature `testing`; not part of the scheduler's API otherwise).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cache::{Cache, CacheError, Event};
use crate::decisions::Decisions;
use crate::model::{
    Cluster, GroupPhase, JobPolicy, Labels, NodeSpec, PodGroupSpec, PodRules, PodSpec, TaskShape,
    TaskStatus, Toleration,
};
use crate::resources::{PODS, ResourceError, Resources};

/// Errors while building a world.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// A resource quantity did not parse.
    #[error(transparent)]
    Resource(#[from] ResourceError),
    /// The cache refused an event.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

/// Parses `[("cpu", "2"), ...]` against the cache's resource names.
pub fn resources(cache: &mut Cache, list: &[(&str, &str)]) -> Result<Resources, ResourceError> {
    cache.names_mut().parse(list.iter().copied())
}

/// The capacity of the 8-GPU node most tests use: 96 cpu, 1Ti memory, 110 pods, 8 GPUs.
pub const GPU8: &[(&str, &str)] = &[
    ("cpu", "96"),
    ("memory", "1Ti"),
    ("pods", "110"),
    ("nvidia.com/gpu", "8"),
];

/// Adds a ready cluster.
pub fn add_cluster(cache: &mut Cache, cluster: Cluster) -> Result<(), BuildError> {
    cache.apply(Event::ClusterUpsert(cluster))?;
    Ok(())
}

/// Adds `count` identical nodes named `<prefix>-<i>` to `cluster`.
pub fn add_nodes(
    cache: &mut Cache,
    cluster: &str,
    prefix: &str,
    count: usize,
    capacity: &[(&str, &str)],
    labels: &[(&str, &str)],
) -> Result<(), BuildError> {
    let allocatable = resources(cache, capacity)?;
    let labels: Labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for i in 0..count {
        cache.apply(Event::NodeUpsert(NodeSpec {
            gpus: Default::default(),
            gpu_lock: None,
            name: format!("{prefix}-{i}"),
            cluster: cluster.to_string(),
            labels: labels.clone(),
            taints: Vec::new(),
            allocatable,
            unschedulable: false,
            ready: true,
        }))?;
    }
    Ok(())
}

/// One role of a gang job.
#[derive(Clone, Debug)]
pub struct Role {
    /// Role name.
    pub name: String,
    /// Replicas.
    pub replicas: u32,
    /// Per-pod request.
    pub request: Vec<(String, String)>,
    /// Node selector.
    pub selector: Labels,
    /// Tolerations.
    pub tolerations: Vec<Toleration>,
    /// Minimum of this role for the gang (`minTaskMember`), if any.
    pub min: Option<u32>,
    /// Pod priority.
    pub priority: i32,
    /// Labels and (anti-)affinity of the role's pods.
    pub rules: PodRules,
    /// The planned node of each replica, by index (`tephra.io/planned-node`).
    pub planned: Vec<String>,
}

impl Role {
    /// A role with `replicas` pods each requesting `request`.
    pub fn new(name: &str, replicas: u32, request: &[(&str, &str)]) -> Self {
        Self {
            name: name.to_string(),
            replicas,
            request: request
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            selector: Labels::new(),
            tolerations: Vec::new(),
            min: None,
            priority: 0,
            rules: PodRules::default(),
            planned: Vec::new(),
        }
    }

    /// Plans replica `i` on `nodes[i]`, as a fleet scheduler hands its plan to a member.
    pub fn planned(mut self, nodes: &[&str]) -> Self {
        self.planned = nodes.iter().map(|n| n.to_string()).collect();
        self
    }

    /// Sets the pods' labels and (anti-)affinity.
    pub fn rules(mut self, rules: PodRules) -> Self {
        self.rules = rules;
        self
    }

    /// Requires node labels.
    pub fn select(mut self, key: &str, value: &str) -> Self {
        self.selector.insert(key.to_string(), value.to_string());
        self
    }

    /// Sets the role's `minTaskMember`.
    pub fn min(mut self, min: u32) -> Self {
        self.min = Some(min);
        self
    }
}

/// A gang job: a PodGroup and its pods.
#[derive(Clone, Debug)]
pub struct GangJob {
    /// Namespace.
    pub namespace: String,
    /// Name (also the PodGroup name).
    pub name: String,
    /// Queue.
    pub queue: String,
    /// Gang size; defaults to all replicas.
    pub min_member: Option<u32>,
    /// Roles.
    pub roles: Vec<Role>,
    /// Priority value.
    pub priority: i32,
    /// Initial PodGroup phase (Inqueue skips the enqueue action).
    pub phase: GroupPhase,
    /// Creation time.
    pub created: i64,
    /// Placement policy.
    pub policy: JobPolicy,
    /// Network topology.
    pub topology: Option<crate::model::topology::NetworkTopology>,
    /// Sub-group policies.
    pub sub_groups: Vec<crate::model::topology::SubGroupPolicy>,
}

impl GangJob {
    /// A job in namespace `default`, queue `default`, admitted (Inqueue), gang of all replicas.
    pub fn new(name: &str, roles: Vec<Role>) -> Self {
        Self {
            namespace: "default".into(),
            name: name.into(),
            queue: "default".into(),
            min_member: None,
            roles,
            priority: 0,
            phase: GroupPhase::Inqueue,
            created: 0,
            policy: JobPolicy::default(),
            topology: None,
            sub_groups: Vec::new(),
        }
    }

    /// Sets the queue.
    pub fn queue(mut self, q: &str) -> Self {
        self.queue = q.into();
        self
    }

    /// Sets the gang size.
    pub fn min_member(mut self, m: u32) -> Self {
        self.min_member = Some(m);
        self
    }

    /// Sets the network topology.
    pub fn topology(mut self, t: crate::model::topology::NetworkTopology) -> Self {
        self.topology = Some(t);
        self
    }

    /// Adds a sub-group policy.
    pub fn sub_group(mut self, p: crate::model::topology::SubGroupPolicy) -> Self {
        self.sub_groups.push(p);
        self
    }

    /// Sets the priority.
    pub fn priority(mut self, p: i32) -> Self {
        self.priority = p;
        self
    }

    /// Sets the initial phase.
    pub fn phase(mut self, p: GroupPhase) -> Self {
        self.phase = p;
        self
    }

    /// Sets the creation time.
    pub fn created(mut self, t: i64) -> Self {
        self.created = t;
        self
    }

    /// Sets the policy.
    pub fn policy(mut self, p: JobPolicy) -> Self {
        self.policy = p;
        self
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Adds a gang job: its PodGroup (with minResources of the gang) and all its pods, Pending.
/// Returns the pod names in creation order.
pub fn add_job(cache: &mut Cache, job: &GangJob) -> Result<Vec<String>, BuildError> {
    let total: u32 = job.roles.iter().map(|r| r.replicas).sum();
    let min_member = job.min_member.unwrap_or(total);
    let mut shapes = Vec::new();
    for role in &job.roles {
        let list: Vec<(&str, &str)> = role
            .request
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut request = resources(cache, &list)?;
        request.set(PODS, 1);
        shapes.push(Arc::new(TaskShape {
            role: role.name.clone(),
            request,
            node_selector: role.selector.clone(),
            affinity: Vec::new(),
            tolerations: role.tolerations.clone(),
            priority: if role.priority != 0 {
                role.priority
            } else {
                job.priority
            },
            preemptable: true,
            namespace: job.namespace.clone(),
            priority_class: None,
            rules: role.rules.clone(),
        }));
    }
    // minResources: the cheapest min_member pods, role minimums first (as the job controller
    // computes it).
    let mut min_resources = Resources::ZERO;
    let mut counted = 0u32;
    for (role, shape) in job.roles.iter().zip(&shapes) {
        let m = role.min.unwrap_or(0).min(role.replicas);
        min_resources.add(&shape.request.times(i64::from(m)));
        counted += m;
    }
    'fill: for (role, shape) in job.roles.iter().zip(&shapes) {
        let extra = role.replicas - role.min.unwrap_or(0).min(role.replicas);
        for _ in 0..extra {
            if counted >= min_member {
                break 'fill;
            }
            min_resources.add(&shape.request);
            counted += 1;
        }
    }
    let min_task_member: BTreeMap<String, u32> = job
        .roles
        .iter()
        .filter_map(|r| r.min.map(|m| (r.name.clone(), m)))
        .collect();
    cache.apply(Event::PodGroupUpsert(PodGroupSpec {
        namespace: job.namespace.clone(),
        name: job.name.clone(),
        queue: job.queue.clone(),
        min_member,
        min_task_member,
        min_resources: Some(min_resources),
        largest_task: None,
        priority_class: None,
        priority: Some(job.priority),
        phase: job.phase,
        phase_since: job.created,
        created: job.created,
        policy: Arc::new(job.policy.clone()),
        topology: job.topology.clone(),
        sub_groups: job.sub_groups.clone(),
    }))?;
    let mut names = Vec::new();
    for (role, shape) in job.roles.iter().zip(&shapes) {
        for i in 0..role.replicas {
            let name = format!("{}-{}-{i}", job.name, role.name);
            cache.apply(Event::PodUpsert(PodSpec {
                gpus: None,
                namespace: job.namespace.clone(),
                name: name.clone(),
                group: Some(job.name.clone()),
                shape: Arc::clone(shape),
                index: i,
                status: TaskStatus::Pending,
                placement: None,
                created: job.created,
                lives_in: None,
                planned: role.planned.get(i as usize).cloned(),
                ghost_of: None,
                foreign: false,
            }))?;
            names.push(name);
        }
    }
    Ok(names)
}

/// Takes a session's decisions into the cache as the runtime does ([`Cache::take`]), with bound
/// pods Running on their nodes at once, so that the next session sees them.
pub fn apply_binds(cache: &mut Cache, decisions: &Decisions) -> Result<(), BuildError> {
    cache.take(decisions, TaskStatus::Running)?;
    Ok(())
}

/// One edit of a fuzz input: at `at` (modulo the length), `op` 0 replaces the byte, 1 inserts
/// `byte`, 2 deletes, 3 duplicates the next 16 bytes (which grows nesting and repeats keys).
pub type Edit = (usize, u8, u8);

/// Applies `edits` to a copy of `seed`: the byte-level mutations the fuzz tests run over their
/// seed corpus. Pure, so that both the scheduler's and the simulator's fuzz tests share it.
pub fn mutate(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for &(at, op, byte) in edits {
        let i = if out.is_empty() { 0 } else { at % out.len() };
        match op % 4 {
            0 if !out.is_empty() => out[i] = byte,
            2 if !out.is_empty() => {
                out.remove(i);
            }
            3 => {
                let end = (i + 16).min(out.len());
                let copy = out[i..end].to_vec();
                out.splice(i..i, copy);
            }
            _ => out.insert(i, byte),
        }
    }
    out
}

/// A vGPU device configuration (`device-config.yaml`, as in Volcano's
/// `volcano-vgpu-device-config` ConfigMap) with dynamic MIG geometries of the A100 80GB:
/// seven 1g.10gb, two 3g.40gb, or one 7g.80gb.
pub const A100_80GB_MIG_CONFIG: &str = "nvidia:
  resourceCountName: volcano.sh/vgpu-number
  knownMigGeometries:
  - models: [\"A100-SXM4-80GB\", \"A100-PCIE-80GB\"]
    allowedGeometries:
      - group: group1
        geometries:
        - {name: 1g.10gb, memory: 10240, count: 7}
      - group: group2
        geometries:
        - {name: 3g.40gb, memory: 40960, count: 2}
      - group: group4
        geometries:
        - {name: 7g.80gb, memory: 81920, count: 1}
";
