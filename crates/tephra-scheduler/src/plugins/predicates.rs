//! `predicates`: whether a pod can run on a node, as kube-scheduler's filters (and Volcano's
//! `predicates` plugin) decide it: node Ready and not cordoned, nodeSelector and required node
//! affinity, NoSchedule/NoExecute taints against tolerations, host ports (`NodePorts`), required
//! inter-pod affinity and anti-affinity (the pod's own terms, and the anti-affinity of pods
//! already placed), `DoNotSchedule` pod topology spread constraints, volume claims (bound
//! volumes' node affinity, delayed claims' matching volumes or provisioning, ReadWriteOncePod,
//! CSI attach limits: `framework/volumes.rs`), ResourceClaims (devices the node reaches, free
//! and matching: `framework/devices.rs`), pod slots, and resource fit against what the node
//! will have free (idle plus releasing, less pipelined).
//!
//! Volcano's switches `predicate.NodeAffinityEnable`, `predicate.TaintTolerationEnable`,
//! `predicate.NodePortsEnable`, `predicate.PodAffinityEnable`,
//! `predicate.PodTopologySpreadEnable` and `predicate.VolumeBindingEnable` (default true) turn
//! those checks off. Its other keys are
//! accepted without effect, each with the reason ([`ARGS`]).

use crate::config::{ArgErrors, ArgReader, ArgSpec, PluginConfig};
use crate::framework::affinity::{AffinityIndex, Terms};
use crate::framework::fit::Unfit;
use crate::framework::plugin::{Plugin, Predicate, SessionEvents};
use crate::framework::ports::PortIndex;
use crate::framework::spread::{Breach, Kind, SpreadIndex};
use crate::framework::view::View;
use crate::model::{
    Id, TaintEffect, Task, affinity_matches, selector_matches, tolerated, tolerates_cordon,
};
use crate::resources::PODS;

/// The `predicates` plugin.
pub struct Predicates {
    node_affinity: bool,
    taints: bool,
    pod_affinity: bool,
    node_ports: bool,
    spread: bool,
    volumes: bool,
    index: AffinityIndex,
    ports: PortIndex,
    spread_index: SpreadIndex,
}

const VOLUMES: &str = "tephra checks volumes under predicate.VolumeBindingEnable";

/// What the plugin reads (Volcano's keys).
pub const ARGS: ArgSpec = ArgSpec {
    keys: &[
        "predicate.NodeAffinityEnable",
        "predicate.TaintTolerationEnable",
        "predicate.PodAffinityEnable",
        "predicate.NodePortsEnable",
        "predicate.PodTopologySpreadEnable",
        "predicate.VolumeBindingEnable",
    ],
    prefixes: &[],
    inert: &[
        ("predicate.NodeVolumeLimitsEnable", VOLUMES),
        ("predicate.VolumeZoneEnable", VOLUMES),
        (
            "volumebinding.weight",
            "tephra does not score nodes by their volumes; claims are a filter",
        ),
        (
            "volumebinding.bindTimeoutSeconds",
            "set with tephra scheduler --volume-bind-timeout",
        ),
        (
            "volumebinding.shape",
            "tephra does not score nodes by their volumes; claims are a filter",
        ),
        (
            "predicate.CacheEnable",
            "tephra keeps no predicate results between sessions",
        ),
        (
            "predicate.DynamicResourceAllocationEnable",
            "tephra always allocates the devices of a pod's ResourceClaims; Volcano no longer reads it either",
        ),
        (
            "dynamicresources.filterTimeoutSeconds",
            "tephra's device allocation has no time limit",
        ),
        (
            "predicate.GPUSharingEnable",
            "GPU sharing moved to Volcano's deviceshare plugin (deviceshare.GPUSharingEnable), which tephra serves; Volcano's predicates no longer reads it",
        ),
        (
            "predicate.GPUNumberEnable",
            "moved to Volcano's deviceshare plugin (deviceshare.GPUNumberEnable), which tephra serves; Volcano's predicates no longer reads it",
        ),
        (
            "predicate.ProportionalEnable",
            "moved to Volcano's resource-strategy-fit plugin",
        ),
        (
            "predicate.resources",
            "moved to Volcano's resource-strategy-fit plugin",
        ),
        (
            "predicate.resources.",
            "moved to Volcano's resource-strategy-fit plugin",
        ),
    ],
};

/// Builds the plugin from its configuration.
pub fn build(cfg: &PluginConfig) -> Result<Box<dyn Plugin>, ArgErrors> {
    let r = ArgReader::new(&cfg.arguments, &ARGS);
    let node_affinity = r.bool_or("predicate.NodeAffinityEnable", true);
    let taints = r.bool_or("predicate.TaintTolerationEnable", true);
    let pod_affinity = r.bool_or("predicate.PodAffinityEnable", true);
    let node_ports = r.bool_or("predicate.NodePortsEnable", true);
    let spread = r.bool_or("predicate.PodTopologySpreadEnable", true);
    let volumes = r.bool_or("predicate.VolumeBindingEnable", true);
    r.finish()?;
    Ok(Box::new(Predicates {
        node_affinity,
        taints,
        pod_affinity,
        node_ports,
        spread,
        volumes,
        index: AffinityIndex::default(),
        ports: PortIndex::default(),
        spread_index: SpreadIndex::new(Kind::Hard),
    }))
}

