//! The scheduler's model of the fleet: clusters, nodes, queues, jobs (one per PodGroup) and
//! tasks (pods). Plain data, fed by the cache's event API. How labels, selectors, taints and
//! tolerations match is in `selectors.rs`; inter-pod affinity and node preferences in
//! `affinity.rs`; host ports in `ports.rs`; topology spread constraints in `spread.rs`; persistent
//! volumes, claims and storage classes in `volumes.rs`; what sessions gave that no watcher has
//! shown yet in `assumed.rs`.

pub mod affinity;
pub mod assumed;
pub mod cluster_affinity;
pub mod devices;
pub mod mig;
pub mod ports;
pub mod rules;
pub mod selectors;
pub mod spread;
pub mod topology;
pub mod vgpu;
pub mod volumes;

pub use affinity::{LabelSelector, Namespaces, PodTerm, Weighted};
pub use devices::{
    AllocatedDevice, AllocationMode, Attribute, Capacity, CapacityPolicy, ClaimAllocation,
    CounterSets, Device, DeviceClass, DeviceRequest, DeviceSelector, Dra, Milli, PodClaim,
    ResourceClaim, ResourceSlice, Selector, SliceNodes, ValidAmounts,
};
pub use ports::HostPort;
pub use rules::PodRules;
pub use spread::{SpreadTerm, WhenUnsatisfiable};
pub use volumes::{AccessModes, ClaimRef, PersistentVolume, Storage, StorageClass, VolumeClaim};

pub use selectors::{
    Labels, Requirement, SelectorOp, Taint, TaintEffect, Toleration, affinity_matches,
    selector_matches, tolerated, tolerates_cordon,
};

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::resources::Resources;

/// A slot index into one of the cache's tables.
pub type Id = u32;

/// A member cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    /// Name (unique).
    pub name: String,
    /// Labels.
    pub labels: Labels,
    /// Cloud provider.
    pub provider: Option<String>,
    /// Region.
    pub region: Option<String>,
    /// Zones.
    pub zones: Vec<String>,
    /// Cluster taints.
    pub taints: Vec<Taint>,
    /// Whether the cluster's health probe succeeds.
    pub ready: bool,
    /// Price per resource-hour: per core of cpu, per GiB of memory, per unit otherwise.
    pub price: BTreeMap<String, f64>,
}

impl Cluster {
    /// A ready cluster with just a name.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_string(),
            labels: Labels::new(),
            provider: None,
            region: None,
            zones: Vec::new(),
            taints: Vec::new(),
            ready: true,
            price: BTreeMap::new(),
        }
    }

    /// The group the cluster belongs to when spreading by `field`: its name, region, first
    /// zone or provider (empty when unset).
    pub fn group_key(&self, field: SpreadField) -> String {
        match field {
            SpreadField::Cluster => self.name.clone(),
            SpreadField::Region => self.region.clone().unwrap_or_default(),
            SpreadField::Zone => self.zones.first().cloned().unwrap_or_default(),
            SpreadField::Provider => self.provider.clone().unwrap_or_default(),
        }
    }
}

/// A node as the cache reports it (allocatable and flags; usage is derived from tasks).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    /// Node name, unique within its cluster.
    pub name: String,
    /// The cluster it belongs to.
    pub cluster: String,
    /// Labels.
    pub labels: Labels,
    /// Taints.
    pub taints: Vec<Taint>,
    /// Allocatable resources.
    pub allocatable: Resources,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// Ready condition.
    pub ready: bool,
    /// The shared GPUs its vGPU device plugin registered (`vgpu::REGISTER`); empty for a node
    /// without one.
    pub gpus: Arc<[vgpu::Gpu]>,
    /// When its node lock for shared GPUs was taken (`vgpu::NODE_LOCK`, Unix seconds), if it
    /// stands.
    pub gpu_lock: Option<i64>,
}

/// The pod slots of a node that reports none, as kubelet's default `maxPods`.
pub const DEFAULT_MAX_PODS: i64 = 110;

/// A node with its derived accounting.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// What the cache was told.
    pub spec: NodeSpec,
    /// Cluster slot.
    pub cluster: Id,
    /// Sum of requests of tasks holding this node (Binding, Bound, Running, Releasing).
    pub used: Resources,
    /// Part of `used` held by Releasing tasks: free once they terminate.
    pub releasing: Resources,
    /// Whether the node carries any GPU (an extended resource named `*/gpu`).
    pub has_gpu: bool,
}

