//! Placing a job, two-level: the cluster plugins filter and score clusters, aggregates prune
//! them, and the gang is simulated on each candidate's nodes in score order; the first cluster
//! where the whole gang fits wins. A job whose policy allows splitting may then be spread over
//! several clusters, still all-or-nothing; one past its SLA keeps what fits as a reservation.
//! Whatever happens is noted for the job's status and events.

use std::collections::BTreeSet;

use tephra_api::reasons;

use super::classes::{Placer, Within};
use super::domains::{Placed, place_within};
use super::drain::{drain, may_hold};
use super::gang::{gated, pending_groups, place_job_in_cluster};
use super::scope::{FleetSpan, fleet_span};
use super::search::SearchArgs;
use crate::framework::fit::{DeviceUnfit, FitErrors, Room, Unfit};
use crate::framework::session::Session;
use crate::framework::statement::{Op, Statement};
use crate::model::{Id, TaskStatus};

/// A cluster ruled out for a job, and why, in words a user can read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    /// The cluster.
    pub cluster: String,
    /// Why it was ruled out.
    pub why: String,
}

/// What became of one job in an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Something was committed (bound or pipelined).
    Placed,
    /// It was tried and does not fit.
    Failed,
    /// Nothing to do for it here (invalid, or nothing pending for this action).
    Skipped,
}

/// Tries to place one job's pending tasks: those with requests, and with them its best-effort
/// pods (a gang may need both to be complete). Jobs with only best-effort pods pending are
/// left to `backfill`. Pods held back by scheduling gates are not placed; a gang that cannot be
/// complete without them waits, with a note that says so.
pub fn allocate_job(
    ssn: &mut Session,
    placer: &mut Placer,
    job: Id,
    search: &SearchArgs,
) -> Outcome {
    let mut groups = pending_groups(ssn, job, false);
    if groups.is_empty() {
        note_gated(ssn, job);
        return Outcome::Skipped;
    }
    groups.extend(pending_groups(ssn, job, true));
    place_job(ssn, placer, job, &groups, search)
}

