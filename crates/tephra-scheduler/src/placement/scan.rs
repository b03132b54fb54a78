//! Two-level, node-aware gang placement: choose a cluster by simulating the whole gang on its
//! nodes, then place each role's replicas on the best nodes.
//!
//! Replicas of one role share a shape, so their candidate nodes are found and scored once: the
//! scan keeps a max-heap of (score, node); the best node takes a replica, is re-scored and goes
//! back on the heap if another replica still fits. Only the chosen node changes between two
//! replicas, so this gives the same answer as scoring every node for every replica, at the cost
//! of one scan per role. As in kube-scheduler, the scan stops once enough feasible nodes are
//! found (adaptively 5–50% of the cluster, at least 100) and starts where the last scan ended.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;

use crate::config::Args;
use crate::framework::{FitErrors, Unfit, View};
use crate::model::{Id, TaskStatus};
use crate::resources::Resources;
use crate::session::{Session, Statement, extended_mask};

/// Tuning of node search, from the allocate action's arguments.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchArgs {
    /// Find at least this many feasible nodes before choosing (default 100).
    pub min_feasible_nodes: usize,
    /// ... and at least this percentage of the cluster (default 5).
    pub min_percentage: usize,
    /// Fixed percentage of nodes to find; 0 means adaptive, as kube-scheduler (default 0).
    pub percentage: usize,
    /// Clusters simulated per job before giving up on it this session (default 5).
    pub max_clusters: usize,
}

impl Default for SearchArgs {
    fn default() -> Self {
        Self {
            min_feasible_nodes: 100,
            min_percentage: 5,
            percentage: 0,
            max_clusters: 5,
        }
    }
}

/// Argument keys of node search.
pub const SEARCH_KEYS: &[&str] = &[
    "minimumFeasibleNodes",
    "minimumPercentageNodesToFind",
    "percentageNodesToFind",
    "maxClustersToSimulate",
];

impl SearchArgs {
    /// Reads the arguments, checking them.
    pub fn from_args(args: &Args) -> Result<Self, (String, String)> {
        let mut s = Self::default();
        for (key, value) in args {
            let n = value
                .as_f64()
                .filter(|v| *v >= 0.0 && v.fract() == 0.0)
                .ok_or_else(|| (key.clone(), "must be a non-negative integer".to_string()))?
                as usize;
            match key.as_str() {
                "minimumFeasibleNodes" => s.min_feasible_nodes = n,
                "minimumPercentageNodesToFind" => s.min_percentage = n.min(100),
                "percentageNodesToFind" => s.percentage = n.min(100),
                "maxClustersToSimulate" => s.max_clusters = n.max(1),
                _ => return Err((key.clone(), "unknown argument".into())),
            }
        }
        Ok(s)
    }

    /// How many feasible nodes to find in a cluster of `n` nodes.
    pub fn to_find(&self, n: usize) -> usize {
        let pct = if self.percentage > 0 {
            self.percentage
        } else {
            (50usize.saturating_sub(n / 125)).max(self.min_percentage)
        };
        (n * pct / 100).max(self.min_feasible_nodes).min(n)
    }
}

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
    fn new(ssn: &Session, task: &crate::model::Task, node: Id) -> Self {
        Self {
            fits_idle: task
                .spec
                .shape
                .request
                .fits_in(&ssn.state.nodes[node as usize].idle)
                .is_ok(),
            score: ssn.node_score(task, node),
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
        ssn: &Session,
        classes: &[crate::session::NodeClass],
        task: &crate::model::Task,
        errs: &mut FitErrors,
        until: usize,
    ) {
        while self.pos < self.plan.len() && self.heap.len() < until {
            let (ci, len, start) = self.plan[self.pos];
            if self.scanned_in[self.pos] >= len {
                self.pos += 1;
                continue;
            }
            let node = classes[ci].nodes[(start + self.scanned_in[self.pos]) % len];
            self.scanned_in[self.pos] += 1;
            self.scanned += 1;
            match ssn.predicate(task, node) {
                Ok(()) => self.heap.push(Candidate::new(ssn, task, node)),
                Err(u) => errs.add(u),
            }
        }
    }
}

