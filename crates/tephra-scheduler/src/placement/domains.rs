//! Network-topology-aware placement within one cluster: a gang whose `networkTopology` is hard
//! stays within one HyperNode of its allowed tier or below, or waits; a soft one goes to the
//! lowest tier that fits and anywhere in the cluster when none does. The cluster is the tier
//! above its highest HyperNode (as Volcano's virtual cluster-top HyperNode), so a gang allowed
//! that high may go anywhere in it, and a cluster with no HyperNodes is one domain of tier 1.
//!
//! Domains are tried lowest tier first and, within a tier, tightest first (the one whose free
//! room holds the gang the fewest times), so that whole racks stay free for later large gangs:
//! bin-packing at the HyperNode level. Each try simulates the whole gang on the domain's nodes
//! with the same node-aware rule that places a gang in a cluster.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::classes::{Placer, Within};
use super::gang::{job_needs, place_job_in_cluster};
use super::search::SearchArgs;
use crate::cache::topology::Topology;
use crate::framework::fit::FitErrors;
use crate::framework::session::Session;
use crate::framework::statement::Statement;
use crate::model::Id;
use crate::model::topology::{NetworkTopology, TopologyMode};
use crate::resources::{MAX_RESOURCES, Resources, format_quantity};

/// Domains of one tier simulated per gang before the next tier (or giving up).
pub const TRIES_PER_TIER: usize = 16;

/// Where a gang's `networkTopology` lets it go in one cluster.
#[derive(Clone, Debug)]
pub enum Scope {
    /// Anywhere in the cluster (no constraint, or one at or above the cluster's tier).
    Anywhere,
    /// Within one domain of tier `up_to` or below, and then, when `or_anywhere`, anywhere.
    Domains {
        /// The cluster's domains.
        topology: Arc<Topology>,
        /// The highest tier a domain may have.
        up_to: u32,
        /// Soft mode: fall back to the whole cluster.
        or_anywhere: bool,
    },
    /// Not in this cluster, and why.
    Nowhere(String),
}

/// The `networkTopology` of a job's PodGroup, if any.
pub fn job_topology(ssn: &Session, job: Id) -> Option<&NetworkTopology> {
    ssn.snap
        .jobs
        .get(job)
        .and_then(|j| j.group.as_ref())
        .and_then(|g| g.topology.as_ref())
}

/// Whether a job must stay within a tier below the cluster's (so it never splits across
/// clusters).
pub fn hard(ssn: &Session, job: Id) -> bool {
    job_topology(ssn, job).is_some_and(NetworkTopology::is_hard)
}

/// Where the job may go in `cluster`.
pub fn scope(ssn: &Session, job: Id, cluster: Id) -> Scope {
    let Some(t) = job_topology(ssn, job) else {
        return Scope::Anywhere;
    };
    let topology = ssn
        .state
        .topologies
        .get(cluster as usize)
        .cloned()
        .flatten()
        .unwrap_or_default();
    let cluster_tier = topology.top_tier() + 1;
    let name = ssn
        .snap
        .clusters
        .get(cluster)
        .map(|c| c.name.clone())
        .unwrap_or_default();
    match t.mode {
        TopologyMode::Soft => {
            if topology.domains.is_empty() {
                Scope::Anywhere
            } else {
                Scope::Domains {
                    up_to: topology.top_tier(),
                    topology,
                    or_anywhere: true,
                }
            }
        }
        TopologyMode::Hard => {
            let up_to = match (&t.highest_tier_name, t.highest_tier) {
                (Some(n), _) => match topology.tier_named(n) {
                    Some(tier) => tier,
                    None => {
                        return Scope::Nowhere(format!(
                            "networkTopology: no HyperNode in cluster {name} has tierName {n}"
                        ));
                    }
                },
                (None, Some(tier)) => tier,
                // Hard without a tier constrains nothing, as in Volcano.
                (None, None) => return Scope::Anywhere,
            };
            if up_to >= cluster_tier {
                return Scope::Anywhere;
            }
            if !topology.domains.iter().any(|d| d.tier <= up_to) {
                return Scope::Nowhere(format!(
                    "networkTopology: cluster {name} has no HyperNode of tier {up_to} or below"
                ));
            }
            Scope::Domains {
                topology,
                up_to,
                or_anywhere: false,
            }
        }
    }
}

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

/// A domain's free room (what is free once releasing pods are gone) and the most on one node.
fn room(ssn: &Session, nodes: &[Id]) -> (Resources, Resources) {
    let mut total = Resources::ZERO;
    let mut most = Resources::ZERO;
    for &n in nodes {
        let free = ssn.state.nodes[n as usize].future_idle();
        total.add(&free);
        most = most.max(&free);
    }
    (total, most)
}

/// How many times `free` holds `need`, on the resource that holds it the fewest times.
fn times(need: &Resources, free: &Resources) -> f64 {
    (0..MAX_RESOURCES)
        .filter(|&r| need.get(r) > 0)
        .map(|r| free.get(r).max(0) as f64 / need.get(r) as f64)
        .fold(f64::INFINITY, f64::min)
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
    place_job_in_cluster(ssn, placer, stmt, job, groups, at, search, errs);
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
            // The session keeps each domain's free total; a domain without one (its topology
            // changed under the session) is summed here.
            let free = ssn
                .state
                .domain_future_idle
                .get(cluster as usize)
                .and_then(|s| s.get(i))
                .copied()
                .unwrap_or_else(|| room(ssn, &d.nodes).0);
            let t = times(&need, &free);
            if need.fits_in(&free).is_ok() {
                fitting.push((t, i));
            } else if roomiest.as_ref().is_none_or(|r| t > r.0) {
                roomiest = Some((t, i, free));
            }
        }
        fitting.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for &(_, i) in fitting.iter().take(TRIES_PER_TIER) {
            let mut local = FitErrors::default();
            let at = Within {
                cluster,
                domain: Some(i),
            };
            place_job_in_cluster(ssn, placer, stmt, job, groups, at, search, &mut local);
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
