//! The Workload API front end: Kubernetes' own PodGroups (`scheduling.k8s.io/v1beta1`) read as
//! the same gangs as Volcano's, and what tephra writes back on them.
//!
//! A Kubernetes PodGroup is read into the Volcano-shaped PodGroup the rest of the index already
//! knows (one gang model, two front ends): a `gang` policy's `minCount` is the gang's
//! `minMember`, a `basic` policy is a group of independent pods (`minMember` 1), the priority
//! class is the PodGroup's, and the queue is named by a key Volcano or Kueue users know (see
//! [`QUEUE_KEYS`]). Its pods name it in `spec.schedulingGroup.podGroupName`.
//!
//! Kubernetes keeps no phase on its PodGroups: the phase tephra decides (Pending, Inqueue,
//! Running, ...) is kept here, as Volcano's would be kept on its object, and what the API sees
//! is the condition kube-scheduler writes, [`CONDITION`]: `True` with reason `Scheduled` once
//! the gang is placed (never `False` again after that), `False` with reason `Unschedulable` and
//! tephra's reason while it cannot be placed.
//!
//! A Kubernetes PodGroup names no scheduler: its pods do. It becomes one of tephra's gangs once
//! a pod of tephra's names it ([`KubeGroup::claimed`]); until then it may as well be
//! kube-scheduler's own, so it counts in no queue and no view (no phantom waiting gangs).

use std::collections::BTreeMap;

use k8s_openapi::api::scheduling::v1beta1::PodGroup as KubePodGroup;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use tephra_api::scheduling::{PodGroupConditionType, PodGroupPhase};
use tephra_api::{PodGroup, PodGroupSpec, PodGroupStatus};

/// The condition a Kubernetes PodGroup's scheduler writes (`scheduling.k8s.io/v1beta1`, from
/// Kubernetes 1.37; 1.36's `v1alpha2` called it `PodGroupScheduled`).
pub const CONDITION: &str = "PodGroupInitiallyScheduled";

/// Where the queue of a Kubernetes PodGroup is named, first found wins, each as a label or an
/// annotation on the PodGroup: Volcano's job label, Volcano's annotation for pods without a
/// PodGroup of their own, and Kueue's queue label (naming a tephra Queue here).
pub const QUEUE_KEYS: [&str; 3] = [
    tephra_api::well_known::QUEUE_NAME,
    "scheduling.volcano.sh/queue-name",
    "kueue.x-k8s.io/queue-name",
];

/// What tephra knows of one Kubernetes PodGroup beyond the object.
#[derive(Clone, Debug, Default)]
pub struct KubeGroup {
    /// The status tephra decided for it last (what a Volcano PodGroup would carry).
    pub decided: Option<PodGroupStatus>,
    /// Its conditions, as last observed.
    pub conditions: Vec<Condition>,
    /// Whether a pod of tephra's has named it: from then on it is one of tephra's gangs (and
    /// stays one), before that it is nobody's to tephra.
    pub claimed: bool,
    /// The object as last observed, and the cluster it lives in, kept until it is claimed.
    pub unclaimed: Option<(std::sync::Arc<str>, Box<KubePodGroup>)>,
}

impl KubeGroup {
    /// Whether [`CONDITION`] is `True` on the object: the gang was placed once.
    pub fn scheduled(&self) -> bool {
        self.conditions
            .iter()
            .any(|c| c.type_ == CONDITION && c.status == "True")
    }
}

/// The queue a Kubernetes PodGroup names, if any.
pub fn queue(g: &KubePodGroup) -> Option<String> {
    let m = &g.metadata;
    QUEUE_KEYS.iter().find_map(|k| {
        m.labels
            .as_ref()
            .and_then(|l| l.get(*k))
            .or_else(|| m.annotations.as_ref().and_then(|a| a.get(*k)))
            .filter(|q| !q.is_empty())
            .cloned()
    })
}

/// The gang size of a Kubernetes PodGroup: a `gang` policy's `minCount`, 1 for `basic` (each
/// pod on its own).
pub fn min_member(g: &KubePodGroup) -> i32 {
    g.spec
        .scheduling_policy
        .gang
        .as_ref()
        .map_or(1, |gang| gang.min_count)
}

