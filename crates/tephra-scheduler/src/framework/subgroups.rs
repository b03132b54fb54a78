//! A job's sub-groups (`subGroupPolicy`): which of its pods make each sub-group, and whether
//! enough sub-groups are whole for the job to start. The gang plugin holds a job to this; the
//! placement of each sub-group as a unit is `placement/subgroups.rs`.

use std::collections::BTreeMap;

use super::view::View;
use crate::model::{Id, TaskStatus};

/// One sub-group of a job: its policy (an index into the PodGroup's `sub_groups`), its key
/// (the values of the policy's `matchLabelKeys`) and its pods in the job's task order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubGroup {
    /// Index of its policy.
    pub policy: usize,
    /// The values of the policy's `matchLabelKeys`.
    pub key: Vec<String>,
    /// Its pods.
    pub tasks: Vec<Id>,
}

impl SubGroup {
    /// How the sub-group is named in messages: `policy[value,...]`.
    pub fn label(&self, view: &View, job: Id) -> String {
        let policy = view
            .job(job)
            .and_then(|j| j.group.as_ref())
            .and_then(|g| g.sub_groups.get(self.policy))
            .map(|p| p.name.clone())
            .unwrap_or_default();
        format!("{policy}[{}]", self.key.join(","))
    }
}

/// The job's sub-groups, by policy and then key. A pod that several policies select is in one
/// sub-group of each.
pub fn sub_groups(view: &View, job: Id) -> Vec<SubGroup> {
    let Some(j) = view.job(job) else {
        return Vec::new();
    };
    let Some(policies) = j.group.as_ref().map(|g| &g.sub_groups) else {
        return Vec::new();
    };
    if policies.is_empty() {
        return Vec::new();
    }
    let mut by: BTreeMap<(usize, Vec<String>), Vec<Id>> = BTreeMap::new();
    for &t in &j.tasks {
        let Some(task) = view.task(t) else { continue };
        for (i, p) in policies.iter().enumerate() {
            if let Some(key) = p.sub_group_of(&task.spec.shape.rules.labels) {
                by.entry((i, key)).or_default().push(t);
            }
        }
    }
    by.into_iter()
        .map(|((policy, key), tasks)| SubGroup { policy, key, tasks })
        .collect()
}

/// The first policy of the job with fewer whole sub-groups than its `minSubGroups`, counting a
/// pod when `counts(status)`: its name, how many are whole and how many it needs.
pub fn short_of_minimum(
    view: &View,
    job: Id,
    counts: impl Fn(TaskStatus) -> bool,
) -> Option<(String, u32, u32)> {
    let policies = &view.job(job)?.group.as_ref()?.sub_groups;
    if policies.iter().all(|p| p.min_sub_groups == 0) {
        return None;
    }
    let mut whole = vec![0u32; policies.len()];
    for g in sub_groups(view, job) {
        let n = g.tasks.iter().filter(|t| counts(view.status(**t))).count();
        if n >= policies[g.policy].size as usize {
            whole[g.policy] += 1;
        }
    }
    policies
        .iter()
        .zip(whole)
        .find(|(p, w)| *w < p.min_sub_groups)
        .map(|(p, w)| (p.name.clone(), w, p.min_sub_groups))
}
