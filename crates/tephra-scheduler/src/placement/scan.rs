//! The resumable node scan: place a role's replicas on the best nodes of one cluster.
//!
//! Replicas of one role share a shape, so their candidate nodes are found and scored once: the
//! scan keeps a max-heap of (score, node); the best node takes a replica, is re-scored and goes
//! back on the heap if another replica still fits. Only the chosen node changes between two
//! replicas, so this gives the same answer as scoring every node for every replica, at the cost
//! of one scan per role. As in kube-scheduler, the scan stops once enough feasible nodes are
//! found (adaptively 5–50% of the cluster, at least 100) and starts where the last scan ended.
//! A pod that carries a plan made elsewhere (a fleet scheduler's planned node) is tried on that
//! node before the scan.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::classes::{NodeClass, Placer, Within, extended_mask};
use super::search::SearchArgs;
use crate::framework::fit::{FitErrors, Unfit};
use crate::framework::hooks::Dispatch;
use crate::framework::session::Session;
use crate::framework::statement::Statement;
use crate::model::{Id, Task};

#[derive(PartialEq)]
struct Candidate {
    /// The task fits the node's free resources now (not only once releasing pods are gone):
    /// such nodes always go first, as in Volcano, so a gang is not held pipelined while a free
    /// node could take it.
    fits_idle: bool,
    score: f64,
    node: Id,
}

impl Candidate {
    fn new(hooks: &Dispatch, task: &Task, node: Id) -> Self {
        Self {
            fits_idle: task
                .spec
                .shape
                .request
                .fits_in_first(
                    hooks.view().snap.names.len(),
                    &hooks.view().state.nodes[node as usize].idle,
                )
                .is_ok(),
            score: hooks.node_score(task, node),
            node,
        }
    }
}

impl Eq for Candidate {}

