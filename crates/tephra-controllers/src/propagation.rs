//! A PropagationPolicy as the scheduler applies it (Karmada's semantics): which PodGroups it
//! selects (the PodGroup itself, or the Volcano Job that owns it), which policy wins when
//! several select one (the highest `priority`, then the name), and the placement it gives:
//! cluster names, exclusions, cluster labels and fields, tolerations, spread and gang split.

use crate::job::names::{JOB_API_VERSION, names_a_job};
use std::cmp::Reverse;

use tephra_api::PodGroup;
use tephra_api::PropagationPolicy;
use tephra_api::policy::{FieldSelectorRequirement, Placement, SpreadByField};
use tephra_scheduler::model::{JobPolicy, Requirement, SelectorOp, SpreadConstraint, SpreadField};

use crate::pod::{UnknownValue, label_selector, toleration_list};

const PODGROUP_API: &str = "scheduling.volcano.sh/v1beta1";

/// Whether `pp` selects `group` (same namespace; a selector naming the PodGroup, or the Volcano
/// Job that owns it, by name and labels).
pub fn selects(pp: &PropagationPolicy, group: &PodGroup) -> bool {
    let ns = group.metadata.namespace.as_deref().unwrap_or("default");
    if pp.metadata.namespace.as_deref().unwrap_or("default") != ns {
        return false;
    }
    let labels = group.metadata.labels.clone().unwrap_or_default();
    let owner_job = group
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| names_a_job(o))
        .map(|o| o.name.as_str());
    pp.spec.resource_selectors.iter().any(|s| {
        let name = match (s.api_version.as_str(), s.kind.as_str()) {
            (PODGROUP_API, "PodGroup") => group.metadata.name.as_deref(),
            (JOB_API_VERSION, "Job") => owner_job,
            _ => return false,
        };
        let Some(name) = name else { return false };
        s.namespace.as_deref().is_none_or(|n| n == ns)
            && s.name.as_deref().is_none_or(|n| n == name)
            && s.label_selector
                .as_ref()
                .is_none_or(|sel| label_selector(sel, "").is_ok_and(|sel| sel.matches(&labels)))
    })
}

/// The policy that governs `group` among `policies`: the highest priority, then the first name.
pub fn pick<'a>(
    policies: impl IntoIterator<Item = &'a PropagationPolicy>,
    group: &PodGroup,
) -> Option<&'a PropagationPolicy> {
    policies
        .into_iter()
        .filter(|pp| selects(pp, group))
        .min_by_key(|pp| {
            (
                Reverse(pp.spec.priority.unwrap_or(0)),
                pp.metadata.name.clone().unwrap_or_default(),
            )
        })
}

fn op(r: &FieldSelectorRequirement, i: usize) -> Result<SelectorOp, UnknownValue> {
    match r.operator.as_str() {
        "In" => Ok(SelectorOp::In),
        "NotIn" => Ok(SelectorOp::NotIn),
        "Exists" => Ok(SelectorOp::Exists),
        "DoesNotExist" => Ok(SelectorOp::DoesNotExist),
        other => Err(UnknownValue {
            field: format!(
                "spec.placement.clusterAffinity.fieldSelector.matchExpressions[{i}].operator"
            ),
            value: other.to_string(),
            known: "In, NotIn, Exists, DoesNotExist",
        }),
    }
}

/// The placement policy `pp` gives the jobs it selects. Errors name the field.
pub fn job_policy(pp: &PropagationPolicy) -> Result<JobPolicy, UnknownValue> {
    placement_policy(&pp.spec.placement)
}

