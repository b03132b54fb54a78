//! Karmada's taint manager, for one ResourceBinding: a cluster it runs in whose NoExecute taints
//! the job does not tolerate (its PropagationPolicy's `clusterTolerations`) is taken from it,
//! and a graceful-eviction task remembers where the old pods are, so that the session places
//! the whole gang elsewhere and the old copy goes only once the new one runs (see
//! [`crate::graceful_eviction`]). A toleration with `tolerationSeconds` keeps the cluster that
//! long after the taint was added; one without keeps it for good.
//!
//! Matching is Kubernetes' own: an empty effect matches every effect, `Exists` with an empty
//! key matches every taint, `Exists` matches the key, `Equal` (the default) the key and value.

use k8s_openapi::api::core::v1::{Taint, Toleration};
use tephra_api::policy::PurgeMode;
use tephra_api::work::ResourceBinding;

use crate::graceful_eviction::{Decision, TaskTemplate, evict_from};

/// The producer named on the tasks this manager adds.
pub const PRODUCER: &str = "TaintManager";
/// The reason on them.
pub const REASON: &str = "TaintUntolerated";

/// Whether `tol` tolerates `taint`.
pub fn tolerates(tol: &Toleration, taint: &Taint) -> bool {
    let effect_ok = tol
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    if !effect_ok {
        return false;
    }
    let key = tol.key.as_deref().unwrap_or_default();
    match tol.operator.as_deref().unwrap_or("Equal") {
        "Exists" => key.is_empty() || key == taint.key,
        _ => {
            key == taint.key
                && tol.value.as_deref().unwrap_or_default()
                    == taint.value.as_deref().unwrap_or_default()
        }
    }
}

/// When a job with `tolerations` must leave a cluster with `taints`: `Some(None)` at once,
/// `Some(Some(ms))` at that time, `None` never (no NoExecute taint, or tolerated for good).
pub fn leave_at(taints: &[Taint], tolerations: &[Toleration]) -> Option<Option<i64>> {
    let mut due: Option<i64> = None;
    for taint in taints.iter().filter(|t| t.effect == "NoExecute") {
        let matching: Vec<&Toleration> =
            tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        if matching.is_empty() {
            return Some(None);
        }
        // The shortest toleration decides; one without seconds tolerates forever.
        let Some(secs) = matching.iter().filter_map(|t| t.toleration_seconds).min() else {
            continue;
        };
        let added = taint
            .time_added
            .as_ref()
            .map_or(0, |t| t.0.as_millisecond());
        let at = added + secs.max(0) * 1000;
        due = Some(due.map_or(at, |d| d.min(at)));
    }
    due.map(Some)
}

/// How the manager's tasks are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvictionDefaults {
    /// The policy's `failover.cluster.purgeMode` (Gracefully when it names none).
    pub purge_mode: PurgeMode,
    /// How long graceful eviction waits for the new placement at most, in seconds.
    pub grace_period_seconds: Option<i32>,
}

impl Default for EvictionDefaults {
    fn default() -> Self {
        Self {
            purge_mode: PurgeMode::Gracefully,
            grace_period_seconds: None,
        }
    }
}

