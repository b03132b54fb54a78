//! What each cluster could ever hold, whatever runs on it now: the sum of its nodes'
//! allocatable and, per resource, the most one node has. Admission uses it so that no gang is
//! admitted that no eligible cluster can ever hold (fleet-wide totals would admit a gang that
//! fits only across clusters it may not span), and so that no gang is admitted whose pods no
//! node could ever take: node selectors, required node affinity, taints the pods do not
//! tolerate and volume claims (missing, immediate and unbound, bound to a volume elsewhere, or
//! bindable nowhere) are judged on every node of the eligible clusters, with what is running there
//! ignored (it may finish) and cordoned or NotReady nodes counted as usable (they may return).

use std::sync::Arc;

use super::job::eligible_clusters;
use crate::cache::Snapshot;
use crate::framework::devices::DeviceState;
use crate::framework::fit::{FitErrors, Room, Unfit};
use crate::framework::gpus::{GpuConfig, GpuState};
use crate::framework::session::Session;
use crate::framework::volumes::VolumeState;
use crate::model::cluster_affinity::allows;
use crate::model::{
    Id, Node, TaintEffect, TaskShape, affinity_matches, selector_matches, tolerated,
};
use crate::resources::{PODS, Resources};

/// One cluster's capacity.
#[derive(Clone, Copy, Debug, Default)]
pub struct Capacity {
    /// Sum of its nodes' allocatable.
    pub total: Resources,
    /// The most of each resource on one node.
    pub node_max: Resources,
    /// The most of each resource on one node without NoSchedule or NoExecute taints: a pod
    /// with no node selector or required affinity that fits this fits some node.
    pub plain_node_max: Resources,
}

/// Every cluster's capacity, by cluster id, from the totals the session state keeps.
pub fn capacities(ssn: &Session) -> Vec<Capacity> {
    let mut caps: Vec<Capacity> = ssn
        .state
        .cluster_allocatable
        .iter()
        .zip(&ssn.state.cluster_node_max)
        .map(|(&total, &node_max)| Capacity {
            total,
            node_max,
            plain_node_max: Resources::ZERO,
        })
        .collect();
    for (_, n) in ssn.snap.nodes.iter() {
        let plain = n
            .spec
            .taints
            .iter()
            .all(|t| t.effect == TaintEffect::PreferNoSchedule);
        if plain && let Some(c) = caps.get_mut(n.cluster as usize) {
            c.plain_node_max = c.plain_node_max.max(&n.allocatable());
        }
    }
    caps
}

/// Why `shape` can never run on `node`, judged on what does not change with what runs there.
/// `volumes` and `devices` are empty states, as if nothing were placed: kept across the nodes
/// of one shape, they work out what its claims ask once.
fn never_on(
    snap: &Snapshot,
    shape: &Arc<TaskShape>,
    id: Id,
    node: &Node,
    (volumes, devices): (&VolumeState, &DeviceState),
) -> Option<Unfit> {
    let labels = &node.spec.labels;
    if !selector_matches(&shape.node_selector, labels) || !affinity_matches(&shape.affinity, labels)
    {
        return Some(Unfit::Selector);
    }
    if let Some(t) =
        node.spec.taints.iter().find(|t| {
            t.effect != TaintEffect::PreferNoSchedule && !tolerated(&shape.tolerations, t)
        })
    {
        return Some(Unfit::Taint(format!("{}: {}", t.key, t.value)));
    }
    let topology = shape.rules.spread.iter().filter(|s| s.is_hard());
    if topology
        .clone()
        .any(|s| !labels.contains_key(&s.topology_key))
    {
        return Some(Unfit::SpreadMissingLabel);
    }
    if let Err(why) = shape.request.fits_in(&node.allocatable()) {
        return Some(if why == PODS {
            Unfit::TooManyPods
        } else {
            Unfit::Insufficient(why)
        });
    }
    // Volumes: a claim missing, bound to a volume the node cannot use, or never bindable there.
    if let Err(why) = volumes.check(snap, shape, id)
        && !why.resolvable()
    {
        return Some(why);
    }
    // Devices: claims the node could not serve even with every device free.
    if let Err(why) = devices.check(snap, shape, id, true) {
        return Some(why);
    }
    // Shared GPUs: asks the node's GPUs could not serve even with nothing on them.
    NEVER_EMPTY_GPUS.check(snap, shape, None, id, true).err()
}

