//! Network-topology-aware placement within one cluster: a gang whose `networkTopology` is hard
//! stays within one HyperNode of its allowed tier or below, or waits; a soft one goes to the
//! lowest tier that fits and anywhere in the cluster when none does (the rule is
//! `scope.rs`).
//!
//! Domains are tried lowest tier first and, within a tier, tightest first (the one whose free
//! room holds the gang the fewest times), so that whole racks stay free for later large gangs:
//! bin-packing at the HyperNode level. Each try simulates the whole gang on the domain's nodes
//! with the same node-aware rule that places a gang in a cluster.

use std::collections::BTreeSet;

use super::classes::{Placer, Within};
use super::gang::job_needs;
use super::scope::{Scope, TRIES_PER_TIER, domain_free, room, scope, times};
use super::search::SearchArgs;
use super::subgroups::place_gang;
use crate::cache::topology::Topology;
use crate::framework::fit::FitErrors;
use crate::framework::session::Session;
use crate::framework::statement::Statement;
use crate::model::Id;
use crate::resources::{Resources, format_quantity};

/// What became of a placement within a cluster's topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placed {
    /// Placed (or tried) over the whole cluster; `errs` says what did not fit.
    Cluster,
    /// The whole gang fits within this domain (its name and tier).
    Domain(String, u32),
    /// No allowed domain takes the gang: why, in words a user can read.
    Refused(String),
}

/// Node slots the job holds (or has pipelined onto) in `cluster`: a domain must contain them all.
fn held_nodes(ssn: &Session, job: Id, cluster: Id) -> BTreeSet<Id> {
    let mut held = BTreeSet::new();
    for &t in ssn
        .snap
        .jobs
        .get(job)
        .map(|j| j.tasks.as_slice())
        .unwrap_or_default()
    {
        let status = ssn.state.status(&ssn.snap, t);
        if !(status.holds_node() || status == crate::model::TaskStatus::Pipelined) {
            continue;
        }
        if let Some(n) = ssn.state.task_node(&ssn.snap, t)
            && ssn.snap.nodes.get(n).is_some_and(|n| n.cluster == cluster)
        {
            held.insert(n);
        }
    }
    held
}

/// Places the job's `groups` in `cluster` into `stmt` as its `networkTopology` allows (see the
/// module's rule). On [`Placed::Refused`] nothing of the gang is left in `stmt`.
#[allow(clippy::too_many_arguments)]
pub fn place_within(
    ssn: &mut Session,
    placer: &mut Placer,
    stmt: &mut Statement,
    job: Id,
    groups: &[Vec<Id>],
    cluster: Id,
    search: &SearchArgs,
    errs: &mut FitErrors,
) -> Placed {
    match scope(ssn, job, cluster) {
        Scope::Anywhere => {}
        Scope::Nowhere(why) => return Placed::Refused(why),
        Scope::Domains {
            topology,
            up_to,
            or_anywhere,
        } => {
            let at = (cluster, &*topology, up_to);
            match within_domains(ssn, placer, stmt, job, groups, at, search) {
                Ok((name, tier)) => return Placed::Domain(name, tier),
                Err(why) if !or_anywhere => return Placed::Refused(why),
                // Soft: anywhere in the cluster.
                Err(_) => {}
            }
        }
    }
    let at = Within::cluster(cluster);
    let keep = stmt.ops().len();
    let failed = place_gang(ssn, placer, stmt, job, groups, at, search, errs);
    let hooks = ssn.hooks();
    if !failed.is_empty() && !hooks.job_ready(job) && !hooks.job_pipelined(job) {
        // Sub-groups that could not be made whole are why the job cannot start here.
        ssn.roll_back(stmt, keep);
        return Placed::Refused(failed.join("; "));
    }
    Placed::Cluster
}

