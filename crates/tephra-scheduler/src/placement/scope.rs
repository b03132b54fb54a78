//! Where a gang's `networkTopology` lets it go in one cluster ([`Scope`]), and what a
//! network-topology domain has free: the rule both whole gangs (`domains.rs`) and sub-groups
//! (`subgroups.rs`) are placed by. The cluster is the tier above its highest HyperNode (as
//! Volcano's virtual cluster-top HyperNode), so a gang allowed that high may go anywhere in it,
//! and a cluster with no HyperNodes is one domain of tier 1.

use std::sync::Arc;

use crate::cache::topology::Topology;
use crate::framework::session::Session;
use crate::model::Id;
use crate::model::topology::{NetworkTopology, TopologyMode};
use crate::resources::{MAX_RESOURCES, Resources};

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

/// Whether a job's placement must be kept whole by rule: a hard `networkTopology`, or
/// sub-groups (each placed as a unit). Such a job neither splits across clusters nor reserves
/// room node by node.
pub fn kept_whole(ssn: &Session, job: Id) -> bool {
    hard(ssn, job)
        || ssn
            .snap
            .jobs
            .get(job)
            .and_then(|j| j.group.as_ref())
            .is_some_and(|g| !g.sub_groups.is_empty())
}

/// How far a job may be split across clusters, by its `networkTopology` and the fleet's tiers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FleetSpan {
    /// Not at all: it goes to one cluster whole.
    Whole,
    /// Over clusters of one domain of this fleet tier (an index into the fleet's tiers).
    Within(usize),
    /// Over any clusters (as its policy allows).
    Anywhere,
}

/// The highest cluster tier of the fleet: each cluster's is the tier above its highest
/// HyperNode (1 without any).
pub fn fleet_cluster_tier(ssn: &Session) -> u32 {
    ssn.state
        .topologies
        .iter()
        .map(|t| t.as_ref().map_or(1, |t| t.top_tier() + 1))
        .max()
        .unwrap_or(1)
}

/// How far `job` may be split across clusters. A job with sub-groups, or held hard to a tier no
/// higher than the clusters', goes whole to one cluster; held hard to a fleet tier, over
/// clusters of one domain of that tier; otherwise anywhere. Without fleet tiers a hard job is
/// never split.
pub fn fleet_span(ssn: &Session, job: Id) -> FleetSpan {
    let Some(g) = ssn.snap.jobs.get(job).and_then(|j| j.group.as_ref()) else {
        return FleetSpan::Anywhere;
    };
    if !g.sub_groups.is_empty() {
        return FleetSpan::Whole;
    }
    let Some(t) = g.topology.as_ref().filter(|t| t.is_hard()) else {
        return FleetSpan::Anywhere;
    };
    let tiers = &ssn.snap.hypernodes.fleet_tiers;
    let by_name = t
        .highest_tier_name
        .as_ref()
        .map(|n| tiers.iter().position(|k| k.name() == n));
    let reach = match (by_name, t.highest_tier) {
        // Named: a fleet tier, or one of the clusters' own.
        (Some(Some(i)), _) => i + 1,
        (Some(None), _) => 0,
        (None, Some(up_to)) => {
            let above = up_to.saturating_sub(fleet_cluster_tier(ssn)) as usize;
            if above > tiers.len() && !tiers.is_empty() {
                return FleetSpan::Anywhere;
            }
            above.min(tiers.len())
        }
        (None, None) => return FleetSpan::Anywhere,
    };
    match reach {
        0 => FleetSpan::Whole,
        k => FleetSpan::Within(k - 1),
    }
}

/// Where the job may go in `cluster`.
pub fn scope(ssn: &Session, job: Id, cluster: Id) -> Scope {
    scope_of(ssn, job_topology(ssn, job), cluster)
}

/// Where a gang (or a sub-group) with this `networkTopology` may go in `cluster`.
pub fn scope_of(ssn: &Session, t: Option<&NetworkTopology>, cluster: Id) -> Scope {
    let Some(t) = t else {
        return Scope::Anywhere;
    };
    let name = ssn
        .snap
        .clusters
        .get(cluster)
        .map(|c| c.name.clone())
        .unwrap_or_default();
    if !ssn.snap.hypernodes.known_in(&name) {
        return Scope::Nowhere(format!(
            "networkTopology: the HyperNodes of cluster {name} are not listed yet"
        ));
    }
    let topology = ssn
        .state
        .topologies
        .get(cluster as usize)
        .cloned()
        .flatten()
        .unwrap_or_default();
    let cluster_tier = topology.top_tier() + 1;
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
                // A fleet tier is above every cluster: anywhere in this one.
                (Some(n), _)
                    if ssn
                        .snap
                        .hypernodes
                        .fleet_tiers
                        .iter()
                        .any(|k| k.name() == n) =>
                {
                    return Scope::Anywhere;
                }
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

/// A domain's free room (what is free once releasing pods are gone) and the most on one node.
pub fn room(ssn: &Session, nodes: &[Id]) -> (Resources, Resources) {
    let mut total = Resources::ZERO;
    let mut most = Resources::ZERO;
    for &n in nodes {
        let free = ssn.state.nodes[n as usize].future_idle();
        total.add(&free);
        most = most.max(&free);
    }
    (total, most)
}

/// What domain `i` of `cluster` (with `nodes`) has free once releasing pods are gone. The
/// session keeps each domain's free total; a domain without one (its topology changed under
/// the session) is summed here.
pub fn domain_free(ssn: &Session, cluster: Id, i: usize, nodes: &[Id]) -> Resources {
    ssn.state
        .domain_future_idle
        .get(cluster as usize)
        .and_then(|s| s.get(i))
        .copied()
        .unwrap_or_else(|| room(ssn, nodes).0)
}

/// How many times `free` holds `need`, on the resource that holds it the fewest times.
pub fn times(need: &Resources, free: &Resources) -> f64 {
    (0..MAX_RESOURCES)
        .filter(|&r| need.get(r) > 0)
        .map(|r| free.get(r).max(0) as f64 / need.get(r) as f64)
        .fold(f64::INFINITY, f64::min)
}