/// One pass over `rb`: `taints_of(cluster)` gives a cluster's taints (None: the cluster is
/// gone, which taints nothing).
pub fn decide<'a>(
    rb: &ResourceBinding,
    taints_of: impl Fn(&str) -> Option<&'a [Taint]>,
    tolerations: &[Toleration],
    now_ms: i64,
    defaults: EvictionDefaults,
) -> Decision {
    let mut out = Decision::default();
    for target in &rb.spec.clusters {
        let Some(taints) = taints_of(&target.name) else {
            continue;
        };
        match leave_at(taints, tolerations) {
            None => {}
            Some(Some(at)) if at > now_ms => {
                out.wake_ms = Some(out.wake_ms.map_or(at, |w| w.min(at)));
            }
            Some(_) => out.evicted.push(target.name.clone()),
        }
    }
    if out.evicted.is_empty() {
        return out;
    }
    let template = TaskTemplate {
        producer: PRODUCER,
        reason: REASON,
        purge_mode: defaults.purge_mode,
        grace_period_seconds: defaults.grace_period_seconds,
    };
    let next = evict_from(
        rb,
        &out.evicted,
        &template,
        |c| format!("cluster {c} has a NoExecute taint the job does not tolerate"),
        now_ms,
    );
    out.binding = Some(next);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use std::collections::BTreeMap;
    use tephra_api::work::{ObjectReference, ResourceBindingSpec, TargetCluster};

    fn taint(key: &str, effect: &str, added_ms: i64) -> Taint {
        Taint {
            key: key.into(),
            value: None,
            effect: effect.into(),
            time_added: Some(Time(Timestamp::from_millisecond(added_ms).expect("time"))),
        }
    }

    fn tol(key: &str, secs: Option<i64>) -> Toleration {
        Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            toleration_seconds: secs,
            value: None,
        }
    }

    fn binding(clusters: &[&str]) -> ResourceBinding {
        let mut rb = ResourceBinding::new(
            "llm",
            ResourceBindingSpec {
                resource: ObjectReference {
                    api_version: "scheduling.volcano.sh/v1beta1".into(),
                    kind: "PodGroup".into(),
                    namespace: Some("ml".into()),
                    name: "llm".into(),
                    uid: None,
                },
                clusters: clusters
                    .iter()
                    .map(|c| TargetCluster {
                        name: c.to_string(),
                        tasks: BTreeMap::from([("w".to_string(), 4)]),
                    })
                    .collect(),
                graceful_eviction_tasks: Vec::new(),
                reschedule_triggered_at: None,
            },
        );
        rb.metadata.namespace = Some("ml".into());
        rb
    }

    const UNREACHABLE: &str = "cluster.tephra.io/unreachable";

    #[test]
    fn an_untolerated_no_execute_taint_takes_the_cluster_away_with_a_task() {
        let east = [taint(UNREACHABLE, "NoExecute", 0)];
        let d = decide(
            &binding(&["east"]),
            |c| (c == "east").then_some(&east[..]),
            &[],
            5_000,
            EvictionDefaults::default(),
        );
        assert_eq!(d.evicted, ["east"]);
        let rb = d.binding.expect("changed");
        assert!(rb.spec.clusters.is_empty());
        let task = &rb.spec.graceful_eviction_tasks[0];
        assert_eq!(
            (
                task.from_cluster.as_str(),
                task.producer.as_str(),
                task.purge_mode
            ),
            ("east", PRODUCER, Some(PurgeMode::Gracefully))
        );
    }

    #[test]
    fn no_schedule_taints_and_other_clusters_are_left_alone() {
        let east = [taint(UNREACHABLE, "NoSchedule", 0)];
        let d = decide(
            &binding(&["east", "west"]),
            |c| (c == "east").then_some(&east[..]),
            &[],
            5_000,
            EvictionDefaults::default(),
        );
        assert!(d.is_nothing());
    }

    #[test]
    fn toleration_seconds_delay_the_eviction_and_no_seconds_keep_it_for_good() {
        let east = [taint(UNREACHABLE, "NoExecute", 10_000)];
        let timed = [tol(UNREACHABLE, Some(60))];
        let d = decide(
            &binding(&["east"]),
            |_| Some(&east[..]),
            &timed,
            20_000,
            EvictionDefaults::default(),
        );
        assert!(d.binding.is_none());
        assert_eq!(d.wake_ms, Some(70_000));
        let d = decide(
            &binding(&["east"]),
            |_| Some(&east[..]),
            &timed,
            70_000,
            EvictionDefaults::default(),
        );
        assert_eq!(d.evicted, ["east"]);
        let forever = [tol(UNREACHABLE, None)];
        let d = decide(
            &binding(&["east"]),
            |_| Some(&east[..]),
            &forever,
            1 << 40,
            EvictionDefaults::default(),
        );
        assert!(d.is_nothing());
    }

    #[test]
    fn kubernetes_matching_rules_apply() {
        let t = Taint {
            key: "k".into(),
            value: Some("v".into()),
            effect: "NoExecute".into(),
            time_added: None,
        };
        let mk = |key: Option<&str>,
                  op: Option<&str>,
                  value: Option<&str>,
                  effect: Option<&str>| Toleration {
            key: key.map(String::from),
            operator: op.map(String::from),
            value: value.map(String::from),
            effect: effect.map(String::from),
            toleration_seconds: None,
        };
        assert!(
            tolerates(&mk(None, Some("Exists"), None, None), &t),
            "tolerate everything"
        );
        assert!(
            tolerates(&mk(Some("k"), None, Some("v"), None), &t),
            "Equal by default"
        );
        assert!(!tolerates(&mk(Some("k"), None, Some("w"), None), &t));
        assert!(!tolerates(
            &mk(Some("k"), Some("Exists"), None, Some("NoSchedule")),
            &t
        ));
        assert!(tolerates(
            &mk(Some("k"), Some("Exists"), None, Some("")),
            &t
        ));
    }

    #[test]
    fn a_second_pass_adds_no_second_task() {
        let east = [taint(UNREACHABLE, "NoExecute", 0)];
        let first = decide(
            &binding(&["east"]),
            |_| Some(&east[..]),
            &[],
            1,
            EvictionDefaults::default(),
        )
        .binding
        .expect("changed");
        let again = decide(
            &first,
            |_| Some(&east[..]),
            &[],
            2,
            EvictionDefaults::default(),
        );
        assert!(again.is_nothing(), "east is no longer a target");
    }
}