impl Node {
    /// Allocatable resources, with the pod slots defaulted to [`DEFAULT_MAX_PODS`] when the
    /// node reports none, as kubelet does.
    #[inline]
    pub fn allocatable(&self) -> Resources {
        let mut a = self.spec.allocatable;
        if a.get(crate::resources::PODS) == 0 {
            a.set(crate::resources::PODS, DEFAULT_MAX_PODS);
        }
        a
    }

    /// One slot of [`allocatable`](Self::allocatable), without copying the vector.
    #[inline]
    pub fn allocatable_of(&self, slot: usize) -> i64 {
        match self.spec.allocatable.get(slot) {
            0 if slot == crate::resources::PODS => DEFAULT_MAX_PODS,
            v => v,
        }
    }
}

/// Task (pod) states, as Volcano names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskStatus {
    /// Not placed.
    Pending,
    /// Placed in this session, not yet bound.
    Allocated,
    /// Reserved on resources that are being released.
    Pipelined,
    /// A bind was issued.
    Binding,
    /// Bound to a node.
    Bound,
    /// Running.
    Running,
    /// Terminating; its resources free up soon.
    Releasing,
    /// Finished successfully.
    Succeeded,
    /// Finished unsuccessfully.
    Failed,
    /// Unknown.
    Unknown,
}

impl TaskStatus {
    /// Holds node resources.
    #[inline]
    pub fn holds_node(self) -> bool {
        matches!(
            self,
            Self::Allocated | Self::Binding | Self::Bound | Self::Running | Self::Releasing
        )
    }

    /// Finished (`Succeeded`, `Failed`): the pod holds nothing and asks for nothing any more.
    #[inline]
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }

    /// Placed on a node and staying there (`Binding`, `Bound`, `Running`): the pods that make
    /// a job's copy in a cluster.
    #[inline]
    pub fn is_placed(self) -> bool {
        matches!(self, Self::Binding | Self::Bound | Self::Running)
    }

    /// Counts towards a gang being ready (Volcano's "ready" statuses).
    #[inline]
    pub fn is_ready(self) -> bool {
        matches!(
            self,
            Self::Allocated | Self::Binding | Self::Bound | Self::Running | Self::Succeeded
        )
    }

    /// Counts as occupying a place in the gang (ready or pipelined).
    pub fn is_ready_or_pipelined(self) -> bool {
        self.is_ready() || self == Self::Pipelined
    }

    /// Volcano's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Allocated => "Allocated",
            Self::Pipelined => "Pipelined",
            Self::Binding => "Binding",
            Self::Bound => "Bound",
            Self::Running => "Running",
            Self::Releasing => "Releasing",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::Unknown => "Unknown",
        }
    }
}

/// How many of a job's tasks are in each status that gang rules count. The cache keeps one per
/// job from the pods' reported statuses; a session adds what it changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskTally {
    /// Tasks counting as ready ([`TaskStatus::is_ready`]).
    pub ready: i32,
    /// Tasks pipelined.
    pub pipelined: i32,
    /// Tasks pending.
    pub pending: i32,
    /// Tasks that can still take part (everything but Failed and Unknown).
    pub valid: i32,
}

impl TaskTally {
    /// Whether no task counted holds a node: none ready (the ready ones that finished too) and
    /// none releasing (valid, but neither pending, pipelined nor ready).
    #[inline]
    pub fn holds_nothing(&self) -> bool {
        self.ready <= 0 && self.valid - self.pending - self.pipelined - self.ready <= 0
    }

    /// Counts (`sign` 1) or uncounts (`sign` -1) one task in `status`.
    #[inline]
    pub fn count(&mut self, status: TaskStatus, sign: i32) {
        if status.is_ready() {
            self.ready += sign;
        }
        if status == TaskStatus::Pipelined {
            self.pipelined += sign;
        }
        if status == TaskStatus::Pending {
            self.pending += sign;
        }
        if !matches!(status, TaskStatus::Failed | TaskStatus::Unknown) {
            self.valid += sign;
        }
    }

    /// The sum of two tallies.
    #[inline]
    pub fn plus(self, o: &TaskTally) -> TaskTally {
        TaskTally {
            ready: self.ready + o.ready,
            pipelined: self.pipelined + o.pipelined,
            pending: self.pending + o.pending,
            valid: self.valid + o.valid,
        }
    }
}

