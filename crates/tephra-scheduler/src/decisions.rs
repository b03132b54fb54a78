//! What a session decided: binds, pipelined reservations, evictions, PodGroup and queue status,
//! and events that explain each waiting job.

use std::collections::BTreeMap;

use crate::model::{GroupPhase, QueueState};
use crate::resources::Resources;

/// Place one pod on one node of one cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bind {
    /// Job (`namespace/podgroup`).
    pub job: String,
    /// Pod (`namespace/name`).
    pub task: String,
    /// Role within the job.
    pub role: String,
    /// Member cluster.
    pub cluster: String,
    /// Node within it.
    pub node: String,
    /// The shared GPUs given to it there, written on the pod as it binds.
    pub gpus: Option<std::sync::Arc<crate::model::vgpu::Grants>>,
    /// Binding it takes the node's lock for shared GPUs first (`vgpu::NODE_LOCK`).
    pub gpu_lock: bool,
}

/// What must be written before a pod is bound, as kube-scheduler's PreBind writes it: each of
/// its volume claims that is not bound yet, bound to the volume chosen for it (the volume's
/// claim reference) or provisioned on the pod's node (the claim's selected node), and each of
/// its ResourceClaims allocated or reserved for it. The pod is bound only once every volume
/// claim is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreBind {
    /// Pod (`namespace/name`).
    pub task: String,
    /// Member cluster.
    pub cluster: String,
    /// The node it is bound to.
    pub node: String,
    /// Its claims that are not bound yet.
    pub volumes: Vec<VolumeBind>,
    /// Its ResourceClaims to allocate or reserve for it.
    pub devices: Vec<DeviceBind>,
}

/// One ResourceClaim to write before its pod is bound: its allocation (when the session
/// allocated it) and the pod's reservation (`status.reservedFor`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceBind {
    /// The claim (`namespace/name`).
    pub claim: String,
    /// The devices the session allocated it; `None`: allocated before, only to reserve.
    pub allocation: Option<crate::model::ClaimAllocation>,
}

/// Deallocate a ResourceClaim allocated before (a bind that failed after its PreBind, a node
/// gone) that keeps its pod off the nodes: as kube-scheduler's DynamicResources PostFilter
/// does, a claim allocated to devices only some nodes reach, reserved for nobody or for the
/// pod alone, is deallocated when its pod's job cannot be placed with it, so that it is
/// allocated again where the pod can go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deallocation {
    /// The pod it keeps back (`namespace/name`).
    pub task: String,
    /// Member cluster.
    pub cluster: String,
    /// The claim (`namespace/name`).
    pub claim: String,
    /// The claim's `resourceVersion` as the session saw it: the write is made only if the
    /// claim has not changed since.
    pub resource_version: String,
}

/// One claim to bind before its pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeBind {
    /// The claim (`namespace/name`).
    pub claim: String,
    /// The PersistentVolume chosen for it; `None`: provisioned on the pod's node.
    pub volume: Option<String>,
}

/// Evict one pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eviction {
    /// Job (`namespace/podgroup`).
    pub job: String,
    /// Pod (`namespace/name`).
    pub task: String,
    /// Cluster.
    pub cluster: String,
    /// Why, in words a user can read.
    pub reason: String,
}

/// A PodGroup condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// `Scheduled` or `Unschedulable`.
    pub kind: &'static str,
    /// Status True (or False).
    pub status: bool,
    /// One-word reason.
    pub reason: String,
    /// Explanation.
    pub message: String,
    /// The session that set it.
    pub transition_id: u64,
}

/// New status of a PodGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupStatus {
    /// Job (`namespace/podgroup`).
    pub job: String,
    /// Phase.
    pub phase: GroupPhase,
    /// Conditions set this session.
    pub conditions: Vec<Condition>,
    /// Running pods.
    pub running: u32,
    /// Succeeded pods.
    pub succeeded: u32,
    /// Failed pods.
    pub failed: u32,
    /// Fewer of its pods exist than its minMember: a controller may be waiting for the
    /// PodGroup to be Inqueue before it creates the rest (Volcano's job controller does).
    pub short_of_pods: bool,
}

/// A queue share provider's figures for one queue.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct QueueFigures {
    /// What the queue's jobs ask for in all.
    pub request: Resources,
    /// The queue's deserved share.
    pub deserved: Resources,
    /// Its share: the largest ratio of allocated to deserved over the resources.
    pub share: f64,
}

