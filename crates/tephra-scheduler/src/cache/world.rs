//! Everything the cache knows, and how each event changes it. Derived state is kept up to date
//! as events arrive: node usage, queue usage, each job's task tally, the set of jobs with work to
//! place and the set of jobs that changed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::backlog::Backlog;
use super::counts;
use super::event::{CacheError, DraChange, Event, StorageChange};
use super::slab::Slab;
use super::topology::Topologies;
use crate::hash::HashMap;
use crate::model::{
    Cluster, GroupPhase, Id, Job, JobPolicy, Node, NodeSpec, PdbSpec, PhaseCounts, PodGroupSpec,
    PodSpec, QueueSpec, Storage, Task, TaskStatus, TaskTally, devices::Dra,
};
use crate::resources::{ResourceNames, Resources};

/// Everything the cache knows. Read through a [`Snapshot`](super::Snapshot).
#[derive(Clone, Debug)]
pub struct World {
    /// Interned resource names.
    pub names: ResourceNames,
    /// Clusters.
    pub clusters: Slab<Cluster>,
    cluster_index: HashMap<String, Id>,
    /// Node slots of each cluster slot, in arrival order.
    pub cluster_nodes: Vec<Vec<Id>>,
    /// Nodes.
    pub nodes: Slab<Node>,
    node_index: HashMap<String, Id>,
    /// Jobs.
    pub jobs: Slab<Job>,
    job_index: HashMap<String, Id>,
    /// Tasks.
    pub tasks: Slab<Task>,
    task_index: HashMap<String, Id>,
    /// Tasks whose node is not known yet, by `cluster/node`.
    orphans: HashMap<String, Vec<Id>>,
    /// Queues by name.
    pub queues: BTreeMap<String, Arc<QueueSpec>>,
    /// Resources held by each queue's placed tasks (terminating ones excluded).
    pub queue_used: BTreeMap<String, Resources>,
    /// PriorityClass values.
    pub priority_classes: BTreeMap<String, i32>,
    /// Jobs with work for a session: a Pending or Inqueue PodGroup, or a task not yet placed;
    /// those in the `backlog` excepted.
    pub active_jobs: BTreeSet<Id>,
    /// Jobs whose pods or PodGroup changed since the caller last cleared the set
    /// ([`Cache::clear_changed`](super::Cache::clear_changed)); a session recomputes their PodGroup status.
    pub changed_jobs: BTreeSet<Id>,
    /// PodDisruptionBudgets, by `namespace/name`.
    pub pdbs: BTreeMap<String, PdbSpec>,
    /// Tasks whose pods carry required pod anti-affinity: a newcomer must keep out of their
    /// topology domains, so the scheduler looks at them without walking every pod.
    pub repelling: BTreeSet<Id>,
    /// Tasks whose pods ask for host ports: a newcomer asking for the same port must keep off
    /// their nodes, so the scheduler finds them without walking every pod.
    pub port_holders: BTreeSet<Id>,
    /// Tasks whose pods mount volume claims (ReadWriteOncePod and attach limits count them).
    pub claim_users: BTreeSet<Id>,
    /// Each member cluster's StorageClasses, PersistentVolumes, claims and attach limits.
    pub storage: BTreeMap<String, Storage>,
    /// Each member cluster's DeviceClasses, ResourceSlices and ResourceClaims.
    pub dra: BTreeMap<String, Dra>,
    /// Tasks whose pods use ResourceClaims.
    pub device_users: BTreeSet<Id>,
    /// Tasks given shared GPUs (`PodSpec::gpus`).
    pub gpu_users: BTreeSet<Id>,
    /// The dynamic MIG geometries GPU models allow (`model::mig`); `None` until the device
    /// configuration is read, while MIG-mode GPUs take nothing.
    pub mig: Option<Arc<crate::model::mig::KnownGeometries>>,
    /// Bumped on every applied event.
    pub generation: u64,
    /// Bumped when what the fleet could ever hold may have grown: a node added or its
    /// allocatable, labels or taints changed, a cluster added, changed or removed.
    pub fleet_generation: u64,
    /// Pods a session reserved room for, and the node (`nominations.rs`).
    pub nominated: BTreeMap<Id, Id>,
    /// The placement policy of the implicit job of a pod without a PodGroup (default: any
    /// cluster).
    pub implicit_policy: Arc<JobPolicy>,
    /// PodGroups by queue and phase.
    pub queue_phases: BTreeMap<String, PhaseCounts>,
    /// Jobs a session found can never be placed, set aside until they or the fleet change
    /// (`parking.rs`); they are not in `active_jobs`.
    pub parked: BTreeSet<Id>,
    /// Each member cluster's HyperNodes and their resolution (`topology.rs`).
    pub hypernodes: Topologies,
    /// Pending jobs whose status says the enqueue votes refused them, with nothing changed
    /// since that could make it say anything else (`parking.rs`): `enqueue` asks only the
    /// votes about them, and passes them over in silence while the votes still refuse.
    pub resting: BTreeSet<Id>,
    /// Tasks whose pods carry inter-pod affinity or anti-affinity terms, required or
    /// preferred: the affinity index reads their terms without walking every pod.
    pub affine: BTreeSet<Id>,
    /// Ghost tasks by the key of the declared pod they are copies of (failover).
    ghosts_of: HashMap<String, Vec<Id>>,
    /// What ghosts count for their queue, by declared pod key ([`Self::settle`]).
    ghost_share: HashMap<String, (String, Resources)>,
    /// Resting jobs that hold nothing, kept out of `active_jobs` by queue (`backlog.rs`).
    pub backlog: Backlog,
}