/// A Kubernetes PodGroup as the Volcano-shaped PodGroup the index schedules, with the status
/// tephra decided for it (`seen`), or, not having decided one since it started, the phase its
/// condition implies (Running once placed).
pub fn as_volcano(g: &KubePodGroup, seen: Option<&KubeGroup>) -> PodGroup {
    let status = match seen.and_then(|s| s.decided.clone()) {
        Some(s) => Some(s),
        None if seen.is_some_and(KubeGroup::scheduled) => Some(PodGroupStatus {
            phase: Some(PodGroupPhase::Running),
            ..PodGroupStatus::default()
        }),
        None => None,
    };
    PodGroup {
        metadata: g.metadata.clone(),
        spec: PodGroupSpec {
            min_member: Some(min_member(g)),
            min_task_member: BTreeMap::new(),
            queue: queue(g).unwrap_or_else(|| tephra_api::defaults::DEFAULT_QUEUE.to_string()),
            priority_class_name: g.spec.priority_class_name.clone(),
            ..PodGroupSpec::default()
        },
        status,
    }
}

/// The condition tephra writes for a status it decided, `None` when the status says nothing
/// the API's condition can (admitted, not placed yet, nothing refused) or when it would take a
/// placed gang's condition back to `False`. `now` stamps a condition whose status changes.
pub fn condition(status: &PodGroupStatus, seen: &KubeGroup, now: &Time) -> Option<Condition> {
    let placed = matches!(
        status.phase,
        Some(PodGroupPhase::Running | PodGroupPhase::Completed)
    );
    let (value, reason, message) = if placed {
        (
            "True",
            "Scheduled",
            "all pods of the gang are placed".to_string(),
        )
    } else {
        let refused = status
            .conditions
            .iter()
            .find(|c| c.type_ == PodGroupConditionType::Unschedulable && c.status == "True")?;
        if seen.scheduled() {
            return None;
        }
        (
            "False",
            "Unschedulable",
            refused.message.clone().unwrap_or_default(),
        )
    };
    let old = seen.conditions.iter().find(|c| c.type_ == CONDITION);
    if old.is_some_and(|c| c.status == value && c.reason == reason && c.message == message) {
        return None;
    }
    let since = match old {
        Some(c) if c.status == value => c.last_transition_time.clone(),
        _ => now.clone(),
    };
    Some(Condition {
        type_: CONDITION.to_string(),
        status: value.to_string(),
        reason: reason.to_string(),
        message,
        last_transition_time: since,
        observed_generation: None,
    })
}