/// The scheduling-relevant part of a pod. Tasks of one role created from one template share
/// an `Arc<TaskShape>`, which lets the scheduler place a role's replicas together.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TaskShape {
    /// Role (Volcano task name) within the job.
    pub role: String,
    /// Summed container requests, with one pod slot.
    pub request: Resources,
    /// `spec.nodeSelector`.
    pub node_selector: Labels,
    /// Required node affinity terms.
    pub affinity: Vec<Vec<Requirement>>,
    /// Tolerations.
    pub tolerations: Vec<Toleration>,
    /// Pod priority.
    pub priority: i32,
    /// May be preempted or reclaimed (`volcano.sh/preemptable`, default true).
    pub preemptable: bool,
    /// Namespace of the pod (conformance protects system namespaces).
    pub namespace: String,
    /// Priority class name, if any.
    pub priority_class: Option<String>,
    /// Labels, preferred node affinity and inter-pod (anti-)affinity.
    pub rules: PodRules,
}

impl TaskShape {
    /// Whether scheduling gates hold the pod back (`spec.schedulingGates` not empty).
    #[inline]
    pub fn gated(&self) -> bool {
        !self.rules.gates.is_empty()
    }

    /// True for a best-effort pod: it requests nothing but its pod slot.
    #[inline]
    pub fn best_effort(&self) -> bool {
        self.request
            .0
            .iter()
            .enumerate()
            .all(|(i, v)| i == crate::resources::PODS || *v == 0)
    }
}

/// A pod as the cache reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct PodSpec {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The PodGroup (`scheduling.k8s.io/group-name`); `None` gives the pod a job of its own.
    pub group: Option<String>,
    /// Scheduling shape.
    pub shape: Arc<TaskShape>,
    /// Index within its role.
    pub index: u32,
    /// Status.
    pub status: TaskStatus,
    /// Cluster and node it is bound to or running on.
    pub placement: Option<(String, String)>,
    /// Creation time, in seconds of the caller's clock.
    pub created: i64,
    /// The cluster the pod was made in, when it can run nowhere else: a pod made in a fleet's
    /// member (not declared on the control plane) is bound there. `None`: wherever its job
    /// may go.
    pub lives_in: Option<String>,
    /// The node a plan made elsewhere chose for the pod (`tephra.io/planned-node`, which a
    /// fleet's scheduler hands to the member that runs the pod): placement tries it first, in
    /// whichever cluster the pod is placed, and goes on as usual where it does not fit.
    pub planned: Option<String>,
    /// Set on a ghost ([`crate::cache::ghost`]): the old copy of a moved gang's pod, still
    /// holding its node in the cluster it is leaving.
    pub ghost_of: Option<Arc<GhostOf>>,
    /// Another scheduler's pod (a DaemonSet's, kube-scheduler's): known once bound, it holds
    /// its node's room but, as in Volcano, belongs to no PodGroup of any queue.
    pub foreign: bool,
    /// The shared GPUs given to it (`vgpu::IDS`), while it holds a node.
    pub gpus: Option<Arc<vgpu::Grants>>,
}

/// What a ghost was a copy of. A gang counts once for its queue during failover: each ghost
/// counts for the queue its job was in only while the declared pod it copies holds no node
/// (the copy that holds the room), and never as a PodGroup of the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GhostOf {
    /// The declared pod's name (in the ghost's namespace).
    pub pod: String,
    /// The queue of the job it was a copy of.
    pub queue: String,
}

/// A task with its resolved slots.
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    /// What the cache was told.
    pub spec: PodSpec,
    /// `namespace/name`.
    pub key: String,
    /// Job slot.
    pub job: Id,
    /// Node slot, when placed.
    pub node: Option<Id>,
}

/// Where a job may go across clusters (from its PropagationPolicy).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct JobPolicy {
    /// Only these clusters (empty: any).
    pub cluster_names: Vec<String>,
    /// Never these clusters.
    pub exclude: Vec<String>,
    /// Cluster label requirements (all must hold).
    pub cluster_labels: Vec<Requirement>,
    /// `provider`/`region`/`zone` requirements (all must hold).
    pub field_requirements: Vec<Requirement>,
    /// Tolerated cluster taints.
    pub tolerations: Vec<Toleration>,
    /// Spread constraints.
    pub spread: Vec<SpreadConstraint>,
    /// Whether the gang may be split across clusters.
    pub splittable: bool,
}