/// Places `groups` of a job, two-level, all or nothing; records what happened.
pub fn place_job(
    ssn: &mut Session,
    placer: &mut Placer,
    job: Id,
    groups: &[Vec<Id>],
    search: &SearchArgs,
) -> Outcome {
    if let Err(invalid) = ssn.hooks().job_valid(job) {
        let note = ssn.note(job);
        note.reason = Some(invalid.reason);
        note.message = Some(invalid.message.clone());
        note.invalid = Some(invalid);
        return Outcome::Skipped;
    }
    let groups = groups.to_vec();
    // The room held for it since the last session is its own to place into.
    ssn.release_holds(job);
    let reserves = ssn.hooks().job_reserves(job);
    let (mut candidates, mut rejected) = candidate_clusters(ssn, job, Room::FreeNow);
    if reserves && candidates.is_empty() {
        // A job that reserves takes what it can get: clusters are not pruned by whether the
        // whole gang fits now.
        candidates = candidate_clusters(ssn, job, Room::Making).0;
    }
    let total_tasks = ssn.snap.jobs.get(job).map_or(0, |j| j.tasks.len());
    let mut pipelined_at: Option<Id> = None;
    // For a job that reserves (sla): the cluster where most of it fits.
    let mut reserve_at: Option<(usize, Id)> = None;
    // Clusters where an allocated ResourceClaim kept a pod off some node.
    let mut unreachable_claims: Vec<Id> = Vec::new();
    for &cluster in candidates.iter().take(search.max_clusters) {
        let mut stmt = Statement::new();
        let mut errs = FitErrors::default();
        let placed = place_within(
            ssn, placer, &mut stmt, job, &groups, cluster, search, &mut errs,
        );
        if errs.rejected_for(&Unfit::Device(DeviceUnfit::NotAvailable)) {
            unreachable_claims.push(cluster);
        }
        if let Placed::Refused(why) = placed {
            ssn.discard(stmt);
            rejected.push(Rejected {
                cluster: cluster_name(ssn, cluster),
                why,
            });
            continue;
        }
        // A gang that was already ready and gained nothing here is not "placed".
        if !stmt.is_empty() && ssn.hooks().job_ready(job) {
            finish(ssn, job, stmt, true, Some(cluster));
            note_domain(ssn, job, &placed);
            return Outcome::Placed;
        }
        if pipelined_at.is_none() && !stmt.is_empty() && ssn.hooks().job_pipelined(job) {
            pipelined_at = Some(cluster);
        }
        if reserves && stmt.ops().len() > reserve_at.map_or(0, |r| r.0) {
            reserve_at = Some((stmt.ops().len(), cluster));
        }
        let why = if errs.reasons().is_empty() {
            // Everything pending fit, yet the gang is short of members.
            let c = ssn.view().counts(job);
            let min = ssn.snap.jobs.get(job).map_or(1, |j| j.min_member());
            let (held, _) = gated(&ssn.view(), job);
            let gates = if held > 0 {
                format!(" ({held} more held back by scheduling gates)")
            } else {
                String::new()
            };
            format!(
                "all {} pending task(s) fit, but the gang needs {min} members and would have \
                 {}{gates}",
                stmt.ops().len(),
                c.ready + c.pipelined
            )
        } else {
            errs.render(&ssn.snap.names)
        };
        ssn.discard(stmt);
        rejected.push(Rejected {
            cluster: cluster_name(ssn, cluster),
            why,
        });
    }
    // A gang held within a tier no higher than the clusters' never splits across clusters, nor
    // does one made of sub-groups; one held to a fleet tier splits within one of its domains.
    if splittable(ssn, job) && candidates.len() > 1 {
        let groups: Vec<Vec<Id>> = match fleet_span(ssn, job) {
            FleetSpan::Whole => Vec::new(),
            FleetSpan::Anywhere => vec![candidates.clone()],
            FleetSpan::Within(tier) => fleet_domains(ssn, &candidates, tier),
        };
        for group in groups.iter().filter(|g| g.len() > 1) {
            if split(ssn, placer, job, group, search) {
                return Outcome::Placed;
            }
        }
    }
    if let Some(cluster) = pipelined_at {
        let mut stmt = Statement::new();
        let mut errs = FitErrors::default();
        let placed = place_within(
            ssn, placer, &mut stmt, job, &groups, cluster, search, &mut errs,
        );
        if ssn.hooks().job_pipelined(job) {
            finish(ssn, job, stmt, false, Some(cluster));
            note_domain(ssn, job, &placed);
            return Outcome::Placed;
        }
        ssn.discard(stmt);
    }
    // Reserving room node by node does not keep a gang within one domain, nor a sub-group
    // whole: such a job waits instead.
    if reserves && !super::scope::kept_whole(ssn, job) {
        // Where it reserved last time, else where most of it fits now, else the best candidate.
        let cluster = nominated_cluster(ssn, job)
            .filter(|c| candidates.contains(c))
            .or(reserve_at.map(|r| r.1))
            .or(candidates.first().copied());
        if let Some(cluster) = cluster
            && let Some(outcome) = reserve(ssn, placer, job, &groups, cluster, search)
        {
            return outcome;
        }
    }
    let pending: usize = groups.iter().map(Vec::len).sum();
    let detail = rejected
        .iter()
        .map(|r| format!("cluster {}: {}", r.cluster, r.why))
        .collect::<Vec<_>>()
        .join("; ");
    if note_gated(ssn, job) && rejected.iter().any(|r| r.why.starts_with("all ")) {
        // Everything that may be placed fits: only the gates keep the gang back.
        return Outcome::Failed;
    }
    deallocate_stranded(ssn, job, &groups, &unreachable_claims);
    let note = ssn.note(job);
    note.attempted = true;
    note.reason = Some(reasons::NOT_ENOUGH_RESOURCES);
    note.message = Some(if detail.is_empty() {
        format!("{pending}/{total_tasks} tasks in gang unschedulable: no member cluster")
    } else {
        format!("{pending}/{total_tasks} tasks in gang unschedulable: {detail}")
    });
    Outcome::Failed
}

