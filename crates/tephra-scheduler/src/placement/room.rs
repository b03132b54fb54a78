//! Making room for a waiting gang by evicting running work, gang-aware, shared by `preempt`
//! (within a queue, lower priority) and `reclaim` (across queues, from queues above their
//! deserved share).
//!
//! Where to look is decided by fit failures, not guessed: a cluster is a candidate only if what
//! refuses the gang there is resolvable ([`Room::Making`]); victims must hold a resource the gang
//! is short of there ([`shortfall`]) and run on a node that refuses the gang for resolvable
//! reasons only ([`Unfit::resolvable`](crate::framework::fit::Unfit::resolvable)).
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

use super::classes::{Placer, Starts};
use super::domains::{Placed, place_within};
use super::gang::{job_needs, pending_groups, shortfall};
use super::job::{candidate_clusters, finish};
use super::search::SearchArgs;
use super::victims::{Running, Victim, running_jobs, victim};
use crate::framework::fit::{FitErrors, Room};
use crate::framework::hooks::Dispatch;
use crate::framework::order::jobs_by_queue;
use crate::framework::session::Session;
use crate::framework::statement::Statement;
use crate::model::{GroupPhase, Id};
use crate::resources::Resources;

/// Which rule picks victims.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Same queue, lower priority.
    Preempt,
    /// Other reclaimable queues above their deserved share.
    Reclaim,
}

/// The most victim jobs looked at for one preemptor in one cluster: enough to free several
/// whole nodes of small pods for big tasks.
const MAX_VICTIM_JOBS: usize = 256;

/// After this many preemptors of one queue tried placements on evicted room and still found
/// none, the queue's others wait for the next session: the search is costly. A preemptor whose
/// victims cannot even cover what it needs fails without a placement and does not count, so
/// impossible preemptors ahead in job order never starve a possible one.
const MAX_FAILURES_PER_QUEUE: usize = 4;

/// Makes room for waiting gangs by evicting running work, by `mode`'s rule: queue by queue in
/// queue order, each queue's starving jobs in job order.
pub fn run(ssn: &mut Session, placer: &mut Placer, search: &SearchArgs, mode: Mode) {
    let starving = jobs_by_queue(ssn, |ssn, job| {
        matches!(
            ssn.state.phase(&ssn.snap, job),
            Some(GroupPhase::Inqueue | GroupPhase::Running | GroupPhase::Unknown)
        ) && ssn.view().has_pending(job)
            && !ssn.hooks().job_ready(job)
    });
    if starving.is_empty() {
        return;
    }
    let running = running_jobs(ssn);
    if running.is_empty() {
        return;
    }
    let mut queues: Vec<String> = starving.keys().cloned().collect();
    let hooks = ssn.hooks();
    queues.sort_by(|a, b| hooks.queue_order(a, b).then_with(|| a.cmp(b)));
    for queue in queues {
        if mode == Mode::Reclaim && ssn.hooks().overused(&queue) {
            continue;
        }
        let mut failures = 0usize;
        for &job in starving.get(&queue).into_iter().flatten() {
            if failures >= MAX_FAILURES_PER_QUEUE {
                break;
            }
            let hooks = ssn.hooks();
            if hooks.job_ready(job) || hooks.job_valid(job).is_err() {
                continue;
            }
            if mode == Mode::Reclaim && !hooks.may_reclaim(job) {
                continue;
            }
            let priority = ssn.view().job_priority(job);
            let key = ssn
                .snap
                .jobs
                .get(job)
                .map(|j| j.key.clone())
                .unwrap_or_default();
            // Only clusters where the gang is refused for reasons evictions can resolve.
            let (candidates, _) = candidate_clusters(ssn, job, Room::Making);
            let mut made_room = false;
            let mut searched = false;
            let probes = probes(ssn, job);
            let (need, _) = job_needs(&ssn.view(), job);
            for cluster in candidates.into_iter().take(search.max_clusters) {
                // Only victims holding something the gang is short of here can help, and only
                // on nodes where the gang's failure is resolvable. (When nothing is short here,
                // a queue limit is what blocks: any victim of the right queue may help.)
                let short = shortfall(&ssn.view(), &need, cluster);
                let hooks = ssn.hooks();
                let helps = |v: &Victim| {
                    short.is_empty()
                        || v.tasks.iter().any(|&t| {
                            ssn.state
                                .task_node(&ssn.snap, t)
                                .is_some_and(|n| might_help(&hooks, &probes, n))
                        })
                };
                let mut eligible: Vec<&Running> = running
                    .iter()
                    .filter(|r| r.cluster == cluster && r.job != job)
                    .filter(|r| short.is_empty() || short.iter().any(|&s| r.held.get(s) > 0))
                    .filter(|r| match mode {
                        Mode::Preempt => r.queue == queue && r.priority < priority,
                        Mode::Reclaim => {
                            r.queue != queue
                                && ssn.snap.queues.get(&r.queue).is_some_and(|q| q.reclaimable)
                        }
                    })
                    .collect();
                if mode == Mode::Reclaim {
                    // From the queue furthest above its share first (the reverse of the
                    // order in which queues are served); within a queue, as before.
                    eligible.sort_by(|a, b| hooks.queue_order(&b.queue, &a.queue));
                }
                let victims: Vec<Victim> = eligible
                    .into_iter()
                    .filter_map(|r| victim(ssn, r.job, cluster))
                    .filter(|v| helps(v))
                    .take(MAX_VICTIM_JOBS)
                    .collect();
                let victims = node_by_node(ssn, &probes, victims);
                if victims.is_empty() {
                    continue;
                }
                let reason = match mode {
                    Mode::Preempt => {
                        format!("preempted by {key} (priority {priority}) in queue {queue}")
                    }
                    Mode::Reclaim => format!(
                        "reclaimed by {key} for queue {queue}, which is below its deserved share"
                    ),
                };
                let allowed = |ssn: &Session, tasks: &[Id]| {
                    let hooks = ssn.hooks();
                    hooks.victims_allowed(tasks)
                        && match mode {
                            Mode::Preempt => true,
                            Mode::Reclaim => hooks.reclaimable(tasks),
                        }
                };
                let made = make_room(
                    ssn, placer, job, cluster, &victims, &reason, search, &allowed,
                );
                if made.is_err_and(|placed_tried| placed_tried) {
                    searched = true;
                }
                if let Ok(n) = made {
                    let note = ssn.note(job);
                    let verb = if mode == Mode::Preempt {
                        "preempting"
                    } else {
                        "reclaiming"
                    };
                    let msg = note.message.clone().unwrap_or_default();
                    note.message = Some(format!("{msg} ({verb} {n} task(s))"));
                    made_room = true;
                    break;
                }
            }
            if searched && !made_room {
                failures += 1;
            }
        }
    }
}