impl Default for World {
    fn default() -> Self {
        let mut queues = BTreeMap::new();
        for name in [
            tephra_api::defaults::DEFAULT_QUEUE,
            tephra_api::defaults::ROOT_QUEUE,
        ] {
            queues.insert(name.to_string(), Arc::new(QueueSpec::named(name)));
        }
        Self {
            names: ResourceNames::default(),
            clusters: Slab::default(),
            cluster_index: HashMap::default(),
            cluster_nodes: Vec::new(),
            nodes: Slab::default(),
            node_index: HashMap::default(),
            jobs: Slab::default(),
            job_index: HashMap::default(),
            tasks: Slab::default(),
            task_index: HashMap::default(),
            orphans: HashMap::default(),
            implicit_policy: Arc::new(JobPolicy::default()),
            queues,
            queue_used: BTreeMap::new(),
            priority_classes: BTreeMap::new(),
            active_jobs: BTreeSet::new(),
            changed_jobs: BTreeSet::new(),
            repelling: BTreeSet::new(),
            port_holders: BTreeSet::new(),
            claim_users: BTreeSet::new(),
            storage: BTreeMap::new(),
            dra: BTreeMap::new(),
            device_users: BTreeSet::new(),
            gpu_users: BTreeSet::new(),
            mig: None,
            pdbs: BTreeMap::new(),
            generation: 0,
            fleet_generation: 0,
            parked: BTreeSet::new(),
            queue_phases: BTreeMap::new(),
            nominated: BTreeMap::new(),
            hypernodes: Topologies::default(),
            resting: BTreeSet::new(),
            affine: BTreeSet::new(),
            ghosts_of: HashMap::default(),
            ghost_share: HashMap::default(),
            backlog: Backlog::default(),
        }
    }
}

fn node_key(cluster: &str, node: &str) -> String {
    format!("{cluster}/{node}")
}

/// Calls `f` with `a/b`, made on the stack when it is short: a lookup by such a key then
/// allocates nothing.
fn with_joined<R>(a: &str, b: &str, f: impl FnOnce(&str) -> R) -> R {
    let mut buf = [0u8; 256];
    let len = a.len() + 1 + b.len();
    if len > buf.len() {
        return f(&format!("{a}/{b}"));
    }
    buf[..a.len()].copy_from_slice(a.as_bytes());
    buf[a.len()] = b'/';
    buf[a.len() + 1..len].copy_from_slice(b.as_bytes());
    // Two strings and an ASCII byte: valid UTF-8.
    match std::str::from_utf8(&buf[..len]) {
        Ok(key) => f(key),
        Err(_) => f(&format!("{a}/{b}")),
    }
}

impl World {
    /// Cluster slot by name.
    pub fn cluster_id(&self, name: &str) -> Option<Id> {
        self.cluster_index.get(name).copied()
    }

    /// Node slot by cluster and name. The key is put together on the stack where it fits
    /// (every bind and every placed pod looks a node up).
    pub fn node_id(&self, cluster: &str, node: &str) -> Option<Id> {
        with_joined(cluster, node, |key| self.node_index.get(key).copied())
    }

