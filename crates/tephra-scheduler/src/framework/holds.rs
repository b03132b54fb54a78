//! Held room: what a session keeps for a job on a node without placing its pod there yet, so
//! that no other job takes it. A hold takes what the node has free, up to the pod's request,
//! and reserves the rest of the request against what frees up later (as a pipelined pod
//! does), so neither allocation nor pipelining by another job can use it.
//!
//! A session opens with a hold for every nomination the last one left (`cache/nominations.rs`);
//! the job gets its holds back when it is placed, and whatever it still holds when the session
//! closes is nominated again if it may keep it (`Session::held_decisions` in `status.rs`).

use super::state::{Hold, State};
use crate::cache::Snapshot;
use crate::model::{Id, TaskStatus};
use crate::resources::Resources;

impl State {
    /// Holds room on `node` for `task` of `job`: its free resources up to the request, and the
    /// rest against what frees up later.
    pub fn hold(&mut self, snap: &Snapshot, job: Id, task: Id, node: Id) {
        let (Some(t), Some(n)) = (snap.tasks.get(task), snap.nodes.get(node)) else {
            return;
        };
        let Some(ns) = self.nodes.get_mut(node as usize) else {
            return;
        };
        let req = t.spec.shape.request;
        let idle = req.min(&ns.idle.max(&Resources::ZERO));
        let later = req.minus(&idle);
        ns.idle.sub(&idle);
        ns.pipelined.add(&later);
        if let Some(c) = self.cluster_future_idle.get_mut(n.cluster as usize) {
            c.sub(&req);
        }
        self.domains_add(n.cluster as usize, node, &req.times(-1));
        self.holds.entry(job).or_default().push(Hold {
            task,
            node,
            idle,
            later,
        });
    }

    /// Gives back everything held for `job`.
    pub fn release(&mut self, snap: &Snapshot, job: Id) {
        for h in self.holds.remove(&job).unwrap_or_default() {
            let Some(ns) = self.nodes.get_mut(h.node as usize) else {
                continue;
            };
            ns.idle.add(&h.idle);
            ns.pipelined.sub(&h.later);
            let future = ns.future_idle().max(&Resources::ZERO);
            let Some(c) = snap.nodes.get(h.node).map(|n| n.cluster as usize) else {
                continue;
            };
            if let Some(sum) = self.cluster_future_idle.get_mut(c) {
                sum.add(&h.idle.plus(&h.later));
            }
            self.domains_add(c, h.node, &h.idle.plus(&h.later));
            // The bound must stay an upper bound of any node's future idle.
            if let Some(max) = self.cluster_max_node_idle.get_mut(c) {
                *max = max.max(&future);
            }
        }
    }

    /// Holds room for every nomination of the snapshot whose pod still waits.
    pub fn hold_nominations(&mut self, snap: &Snapshot) {
        for (&task, &node) in &snap.nominated {
            let Some(t) = snap.tasks.get(task) else {
                continue;
            };
            if t.spec.status == TaskStatus::Pending && snap.nodes.get(node).is_some() {
                self.hold(snap, t.job, task, node);
            }
        }
    }

    /// Whether a job other than `job` holds room that is still in use (it is draining nodes).
    pub fn draining_other_than(&self, job: Id) -> bool {
        self.holds
            .iter()
            .any(|(j, holds)| *j != job && holds.iter().any(|h| !h.later.is_zero()))
    }
}
