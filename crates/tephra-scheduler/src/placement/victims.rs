//! Who may be evicted to make room: running jobs as victims, and for each the tasks that may go
//! without cutting its gang below its minimum.

use std::collections::BTreeMap;

use crate::framework::session::Session;
use crate::model::{GroupPhase, Id, TaskStatus};
use crate::resources::Resources;

/// A running job, as a possible victim.
pub struct Running {
    /// The job.
    pub job: Id,
    /// Its queue.
    pub queue: String,
    /// Its priority.
    pub priority: i32,
    /// When its PodGroup was created.
    pub created: i64,
    /// The cluster it runs in (of its first placed task).
    pub cluster: Id,
    /// What its placed tasks hold.
    pub held: Resources,
}

/// Every running job, as a possible victim: lowest priority first, then the most recently
/// started.
pub fn running_jobs(ssn: &Session) -> Vec<Running> {
    let mut out = Vec::new();
    for (id, j) in ssn.snap.jobs.iter() {
        let Some(g) = &j.group else { continue };
        if !matches!(
            ssn.state.phase(&ssn.snap, id),
            Some(GroupPhase::Running | GroupPhase::Unknown)
        ) {
            continue;
        }
        let cluster = j.tasks.iter().find_map(|t| {
            let s = ssn.state.status(&ssn.snap, *t);
            if s.holds_node() {
                ssn.state
                    .task_node(&ssn.snap, *t)
                    .and_then(|n| ssn.snap.nodes.get(n))
                    .map(|n| n.cluster)
            } else {
                None
            }
        });
        let Some(cluster) = cluster else { continue };
        let mut held = Resources::ZERO;
        for &t in &j.tasks {
            if ssn.state.status(&ssn.snap, t).holds_node()
                && let Some(task) = ssn.snap.tasks.get(t)
            {
                held.add(&task.spec.shape.request);
            }
        }
        out.push(Running {
            held,
            job: id,
            queue: g.queue.clone(),
            priority: ssn.snap.job_priority(j),
            created: g.created,
            cluster,
        });
    }
    // Lowest priority first, then the most recently started.
    out.sort_by(|a, b| {
        a.priority
            .cmp(&b.priority)
            .then(b.created.cmp(&a.created))
            .then(a.job.cmp(&b.job))
    });
    out
}

/// A running job that may lose tasks in one cluster.
#[derive(Clone, Debug)]
pub struct Victim {
    /// Its evictable running tasks in the cluster, the ones to go first first.
    pub tasks: Vec<Id>,
    /// How many of them may go while the gang stays at minMember (0: none).
    pub spare: usize,
}

/// Running, evictable tasks of `job` in `cluster`, latest index first, and how many of them can
/// go without cutting the gang below its minimum. `None` when the job has nothing evictable
/// there or runs in several clusters.
pub fn victim(ssn: &Session, job: Id, cluster: Id) -> Option<Victim> {
    let j = ssn.snap.jobs.get(job)?;
    let hooks = ssn.hooks();
    let mut here = Vec::new();
    let mut ready = 0usize;
    let mut role_ready: BTreeMap<&str, u32> = BTreeMap::new();
    for &t in &j.tasks {
        let status = ssn.state.status(&ssn.snap, t);
        let task = ssn.snap.tasks.get(t)?;
        if status.is_ready() {
            ready += 1;
            *role_ready.entry(task.spec.shape.role.as_str()).or_insert(0) += 1;
        }
        if !matches!(status, TaskStatus::Running | TaskStatus::Bound) {
            continue;
        }
        if task.spec.status != status {
            // Placed or changed in this very session: only pods that were already running
            // are evicted (as Volcano does).
            continue;
        }
        let node = ssn.state.task_node(&ssn.snap, t)?;
        if ssn.snap.nodes.get(node).map(|n| n.cluster) != Some(cluster) {
            // A gang spread over clusters is left alone: evicting part of it here could cut
            // it below its minimum overall.
            return None;
        }
        if !task.spec.shape.preemptable || !hooks.victim_allowed(t) {
            // One protected task protects the gang: evicting the rest could break it.
            return None;
        }
        here.push(t);
    }
    if here.is_empty() {
        return None;
    }
    here.sort_by_key(|t| {
        std::cmp::Reverse(ssn.snap.tasks.get(*t).map_or(0, |task| task.spec.index))
    });
    // Spare tasks: while the gang stays at minMember and each role at its minTaskMember.
    let mins = j.group.as_ref().map(|g| g.role_minimums());
    let mut total = ready;
    let (mut spare, mut rest) = (Vec::new(), Vec::new());
    for t in here {
        let role = ssn
            .snap
            .tasks
            .get(t)
            .map_or("", |task| task.spec.shape.role.as_str());
        let role_min = mins.and_then(|m| m.get(role)).copied().unwrap_or(0);
        let have = role_ready.get(role).copied().unwrap_or(0);
        if total > j.min_member() as usize && have > role_min {
            spare.push(t);
            total -= 1;
            if let Some(r) = role_ready.get_mut(role) {
                *r -= 1;
            }
        } else {
            rest.push(t);
        }
    }
    let n_spare = spare.len();
    spare.extend(rest);
    Some(Victim {
        tasks: spare,
        spare: n_spare,
    })
}
