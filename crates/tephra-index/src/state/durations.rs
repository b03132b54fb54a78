//! How long pods run, for the expected-start forecast (`crate::eta`): when each pod started,
//! what it is expected to take in all, and what the completed runs of each queue and request
//! shape took. A pod's expected run is, first found: its `tephra.io/expected-duration`
//! annotation (Go's duration syntax, such as `90m`), its PodGroup's, the pod's
//! `activeDeadlineSeconds` (the kubelet ends it then), its `tephra.io/sim-duration` (the run
//! `tephra dev`'s kubelets and `tephra sim` give it), the median of the last completed runs of
//! pods of the same queue and request, and otherwise a default. A run counts once it Succeeded,
//! from `status.startTime` to its containers' last `finishedAt`.

use std::collections::{HashMap, VecDeque};

use k8s_openapi::api::core::v1::Pod;
use tephra_scheduler::cache::World;
use tephra_scheduler::duration::Duration;
use tephra_scheduler::model::PodSpec;
use tephra_scheduler::resources::Resources;

/// The annotation (on a pod or its PodGroup) that says how long it runs.
pub use tephra_api::well_known::EXPECTED_DURATION;

/// Completed runs kept per queue and request shape.
const KEPT: usize = 32;

/// The expected run when nothing is known, seconds (`tephra scheduler --eta-default-duration`).
pub const DEFAULT_RUN_S: i64 = 3600;

/// What is known of one pod's run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Run {
    /// `status.startTime`, seconds.
    started: Option<i64>,
    /// Its own expected run (annotation, then `activeDeadlineSeconds`), seconds.
    expected: Option<i64>,
    /// Whether the expectation is the annotation (which goes before the PodGroup's).
    annotated: bool,
    /// `tephra.io/sim-duration`, seconds: how long a simulated kubelet runs it.
    simulated: Option<i64>,
}

/// Where an expected run came from, most trusted first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// The pod's or its PodGroup's `tephra.io/expected-duration`.
    Annotation,
    /// The pod's `activeDeadlineSeconds`.
    Deadline,
    /// The pod's `tephra.io/sim-duration`, which `tephra dev` and `tephra sim` run it for.
    Simulated,
    /// The median of completed runs of the same queue and request.
    History,
    /// Nothing known: the default.
    Default,
}

impl Source {
    /// In words, for a user reading what a forecast assumed.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Annotation => "its tephra.io/expected-duration",
            Self::Deadline => "its activeDeadlineSeconds",
            Self::Simulated => "its tephra.io/sim-duration, the run tephra dev gives it",
            Self::History => "the median of completed runs like it",
            Self::Default => "nothing known: the default run",
        }
    }
}

/// Pods' runs, PodGroups' expected durations and completed runs.
#[derive(Clone, Debug)]
pub struct Durations {
    pods: HashMap<String, Run>,
    groups: HashMap<String, i64>,
    history: HashMap<(String, Resources), VecDeque<i64>>,
    /// Pods whose completed run is counted: key → uid.
    counted: HashMap<String, String>,
    default_s: i64,
}

impl Default for Durations {
    fn default() -> Self {
        Self::new(DEFAULT_RUN_S)
    }
}

/// Seconds of a Go duration, if it is one and not negative.
pub fn parse_seconds(text: &str) -> Option<i64> {
    Duration::parse(text.trim())
        .ok()
        .filter(|d| !d.is_negative())
        .map(Duration::as_secs)
}

fn annotation(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<i64> {
    meta.annotations
        .as_ref()?
        .get(EXPECTED_DURATION)
        .and_then(|v| parse_seconds(v))
}

/// The queue of `pod`'s PodGroup, as `world` holds it (empty when not known yet).
pub(crate) fn queue_of<'w>(world: &'w World, pod: &PodSpec) -> &'w str {
    pod.group
        .as_ref()
        .and_then(|g| world.job(&format!("{}/{g}", pod.namespace)))
        .and_then(|j| j.group.as_ref())
        .map(|g| g.queue.as_str())
        .unwrap_or_default()
}

impl Durations {
    /// No runs known; a pod with nothing known is expected to run `default_s`.
    pub fn new(default_s: i64) -> Self {
        Self {
            pods: HashMap::new(),
            groups: HashMap::new(),
            history: HashMap::new(),
            counted: HashMap::new(),
            default_s: default_s.max(1),
        }
    }

