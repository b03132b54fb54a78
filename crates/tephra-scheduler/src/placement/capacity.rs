//! What each cluster could ever hold, whatever runs on it now: the sum of its nodes'
//! allocatable and, per resource, the most one node has. Admission uses it so that no gang is
//! admitted that no eligible cluster can ever hold (fleet-wide totals would admit a gang that
//! fits only across clusters it may not span).

use super::job::eligible_clusters;
use crate::framework::fit::Room;
use crate::framework::session::Session;
use crate::model::Id;
use crate::resources::Resources;

/// One cluster's capacity.
#[derive(Clone, Copy, Debug, Default)]
pub struct Capacity {
    /// Sum of its nodes' allocatable.
    pub total: Resources,
    /// The most of each resource on one node.
    pub node_max: Resources,
}

/// Every cluster's capacity, by cluster id, from the totals the session state keeps.
pub fn capacities(ssn: &Session) -> Vec<Capacity> {
    ssn.state
        .cluster_allocatable
        .iter()
        .zip(&ssn.state.cluster_node_max)
        .map(|(&total, &node_max)| Capacity { total, node_max })
        .collect()
}

/// Why `job` can never be placed, if that is so: its gang (minResources) fits no eligible
/// cluster in total (all eligible clusters together when it may be split), or its largest task
/// fits no node of an eligible cluster. `None` when it could fit somewhere once room is made.
pub fn never_fits(ssn: &Session, job: Id, caps: &[Capacity]) -> Option<String> {
    let j = ssn.snap.jobs.get(job)?;
    let g = j.group.as_ref()?;
    // Without minResources only the largest task is checked.
    let min = g.min_resources.unwrap_or(Resources::ZERO);
    let largest = j
        .tasks
        .iter()
        .filter_map(|&t| ssn.snap.tasks.get(t))
        .map(|t| t.spec.shape.request)
        .fold(Resources::ZERO, |acc, r| acc.max(&r));
    if ssn.snap.clusters.iter().any(|(_, c)| !c.ready) {
        // A cluster that is down may be the one that can hold the gang: no verdict until it
        // is back.
        return None;
    }
    let (eligible, _) = eligible_clusters(ssn, job, Room::Making);
    if eligible.is_empty() {
        // The cluster filters explain this themselves when placement is tried.
        return None;
    }
    let cap = |c: Id| caps.get(c as usize).copied().unwrap_or_default();
    let task_fits = |c: Id| largest.fits_in(&cap(c).node_max).is_ok();
    let fits = if g.policy.splittable {
        let total = eligible
            .iter()
            .fold(Resources::ZERO, |acc, &c| acc.plus(&cap(c).total));
        min.fits_in(&total).is_ok() && eligible.iter().any(|&c| task_fits(c))
    } else {
        eligible
            .iter()
            .any(|&c| min.fits_in(&cap(c).total).is_ok() && task_fits(c))
    };
    if fits {
        return None;
    }
    let names = &ssn.snap.names;
    let short = |avail: &Resources, need: &Resources| match need.fits_in(avail) {
        Err(r) => names.name(r).to_string(),
        Ok(()) => String::new(),
    };
    let sum = eligible
        .iter()
        .fold(Resources::ZERO, |acc, &c| acc.plus(&cap(c).total));
    let biggest = eligible
        .iter()
        .copied()
        .max_by_key(|&c| cap(c).total.0.iter().sum::<i64>())
        .unwrap_or(eligible[0]);
    let what = if g.policy.splittable && min.fits_in(&sum).is_err() {
        format!(
            "its minResources exceed the {} of all eligible clusters together",
            short(&sum, &min)
        )
    } else if !g.policy.splittable && min.fits_in(&cap(biggest).total).is_err() {
        format!(
            "its minResources exceed the {} of every eligible cluster, and a gang that may \
             not be split must fit in one",
            short(&cap(biggest).total, &min)
        )
    } else {
        format!(
            "its largest task needs more {} than any node of an eligible cluster has",
            short(&cap(biggest).node_max, &largest)
        )
    };
    Some(format!("the job can never be placed: {what}"))
}
