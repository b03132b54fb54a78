//! Why something does not fit: a task on a node ([`Unfit`], with [`VolumeUnfit`] for its volume
//! claims, [`DeviceUnfit`] for its devices and [`GpuUnfit`] for its shared GPUs, counted per cluster in [`FitErrors`]) or a job in a cluster ([`ClusterUnfit`]).
//!
//! Each failure says whether evicting running pods could resolve it, as kube-scheduler tells
//! `Unschedulable` from `UnschedulableAndUnresolvable`: a node short of a resource may fit once
//! pods leave it; a node whose labels or taints refuse the pod never will. Preempt and reclaim
//! look for room only where the answer is yes.

use std::collections::BTreeMap;

use crate::resources::{MAX_RESOURCES, ResourceNames};

/// Why a task does not fit a node. Compact, so that counting reasons over thousands of nodes
/// costs no allocation; rendered only for messages.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unfit {
    /// The node is cordoned.
    Unschedulable,
    /// The node is not Ready.
    NotReady,
    /// nodeSelector or required node affinity does not match.
    Selector,
    /// The node has a NoSchedule/NoExecute taint the pod does not tolerate.
    Taint(String),
    /// Not enough of a resource (slot index).
    Insufficient(usize),
    /// The node's pod slots are full.
    TooManyPods,
    /// The job's queue may not take more (its capability, or an ancestor's).
    QueueCapability,
    /// Required pod affinity is not met in the node's topology domain.
    PodAffinity,
    /// The pod's required anti-affinity selects a pod in the node's topology domain.
    PodAntiAffinity,
    /// A pod placed in the node's topology domain has anti-affinity that selects this pod.
    ExistingAntiAffinity,
    /// A host port the pod asks for is held on the node. A pod keeps its ports until it is gone,
    /// so evicting it does not free them within a session: not resolvable.
    NodePorts,
    /// The node lacks a topology key of the pod's spread constraints: it is no domain.
    SpreadMissingLabel,
    /// Placing the pod on the node would break a `DoNotSchedule` spread constraint.
    Spread,
    /// The pod's volume claims keep it off the node.
    Volume(VolumeUnfit),
    /// The pod's ResourceClaims keep it off the node.
    Device(DeviceUnfit),
    /// The shared GPUs the pod asks for keep it off the node.
    Gpu(GpuUnfit),
    /// A plugin's own reason, and whether evicting pods could resolve it.
    Plugin(&'static str, bool),
}

impl Unfit {
    /// Whether evicting pods could resolve this failure: a shortage of resources or pod slots,
    /// a queue at its limit, or pods whose anti-affinity conflicts. The node's own state,
    /// labels and taints are not resolvable, nor is a missing pod that affinity asks for.
    pub fn resolvable(&self) -> bool {
        match self {
            Self::Insufficient(_)
            | Self::TooManyPods
            | Self::QueueCapability
            | Self::PodAntiAffinity
            | Self::ExistingAntiAffinity
            | Self::Spread => true,
            Self::Plugin(_, resolvable) => *resolvable,
            Self::Volume(v) => v.resolvable(),
            Self::Gpu(g) => g.resolvable(),
            _ => false,
        }
    }

    /// Human-readable reason in kube-scheduler's words.
    pub fn render(&self, names: &ResourceNames) -> String {
        match self {
            Self::Unschedulable => "node(s) were unschedulable".into(),
            Self::NotReady => "node(s) were not ready".into(),
            Self::Selector => "node(s) didn't match Pod's node affinity/selector".into(),
            Self::Taint(t) => format!("node(s) had untolerated taint {{{t}}}"),
            Self::Insufficient(slot) => format!("Insufficient {}", names.name(*slot)),
            Self::TooManyPods => "Too many pods".into(),
            Self::QueueCapability => "queue capability reached".into(),
            Self::PodAffinity => "node(s) didn't match pod affinity rules".into(),
            Self::PodAntiAffinity => "node(s) didn't match pod anti-affinity rules".into(),
            Self::ExistingAntiAffinity => {
                "node(s) didn't satisfy existing pods anti-affinity rules".into()
            }
            Self::NodePorts => "node(s) didn't have free ports for the requested pod ports".into(),
            Self::SpreadMissingLabel => {
                "node(s) didn't match pod topology spread constraints (missing required label)"
                    .into()
            }
            Self::Spread => "node(s) didn't match pod topology spread constraints".into(),
            Self::Volume(v) => v.render(),
            Self::Device(d) => d.render(),
            Self::Gpu(g) => g.render(),
            Self::Plugin(why, _) => (*why).to_string(),
        }
    }
}

