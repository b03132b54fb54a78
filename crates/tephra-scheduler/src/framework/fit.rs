//! Why something does not fit: a task on a node ([`Unfit`], counted per cluster in
//! [`FitErrors`]) or a job in a cluster ([`ClusterUnfit`]).
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
            Self::Plugin(why, _) => (*why).to_string(),
        }
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
