//! Gang fitting within one cluster: a job's pending tasks grouped by shape, each role's
//! minimum placed first and then the rest, and what a gang still needs (for the aggregate
//! checks that prune clusters before any node is scanned).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::classes::{Placer, Within};
use super::scan::place_group;
use super::search::SearchArgs;
use crate::framework::fit::{ClusterUnfit, FitErrors};
use crate::framework::session::Session;
use crate::framework::statement::Statement;
use crate::framework::view::View;
use crate::model::{Id, TaskStatus};
use crate::resources::{MAX_RESOURCES, Resources, format_quantity};

/// The pending tasks of a job that scheduling gates hold back, and the gates' names: they are no
/// candidates for placement until their gates are removed.
pub fn gated(view: &View, job: Id) -> (u32, Vec<String>) {
    let mut n = 0;
    let mut names: Vec<String> = Vec::new();
    for &t in view
        .job(job)
        .map(|j| j.tasks.as_slice())
        .unwrap_or_default()
    {
        let Some(task) = view.task(t) else { continue };
        if !task.spec.shape.gated() || view.status(t) != TaskStatus::Pending {
            continue;
        }
        n += 1;
        for g in &task.spec.shape.rules.gates {
            if !names.contains(g) {
                names.push(g.clone());
            }
        }
    }
    names.sort();
    (n, names)
}

/// Pending tasks of a job grouped by shape, each group in task order, groups ordered by their
/// first task. Tasks that scheduling gates hold back are left out.
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
                && ssn.snap.tasks.get(*t).is_some_and(|t| {
                    t.spec.shape.best_effort() == best_effort && !t.spec.shape.gated()
                })
        })
        .collect();
    let hooks = ssn.hooks();
    tasks.sort_by(|a, b| hooks.task_order(*a, *b));
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

/// Places a job's pending groups in one cluster (or one domain of it): first each role's
/// minimum, then the rest.
#[allow(clippy::too_many_arguments)]
pub fn place_job_in_cluster(
    ssn: &mut Session,
    placer: &mut Placer,
    stmt: &mut Statement,
    job: Id,
    groups: &[Vec<Id>],
    at: Within,
    search: &SearchArgs,
    errs: &mut FitErrors,
) {
    let mins = ssn
        .snap
        .jobs
        .get(job)
        .and_then(|j| j.group.as_ref())
        .map(|g| g.role_minimums().clone())
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
            let placed = place_group(ssn, placer, stmt, &todo, want, at, search, &mut local);
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
        if place_group(ssn, placer, stmt, &todo, want, at, search, &mut local) < want {
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
        .map(|g| g.role_minimums().clone())
        .unwrap_or_default();
    // Pending tasks by role: (request of the role's first task, number pending).
    let mut roles: BTreeMap<&str, (Resources, u32)> = BTreeMap::new();
    for &t in &j.tasks {
        if view.status(t) != TaskStatus::Pending {
            continue;
        }
        if let Some(task) = view.task(t).filter(|t| !t.spec.shape.gated()) {
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

/// Whether a gang may fit a cluster at all, judged on aggregates: what it needs in total
/// against what the cluster has free, and its largest task against the most any one node has
/// free. A shortage is a fit failure that evictions could resolve.
pub fn aggregate_fit(
    view: &View,
    cluster: Id,
    need: &Resources,
    one_node: &Resources,
) -> Result<(), ClusterUnfit> {
    let names = &view.snap.names;
    let free = view.state.cluster_future_idle[cluster as usize];
    if let Err(slot) = need.fits_in(&free) {
        return Err(ClusterUnfit::short(format!(
            "needs {} {} in total, {} free",
            format_quantity(slot, need.get(slot)),
            names.name(slot),
            format_quantity(slot, free.get(slot).max(0)),
        )));
    }
    let max = view.state.cluster_max_node_idle[cluster as usize];
    if let Err(slot) = one_node.fits_in(&max) {
        return Err(ClusterUnfit::short(format!(
            "no node has {} {} free (the most on one node is {})",
            format_quantity(slot, one_node.get(slot)),
            names.name(slot),
            format_quantity(slot, max.get(slot).max(0)),
        )));
    }
    Ok(())
}

/// The resources a job that still `need`s this much (see [`job_needs`]) is short of in a
/// cluster: those it needs more of, in total, than the cluster has free. Only evicting pods that
/// hold one of them can make room for it; when there are none, what blocks the job is not the
/// cluster's free total (a queue limit, or free resources spread too thin).
pub fn shortfall(view: &View, need: &Resources, cluster: Id) -> Vec<usize> {
    let free = view.state.cluster_future_idle[cluster as usize];
    (0..MAX_RESOURCES)
        .filter(|&r| need.get(r) > free.get(r))
        .collect()
}
