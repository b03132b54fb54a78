//! A `scheduling.volcano.sh` Queue as the scheduler sees it: weight, capability, guarantee and
//! deserved share, parent, priority, dequeue strategy, state, node-group affinity, and Volcano's
//! hierarchy annotations (`volcano.sh/hierarchy`, `volcano.sh/hierarchy-weights`) for `drf`
//! with `enableHierarchy`. Volcano's defaults apply: weight 1, reclaimable, `traverse`, Open.

use tephra_api::Queue;
use tephra_api::checks::{self, FieldError, HIERARCHY_ANNOTATION, HIERARCHY_WEIGHTS_ANNOTATION};
use tephra_api::scheduling::{DequeueStrategy, NodeGroupAffinity, QueueState as ApiState};
use tephra_scheduler::model::{Dequeue, Hierarchy, NodeGroups, QueueSpec, QueueState};
use tephra_scheduler::resources::{ResourceError, ResourceNames, Resources};

/// Why a Queue cannot be read. Each names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueueError {
    /// A resource list cannot be read.
    #[error("{field}: {source}")]
    Resources {
        /// Field path.
        field: &'static str,
        /// Why.
        source: ResourceError,
    },
    /// A check the schema cannot make failed (the hierarchy annotations).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Checks(Vec<FieldError>),
}

fn resources(
    names: &mut ResourceNames,
    field: &'static str,
    list: Option<&tephra_api::scheduling::ResourceList>,
) -> Result<Option<Resources>, QueueError> {
    let Some(list) = list else { return Ok(None) };
    names
        .parse(list.iter().map(|(k, v)| (k.as_str(), v.0.as_str())))
        .map(Some)
        .map_err(|source| QueueError::Resources { field, source })
}

/// The queue's hierarchy from its annotations, `None` when it has none. Call after
/// [`checks::queue`] has accepted them.
fn hierarchy(q: &Queue) -> Option<Hierarchy> {
    let notes = q.metadata.annotations.as_ref()?;
    let path = notes.get(HIERARCHY_ANNOTATION)?;
    let weights = notes.get(HIERARCHY_WEIGHTS_ANNOTATION)?;
    Some(Hierarchy {
        path: path.split('/').map(|s| s.trim().to_string()).collect(),
        weights: weights
            .split('/')
            .map(|w| w.trim().parse::<f64>().unwrap_or(1.0))
            .collect(),
    })
}

/// The required and preferred node groups of one side of a queue's affinity.
fn groups(a: Option<&NodeGroupAffinity>) -> (Vec<String>, Vec<String>) {
    a.map(|g| {
        (
            g.required_during_scheduling_ignored_during_execution
                .clone(),
            g.preferred_during_scheduling_ignored_during_execution
                .clone(),
        )
    })
    .unwrap_or_default()
}

/// Reads a Queue into the scheduler's model, interning resource names in `names`.
pub fn spec(q: &Queue, names: &mut ResourceNames) -> Result<QueueSpec, QueueError> {
    let problems = checks::queue(q);
    if !problems.is_empty() {
        return Err(QueueError::Checks(problems));
    }
    let name = q.metadata.name.clone().unwrap_or_default();
    let mut out = QueueSpec::named(&name);
    let s = &q.spec;
    out.weight = u32::try_from(s.weight).unwrap_or(1).max(1);
    out.capability = resources(names, "spec.capability", s.capability.as_ref())?;
    out.guarantee = resources(
        names,
        "spec.guarantee.resource",
        s.guarantee.as_ref().and_then(|g| g.resource.as_ref()),
    )?;
    out.deserved = resources(names, "spec.deserved", s.deserved.as_ref())?;
    out.reclaimable = s.reclaimable.unwrap_or(true);
    out.parent = s.parent.clone().filter(|p| !p.is_empty());
    out.priority = s.priority.unwrap_or(0);
    out.dequeue = match s.dequeue_strategy {
        Some(DequeueStrategy::Fifo) => Dequeue::Fifo,
        _ => Dequeue::Traverse,
    };
    out.state = match q.status.as_ref().and_then(|st| st.state) {
        Some(ApiState::Closed) => QueueState::Closed,
        Some(ApiState::Closing) => QueueState::Closing,
        _ => QueueState::Open,
    };
    out.node_groups = s.affinity.as_ref().map(|a| {
        let (required, preferred) = groups(a.node_group_affinity.as_ref());
        let (anti_required, anti_preferred) = groups(a.node_group_anti_affinity.as_ref());
        NodeGroups {
            required,
            preferred,
            anti_required,
            anti_preferred,
        }
    });
    out.hierarchy = hierarchy(q);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(v: serde_json::Value) -> Queue {
        serde_json::from_value(v).expect("valid queue")
    }

    #[test]
    fn volcano_defaults_apply_to_a_queue_without_spec() {
        let q = queue(serde_json::json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "q"}
        }));
        let s = spec(&q, &mut ResourceNames::default()).unwrap();
        assert_eq!(s.weight, 1);
        assert!(s.reclaimable);
        assert_eq!(s.state, QueueState::Open);
        assert_eq!(s.dequeue, Dequeue::Traverse);
        assert!(s.hierarchy.is_none() && s.node_groups.is_none());
    }

    #[test]
    fn hierarchy_annotations_become_a_path_with_a_weight_per_level() {
        let q = queue(serde_json::json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "root-eng-prod", "annotations": {
                "volcano.sh/hierarchy": "root/eng/prod",
                "volcano.sh/hierarchy-weights": "1/2/8"}},
            "spec": {"weight": 3, "capability": {"cpu": "10"}, "reclaimable": false,
                     "affinity": {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ["a"]}}}
        }));
        let mut names = ResourceNames::default();
        let s = spec(&q, &mut names).unwrap();
        let h = s.hierarchy.unwrap();
        assert_eq!(h.path, ["root", "eng", "prod"]);
        assert_eq!(h.weights, [1.0, 2.0, 8.0]);
        assert_eq!(s.weight, 3);
        assert!(!s.reclaimable);
        assert_eq!(s.node_groups.unwrap().required, ["a"]);
        assert!(s.capability.is_some());
    }

    #[test]
    fn mismatched_hierarchy_weights_are_refused_naming_the_annotation() {
        let q = queue(serde_json::json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "q", "annotations": {
                "volcano.sh/hierarchy": "root/eng/prod",
                "volcano.sh/hierarchy-weights": "1/2"}}
        }));
        let e = spec(&q, &mut ResourceNames::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("metadata.annotations[volcano.sh/hierarchy-weights]"),
            "{e}"
        );
    }
}