    /// Job slot by `namespace/name`.
    pub fn job_id(&self, key: &str) -> Option<Id> {
        self.job_index.get(key).copied()
    }

    /// Whether a job has work for a session: it is active, or rests in the backlog.
    #[inline]
    pub fn has_work(&self, job: Id) -> bool {
        self.active_jobs.contains(&job) || self.backlog.contains(job)
    }

    /// Task slot by `namespace/name`.
    pub fn task_id(&self, key: &str) -> Option<Id> {
        self.task_index.get(key).copied()
    }

    /// The priority of a job: explicit value, else its class's value, else 0.
    pub fn job_priority(&self, job: &Job) -> i32 {
        let Some(g) = &job.group else { return 0 };
        g.priority
            .or_else(|| {
                g.priority_class
                    .as_ref()
                    .and_then(|c| self.priority_classes.get(c).copied())
            })
            .unwrap_or(0)
    }

    /// The priority of a task: its pod priority, else its class's value.
    pub fn task_priority(&self, task: &Task) -> i32 {
        let shape = &task.spec.shape;
        if shape.priority != 0 {
            return shape.priority;
        }
        shape
            .priority_class
            .as_ref()
            .and_then(|c| self.priority_classes.get(c).copied())
            .unwrap_or(0)
    }

    /// The part of a task that counts against its node and queue.
    fn holding(&self, task: &Task) -> Option<(Id, Resources, bool)> {
        let node = task.node?;
        task.spec.status.holds_node().then_some((
            node,
            task.spec.shape.request,
            task.spec.status == TaskStatus::Releasing,
        ))
    }

    /// Whether a task counts for its queue's share: it holds a node and is not terminating (a
    /// terminating pod still holds its node, but Volcano's allocated statuses exclude
    /// Releasing).
    fn counts_for_queue(&self, task: &Task) -> bool {
        self.holding(task)
            .is_some_and(|(_, _, releasing)| !releasing)
    }

    fn account(&mut self, task_id: Id, sign: i64) {
        let Some(task) = self.tasks.get(task_id) else {
            return;
        };
        // Whatever the task holds now, the copies of its declared pod are settled after it
        // (a declared pod that stops holding, by finishing or going back to Pending, gives the
        // room's share back to its ghost).
        let declared = self.declared_key(task);
        if let Some((node_id, request, releasing)) = self.holding(task) {
            let delta = request.times(sign);
            // A ghost's share is settled for its declared pod as a whole ([`Self::settle`]);
            // another scheduler's pod in no PodGroup (its job a ghost's too) counts for no queue.
            let job = self.jobs.get(task.job);
            let share =
                (!releasing && task.spec.ghost_of.is_none() && !job.is_some_and(|j| j.ghost))
                    .then(|| job.map_or("", |j| j.queue()));
            if let Some(node) = self.nodes.get_mut(node_id) {
                node.used.add(&delta);
                if releasing {
                    node.releasing.add(&delta);
                }
            }
            if let Some(queue) = share {
                // Looked up by name first: a queue's entry exists after its first pod, and
                // this runs for every pod that starts or stops holding a node.
                match self.queue_used.get_mut(queue) {
                    Some(used) => used.add(&delta),
                    None => {
                        let mut used = Resources::default();
                        used.add(&delta);
                        self.queue_used.insert(queue.to_string(), used);
                    }
                }
            }
        }
        if let Some(key) = declared {
            self.settle(&key);
        }
    }

    /// The key of the declared pod a task is (or, a ghost, copies), when ghosts of it may be
    /// counted: `None` while no ghost is about, so that the common case costs nothing.
    fn declared_key(&self, task: &Task) -> Option<String> {
        if self.ghosts_of.is_empty() && self.ghost_share.is_empty() {
            return None;
        }
        Some(match &task.spec.ghost_of {
            Some(g) => format!("{}/{}", task.spec.namespace, g.pod),
            None => task.key.clone(),
        })
    }

    /// What the ghost of the declared pod `key` counts for its queue while the pod holds no
    /// node (failover): the queue and the ghost's request.
    pub fn ghost_share(&self, key: &str) -> Option<&(String, Resources)> {
        self.ghost_share.get(key)
    }