/// The conditions to write: those observed, with `c` in place of its type's.
pub fn with_condition(seen: &KubeGroup, c: Condition) -> Vec<Condition> {
    let mut out: Vec<Condition> = seen
        .conditions
        .iter()
        .filter(|o| o.type_ != c.type_)
        .cloned()
        .collect();
    out.push(c);
    out
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::scheduling::v1beta1::{
        BasicSchedulingPolicy, GangSchedulingPolicy, PodGroupSchedulingPolicy, PodGroupSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use tephra_api::scheduling::PodGroupCondition;

    use super::*;

    fn group(
        gang: Option<i32>,
        labels: &[(&str, &str)],
        annotations: &[(&str, &str)],
    ) -> KubePodGroup {
        let map = |kv: &[(&str, &str)]| {
            (!kv.is_empty()).then(|| {
                kv.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            })
        };
        KubePodGroup {
            metadata: ObjectMeta {
                name: Some("workers".into()),
                namespace: Some("ml".into()),
                labels: map(labels),
                annotations: map(annotations),
                ..ObjectMeta::default()
            },
            spec: PodGroupSpec {
                scheduling_policy: PodGroupSchedulingPolicy {
                    gang: gang.map(|min_count| GangSchedulingPolicy { min_count }),
                    basic: gang.is_none().then(BasicSchedulingPolicy::default),
                },
                priority_class_name: Some("high".into()),
                ..PodGroupSpec::default()
            },
            status: None,
        }
    }

    fn refused(message: &str) -> PodGroupStatus {
        PodGroupStatus {
            phase: Some(PodGroupPhase::Pending),
            conditions: vec![PodGroupCondition {
                type_: PodGroupConditionType::Unschedulable,
                status: "True".into(),
                transition_id: None,
                last_transition_time: None,
                reason: Some("NotEnoughResources".into()),
                message: Some(message.into()),
            }],
            ..PodGroupStatus::default()
        }
    }

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap())
    }

    #[test]
    fn a_gang_policy_is_a_gang_of_min_count_and_basic_is_pods_on_their_own() {
        let g = as_volcano(&group(Some(4), &[], &[]), None);
        assert_eq!(g.spec.min_member, Some(4));
        assert_eq!(g.spec.priority_class_name.as_deref(), Some("high"));
        assert_eq!(g.metadata.namespace.as_deref(), Some("ml"));
        assert_eq!(
            as_volcano(&group(None, &[], &[]), None).spec.min_member,
            Some(1)
        );
    }

    #[test]
    fn the_queue_is_read_from_volcano_and_kueue_keys_in_that_order() {
        let q = |l: &[(&str, &str)], a: &[(&str, &str)]| {
            as_volcano(&group(Some(2), l, a), None).spec.queue
        };
        assert_eq!(q(&[], &[]), "default");
        assert_eq!(q(&[("kueue.x-k8s.io/queue-name", "team-a")], &[]), "team-a");
        assert_eq!(
            q(
                &[("kueue.x-k8s.io/queue-name", "team-a")],
                &[("scheduling.volcano.sh/queue-name", "research")]
            ),
            "research"
        );
        assert_eq!(
            q(
                &[("volcano.sh/queue-name", "prod")],
                &[("scheduling.volcano.sh/queue-name", "research")]
            ),
            "prod"
        );
    }

    #[test]
    fn the_phase_decided_is_kept_and_a_placed_gang_reads_running_after_a_restart() {
        let g = group(Some(2), &[], &[]);
        assert_eq!(as_volcano(&g, None).status, None);
        let decided = KubeGroup {
            decided: Some(PodGroupStatus {
                phase: Some(PodGroupPhase::Inqueue),
                ..PodGroupStatus::default()
            }),
            conditions: Vec::new(),
            ..KubeGroup::default()
        };
        let phase = |s: Option<&KubeGroup>| as_volcano(&g, s).status.and_then(|s| s.phase);
        assert_eq!(phase(Some(&decided)), Some(PodGroupPhase::Inqueue));
        let placed = KubeGroup {
            decided: None,
            conditions: vec![Condition {
                type_: CONDITION.into(),
                status: "True".into(),
                reason: "Scheduled".into(),
                message: String::new(),
                last_transition_time: now(),
                observed_generation: None,
            }],
            ..KubeGroup::default()
        };
        assert_eq!(phase(Some(&placed)), Some(PodGroupPhase::Running));
    }

    #[test]
    fn a_refused_gang_says_unschedulable_with_the_reason_and_a_placed_one_never_goes_back() {
        let fresh = KubeGroup::default();
        let c = condition(&refused("needs 8 GPUs, 4 free"), &fresh, &now()).expect("a condition");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "Unschedulable")
        );
        assert_eq!(c.message, "needs 8 GPUs, 4 free");
        // The same again: nothing to write.
        let seen = KubeGroup {
            decided: None,
            conditions: vec![c.clone()],
            ..KubeGroup::default()
        };
        assert!(condition(&refused("needs 8 GPUs, 4 free"), &seen, &now()).is_none());
        // Placed: True, with a new transition time.
        let running = PodGroupStatus {
            phase: Some(PodGroupPhase::Running),
            ..PodGroupStatus::default()
        };
        let later = Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_100).unwrap());
        let t = condition(&running, &seen, &later).expect("placed");
        assert_eq!(
            (t.status.as_str(), t.reason.as_str()),
            ("True", "Scheduled")
        );
        assert_eq!(t.last_transition_time, later);
        // Once True, a later refusal (a pod lost, the gang waits again) writes nothing.
        let placed = KubeGroup {
            decided: None,
            conditions: with_condition(&seen, t),
            ..KubeGroup::default()
        };
        assert_eq!(placed.conditions.len(), 1);
        assert!(condition(&refused("lost a node"), &placed, &later).is_none());
        // Admitted, nothing refused: nothing to say.
        let inqueue = PodGroupStatus {
            phase: Some(PodGroupPhase::Inqueue),
            ..PodGroupStatus::default()
        };
        assert!(condition(&inqueue, &fresh, &now()).is_none());
    }
}