/// One pending task of each shape of the job: what a node must be able to take.
fn probes(ssn: &Session, job: Id) -> Vec<Id> {
    let mut groups = pending_groups(ssn, job, false);
    groups.extend(pending_groups(ssn, job, true));
    groups.iter().filter_map(|g| g.first().copied()).collect()
}

/// Whether evicting pods on `node` could let one of the job's tasks (`probes`) run there: the
/// node refuses at least one of them for no reason that evictions cannot resolve (as
/// kube-scheduler looks for preemption only on such nodes).
fn might_help(hooks: &Dispatch, probes: &[Id], node: Id) -> bool {
    probes.iter().any(|&t| {
        hooks
            .view()
            .task(t)
            .is_some_and(|task| match hooks.predicate(task, node) {
                Ok(()) => true,
                Err(why) => why.resolvable(),
            })
    })
}

/// Victims regrouped node by node, so that growing the set in order frees whole nodes: a task
/// that needs a whole node is helped only by every victim on one node, not by one victim on
/// each of many. Nodes come cheapest first: those where the fewest victims (in the given
/// order) make room for one of the gang's task shapes (`probes`), ties broken by the
/// preference of their first victim; each node's victims keep the given order. A victim
/// belongs to the node of the task it would lose first. Nodes where no victim set makes room
/// come last.
fn node_by_node(ssn: &Session, probes: &[Id], victims: Vec<Victim>) -> Vec<Victim> {
    let view = ssn.view();
    let request = |t: Id| {
        view.task(t)
            .map_or(Resources::ZERO, |t| t.spec.shape.request)
    };
    let mut nodes: Vec<(Id, Vec<usize>)> = Vec::new();
    for (i, v) in victims.iter().enumerate() {
        let Some(node) = v.tasks.first().and_then(|&t| view.task_node(t)) else {
            continue;
        };
        match nodes.iter_mut().find(|(n, _)| *n == node) {
            Some((_, list)) => list.push(i),
            None => nodes.push((node, vec![i])),
        }
    }
    let cost = |node: Id, list: &[usize]| -> usize {
        let mut avail = view.future_idle(node);
        for (k, &i) in list.iter().enumerate() {
            for &t in victims[i]
                .tasks
                .iter()
                .filter(|&&t| view.task_node(t) == Some(node))
            {
                avail.add(&request(t));
            }
            if probes.iter().any(|&p| request(p).fits_in(&avail).is_ok()) {
                return k + 1;
            }
        }
        usize::MAX
    };
    let mut ranked: Vec<(usize, usize, &Vec<usize>)> = nodes
        .iter()
        .map(|(node, list)| (cost(*node, list), list[0], list))
        .collect();
    ranked.sort_by_key(|&(c, first, _)| (c, first));
    let mut slots: Vec<Option<Victim>> = victims.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(slots.len());
    for (_, _, list) in ranked {
        out.extend(list.iter().filter_map(|&i| slots[i].take()));
    }
    out.extend(slots.into_iter().flatten());
    out
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
    placer: &mut Placer,
    job: Id,
    cluster: Id,
    victims: &[Victim],
    chosen: &[(usize, usize)],
    reason: &str,
    search: &SearchArgs,
    starts: &Starts,
) -> Option<Statement> {
    let mut stmt = Statement::new();
    for &(i, n) in chosen {
        for &t in tasks_at(&victims[i], n) {
            ssn.evict(&mut stmt, t, reason);
        }
    }
    // Every trial scans the cluster's nodes from the same place, so that the committed
    // placement is the one the trials found.
    placer.set_starts(cluster, starts);
    let mut groups = pending_groups(ssn, job, false);
    groups.extend(pending_groups(ssn, job, true));
    let mut errs = FitErrors::default();
    // A gang held to a network-topology tier fits only within one domain.
    let placed = place_within(
        ssn, placer, &mut stmt, job, &groups, cluster, search, &mut errs,
    );
    let hooks = ssn.hooks();
    if !matches!(placed, Placed::Refused(_)) && (hooks.job_ready(job) || hooks.job_pipelined(job)) {
        Some(stmt)
    } else {
        ssn.discard(stmt);
        None
    }
}

