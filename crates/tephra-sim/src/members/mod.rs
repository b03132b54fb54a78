//! The member clusters as the control plane sees them, through the same controllers the
//! controller-manager runs: the cluster status controller probes each member on its period
//! ([`tephra_controllers::cluster_health`]) and sets its `Ready` condition once a change has
//! held for its threshold; the cluster controller turns the condition into taints
//! ([`tephra_controllers::cluster_taints`]), NoSchedule at once and NoExecute after the grace;
//! a NoExecute taint wakes the taint manager ([`crate::failover`]).
//!
//! What a fault does to a member (its truth) is set by [`crate::faults`]: how its `/readyz`
//! answers, and whether it is cut off. A member that is cut off is at once unschedulable in
//! the scheduler's cache (its watchers fail), and nothing it does is heard until it answers
//! again: its pods' starts, exits and terminations are held and delivered then.
//!
//! Probes are only simulated while one could change something (the probe answers otherwise
//! than the condition says), so a healthy fleet costs no events.
//!
//! A member itself, its fleet at time 0 and the chain's timings are in `member.rs`.

use k8s_openapi::api::core::v1::Taint as K8sTaint;
use tephra_controllers::cluster_health::next_ready;
use tephra_controllers::cluster_taints;
use tephra_scheduler::cache::Event;

use crate::agenda::Ev;
use crate::error::SimError;
use crate::record::Record;
use crate::state::Sim;

pub(crate) mod fleet;
pub(crate) mod member;

impl Sim {
    /// The cache and the checker take a member's readiness (Ready condition True, and
    /// reachable) and taints.
    fn sync_cluster(&mut self, name: &str) -> Result<(), SimError> {
        let Some(m) = self.fleet.members.get(name) else {
            return Ok(());
        };
        let ready = m.condition_status() == "True" && !m.cut_off();
        let taints = tephra_controllers::pod::taint_list(&m.taints);
        let Some(c) = self.fleet.clusters.get_mut(name) else {
            return Ok(());
        };
        if c.ready == ready && c.taints == taints {
            return Ok(());
        }
        c.ready = ready;
        c.taints = taints.clone();
        let c = c.clone();
        self.ctx.checker.cluster_ready(name, ready);
        self.ctx.checker.cluster_taints(name, taints);
        self.ctx.apply(Event::ClusterUpsert(c))?;
        self.ctx.mark_dirty();
        Ok(())
    }

    /// A fault began or ended on `name`: the cache follows what the scheduler's watchers see,
    /// the probes start, and a member that answers again delivers what it held.
    pub(crate) fn member_changed(&mut self, name: &str) -> Result<(), SimError> {
        self.sync_cluster(name)?;
        self.probe_soon(name);
        let Some(m) = self.fleet.members.get_mut(name) else {
            return Ok(());
        };
        if !m.cut_off() {
            let held = std::mem::take(&mut m.held);
            for ev in held {
                self.ctx.push(self.ctx.now, ev);
            }
            self.evictions_in(name)?;
        }
        Ok(())
    }

    /// Holds `ev`, about a pod in `cluster`, while the member is cut off. Returns whether it
    /// was held.
    pub(crate) fn hold_if_cut_off(&mut self, cluster: &str, ev: &Ev) -> bool {
        match self.fleet.members.get_mut(cluster) {
            Some(m) if m.cut_off() => {
                m.held.push(ev.clone());
                true
            }
            _ => false,
        }
    }

    /// Whether the control plane can reach `cluster`.
    pub(crate) fn reachable(&self, cluster: &str) -> bool {
        self.fleet.members.get(cluster).is_none_or(|m| !m.cut_off())
    }

    fn probe_soon(&mut self, name: &str) {
        let period = self.fleet.timings.probe_ms;
        let Some(m) = self.fleet.members.get_mut(name) else {
            return;
        };
        if m.probing {
            return;
        }
        m.probing = true;
        // Probes run on the controller's period, from time 0.
        let at = (self.ctx.now + period - 1) / period * period;
        let at = if at <= self.ctx.now {
            self.ctx.now + period
        } else {
            at
        };
        self.ctx.push(at, Ev::Probe(name.to_string()));
    }

    /// One probe of `name`: the condition may change, and the taints with it.
    pub(crate) fn probe(
        &mut self,
        name: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let (now, t) = (self.ctx.now, self.fleet.timings.thresholds);
        let Some(m) = self.fleet.members.get_mut(name) else {
            return Ok(());
        };
        m.probing = false;
        let probe = m.probe();
        let before = m.condition_status().to_string();
        if let Some(c) = next_ready(m.ready.as_ref(), &mut m.seen, &probe, now, t) {
            m.ready = Some(c);
        }
        let after = m.condition_status().to_string();
        let pending = after != probe.status();
        if after != before {
            out(&Record::fault("ready", now, name, None, &after));
            self.detected(name, &after);
            self.taints_pass(name, out)?;
        }
        if pending {
            self.probe_soon(name);
        }
        Ok(())
    }

    /// The cluster controller's pass over `name`: taints from the Ready condition.
    pub(crate) fn taints_pass(
        &mut self,
        name: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let (now, grace) = (self.ctx.now, self.fleet.timings.no_execute_ms);
        let Some(m) = self.fleet.members.get_mut(name) else {
            return Ok(());
        };
        let next = cluster_taints::taints(&m.taints, m.ready.as_ref(), now, Some(grace));
        if let Some(w) = next.write {
            let said = |list: &[K8sTaint], other: &[K8sTaint]| -> Vec<String> {
                list.iter()
                    .filter(|t| !other.contains(t))
                    .map(|t| format!("{}:{}", t.key, t.effect))
                    .collect()
            };
            let added = said(&w, &m.taints);
            let removed = said(&m.taints, &w);
            m.taints = w;
            for t in added {
                out(&Record::fault("taint", now, name, None, &t));
            }
            for t in removed {
                out(&Record::fault("untaint", now, name, None, &t));
            }
            self.sync_cluster(name)?;
        }
        if let Some(at) = next.wake_ms {
            self.ctx.push(at, Ev::Taints(name.to_string()));
        }
        self.taint_manager(name, out)
    }

    /// The taints of `cluster` as the Cluster object has them.
    pub(crate) fn cluster_taints(&self, cluster: &str) -> Option<&[K8sTaint]> {
        self.fleet.members.get(cluster).map(|m| m.taints.as_slice())
    }
}
