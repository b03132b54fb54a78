//! The PodGroup a gang of tasks gets, as Volcano's job controller fills it in: minMember
//! defaults to every replica, minTaskMember comes from the tasks that name a minimum, and
//! minResources is what the first minMember pods ask for, in task order. The scheduler admits a
//! PodGroup (enqueue) against its minResources.

use std::collections::BTreeMap;
use std::sync::Arc;

use tephra_api::batch::{NetworkTopologyMode, NetworkTopologySpec};
use tephra_api::scheduling::SubGroupPolicySpec;
use tephra_scheduler::model::topology::{NetworkTopology, SubGroupPolicy, TopologyMode};

use crate::pod::{UnknownValue, label_selector};
use tephra_scheduler::model::{GroupPhase, JobPolicy, PodGroupSpec, TaskShape};
use tephra_scheduler::resources::Resources;

/// One task of a gang: the shape of its pods, how many, and its minimum in the gang.
#[derive(Clone, Debug, PartialEq)]
pub struct GangTask {
    /// What one pod asks of the scheduler (its role is the task's name).
    pub shape: Arc<TaskShape>,
    /// Pods of the task.
    pub replicas: u32,
    /// The task's minimum in the gang (`minTaskMember`), if it names one.
    pub min_available: Option<u32>,
}

/// What a gang is made of, before the PodGroup's defaults are filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct GangSpec {
    /// Namespace.
    pub namespace: String,
    /// Name (the PodGroup's).
    pub name: String,
    /// Queue.
    pub queue: String,
    /// Gang size, if given (else every replica).
    pub min_member: Option<u32>,
    /// Priority value, when given directly.
    pub priority: Option<i32>,
    /// Priority class name.
    pub priority_class: Option<String>,
    /// Placement policy across clusters.
    pub policy: Arc<JobPolicy>,
    /// `networkTopology`.
    pub topology: Option<NetworkTopology>,
    /// Tasks, in order.
    pub tasks: Vec<GangTask>,
}

/// A Job's or PodGroup's (or a sub-group's) `networkTopology` in the scheduler's words: `hard`
/// unless it says `soft`; a negative tier (the CRD refuses one) is taken as none.
pub fn network_topology(t: &NetworkTopologySpec) -> NetworkTopology {
    NetworkTopology {
        mode: match t.mode {
            Some(NetworkTopologyMode::Soft) => TopologyMode::Soft,
            Some(NetworkTopologyMode::Hard) | None => TopologyMode::Hard,
        },
        highest_tier: t.highest_tier_allowed.and_then(|v| u32::try_from(v).ok()),
        highest_tier_name: t.highest_tier_name.clone(),
    }
}

/// A PodGroup's `subGroupPolicy` in the scheduler's words: `subGroupSize` defaults to 1 and
/// `minSubGroups` to 0, as the CRD's defaults say; a selector that cannot be read is an error
/// naming its field.
pub fn sub_groups(specs: &[SubGroupPolicySpec]) -> Result<Vec<SubGroupPolicy>, UnknownValue> {
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let at = format!("spec.subGroupPolicy[{i}]");
            Ok(SubGroupPolicy {
                name: s.name.clone().unwrap_or_default(),
                size: s
                    .sub_group_size
                    .and_then(|v| u32::try_from(v).ok())
                    .unwrap_or(1)
                    .max(1),
                min_sub_groups: s
                    .min_sub_groups
                    .and_then(|v| u32::try_from(v).ok())
                    .unwrap_or(0),
                selector: s
                    .label_selector
                    .as_ref()
                    .map(|l| label_selector(l, &at))
                    .transpose()?,
                match_label_keys: s.match_label_keys.clone(),
                topology: s.network_topology.as_ref().map(network_topology),
            })
        })
        .collect()
}

/// A gang as the scheduler sees it: its PodGroup and its tasks.
#[derive(Clone, Debug, PartialEq)]
pub struct Gang {
    /// The PodGroup, Pending, with minMember, minTaskMember and minResources filled in.
    pub group: PodGroupSpec,
    /// The tasks, in order.
    pub tasks: Vec<GangTask>,
}

impl Gang {
    /// Every replica of every task.
    pub fn replicas(&self) -> u32 {
        self.tasks.iter().map(|t| t.replicas).sum()
    }
}

/// What the first `min_member` pods ask for, taking each task's replicas in task order.
pub fn min_resources(tasks: &[GangTask], min_member: u32) -> Resources {
    let mut total = Resources::ZERO;
    let mut counted = 0u32;
    for t in tasks {
        let take = t.replicas.min(min_member.saturating_sub(counted));
        total.add(&t.shape.request.times(i64::from(take)));
        counted += take;
    }
    total
}

/// The gang `spec` describes, with its PodGroup created (Pending) at `created`.
pub fn gang(spec: GangSpec, created: i64) -> Gang {
    let total: u32 = spec.tasks.iter().map(|t| t.replicas).sum();
    let min_member = spec.min_member.unwrap_or(total).min(total).max(1);
    let min_task_member: BTreeMap<String, u32> = spec
        .tasks
        .iter()
        .filter_map(|t| t.min_available.map(|m| (t.shape.role.clone(), m)))
        .collect();
    let group = PodGroupSpec {
        namespace: spec.namespace,
        name: spec.name,
        queue: spec.queue,
        min_member,
        min_task_member,
        min_resources: Some(min_resources(&spec.tasks, min_member)),
        largest_task: None,
        priority_class: spec.priority_class,
        priority: spec.priority,
        phase: GroupPhase::Pending,
        phase_since: created,
        created,
        policy: spec.policy,
        topology: spec.topology,
        sub_groups: Vec::new(),
    };
    Gang {
        group,
        tasks: spec.tasks,
    }
}

/// Puts a PodGroup whose pods all went back to Pending in the queue again (Inqueue), for the
/// scheduler to place the gang anew. Returns whether the phase changed.
pub fn requeue(group: &mut PodGroupSpec) -> bool {
    if group.phase == GroupPhase::Inqueue {
        return false;
    }
    group.phase = GroupPhase::Inqueue;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(doc: serde_json::Value) -> Vec<SubGroupPolicySpec> {
        vec![serde_json::from_value(doc).expect("a subGroupPolicy entry")]
    }

    #[test]
    fn sub_group_policies_take_the_crds_defaults_and_their_own_topology() {
        let got = sub_groups(&policy(serde_json::json!({
            "name": "worker",
            "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}},
            "matchLabelKeys": ["volcano.sh/partition-id"],
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1}
        })))
        .expect("reads");
        assert_eq!((got[0].size, got[0].min_sub_groups), (1, 0));
        assert_eq!(
            got[0].topology.as_ref().and_then(|t| t.highest_tier),
            Some(1)
        );
        let labels = [
            ("volcano.sh/task-spec".to_string(), "worker".to_string()),
            ("volcano.sh/partition-id".to_string(), "3".to_string()),
        ]
        .into();
        assert_eq!(got[0].sub_group_of(&labels), Some(vec!["3".to_string()]));
        assert_eq!(got[0].sub_group_of(&Default::default()), None);
    }

    #[test]
    fn a_sub_group_selector_with_an_unknown_operator_is_refused_naming_its_field() {
        let err = sub_groups(&policy(serde_json::json!({
            "subGroupSize": 4,
            "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}
        })))
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("spec.subGroupPolicy[0].labelSelector.matchExpressions[0].operator"),
            "{err}"
        );
    }
}