/// For a job that could not be placed where an allocated ResourceClaim kept a pod off nodes
/// (the `clusters`): each such claim of its pending pods that may be deallocated
/// ([`stranded`](crate::framework::devices::DeviceState::stranded)) is proposed for
/// deallocation, so that it is allocated again where the pod can go (kube-scheduler's
/// DynamicResources PostFilter); the session settles the proposals as it closes.
fn deallocate_stranded(ssn: &mut Session, job: Id, groups: &[Vec<Id>], clusters: &[Id]) {
    for &cluster in clusters {
        let cluster_name = cluster_name(ssn, cluster);
        for &task in groups.iter().flatten() {
            let Some(t) = ssn.snap.tasks.get(task) else {
                continue;
            };
            let pod = format!("{}/{}", t.spec.shape.namespace, t.spec.name);
            for claim in ssn.state.devices.stranded(&ssn.snap, task, cluster) {
                let key = claim.key();
                if ssn
                    .deallocations
                    .iter()
                    .any(|(_, d)| d.cluster == cluster_name && d.claim == key)
                {
                    continue;
                }
                ssn.deallocations.push((
                    job,
                    crate::decisions::Deallocation {
                        task: pod.clone(),
                        cluster: cluster_name.clone(),
                        claim: key,
                        resource_version: claim.resource_version.clone(),
                    },
                ));
            }
        }
    }
}

/// Notes that `job` waits for pods that scheduling gates hold back, if any do; says whether.
fn note_gated(ssn: &mut Session, job: Id) -> bool {
    let (held, names) = gated(&ssn.view(), job);
    if held == 0 {
        return false;
    }
    let total = ssn.snap.jobs.get(job).map_or(0, |j| j.tasks.len());
    let note = ssn.note(job);
    note.attempted = true;
    note.reason = Some(reasons::SCHEDULING_GATED);
    note.message = Some(format!(
        "{held}/{total} pod(s) of the gang are held back by scheduling gates ({}): they are \
         placed once their gates are removed",
        names.join(", ")
    ));
    true
}

/// Keeps what fits of a job past its SLA as a reservation, and holds a node for each pod that
/// does not fit yet ([`drain`]): later jobs cannot take any of it, this session or the next.
fn reserve(
    ssn: &mut Session,
    placer: &mut Placer,
    job: Id,
    groups: &[Vec<Id>],
    cluster: Id,
    search: &SearchArgs,
) -> Option<Outcome> {
    let mut stmt = Statement::new();
    let mut errs = FitErrors::default();
    place_job_in_cluster(
        ssn,
        placer,
        &mut stmt,
        job,
        groups,
        Within::cluster(cluster),
        search,
        &mut errs,
    );
    let n = stmt.ops().len();
    let used: BTreeSet<Id> = stmt
        .ops()
        .iter()
        .filter_map(|op| match *op {
            Op::Allocate { node, .. } | Op::Pipeline { node, .. } => Some(node),
            Op::Evict { .. } => None,
        })
        .collect();
    if n > 0 {
        ssn.commit(stmt, false);
    } else {
        ssn.discard(stmt);
    }
    // Kept past this session, and grown by holding nodes as they drain, only where that
    // takes from no queue under its share.
    let keeps = may_hold(ssn, job);
    let drained = if keeps {
        drain(ssn, job, cluster, used)
    } else {
        0
    };
    if n == 0 && drained == 0 {
        return None;
    }
    let name = cluster_name(ssn, cluster);
    let note = ssn.note(job);
    note.attempted = true;
    note.keeps_room = keeps;
    note.reason = Some(reasons::RESERVING);
    note.message = Some(if drained > 0 {
        format!(
            "waited past its SLA: reserving room for {n} task(s) and holding {drained} node(s) \
             as they free up in cluster {name}, until the whole gang fits"
        )
    } else {
        format!(
            "waited past its SLA: reserving room for {n} task(s) in cluster {name} until the \
             whole gang fits"
        )
    });
    Some(Outcome::Placed)
}

