//! The nodes a Karmada-mode pass planned, handed to the member that runs the gang. A placed
//! Volcano Job's plan (each task's nodes, by pod index) goes into an `OverridePolicy` on
//! Karmada's API server, owned by the binding, that adds the [`PLANNED_NODES`] annotation to
//! the Job Karmada propagates to that member and to no other. The member's job controller
//! copies each pod's node onto the pod (`tephra.io/planned-node`), where the member's tephra
//! scheduler tries it first and tephra's extender passes that node only. The same policy, read
//! back, is what later passes keep room on, and survives a restart of the scheduler.
//!
//! Only Volcano Jobs carry a plan: their pods' names and indices are known before they exist
//! (`<job>-<task>-<index>`). Other kinds are placed as before, their pods scheduled freely in
//! the member.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tephra_api::well_known::PLANNED_NODES;

use super::Binding;

/// The group and version of Karmada's OverridePolicy.
pub const OVERRIDE_API_VERSION: &str = "policy.karmada.io/v1alpha1";
/// What the names of tephra's plan policies start with (then the binding's name).
pub const PLAN_POLICY_PREFIX: &str = "tephra-plan-";
/// Label on tephra's plan policies.
pub const PLAN_POLICY_LABEL: &str = "tephra.io/plan-of";
/// The template kind whose pods can be planned.
const VOLCANO_JOB: (&str, &str) = ("batch.volcano.sh/v1alpha1", "Job");

/// The nodes planned for a binding's gang in one member.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodePlan {
    /// The member.
    pub cluster: String,
    /// Each task's nodes, by pod index.
    pub nodes: BTreeMap<String, Vec<String>>,
}

impl NodePlan {
    /// The node planned for pod `index` of `task`, if any.
    pub fn node(&self, task: &str, index: u32) -> Option<&str> {
        self.nodes
            .get(task)?
            .get(index as usize)
            .map(String::as_str)
            .filter(|n| !n.is_empty())
    }
}

/// Whether the pods of `b`'s workload can carry a plan (a Volcano Job's).
pub fn plannable(b: &Binding) -> bool {
    let r = &b.spec.resource;
    (r.api_version.as_str(), r.kind.as_str()) == VOLCANO_JOB
}

/// The name of the plan policy of binding `name`.
pub fn policy_name(binding: &str) -> String {
    format!("{PLAN_POLICY_PREFIX}{binding}")
}

/// The OverridePolicy that hands `plan` to its member: the template's annotation, for that
/// cluster only; owned by the binding, so that it goes when the binding goes.
pub fn plan_policy(b: &Binding, plan: &NodePlan) -> Value {
    let r = &b.spec.resource;
    let namespace = r.namespace.clone().unwrap_or_else(|| b.namespace());
    let text = serde_json::to_string(&plan.nodes).unwrap_or_default();
    let mut meta = json!({
        "name": policy_name(&b.name()),
        "namespace": b.namespace(),
        "labels": {PLAN_POLICY_LABEL: b.name()},
    });
    if let Some(uid) = &b.metadata.uid {
        meta["ownerReferences"] = json!([{
            "apiVersion": format!("{}/{}", super::BINDING_GROUP, super::BINDING_VERSION),
            "kind": "ResourceBinding",
            "name": b.name(),
            "uid": uid,
            "blockOwnerDeletion": false,
        }]);
    }
    json!({
        "apiVersion": OVERRIDE_API_VERSION,
        "kind": "OverridePolicy",
        "metadata": meta,
        "spec": {
            "resourceSelectors": [{
                "apiVersion": r.api_version,
                "kind": r.kind,
                "namespace": namespace,
                "name": r.name,
            }],
            "overrideRules": [{
                "targetCluster": {"clusterNames": [plan.cluster]},
                "overriders": {"annotationsOverrider": [
                    {"operator": "add", "value": {PLANNED_NODES: text}}
                ]},
            }],
        },
    })
}

