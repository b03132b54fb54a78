//! Expected start times on a running scheduler, recomputed off the session's path. A
//! [`Round`] is what one recomputation is given, taken from the [`State`] in O(1) (the cache is
//! shared until either side changes it) plus the pods' expected runs; [`Round::run`] runs the
//! core's forecast ([`tephra_scheduler::eta`]) on it, anywhere, without IO. What follows from
//! its [`Predictions`]: the jobs' expected start in the UI's view, and each PodGroup's
//! `tephra.io/expected-start` annotation, written only when the prediction moves by more than a
//! tenth of the wait it predicted and by at least a minute, and removed once the job runs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tephra_scheduler::SchedulerConfig;
use tephra_scheduler::cache::Cache;
use tephra_scheduler::eta::{Budget, Never, forecast};
use tephra_scheduler::model::GroupPhase;

use crate::state::State;
use crate::state::durations::Durations;
use crate::view::FleetView;
use crate::writes::Write;

/// The PodGroup annotation that carries a waiting job's expected start: an RFC 3339 time,
/// `after <time>` when it does not start within the forecast's horizon (the time is the
/// horizon's end), or `never: <why>` when it never starts as the fleet is (it can never be
/// placed, or its queue does not exist).
pub use tephra_api::well_known::EXPECTED_START;

/// A move smaller than this (seconds) is never written.
const MIN_MOVE_S: i64 = 60;

/// One job's expected start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    /// At this time (seconds since the epoch).
    At(i64),
    /// Not before this time: beyond the horizon.
    After(i64),
    /// Never, as the fleet is, for this reason.
    Never(Never),
}

/// What the annotation says of a job that can never be placed.
const NEVER_FITS: &str = "never: it can never be placed as the fleet is (see its Unschedulable \
                          condition for the pod or gang that fits nowhere)";
/// What the annotation says of a job whose queue does not exist.
const NEVER_QUEUE: &str = "never: its queue does not exist";

impl Expected {
    /// The seconds it names (none for never).
    pub fn time(self) -> Option<i64> {
        match self {
            Self::At(t) | Self::After(t) => Some(t),
            Self::Never(_) => None,
        }
    }

    /// As the annotation says it.
    pub fn text(self) -> String {
        let stamp = |t: i64| {
            k8s_openapi::jiff::Timestamp::from_second(t)
                .map_or_else(|_| t.to_string(), |ts| ts.to_string())
        };
        match self {
            Self::At(t) => stamp(t),
            Self::After(t) => format!("after {}", stamp(t)),
            Self::Never(Never::Fits) => NEVER_FITS.to_string(),
            Self::Never(Never::NoQueue) => NEVER_QUEUE.to_string(),
        }
    }

    /// Why it never starts, in a few words (for the UI and the CLI), if it never does.
    pub fn never_why(self) -> Option<&'static str> {
        match self {
            Self::Never(Never::Fits) => Some("it can never be placed as the fleet is"),
            Self::Never(Never::NoQueue) => Some("its queue does not exist"),
            _ => None,
        }
    }

    /// Reads the annotation's text.
    pub fn parse(text: &str) -> Option<Self> {
        let secs = |s: &str| {
            s.trim()
                .parse::<k8s_openapi::jiff::Timestamp>()
                .ok()
                .map(|t| t.as_second())
        };
        let text = text.trim();
        if let Some(why) = text.strip_prefix("never:") {
            return Some(Self::Never(if why.contains("queue") {
                Never::NoQueue
            } else {
                Never::Fits
            }));
        }
        match text.strip_prefix("after ") {
            Some(rest) => secs(rest).map(Self::After),
            None => secs(text).map(Self::At),
        }
    }

    /// Whether going from `self` (as written) to `new` is a move worth writing at `now`: a
    /// change of kind, or of more than a tenth of the wait `self` predicted and at least a
    /// minute.
    pub fn moved(self, new: Self, now: i64) -> bool {
        let (Some(old), Some(t)) = (self.time(), new.time()) else {
            return self != new;
        };
        if std::mem::discriminant(&self) != std::mem::discriminant(&new) {
            return true;
        }
        let by = (t - old).abs();
        let wait = (old - now).max(0);
        by >= MIN_MOVE_S && by * 10 > wait
    }
}