/// The cluster of the nodes the job held in the last session, if any.
fn nominated_cluster(ssn: &Session, job: Id) -> Option<Id> {
    ssn.snap
        .nominated
        .iter()
        .find(|(t, _)| ssn.snap.tasks.get(**t).is_some_and(|t| t.job == job))
        .and_then(|(_, n)| ssn.snap.nodes.get(*n))
        .map(|n| n.cluster)
}

/// Places a splittable gang over several clusters in one statement, within its spread
/// constraints' group bounds. All or nothing.
fn split(
    ssn: &mut Session,
    placer: &mut Placer,
    job: Id,
    candidates: &[Id],
    search: &SearchArgs,
) -> bool {
    let constraints = ssn
        .snap
        .jobs
        .get(job)
        .and_then(|j| j.group.as_ref())
        .map(|g| g.policy.spread.clone())
        .unwrap_or_default();
    let mut used: Vec<BTreeSet<String>> = vec![BTreeSet::new(); constraints.len()];
    let mut stmt = Statement::new();
    let mut errs = FitErrors::default();
    for &cluster in candidates {
        let Some(c) = ssn.snap.clusters.get(cluster).cloned() else {
            continue;
        };
        let over = constraints.iter().zip(&used).any(|(k, groups)| {
            let key = c.group_key(k.field);
            // maxGroups 0 means no upper bound.
            k.max_groups > 0 && !groups.contains(&key) && groups.len() as u32 >= k.max_groups
        });
        if over {
            continue;
        }
        let before = stmt.ops().len();
        let groups = pending_groups(ssn, job, false);
        place_job_in_cluster(
            ssn,
            placer,
            &mut stmt,
            job,
            &groups,
            Within::cluster(cluster),
            search,
            &mut errs,
        );
        if stmt.ops().len() > before {
            for (k, groups) in constraints.iter().zip(used.iter_mut()) {
                groups.insert(c.group_key(k.field));
            }
        }
        let spread_ok = constraints
            .iter()
            .zip(&used)
            .all(|(k, groups)| groups.len() as u32 >= k.min_groups);
        if spread_ok && !stmt.is_empty() && ssn.hooks().job_ready(job) {
            finish(ssn, job, stmt, true, None);
            return true;
        }
    }
    ssn.discard(stmt);
    false
}

pub fn cluster_name(ssn: &Session, cluster: Id) -> String {
    ssn.snap
        .clusters
        .get(cluster)
        .map(|c| c.name.clone())
        .unwrap_or_default()
}