/// What spread groups clusters by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpreadField {
    /// Each cluster.
    Cluster,
    /// Region.
    Region,
    /// Zone (first zone).
    Zone,
    /// Provider.
    Provider,
}

/// A spread constraint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpreadConstraint {
    /// Grouping.
    pub field: SpreadField,
    /// At least this many groups.
    pub min_groups: u32,
    /// At most this many groups.
    pub max_groups: u32,
}

/// PodGroup phases (Volcano's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupPhase {
    /// Waiting for admission by its queue.
    Pending,
    /// Admitted.
    Inqueue,
    /// At least minMember running.
    Running,
    /// Part running, the rest unschedulable.
    Unknown,
    /// Done.
    Completed,
}

/// How many PodGroups are in each phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseCounts([u32; 5]);

impl PhaseCounts {
    fn slot(phase: GroupPhase) -> usize {
        match phase {
            GroupPhase::Pending => 0,
            GroupPhase::Inqueue => 1,
            GroupPhase::Running => 2,
            GroupPhase::Unknown => 3,
            GroupPhase::Completed => 4,
        }
    }

    /// PodGroups in `phase`.
    pub fn get(&self, phase: GroupPhase) -> u32 {
        self.0[Self::slot(phase)]
    }

    /// Counts one PodGroup in (`sign` 1) or out of (-1) `phase`.
    pub fn count(&mut self, phase: GroupPhase, sign: i32) {
        let n = &mut self.0[Self::slot(phase)];
        *n = n.saturating_add_signed(sign);
    }

    /// Whether no PodGroup is counted.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|n| *n == 0)
    }
}

impl GroupPhase {
    /// Volcano's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Inqueue => "Inqueue",
            Self::Running => "Running",
            Self::Unknown => "Unknown",
            Self::Completed => "Completed",
        }
    }
}

/// A PodGroup as the cache reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct PodGroupSpec {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Queue name.
    pub queue: String,
    /// Gang size.
    pub min_member: u32,
    /// Per-role minimums.
    pub min_task_member: BTreeMap<String, u32>,
    /// Minimum resources to start the gang (enqueue admission).
    pub min_resources: Option<Resources>,
    /// The largest request of one pod of the gang, per resource, as its controller declares it
    /// before the pods exist (`tephra.io/largest-task-request`).
    pub largest_task: Option<Resources>,
    /// Priority class name.
    pub priority_class: Option<String>,
    /// Priority value when given directly (overrides the class).
    pub priority: Option<i32>,
    /// Current phase.
    pub phase: GroupPhase,
    /// When it entered its current phase (the last transition of its phase), in seconds of
    /// the caller's clock: how long an admitted job has held its queue's admission budget.
    pub phase_since: i64,
    /// Creation time, in seconds of the caller's clock.
    pub created: i64,
    /// Placement policy across clusters.
    pub policy: Arc<JobPolicy>,
    /// `spec.networkTopology`: how high a HyperNode tier the gang may span.
    pub topology: Option<topology::NetworkTopology>,
    /// `spec.subGroupPolicy`: gangs within the gang, each placed whole.
    pub sub_groups: Vec<topology::SubGroupPolicy>,
}

static NO_ROLE_MINIMUMS: BTreeMap<String, u32> = BTreeMap::new();

impl PodGroupSpec {
    /// The per-role minimums the gang is held to. As in Volcano, they count only while
    /// minMember covers their sum: a gang whose minMember is smaller (a driver that must run
    /// before its executors exist, `dependsOn`) is held to minMember alone.
    pub fn role_minimums(&self) -> &BTreeMap<String, u32> {
        let sum: u64 = self.min_task_member.values().map(|v| u64::from(*v)).sum();
        if u64::from(self.min_member) < sum {
            &NO_ROLE_MINIMUMS
        } else {
            &self.min_task_member
        }
    }
}

/// A job: one PodGroup and its tasks.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// `namespace/name`.
    pub key: String,
    /// The PodGroup, once seen.
    pub group: Option<PodGroupSpec>,
    /// Task slots, in the order they arrived.
    pub tasks: Vec<Id>,
    /// Whether the job was created implicitly for a pod without a PodGroup.
    pub implicit: bool,
    /// Whether it is a ghost's job ([`PodSpec::ghost_of`]) or another scheduler's pod's
    /// ([`PodSpec::foreign`]): it holds nodes but is no PodGroup of any queue (no queue counts
    /// it or its pods, and the views leave it out).
    pub ghost: bool,
    /// Its tasks by reported status.
    pub tally: TaskTally,
    /// What its Pending tasks ask for, by reported status (kept with the tally).
    pub pending_request: Resources,
    /// What those of them that no scheduling gate holds back ask for.
    pub pending_ungated: Resources,
    /// The cache generation its PodGroup or pods last changed at: a session's verdict on the
    /// job holds only if it saw this change.
    pub changed_at: u64,
    /// The queue and phase the cache counts its PodGroup under (`cache/counts.rs`).
    pub(crate) counted_as: Option<(String, GroupPhase)>,
}

