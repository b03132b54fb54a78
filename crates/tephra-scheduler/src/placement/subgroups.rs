//! Placing a job with sub-groups (`subGroupPolicy`): each sub-group is a gang within the gang,
//! placed as a unit (every pod it still needs, or none of them) within its own
//! `networkTopology`, inside the domain the job itself is kept to. Sub-groups go first, in
//! policy and key order; the job's other pods follow as one gang. Whether enough sub-groups are
//! whole for the job to start is the gang plugin's rule (`framework/subgroups.rs`); a sub-group
//! that cannot be made whole leaves nothing in the statement.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::classes::{Placer, Within};
use super::gang::place_job_in_cluster;
use super::scan::place_group;
use super::scope::{Scope, TRIES_PER_TIER, domain_free, scope_of, times};
use super::search::SearchArgs;
use crate::framework::fit::FitErrors;
use crate::framework::session::Session;
use crate::framework::statement::Statement;
use crate::framework::subgroups::{SubGroup, sub_groups};
use crate::model::{Id, TaskStatus};
use crate::resources::Resources;

/// Places the job's pending `groups` within `at`: sub-group by sub-group when its PodGroup has
/// sub-group policies, else as one gang. Returns why each sub-group that was tried could not
/// be made whole, in words a user can read.
#[allow(clippy::too_many_arguments)]
pub fn place_gang(
    ssn: &mut Session,
    placer: &mut Placer,
    stmt: &mut Statement,
    job: Id,
    groups: &[Vec<Id>],
    at: Within,
    search: &SearchArgs,
    errs: &mut FitErrors,
) -> Vec<String> {
    let subs = sub_groups(&ssn.view(), job);
    if subs.is_empty() {
        place_job_in_cluster(ssn, placer, stmt, job, groups, at, search, errs);
        return Vec::new();
    }
    let pending: BTreeSet<Id> = groups.iter().flatten().copied().collect();
    let mut in_sub: BTreeSet<Id> = BTreeSet::new();
    let mut failed = Vec::new();
    for g in &subs {
        in_sub.extend(g.tasks.iter().copied());
        let todo: Vec<Id> = g
            .tasks
            .iter()
            .copied()
            .filter(|t| {
                pending.contains(t) && ssn.state.status(&ssn.snap, *t) == TaskStatus::Pending
            })
            .collect();
        if todo.is_empty() {
            continue;
        }
        if let Err(why) = place_sub_group(ssn, placer, stmt, job, g, &todo, at, search, errs) {
            failed.push(format!("sub-group {}: {why}", g.label(&ssn.view(), job)));
        }
    }
    let rest: Vec<Vec<Id>> = groups
        .iter()
        .map(|g| g.iter().copied().filter(|t| !in_sub.contains(t)).collect())
        .filter(|g: &Vec<Id>| !g.is_empty())
        .collect();
    if !rest.is_empty() {
        place_job_in_cluster(ssn, placer, stmt, job, &rest, at, search, errs);
    }
    failed
}

/// The pods `todo` grouped by shape, in order of their first pod.
fn by_shape(ssn: &Session, todo: &[Id]) -> Vec<Vec<Id>> {
    let mut groups: Vec<Vec<Id>> = Vec::new();
    for &t in todo {
        let shape = ssn.snap.tasks.get(t).map(|t| &t.spec.shape);
        let same = groups.iter_mut().find(|g| {
            let first = ssn.snap.tasks.get(g[0]).map(|t| &t.spec.shape);
            matches!((first, shape), (Some(a), Some(b)) if Arc::ptr_eq(a, b) || a == b)
        });
        match same {
            Some(g) => g.push(t),
            None => groups.push(vec![t]),
        }
    }
    groups
}