/// The placement policy a `placement` (a PropagationPolicy's, or a Karmada binding's, whose
/// fields it shares) gives. Errors name the field under `spec.placement`.
pub fn placement_policy(placement: &Placement) -> Result<JobPolicy, UnknownValue> {
    let mut out = JobPolicy {
        splittable: placement.allow_gang_split,
        tolerations: toleration_list(
            &placement.cluster_tolerations,
            "spec.placement.clusterTolerations",
        )?,
        ..JobPolicy::default()
    };
    if let Some(a) = &placement.cluster_affinity {
        out.cluster_names = a.cluster_names.clone();
        out.exclude = a.exclude.clone();
        if let Some(sel) = &a.label_selector {
            let sel = label_selector(sel, "spec.placement.clusterAffinity")?;
            out.cluster_labels = sel
                .match_labels
                .iter()
                .map(|(k, v)| Requirement {
                    key: k.clone(),
                    op: SelectorOp::In,
                    values: vec![v.clone()],
                })
                .chain(sel.expressions)
                .collect();
        }
        if let Some(f) = &a.field_selector {
            for (i, r) in f.match_expressions.iter().enumerate() {
                out.field_requirements.push(Requirement {
                    key: r.key.clone(),
                    op: op(r, i)?,
                    values: r.values.clone(),
                });
            }
        }
    }
    for c in &placement.spread_constraints {
        let field = match c.spread_by_field {
            Some(SpreadByField::Cluster) | None => SpreadField::Cluster,
            Some(SpreadByField::Region) => SpreadField::Region,
            Some(SpreadByField::Zone) => SpreadField::Zone,
            Some(SpreadByField::Provider) => SpreadField::Provider,
        };
        out.spread.push(SpreadConstraint {
            field,
            min_groups: u32::try_from(c.min_groups.unwrap_or(1)).unwrap_or(1),
            max_groups: u32::try_from(c.max_groups.unwrap_or(i32::MAX)).unwrap_or(u32::MAX),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn policy(name: &str, priority: i32, selectors: serde_json::Value) -> PropagationPolicy {
        serde_json::from_value(json!({
            "apiVersion": "policy.tephra.io/v1alpha1", "kind": "PropagationPolicy",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"priority": priority, "resourceSelectors": selectors,
                     "placement": {"clusterAffinity": {"clusterNames": ["west"],
                         "fieldSelector": {"matchExpressions": [
                             {"key": "region", "operator": "In", "values": ["us-west-2"]}]}},
                         "clusterTolerations": [{"key": "maintenance", "operator": "Exists"}],
                         "spreadConstraints": [{"spreadByField": "zone", "maxGroups": 1}]}}
        }))
        .unwrap()
    }

    fn group(owner: Option<&str>) -> PodGroup {
        let mut g = json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml", "labels": {"team": "a"}},
            "spec": {"minMember": 2}
        });
        if let Some(o) = owner {
            g["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job", "name": o, "uid": "u"}]);
        }
        serde_json::from_value(g).unwrap()
    }

    #[test]
    fn a_policy_selects_a_podgroup_or_the_job_that_owns_it() {
        let by_group = policy(
            "p",
            0,
            json!([{"apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup", "labelSelector": {"matchLabels": {"team": "a"}}}]),
        );
        let by_job = policy(
            "q",
            0,
            json!([{"apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job", "name": "train-job"}]),
        );
        assert!(selects(&by_group, &group(None)));
        assert!(!selects(&by_job, &group(None)));
        assert!(selects(&by_job, &group(Some("train-job"))));
        let other_team = policy(
            "r",
            0,
            json!([{"apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup", "labelSelector": {"matchLabels": {"team": "b"}}}]),
        );
        assert!(!selects(&other_team, &group(None)));
    }

    #[test]
    fn the_highest_priority_policy_wins() {
        let sel = json!([{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup"}]);
        let low = policy("a-low", 1, sel.clone());
        let high = policy("z-high", 5, sel);
        let g = group(None);
        let won = pick([&low, &high], &g).unwrap();
        assert_eq!(won.metadata.name.as_deref(), Some("z-high"));
    }

    #[test]
    fn the_placement_becomes_the_jobs_policy() {
        let p = job_policy(&policy("p", 0, json!([]))).unwrap();
        assert_eq!(p.cluster_names, vec!["west".to_string()]);
        assert_eq!(p.field_requirements.len(), 1);
        assert_eq!(p.tolerations.len(), 1);
        assert!(p.tolerations[0].exists);
        assert_eq!(p.spread.len(), 1);
        assert_eq!(p.spread[0].field, SpreadField::Zone);
        assert_eq!(p.spread[0].max_groups, 1);
    }

    #[test]
    fn an_unknown_operator_is_refused_naming_the_field() {
        let mut pp = policy("p", 0, json!([]));
        if let Some(a) = pp.spec.placement.cluster_affinity.as_mut()
            && let Some(f) = a.field_selector.as_mut()
        {
            f.match_expressions[0].operator = "Near".into();
        }
        let e = job_policy(&pp).unwrap_err().to_string();
        assert!(
            e.contains("fieldSelector.matchExpressions[0].operator") && e.contains("Near"),
            "{e}"
        );
    }
}
