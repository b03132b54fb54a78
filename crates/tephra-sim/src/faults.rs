//! Faults, as they happen to a member (its truth): a cluster cut off (`unreachable`: its API
//! server does not answer, its pods run on unheard), a cluster whose `/readyz` answers not ok
//! (`notready`: its pods run and report), nodes down, and recovery. What the control plane
//! makes of a cluster fault is the failover chain's to decide ([`crate::members`],
//! [`crate::failover`]), never this file's.
//!
//! A node that goes down is the member's own business: its kubelet stops, its pods fail, and a
//! gang that lost a pod is restarted whole (its pods go back to Pending and its PodGroup to
//! Inqueue), as Volcano's default policy restarts a Job whose pod is evicted.

use std::collections::BTreeSet;

use tephra_scheduler::cache::Event;
use tephra_scheduler::model::NodeSpec;

use crate::agenda::Ev;
use crate::error::SimError;
use crate::record::Record;
use crate::scenario::FaultKind;
use crate::state::{PodState, Sim};

impl Sim {
    /// The pods on `lost` nodes fail, and each gang that had one there restarts whole.
    fn node_lifecycle(
        &mut self,
        cluster: &str,
        lost: &[String],
        fault: usize,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let hit: BTreeSet<String> = self
            .flight
            .pods
            .values()
            .filter(|p| matches!(p.state, PodState::Bound | PodState::Running))
            .filter(|p| {
                p.node
                    .as_ref()
                    .is_some_and(|(c, n)| c == cluster && lost.contains(n))
            })
            .map(|p| p.job.clone())
            .collect();
        let reason = format!("node(s) down in cluster {cluster}; the gang restarts whole");
        for job_key in hit {
            let Some(pods) = self.flight.jobs.get(&job_key).map(|j| j.pods.clone()) else {
                continue;
            };
            self.failover.fault_restarted(fault, &job_key);
            for pod in pods {
                self.evict_pod(&pod, &reason, "fault", out)?;
            }
            // A Volcano Job's controller decides what its evicted pods mean.
            if !self.flight.is_volcano(&job_key) {
                self.flight.requeue_group(&mut self.ctx, &job_key)?;
            }
        }
        self.ctx.mark_dirty();
        Ok(())
    }

    fn set_node_ready(&mut self, cluster: &str, node: &str, ready: bool) -> Result<(), SimError> {
        let Some(id) = self.ctx.cache.world().node_id(cluster, node) else {
            return Ok(());
        };
        let Some(spec) = self.ctx.cache.world().nodes.get(id).map(|n| n.spec.clone()) else {
            return Ok(());
        };
        self.ctx.checker.node_ready(cluster, node, ready);
        self.ctx
            .apply(Event::NodeUpsert(NodeSpec { ready, ..spec }))
    }

    fn fault_nodes(&self, i: usize) -> Vec<String> {
        let f = &self.faults[i];
        let all: Vec<String> = self
            .fleet
            .nodes
            .get(&f.cluster)
            .map(|ns| ns.iter().map(|(n, _)| n.clone()).collect())
            .unwrap_or_default();
        match (&f.node, f.count) {
            (Some(n), _) => all.into_iter().filter(|x| x == n).collect(),
            (None, Some(c)) => all.into_iter().take(c).collect(),
            (None, None) => Vec::new(),
        }
    }

    /// Changes the count of faults of `kind` in force on `cluster` by `delta`.
    fn member_fault(&mut self, cluster: &str, kind: FaultKind, delta: i32) {
        if let Some(m) = self.fleet.members.get_mut(cluster) {
            let n = match kind {
                FaultKind::Unreachable => &mut m.unreachable,
                FaultKind::Notready => &mut m.notready,
                _ => return,
            };
            *n = n.saturating_add_signed(delta);
        }
    }