/// Pending tasks of a job grouped by shape, each group in task order, groups ordered by their
/// first task.
pub fn pending_groups(ssn: &Session, job: Id, best_effort: bool) -> Vec<Vec<Id>> {
    let Some(j) = ssn.snap.jobs.get(job) else {
        return Vec::new();
    };
    let mut tasks: Vec<Id> = j
        .tasks
        .iter()
        .copied()
        .filter(|t| {
            ssn.state.status(&ssn.snap, *t) == TaskStatus::Pending
                && ssn
                    .snap
                    .tasks
                    .get(*t)
                    .is_some_and(|t| t.spec.shape.best_effort() == best_effort)
        })
        .collect();
    tasks.sort_by(|a, b| ssn.task_order(*a, *b));
    let mut groups: Vec<Vec<Id>> = Vec::new();
    for t in tasks {
        let shape = ssn.snap.tasks.get(t).map(|t| &t.spec.shape);
        let same = groups.iter_mut().find(|g| {
            let first = ssn.snap.tasks.get(g[0]).map(|t| &t.spec.shape);
            match (first, shape) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
                _ => false,
            }
        });
        match same {
            Some(g) => g.push(t),
            None => groups.push(vec![t]),
        }
    }
    groups
}

/// Places up to `want` of `tasks` (one shape) in `cluster`. Returns how many were placed and
/// records why nodes were rejected.
///
/// Only node classes that offer every extended resource the task asks for are scanned; the
/// others are counted as rejected in bulk. Classes without extended resources come first, so a
/// CPU task finds CPU nodes before GPU nodes. A negative best score (a plugin discouraging every
/// node found so far) widens the scan to the whole cluster.
pub fn place_group(
    ssn: &mut Session,
    stmt: &mut Statement,
    tasks: &[Id],
    want: usize,
    cluster: Id,
    search: &SearchArgs,
    errs: &mut FitErrors,
) -> usize {
    let snap = ssn.snap.clone();
    if want == 0 || tasks.is_empty() {
        return 0;
    }
    let Some(first) = snap.tasks.get(tasks[0]) else {
        return 0;
    };
    let Some(slot) = ssn.state.node_classes.get_mut(cluster as usize) else {
        return 0;
    };
    // Taken out for the duration of the scan, so that the session can be mutated meanwhile.
    let mut classes = std::mem::take(slot);
    let queue = snap
        .jobs
        .get(first.job)
        .map(|j| j.queue().to_string())
        .unwrap_or_default();
    let need = extended_mask(&first.spec.shape.request);
    let mut bulk = 0usize;
    // (class index, number of nodes, first position)
    let mut plan: Vec<(usize, usize, usize)> = Vec::new();
    for (ci, class) in classes.iter().enumerate() {
        let len = class.nodes.len();
        if class.mask & need == need {
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
    scan.fill(ssn, &classes, first, errs, target);
    if scan.heap.peek().is_some_and(|c| c.score < 0.0) {
        scan.fill(ssn, &classes, first, errs, usize::MAX);
    }
    let mut placed = 0usize;
    let mut next = 0usize;
    while placed < want && next < tasks.len() {
        if scan.heap.is_empty() {
            if scan.scanned >= total {
                break;
            }
            scan.fill(ssn, &classes, first, errs, 1);
            continue;
        }
        let Some(best) = scan.heap.pop() else { break };
        let task_id = tasks[next];
        let Some(task) = snap.tasks.get(task_id) else {
            next += 1;
            continue;
        };
        if !ssn.allocatable(&queue, task_id) {
            errs.add(Unfit::Other("queue capability reached"));
            break;
        }
        if ssn.predicate(task, best.node).is_err() {
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
            && ssn.predicate(t, best.node).is_ok()
        {
            scan.heap.push(Candidate::new(ssn, t, best.node));
        }
    }
    errs.nodes = errs.nodes.max((bulk + scan.scanned) as u32);
    for (p, &(ci, len, start)) in scan.plan.iter().enumerate() {
        classes[ci].start = (start + scan.scanned_in[p]) % len;
    }
    ssn.state.node_classes[cluster as usize] = classes;
    placed
}

/// Places a job's pending groups in one cluster: first each role's minimum, then the rest.
pub fn place_job_in_cluster(
    ssn: &mut Session,
    stmt: &mut Statement,
    job: Id,
    groups: &[Vec<Id>],
    cluster: Id,
    search: &SearchArgs,
    errs: &mut FitErrors,
) {
    let mins = ssn
        .snap
        .jobs
        .get(job)
        .and_then(|j| j.group.as_ref())
        .map(|g| g.min_task_member.clone())
        .unwrap_or_default();
    let pending = |ssn: &Session, g: &[Id]| -> Vec<Id> {
        g.iter()
            .copied()
            .filter(|t| ssn.state.status(&ssn.snap, *t) == TaskStatus::Pending)
            .collect()
    };
    if !mins.is_empty() {
        let waiting: BTreeMap<String, u32> = ssn
            .view()
            .counts(job)
            .waiting_by_role
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        // What each role still needs; a role may have several shapes (groups).
        let mut need: BTreeMap<String, usize> = mins
            .iter()
            .map(|(role, min)| {
                let have = waiting.get(role).copied().unwrap_or(0);
                (role.clone(), min.saturating_sub(have) as usize)
            })
            .collect();
        for g in groups {
            let Some(role) = ssn.snap.tasks.get(g[0]).map(|t| t.spec.shape.role.clone()) else {
                continue;
            };
            let want = need.get(&role).copied().unwrap_or(0);
            if want == 0 {
                continue;
            }
            let todo = pending(ssn, g);
            let mut local = FitErrors::default();
            let placed = place_group(ssn, stmt, &todo, want, cluster, search, &mut local);
            if placed < want {
                *errs = local;
            }
            if let Some(n) = need.get_mut(&role) {
                *n -= placed.min(*n);
            }
        }
        if need.values().any(|n| *n > 0) {
            // A role cannot reach its minimum here; the gang cannot be ready.
            return;
        }
    }
    for g in groups {
        let todo = pending(ssn, g);
        let want = todo.len();
        let mut local = FitErrors::default();
        // The message reports the role that could not be placed in full.
        if place_group(ssn, stmt, &todo, want, cluster, search, &mut local) < want {
            *errs = local;
        }
    }
}

/// A lower bound of what a job still needs to become ready, and the largest single-task
/// request that must fit on one node.
pub fn job_needs(view: &View, job: Id) -> (Resources, Resources) {
    let Some(j) = view.job(job) else {
        return (Resources::ZERO, Resources::ZERO);
    };
    let counts = view.counts(job);
    let mins = j
        .group
        .as_ref()
        .map(|g| g.min_task_member.clone())
        .unwrap_or_default();
    // Pending tasks by role: (request of the role's first task, number pending).
    let mut roles: BTreeMap<&str, (Resources, u32)> = BTreeMap::new();
    for &t in &j.tasks {
        if view.status(t) != TaskStatus::Pending {
            continue;
        }
        if let Some(task) = view.task(t) {
            let e = roles
                .entry(task.spec.shape.role.as_str())
                .or_insert((task.spec.shape.request, 0));
            e.1 += 1;
        }
    }
    let mut total = Resources::ZERO;
    let mut one_node = Resources::ZERO;
    let mut smallest: Option<Resources> = None;
    let mut counted = 0u32;
    for (role, (req, pending)) in &roles {
        smallest = Some(smallest.map_or(*req, |s| s.min(req)));
        let have = counts.waiting_by_role.get(*role).copied().unwrap_or(0);
        let need = mins
            .get(*role)
            .copied()
            .unwrap_or(0)
            .saturating_sub(have)
            .min(*pending);
        if need > 0 {
            total.add(&req.times(i64::from(need)));
            one_node = one_node.max(req);
            counted += need;
        }
    }
    let remaining = j
        .min_member()
        .saturating_sub(counts.ready + counts.pipelined + counted);
    if let Some(s) = smallest {
        if remaining > 0 {
            total.add(&s.times(i64::from(remaining)));
        }
        // Whatever the gang still needs, placing anything takes room for one task.
        one_node = one_node.max(&s);
    }
    (total, one_node)
}

/// Why an aggregate check rules a cluster out, or `None` if it may fit.
pub fn prune_reason(
    view: &View,
    cluster: Id,
    need: &Resources,
    one_node: &Resources,
) -> Option<String> {
    let names = &view.snap.names;
    let free = view.state.cluster_future_idle[cluster as usize];
    if let Err(slot) = need.fits_in(&free) {
        return Some(format!(
            "needs {} {} in total, {} free",
            crate::resources::format_quantity(slot, need.get(slot)),
            names.name(slot),
            crate::resources::format_quantity(slot, free.get(slot).max(0)),
        ));
    }
    let max = view.state.cluster_max_node_idle[cluster as usize];
    if let Err(slot) = one_node.fits_in(&max) {
        return Some(format!(
            "no node has {} {} free (the most on one node is {})",
            crate::resources::format_quantity(slot, one_node.get(slot)),
            names.name(slot),
            crate::resources::format_quantity(slot, max.get(slot).max(0)),
        ));
    }
    None
}