/// Shared GPUs with nothing in use and sharing on: what a node's GPUs could ever take.
static NEVER_EMPTY_GPUS: std::sync::LazyLock<GpuState> = std::sync::LazyLock::new(|| {
    GpuState::with(GpuConfig {
        enabled: true,
        share_memory: true,
        share_number: true,
        ..GpuConfig::default()
    })
});

/// Why no node of `cluster` could ever take a pod of `shape`, node by node; `None` when one
/// could.
pub(crate) fn no_node_for(
    snap: &Snapshot,
    shape: &Arc<TaskShape>,
    cluster: Id,
    cap: &Capacity,
) -> Option<FitErrors> {
    let trivial = shape.node_selector.is_empty()
        && shape.affinity.is_empty()
        && shape.rules.claims.is_empty()
        && shape.rules.device_claims.is_empty()
        && shape.rules.gpus.is_none()
        && !shape.rules.spread.iter().any(|s| s.is_hard());
    if trivial && shape.request.fits_in(&cap.plain_node_max).is_ok() {
        return None;
    }
    let mut errs = FitErrors::default();
    let states = (&VolumeState::default(), &DeviceState::default());
    let all = snap
        .cluster_nodes
        .get(cluster as usize)
        .map(Vec::as_slice)
        .unwrap_or_default();
    // A pod with devices to allocate can only run on nodes that reach a device: when every
    // slice belongs to one node, only those nodes are looked at.
    let name = snap.clusters.get(cluster).map(|c| c.name.as_str());
    let sliced: Option<(Unfit, Vec<Id>)> = name.and_then(|name| {
        let off = states.1.off_slice(snap, shape, cluster, name, true)?;
        let nodes = snap.dra.get(name)?.only_node_slices()?;
        Some((off, nodes.filter_map(|n| snap.node_id(name, n)).collect()))
    });
    let nodes = match &sliced {
        Some((off, with_slices)) => {
            let without = all.len().saturating_sub(with_slices.len());
            errs.add_n(off.clone(), without as u32);
            errs.nodes += without as u32;
            with_slices.as_slice()
        }
        None => all,
    };
    for &n in nodes {
        let Some(node) = snap.nodes.get(n) else {
            continue;
        };
        errs.nodes += 1;
        match never_on(snap, shape, n, node, states) {
            None => return None,
            Some(why) => errs.add(why),
        }
    }
    Some(errs)
}

/// Why a pod of `job` could never be placed on any node of the `eligible` clusters, if so: the
/// first such shape's role and, in kube-scheduler's words, what each node of the cluster with
/// the most nodes refuses.
fn shapes_never_fit(ssn: &Session, job: Id, eligible: &[Id], caps: &[Capacity]) -> Option<String> {
    let j = ssn.snap.jobs.get(job)?;
    let mut seen: Vec<&Arc<TaskShape>> = Vec::new();
    for &t in &j.tasks {
        let Some(task) = ssn.snap.tasks.get(t) else {
            continue;
        };
        let shape = &task.spec.shape;
        if seen
            .iter()
            .any(|s| Arc::ptr_eq(s, shape) || ***s == **shape)
        {
            continue;
        }
        seen.push(shape);
        let mut worst: Option<FitErrors> = None;
        let mut fits = false;
        for &c in eligible {
            let cap = caps.get(c as usize).copied().unwrap_or_default();
            match no_node_for(&ssn.snap, shape, c, &cap) {
                None => {
                    fits = true;
                    break;
                }
                Some(errs) => {
                    if worst.as_ref().is_none_or(|w| errs.nodes > w.nodes) {
                        worst = Some(errs);
                    }
                }
            }
        }
        if !fits {
            let detail = worst
                .map(|w| w.render(&ssn.snap.names))
                .unwrap_or_else(|| "no node".to_string());
            return Some(format!(
                "the job can never be placed: no node of an eligible cluster can ever take a \
                 pod of task {}: {detail}",
                shape.role
            ));
        }
    }
    None
}