/// New status of a queue.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueStatus {
    /// Queue name.
    pub name: String,
    /// State.
    pub state: QueueState,
    /// Held resources, as a Kubernetes resource list.
    pub allocated: BTreeMap<String, String>,
    /// Held resources, as a vector.
    pub allocated_vec: Resources,
    /// PodGroups Pending.
    pub pending: u32,
    /// PodGroups Inqueue.
    pub inqueue: u32,
    /// PodGroups Running.
    pub running: u32,
    /// PodGroups Unknown.
    pub unknown: u32,
    /// PodGroups Completed.
    pub completed: u32,
    /// The queue share provider's figures (proportion or capacity) and whether the queue is
    /// overused, when one is configured.
    pub figures: Option<(QueueFigures, bool)>,
    /// What its waiting jobs that could be placed once room is made ask for: their pending,
    /// ungated pods, of jobs that are valid (enough pods for their gang) and not known never
    /// to fit. The deserved share counts every request; starvation is judged on this.
    pub admissible: Resources,
}

/// An event on a job, explaining a decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobEvent {
    /// Job (`namespace/podgroup`).
    pub job: String,
    /// One-word reason.
    pub reason: &'static str,
    /// Explanation, e.g. "3/4 tasks in gang unschedulable: ...".
    pub message: String,
}

/// Everything a session decided.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Decisions {
    /// Session number.
    pub session: u64,
    /// The session's time (seconds, the caller's clock): PodGroups take their new phase since
    /// then ([`Cache::take`](crate::Cache::take)).
    pub now: i64,
    /// Pods to bind, gang by gang.
    pub binds: Vec<Bind>,
    /// What must be written before some of those pods are bound (their volumes), by pod.
    pub prebinds: Vec<PreBind>,
    /// Pods reserved on resources being released (not bound yet).
    pub pipelined: Vec<Bind>,
    /// Room kept for the pods of gangs past their SLA (those reserved this session, and nodes
    /// held as they free up): no other job may take it until the gang fits. The executor keeps
    /// it for the next session ([`Cache::nominate`](crate::Cache::nominate)).
    pub held: Vec<Bind>,
    /// Pods to evict.
    pub evictions: Vec<Eviction>,
    /// ResourceClaims to deallocate, that keep their pods off the nodes.
    pub deallocations: Vec<Deallocation>,
    /// PodGroup status changes.
    pub groups: Vec<GroupStatus>,
    /// Status of every queue.
    pub queues: Vec<QueueStatus>,
    /// Explanations for waiting jobs.
    pub events: Vec<JobEvent>,
    /// Jobs found to be never placeable, for [`Cache::park`](crate::Cache::park).
    pub park: Park,
    /// The earliest time (seconds, the session's clock) at which a waiting job's lot changes
    /// with nothing else happening: an admitted job's inqueue timeout, a job's SLA running out.
    /// A runner that runs sessions only when something changes must run one then.
    pub wake_at: Option<i64>,
    /// Pending jobs the session passed over because their status already said why they wait
    /// and nothing that could change it happened (`Cache::take` keeps them resting): they
    /// have no entry in `groups` or `events`, yet still wait.
    pub resting: Resting,
}

/// The jobs a session passed over as resting: still unschedulable, with nothing new to say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Resting {
    /// How many.
    pub jobs: u32,
    /// Their pending pods.
    pub pending_tasks: u64,
}

/// A Pending job the enqueue votes refused, which may rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The job (`namespace/podgroup`).
    pub job: String,
    /// Whether it is valid (the plugins' gang rules): what its ungated Pending pods ask then
    /// counts in its queue's admissible sum while it rests.
    pub valid: bool,
}

/// Jobs a session found can never be placed, and the snapshot that verdict rests on.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Park {
    /// Jobs (`namespace/podgroup`).
    pub jobs: Vec<String>,
    /// Pending jobs the enqueue votes refused this session, their status saying so: later
    /// sessions pass them over while the votes still refuse them (`cache/parking.rs`).
    pub refused: Vec<Refused>,
    /// The cache generation of the session's snapshot.
    pub generation: u64,
    /// The fleet generation of the session's snapshot.
    pub fleet_generation: u64,
}

impl Decisions {
    /// The event explaining why `job` waits, if any.
    pub fn event_for(&self, job: &str) -> Option<&JobEvent> {
        self.events.iter().find(|e| e.job == job)
    }

    /// Everything reserved for the next session, for [`Cache::nominate`](crate::Cache::nominate).
    pub fn nominations(&self) -> impl Iterator<Item = &Bind> {
        self.held.iter()
    }

    /// The new status of `job`'s PodGroup, if it changed.
    pub fn group(&self, job: &str) -> Option<&GroupStatus> {
        self.groups.iter().find(|g| g.job == job)
    }
}