    /// Settles what the ghosts of the declared pod `key` count for their queue: a gang counts
    /// once during failover, each pod by the copy that holds the room. The declared pod when
    /// it holds a node; otherwise its oldest ghost that does; nothing once none does.
    fn settle(&mut self, key: &str) {
        let declared = self
            .task_index
            .get(key)
            .and_then(|id| self.tasks.get(*id))
            .is_some_and(|t| self.counts_for_queue(t));
        let want = if declared {
            None
        } else {
            self.ghosts_of
                .get(key)
                .into_iter()
                .flatten()
                .filter_map(|g| self.tasks.get(*g))
                .find(|g| self.counts_for_queue(g))
                .and_then(|g| {
                    let of = g.spec.ghost_of.as_ref()?;
                    Some((of.queue.clone(), g.spec.shape.request))
                })
        };
        if self.ghost_share.get(key) == want.as_ref() {
            return;
        }
        if let Some((queue, r)) = self.ghost_share.remove(key) {
            self.queue_used.entry(queue).or_default().add(&r.times(-1));
        }
        if let Some((queue, r)) = want {
            self.queue_used.entry(queue.clone()).or_default().add(&r);
            self.ghost_share.insert(key.to_string(), (queue, r));
        }
    }

    /// Keeps the ghost task `id` in (or, `keep` false, out of) the ghosts of its declared pod.
    fn track_ghost(&mut self, id: Id, keep: bool) {
        let Some(t) = self.tasks.get(id) else { return };
        let Some(of) = &t.spec.ghost_of else { return };
        let key = format!("{}/{}", t.spec.namespace, of.pod);
        let list = self.ghosts_of.entry(key.clone()).or_default();
        list.retain(|g| *g != id);
        if keep {
            list.push(id);
        } else if list.is_empty() {
            self.ghosts_of.remove(&key);
        }
    }

    /// Counts (`sign` 1) or uncounts (-1) a task's reported status in its job's tally, and a
    /// Pending task's request in what the job's Pending tasks ask for.
    fn tally(&mut self, task_id: Id, sign: i32) {
        let Some(t) = self.tasks.get(task_id) else {
            return;
        };
        let (job, status, shape) = (t.job, t.spec.status, &t.spec.shape);
        let Some(j) = self.jobs.get_mut(job) else {
            return;
        };
        j.tally.count(status, sign);
        if status == TaskStatus::Pending {
            let delta = shape.request.times(i64::from(sign));
            j.pending_request.add(&delta);
            if !shape.gated() {
                j.pending_ungated.add(&delta);
            }
        }
    }

    fn refresh_active(&mut self, job_id: Id) {
        self.parked.remove(&job_id);
        self.resting.remove(&job_id);
        self.backlog.remove(job_id);
        if let Some(j) = self.jobs.get_mut(job_id) {
            counts::recount(&mut self.queue_phases, j);
        }
        let changed_at = self.generation + 1;
        let Some(job) = self.jobs.get_mut(job_id) else {
            self.active_jobs.remove(&job_id);
            self.changed_jobs.remove(&job_id);
            return;
        };
        job.changed_at = changed_at;
        let job = &*job;
        self.changed_jobs.insert(job_id);
        let phase_active = job
            .group
            .as_ref()
            .is_some_and(|g| matches!(g.phase, GroupPhase::Pending | GroupPhase::Inqueue));
        let has_pending = job.tasks.iter().any(|t| {
            self.tasks.get(*t).is_some_and(|t| {
                matches!(t.spec.status, TaskStatus::Pending | TaskStatus::Pipelined)
            })
        });
        if phase_active || has_pending {
            self.active_jobs.insert(job_id);
        } else {
            self.active_jobs.remove(&job_id);
        }
    }

    fn job_for(&mut self, namespace: &str, group: Option<&str>, pod_name: &str, ghost: bool) -> Id {
        if let Some(g) = group
            && let Some(id) = with_joined(namespace, g, |key| self.job_index.get(key).copied())
        {
            return id;
        }
        let (key, implicit) = match group {
            Some(g) => (format!("{namespace}/{g}"), false),
            None => (format!("{namespace}/pod-{pod_name}"), true),
        };
        if let Some(id) = self.job_index.get(&key) {
            return *id;
        }
        let id = self.jobs.insert(Job {
            key: key.clone(),
            group: None,
            tasks: Vec::new(),
            implicit,
            ghost: ghost && implicit,
            tally: TaskTally::default(),
            pending_request: Resources::ZERO,
            pending_ungated: Resources::ZERO,
            changed_at: 0,
            counted_as: None,
        });
        self.job_index.insert(key, id);
        id
    }

