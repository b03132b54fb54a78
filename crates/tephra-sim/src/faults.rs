//! Faults: a cluster unreachable or not ready, nodes down, and recovery. What a fault does to
//! the gangs it hits is the controllers' stand-in rule
//! ([`tephra_controllers::requeue_on_fault`]); here the fleet changes and the rule is carried
//! out.

use tephra_controllers::requeue_on_fault;
use tephra_scheduler::cache::Event;
use tephra_scheduler::model::NodeSpec;

use crate::checker::NodeKey;
use crate::error::SimError;
use crate::record::Record;
use crate::scenario::FaultKind;
use crate::state::{Ev, PodState, Sim};

impl Sim<'_> {
    /// Applies the stand-in failover rule to a fault that took away the nodes `lost` holds.
    fn requeue_on(
        &mut self,
        lost: &dyn Fn(&NodeKey) -> bool,
        reason: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let hit = requeue_on_fault::gangs_to_requeue(
            self.pods
                .values()
                .filter(|p| matches!(p.state, PodState::Bound | PodState::Running))
                .filter_map(|p| p.node.as_ref().map(|n| (p.job.as_str(), n))),
            lost,
        );
        for job_key in hit {
            let Some(j) = self.jobs.get(&job_key) else {
                continue;
            };
            let pods = j.pods.clone();
            for pod in pods {
                self.evict_pod(&pod, &requeue_on_fault::reason(reason), "fault", out)?;
            }
            // A Volcano Job's controller decides what its evicted pods mean.
            if !self.is_volcano(&job_key) {
                self.requeue_group(&job_key)?;
            }
        }
        self.mark_dirty();
        Ok(())
    }

    fn set_cluster_ready(&mut self, name: &str, ready: bool) -> Result<(), SimError> {
        let Some(c) = self.clusters.get_mut(name) else {
            return Ok(());
        };
        c.ready = ready;
        let c = c.clone();
        self.checker.cluster_ready(name, ready);
        self.apply(Event::ClusterUpsert(c))
    }

    fn set_node_ready(&mut self, cluster: &str, node: &str, ready: bool) -> Result<(), SimError> {
        let Some(cap) = self
            .nodes
            .get(cluster)
            .and_then(|ns| ns.iter().find(|(n, _)| n == node))
            .map(|(_, c)| c.clone())
        else {
            return Ok(());
        };
        let Some(id) = self.cache.world().node_id(cluster, node) else {
            return Ok(());
        };
        let Some(spec) = self.cache.world().nodes.get(id).map(|n| n.spec.clone()) else {
            return Ok(());
        };
        let _ = cap;
        self.checker.node_ready(cluster, node, ready);
        self.apply(Event::NodeUpsert(NodeSpec { ready, ..spec }))
    }

    fn fault_nodes(&self, i: usize) -> Vec<String> {
        let f = &self.faults[i];
        let all: Vec<String> = self
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
            out(&Record::fault("recover", self.now, &f.cluster, None, kind));
            match f.kind {
                FaultKind::NodeDown => {
                    for n in self.fault_nodes(i) {
                        let key = (f.cluster.clone(), n.clone());
                        let left = self
                            .down_nodes
                            .get(&key)
                            .copied()
                            .unwrap_or(1)
                            .saturating_sub(1);
                        if left == 0 {
                            self.down_nodes.remove(&key);
                            self.set_node_ready(&f.cluster, &n, true)?;
                        } else {
                            self.down_nodes.insert(key, left);
                        }
                    }
                }
                _ => {
                    self.set_cluster_ready(&f.cluster, true)?;
                    let downs: Vec<String> = self
                        .down_nodes
                        .keys()
                        .filter(|(c, _)| *c == f.cluster)
                        .map(|(_, n)| n.clone())
                        .collect();
                    if f.kind == FaultKind::Recover {
                        for n in downs {
                            self.down_nodes.remove(&(f.cluster.clone(), n.clone()));
                            self.set_node_ready(&f.cluster, &n, true)?;
                        }
                    }
                }
            }
            self.mark_dirty();
            return Ok(());
        }
        match f.kind {
            FaultKind::Unreachable | FaultKind::Notready => {
                out(&Record::fault("fault", self.now, &f.cluster, None, kind));
                self.set_cluster_ready(&f.cluster, false)?;
                let cluster = f.cluster.clone();
                self.requeue_on(
                    &|n: &(String, String)| n.0 == cluster,
                    &format!("cluster {} {kind}", f.cluster),
                    out,
                )?;
            }
            FaultKind::NodeDown => {
                let nodes = self.fault_nodes(i);
                for n in &nodes {
                    out(&Record::fault("fault", self.now, &f.cluster, Some(n), kind));
                    *self
                        .down_nodes
                        .entry((f.cluster.clone(), n.clone()))
                        .or_insert(0) += 1;
                    self.set_node_ready(&f.cluster, n, false)?;
                }
                let cluster = f.cluster.clone();
                self.requeue_on(
                    &|x: &(String, String)| x.0 == cluster && nodes.contains(&x.1),
                    &format!("node(s) down in cluster {}", f.cluster),
                    out,
                )?;
            }
            FaultKind::Recover => {}
        }
        if let Some(d) = f.duration {
            self.push(self.now + d.0, Ev::FaultEnd(i));
        }
        Ok(())
    }
}
