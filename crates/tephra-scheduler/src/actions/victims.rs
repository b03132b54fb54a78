//! Making room for a waiting gang by evicting running work, gang-aware, shared by `preempt`
//! (within a queue, lower priority) and `reclaim` (across queues, from queues above their
//! deserved share).
//!
//! Rules:
//! - preemptor and victims are in one cluster, the one the preemptor is placed in; a cluster's
//!   victims are never combined with another's;
//! - a running gang is never cut below its minMember: a victim job loses either its tasks above
//!   minMember (a slice) or the whole gang;
//! - victims are taken in order (lowest priority, then most recently started), a job's slice
//!   before the job whole, until the preemptor's gang fits (placed on free resources, pipelined
//!   onto the evicted ones); then every choice that is not needed is dropped again, so that no
//!   eviction is pointless;
//! - everything happens in one statement, committed only if the preemptor then fits.

use crate::framework::FitErrors;
use crate::model::{Id, TaskStatus};
use crate::placement::{SearchArgs, pending_groups, place_job_in_cluster};
use crate::session::{Session, Statement};

/// A running job that may lose tasks in one cluster.
#[derive(Clone, Debug)]
pub(crate) struct Victim {
    /// Its evictable running tasks in the cluster, the ones to go first first.
    pub tasks: Vec<Id>,
    /// How many of them may go while the gang stays at minMember (0: none).
    pub spare: usize,
}

/// Running, evictable tasks of `job` in `cluster`, latest index first, and how many of them can
/// go without cutting the gang below its minimum. `None` when the job has nothing evictable
/// there or runs in several clusters.
pub(crate) fn victim(ssn: &Session, job: Id, cluster: Id) -> Option<Victim> {
    let j = ssn.snap.jobs.get(job)?;
    let mut here = Vec::new();
    let mut ready = 0usize;
    let mut role_ready: std::collections::BTreeMap<&str, u32> = std::collections::BTreeMap::new();
    for &t in &j.tasks {
        let status = ssn.state.status(&ssn.snap, t);
        let task = ssn.snap.tasks.get(t)?;
        if status.is_ready() {
            ready += 1;
            *role_ready.entry(task.spec.shape.role.as_str()).or_insert(0) += 1;
        }
        if !matches!(status, TaskStatus::Running | TaskStatus::Bound) {
            continue;
        }
        if task.spec.status != status {
            // Placed or changed in this very session: only pods that were already running
            // are evicted (as Volcano does).
            continue;
        }
        let node = ssn.state.task_node(&ssn.snap, t)?;
        if ssn.snap.nodes.get(node).map(|n| n.cluster) != Some(cluster) {
            // A gang spread over clusters is left alone: evicting part of it here could cut
            // it below its minimum overall.
            return None;
        }
        if !task.spec.shape.preemptable || !ssn.victim_allowed(t) {
            // One protected task protects the gang: evicting the rest could break it.
            return None;
        }
        here.push(t);
    }
    if here.is_empty() {
        return None;
    }
    here.sort_by_key(|t| {
        std::cmp::Reverse(ssn.snap.tasks.get(*t).map_or(0, |task| task.spec.index))
    });
    // Spare tasks: while the gang stays at minMember and each role at its minTaskMember.
    let mins = j.group.as_ref().map(|g| &g.min_task_member);
    let mut total = ready;
    let (mut spare, mut rest) = (Vec::new(), Vec::new());
    for t in here {
        let role = ssn
            .snap
            .tasks
            .get(t)
            .map_or("", |task| task.spec.shape.role.as_str());
        let role_min = mins.and_then(|m| m.get(role)).copied().unwrap_or(0);
        let have = role_ready.get(role).copied().unwrap_or(0);
        if total > j.min_member() as usize && have > role_min {
            spare.push(t);
            total -= 1;
            if let Some(r) = role_ready.get_mut(role) {
                *r -= 1;
            }
        } else {
            rest.push(t);
        }
    }
    let n_spare = spare.len();
    spare.extend(rest);
    Some(Victim {
        tasks: spare,
        spare: n_spare,
    })
}

/// The first `n` of a victim's tasks: `n` is at most its spare tasks, or all of them.
fn tasks_at(v: &Victim, n: usize) -> &[Id] {
    &v.tasks[..n.min(v.tasks.len())]
}

/// The eviction sizes a victim allows, smallest first: one spare task at a time, then the
/// whole gang.
fn sizes(v: &Victim) -> Vec<usize> {
    let mut out: Vec<usize> = (1..=v.spare).collect();
    if v.spare < v.tasks.len() {
        out.push(v.tasks.len());
    }
    out
}