    fn upsert_pod(&mut self, spec: PodSpec) {
        let node = spec
            .placement
            .as_ref()
            .and_then(|(c, n)| self.node_id(c, n));
        let known = with_joined(&spec.namespace, &spec.name, |key| {
            self.task_index.get(key).copied()
        });
        if let Some(id) = known {
            if self.tasks.get(id).is_some_and(|t| t.spec == spec) {
                // Nothing changed (a resync, or a status write echoed back).
                return;
            }
            self.account(id, -1);
            self.tally(id, -1);
            self.unorphan(id);
            let old_job = self.tasks.get(id).map(|t| t.job);
            let job = self.job_for(
                &spec.namespace,
                spec.group.as_deref(),
                &spec.name,
                spec.ghost_of.is_some() || spec.foreign,
            );
            if old_job != Some(job)
                && let Some(old) = old_job
            {
                self.detach_task(old, id);
                if let Some(j) = self.jobs.get_mut(job) {
                    j.tasks.push(id);
                }
            }
            let placement = spec.placement.clone();
            if self.jobs.get(job).is_some_and(|j| j.implicit) {
                self.ensure_implicit_group(job, &spec);
            }
            if let Some(t) = self.tasks.get_mut(id) {
                t.spec = spec;
                t.job = job;
                t.node = node;
            }
            self.orphan_if_unplaced(id, node, placement);
            self.account(id, 1);
            self.tally(id, 1);
            self.track_constraining(id);
            self.refresh_active(job);
            if let Some(old) = old_job.filter(|o| *o != job) {
                self.refresh_active(old);
            }
        } else {
            let key = format!("{}/{}", spec.namespace, spec.name);
            let job = self.job_for(
                &spec.namespace,
                spec.group.as_deref(),
                &spec.name,
                spec.ghost_of.is_some() || spec.foreign,
            );
            let placement = spec.placement.clone();
            let implicit = self.jobs.get(job).is_some_and(|j| j.implicit);
            if implicit {
                self.ensure_implicit_group(job, &spec);
            }
            let id = self.tasks.insert(Task {
                key: key.clone(),
                spec,
                job,
                node,
            });
            self.task_index.insert(key, id);
            if let Some(j) = self.jobs.get_mut(job) {
                j.tasks.push(id);
            }
            self.track_ghost(id, true);
            self.orphan_if_unplaced(id, node, placement);
            self.account(id, 1);
            self.tally(id, 1);
            self.track_constraining(id);
            self.refresh_active(job);
        }
    }

    /// Keeps the task in the sets of tasks that constrain newcomers (`repelling`,
    /// `port_holders`), or out of them.
    fn track_constraining(&mut self, id: Id) {
        let gpus = self.tasks.get(id).is_some_and(|t| t.spec.gpus.is_some());
        let rules = self.tasks.get(id).map(|t| &t.spec.shape.rules);
        let repels = rules.is_some_and(|r| !r.anti_affinity.is_empty());
        let ports = rules.is_some_and(|r| !r.host_ports.is_empty());
        let claims = rules.is_some_and(|r| !r.claims.is_empty());
        let devices = rules.is_some_and(|r| !r.device_claims.is_empty());
        let affine = rules.is_some_and(|r| {
            !(r.affinity.is_empty()
                && r.anti_affinity.is_empty()
                && r.preferred_affinity.is_empty()
                && r.preferred_anti_affinity.is_empty())
        });
        for (set, member) in [
            (&mut self.repelling, repels),
            (&mut self.port_holders, ports),
            (&mut self.claim_users, claims),
            (&mut self.device_users, devices),
            (&mut self.gpu_users, gpus),
            (&mut self.affine, affine),
        ] {
            if member {
                set.insert(id);
            } else {
                set.remove(&id);
            }
        }
    }

