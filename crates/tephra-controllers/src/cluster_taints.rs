//! A member's taints from its `Ready` condition, as Karmada's cluster controller sets them:
//! Ready=False adds `cluster.tephra.io/not-ready:NoSchedule`, Unknown adds
//! `cluster.tephra.io/unreachable:NoSchedule`, and once the condition has held for the
//! NoExecute grace the NoExecute variant joins it (the taint manager then moves the jobs that
//! do not tolerate it). Recovery removes them. Taints of other keys (a user's) are kept, and a
//! taint that stays keeps its `timeAdded`.

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use tephra_api::well_known::{TAINT_CLUSTER_NOT_READY, TAINT_CLUSTER_UNREACHABLE};

/// What the taints come to, and when to look again (the NoExecute taint falls due).
#[derive(Clone, Debug, PartialEq)]
pub struct Taints {
    /// The taints to write, when they differ from the Cluster's.
    pub write: Option<Vec<Taint>>,
    /// When the NoExecute taint is due, in ms, if it is still to come.
    pub wake_ms: Option<i64>,
}

fn ours(key: &str) -> bool {
    key == TAINT_CLUSTER_NOT_READY || key == TAINT_CLUSTER_UNREACHABLE
}

fn ms(t: &Time) -> i64 {
    t.0.as_millisecond()
}

/// The taints of a Cluster whose taints are `current` and `Ready` condition `ready`, at
/// `now_ms`; NoExecute taints follow after `no_execute_after_ms` (None: never).
pub fn taints(
    current: &[Taint],
    ready: Option<&Condition>,
    now_ms: i64,
    no_execute_after_ms: Option<i64>,
) -> Taints {
    let key = match ready.map(|c| c.status.as_str()) {
        Some("False") => Some(TAINT_CLUSTER_NOT_READY),
        Some("Unknown") => Some(TAINT_CLUSTER_UNREACHABLE),
        _ => None,
    };
    let mut want: Vec<(&str, &str)> = Vec::new();
    let mut wake_ms = None;
    if let (Some(key), Some(c)) = (key, ready) {
        want.push((key, "NoSchedule"));
        if let Some(grace) = no_execute_after_ms {
            let due = ms(&c.last_transition_time) + grace;
            if now_ms >= due {
                want.push((key, "NoExecute"));
            } else {
                wake_ms = Some(due);
            }
        }
    }
    let now = Time(Timestamp::from_millisecond(now_ms).unwrap_or(Timestamp::UNIX_EPOCH));
    let mut out: Vec<Taint> = current.iter().filter(|t| !ours(&t.key)).cloned().collect();
    for (key, effect) in want {
        let kept = current
            .iter()
            .find(|t| t.key == key && t.effect == effect)
            .cloned();
        out.push(kept.unwrap_or_else(|| Taint {
            key: key.into(),
            value: None,
            effect: effect.into(),
            time_added: Some(now.clone()),
        }));
    }
    let same = out.len() == current.len() && out.iter().all(|t| current.contains(t));
    Taints {
        write: (!same).then_some(out),
        wake_ms,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    fn ready(status: &str, at_ms: i64) -> Condition {
        Condition {
            type_: "Ready".into(),
            status: status.into(),
            reason: String::new(),
            message: String::new(),
            last_transition_time: Time(Timestamp::from_millisecond(at_ms).expect("time")),
            observed_generation: None,
        }
    }

    fn keys(t: &[Taint]) -> Vec<(String, String)> {
        t.iter()
            .map(|t| (t.key.clone(), t.effect.clone()))
            .collect()
    }

    #[test]
    fn unknown_adds_the_unreachable_taint_then_no_execute_after_the_grace() {
        let c = ready("Unknown", 0);
        let first = taints(&[], Some(&c), 1_000, Some(60_000));
        let now = first.write.expect("added");
        assert_eq!(
            keys(&now),
            [(TAINT_CLUSTER_UNREACHABLE.into(), "NoSchedule".into())]
        );
        assert_eq!(first.wake_ms, Some(60_000));
        assert_eq!(taints(&now, Some(&c), 30_000, Some(60_000)).write, None);
        let later = taints(&now, Some(&c), 60_000, Some(60_000))
            .write
            .expect("NoExecute");
        assert_eq!(later.len(), 2);
        assert_eq!(later[0], now[0], "the NoSchedule taint keeps its timeAdded");
        assert_eq!(later[1].effect, "NoExecute");
    }

    #[test]
    fn not_ready_has_its_own_key_and_recovery_clears_ours_but_not_a_users() {
        let user = Taint {
            key: "team".into(),
            value: Some("ml".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        };
        let down = taints(
            std::slice::from_ref(&user),
            Some(&ready("False", 0)),
            0,
            None,
        )
        .write
        .expect("added");
        assert_eq!(
            keys(&down),
            [
                ("team".into(), "NoSchedule".into()),
                (TAINT_CLUSTER_NOT_READY.into(), "NoSchedule".into())
            ]
        );
        let up = taints(&down, Some(&ready("True", 5)), 10, None)
            .write
            .expect("cleared");
        assert_eq!(up, [user]);
    }

    #[test]
    fn without_no_execute_only_no_schedule_is_ever_added() {
        let t = taints(&[], Some(&ready("Unknown", 0)), 10_000_000, None);
        assert_eq!(t.write.expect("added").len(), 1);
        assert_eq!(t.wake_ms, None);
    }

    #[test]
    fn a_ready_cluster_without_taints_writes_nothing() {
        assert_eq!(
            taints(&[], Some(&ready("True", 0)), 0, Some(1)),
            Taints {
                write: None,
                wake_ms: None
            }
        );
        assert_eq!(taints(&[], None, 0, Some(1)).write, None);
    }
}