impl Plugin for Predicates {
    fn name(&self) -> &'static str {
        "predicates"
    }

    fn predicate(&self) -> Option<&dyn Predicate> {
        Some(self)
    }

    fn events(&mut self) -> Option<&mut dyn SessionEvents> {
        Some(self)
    }
}

impl SessionEvents for Predicates {
    fn opened(&mut self, view: &View) {
        if self.pod_affinity {
            self.index = AffinityIndex::build(view, Terms::Required);
        }
        if self.node_ports {
            self.ports = PortIndex::build(view);
        }
    }

    fn allocated(&mut self, view: &View, task: Id) {
        if self.pod_affinity {
            self.index.placed(view, task);
        }
        if self.node_ports {
            self.ports.placed(view, task);
        }
        if self.spread {
            self.spread_index.placed(view, task);
        }
    }

    fn deallocated(&mut self, view: &View, task: Id) {
        if self.pod_affinity {
            self.index.removed(view, task);
        }
        if self.node_ports {
            self.ports.removed(view, task);
        }
        if self.spread {
            self.spread_index.removed(view, task);
        }
    }
}

impl Predicates {
    /// Host ports, volume claims, ResourceClaims, shared GPUs and `DoNotSchedule` spread constraints of
    /// `task` on `node`: out of line, so that the scan over pods that have none stays tight.
    #[inline(never)]
    fn contracts(&self, view: &View, task: &Task, node: Id) -> Result<(), Unfit> {
        let shape = &task.spec.shape;
        if self.node_ports && self.ports.clash(node, &shape.rules.host_ports) {
            return Err(Unfit::NodePorts);
        }
        if self.volumes {
            view.state.volumes.check(view.snap, shape, node)?;
        }
        view.state.devices.check(view.snap, shape, node, false)?;
        view.state
            .gpus
            .check(view.snap, shape, Some(task.job), node, false)?;
        if self.spread && self.spread_index.applies(task) {
            match self.spread_index.check(view, task, node) {
                Ok(()) => {}
                Err(Breach::MissingLabel) => return Err(Unfit::SpreadMissingLabel),
                Err(Breach::Skew) => return Err(Unfit::Spread),
            }
        }
        Ok(())
    }

    /// Required inter-pod affinity and anti-affinity of `task` on `node`.
    fn pod_affinity(&self, view: &View, task: &Task, node: Id) -> Result<(), Unfit> {
        let shape = &task.spec.shape;
        let ns = shape.namespace.as_str();
        for term in &shape.rules.affinity {
            match self.index.count(view, ns, term, node) {
                None => return Err(Unfit::PodAffinity),
                Some(n) if n > 0 => {}
                Some(_) => {
                    // No pod it wants is in this domain. As kube-scheduler does, the first pod
                    // of a group that selects itself may go anywhere while no such pod exists.
                    let first = self.index.total(ns, term) == 0
                        && term.selects(ns, ns, &shape.rules.labels);
                    if !first {
                        return Err(Unfit::PodAffinity);
                    }
                }
            }
        }
        for term in &shape.rules.anti_affinity {
            if self
                .index
                .count(view, ns, term, node)
                .is_some_and(|n| n > 0)
            {
                return Err(Unfit::PodAntiAffinity);
            }
        }
        if self.index.repelled(view, ns, &shape.rules.labels, node) {
            return Err(Unfit::ExistingAntiAffinity);
        }
        Ok(())
    }
}

impl Predicate for Predicates {
    #[inline]
    fn check(&self, view: &View, task: &Task, node: Id) -> Result<(), Unfit> {
        let Some(n) = view.node(node) else {
            return Err(Unfit::NotReady);
        };
        if !n.spec.ready {
            return Err(Unfit::NotReady);
        }
        let shape = &task.spec.shape;
        if n.spec.unschedulable && !tolerates_cordon(&shape.tolerations) {
            return Err(Unfit::Unschedulable);
        }
        if self.node_affinity
            && (!selector_matches(&shape.node_selector, &n.spec.labels)
                || !affinity_matches(&shape.affinity, &n.spec.labels))
        {
            return Err(Unfit::Selector);
        }
        if self.taints {
            for t in &n.spec.taints {
                if t.effect != TaintEffect::PreferNoSchedule && !tolerated(&shape.tolerations, t) {
                    return Err(Unfit::Taint(format!("{}: {}", t.key, t.value)));
                }
            }
        }
        if self.pod_affinity && !self.index.is_empty() {
            self.pod_affinity(view, task, node)?;
        }
        let r = &shape.rules;
        if !(r.host_ports.is_empty()
            && r.claims.is_empty()
            && r.device_claims.is_empty()
            && r.gpus.is_none()
            && r.spread.is_empty())
        {
            self.contracts(view, task, node)?;
        }
        let slots = view.snap.names.len();
        match view.state.nodes[node as usize].future_fits(&shape.request, slots) {
            Ok(()) => Ok(()),
            Err(PODS) => Err(Unfit::TooManyPods),
            Err(slot) => Err(Unfit::Insufficient(slot)),
        }
    }
}