    /// A pod without a PodGroup gets a single-member group of its own, as Volcano does; one
    /// that lives in a cluster is placed there. The group's phase follows the pod: Running
    /// while it holds a node, Inqueue while it waits to be placed, Completed once it has
    /// finished. A finished pod holds nothing and asks for nothing (Volcano counts no finished
    /// pod, and has no job at all for another scheduler's pod): left to the sessions, its group
    /// would go back to Pending with the gang short, be admitted again, and keep its pod's
    /// request of the fleet's and the queue's admission budget for a pod that never runs.
    fn ensure_implicit_group(&mut self, job: Id, spec: &PodSpec) {
        let Some(j) = self.jobs.get_mut(job) else {
            return;
        };
        let placed_or_waiting = if spec.status.holds_node() {
            GroupPhase::Running
        } else {
            GroupPhase::Inqueue
        };
        if let Some(g) = &mut j.group {
            if spec.status.is_finished() {
                g.phase = GroupPhase::Completed;
            } else if g.phase == GroupPhase::Completed {
                g.phase = placed_or_waiting;
            }
            return;
        }
        j.group = Some(PodGroupSpec {
            namespace: spec.namespace.clone(),
            name: format!("pod-{}", spec.name),
            queue: spec.ghost_of.as_ref().map_or_else(
                || tephra_api::defaults::DEFAULT_QUEUE.to_string(),
                |g| g.queue.clone(),
            ),
            min_member: 1,
            min_task_member: BTreeMap::new(),
            min_resources: Some(spec.shape.request),
            largest_task: None,
            priority_class: spec.shape.priority_class.clone(),
            priority: (spec.shape.priority != 0).then_some(spec.shape.priority),
            phase: if spec.status.is_finished() {
                GroupPhase::Completed
            } else {
                placed_or_waiting
            },
            phase_since: spec.created,
            created: spec.created,
            policy: match &spec.lives_in {
                Some(cluster) => Arc::new(JobPolicy {
                    cluster_names: vec![cluster.clone()],
                    ..JobPolicy::default()
                }),
                None => Arc::clone(&self.implicit_policy),
            },
            topology: None,
            sub_groups: Vec::new(),
        });
    }

    fn orphan_if_unplaced(
        &mut self,
        id: Id,
        node: Option<Id>,
        placement: Option<(String, String)>,
    ) {
        if node.is_none()
            && let Some((c, n)) = placement
        {
            self.orphans.entry(node_key(&c, &n)).or_default().push(id);
        }
    }

    fn unorphan(&mut self, id: Id) {
        let Some(t) = self.tasks.get(id) else { return };
        if t.node.is_some() {
            return;
        }
        if let Some((c, n)) = &t.spec.placement {
            let key = node_key(c, n);
            if let Some(list) = self.orphans.get_mut(&key) {
                list.retain(|x| *x != id);
                if list.is_empty() {
                    self.orphans.remove(&key);
                }
            }
        }
    }

    fn detach_task(&mut self, job: Id, task: Id) {
        let mut empty = false;
        if let Some(j) = self.jobs.get_mut(job) {
            j.tasks.retain(|t| *t != task);
            empty = j.tasks.is_empty() && (j.implicit || j.group.is_none());
        }
        if empty && let Some(j) = self.jobs.remove(job) {
            self.job_index.remove(&j.key);
            counts::uncount(&mut self.queue_phases, j.counted_as.clone());
        }
        self.refresh_active(job);
    }

    fn delete_pod(&mut self, key: &str) {
        let Some(id) = self.task_index.get(key).copied() else {
            return;
        };
        let declared = self.tasks.get(id).and_then(|t| self.declared_key(t));
        self.account(id, -1);
        self.tally(id, -1);
        self.unorphan(id);
        self.track_ghost(id, false);
        self.task_index.remove(key);
        self.repelling.remove(&id);
        self.port_holders.remove(&id);
        self.claim_users.remove(&id);
        self.device_users.remove(&id);
        self.gpu_users.remove(&id);
        self.affine.remove(&id);
        // A deleted pod loses its nomination at once.
        self.nominated.remove(&id);
        if let Some(task) = self.tasks.remove(id) {
            self.detach_task(task.job, id);
        }
        if let Some(declared) = declared {
            self.settle(&declared);
        }
    }

