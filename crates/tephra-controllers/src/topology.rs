//! Volcano's HyperNodes read into the scheduler core's model of a member cluster's network
//! topology; the runtime and the simulator both read them here.

use tephra_api::topology::{HyperNode, MemberType};
use tephra_scheduler::model::topology::{HyperNodeSpec, Member, MemberKind, MemberSelector};

use crate::pod::label_selector;

/// A HyperNode field the scheduler cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("hypernode {name}: {field}: {message}")]
pub struct HyperNodeError {
    /// HyperNode.
    pub name: String,
    /// Field path.
    pub field: String,
    /// Why.
    pub message: String,
}

/// A member cluster's HyperNode. Each member names its selector (exactly one of exact name,
/// pattern or labels; labels only for nodes), as Volcano's CRD requires.
pub fn hypernode(cluster: &str, h: &HyperNode) -> Result<HyperNodeSpec, HyperNodeError> {
    let name = h.metadata.name.clone().unwrap_or_default();
    let bad = |field: String, message: &str| HyperNodeError {
        name: name.clone(),
        field,
        message: message.to_string(),
    };
    let tier =
        u32::try_from(h.spec.tier).map_err(|_| bad("spec.tier".into(), "must be 0 or more"))?;
    let listed = h.spec.members.as_deref().unwrap_or_default();
    let mut members = Vec::with_capacity(listed.len());
    for (i, m) in listed.iter().enumerate() {
        let at = format!("spec.members[{i}].selector");
        let kind = match m.type_ {
            MemberType::Node => MemberKind::Node,
            MemberType::HyperNode => MemberKind::HyperNode,
        };
        // A member without a selector selects nothing.
        let Some(s) = &m.selector else { continue };
        let selector = match (&s.exact_match, &s.regex_match, &s.label_match) {
            (Some(e), None, None) => MemberSelector::Exact(e.name.clone()),
            (None, Some(r), None) => MemberSelector::Regex(r.pattern.clone()),
            (None, None, Some(l)) if kind == MemberKind::Node => MemberSelector::Labels(
                label_selector(l, &format!("{at}.labelMatch"))
                    .map_err(|e| bad(e.field.clone(), &e.to_string()))?,
            ),
            (None, None, Some(_)) => {
                return Err(bad(
                    format!("{at}.labelMatch"),
                    "only takes effect for members of type Node",
                ));
            }
            (None, None, None) => {
                return Err(bad(
                    at,
                    "one of exactMatch, regexMatch or labelMatch must be specified",
                ));
            }
            _ => {
                return Err(bad(
                    at,
                    "only one of exactMatch, regexMatch or labelMatch can be specified",
                ));
            }
        };
        members.push(Member { kind, selector });
    }
    Ok(HyperNodeSpec {
        cluster: cluster.to_string(),
        name,
        tier,
        tier_name: h.spec.tier_name.clone(),
        members,
    })
}
