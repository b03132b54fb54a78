//! What the extender knows of the member, fed by a watch of its pods and PodGroups and by the
//! pods kube-scheduler sends it: each pod's gang, role, planned node and node; each gang's
//! needs (minMember and each role's minTaskMember) and, while tephra has not admitted it, why.
//!
//! A gang's needs come from its PodGroup in the member when there is one (one cluster, Volcano's
//! layout), else from the `tephra.io/gang-min-member` and `tephra.io/gang-min-task-member`
//! annotations tephra puts on the pods it creates in a member.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::Pod;
use tephra_api::PodGroup;
use tephra_api::scheduling::{PodGroupConditionType, PodGroupPhase};
use tephra_api::well_known::{
    GANG_MIN_MEMBER, GANG_MIN_TASK_MEMBER, GROUP_NAME_ANNOTATION, PLANNED_NODE, TASK_SPEC,
};

/// One pod, as far as the extender cares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodInfo {
    /// UID.
    pub uid: String,
    /// `namespace/group` of its gang, if it has one.
    pub gang: Option<String>,
    /// Its role (`volcano.sh/task-spec`).
    pub role: Option<String>,
    /// The node tephra planned it on.
    pub planned: Option<String>,
    /// The node it is bound to.
    pub node: Option<String>,
    /// It has finished (Succeeded or Failed): it no longer counts towards its gang.
    pub finished: bool,
    /// Needs its own annotations give for its gang.
    pub needs: Option<Needs>,
}

/// What a gang needs before any of it is bound.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// minMember.
    pub min_member: u32,
    /// Each role's minTaskMember.
    pub roles: BTreeMap<String, u32>,
}

/// A gang's PodGroup in the member.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GangInfo {
    /// From the PodGroup spec.
    pub needs: Needs,
    /// Whether tephra admitted it (Inqueue or Running).
    pub admitted: bool,
    /// The scheduler's last word on it (its Unschedulable condition).
    pub why: Option<String>,
}

fn annotation<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// `namespace/name` of a pod.
pub fn key_of(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or("default"),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}

/// What the extender reads from a pod.
pub fn pod_info(p: &Pod) -> PodInfo {
    let ns = p.metadata.namespace.as_deref().unwrap_or("default");
    let min_member = annotation(p, GANG_MIN_MEMBER).and_then(|v| v.parse::<u32>().ok());
    let roles: BTreeMap<String, u32> = annotation(p, GANG_MIN_TASK_MEMBER)
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default();
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    PodInfo {
        uid: p.metadata.uid.clone().unwrap_or_default(),
        gang: annotation(p, GROUP_NAME_ANNOTATION).map(|g| format!("{ns}/{g}")),
        role: annotation(p, TASK_SPEC).map(str::to_string),
        planned: annotation(p, PLANNED_NODE).map(str::to_string),
        node: p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty()),
        finished: matches!(phase, Some("Succeeded" | "Failed")),
        needs: min_member.map(|min_member| Needs { min_member, roles }),
    }
}

/// What the extender reads from a PodGroup.
pub fn gang_info(pg: &PodGroup) -> GangInfo {
    let status = pg.status.as_ref();
    let phase = status.and_then(|s| s.phase);
    let why = status.and_then(|s| {
        s.conditions
            .iter()
            .rev()
            .find(|c| c.type_ == PodGroupConditionType::Unschedulable && c.status == "True")
            .map(|c| {
                let reason = c.reason.clone().unwrap_or_default();
                let message = c.message.clone().unwrap_or_default();
                format!("{reason}: {message}")
            })
    });
    GangInfo {
        needs: Needs {
            min_member: u32::try_from(pg.spec.min_member.unwrap_or(1).max(0)).unwrap_or(0),
            roles: pg
                .spec
                .min_task_member
                .iter()
                .map(|(k, v)| (k.clone(), u32::try_from((*v).max(0)).unwrap_or(0)))
                .collect(),
        },
        admitted: matches!(phase, Some(PodGroupPhase::Inqueue | PodGroupPhase::Running)),
        why,
    }
}

/// The pods and gangs of one member.
#[derive(Clone, Debug, Default)]
pub struct Index {
    pods: HashMap<String, PodInfo>,
    by_uid: HashMap<String, String>,
    gang_pods: HashMap<String, BTreeSet<String>>,
    gangs: HashMap<String, GangInfo>,
}

