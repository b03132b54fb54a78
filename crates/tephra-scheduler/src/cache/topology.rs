//! A cluster's HyperNodes resolved into domains: for each HyperNode, the node slots under it
//! (its node members and, through its HyperNode members of lower tiers, theirs). Resolved on first use after a
//! HyperNode, or a node's name set or labels, changed in the cluster, and kept until the next
//! such change: a session reads domains, it never walks members.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use crate::hash::HashMap;
use crate::model::topology::{HyperNodeSpec, MemberKind, MemberSelector};
use crate::model::{Id, Node};

use super::slab::Slab;

/// One HyperNode of a cluster, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Domain {
    /// The HyperNode's name.
    pub name: String,
    /// Its tier (1 is the closest).
    pub tier: u32,
    /// The node slots under it, sorted.
    pub nodes: Vec<Id>,
}

/// The domains of one cluster, lowest tier first (by name within a tier).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// Every HyperNode, resolved.
    pub domains: Vec<Domain>,
    /// Tiers by their `tierName`.
    pub tier_names: BTreeMap<String, u32>,
    /// What was wrong with the HyperNodes as written (a bad pattern, a member that is not below its parent): one line
    /// each, for the runtime to report.
    pub problems: Vec<String>,
    /// The domains (indices) each node slot is in.
    pub node_domains: HashMap<Id, Vec<u32>>,
}

impl Topology {
    /// The highest tier of any domain (0 when the cluster has none). The cluster itself is the
    /// tier above.
    pub fn top_tier(&self) -> u32 {
        self.domains.iter().map(|d| d.tier).max().unwrap_or(0)
    }

    /// The tier a `highestTierName` names, if any HyperNode has that `tierName`.
    pub fn tier_named(&self, name: &str) -> Option<u32> {
        self.tier_names.get(name).copied()
    }
}

fn matches_name(
    selector: &MemberSelector,
    name: &str,
    patterns: &HashMap<String, regex::Regex>,
) -> bool {
    match selector {
        MemberSelector::Exact(n) => n == name,
        MemberSelector::Regex(p) => patterns.get(p).is_some_and(|r| r.is_match(name)),
        MemberSelector::Labels(_) => false,
    }
}

/// Resolves a cluster's HyperNodes against its nodes, with the domains node labels make when
/// HyperNodes are discovered from labels (`labels[k]` makes tier `k + 1`: one domain
/// `<key>=<value>` per value).
pub fn resolve(
    hypernodes: &BTreeMap<String, Arc<HyperNodeSpec>>,
    labels: &[String],
    cluster_nodes: &[Id],
    nodes: &Slab<Node>,
) -> Topology {
    let mut problems = Vec::new();
    let mut patterns: HashMap<String, regex::Regex> = HashMap::default();
    for h in hypernodes.values() {
        for m in &h.members {
            if let MemberSelector::Regex(p) = &m.selector
                && !patterns.contains_key(p)
            {
                match regex::Regex::new(p) {
                    Ok(r) => {
                        patterns.insert(p.clone(), r);
                    }
                    Err(e) => problems.push(format!(
                        "HyperNode {}: regexMatch.pattern {p:?} is not a valid pattern ({e}); \
                         it selects nothing",
                        h.name
                    )),
                }
            }
        }
    }
    let by_name: HashMap<&str, Id> = cluster_nodes
        .iter()
        .filter_map(|&n| nodes.get(n).map(|node| (node.spec.name.as_str(), n)))
        .collect();
    // Each HyperNode's own node members, and its HyperNode children.
    let mut direct: BTreeMap<&str, BTreeSet<Id>> = BTreeMap::new();
    let mut children: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, h) in hypernodes {
        let own = direct.entry(name.as_str()).or_default();
        let kids = children.entry(name.as_str()).or_default();
        for m in &h.members {
            match (m.kind, &m.selector) {
                (MemberKind::Node, MemberSelector::Exact(n)) => {
                    own.extend(by_name.get(n.as_str()));
                }
                (MemberKind::Node, MemberSelector::Labels(sel)) => {
                    own.extend(cluster_nodes.iter().copied().filter(|&n| {
                        nodes
                            .get(n)
                            .is_some_and(|node| sel.matches(&node.spec.labels))
                    }));
                }
                (MemberKind::Node, s) => {
                    own.extend(
                        by_name
                            .iter()
                            .filter(|(n, _)| matches_name(s, n, &patterns))
                            .map(|(_, id)| *id),
                    );
                }
                (MemberKind::HyperNode, s) => {
                    // A member HyperNode sits below its parent: one of the same or a higher
                    // tier is no member (and so the members can never form a cycle).
                    for (k, kid) in hypernodes {
                        if k == name || !matches_name(s, k, &patterns) {
                            continue;
                        }
                        if kid.tier < h.tier {
                            kids.push(k.as_str());
                        } else if matches!(s, MemberSelector::Exact(_)) {
                            problems.push(format!(
                                "HyperNode {name} (tier {}): member {k} is of tier {}, not \
                                 below it; it is ignored",
                                h.tier, kid.tier
                            ));
                        }
                    }
                }
            }
        }
    }
    let mut domains = Vec::with_capacity(hypernodes.len());
    let mut tier_names = BTreeMap::new();
    for (name, h) in hypernodes {
        let mut all: BTreeSet<Id> = BTreeSet::new();
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut stack: Vec<&str> = vec![name.as_str()];
        while let Some(at) = stack.pop() {
            if !seen.insert(at) {
                continue;
            }
            all.extend(direct.get(at).into_iter().flatten());
            stack.extend(children.get(at).into_iter().flatten());
        }
        if let Some(t) = &h.tier_name {
            tier_names.entry(t.clone()).or_insert(h.tier);
        }
        domains.push(Domain {
            name: name.clone(),
            tier: h.tier,
            nodes: all.into_iter().collect(),
        });
    }
    for (k, key) in labels.iter().enumerate() {
        let mut by_value: BTreeMap<&str, Vec<Id>> = BTreeMap::new();
        for &n in cluster_nodes {
            if let Some(v) = nodes.get(n).and_then(|node| node.spec.labels.get(key)) {
                by_value.entry(v.as_str()).or_default().push(n);
            }
        }
        for (value, mut members) in by_value {
            members.sort_unstable();
            domains.push(Domain {
                name: format!("{key}={value}"),
                tier: k as u32 + 1,
                nodes: members,
            });
        }
    }
    domains.sort_by(|a, b| a.tier.cmp(&b.tier).then_with(|| a.name.cmp(&b.name)));
    problems.sort();
    problems.dedup();
    let mut node_domains: HashMap<Id, Vec<u32>> = HashMap::default();
    for (i, d) in domains.iter().enumerate() {
        for &n in &d.nodes {
            node_domains.entry(n).or_default().push(i as u32);
        }
    }
    Topology {
        domains,
        tier_names,
        problems,
        node_domains,
    }
}