/// Why a pod's volumes keep it off a node, in kube-scheduler's words.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VolumeUnfit {
    /// A claim does not exist in the node's cluster.
    ClaimNotFound(String),
    /// A claim is being deleted.
    ClaimDeleting(String),
    /// A claim's volume is gone.
    ClaimLost(String),
    /// A claim is neither bound nor delayed: the pod waits for it to be bound.
    UnboundImmediate,
    /// A bound volume's node affinity excludes the node.
    NodeConflict,
    /// No volume and no provisioning serves a delayed claim on the node.
    BindConflict,
    /// A claim is bound to a volume that does not exist.
    VolumeMissing,
    /// A `ReadWriteOncePod` claim is used by another pod.
    OncePodConflict,
    /// The node's CSI attach limit would be exceeded.
    TooManyVolumes,
}

impl VolumeUnfit {
    /// Whether evicting pods could resolve it: another pod's use of a `ReadWriteOncePod`
    /// claim, or of the node's attach slots.
    pub fn resolvable(&self) -> bool {
        matches!(self, Self::OncePodConflict | Self::TooManyVolumes)
    }

    /// The message, as kube-scheduler words it.
    pub fn render(&self) -> String {
        match self {
            Self::ClaimNotFound(c) => format!("persistentvolumeclaim \"{c}\" not found"),
            Self::ClaimDeleting(c) => format!("persistentvolumeclaim \"{c}\" is being deleted"),
            Self::ClaimLost(c) => {
                format!("persistentvolumeclaim \"{c}\" bound to non-existent persistentvolume")
            }
            Self::UnboundImmediate => "pod has unbound immediate PersistentVolumeClaims".into(),
            Self::NodeConflict => "node(s) had volume node affinity conflict".into(),
            Self::BindConflict => "node(s) didn't find available persistent volumes to bind".into(),
            Self::VolumeMissing => {
                "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)".into()
            }
            Self::OncePodConflict => "node has pod using PersistentVolumeClaim with the same name \
                                      and ReadWriteOncePod access mode"
                .into(),
            Self::TooManyVolumes => "node(s) exceed max volume count".into(),
        }
    }
}

/// Why a pod's ResourceClaims keep it off a node, in kube-scheduler's words. None is resolvable
/// by evicting pods: as in Kubernetes, devices are not preempted.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeviceUnfit {
    /// The claim a pod's template names is not created yet (by its pod claim name).
    NotCreated(String),
    /// A claim does not exist in the node's cluster (`namespace/name`).
    Missing(String),
    /// A claim is being deleted.
    Deleting(String),
    /// A claim uses a DRA feature tephra does not allocate.
    Unsupported(String),
    /// A request names a class that does not exist: (request, class).
    ClassMissing(String, String),
    /// A selector failed to evaluate: (claim, error).
    Cel(String, String),
    /// An allocated claim's devices cannot be used from the node.
    NotAvailable,
    /// The node does not reach free devices for every claim.
    CannotAllocate,
}

impl DeviceUnfit {
    /// The message, as kube-scheduler words it.
    pub fn render(&self) -> String {
        match self {
            Self::NotCreated(c) => format!("pod claim {c}: ResourceClaim not created yet"),
            Self::Missing(c) => format!("could not find ResourceClaim \"{c}\""),
            Self::Deleting(c) => format!("resourceclaim \"{c}\" is being deleted"),
            Self::Unsupported(what) => format!("tephra does not allocate {what}"),
            Self::ClassMissing(r, c) => format!("request {r}: device class {c} does not exist"),
            Self::Cel(claim, e) => format!("claim {claim}: CEL runtime error: {e}"),
            Self::NotAvailable => "resourceclaim not available on the node".into(),
            Self::CannotAllocate => "cannot allocate all claims".into(),
        }
    }
}

/// Why a pod's shared GPUs keep it off a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GpuUnfit {
    /// The configuration does not enable vGPU sharing.
    Off,
    /// The configuration does not enable the gpushare mode the pod asks for: the argument.
    ShareOff(&'static str),
    /// The node registered no shared GPU (no vGPU device plugin, or its annotation is bad).
    NotRegistered,
    /// The node's GPUs lack a free slot, memory or cores for it (evictions may help).
    NotEnough,
    /// The node lock (`deviceshare.NodeLockEnable`) stands: the device plugin has not yet
    /// allocated the last vGPU pod bound there, or one was placed there this session.
    Locked,
}