/// Places the whole gang within the first domain of tier `up_to` or below that takes it, lowest
/// tier and tightest domain first; the domain, or why none took it. Nothing is left in `stmt`
/// when none did.
fn within_domains(
    ssn: &mut Session,
    placer: &mut Placer,
    stmt: &mut Statement,
    job: Id,
    groups: &[Vec<Id>],
    (cluster, topology, up_to): (Id, &Topology, u32),
    search: &SearchArgs,
) -> Result<(String, u32), String> {
    let (need, one_node) = job_needs(&ssn.view(), job);
    let held = held_nodes(ssn, job, cluster);
    let keep = stmt.ops().len();
    // The best try, for the message: (pods placed, domain, why the rest did not fit).
    let mut best: Option<(usize, usize, String)> = None;
    // The domain closest to holding the gang, when none has room on aggregate.
    let mut roomiest: Option<(f64, usize, Resources)> = None;
    let mut tiers: Vec<u32> = topology
        .domains
        .iter()
        .map(|d| d.tier)
        .filter(|t| *t <= up_to)
        .collect();
    tiers.dedup();
    for tier in tiers {
        let mut fitting: Vec<(f64, usize)> = Vec::new();
        for (i, d) in topology.domains.iter().enumerate() {
            if d.tier != tier || !held.iter().all(|n| d.nodes.binary_search(n).is_ok()) {
                continue;
            }
            let free = domain_free(ssn, cluster, i, &d.nodes);
            let t = times(&need, &free);
            if need.fits_in(&free).is_ok() {
                fitting.push((t, i));
            } else if roomiest.as_ref().is_none_or(|r| t > r.0) {
                roomiest = Some((t, i, free));
            }
        }
        // The plugins' domain order (network-topology-aware: fullest first) when one scores
        // domains, else tightest first; then by position.
        let hooks = ssn.hooks();
        let mut keyed: Vec<(f64, f64, usize)> = fitting
            .iter()
            .map(|&(t, i)| {
                let score = hooks.domain_score(cluster, i, &need).unwrap_or(0.0);
                (-score, t, i)
            })
            .collect();
        keyed.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(a.1.total_cmp(&b.1))
                .then(a.2.cmp(&b.2))
        });
        let fitting: Vec<(f64, usize)> = keyed.into_iter().map(|(_, t, i)| (t, i)).collect();
        for &(_, i) in fitting.iter().take(TRIES_PER_TIER) {
            let mut local = FitErrors::default();
            let at = Within {
                cluster,
                domain: Some(i),
            };
            place_gang(ssn, placer, stmt, job, groups, at, search, &mut local);
            let hooks = ssn.hooks();
            if stmt.ops().len() > keep && (hooks.job_ready(job) || hooks.job_pipelined(job)) {
                let d = &topology.domains[i];
                return Ok((d.name.clone(), d.tier));
            }
            let placed = stmt.ops().len() - keep;
            if best.as_ref().is_none_or(|b| placed > b.0) {
                best = Some((placed, i, local.render(&ssn.snap.names)));
            }
            ssn.roll_back(stmt, keep);
        }
    }
    let pending: usize = groups.iter().map(Vec::len).sum();
    let why = match (best, roomiest) {
        (Some((placed, i, rest)), _) => format!(
            "networkTopology: no HyperNode of tier {up_to} or below fits the gang's {pending} \
             pending pod(s); best: {} with {placed} ({rest})",
            topology.domains[i].name
        ),
        (None, Some((_, i, free))) => {
            let most = room(ssn, &topology.domains[i].nodes).1;
            let names = &ssn.snap.names;
            let domain = &topology.domains[i].name;
            match need.fits_in(&free) {
                Err(r) => format!(
                    "networkTopology: no HyperNode of tier {up_to} or below has {} {} free for \
                     the gang; best: {domain} with {}",
                    format_quantity(r, need.get(r)),
                    names.name(r),
                    format_quantity(r, free.get(r).max(0)),
                ),
                Ok(()) => {
                    let r = one_node.fits_in(&most).err().unwrap_or(0);
                    format!(
                        "networkTopology: no HyperNode of tier {up_to} or below has a node with \
                         {} {} free; best: {domain}, whose roomiest node has {}",
                        format_quantity(r, one_node.get(r)),
                        names.name(r),
                        format_quantity(r, most.get(r).max(0)),
                    )
                }
            }
        }
        (None, None) => format!(
            "networkTopology: no HyperNode of tier {up_to} or below holds the nodes the gang \
             already runs on"
        ),
    };
    Err(why)
}