impl Ord for Candidate {
    fn cmp(&self, o: &Self) -> Ordering {
        self.fits_idle
            .cmp(&o.fits_idle)
            .then_with(|| self.score.total_cmp(&o.score))
            .then_with(|| o.node.cmp(&self.node))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// A resumable scan over the eligible node classes of one cluster, feeding a heap of scored
/// feasible nodes.
struct Scan {
    /// (class index, number of nodes, first position)
    plan: Vec<(usize, usize, usize)>,
    scanned_in: Vec<usize>,
    pos: usize,
    scanned: usize,
    heap: BinaryHeap<Candidate>,
}

impl Scan {
    /// Scans on until the heap holds `until` feasible nodes or every node was looked at.
    fn fill(
        &mut self,
        hooks: &Dispatch,
        classes: &[NodeClass],
        task: &Task,
        errs: &mut FitErrors,
        until: usize,
    ) {
        // Found nodes are gathered first and made a heap once (linear), rather than pushed
        // one by one; the heap's order is total, so what it pops is the same.
        let mut found = Vec::new();
        while self.pos < self.plan.len() && self.heap.len() + found.len() < until {
            let (ci, len, start) = self.plan[self.pos];
            if self.scanned_in[self.pos] >= len {
                self.pos += 1;
                continue;
            }
            let node = classes[ci].nodes[(start + self.scanned_in[self.pos]) % len];
            self.scanned_in[self.pos] += 1;
            self.scanned += 1;
            match hooks.predicate(task, node) {
                Ok(()) => found.push(Candidate::new(hooks, task, node)),
                Err(u) => errs.add(u),
            }
        }
        if self.heap.is_empty() {
            self.heap = BinaryHeap::from(found);
        } else {
            self.heap.extend(found);
        }
    }
}

/// Whether a task that asks for no GPU has been through every node without GPUs (they are
/// scanned first) and now only finds GPU nodes, which `gpupack` scores below zero for it all
/// alike. Widening the scan then only scores more of those: a whole-cluster scan per gang in a
/// mixed cluster whose CPU nodes are full.
fn spilled(scan: &Scan, classes: &[NodeClass], wants_gpu: bool) -> bool {
    !wants_gpu
        && scan
            .plan
            .iter()
            .zip(&scan.scanned_in)
            .all(|(&(ci, len, _), &done)| classes[ci].gpu || done >= len)
}

/// Places up to `want` of `tasks` (one shape) in a cluster, or in one domain of it. Returns how
/// many were placed and records why nodes were rejected.
///
/// Only node classes that offer every extended resource the task asks for are scanned; the
/// others are counted as rejected in bulk. Classes without GPUs come first, so a CPU task finds
/// CPU nodes before GPU nodes. A negative best score (a plugin discouraging every
/// node found so far) widens the scan to the whole cluster, unless a CPU task has spilled onto
/// GPU nodes (see [`spilled`]): then, as in Volcano, the best of the nodes found is taken.
/// Pods with a planned node in the cluster are tried there first ([`place_planned`]).
#[allow(clippy::too_many_arguments)]
pub fn place_group(
    ssn: &mut Session,
    placer: &mut Placer,
    stmt: &mut Statement,
    tasks: &[Id],
    want: usize,
    at: Within,
    search: &SearchArgs,
    errs: &mut FitErrors,
) -> usize {
    let snap = ssn.snap.clone();
    let cluster = at.cluster;
    if want == 0 || tasks.is_empty() {
        return 0;
    }
    let Some(first) = snap.tasks.get(tasks[0]) else {
        return 0;
    };
    let queue = snap
        .jobs
        .get(first.job)
        .map(|j| j.queue().to_string())
        .unwrap_or_default();
    // Pods a plan made elsewhere put on a node of this cluster go there first.
    let unplanned: Vec<Id>;
    let (tasks, pre) = if tasks
        .iter()
        .any(|t| snap.tasks.get(*t).is_some_and(|t| t.spec.planned.is_some()))
    {
        let (pre, rest) = place_planned(ssn, stmt, &queue, tasks, want, at);
        unplanned = rest;
        (unplanned.as_slice(), pre)
    } else {
        (tasks, 0)
    };
    let want = want - pre;
    if want == 0 || tasks.is_empty() {
        return pre;
    }
    let Some(first) = snap.tasks.get(tasks[0]) else {
        return pre;
    };
    let Some(classes) = placer.classes_mut(&snap, at) else {
        return pre;
    };
    let need = extended_mask(&first.spec.shape.request);
    // What nodes that reach no DRA device answer, when a claim must be allocated.
    let off_slice = snap.clusters.get(cluster).and_then(|c| {
        ssn.state
            .devices
            .off_slice(&snap, &first.spec.shape, cluster, &c.name, false)
    });
    let mut bulk = 0usize;
    // (class index, number of nodes, first position)
    let mut plan: Vec<(usize, usize, usize)> = Vec::new();
    for (ci, class) in classes.iter().enumerate() {
        let len = class.nodes.len();
        if let Some(u) = off_slice.as_ref().filter(|_| !class.devices) {
            errs.add_n(u.clone(), len as u32);
            bulk += len;
        } else if class.mask & need == need {
            if len > 0 {
                plan.push((ci, len, class.start % len));
            }
        } else {
            let missing = (need & !class.mask).trailing_zeros() as usize;
            errs.add_n(Unfit::Insufficient(missing), len as u32);
            bulk += len;
        }
    }
    let total: usize = plan.iter().map(|p| p.1).sum();
    let mut scan = Scan {
        scanned_in: vec![0; plan.len()],
        plan,
        pos: 0,
        scanned: 0,
        heap: BinaryHeap::new(),
    };
    let target = search.to_find(total).max(1);
    scan.fill(&ssn.hooks(), classes, first, errs, target);
    let wants_gpu = snap.names.has_gpu(&first.spec.shape.request);
    if scan.heap.peek().is_some_and(|c| c.score < 0.0) && !spilled(&scan, classes, wants_gpu) {
        scan.fill(&ssn.hooks(), classes, first, errs, usize::MAX);
    }
    let mut placed = 0usize;
    let mut next = 0usize;
    // Nodes refused for one replica only because of the spread the earlier ones made: placing
    // a replica elsewhere may make them feasible again, so they go back on the heap after each
    // placement.
    let mut deferred: Vec<Id> = Vec::new();
    while placed < want && next < tasks.len() {
        if scan.heap.is_empty() {
            if scan.scanned >= total {
                break;
            }
            scan.fill(&ssn.hooks(), classes, first, errs, 1);
            continue;
        }
        let Some(best) = scan.heap.pop() else { break };
        let task_id = tasks[next];
        let Some(task) = snap.tasks.get(task_id) else {
            next += 1;
            continue;
        };
        if !ssn.hooks().allocatable(&queue, task_id) {
            errs.add(Unfit::QueueCapability);
            break;
        }
        if let Err(u) = ssn.hooks().predicate(task, best.node) {
            // Feasible for an earlier replica, not for this one (pod anti-affinity, a port,
            // spread): that is why the gang may end up short.
            if u == Unfit::Spread {
                deferred.push(best.node);
            }
            errs.add(u);
            continue;
        }
        let pipelined = task
            .spec
            .shape
            .request
            .fits_in(&ssn.state.nodes[best.node as usize].idle)
            .is_err();
        ssn.allocate(stmt, task_id, best.node, pipelined);
        placed += 1;
        next += 1;
        if next < tasks.len()
            && let Some(t) = snap.tasks.get(tasks[next])
        {
            deferred.push(best.node);
            for node in std::mem::take(&mut deferred) {
                match ssn.hooks().predicate(t, node) {
                    Ok(()) => scan.heap.push(Candidate::new(&ssn.hooks(), t, node)),
                    Err(Unfit::Spread) => deferred.push(node),
                    Err(u) if placed < want && node == best.node => errs.add(u),
                    Err(_) => {}
                }
            }
        }
    }
    errs.nodes = errs.nodes.max((bulk + scan.scanned) as u32);
    for (p, &(ci, len, start)) in scan.plan.iter().enumerate() {
        classes[ci].start = (start + scan.scanned_in[p]) % len;
    }
    pre + placed
}

/// Places each of `tasks` (up to `want`) that names a planned node ([`PodSpec::planned`]) in
/// `at` on that node, where the node passes every predicate for it and its queue may take it.
/// Returns how many were placed and the tasks left for the scan, in their order. A plan that
/// no longer fits is not an error: its pod is placed like any other.
///
/// [`PodSpec::planned`]: crate::model::PodSpec::planned
fn place_planned(
    ssn: &mut Session,
    stmt: &mut Statement,
    queue: &str,
    tasks: &[Id],
    want: usize,
    at: Within,
) -> (usize, Vec<Id>) {
    let snap = ssn.snap.clone();
    let cluster_name = snap.clusters.get(at.cluster).map(|c| c.name.clone());
    let topology = at.domain.and_then(|_| snap.topology(at.cluster));
    let domain: Option<&[Id]> = at.domain.map(|d| {
        topology
            .as_ref()
            .and_then(|t| t.domains.get(d))
            .map_or(&[][..], |d| d.nodes.as_slice())
    });
    let mut placed = 0;
    let mut rest = Vec::with_capacity(tasks.len());
    for &id in tasks {
        let node = snap.tasks.get(id).and_then(|t| {
            let name = t.spec.planned.as_deref()?;
            let node = snap.node_id(cluster_name.as_deref()?, name)?;
            let inside = domain.is_none_or(|nodes| nodes.contains(&node));
            (placed < want && inside).then_some((t, node))
        });
        let Some((task, node)) = node else {
            rest.push(id);
            continue;
        };
        let hooks = ssn.hooks();
        if !hooks.allocatable(queue, id) || hooks.predicate(task, node).is_err() {
            rest.push(id);
            continue;
        }
        let pipelined = task
            .spec
            .shape
            .request
            .fits_in(&ssn.state.nodes[node as usize].idle)
            .is_err();
        ssn.allocate(stmt, id, node, pipelined);
        placed += 1;
    }
    (placed, rest)
}
