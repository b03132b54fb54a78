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

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint as K8sTaint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use tephra_controllers::cluster_health::{Probe, Seen, Thresholds, next_ready};
use tephra_controllers::cluster_taints;
use tephra_scheduler::cache::Event;
use tephra_scheduler::model::Taint;

use crate::error::SimError;
use crate::record::Record;
use crate::scenario::FailoverDef;
use crate::state::{Ev, Sim};

/// The chain's timings, in ms.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timings {
    pub(crate) probe_ms: i64,
    pub(crate) thresholds: Thresholds,
    pub(crate) no_execute_ms: i64,
    pub(crate) eviction_timeout_ms: i64,
}

impl Timings {
    pub(crate) fn from_def(d: &FailoverDef) -> Self {
        Self {
            probe_ms: d.cluster_status_update_frequency.0.max(1),
            thresholds: Thresholds {
                failure_ms: d.cluster_failure_threshold.0.max(0),
                success_ms: d.cluster_success_threshold.0.max(0),
            },
            no_execute_ms: d.no_execute_taint_grace.0.max(0),
            eviction_timeout_ms: d.graceful_eviction_timeout.0.max(0),
        }
    }
}

/// One member: the faults on it now (its truth), and its Cluster object's condition and taints.
#[derive(Clone, Debug, Default)]
pub(crate) struct Member {
    /// Faults making it unreachable, and not ready, in force now.
    pub(crate) unreachable: u32,
    pub(crate) notready: u32,
    pub(crate) ready: Option<Condition>,
    pub(crate) seen: Seen,
    /// The Cluster's taints (the scenario's, and the chain's).
    pub(crate) taints: Vec<K8sTaint>,
    /// A probe is on the agenda.
    pub(crate) probing: bool,
    /// Events of its pods held while it is cut off.
    pub(crate) held: Vec<Ev>,
}

impl Member {
    /// Whether the control plane cannot reach it.
    pub(crate) fn cut_off(&self) -> bool {
        self.unreachable > 0
    }

    fn probe(&self) -> Probe {
        if self.unreachable > 0 {
            Probe::Unreachable("the member's API server does not answer".into())
        } else if self.notready > 0 {
            Probe::NotReady("readyz answers not ok".into())
        } else {
            Probe::Ready
        }
    }

    fn condition_status(&self) -> &str {
        self.ready.as_ref().map_or("True", |c| c.status.as_str())
    }
}

pub(crate) fn time(ms: i64) -> Time {
    Time(Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// The members of a fleet, each with its scenario taints and a Ready condition from time 0.
pub(crate) fn members<'a>(
    clusters: impl IntoIterator<Item = (&'a str, &'a [Taint])>,
) -> BTreeMap<String, Member> {
    clusters
        .into_iter()
        .map(|(name, taints)| {
            let mut m = Member {
                taints: taints
                    .iter()
                    .map(|t| K8sTaint {
                        key: t.key.clone(),
                        value: (!t.value.is_empty()).then(|| t.value.clone()),
                        effect: t.effect.as_str().into(),
                        time_added: Some(time(0)),
                    })
                    .collect(),
                ..Member::default()
            };
            m.ready = next_ready(None, &mut m.seen, &Probe::Ready, 0, Thresholds::default());
            (name.to_string(), m)
        })
        .collect()
}

impl Sim<'_> {
    /// The cache and the checker take a member's readiness (Ready condition True, and
    /// reachable) and taints.
    fn sync_cluster(&mut self, name: &str) -> Result<(), SimError> {
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
        self.checker.cluster_ready(name, ready);
        self.checker.cluster_taints(name, taints);
        self.apply(Event::ClusterUpsert(c))?;
        self.mark_dirty();
        Ok(())
    }

    /// A fault began or ended on `name`: the cache follows what the scheduler's watchers see,
    /// the probes start, and a member that answers again delivers what it held.
    pub(crate) fn member_changed(&mut self, name: &str) -> Result<(), SimError> {
        self.sync_cluster(name)?;
        self.probe_soon(name);
        let Some(m) = self.members.get_mut(name) else {
            return Ok(());
        };
        if !m.cut_off() {
            let held = std::mem::take(&mut m.held);
            for ev in held {
                self.push(self.now, ev);
            }
            self.evictions_in(name)?;
        }
        Ok(())
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

    fn probe_soon(&mut self, name: &str) {
        let period = self.timings.probe_ms;
        let Some(m) = self.members.get_mut(name) else {
            return;
        };
        if m.probing {
            return;
        }
        m.probing = true;
        // Probes run on the controller's period, from time 0.
        let at = (self.now + period - 1) / period * period;
        let at = if at <= self.now {
            self.now + period
        } else {
            at
        };
        self.push(at, Ev::Probe(name.to_string()));
    }

    /// One probe of `name`: the condition may change, and the taints with it.
    pub(crate) fn probe(
        &mut self,
        name: &str,
        out: &mut dyn FnMut(&Record),
    ) -> Result<(), SimError> {
        let (now, t) = (self.now, self.timings.thresholds);
        let Some(m) = self.members.get_mut(name) else {
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
        let (now, grace) = (self.now, self.timings.no_execute_ms);
        let Some(m) = self.members.get_mut(name) else {
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
            self.push(at, Ev::Taints(name.to_string()));
        }
        self.taint_manager(name, out)
    }

    /// The taints of `cluster` as the Cluster object has them.
    pub(crate) fn cluster_taints(&self, cluster: &str) -> Option<&[K8sTaint]> {
        self.members.get(cluster).map(|m| m.taints.as_slice())
    }
}