    fn upsert_node(&mut self, spec: NodeSpec) -> Result<(), CacheError> {
        let cluster = self
            .cluster_id(&spec.cluster)
            .ok_or_else(|| CacheError::UnknownCluster {
                node: spec.name.clone(),
                cluster: spec.cluster.clone(),
            })?;
        let key = node_key(&spec.cluster, &spec.name);
        let has_gpu = self.names.has_gpu(&spec.allocatable);
        if let Some(&id) = self.node_index.get(&key) {
            let mut grew = false;
            if let Some(n) = self.nodes.get_mut(id) {
                grew = n.spec.allocatable != spec.allocatable
                    || n.spec.labels != spec.labels
                    || n.spec.taints != spec.taints;
                if n.spec.labels != spec.labels {
                    self.hypernodes.stale(&spec.cluster);
                }
                n.spec = spec;
                n.has_gpu = has_gpu;
            }
            if grew {
                self.fleet_changed();
            }
            return Ok(());
        }
        self.fleet_changed();
        self.hypernodes.stale(&spec.cluster);
        let id = self.nodes.insert(Node {
            spec,
            cluster,
            used: Resources::ZERO,
            releasing: Resources::ZERO,
            has_gpu,
        });
        self.node_index.insert(key.clone(), id);
        if let Some(list) = self.cluster_nodes.get_mut(cluster as usize) {
            list.push(id);
        }
        // Pods that arrived before their node now count against it.
        for task in self.orphans.remove(&key).unwrap_or_default() {
            if let Some(t) = self.tasks.get_mut(task) {
                t.node = Some(id);
            }
            self.account(task, 1);
        }
        Ok(())
    }