impl Index {
    /// Takes a pod in (from the watch, or from kube-scheduler's request). Returns whether its
    /// plan changed from one node to another (a held bind of it is stale).
    pub fn upsert_pod(&mut self, p: &Pod) -> bool {
        let key = key_of(p);
        let info = pod_info(p);
        let old = self.pods.remove(&key);
        if let Some(o) = &old {
            self.forget(&key, o);
        }
        if !info.uid.is_empty() {
            self.by_uid.insert(info.uid.clone(), key.clone());
        }
        if let Some(g) = &info.gang {
            self.gang_pods
                .entry(g.clone())
                .or_default()
                .insert(key.clone());
        }
        let moved = old
            .and_then(|o| o.planned)
            .is_some_and(|was| info.planned.as_ref().is_some_and(|now| *now != was));
        self.pods.insert(key, info);
        moved
    }

    fn forget(&mut self, key: &str, info: &PodInfo) {
        if self.by_uid.get(&info.uid).is_some_and(|k| k == key) {
            self.by_uid.remove(&info.uid);
        }
        if let Some(g) = &info.gang
            && let Some(set) = self.gang_pods.get_mut(g)
        {
            set.remove(key);
            if set.is_empty() {
                self.gang_pods.remove(g);
            }
        }
    }

    /// A pod is gone.
    pub fn remove_pod(&mut self, key: &str) -> Option<PodInfo> {
        let info = self.pods.remove(key)?;
        self.forget(key, &info);
        Some(info)
    }

    /// Takes a PodGroup in.
    pub fn upsert_gang(&mut self, pg: &PodGroup) {
        let key = format!(
            "{}/{}",
            pg.metadata.namespace.as_deref().unwrap_or("default"),
            pg.metadata.name.as_deref().unwrap_or_default()
        );
        self.gangs.insert(key, gang_info(pg));
    }

    /// A PodGroup is gone.
    pub fn remove_gang(&mut self, key: &str) {
        self.gangs.remove(key);
    }

    /// A pod by `namespace/name`.
    pub fn pod(&self, key: &str) -> Option<&PodInfo> {
        self.pods.get(key)
    }

    /// A pod by UID: its key and what is known of it.
    pub fn pod_by_uid(&self, uid: &str) -> Option<(&str, &PodInfo)> {
        let key = self.by_uid.get(uid)?;
        self.pods.get(key).map(|p| (key.as_str(), p))
    }

    /// A gang's PodGroup, if the member has one.
    pub fn gang(&self, key: &str) -> Option<&GangInfo> {
        self.gangs.get(key)
    }

    /// What a gang needs: its PodGroup's spec, else what its pods' annotations say, else one pod.
    pub fn needs(&self, gang: &str) -> Needs {
        if let Some(g) = self.gangs.get(gang) {
            return g.needs.clone();
        }
        self.gang_pods
            .get(gang)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k))
            .find_map(|p| p.needs.clone())
            .unwrap_or(Needs {
                min_member: 1,
                roles: BTreeMap::new(),
            })
    }

    /// The gang's pods bound and unfinished, with their roles.
    pub fn bound(&self, gang: &str) -> Vec<(&str, Option<&str>)> {
        self.gang_pods
            .get(gang)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k).map(|p| (k.as_str(), p)))
            .filter(|(_, p)| p.node.is_some() && !p.finished)
            .map(|(k, p)| (k, p.role.as_deref()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    fn pod(planned: &str, node: Option<&str>) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "w0", "namespace": "ml", "uid": "u0",
                "annotations": {"scheduling.k8s.io/group-name": "llm", "volcano.sh/task-spec": "worker",
                                "tephra.io/planned-node": planned, "tephra.io/gang-min-member": "4",
                                "tephra.io/gang-min-task-member": "{\"worker\": 3}"}},
            "spec": {"nodeName": node, "containers": []}
        }))
        .expect("pod")
    }

    #[test]
    fn a_changed_plan_is_reported_so_that_held_binds_are_released() {
        let mut index = Index::default();
        assert!(
            !index.upsert_pod(&pod("n1", None)),
            "a new pod moved nowhere"
        );
        assert!(!index.upsert_pod(&pod("n1", None)), "the same plan");
        assert!(index.upsert_pod(&pod("n2", None)), "planned elsewhere now");
    }

    #[test]
    fn a_gang_needs_what_its_pods_say_until_its_podgroup_is_seen() {
        let mut index = Index::default();
        index.upsert_pod(&pod("n1", Some("n1")));
        let needs = index.needs("ml/llm");
        assert_eq!(needs.min_member, 4);
        assert_eq!(needs.roles.get("worker"), Some(&3));
        assert_eq!(index.bound("ml/llm"), vec![("ml/w0", Some("worker"))]);
        assert_eq!(index.pod_by_uid("u0").map(|(k, _)| k), Some("ml/w0"));
        index.remove_pod("ml/w0");
        assert!(index.bound("ml/llm").is_empty());
        assert_eq!(
            index.needs("ml/llm").min_member,
            1,
            "nothing known: one pod"
        );
    }
}