    pub(crate) fn fault(
        &mut self,
        i: usize,
        begin: bool,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let f = self.faults[i].clone();
        let kind = match f.kind {
            FaultKind::Unreachable => "unreachable",
            FaultKind::Notready => "notready",
            FaultKind::NodeDown => "node-down",
            FaultKind::Recover => "recover",
        };
        if !begin || f.kind == FaultKind::Recover {
            // Recover: the fault's scope comes back (a `recover` fault restores the cluster).
            out(&Record::fault(
                "recover",
                self.ctx.now,
                &f.cluster,
                None,
                kind,
            ));
            if let Some(r) = self.failover.record_of.get(&i).copied() {
                self.failover.fault_closed(self.ctx.now, r);
            }
            match f.kind {
                FaultKind::NodeDown => {
                    for n in self.fault_nodes(i) {
                        let key = (f.cluster.clone(), n.clone());
                        let left = self
                            .fleet
                            .down_nodes
                            .get(&key)
                            .copied()
                            .unwrap_or(1)
                            .saturating_sub(1);
                        if left == 0 {
                            self.fleet.down_nodes.remove(&key);
                            self.set_node_ready(&f.cluster, &n, true)?;
                        } else {
                            self.fleet.down_nodes.insert(key, left);
                        }
                    }
                }
                FaultKind::Recover => {
                    if let Some(m) = self.fleet.members.get_mut(&f.cluster) {
                        m.unreachable = 0;
                        m.notready = 0;
                    }
                    let downs: Vec<String> = self
                        .fleet
                        .down_nodes
                        .keys()
                        .filter(|(c, _)| *c == f.cluster)
                        .map(|(_, n)| n.clone())
                        .collect();
                    for n in downs {
                        self.fleet
                            .down_nodes
                            .remove(&(f.cluster.clone(), n.clone()));
                        self.set_node_ready(&f.cluster, &n, true)?;
                    }
                    // The faults it ended are over.
                    let open: Vec<usize> = self
                        .failover
                        .record_of
                        .iter()
                        .filter(|(fi, _)| self.faults[**fi].cluster == f.cluster)
                        .map(|(_, r)| *r)
                        .collect();
                    for r in open {
                        self.failover.fault_closed(self.ctx.now, r);
                    }
                    self.member_changed(&f.cluster)?;
                }
                kind => {
                    self.member_fault(&f.cluster, kind, -1);
                    self.member_changed(&f.cluster)?;
                }
            }
            self.ctx.mark_dirty();
            return Ok(());
        }
        let record = self
            .failover
            .fault_opened(&self.fleet, self.ctx.now, &f.cluster, kind);
        self.failover.record_of.insert(i, record);
        match f.kind {
            FaultKind::Unreachable | FaultKind::Notready => {
                out(&Record::fault(
                    "fault",
                    self.ctx.now,
                    &f.cluster,
                    None,
                    kind,
                ));
                self.member_fault(&f.cluster, f.kind, 1);
                self.member_changed(&f.cluster)?;
            }
            FaultKind::NodeDown => {
                let nodes = self.fault_nodes(i);
                for n in &nodes {
                    out(&Record::fault(
                        "fault",
                        self.ctx.now,
                        &f.cluster,
                        Some(n),
                        kind,
                    ));
                    *self
                        .fleet
                        .down_nodes
                        .entry((f.cluster.clone(), n.clone()))
                        .or_insert(0) += 1;
                    self.set_node_ready(&f.cluster, n, false)?;
                }
                self.node_lifecycle(&f.cluster, &nodes, record, out)?;
            }
            FaultKind::Recover => {}
        }
        if let Some(d) = f.duration {
            self.ctx.push(self.ctx.now + d.0, Ev::FaultEnd(i));
        }
        Ok(())
    }

    /// Whether a pod event must wait for its member to answer (held, see
    /// [`crate::members`]): returns true when it was held.
    pub(crate) fn held(&mut self, ev: &Ev) -> bool {
        let pod = match ev {
            Ev::Start(p, _) | Ev::Finish(p, _) | Ev::Released(p, _) => p,
            _ => return false,
        };
        let Some(cluster) = self
            .flight
            .pods
            .get(pod)
            .and_then(|p| p.node.as_ref())
            .map(|(c, _)| c.clone())
        else {
            return false;
        };
        self.fleet.hold_if_cut_off(&cluster, ev)
    }
}