    /// The same, with `default_s` for a pod of which nothing is known.
    pub fn with_default(mut self, default_s: i64) -> Self {
        self.default_s = default_s.max(1);
        self
    }

    /// Takes in pod `key` as observed at `now`, read into `spec`, of queue `queue`: when it
    /// started, what it expects, and its run once it Succeeded.
    pub fn pod_seen(&mut self, now: i64, key: &str, pod: &Pod, spec: &PodSpec, queue: &str) {
        let status = pod.status.as_ref();
        let started = status
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0.as_second());
        let annotated = annotation(&pod.metadata);
        let deadline = pod
            .spec
            .as_ref()
            .and_then(|s| s.active_deadline_seconds)
            .filter(|d| *d > 0);
        let simulated = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(tephra_api::well_known::SIM_DURATION))
            .and_then(|v| parse_seconds(v));
        let run = Run {
            started,
            expected: annotated.or(deadline),
            annotated: annotated.is_some(),
            simulated,
        };
        self.pods.insert(key.to_string(), run);
        let succeeded = status.and_then(|s| s.phase.as_deref()) == Some("Succeeded");
        if let (true, Some(started)) = (succeeded, started) {
            let id = pod.metadata.uid.clone().unwrap_or_default();
            if self.counted.get(key) != Some(&id) {
                self.counted.insert(key.to_string(), id);
                let finished = status
                    .and_then(|s| s.container_statuses.as_ref())
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
                    .map(|t| t.0.as_second())
                    .max()
                    .unwrap_or(now);
                let runs = self
                    .history
                    .entry((queue.to_string(), spec.shape.request))
                    .or_default();
                runs.push_back((finished - started).max(0));
                if runs.len() > KEPT {
                    runs.pop_front();
                }
            }
        }
    }

    /// Forgets pod `key` (deleted). Its completed run stays counted.
    pub fn pod_gone(&mut self, key: &str) {
        self.pods.remove(key);
        self.counted.remove(key);
    }

    /// Takes in PodGroup `key`'s expected duration, if it says one.
    pub fn group_seen(
        &mut self,
        key: &str,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) {
        match annotation(meta) {
            Some(s) => self.groups.insert(key.to_string(), s),
            None => self.groups.remove(key),
        };
    }

    /// Forgets PodGroup `key`.
    pub fn group_gone(&mut self, key: &str) {
        self.groups.remove(key);
    }

    /// How long `pod` runs in all, and what says so. `world` resolves its queue.
    pub fn expected(&self, world: &World, pod: &PodSpec) -> (i64, Source) {
        let key = format!("{}/{}", pod.namespace, pod.name);
        let run = self.pods.get(&key).copied().unwrap_or_default();
        let group = pod
            .group
            .as_ref()
            .and_then(|g| self.groups.get(&format!("{}/{g}", pod.namespace)));
        if run.annotated
            && let Some(s) = run.expected
        {
            return (s, Source::Annotation);
        }
        if let Some(s) = group {
            return (*s, Source::Annotation);
        }
        if let Some(s) = run.expected {
            return (s, Source::Deadline);
        }
        if let Some(s) = run.simulated {
            return (s, Source::Simulated);
        }
        let queue = queue_of(world, pod);
        if let Some(runs) = self.history.get(&(queue.to_string(), pod.shape.request))
            && !runs.is_empty()
        {
            let mut sorted: Vec<i64> = runs.iter().copied().collect();
            sorted.sort_unstable();
            return (sorted[sorted.len() / 2], Source::History);
        }
        (self.default_s, Source::Default)
    }

    /// How long `pod` still runs from `now`: its expected run less what it ran already (at
    /// least a minute when it has overrun: it is expected to end soon, not to have ended).
    pub fn remaining(&self, world: &World, pod: &PodSpec, now: i64) -> i64 {
        self.remaining_from(world, pod, now).0
    }

    /// [`Self::remaining`], and what its expected run comes from.
    pub fn remaining_from(&self, world: &World, pod: &PodSpec, now: i64) -> (i64, Source) {
        let (total, source) = self.expected(world, pod);
        let key = format!("{}/{}", pod.namespace, pod.name);
        let left = match self.pods.get(&key).and_then(|r| r.started) {
            Some(started) if pod.status.holds_node() => (total - (now - started)).max(60),
            _ => total,
        };
        (left, source)
    }
}
