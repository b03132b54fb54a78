//! One member cluster as the control plane sees it (the faults on it now, its Cluster object's
//! Ready condition and taints, the events of its pods held while it is cut off), the fleet of
//! them at time 0, and the failover chain's timings. The controllers' passes over them are
//! `members/mod.rs`'s.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint as K8sTaint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use tephra_controllers::cluster_health::{Probe, Seen, Thresholds, next_ready};
use tephra_scheduler::model::Taint;

use crate::agenda::Ev;
use crate::scenario::FailoverDef;

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

    pub(super) fn probe(&self) -> Probe {
        if self.unreachable > 0 {
            Probe::Unreachable("the member's API server does not answer".into())
        } else if self.notready > 0 {
            Probe::NotReady("readyz answers not ok".into())
        } else {
            Probe::Ready
        }
    }

    pub(super) fn condition_status(&self) -> &str {
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
