//! What each fault did, for `report.json`'s `failover` section: when it was detected, how
//! many jobs moved, when every moved gang ran whole again, how long two copies of a gang ran at
//! once (while the old member answered, and while it was cut off), and jobs lost.

use std::collections::{BTreeMap, BTreeSet};

use tephra_controllers::graceful_eviction::NewPlacement;

use super::binding::Ghost;
use super::book::Book;
use super::report::{FailoverReport, FaultReport};
use crate::members::fleet::Fleet;
use crate::state::{Parts, PodState};

impl Book {
    /// Opens a fault's record; returns its index. A cluster fault on a member whose Ready
    /// condition already says it is unhealthy (another fault) counts as detected at once.
    pub(crate) fn fault_opened(
        &mut self,
        fleet: &Fleet,
        now: i64,
        cluster: &str,
        kind: &str,
    ) -> usize {
        let known = kind != "node-down"
            && fleet
                .members
                .get(cluster)
                .and_then(|m| m.ready.as_ref())
                .is_some_and(|c| c.status != "True");
        self.records.push(FaultReport {
            cluster: cluster.to_string(),
            kind: kind.to_string(),
            at_s: now as f64 / 1000.0,
            at_ms: now,
            detection_delay_s: known.then_some(0.0),
            ..FaultReport::default()
        });
        let i = self.records.len() - 1;
        if kind != "node-down" {
            self.open.insert(cluster.to_string(), i);
        }
        i
    }

    pub(crate) fn fault_closed(&mut self, now: i64, i: usize) {
        if let Some(r) = self.records.get_mut(i)
            && r.ended_s.is_none()
        {
            r.ended_s = Some(now as f64 / 1000.0);
        }
    }

    /// A node-down fault restarted `job` whole.
    pub(crate) fn fault_restarted(&mut self, i: usize, job: &str) {
        if let Some(r) = self.records.get_mut(i)
            && r.moved.insert(job.to_string())
        {
            r.jobs_moved += 1;
        }
    }

    /// The Ready condition of `cluster` turned `status`: the open fault there is detected.
    pub(crate) fn detected(&mut self, now: i64, cluster: &str, status: &str) {
        if status == "True" {
            return;
        }
        if let Some(r) = self
            .open
            .get(cluster)
            .and_then(|i| self.records.get_mut(*i))
            && r.detection_delay_s.is_none()
        {
            r.detection_delay_s = Some((now - r.at_ms) as f64 / 1000.0);
        }
    }

    /// Measures how long two copies of `job` run at once: the old one (its ghosts still
    /// running, or terminating) and the new one, each at least the gang.
    pub(super) fn both_copies(&mut self, w: &Parts<'_>, job: &str) {
        let placement = NewPlacement::of(w.ctx.cache.world(), job);
        let Some(b) = self.bindings.get(job) else {
            return;
        };
        let min = placement.min_member.max(1) as usize;
        let old: Vec<&Ghost> = b.ghosts.iter().filter(|g| g.running).collect();
        let both = old.len() >= min && placement.running as usize >= min;
        let answers = old.iter().all(|g| w.fleet.reachable(&g.cluster));
        self.overlap(w.ctx.now, w.ctx.grace, job, both.then_some(answers));
    }

    /// Two copies of `job` run from now (`Some`, with whether the old one's member answers),
    /// or not (`None`); the time since the last change is counted.
    fn overlap(&mut self, now: i64, grace_ms: i64, job: &str, state: Option<bool>) {
        let grace = grace_ms as f64 / 1000.0;
        let Some(b) = self.bindings.get_mut(job) else {
            return;
        };
        if b.both_since.map(|(_, a)| a) == state {
            return;
        }
        let since = std::mem::replace(&mut b.both_since, state.map(|a| (now, a)));
        let Some((t, answered)) = since else {
            return;
        };
        let secs = (now - t) as f64 / 1000.0;
        if let Some(r) = b.fault.and_then(|i| self.records.get_mut(i)) {
            if answered {
                r.duplicate_gang_s += secs;
                r.duplicate_beyond_grace_s += (secs - grace).max(0.0);
            } else {
                r.cut_off_overlap_s += secs;
            }
        }
    }

    /// The `failover` section, once the run ends.
    pub(crate) fn failover_report(&mut self, w: &Parts<'_>) -> FailoverReport {
        let jobs: BTreeSet<String> = self.bindings.keys().cloned().collect();
        for job in &jobs {
            // Overlaps still open count up to the end of the run.
            self.overlap(w.ctx.now, w.ctx.grace, job, None);
        }
        let mut records = std::mem::take(&mut self.records);
        for r in &mut records {
            let mut last_back: Option<i64> = Some(r.at_ms);
            let mut last_job: Option<(i64, &String)> = None;
            for job in &r.moved {
                let back = self
                    .bindings
                    .get(job)
                    .and_then(|b| b.back_at)
                    .or_else(|| (!w.flight.jobs.contains_key(job)).then_some(r.at_ms));
                if let Some(b) = back
                    && last_job.is_none_or(|(t, _)| b > t)
                {
                    last_job = Some((b, job));
                }
                last_back = match (last_back, back) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
                if self.lost(w, job) {
                    r.lost_jobs += 1;
                }
            }
            r.all_running_again_s = last_back
                .filter(|_| !r.moved.is_empty())
                .map(|t| (t - r.at_ms) as f64 / 1000.0);
            r.last_running_again = r.all_running_again_s.and(last_job).map(|(_, j)| j.clone());
        }
        let t = w.fleet.timings;
        let fmax = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        FailoverReport {
            settings: BTreeMap::from([
                (
                    "clusterStatusUpdateFrequency_s".into(),
                    t.probe_ms as f64 / 1000.0,
                ),
                (
                    "clusterFailureThreshold_s".into(),
                    t.thresholds.failure_ms as f64 / 1000.0,
                ),
                (
                    "clusterSuccessThreshold_s".into(),
                    t.thresholds.success_ms as f64 / 1000.0,
                ),
                (
                    "noExecuteTaintGrace_s".into(),
                    t.no_execute_ms as f64 / 1000.0,
                ),
                (
                    "gracefulEvictionTimeout_s".into(),
                    t.eviction_timeout_ms as f64 / 1000.0,
                ),
            ]),
            jobs_moved: records.iter().map(|r| r.jobs_moved).sum(),
            max_detection_delay_s: records.iter().map(|r| r.detection_delay_s).fold(None, fmax),
            max_all_running_again_s: records
                .iter()
                .map(|r| r.all_running_again_s)
                .fold(None, fmax),
            duplicate_gang_s: records.iter().map(|r| r.duplicate_gang_s).sum(),
            duplicate_beyond_grace_s: records.iter().map(|r| r.duplicate_beyond_grace_s).sum(),
            lost_jobs: records.iter().map(|r| r.lost_jobs).sum(),
            faults: records,
        }
    }

    /// Whether a moved job is lost: still in flight, yet the scheduler holds no gang for it
    /// or fewer pods than it has.
    fn lost(&self, w: &Parts<'_>, job: &str) -> bool {
        let Some(j) = w.flight.jobs.get(job) else {
            return false;
        };
        let world = w.ctx.cache.world();
        let group = format!("{}/{}", j.group.namespace, j.group.name);
        let Some(gang) = world.job_id(&group).and_then(|id| world.jobs.get(id)) else {
            return true;
        };
        let live = j
            .pods
            .iter()
            .filter(|k| {
                w.flight
                    .pods
                    .get(*k)
                    .is_some_and(|p| p.state != PodState::Done)
            })
            .count();
        gang.tasks.len() < live
    }
}