/// Reads a plan policy back: the key of its binding (`namespace/name`) and its plan. `None`
/// for any other OverridePolicy, or one whose plan does not read.
pub fn read_plan_policy(policy: &Value) -> Option<(String, NodePlan)> {
    let meta = &policy["metadata"];
    let binding = meta["labels"][PLAN_POLICY_LABEL].as_str()?;
    let name = meta["name"].as_str()?;
    if name != policy_name(binding) {
        return None;
    }
    let namespace = meta["namespace"].as_str().unwrap_or_default();
    let rule = policy["spec"]["overrideRules"].as_array()?.first()?;
    let cluster = rule["targetCluster"]["clusterNames"]
        .as_array()?
        .first()?
        .as_str()?;
    let text = rule["overriders"]["annotationsOverrider"]
        .as_array()?
        .iter()
        .find_map(|o| o["value"][PLANNED_NODES].as_str())?;
    let nodes: BTreeMap<String, Vec<String>> = serde_json::from_str(text).ok()?;
    Some((
        format!("{namespace}/{binding}"),
        NodePlan {
            cluster: cluster.to_string(),
            nodes,
        },
    ))
}

/// The plan of a gang placed in `cluster` from its synthetic pods' nodes (pod name
/// `<binding>:<task>:<index>` → node).
pub fn plan_of<'a>(cluster: &str, pods: impl Iterator<Item = (&'a str, &'a str)>) -> NodePlan {
    let mut by_task: BTreeMap<String, BTreeMap<u32, String>> = BTreeMap::new();
    for (pod, node) in pods {
        let mut parts = pod.rsplitn(3, ':');
        let (Some(index), Some(task)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(index) = index.parse::<u32>() else {
            continue;
        };
        by_task
            .entry(task.to_string())
            .or_default()
            .insert(index, node.to_string());
    }
    let nodes = by_task
        .into_iter()
        .map(|(task, at)| {
            let len = at.keys().next_back().map_or(0, |i| *i as usize + 1);
            let mut list = vec![String::new(); len];
            for (i, node) in at {
                list[i as usize] = node;
            }
            (task, list)
        })
        .collect();
    NodePlan {
        cluster: cluster.to_string(),
        nodes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding() -> Binding {
        Binding::from_value(json!({
            "metadata": {"name": "llama-job", "namespace": "ml", "uid": "u-1"},
            "spec": {"resource": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                "name": "llama", "namespace": "ml"}}
        }))
        .expect("binding")
    }

    #[test]
    fn a_plan_written_as_an_override_policy_reads_back_the_same() {
        let b = binding();
        let plan = plan_of(
            "west",
            [
                ("llama-job:worker:1", "w-3"),
                ("llama-job:worker:0", "w-1"),
                ("llama-job:ps:0", "w-0"),
            ]
            .into_iter(),
        );
        assert_eq!(plan.node("worker", 0), Some("w-1"));
        assert_eq!(plan.node("worker", 1), Some("w-3"));
        assert_eq!(plan.node("worker", 2), None);
        let policy = plan_policy(&b, &plan);
        assert_eq!(policy["metadata"]["name"], "tephra-plan-llama-job");
        assert_eq!(policy["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(
            policy["spec"]["resourceSelectors"][0]["name"], "llama",
            "{policy:#}"
        );
        assert_eq!(
            policy["spec"]["overrideRules"][0]["targetCluster"]["clusterNames"],
            json!(["west"])
        );
        assert_eq!(
            read_plan_policy(&policy),
            Some(("ml/llama-job".to_string(), plan))
        );
    }

    #[test]
    fn only_tephras_plan_policies_read_as_plans() {
        let b = binding();
        let mut policy = plan_policy(&b, &plan_of("west", std::iter::empty()));
        assert!(read_plan_policy(&policy).is_some());
        // A user's policy that happens to carry the label under another name.
        policy["metadata"]["name"] = json!("mine");
        assert!(read_plan_policy(&policy).is_none());
        let mut broken = plan_policy(&b, &plan_of("west", std::iter::empty()));
        broken["spec"]["overrideRules"][0]["overriders"]["annotationsOverrider"][0]["value"]
            [PLANNED_NODES] = json!("worker=w-1");
        assert!(read_plan_policy(&broken).is_none());
    }

    #[test]
    fn only_volcano_jobs_are_planned() {
        assert!(plannable(&binding()));
        let deploy = Binding::from_value(json!({
            "metadata": {"name": "web-deployment", "namespace": "ml"},
            "spec": {"resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}
        }))
        .expect("binding");
        assert!(!plannable(&deploy));
    }
}
