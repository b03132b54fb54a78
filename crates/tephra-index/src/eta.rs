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
use crate::state::durations::{Durations, Source};
use crate::view::FleetView;
use crate::writes::Write;

/// The PodGroup annotation that carries a waiting job's expected start: an RFC 3339 time,
/// `after <time>` when it does not start within the forecast's horizon (the time is the
/// horizon's end), or `never: <why>` when it never starts as the fleet is (it can never be
/// placed, or its queue does not exist).
pub use tephra_api::well_known::EXPECTED_START;
/// The PodGroup annotation that says what its expected start assumes ([`Basis::text`]),
/// written with [`EXPECTED_START`].
pub use tephra_api::well_known::EXPECTED_START_BASIS;

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
    /// What each expected start (`Expected::At`) assumes of the jobs running now.
    pub basis: BTreeMap<String, Basis>,
}

/// How sure an expected start is: as sure as the least trusted expected run it assumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Every run it assumes is declared (expected duration, deadline, simulated run).
    High,
    /// Some run it assumes is the median of completed runs like it.
    Medium,
    /// Some run it assumes is the default: nothing is known of it.
    Low,
}

impl Confidence {
    fn of(source: Source) -> Self {
        match source {
            Source::Annotation | Source::Deadline | Source::Simulated => Self::High,
            Source::History => Self::Medium,
            Source::Default => Self::Low,
        }
    }
}

/// A running job an expected start assumes ends before it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AssumedEnd {
    /// The job, as the user named it (`namespace/name` of its Volcano Job, or of its
    /// PodGroup).
    pub job: String,
    /// When its last pod to end before the start is expected to end (seconds).
    pub at: i64,
    /// Where that pod's expected run comes from, in words.
    pub from: &'static str,
}

/// What an expected start assumes: the running jobs that end last before it (those whose
/// room it most likely waits for, at most [`ASSUMED_SHOWN`]), and how sure it is (every
/// running pod assumed to end before it counts).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Basis {
    /// How sure.
    pub confidence: Confidence,
    /// The running jobs assumed to end before it, the latest first.
    pub ends: Vec<AssumedEnd>,
    /// Running pods assumed to end before it, in all.
    pub pods: u32,
}

/// Running jobs named in a [`Basis`].
pub const ASSUMED_SHOWN: usize = 3;

impl Basis {
    /// In words: `high confidence; assumes default/a ends at 06:05Z (its ...), ...`.
    pub fn text(&self) -> String {
        let confidence = match self.confidence {
            Confidence::High => "high",
            Confidence::Medium => "medium",
            Confidence::Low => "low",
        };
        if self.ends.is_empty() {
            return format!("{confidence} confidence; assumes no running job ends first");
        }
        let ends: Vec<String> = self
            .ends
            .iter()
            .map(|e| {
                format!(
                    "{} ends at {} ({})",
                    e.job,
                    Expected::At(e.at).text(),
                    e.from
                )
            })
            .collect();
        format!(
            "{confidence} confidence; assumes {} running pod(s) end before it, last of all: {}",
            self.pods,
            ends.join("; ")
        )
    }
}

/// What each start in `starts` assumes, from the running pods' expected ends.
fn bases(
    world: &tephra_scheduler::cache::World,
    durations: &Durations,
    names: &std::collections::HashMap<String, String>,
    now: i64,
    starts: &BTreeMap<String, i64>,
) -> BTreeMap<String, Basis> {
    if starts.is_empty() {
        return BTreeMap::new();
    }
    // Every running pod's expected end, earliest first.
    let mut ends: Vec<(i64, Source, &str)> = Vec::new();
    for (_, t) in world.tasks.iter() {
        if t.node.is_none() || !t.spec.status.holds_node() {
            continue;
        }
        let Some(job) = world.jobs.get(t.job).filter(|j| !j.ghost) else {
            continue;
        };
        let (left, source) = durations.remaining_from(world, &t.spec, now);
        let name = names.get(&job.key).unwrap_or(&job.key);
        ends.push((now + left, source, name.as_str()));
    }
    ends.sort_unstable();
    // The least trusted source among the first i ends.
    let mut worst = Vec::with_capacity(ends.len());
    let mut w = Source::Annotation;
    for (_, s, _) in &ends {
        w = w.max(*s);
        worst.push(w);
    }
    starts
        .iter()
        .map(|(job, &at)| {
            let n = ends.partition_point(|(t, _, _)| *t <= at);
            let mut shown: Vec<AssumedEnd> = Vec::new();
            for (t, s, j) in ends[..n].iter().rev() {
                if shown.len() == ASSUMED_SHOWN {
                    break;
                }
                if !shown.iter().any(|e| e.job == *j) {
                    shown.push(AssumedEnd {
                        job: (*j).to_string(),
                        at: *t,
                        from: s.describe(),
                    });
                }
            }
            let confidence = n
                .checked_sub(1)
                .map_or(Confidence::High, |i| Confidence::of(worst[i]));
            let basis = Basis {
                confidence,
                ends: shown,
                pods: n as u32,
            };
            (job.clone(), basis)
        })
        .collect()
}

/// What one round is given.
#[derive(Clone)]
pub struct Round {
    cache: Cache,
    durations: Durations,
    /// Volcano Jobs' keys by their PodGroups' ([`State::user_keys`]), to name running jobs
    /// as users named them.
    names: std::collections::HashMap<String, String>,
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
            names: state.user_keys(),
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
        let basis = bases(world, &self.durations, &self.names, self.now, &f.starts);
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
            basis,
        }
    }
}

/// The annotation writes `p` calls for at `now`: a waiting job's expected start where it has
/// none or it moved enough; none on a job that runs or completed.
pub fn annotation_writes(state: &State, p: &Predictions, now: i64) -> Vec<Write> {
    let mut out = Vec::new();
    let world = state.cache().world();
    for (job, written, cluster) in state.group_annotations(EXPECTED_START) {
        // Kubernetes' own PodGroups are not annotated: their expected start is in the UI and
        // `tephra job view`, and the scheduler's role patches only their status.
        if state.is_kube_group(job) {
            continue;
        }
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
        // What it assumes goes with it (and goes with it).
        let basis = value
            .as_ref()
            .and_then(|_| p.basis.get(job))
            .map(Basis::text);
        out.push(Write::GroupAnnotation {
            cluster: cluster.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            set: vec![
                (EXPECTED_START.to_string(), value),
                (EXPECTED_START_BASIS.to_string(), basis),
            ],
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
        let key = format!("{}/{}", j.namespace, j.name);
        if let Some(b) = p.basis.get(&key) {
            j.expected_basis = Some(b.text());
        }
        match p.jobs.get(&key) {
            Some(Expected::At(t)) => j.expected_start = Some(*t),
            Some(Expected::After(t)) => j.expected_after = Some(*t),
            Some(e @ Expected::Never(_)) => j.expected_never = e.never_why().map(str::to_string),
            None => {}
        }
    }
}