impl Job {
    /// Gang size (1 until the PodGroup is known).
    #[inline]
    pub fn min_member(&self) -> u32 {
        self.group.as_ref().map_or(1, |g| g.min_member.max(1))
    }

    /// Queue name.
    #[inline]
    pub fn queue(&self) -> &str {
        self.group
            .as_ref()
            .map_or(tephra_api::defaults::DEFAULT_QUEUE, |g| g.queue.as_str())
    }
}

/// Queue states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueueState {
    /// Admits new jobs.
    Open,
    /// Admits nothing new.
    Closed,
    /// Admits nothing new; draining.
    Closing,
}

/// How a queue hands out jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dequeue {
    /// The head job blocks until it fits.
    Fifo,
    /// Skip a job that cannot fit.
    Traverse,
}

/// A queue.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueSpec {
    /// Name.
    pub name: String,
    /// Weight (1..65535).
    pub weight: u32,
    /// Hard cap.
    pub capability: Option<Resources>,
    /// Reserved amount.
    pub guarantee: Option<Resources>,
    /// Deserved share (capacity plugin).
    pub deserved: Option<Resources>,
    /// Parent queue.
    pub parent: Option<String>,
    /// State.
    pub state: QueueState,
    /// Whether others may reclaim from it.
    pub reclaimable: bool,
    /// Priority among siblings.
    pub priority: i32,
    /// Dequeue strategy.
    pub dequeue: Dequeue,
    /// Node groups its pods must, should, must not or should not use (Volcano's
    /// `spec.affinity`, for the `nodegroup` plugin); `None` when the queue sets none.
    pub node_groups: Option<NodeGroups>,
    /// Volcano's hierarchy annotations (`volcano.sh/hierarchy`, `volcano.sh/hierarchy-weights`):
    /// the queue's path from the root and a weight per level, for `drf` with `enableHierarchy`.
    pub hierarchy: Option<Hierarchy>,
}

/// A queue's node-group affinity: group names (values of the `volcano.sh/nodegroup-name` node
/// label).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeGroups {
    /// Groups the pods must use (any of them).
    pub required: Vec<String>,
    /// Groups the pods should use, most preferred first.
    pub preferred: Vec<String>,
    /// Groups the pods must not use.
    pub anti_required: Vec<String>,
    /// Groups the pods should not use.
    pub anti_preferred: Vec<String>,
}

impl NodeGroups {
    /// Whether no group is named at all.
    pub fn is_empty(&self) -> bool {
        self.required.is_empty()
            && self.preferred.is_empty()
            && self.anti_required.is_empty()
            && self.anti_preferred.is_empty()
    }
}

/// A queue's place in Volcano's annotation hierarchy.
#[derive(Clone, Debug, PartialEq)]
pub struct Hierarchy {
    /// The path from the root, root first (`root/eng/prod` → `[root, eng, prod]`).
    pub path: Vec<String>,
    /// The weight of each level of the path.
    pub weights: Vec<f64>,
}

/// A PodDisruptionBudget as the scheduler needs it: which pods it covers and how many more may
/// be disrupted now (its `status.disruptionsAllowed`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PdbSpec {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The pods it covers; an empty or missing selector covers none, as in Volcano.
    pub selector: Option<LabelSelector>,
    /// How many of its pods may be disrupted now.
    pub disruptions_allowed: i32,
    /// Pods already being disrupted (they do not count against the budget again).
    pub disrupted_pods: std::collections::BTreeSet<String>,
}

impl QueueSpec {
    /// An open queue with weight 1 and no limits.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_string(),
            weight: 1,
            capability: None,
            guarantee: None,
            deserved: None,
            parent: None,
            state: QueueState::Open,
            reclaimable: true,
            priority: 0,
            dequeue: Dequeue::Traverse,
            node_groups: None,
            hierarchy: None,
        }
    }
}
