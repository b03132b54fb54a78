//! Labels and how they are matched: node selectors, required node affinity (In, NotIn,
//! Exists, DoesNotExist, Gt, Lt), and taints against tolerations, with Kubernetes' rules.

use std::collections::BTreeMap;

/// Labels (or a node selector).
pub type Labels = BTreeMap<String, String>;

/// Taint effects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaintEffect {
    /// Do not place new work.
    NoSchedule,
    /// Avoid placing new work.
    PreferNoSchedule,
    /// Evict work that does not tolerate it.
    NoExecute,
}

impl TaintEffect {
    /// Parses Kubernetes' spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "NoSchedule" => Some(Self::NoSchedule),
            "PreferNoSchedule" => Some(Self::PreferNoSchedule),
            "NoExecute" => Some(Self::NoExecute),
            _ => None,
        }
    }

    /// Kubernetes' spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSchedule => "NoSchedule",
            Self::PreferNoSchedule => "PreferNoSchedule",
            Self::NoExecute => "NoExecute",
        }
    }
}

/// A node or cluster taint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value (may be empty).
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
}

/// A toleration.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Toleration {
    /// Key; empty with `exists` tolerates every taint.
    pub key: String,
    /// `Exists` (true) or `Equal` (false).
    pub exists: bool,
    /// Value for `Equal`.
    pub value: String,
    /// Effect; `None` tolerates every effect.
    pub effect: Option<TaintEffect>,
    /// `tolerationSeconds`: how long a NoExecute taint is tolerated once added (`None`: for
    /// good). Placement ignores it; the taint manager reads it.
    pub seconds: Option<i64>,
}

impl Toleration {
    /// Whether this toleration tolerates `taint`, with Kubernetes' rules.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if let Some(e) = self.effect
            && e != taint.effect
        {
            return false;
        }
        if self.key.is_empty() {
            return self.exists;
        }
        if self.key != taint.key {
            return false;
        }
        self.exists || self.value == taint.value
    }
}

/// Whether `tolerations` tolerate `taint`.
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

/// The taint a cordoned node stands for (`node.kubernetes.io/unschedulable:NoSchedule`).
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Whether a pod with `tolerations` may go to a cordoned node: as kube-scheduler's
/// NodeUnschedulable filter decides, when they tolerate the cordon's own taint (DaemonSet pods
/// and the like), whether or not the node carries it yet.
pub fn tolerates_cordon(tolerations: &[Toleration]) -> bool {
    !tolerations.is_empty()
        && tolerated(
            tolerations,
            &Taint {
                key: UNSCHEDULABLE_TAINT.to_string(),
                value: String::new(),
                effect: TaintEffect::NoSchedule,
            },
        )
}

/// Operators of node-affinity requirements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SelectorOp {
    /// The label's value is one of `values`.
    In,
    /// The label is absent or its value is not one of `values`.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label's integer value is greater than `values[0]`.
    Gt,
    /// The label's integer value is less than `values[0]`.
    Lt,
}

impl SelectorOp {
    /// Parses Kubernetes' spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "In" => Self::In,
            "NotIn" => Self::NotIn,
            "Exists" => Self::Exists,
            "DoesNotExist" => Self::DoesNotExist,
            "Gt" => Self::Gt,
            "Lt" => Self::Lt,
            _ => return None,
        })
    }

    /// Kubernetes' spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::In => "In",
            Self::NotIn => "NotIn",
            Self::Exists => "Exists",
            Self::DoesNotExist => "DoesNotExist",
            Self::Gt => "Gt",
            Self::Lt => "Lt",
        }
    }
}

/// One label requirement.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    /// Label key.
    pub key: String,
    /// Operator.
    pub op: SelectorOp,
    /// Values.
    pub values: Vec<String>,
}

impl Requirement {
    /// Whether `labels` satisfy this requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        let v = labels.get(&self.key);
        match self.op {
            SelectorOp::In => v.is_some_and(|v| self.values.contains(v)),
            SelectorOp::NotIn => v.is_none_or(|v| !self.values.contains(v)),
            SelectorOp::Exists => v.is_some(),
            SelectorOp::DoesNotExist => v.is_none(),
            SelectorOp::Gt | SelectorOp::Lt => {
                let (Some(v), Some(bound)) = (v, self.values.first()) else {
                    return false;
                };
                match (v.parse::<i64>(), bound.parse::<i64>()) {
                    (Ok(v), Ok(b)) => {
                        if self.op == SelectorOp::Gt {
                            v > b
                        } else {
                            v < b
                        }
                    }
                    _ => false,
                }
            }
        }
    }
}

/// Required node affinity: a node must match at least one term; a term matches when all its
/// requirements do. An empty list places no constraint.
///
/// Inlined: predicates call it for every node scanned, mostly with no terms, and a call that
/// LLVM left out of line cost 5% of a session (issue 31's bisect).
#[inline]
pub fn affinity_matches(terms: &[Vec<Requirement>], labels: &Labels) -> bool {
    terms.is_empty() || terms.iter().any(|t| t.iter().all(|r| r.matches(labels)))
}

/// Whether `labels` contain every pair of `selector` (inlined, as [`affinity_matches`]).
#[inline]
pub fn selector_matches(selector: &Labels, labels: &Labels) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint {
            key: key.into(),
            value: value.into(),
            effect,
        }
    }

    #[test]
    fn tolerations_follow_kubernetes_rules() {
        let t = taint("gpu", "true", TaintEffect::NoSchedule);
        let equal = Toleration {
            key: "gpu".into(),
            value: "true".into(),
            ..Default::default()
        };
        assert!(equal.tolerates(&t));
        let wrong_value = Toleration {
            key: "gpu".into(),
            value: "false".into(),
            ..Default::default()
        };
        assert!(!wrong_value.tolerates(&t));
        let exists_any = Toleration {
            exists: true,
            ..Default::default()
        };
        assert!(exists_any.tolerates(&t));
        let wrong_effect = Toleration {
            key: "gpu".into(),
            exists: true,
            effect: Some(TaintEffect::NoExecute),
            ..Default::default()
        };
        assert!(!wrong_effect.tolerates(&t));
    }

    #[test]
    fn requirements_cover_every_operator() {
        let labels: Labels = [
            ("zone".to_string(), "a".to_string()),
            ("gen".to_string(), "5".to_string()),
        ]
        .into_iter()
        .collect();
        let req = |key: &str, op, values: &[&str]| Requirement {
            key: key.into(),
            op,
            values: values.iter().map(|s| s.to_string()).collect(),
        };
        assert!(req("zone", SelectorOp::In, &["a", "b"]).matches(&labels));
        assert!(!req("zone", SelectorOp::NotIn, &["a"]).matches(&labels));
        assert!(req("missing", SelectorOp::NotIn, &["a"]).matches(&labels));
        assert!(req("zone", SelectorOp::Exists, &[]).matches(&labels));
        assert!(req("missing", SelectorOp::DoesNotExist, &[]).matches(&labels));
        assert!(req("gen", SelectorOp::Gt, &["4"]).matches(&labels));
        assert!(!req("gen", SelectorOp::Lt, &["5"]).matches(&labels));
        assert!(
            !req("zone", SelectorOp::Gt, &["1"]).matches(&labels),
            "non-integer never matches Gt"
        );
        let terms = vec![
            vec![req("zone", SelectorOp::In, &["b"])],
            vec![req("gen", SelectorOp::Exists, &[])],
        ];
        assert!(affinity_matches(&terms, &labels), "terms are ORed");
    }
}