/// What one round found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Predictions {
    /// When the round's state was taken (seconds).
    pub computed_at: i64,
    /// Each job that waited (`namespace/name`): when it is expected to start.
    pub jobs: BTreeMap<String, Expected>,
    /// Jobs that waited and the budget did not reach.
    pub unresolved: BTreeSet<String>,
    /// Sessions the round ran.
    pub sessions: u32,
    /// Whether the budget ran out before the horizon.
    pub cut_short: bool,
}

/// What one round is given.
#[derive(Clone)]
pub struct Round {
    cache: Cache,
    durations: Durations,
    config: Arc<SchedulerConfig>,
    now: i64,
    budget: Budget,
}

impl Round {
    /// The round for `state` at `now` under `config`, within `budget`; a pod of which nothing
    /// is known runs `default_s`.
    pub fn new(
        state: &State,
        config: Arc<SchedulerConfig>,
        now: i64,
        budget: Budget,
        default_s: i64,
    ) -> Self {
        Self {
            cache: state.cache().clone(),
            durations: state.durations().clone().with_default(default_s),
            config,
            now,
            budget,
        }
    }

    /// Runs the forecast. The round's cache is first made its own, so that the state it came
    /// from copies nothing when it next changes.
    pub fn run(mut self) -> Predictions {
        self.cache.detach();
        let world = self.cache.world();
        let runs_for =
            |pod: &tephra_scheduler::model::PodSpec| self.durations.remaining(world, pod, self.now);
        let f = forecast(&self.cache, &self.config, self.now, &runs_for, self.budget);
        let end = self.now + self.budget.horizon;
        let mut jobs: BTreeMap<String, Expected> = f
            .starts
            .into_iter()
            .map(|(j, t)| (j, Expected::At(t)))
            .collect();
        jobs.extend(f.not_within.into_iter().map(|j| (j, Expected::After(end))));
        jobs.extend(
            f.never
                .into_iter()
                .map(|(j, why)| (j, Expected::Never(why))),
        );
        Predictions {
            computed_at: self.now,
            jobs,
            unresolved: f.unresolved,
            sessions: f.sessions,
            cut_short: f.cut_short,
        }
    }
}

/// The annotation writes `p` calls for at `now`: a waiting job's expected start where it has
/// none or it moved enough; none on a job that runs or completed.
pub fn annotation_writes(state: &State, p: &Predictions, now: i64) -> Vec<Write> {
    let mut out = Vec::new();
    let world = state.cache().world();
    for (job, written, cluster) in state.group_annotations(EXPECTED_START) {
        let phase = world
            .job(job)
            .and_then(|j| j.group.as_ref())
            .map(|g| g.phase);
        let value = match (p.jobs.get(job), written.and_then(Expected::parse)) {
            _ if matches!(phase, Some(GroupPhase::Running | GroupPhase::Completed)) => {
                if written.is_none() {
                    continue;
                }
                None
            }
            (Some(new), Some(old)) if !old.moved(*new, now) => continue,
            (Some(new), _) => Some(new.text()),
            (None, _) => continue,
        };
        let Some((namespace, name)) = job.split_once('/') else {
            continue;
        };
        out.push(Write::GroupAnnotation {
            cluster: cluster.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            key: EXPECTED_START.to_string(),
            value,
        });
    }
    out
}

#[cfg(test)]
mod tests;

/// Fills `view`'s jobs' expected starts from `p`.
pub fn annotate_view(view: &mut FleetView, p: &Predictions) {
    view.forecast = Some(crate::view::ForecastView {
        computed_at: p.computed_at,
        sessions: p.sessions,
        cut_short: p.cut_short,
    });
    for j in &mut view.jobs {
        match p.jobs.get(&format!("{}/{}", j.namespace, j.name)) {
            Some(Expected::At(t)) => j.expected_start = Some(*t),
            Some(Expected::After(t)) => j.expected_after = Some(*t),
            Some(e @ Expected::Never(_)) => j.expected_never = e.never_why().map(str::to_string),
            None => {}
        }
    }
}