/// Why `job` can never be placed, if that is so: its gang (minResources) fits no eligible
/// cluster in total (all eligible clusters together when it may be split), its largest task
/// fits no node of an eligible cluster, or a pod of it matches no node that could ever take it
/// (selectors, affinity, taints, spread topology keys, allocatable). `None` when it could fit
/// somewhere once room is made.
pub fn never_fits(ssn: &Session, job: Id, caps: &[Capacity]) -> Option<String> {
    let j = ssn.snap.jobs.get(job)?;
    let g = j.group.as_ref()?;
    // Without minResources only the largest task is checked.
    let min = g.min_resources.unwrap_or(Resources::ZERO);
    // The pods it has, and the largest its controller declares (before the pods exist).
    let largest = j
        .tasks
        .iter()
        .filter_map(|&t| ssn.snap.tasks.get(t))
        .map(|t| t.spec.shape.request)
        .fold(g.largest_task.unwrap_or(Resources::ZERO), |acc, r| {
            acc.max(&r)
        });
    let (mut eligible, rejected) = eligible_clusters(ssn, job, Room::Making);
    // A member that is down may come back with the nodes it last reported: it stays in the
    // verdict when the job's policy allows it, so that an outage neither makes a job that
    // fits only there "never" nor a job that fits nowhere "not yet".
    for r in &rejected {
        if let Some(id) = ssn.snap.cluster_id(&r.cluster)
            && let Some(c) = ssn.snap.clusters.get(id)
            && !c.ready
            && allows(&g.policy, c).is_ok()
        {
            eligible.push(id);
        }
    }
    if eligible.is_empty() {
        // The cluster filters explain this themselves when placement is tried.
        return None;
    }
    let cap = |c: Id| caps.get(c as usize).copied().unwrap_or_default();
    let task_fits = |c: Id| largest.fits_in(&cap(c).node_max).is_ok();
    let fits = if g.policy.splittable {
        let total = eligible
            .iter()
            .fold(Resources::ZERO, |acc, &c| acc.plus(&cap(c).total));
        min.fits_in(&total).is_ok() && eligible.iter().any(|&c| task_fits(c))
    } else {
        eligible
            .iter()
            .any(|&c| min.fits_in(&cap(c).total).is_ok() && task_fits(c))
    };
    if fits {
        return shapes_never_fit(ssn, job, &eligible, caps);
    }
    let names = &ssn.snap.names;
    let short = |avail: &Resources, need: &Resources| match need.fits_in(avail) {
        Err(r) => names.name(r).to_string(),
        Ok(()) => String::new(),
    };
    let sum = eligible
        .iter()
        .fold(Resources::ZERO, |acc, &c| acc.plus(&cap(c).total));
    let biggest = eligible
        .iter()
        .copied()
        .max_by_key(|&c| cap(c).total.0.iter().sum::<i64>())
        .unwrap_or(eligible[0]);
    let what = if g.policy.splittable && min.fits_in(&sum).is_err() {
        format!(
            "its minResources exceed the {} of all eligible clusters together",
            short(&sum, &min)
        )
    } else if !g.policy.splittable && min.fits_in(&cap(biggest).total).is_err() {
        format!(
            "its minResources exceed the {} of every eligible cluster, and a gang that may \
             not be split must fit in one",
            short(&cap(biggest).total, &min)
        )
    } else {
        format!(
            "its largest task needs more {} than any node of an eligible cluster has",
            short(&cap(biggest).node_max, &largest)
        )
    };
    Some(format!("the job can never be placed: {what}"))
}
