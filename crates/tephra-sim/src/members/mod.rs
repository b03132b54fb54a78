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
//! These passes are methods of the [`Fleet`](fleet::Fleet) (`fleet.rs`); what follows from them
//! elsewhere (a fault detected, the taint manager's pass) is the coordinator's to call. A
//! member itself, its fleet at time 0 and the chain's timings are in `member.rs`.

use k8s_openapi::api::core::v1::Taint as K8sTaint;
use tephra_controllers::cluster_health::next_ready;
use tephra_controllers::cluster_taints;
use tephra_scheduler::cache::Event;

use crate::agenda::Ev;
use crate::ctx::Ctx;
use crate::error::SimError;
use crate::record::Record;
use fleet::Fleet;

pub(crate) mod fleet;
pub(crate) mod member;

impl Fleet {
    /// The cache and the checker take a member's readiness (Ready condition True, and
    /// reachable) and taints.
    fn sync_cluster(&mut self, ctx: &mut Ctx, name: &str) -> Result<(), SimError> {
        let Some(m) = self.members.get(name) else {
            return Ok(());
        };
        let ready = m.condition_status() == "True" && !m.cut_off();
        let taints = tephra_controllers::pod::taint_list(&m.taints);
        let Some(c) = self.clusters.get_mut(name) else {
            return Ok(());
        };
        if c.ready == ready && c.taints == taints {
            return Ok(());
        }
        c.ready = ready;
        c.taints = taints.clone();
        let c = c.clone();
        ctx.checker.cluster_ready(name, ready);
        ctx.checker.cluster_taints(name, taints);
        ctx.apply(Event::ClusterUpsert(c))?;
        ctx.mark_dirty();
        Ok(())
    }

    /// A fault began or ended on `name`: the cache follows what the scheduler's watchers see,
    /// the probes start, and a member that answers again delivers what it held. Returns
    /// whether it answers (failover's old copies there may go).
    pub(crate) fn member_changed(&mut self, ctx: &mut Ctx, name: &str) -> Result<bool, SimError> {
        self.sync_cluster(ctx, name)?;
        self.probe_soon(ctx, name);
        let Some(m) = self.members.get_mut(name) else {
            return Ok(false);
        };
        if m.cut_off() {
            return Ok(false);
        }
        for ev in std::mem::take(&mut m.held) {
            ctx.push(ctx.now, ev);
        }
        Ok(true)
    }

    /// Holds `ev`, about a pod in `cluster`, while the member is cut off. Returns whether it
    /// was held.
    pub(crate) fn hold_if_cut_off(&mut self, cluster: &str, ev: &Ev) -> bool {
        match self.members.get_mut(cluster) {
            Some(m) if m.cut_off() => {
                m.held.push(ev.clone());
                true
            }
            _ => false,
        }
    }

    /// Whether the control plane can reach `cluster`.
    pub(crate) fn reachable(&self, cluster: &str) -> bool {
        self.members.get(cluster).is_none_or(|m| !m.cut_off())
    }

    /// Puts a probe of `name` on the agenda, at the controller's next period, if none is.
    pub(crate) fn probe_soon(&mut self, ctx: &mut Ctx, name: &str) {
        let period = self.timings.probe_ms;
        let Some(m) = self.members.get_mut(name) else {
            return;
        };
        if m.probing {
            return;
        }
        m.probing = true;
        // Probes run on the controller's period, from time 0.
        let at = (ctx.now + period - 1) / period * period;
        let at = if at <= ctx.now { ctx.now + period } else { at };
        ctx.push(at, Ev::Probe(name.to_string()));
    }

    /// One probe of `name`: the condition may change. Returns the condition's new status if
    /// it changed, and whether the probe still answers otherwise than the condition says
    /// (another probe is due).
    pub(crate) fn probe(
        &mut self,
        now: i64,
        name: &str,
        out: &mut dyn FnMut(&Record),
    ) -> (Option<String>, bool) {
        let t = self.timings.thresholds;
        let Some(m) = self.members.get_mut(name) else {
            return (None, false);
        };
        m.probing = false;
        let probe = m.probe();
        let before = m.condition_status().to_string();
        if let Some(c) = next_ready(m.ready.as_ref(), &mut m.seen, &probe, now, t) {
            m.ready = Some(c);
        }
        let after = m.condition_status().to_string();
        let pending = after != probe.status();
        if after == before {
            return (None, pending);
        }
        out(&Record::fault("ready", now, name, None, &after));
        (Some(after), pending)
    }

    /// The cluster controller's pass over `name`: taints from the Ready condition. Returns
    /// whether `name` is a member (the taint manager looks at its jobs then).
    pub(crate) fn taints_pass(
        &mut self,
        ctx: &mut Ctx,
        name: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<bool, SimError> {
        let (now, grace) = (ctx.now, self.timings.no_execute_ms);
        let Some(m) = self.members.get_mut(name) else {
            return Ok(false);
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
            self.sync_cluster(ctx, name)?;
        }
        if let Some(at) = next.wake_ms {
            ctx.push(at, Ev::Taints(name.to_string()));
        }
        Ok(true)
    }

    /// The taints of `cluster` as the Cluster object has them.
    pub(crate) fn cluster_taints(&self, cluster: &str) -> Option<&[K8sTaint]> {
        self.members.get(cluster).map(|m| m.taints.as_slice())
    }
}
