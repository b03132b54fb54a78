//! What every part of the simulator acts through: the virtual clock, the agenda and the
//! session cadence, the scheduler's cache, the eviction grace period, the checker and
//! statistics watching the run, and the history of the job being explained. The parts (the
//! fleet, the jobs in flight, failover, the faults) each keep their own state and take this
//! as an argument; none of them is reached through another.

use tephra_scheduler::cache::{Cache, Event};
use tephra_scheduler::model::PodGroupSpec;

use crate::agenda::{Agenda, Cadence, Ev};
use crate::checker::Checker;
use crate::error::{SimError, build_err};
use crate::record::Record;
use crate::report::stats::Stats;
use crate::workload::SimJob;

/// A quantity of `name` in `list`, scaled (cpu in millicores), or 0.
pub(crate) fn scaled(list: &[(String, String)], name: &str) -> i64 {
    let scale = if name == "cpu" { 1000 } else { 1 };
    list.iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| tephra_scheduler::quantity::parse_scaled(v, scale).ok())
        .unwrap_or(0)
}

/// The clock, the agenda, the cache and the watchers every part acts through.
pub(crate) struct Ctx {
    /// Simulated time, in ms.
    pub(crate) now: i64,
    /// The scenario file, for errors.
    pub(crate) source: String,
    pub(crate) cache: Cache,
    /// The events to come.
    pub(crate) agenda: Agenda,
    /// When sessions run.
    pub(crate) cadence: Cadence,
    /// `run.evictionGracePeriod`, in ms.
    pub(crate) grace: i64,
    pub(crate) checker: Checker,
    pub(crate) stats: Stats,
    /// The expected-start probe, when asked for (`--eta-every`).
    pub(crate) eta: Option<crate::eta::EtaProbe>,
    /// With `--explain JOB`: that job's key and its history so far.
    pub(crate) explain: Option<(String, Vec<String>)>,
}

impl Ctx {
    /// The cache takes `e`.
    pub(crate) fn apply(&mut self, e: Event) -> Result<(), SimError> {
        self.cache.apply(e).map_err(build_err(&self.source))
    }

    /// Puts `ev` on the agenda at `t` (ms).
    pub(crate) fn push(&mut self, t: i64, ev: Ev) {
        self.agenda.push(t, ev);
    }

    /// Something changed: a session runs at the next period, if none is on the agenda.
    pub(crate) fn mark_dirty(&mut self) {
        if let Some(at) = self.cadence.changed(self.now) {
            self.push(at, Ev::Tick);
        }
    }

    /// Adds a line to the history of the job being explained (`--explain`), if it is `job`.
    pub(crate) fn explain(&mut self, job: &str, line: impl FnOnce() -> String) {
        if let Some((key, lines)) = &mut self.explain
            && key == job
        {
            let at = crate::human::clock(self.now as f64 / 1000.0);
            lines.push(format!("{at:>10}  {}", line()));
        }
    }

    /// A job is submitted: the checker, the statistics and the event stream hear of it.
    pub(crate) fn announce(
        &mut self,
        job: &SimJob,
        group: &PodGroupSpec,
        out: &mut dyn FnMut(&Record),
    ) {
        let key = job.key();
        self.checker
            .job(&key, group.min_member, (*group.policy).clone());
        let wants_gpu = job
            .tasks
            .iter()
            .any(|t| scaled(&t.request, "nvidia.com/gpu") > 0);
        self.stats.submitted(&job.queue, wants_gpu);
        out(&Record::submit(
            self.now,
            &key,
            &job.queue,
            group.min_member,
            group.policy.splittable,
        ));
    }
}