/// Finds the fewest victims (in the given order) that let `job` fit in `cluster`, and commits
/// their eviction together with the job's placement. `allowed` vets a candidate set as a whole
/// (reclaim uses it to keep victim queues at their deserved share). Returns the number of
/// tasks evicted, or whether a placement was tried (the costly part) when no set of victims
/// makes room.
#[allow(clippy::too_many_arguments)]
fn make_room(
    ssn: &mut Session,
    placer: &mut Placer,
    job: Id,
    cluster: Id,
    victims: &[Victim],
    reason: &str,
    search: &SearchArgs,
    allowed: &dyn Fn(&Session, &[Id]) -> bool,
) -> Result<usize, bool> {
    let starts = placer.starts(cluster);
    let evicted = |chosen: &[(usize, usize)]| -> Vec<Id> {
        chosen
            .iter()
            .flat_map(|&(i, n)| tasks_at(&victims[i], n).iter().copied())
            .collect()
    };
    // A cheap bound first: until what is free plus what the chosen victims hold covers what
    // the gang still needs, no placement is tried.
    let (need, _) = job_needs(&ssn.view(), job);
    let free = ssn.state.cluster_future_idle[cluster as usize];
    let snap = ssn.snap.clone();
    let held = |tasks: &[Id]| {
        tasks.iter().fold(free, |acc, t| {
            acc.plus(
                &snap
                    .tasks
                    .get(*t)
                    .map_or(Resources::ZERO, |t| t.spec.shape.request),
            )
        })
    };
    // Grow the set in victim order: each job one spare task at a time, then whole.
    let mut chosen: Vec<(usize, usize)> = Vec::new();
    let mut found = false;
    let mut tried = false;
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
            tried = true;
            if let Some(stmt) = attempt(
                ssn, placer, job, cluster, victims, &chosen, reason, search, &starts,
            ) {
                ssn.discard(stmt);
                found = true;
                break 'grow;
            }
        }
    }
    if !found {
        return Err(tried);
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
            match attempt(
                ssn, placer, job, cluster, victims, &trial, reason, search, &starts,
            ) {
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
    let stmt = attempt(
        ssn, placer, job, cluster, victims, &chosen, reason, search, &starts,
    )
    .ok_or(true)?;
    let n = evicted(&chosen).len();
    let ready = ssn.hooks().job_ready(job);
    finish(ssn, job, stmt, ready, Some(cluster));
    Ok(n)
}