/// Evicts `chosen` and tries to place `job` in `cluster` in one statement. Returns the
/// statement (not yet committed) when the gang then fits as ready or pipelined.
#[allow(clippy::too_many_arguments)]
fn attempt(
    ssn: &mut Session,
    job: Id,
    cluster: Id,
    victims: &[Victim],
    chosen: &[(usize, usize)],
    reason: &str,
    search: &SearchArgs,
    starts: &[usize],
) -> Option<Statement> {
    let mut stmt = Statement::new();
    for &(i, n) in chosen {
        for &t in tasks_at(&victims[i], n) {
            ssn.evict(&mut stmt, t, reason);
        }
    }
    // Every trial scans the cluster's nodes from the same place, so that the committed
    // placement is the one the trials found.
    if let Some(classes) = ssn.state.node_classes.get_mut(cluster as usize) {
        for (class, start) in classes.iter_mut().zip(starts) {
            class.start = *start;
        }
    }
    let mut groups = pending_groups(ssn, job, false);
    groups.extend(pending_groups(ssn, job, true));
    let mut errs = FitErrors::default();
    place_job_in_cluster(ssn, &mut stmt, job, &groups, cluster, search, &mut errs);
    if ssn.job_ready(job) || ssn.job_pipelined(job) {
        Some(stmt)
    } else {
        ssn.discard(stmt);
        None
    }
}

/// Finds the fewest victims (in the given order) that let `job` fit in `cluster`, and commits
/// their eviction together with the job's placement. `allowed` vets a candidate set as a whole
/// (reclaim uses it to keep victim queues at their deserved share). Returns the number of
/// tasks evicted, or `None` if no set of victims makes room.
pub(crate) fn make_room(
    ssn: &mut Session,
    job: Id,
    cluster: Id,
    victims: &[Victim],
    reason: &str,
    search: &SearchArgs,
    allowed: &dyn Fn(&Session, &[Id]) -> bool,
) -> Option<usize> {
    let starts: Vec<usize> = ssn
        .state
        .node_classes
        .get(cluster as usize)
        .map(|c| c.iter().map(|class| class.start).collect())
        .unwrap_or_default();
    let evicted = |chosen: &[(usize, usize)]| -> Vec<Id> {
        chosen
            .iter()
            .flat_map(|&(i, n)| tasks_at(&victims[i], n).iter().copied())
            .collect()
    };
    // A cheap bound first: until what is free plus what the chosen victims hold covers what
    // the gang still needs, no placement is tried.
    let (need, _) = crate::placement::job_needs(&ssn.view(), job);
    let free = ssn.state.cluster_future_idle[cluster as usize];
    let snap = ssn.snap.clone();
    let held = |tasks: &[Id]| {
        tasks.iter().fold(free, |acc, t| {
            acc.plus(
                &snap
                    .tasks
                    .get(*t)
                    .map_or(crate::resources::Resources::ZERO, |t| t.spec.shape.request),
            )
        })
    };
    // Grow the set in victim order: each job one spare task at a time, then whole.
    let mut chosen: Vec<(usize, usize)> = Vec::new();
    let mut found = false;
    'grow: for (i, v) in victims.iter().enumerate() {
        let mut kept = 0usize;
        for n in sizes(v) {
            chosen.retain(|(j, _)| *j != i);
            chosen.push((i, n));
            if !allowed(ssn, &evicted(&chosen)) {
                // Too much from this job's queue: keep what was allowed and move on.
                chosen.retain(|(j, _)| *j != i);
                if kept > 0 {
                    chosen.push((i, kept));
                }
                continue 'grow;
            }
            kept = n;
            if need.fits_in(&held(&evicted(&chosen))).is_err() {
                continue;
            }
            if let Some(stmt) =
                attempt(ssn, job, cluster, victims, &chosen, reason, search, &starts)
            {
                ssn.discard(stmt);
                found = true;
                break 'grow;
            }
        }
    }
    if !found {
        return None;
    }
    // Drop what is not needed, latest choice first, one size step at a time: no pointless
    // evictions.
    let mut k = chosen.len();
    while k > 0 {
        k -= 1;
        loop {
            let (i, n) = chosen[k];
            let smaller = sizes(&victims[i]).into_iter().filter(|m| *m < n).max();
            let mut trial = chosen.clone();
            match smaller {
                Some(m) => trial[k].1 = m,
                None => {
                    trial.remove(k);
                }
            }
            match attempt(ssn, job, cluster, victims, &trial, reason, search, &starts) {
                Some(stmt) => {
                    ssn.discard(stmt);
                    let removed = smaller.is_none();
                    chosen = trial;
                    if removed {
                        break;
                    }
                }
                None => break,
            }
        }
    }
    let stmt = attempt(ssn, job, cluster, victims, &chosen, reason, search, &starts)?;
    let n = evicted(&chosen).len();
    let ready = ssn.job_ready(job);
    super::allocate::finish(ssn, job, stmt, ready, Some(cluster));
    Some(n)
}
