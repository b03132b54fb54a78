//! Draining nodes for a gang past its SLA: its pods that do not fit anywhere now are each
//! given a node that could hold them once what runs there finishes, and everything that frees
//! up on that node is held for them (`framework/holds.rs`), session after session, until the
//! whole gang fits. Without it, a stream of small jobs refills every node as soon as part of
//! it frees, and a gang that needs whole nodes never starts.
//!
//! A job keeps room only if that takes from no queue under its deserved share ([`may_hold`]).
//!
//! One job drains at a time, as Volcano's reservation elects one target job: two late gangs
//! that each wait for whole nodes would otherwise split the nodes that free up and neither
//! would start. The next late job drains once the first holds only free room (or starts).
//!
//! The nodes are chosen to finish soonest: those the job already drained in the last session
//! first (so the work done is not thrown away), then those with the most of the pod's request
//! already free.

use std::collections::BTreeSet;

use crate::framework::fit::Unfit;
use crate::framework::session::Session;
use crate::model::{Id, TaskStatus};

/// Holds a node in `cluster` for each of `job`'s pods still waiting, other than the nodes in
/// `taken` (where it just reserved room) and those anything else is reserved or held on;
/// returns how many.
pub fn drain(ssn: &mut Session, job: Id, cluster: Id, mut taken: BTreeSet<Id>) -> usize {
    let Some(j) = ssn.snap.jobs.get(job) else {
        return 0;
    };
    let waiting: Vec<Id> = j
        .tasks
        .iter()
        .copied()
        .filter(|t| ssn.state.status(&ssn.snap, *t) == TaskStatus::Pending)
        .collect();
    if waiting.is_empty() || ssn.state.draining_other_than(job) {
        return 0;
    }
    let before: BTreeSet<Id> = ssn
        .snap
        .nominated
        .iter()
        .filter(|(t, _)| ssn.snap.tasks.get(**t).is_some_and(|t| t.job == job))
        .map(|(_, n)| *n)
        .collect();
    let nodes: Vec<Id> = ssn
        .snap
        .cluster_nodes
        .get(cluster as usize)
        .cloned()
        .unwrap_or_default();
    // Nodes something else is held on are not drained twice.
    taken.extend(ssn.state.holds.values().flatten().map(|h| h.node));
    let mut held = 0;
    for task in waiting {
        let Some(t) = ssn.snap.tasks.get(task) else {
            continue;
        };
        let req = t.spec.shape.request;
        let hooks = ssn.hooks();
        let best = nodes
            .iter()
            .copied()
            .filter(|n| !taken.contains(n) && ssn.state.nodes[*n as usize].pipelined.is_zero())
            .filter(|&n| {
                // Large enough once drained, and refused now (if at all) only for room.
                ssn.snap
                    .nodes
                    .get(n)
                    .is_some_and(|node| req.fits_in(&node.allocatable()).is_ok())
                    && match hooks.predicate(t, n) {
                        Ok(()) => true,
                        Err(u) => matches!(u, Unfit::Insufficient(_) | Unfit::TooManyPods),
                    }
            })
            .max_by_key(|&n| {
                let idle = ssn.state.nodes[n as usize].idle;
                // How much of the request is free already, in thousandths of the scarcest
                // resource.
                let ready = (0..crate::resources::MAX_RESOURCES)
                    .filter(|&i| req.get(i) > 0)
                    .map(|i| {
                        let free = i128::from(idle.get(i).max(0).min(req.get(i)));
                        free * 1000 / i128::from(req.get(i))
                    })
                    .min()
                    .unwrap_or(1000);
                (before.contains(&n), ready, std::cmp::Reverse(n))
            });
        if let Some(n) = best {
            taken.insert(n);
            ssn.state.hold(&ssn.snap, job, task, n);
            held += 1;
        }
    }
    held
}

/// Whether `job` may keep room for itself beyond this session: its queue stays within its
/// deserved share once the gang runs, or no other queue asks for anything (then holding room
/// takes from no one). Always so without a share provider.
pub fn may_hold(ssn: &Session, job: Id) -> bool {
    let Some(j) = ssn.snap.jobs.get(job) else {
        return false;
    };
    let queue = j.queue();
    let hooks = ssn.hooks();
    let Some((figures, _)) = hooks.queue_figures(queue) else {
        return true;
    };
    let mut need = ssn
        .state
        .queue_allocated
        .get(queue)
        .copied()
        .unwrap_or_default();
    for &t in &j.tasks {
        if ssn.state.status(&ssn.snap, t) == TaskStatus::Pending
            && let Some(t) = ssn.snap.tasks.get(t)
        {
            need.add(&t.spec.shape.request);
        }
    }
    if need.fits_in(&figures.deserved).is_ok() {
        return true;
    }
    ssn.snap.queues.keys().all(|q| {
        q == queue
            || hooks
                .queue_figures(q)
                .is_none_or(|(f, _)| f.request.is_zero())
    })
}
