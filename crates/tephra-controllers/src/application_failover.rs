//! Karmada's application failover, for one ResourceBinding whose PropagationPolicy asks for it
//! (`failover.application`): a cluster where the job's aggregated health has stayed Unhealthy
//! for `decisionConditions.tolerationSeconds` (300 by default) is taken from the binding, with a
//! graceful-eviction task (`producer: ApplicationFailover`, the policy's purge mode and grace
//! period), so the gang is placed elsewhere under the same eviction rules as a cluster
//! failure. Health must stay Unhealthy all that time: a cluster where it recovers, even
//! briefly, starts over.

use std::collections::BTreeMap;

use tephra_api::policy::{ApplicationFailoverBehavior, PurgeMode};
use tephra_api::work::{ResourceBinding, ResourceHealth};

use crate::graceful_eviction::{Decision, TaskTemplate, evict_from};

/// The producer named on the tasks this controller adds.
pub const PRODUCER: &str = "ApplicationFailover";
/// The reason on them.
pub const REASON: &str = "ApplicationFailure";
/// The toleration when the policy gives none, in seconds (Karmada's).
pub const DEFAULT_TOLERATION_SECONDS: i32 = 300;

/// Since when each cluster of one binding has been seen Unhealthy (ms).
pub type UnhealthySince = BTreeMap<String, i64>;

/// One pass over `rb` under the policy's `app` behaviour at `now_ms`; `since` is what earlier
/// passes saw of this binding.
pub fn decide(
    rb: &ResourceBinding,
    app: &ApplicationFailoverBehavior,
    since: &mut UnhealthySince,
    now_ms: i64,
) -> Decision {
    let toleration_ms = i64::from(
        app.decision_conditions
            .toleration_seconds
            .unwrap_or(DEFAULT_TOLERATION_SECONDS)
            .max(0),
    ) * 1000;
    let health: BTreeMap<&str, Option<ResourceHealth>> = rb
        .status
        .iter()
        .flat_map(|s| &s.aggregated_status)
        .map(|i| (i.cluster_name.as_str(), i.health))
        .collect();
    let targets: Vec<&str> = rb.spec.clusters.iter().map(|c| c.name.as_str()).collect();
    since.retain(|c, _| {
        targets.contains(&c.as_str())
            && health.get(c.as_str()).copied().flatten() == Some(ResourceHealth::Unhealthy)
    });
    let mut out = Decision::default();
    for cluster in targets {
        if health.get(cluster).copied().flatten() != Some(ResourceHealth::Unhealthy) {
            continue;
        }
        let from = *since.entry(cluster.to_string()).or_insert(now_ms);
        let due = from + toleration_ms;
        if now_ms >= due {
            out.evicted.push(cluster.to_string());
        } else {
            out.wake_ms = Some(out.wake_ms.map_or(due, |w| w.min(due)));
        }
    }
    if out.evicted.is_empty() {
        return out;
    }
    for cluster in &out.evicted {
        since.remove(cluster);
    }
    let template = TaskTemplate {
        producer: PRODUCER,
        reason: REASON,
        purge_mode: app.purge_mode.unwrap_or(PurgeMode::Gracefully),
        grace_period_seconds: app.grace_period_seconds,
    };
    let secs = toleration_ms / 1000;
    let next = evict_from(
        rb,
        &out.evicted,
        &template,
        |c| format!("the job stayed unhealthy in cluster {c} for {secs}s"),
        now_ms,
    );
    out.binding = Some(next);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;
    use tephra_api::work::{
        AggregatedStatusItem, ObjectReference, ResourceBindingSpec, ResourceBindingStatus,
        TargetCluster,
    };

    fn binding(health: &[(&str, ResourceHealth)]) -> ResourceBinding {
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
                clusters: health
                    .iter()
                    .map(|(c, _)| TargetCluster {
                        name: c.to_string(),
                        tasks: BTreeMap::from([("w".to_string(), 2)]),
                    })
                    .collect(),
                graceful_eviction_tasks: Vec::new(),
                reschedule_triggered_at: None,
            },
        );
        rb.status = Some(ResourceBindingStatus {
            conditions: Vec::new(),
            aggregated_status: health
                .iter()
                .map(|(c, h)| AggregatedStatusItem {
                    cluster_name: c.to_string(),
                    applied: true,
                    applied_message: None,
                    health: Some(*h),
                })
                .collect(),
        });
        rb
    }

    fn app(secs: i32, mode: Option<PurgeMode>) -> ApplicationFailoverBehavior {
        let mut a = ApplicationFailoverBehavior {
            purge_mode: mode,
            ..ApplicationFailoverBehavior::default()
        };
        a.decision_conditions.toleration_seconds = Some(secs);
        a
    }

    #[test]
    fn a_cluster_unhealthy_past_the_toleration_is_taken_away() {
        let rb = binding(&[("east", ResourceHealth::Unhealthy)]);
        let mut seen = UnhealthySince::new();
        let first = decide(&rb, &app(60, None), &mut seen, 1_000);
        assert!(first.binding.is_none());
        assert_eq!(first.wake_ms, Some(61_000));
        let later = decide(&rb, &app(60, None), &mut seen, 61_000);
        assert_eq!(later.evicted, ["east"]);
        let next = later.binding.expect("changed");
        assert!(next.spec.clusters.is_empty());
        let task = &next.spec.graceful_eviction_tasks[0];
        assert_eq!(
            (task.producer.as_str(), task.reason.as_str()),
            (PRODUCER, REASON)
        );
        assert_eq!(task.purge_mode, Some(PurgeMode::Gracefully));
    }

    #[test]
    fn a_moment_of_health_starts_the_wait_over() {
        let mut seen = UnhealthySince::new();
        let sick = binding(&[("east", ResourceHealth::Unhealthy)]);
        let well = binding(&[("east", ResourceHealth::Unknown)]);
        decide(&sick, &app(60, None), &mut seen, 0);
        decide(&well, &app(60, None), &mut seen, 30_000);
        let d = decide(&sick, &app(60, None), &mut seen, 61_000);
        assert!(d.evicted.is_empty(), "unhealthy only since 61 s");
        assert_eq!(d.wake_ms, Some(121_000));
    }

    #[test]
    fn only_the_failing_cluster_goes_with_the_policys_purge_mode() {
        let rb = binding(&[
            ("east", ResourceHealth::Unhealthy),
            ("west", ResourceHealth::Healthy),
        ]);
        let mut seen = UnhealthySince::new();
        let d = decide(&rb, &app(0, Some(PurgeMode::Directly)), &mut seen, 5);
        assert_eq!(d.evicted, ["east"]);
        let next = d.binding.expect("changed");
        assert_eq!(next.spec.clusters[0].name, "west");
        assert_eq!(
            next.spec.graceful_eviction_tasks[0].purge_mode,
            Some(PurgeMode::Directly)
        );
    }
}