/// `candidates` grouped by their domain of fleet tier `tier`, each group in candidate order,
/// groups in the order of their best candidate; clusters in no domain of the tier are left out.
fn fleet_domains(ssn: &Session, candidates: &[Id], tier: usize) -> Vec<Vec<Id>> {
    let Some(key) = ssn.snap.hypernodes.fleet_tiers.get(tier) else {
        return Vec::new();
    };
    let mut groups: Vec<(String, Vec<Id>)> = Vec::new();
    for &c in candidates {
        let Some(domain) = ssn.snap.clusters.get(c).and_then(|c| key.of(c)) else {
            continue;
        };
        match groups.iter_mut().find(|(d, _)| *d == domain) {
            Some((_, g)) => g.push(c),
            None => groups.push((domain, vec![c])),
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

fn splittable(ssn: &Session, job: Id) -> bool {
    ssn.snap
        .jobs
        .get(job)
        .and_then(|j| j.group.as_ref())
        .is_some_and(|g| g.policy.splittable)
}

/// Clusters that may take the job, best first, and the reasons the others were ruled out. With
/// [`Room::Making`], a cluster is ruled out only by refusals that evictions cannot resolve.
pub fn candidate_clusters(ssn: &Session, job: Id, room: Room) -> (Vec<Id>, Vec<Rejected>) {
    let (ok, rejected) = eligible_clusters(ssn, job, room);
    let scores = ssn.hooks().cluster_scores(job, &ok);
    let mut ranked: Vec<(f64, Id)> = scores.into_iter().zip(ok).collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    (ranked.into_iter().map(|(_, c)| c).collect(), rejected)
}

/// Clusters that may take the job, unranked, and the reasons the others were ruled out.
pub fn eligible_clusters(ssn: &Session, job: Id, room: Room) -> (Vec<Id>, Vec<Rejected>) {
    let mut rejected = Vec::new();
    // A gang that already runs somewhere stays there unless it may be split.
    let mut homes: Vec<Id> = Vec::new();
    if let Some(j) = ssn.snap.jobs.get(job) {
        for &t in &j.tasks {
            let status = ssn.state.status(&ssn.snap, t);
            if !(status.holds_node() || status == TaskStatus::Pipelined) {
                continue;
            }
            // The node may be unknown (deleted, or not seen yet): the pod's own placement
            // still names its cluster.
            let home = match ssn
                .state
                .task_node(&ssn.snap, t)
                .and_then(|n| ssn.snap.nodes.get(n))
            {
                Some(n) => Some(n.cluster),
                None => ssn
                    .snap
                    .tasks
                    .get(t)
                    .and_then(|task| task.spec.placement.as_ref())
                    .and_then(|(c, _)| ssn.snap.cluster_id(c)),
            };
            if let Some(h) = home
                && !homes.contains(&h)
            {
                homes.push(h);
            }
        }
    }
    // One that may be split grows within the fleet domain it runs in, when held to one.
    let span = if homes.is_empty() {
        FleetSpan::Anywhere
    } else if splittable(ssn, job) {
        fleet_span(ssn, job)
    } else {
        FleetSpan::Whole
    };
    let home_domain = |tier: usize, c: &crate::model::Cluster| {
        let key = ssn.snap.hypernodes.fleet_tiers.get(tier)?;
        let mine = key.of(c)?;
        homes
            .iter()
            .filter_map(|h| ssn.snap.clusters.get(*h))
            .all(|h| key.of(h).as_ref() == Some(&mine))
            .then_some(())
    };
    let hooks = ssn.hooks();
    let mut ok = Vec::new();
    for (id, cluster) in ssn.snap.clusters.iter() {
        let away = match span {
            FleetSpan::Whole => !homes.contains(&id),
            FleetSpan::Within(tier) => !homes.contains(&id) && home_domain(tier, cluster).is_none(),
            FleetSpan::Anywhere => false,
        };
        if away {
            continue;
        }
        if !cluster.ready {
            rejected.push(Rejected {
                cluster: cluster.name.clone(),
                why: "cluster is not ready".to_string(),
            });
            continue;
        }
        if let Err(why) = hooks.cluster_filter(job, id, room) {
            rejected.push(Rejected {
                cluster: cluster.name.clone(),
                why: why.message,
            });
            continue;
        }
        ok.push(id);
    }
    (ok, rejected)
}

/// Adds the domain a gang was kept within to its note.
fn note_domain(ssn: &mut Session, job: Id, placed: &Placed) {
    if let Placed::Domain(name, tier) = placed {
        let note = ssn.note(job);
        let within = format!(" (HyperNode {name}, tier {tier})");
        if let Some(m) = note.message.as_mut() {
            m.push_str(&within);
        }
        if let Some(p) = note.placed_in.as_mut() {
            p.push_str(&within);
        }
    }
}

/// Commits or keeps the statement and records what happened.
pub fn finish(ssn: &mut Session, job: Id, stmt: Statement, ready: bool, cluster: Option<Id>) {
    // Placements only: evictions in the same statement are reported by the caller.
    let n = stmt.ops().iter().filter(|op| op.places()).count();
    let where_ = match cluster {
        Some(c) => format!("cluster {}", cluster_name(ssn, c)),
        None => "several clusters".to_string(),
    };
    ssn.commit(stmt, ready);
    let note = ssn.note(job);
    note.attempted = true;
    if ready {
        note.scheduled = true;
        note.reason = None;
        note.message = Some(format!("{n} task(s) of the gang placed in {where_}"));
        note.placed_in = Some(where_);
    } else {
        note.reason = Some(reasons::PIPELINED);
        note.message = Some(format!(
            "{n} task(s) of the gang reserved in {where_} on resources being released"
        ));
    }
}