    fn delete_node(&mut self, cluster: &str, name: &str) {
        let key = node_key(cluster, name);
        let Some(id) = self.node_index.remove(&key) else {
            return;
        };
        self.hypernodes.stale(cluster);
        let on_node: Vec<Id> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.node == Some(id))
            .map(|(i, _)| i)
            .collect();
        for task in on_node {
            self.account(task, -1);
            if let Some(t) = self.tasks.get_mut(task) {
                t.node = None;
            }
            if let Some(declared) = self.tasks.get(task).and_then(|t| self.declared_key(t)) {
                self.settle(&declared);
            }
            self.orphans.entry(key.clone()).or_default().push(task);
        }
        if let Some(node) = self.nodes.remove(id)
            && let Some(list) = self.cluster_nodes.get_mut(node.cluster as usize)
        {
            list.retain(|n| *n != id);
        }
    }

    fn upsert_group(&mut self, spec: PodGroupSpec) {
        let key = format!("{}/{}", spec.namespace, spec.name);
        let id = match self.job_index.get(&key) {
            Some(id) => *id,
            None => {
                let id = self.jobs.insert(Job {
                    key: key.clone(),
                    group: None,
                    tasks: Vec::new(),
                    implicit: false,
                    ghost: false,
                    tally: TaskTally::default(),
                    pending_request: Resources::ZERO,
                    pending_ungated: Resources::ZERO,
                    changed_at: 0,
                    counted_as: None,
                });
                self.job_index.insert(key, id);
                id
            }
        };
        if self
            .jobs
            .get(id)
            .is_some_and(|j| j.group.as_ref() == Some(&spec))
        {
            return;
        }
        // The queue may change: move the job's usage.
        let tasks: Vec<Id> = self
            .jobs
            .get(id)
            .map(|j| j.tasks.clone())
            .unwrap_or_default();
        for t in &tasks {
            self.account(*t, -1);
        }
        if let Some(j) = self.jobs.get_mut(id) {
            j.group = Some(spec);
        }
        for t in &tasks {
            self.account(*t, 1);
        }
        self.refresh_active(id);
    }

    fn delete_group(&mut self, key: &str) {
        let Some(&id) = self.job_index.get(key) else {
            return;
        };
        let tasks: Vec<Id> = self
            .jobs
            .get(id)
            .map(|j| j.tasks.clone())
            .unwrap_or_default();
        for t in &tasks {
            self.account(*t, -1);
        }
        let orphaned = if let Some(j) = self.jobs.get_mut(id) {
            j.group = None;
            j.tasks.is_empty()
        } else {
            false
        };
        for t in &tasks {
            self.account(*t, 1);
        }
        if orphaned {
            if let Some(j) = self.jobs.remove(id) {
                counts::uncount(&mut self.queue_phases, j.counted_as.clone());
            }
            self.job_index.remove(key);
        }
        self.refresh_active(id);
    }

    pub(super) fn apply(&mut self, event: Event) -> Result<(), CacheError> {
        match event {
            Event::ClusterUpsert(c) => match self.cluster_index.get(&c.name) {
                Some(&id) => {
                    if let Some(old) = self.clusters.get_mut(id)
                        && *old != c
                    {
                        *old = c;
                        self.fleet_changed();
                    }
                }
                None => {
                    self.fleet_changed();
                    let name = c.name.clone();
                    let id = self.clusters.insert(c);
                    self.cluster_index.insert(name, id);
                    if self.cluster_nodes.len() <= id as usize {
                        self.cluster_nodes.resize(id as usize + 1, Vec::new());
                    }
                    self.cluster_nodes[id as usize].clear();
                }
            },
            Event::ClusterDelete(name) => {
                if let Some(id) = self.cluster_index.get(&name).copied() {
                    let nodes: Vec<String> = self.cluster_nodes[id as usize]
                        .iter()
                        .filter_map(|n| self.nodes.get(*n).map(|n| n.spec.name.clone()))
                        .collect();
                    for n in nodes {
                        self.delete_node(&name, &n);
                    }
                    self.clusters.remove(id);
                    self.cluster_index.remove(&name);
                    self.storage.remove(&name);
                    self.dra.remove(&name);
                    self.hypernodes.drop_cluster(&name);
                    self.fleet_changed();
                }
            }
            Event::NodeUpsert(spec) => self.upsert_node(spec)?,
            Event::NodeDelete { cluster, name } => self.delete_node(&cluster, &name),
            Event::PodUpsert(spec) => self.upsert_pod(spec),
            Event::PodDelete { namespace, name } => self.delete_pod(&format!("{namespace}/{name}")),
            Event::PodGroupUpsert(spec) => self.upsert_group(spec),
            Event::PodGroupDelete { namespace, name } => {
                self.delete_group(&format!("{namespace}/{name}"))
            }
            Event::QueueUpsert(q) => {
                if q.parent.as_deref() == Some(q.name.as_str()) {
                    return Err(CacheError::QueueOwnParent(q.name.clone()));
                }
                // A queue's state, tree or limits may change what its jobs are told; an update
                // that leaves its spec as it was (its status written back) changes nothing.
                if self.queues.get(&q.name).is_none_or(|old| **old != *q) {
                    self.queues.insert(q.name.clone(), Arc::new(*q));
                    self.wake_all();
                }
            }
            Event::QueueDelete(name) => {
                if self.queues.remove(&name).is_some() {
                    self.wake_all();
                }
            }
            Event::PriorityClassUpsert { name, value } => {
                if self.priority_classes.insert(name, value) != Some(value) {
                    self.reprioritize();
                }
            }
            Event::PriorityClassDelete(name) => {
                if self.priority_classes.remove(&name).is_some() {
                    self.reprioritize();
                }
            }
            Event::PdbUpsert(pdb) => {
                self.pdbs
                    .insert(format!("{}/{}", pdb.namespace, pdb.name), pdb);
            }
            Event::PdbDelete { namespace, name } => {
                self.pdbs.remove(&format!("{namespace}/{name}"));
            }
            // A storage or DRA object changed: a waiting job may now fit (a volume appeared,
            // a claim was bound, devices were freed), so parked jobs are looked at again.
            // Volumes or devices assumed taken make no parked job fit.
            Event::Storage { cluster, change } => {
                let takes = matches!(change, StorageChange::Assume { .. });
                change.apply_to(self.storage.entry(cluster).or_default());
                if !takes {
                    self.fleet_changed();
                }
            }
            Event::Dra { cluster, change } => {
                let takes = matches!(change, DraChange::Assume { .. });
                change.apply_to(self.dra.entry(cluster).or_default());
                if !takes {
                    self.fleet_changed();
                }
            }
            // New or changed domains may take a parked gang.
            Event::HyperNodeUpsert(spec) => {
                if self.hypernodes.upsert(spec) {
                    self.fleet_changed();
                }
            }
            Event::HyperNodeDelete { cluster, name } => {
                if self.hypernodes.delete(&cluster, &name) {
                    self.fleet_changed();
                }
            }
            Event::HyperNodesDeferred => self.hypernodes.defer(),
            // Other geometries may let a waiting slice onto a MIG GPU.
            Event::MigGeometries(known) => {
                if self.mig.as_deref() != Some(&known) {
                    self.mig = Some(Arc::new(known));
                    self.fleet_changed();
                }
            }
            Event::HyperNodesListed { cluster } => {
                if self.hypernodes.listed_in(&cluster) {
                    self.fleet_changed();
                }
            }
        }
        self.generation += 1;
        Ok(())
    }
}
