//! A member's `Ready` condition from its health probes, as Karmada's cluster status controller
//! sets it: a probe that answers `ok` means Ready=True; one that answers otherwise, False
//! (`ClusterNotReady`); no answer at all, Unknown (`ClusterNotReachable`). A change takes
//! effect only once the new observation has held for a threshold (failure threshold on the way
//! down, success threshold on the way up), so one lost probe moves nothing. The first
//! observation of a cluster takes effect at once.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// What one probe of a member's `/readyz` saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// It answered `ok`.
    Ready,
    /// It answered, but not `ok` (the message says what).
    NotReady(String),
    /// It did not answer (the message says why).
    Unreachable(String),
}

impl Probe {
    /// The condition status this probe stands for.
    pub fn status(&self) -> &'static str {
        match self {
            Probe::Ready => "True",
            Probe::NotReady(_) => "False",
            Probe::Unreachable(_) => "Unknown",
        }
    }

    fn reason_message(&self) -> (&'static str, String) {
        match self {
            Probe::Ready => (
                "ClusterReady",
                "cluster is healthy and ready to accept workloads".into(),
            ),
            Probe::NotReady(m) => ("ClusterNotReady", format!("cluster is not ready: {m}")),
            Probe::Unreachable(m) => (
                "ClusterNotReachable",
                format!("cluster is not reachable: {m}"),
            ),
        }
    }
}

/// How long an observation must hold before the condition follows it (Karmada's defaults:
/// 30 s each way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    /// Before Ready=True turns False or Unknown, in ms.
    pub failure_ms: i64,
    /// Before False or Unknown turns True, in ms.
    pub success_ms: i64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            failure_ms: 30_000,
            success_ms: 30_000,
        }
    }
}

/// What the controller remembers of a cluster between probes: the status it has been seeing
/// since when (ms), while that differs from the condition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    since: Option<(&'static str, i64)>,
}

fn time(ms: i64) -> Time {
    Time(Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// The `Ready` condition after `probe` at `now_ms`: `Some` with the new condition when it
/// changes (status, or reason and message under the same status), `None` when it stands.
pub fn next_ready(
    current: Option<&Condition>,
    seen: &mut Seen,
    probe: &Probe,
    now_ms: i64,
    t: Thresholds,
) -> Option<Condition> {
    let status = probe.status();
    let (reason, message) = probe.reason_message();
    let make = |at: Time| Condition {
        type_: "Ready".into(),
        status: status.into(),
        reason: reason.into(),
        message: message.clone(),
        last_transition_time: at,
        observed_generation: None,
    };
    let Some(cur) = current else {
        seen.since = None;
        return Some(make(time(now_ms)));
    };
    if cur.status == status {
        seen.since = None;
        if cur.reason != reason || cur.message != message {
            return Some(make(cur.last_transition_time.clone()));
        }
        return None;
    }
    let since = match seen.since {
        Some((s, at)) if s == status => at,
        _ => {
            seen.since = Some((status, now_ms));
            now_ms
        }
    };
    let wait = if status == "True" {
        t.success_ms
    } else {
        t.failure_ms
    };
    if now_ms - since >= wait {
        seen.since = None;
        Some(make(time(now_ms)))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    const T: Thresholds = Thresholds {
        failure_ms: 30_000,
        success_ms: 10_000,
    };

    fn down() -> Probe {
        Probe::Unreachable("connection refused".into())
    }

    #[test]
    fn the_first_probe_sets_the_condition_at_once() {
        let mut seen = Seen::default();
        let c = next_ready(None, &mut seen, &Probe::Ready, 0, T).expect("set");
        assert_eq!((c.type_.as_str(), c.status.as_str()), ("Ready", "True"));
    }

    #[test]
    fn a_member_turns_unknown_only_after_the_failure_threshold() {
        let mut seen = Seen::default();
        let ready = next_ready(None, &mut seen, &Probe::Ready, 0, T).expect("set");
        for at in [1_000, 10_000, 30_999] {
            assert_eq!(
                next_ready(Some(&ready), &mut seen, &down(), at, T),
                None,
                "{at}"
            );
        }
        let c = next_ready(Some(&ready), &mut seen, &down(), 31_000, T).expect("changed");
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("Unknown", "ClusterNotReachable")
        );
        assert!(c.message.contains("connection refused"));
    }

    #[test]
    fn one_good_probe_in_between_starts_the_wait_again() {
        let mut seen = Seen::default();
        let ready = next_ready(None, &mut seen, &Probe::Ready, 0, T).expect("set");
        assert_eq!(next_ready(Some(&ready), &mut seen, &down(), 1_000, T), None);
        assert_eq!(
            next_ready(Some(&ready), &mut seen, &Probe::Ready, 20_000, T),
            None
        );
        assert_eq!(
            next_ready(Some(&ready), &mut seen, &down(), 25_000, T),
            None
        );
        assert_eq!(
            next_ready(Some(&ready), &mut seen, &down(), 40_000, T),
            None,
            "the wait began again at 25 s"
        );
        assert!(next_ready(Some(&ready), &mut seen, &down(), 55_000, T).is_some());
    }

    #[test]
    fn recovery_waits_for_the_success_threshold_and_a_new_reason_shows_at_once() {
        let mut seen = Seen::default();
        let unknown = next_ready(None, &mut seen, &down(), 0, T).expect("set");
        let not_ready = next_ready(
            Some(&unknown),
            &mut seen,
            &Probe::NotReady("etcd".into()),
            1_000,
            T,
        );
        assert_eq!(
            not_ready, None,
            "Unknown to False is a change of status: it waits"
        );
        assert_eq!(
            next_ready(Some(&unknown), &mut seen, &Probe::Ready, 2_000, T),
            None
        );
        let back = next_ready(Some(&unknown), &mut seen, &Probe::Ready, 12_000, T).expect("up");
        assert_eq!(back.status, "True");
        let other = next_ready(
            Some(&unknown),
            &mut Seen::default(),
            &Probe::Unreachable("timeout".into()),
            13_000,
            T,
        )
        .expect("same status, new message");
        assert_eq!(other.last_transition_time, unknown.last_transition_time);
        assert!(other.message.contains("timeout"));
    }
}
