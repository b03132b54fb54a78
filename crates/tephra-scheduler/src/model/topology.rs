//! Network topology as Volcano describes it: HyperNodes (`topology.volcano.sh/v1alpha1`), each a
//! domain of one tier (tier 1 closest, e.g. the nodes under one leaf switch) whose members are
//! nodes or lower HyperNodes, and a gang's `networkTopology` (how high a tier its pods may span).
//! The cache resolves HyperNodes into node sets per cluster (`cache/topology.rs`); placement
//! keeps a gang within one domain (`placement/domains.rs`).

use super::affinity::LabelSelector;

/// What a HyperNode member is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemberKind {
    /// A node of the cluster.
    Node,
    /// A lower HyperNode.
    HyperNode,
}

/// How a member is selected: by exact name, by a regular expression on names (Go's `regexp`
/// semantics as Volcano uses them: unanchored), or by node labels (nodes only).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MemberSelector {
    /// `exactMatch.name`.
    Exact(String),
    /// `regexMatch.pattern`.
    Regex(String),
    /// `labelMatch`.
    Labels(LabelSelector),
}

/// One member entry of a HyperNode.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Member {
    /// Nodes or HyperNodes.
    pub kind: MemberKind,
    /// Which ones.
    pub selector: MemberSelector,
}

/// A HyperNode of one member cluster, as the cache is told.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HyperNodeSpec {
    /// The member cluster it describes.
    pub cluster: String,
    /// Its name (cluster-scoped, unique within the cluster).
    pub name: String,
    /// `spec.tier`: 1 is the closest.
    pub tier: u32,
    /// `spec.tierName`, if given.
    pub tier_name: Option<String>,
    /// `spec.members`.
    pub members: Vec<Member>,
}

/// `networkTopology.mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TopologyMode {
    /// The gang stays within its allowed tier, or waits.
    #[default]
    Hard,
    /// The gang goes to the lowest tier that fits, and anywhere when none does.
    Soft,
}

/// A gang's (or a sub-gang's) `networkTopology`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NetworkTopology {
    /// Hard or soft.
    pub mode: TopologyMode,
    /// `highestTierAllowed`.
    pub highest_tier: Option<u32>,
    /// `highestTierName`: a tier by its HyperNodes' `tierName`.
    pub highest_tier_name: Option<String>,
}

impl NetworkTopology {
    /// Whether the constraint binds: hard mode with a highest tier (by number or name). A hard
    /// constraint that names no tier constrains nothing, as in Volcano.
    pub fn is_hard(&self) -> bool {
        self.mode == TopologyMode::Hard
            && (self.highest_tier.is_some() || self.highest_tier_name.is_some())
    }
}

/// One `subGroupPolicy` of a PodGroup: the pods its selector matches, split into sub-groups by
/// the values of `matchLabelKeys` (Volcano's job controller uses the task label and
/// `volcano.sh/partition-id`). Each sub-group is a gang of its own within the job: `size` pods
/// placed together, within its own `networkTopology`, never part of it; the job starts once
/// `min_sub_groups` of them are whole.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SubGroupPolicy {
    /// `name`.
    pub name: String,
    /// `subGroupSize`: pods per sub-group (at least 1).
    pub size: u32,
    /// `minSubGroups`: whole sub-groups the job needs before any of it starts.
    pub min_sub_groups: u32,
    /// `labelSelector`: the pods it applies to (none: every pod of the job).
    pub selector: Option<LabelSelector>,
    /// `matchLabelKeys`.
    pub match_label_keys: Vec<String>,
    /// `networkTopology` of each sub-group.
    pub topology: Option<NetworkTopology>,
}

impl SubGroupPolicy {
    /// The sub-group a pod with `labels` belongs to under this policy: the values of
    /// `matchLabelKeys` (a missing key counts as empty), or `None` when the selector does not
    /// match it.
    pub fn sub_group_of(&self, labels: &super::Labels) -> Option<Vec<String>> {
        if self.selector.as_ref().is_some_and(|s| !s.matches(labels)) {
            return None;
        }
        Some(
            self.match_label_keys
                .iter()
                .map(|k| labels.get(k).cloned().unwrap_or_default())
                .collect(),
        )
    }
}

/// What groups member clusters into one domain of a fleet-level tier above them: Karmada's
/// `spec.region`, `spec.zone` (the first of `spec.zones`), `spec.provider`, or a cluster label.
/// The fleet's tiers are numbered above the highest cluster tier of the fleet, in the order
/// they are configured, and named by their key (`region`, or the label), so a gang may name one
/// in `highestTierName`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FleetKey {
    /// Karmada's `spec.region`.
    Region,
    /// The first of Karmada's `spec.zones`.
    Zone,
    /// Karmada's `spec.provider`.
    Provider,
    /// A cluster label.
    Label(String),
}

impl FleetKey {
    /// `region`, `zone` and `provider` name the Cluster's fields; anything else is a label.
    pub fn parse(s: &str) -> Self {
        match s {
            "region" => Self::Region,
            "zone" => Self::Zone,
            "provider" => Self::Provider,
            other => Self::Label(other.to_string()),
        }
    }

    /// The tier's name, as a gang's `highestTierName` gives it.
    pub fn name(&self) -> &str {
        match self {
            Self::Region => "region",
            Self::Zone => "zone",
            Self::Provider => "provider",
            Self::Label(l) => l,
        }
    }

    /// The domain `cluster` belongs to at this tier (`None`: none).
    pub fn of(&self, cluster: &super::Cluster) -> Option<String> {
        match self {
            Self::Region => cluster.region.clone(),
            Self::Zone => cluster.zones.first().cloned(),
            Self::Provider => cluster.provider.clone(),
            Self::Label(l) => cluster.labels.get(l).cloned(),
        }
        .filter(|v| !v.is_empty())
    }
}