/// Places every pending pod of sub-group `g` (`todo`) within `at`, or none of them: at least
/// as many as make it whole (its policy's size, counting the pods it already holds), all of
/// them within one domain of its tier when its `networkTopology` is hard (or, soft, when one
/// takes them).
#[allow(clippy::too_many_arguments)]
fn place_sub_group(
    ssn: &mut Session,
    placer: &mut Placer,
    stmt: &mut Statement,
    job: Id,
    g: &SubGroup,
    todo: &[Id],
    at: Within,
    search: &SearchArgs,
    errs: &mut FitErrors,
) -> Result<(), String> {
    let Some(policy) = ssn
        .snap
        .jobs
        .get(job)
        .and_then(|j| j.group.as_ref())
        .and_then(|p| p.sub_groups.get(g.policy))
        .cloned()
    else {
        return Ok(());
    };
    let status = |ssn: &Session, t: Id| ssn.state.status(&ssn.snap, t);
    let held: Vec<Id> = g
        .tasks
        .iter()
        .copied()
        .filter(|t| status(ssn, *t).is_ready_or_pipelined() || status(ssn, *t).holds_node())
        .collect();
    let need = (policy.size as usize).saturating_sub(held.len());
    if todo.len() < need {
        return Err(format!(
            "{} pod(s) pending, {need} more needed to make it whole",
            todo.len()
        ));
    }
    let groups = by_shape(ssn, todo);
    let keep = stmt.ops().len();
    let mut try_at = |ssn: &mut Session, stmt: &mut Statement, at: Within, errs: &mut FitErrors| {
        for grp in &groups {
            place_group(ssn, placer, stmt, grp, grp.len(), at, search, errs);
        }
        if stmt.ops().len() - keep >= need.max(1) {
            true
        } else {
            ssn.roll_back(stmt, keep);
            false
        }
    };
    let cluster = at.cluster;
    let (topology, up_to, or_anywhere) = match scope_of(ssn, policy.topology.as_ref(), cluster) {
        Scope::Anywhere => {
            return if try_at(ssn, stmt, at, errs) {
                Ok(())
            } else {
                Err(format!(
                    "{need} pod(s) do not fit ({})",
                    errs.render(&ssn.snap.names)
                ))
            };
        }
        Scope::Nowhere(why) => return Err(why),
        Scope::Domains {
            topology,
            up_to,
            or_anywhere,
        } => (topology, up_to, or_anywhere),
    };
    // Domains of the allowed tiers inside the job's own domain (if it is kept to one) that
    // hold the nodes the sub-group already runs on, tightest first within a tier.
    let outer: Option<&[Id]> = at
        .domain
        .and_then(|d| topology.domains.get(d))
        .map(|d| d.nodes.as_slice());
    let held_nodes: BTreeSet<Id> = held
        .iter()
        .filter_map(|t| ssn.state.task_node(&ssn.snap, *t))
        .collect();
    let mut request = Resources::ZERO;
    for &t in todo {
        if let Some(task) = ssn.snap.tasks.get(t) {
            request.add(&task.spec.shape.request);
        }
    }
    let mut candidates: Vec<(u32, f64, f64, usize)> = topology
        .domains
        .iter()
        .enumerate()
        .filter(|(_, d)| d.tier <= up_to)
        .filter(|(_, d)| held_nodes.iter().all(|n| d.nodes.binary_search(n).is_ok()))
        .filter(|(_, d)| outer.is_none_or(|o| d.nodes.iter().all(|n| o.binary_search(n).is_ok())))
        .filter_map(|(i, d)| {
            let free = domain_free(ssn, cluster, i, &d.nodes);
            request.fits_in(&free).is_ok().then(|| {
                // The plugins' domain order first (fullest first), then tightest first.
                let score = ssn
                    .hooks()
                    .domain_score(cluster, i, &request)
                    .unwrap_or(0.0);
                (d.tier, -score, times(&request, &free), i)
            })
        })
        .collect();
    candidates.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then(a.1.total_cmp(&b.1))
            .then(a.2.total_cmp(&b.2))
            .then(a.3.cmp(&b.3))
    });
    let mut tried_in_tier = (0u32, 0usize);
    for (tier, _, _, i) in candidates {
        if tried_in_tier.0 != tier {
            tried_in_tier = (tier, 0);
        }
        if tried_in_tier.1 >= TRIES_PER_TIER {
            continue;
        }
        tried_in_tier.1 += 1;
        let mut local = FitErrors::default();
        let within = Within {
            cluster,
            domain: Some(i),
        };
        if try_at(ssn, stmt, within, &mut local) {
            return Ok(());
        }
    }
    if or_anywhere && try_at(ssn, stmt, at, errs) {
        return Ok(());
    }
    Err(format!(
        "networkTopology: no HyperNode of tier {up_to} or below{} takes its {} pending pod(s)",
        if outer.is_some() {
            " within the job's own"
        } else {
            ""
        },
        todo.len()
    ))
}