/// The HyperNodes of every cluster, and each cluster's resolution, computed on first use after a
/// change.
#[derive(Clone, Debug, Default)]
pub struct Topologies {
    /// HyperNodes by cluster, then by name.
    pub specs: BTreeMap<String, BTreeMap<String, Arc<HyperNodeSpec>>>,
    /// Node label keys that make HyperNodes, lowest tier first (label discovery).
    pub labels: Vec<String>,
    /// The fleet's tiers above its clusters, lowest first (`Cache::set_fleet_tiers`).
    pub fleet_tiers: Vec<crate::model::topology::FleetKey>,
    /// When sessions run before HyperNodes are listed ([`Topologies::defer`]): the clusters
    /// whose HyperNodes have been listed. `None`: every cluster's are known.
    pub listed: Option<BTreeSet<String>>,
    resolved: BTreeMap<String, OnceLock<Arc<Topology>>>,
}

impl Topologies {
    /// From now on a cluster's HyperNodes are unknown until [`Topologies::listed_in`] says
    /// they are listed there: a gang with a `networkTopology` waits in it until then, rather
    /// than being placed as if the cluster had no HyperNodes.
    pub fn defer(&mut self) {
        self.listed.get_or_insert_with(BTreeSet::new);
    }

    /// The HyperNodes of `cluster` have been listed; says whether that is news.
    pub fn listed_in(&mut self, cluster: &str) -> bool {
        self.listed
            .as_mut()
            .is_some_and(|l| l.insert(cluster.to_string()))
    }

    /// Whether the HyperNodes of `cluster` are known (listed, or never deferred).
    pub fn known_in(&self, cluster: &str) -> bool {
        self.listed.as_ref().is_none_or(|l| l.contains(cluster))
    }

    /// A HyperNode appeared or changed; says whether anything changed.
    pub fn upsert(&mut self, spec: HyperNodeSpec) -> bool {
        let cluster = spec.cluster.clone();
        let of = self.specs.entry(cluster.clone()).or_default();
        if of.get(&spec.name).is_some_and(|old| **old == spec) {
            return false;
        }
        of.insert(spec.name.clone(), Arc::new(spec));
        self.stale(&cluster);
        true
    }

    /// A HyperNode was removed; says whether it was known.
    pub fn delete(&mut self, cluster: &str, name: &str) -> bool {
        let Some(of) = self.specs.get_mut(cluster) else {
            return false;
        };
        if of.remove(name).is_none() {
            return false;
        }
        if of.is_empty() {
            self.specs.remove(cluster);
            if self.labels.is_empty() {
                self.resolved.remove(cluster);
                return true;
            }
        }
        self.stale(cluster);
        true
    }

    /// Discovers HyperNodes from these node label keys too (lowest tier first), in `clusters`
    /// and every cluster whose nodes change from now on.
    pub fn discover_from<'a>(
        &mut self,
        labels: Vec<String>,
        clusters: impl Iterator<Item = &'a str>,
    ) {
        self.labels = labels;
        for c in clusters {
            self.resolved.insert(c.to_string(), OnceLock::new());
        }
    }

    /// A cluster was removed, with its HyperNodes.
    pub fn drop_cluster(&mut self, cluster: &str) {
        self.specs.remove(cluster);
        self.resolved.remove(cluster);
    }

    /// A node of `cluster` appeared, went, or changed its labels: resolve again on next use.
    pub fn stale(&mut self, cluster: &str) {
        if self.specs.contains_key(cluster) || !self.labels.is_empty() {
            self.resolved.insert(cluster.to_string(), OnceLock::new());
        }
    }

    /// The resolved domains of a cluster (`None` when it has no HyperNodes).
    pub fn of(
        &self,
        cluster: &str,
        cluster_nodes: &[Id],
        nodes: &Slab<Node>,
    ) -> Option<Arc<Topology>> {
        static NONE: BTreeMap<String, Arc<HyperNodeSpec>> = BTreeMap::new();
        let specs = self.specs.get(cluster).unwrap_or(&NONE);
        let cell = self.resolved.get(cluster)?;
        let t = cell.get_or_init(|| Arc::new(resolve(specs, &self.labels, cluster_nodes, nodes)));
        // A cluster none of whose nodes carry a discovery label has no topology.
        (!t.domains.is_empty() || !specs.is_empty()).then(|| Arc::clone(t))
    }
}
