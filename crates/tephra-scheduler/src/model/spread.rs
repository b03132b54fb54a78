//! Pod topology spread constraints (`spec.topologySpreadConstraints`) with Kubernetes' meaning:
//! the pods a selector picks, counted per topology domain (a value of a node label), may differ
//! between the fullest domain a pod would join and the emptiest by at most `maxSkew`. Only
//! nodes the pod could use count as domains (`nodeAffinityPolicy`, `nodeTaintsPolicy`), and a
//! node without the label is no domain at all. How the counting is done in a session is in
//! `framework/spread.rs`.

use super::affinity::LabelSelector;

/// What to do when a constraint cannot be met.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WhenUnsatisfiable {
    /// A filter: no node that breaks it is used (`DoNotSchedule`).
    DoNotSchedule,
    /// A preference: nodes that keep the spread even score higher (`ScheduleAnyway`).
    ScheduleAnyway,
}

/// One topology spread constraint of a pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpreadTerm {
    /// The largest allowed difference between two domains' counts (at least 1).
    pub max_skew: u32,
    /// The node label whose values are the domains.
    pub topology_key: String,
    /// Filter or preference.
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// Which pods of the pod's namespace count, with `matchLabelKeys` already folded in (the
    /// pod's own values of those keys). `None`: no pod counts.
    pub selector: Option<LabelSelector>,
    /// With fewer eligible domains than this, the emptiest count is taken as 0 (a filter's
    /// `minDomains`; 1 when not given).
    pub min_domains: u32,
    /// `nodeAffinityPolicy: Honor` (the default): only nodes matching the pod's node selector
    /// and required node affinity are domains.
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor` (default Ignore): only nodes whose taints the pod tolerates are
    /// domains.
    pub honor_taints: bool,
}

impl SpreadTerm {
    /// Whether a pod with `labels` counts for this constraint (the caller checks the
    /// namespace).
    pub fn selects(&self, labels: &super::Labels) -> bool {
        self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }

    /// Whether it is a filter (`DoNotSchedule`).
    pub fn is_hard(&self) -> bool {
        self.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule
    }
}