impl GpuUnfit {
    /// The message, as Volcano's `deviceshare` words the common one.
    pub fn render(self) -> String {
        match self {
            Self::Off => "vGPU sharing is off: the scheduler configuration does not set \
                          deviceshare.VGPUEnable"
                .into(),
            Self::ShareOff(arg) => {
                format!("gpushare is off: the scheduler configuration does not set {arg}")
            }
            Self::NotRegistered => {
                "node(s) registered no shared GPU (volcano.sh/node-vgpu-register, or gpushare's \
                 volcano.sh/gpu-memory and volcano.sh/gpu-number)"
                    .into()
            }
            Self::NotEnough => "not enough gpu fitted on this node".into(),
            Self::Locked => "node(s) locked for shared GPUs until the device plugin has \
                             allocated the vGPU pod bound there last (hamivgpu; \
                             deviceshare.NodeLockEnable)"
                .into(),
        }
    }

    /// Whether evicting pods could resolve it.
    pub fn resolvable(self) -> bool {
        self == Self::NotEnough
    }
}

/// Counts of reasons why nodes were rejected, for one cluster. The common reasons are plain
/// counters, so recording one costs no lookup.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FitErrors {
    /// Nodes looked at.
    pub nodes: u32,
    common: [u32; 4],
    insufficient: [u32; MAX_RESOURCES],
    other: BTreeMap<Unfit, u32>,
}

impl FitErrors {
    /// Records one rejected node.
    #[inline]
    pub fn add(&mut self, reason: Unfit) {
        self.add_n(reason, 1);
    }

    /// Records `n` nodes rejected for the same reason.
    pub fn add_n(&mut self, reason: Unfit, n: u32) {
        match reason {
            Unfit::Unschedulable => self.common[0] += n,
            Unfit::NotReady => self.common[1] += n,
            Unfit::Selector => self.common[2] += n,
            Unfit::TooManyPods => self.common[3] += n,
            Unfit::Insufficient(slot) if slot < self.insufficient.len() => {
                self.insufficient[slot] += n
            }
            other => {
                if n > 0 {
                    *self.other.entry(other).or_insert(0) += n;
                }
            }
        }
    }

    /// Whether some node was rejected for `reason` (one of the less common reasons, kept by
    /// name: not a plain counter).
    pub fn rejected_for(&self, reason: &Unfit) -> bool {
        self.other.contains_key(reason)
    }

    /// Every reason with its count.
    pub fn reasons(&self) -> BTreeMap<Unfit, u32> {
        let mut all = self.other.clone();
        let common = [
            Unfit::Unschedulable,
            Unfit::NotReady,
            Unfit::Selector,
            Unfit::TooManyPods,
        ];
        for (r, n) in common.into_iter().zip(self.common) {
            if n > 0 {
                all.insert(r, n);
            }
        }
        for (slot, n) in self.insufficient.iter().enumerate() {
            if *n > 0 {
                all.insert(Unfit::Insufficient(slot), *n);
            }
        }
        all
    }

    /// Whether any recorded failure could be resolved by evicting pods.
    pub fn resolvable(&self) -> bool {
        self.reasons().keys().any(Unfit::resolvable)
    }

    /// `0/500 nodes are available: 400 Insufficient nvidia.com/gpu, 100 ...`
    pub fn render(&self, names: &ResourceNames) -> String {
        let mut parts: Vec<(u32, String)> = self
            .reasons()
            .iter()
            .map(|(r, n)| (*n, r.render(names)))
            .collect();
        parts.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let list = parts
            .iter()
            .map(|(n, r)| format!("{n} {r}"))
            .collect::<Vec<_>>()
            .join(", ");
        if list.is_empty() {
            format!("{} node(s) looked at, none free", self.nodes)
        } else {
            format!("0/{} nodes are available: {list}", self.nodes)
        }
    }
}

/// Why a job may not go to a cluster, as a cluster filter says it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ClusterUnfit {
    /// What refuses the cluster, in words a user can read.
    pub message: String,
    /// Whether freeing resources in the cluster could resolve it (the gang does not fit what is
    /// free now), as opposed to a rule that refuses the cluster whatever runs there.
    pub resolvable: bool,
}

impl ClusterUnfit {
    /// A refusal that evictions cannot change (policy, taints, health).
    pub fn unresolvable(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            resolvable: false,
        }
    }

    /// A shortage of free resources, which evictions (or a reservation) can resolve.
    pub fn short(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            resolvable: true,
        }
    }
}

/// How cluster filters judge what is free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Room {
    /// The gang must fit what is free now: a cluster short of free resources is ruled out.
    FreeNow,
    /// Room is being made (preempt and reclaim evict running work) or reserved (a job past its
    /// SLA keeps what it gets): only refusals that evictions cannot resolve rule a cluster out.
    Making,
}
