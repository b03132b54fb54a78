//! Label selectors and inter-pod affinity terms, with Kubernetes' meaning: which pods a term
//! selects (by label selector and namespaces) in which topology domain, and weights for
//! preferences. A pod's terms are gathered with the rest of its rules in `rules.rs`.

use super::selectors::{Labels, Requirement};

/// A label selector: `matchLabels` and `matchExpressions`, all of which must match. An empty
/// selector matches every pod.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    /// Exact labels.
    pub match_labels: Labels,
    /// Requirements (In, NotIn, Exists, DoesNotExist).
    pub expressions: Vec<Requirement>,
}

impl LabelSelector {
    /// Whether `labels` match.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.expressions.iter().all(|r| r.matches(labels))
    }
}

/// Which namespaces a pod-affinity term looks at.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Namespaces {
    /// The pod's own namespace (neither `namespaces` nor `namespaceSelector` given).
    #[default]
    Own,
    /// The listed namespaces.
    Listed(Vec<String>),
    /// Every namespace (an empty `namespaceSelector`; a non-empty one is taken as every
    /// namespace too, since namespace labels are not part of the scheduler's model).
    All,
}

/// One inter-pod (anti-)affinity term: pods selected by `selector` in `namespaces`, on nodes in
/// the same topology domain (same value of the `topology_key` node label) as the node judged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PodTerm {
    /// Which pods; `None` (no selector given) selects none.
    pub selector: Option<LabelSelector>,
    /// The node label whose value defines a topology domain.
    pub topology_key: String,
    /// Where the selected pods may be.
    pub namespaces: Namespaces,
}

impl PodTerm {
    /// Whether a pod with `labels` in `namespace` is selected by this term of a pod in
    /// `own_namespace`.
    pub fn selects(&self, own_namespace: &str, namespace: &str, labels: &Labels) -> bool {
        let in_scope = match &self.namespaces {
            Namespaces::Own => namespace == own_namespace,
            Namespaces::Listed(list) => list.iter().any(|n| n == namespace),
            Namespaces::All => true,
        };
        in_scope && self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }
}

/// A term with a weight (1–100), for preferences.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Weighted<T> {
    /// Weight.
    pub weight: i32,
    /// The term.
    pub term: T,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SelectorOp;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_term_selects_by_labels_within_its_namespaces() {
        let term = PodTerm {
            selector: Some(LabelSelector {
                match_labels: labels(&[("app", "db")]),
                expressions: vec![Requirement {
                    key: "tier".into(),
                    op: SelectorOp::NotIn,
                    values: vec!["test".into()],
                }],
            }),
            topology_key: "zone".into(),
            namespaces: Namespaces::Own,
        };
        assert!(term.selects("ns", "ns", &labels(&[("app", "db")])));
        assert!(!term.selects("ns", "other", &labels(&[("app", "db")])));
        assert!(!term.selects("ns", "ns", &labels(&[("app", "db"), ("tier", "test")])));
        let none = PodTerm {
            selector: None,
            ..term
        };
        assert!(!none.selects("ns", "ns", &labels(&[("app", "db")])));
    }
}
