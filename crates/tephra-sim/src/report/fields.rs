//! `report.json`'s fields: the [`Report`] and its sections, the time series behind the charts,
//! and the grouping of waiting jobs by reason. The fields are stable; other tools read them.
//! New fields may be added, existing ones are not renamed.

use std::collections::BTreeMap;

use serde::Serialize;

use super::hist::Hist;
use crate::checker::Invariants;
use crate::failover::report::FailoverReport;

/// One point of the time series behind the charts.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// Virtual seconds.
    pub t: f64,
    /// Cluster → (GPU utilization, CPU utilization), 0..1.
    pub clusters: BTreeMap<String, (f64, f64)>,
    /// Queue → share of the GPUs in use, 0..1; NaN while fewer than two queues that ask for
    /// GPUs have jobs not finished (a queue alone holds all there is), or fewer than
    /// [`SHARE_FLOOR`] of the fleet's GPUs are in use (a share of almost nothing says nothing).
    pub queue_gpu_share: BTreeMap<String, f64>,
    /// Queue → share of the CPUs in use, likewise.
    pub queue_cpu_share: BTreeMap<String, f64>,
}

/// The part of a fleet's resource that must be in use for queues' shares of it to be drawn.
pub const SHARE_FLOOR: f64 = 0.05;

/// `report.json`.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Scenario file.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// Simulated seconds.
    pub simulated_s: f64,
    /// Wall seconds.
    pub wall_s: f64,
    /// Job counts.
    pub jobs: Jobs,
    /// Pod counts.
    pub pods: Pods,
    /// Violations found by the independent checker (all must be 0).
    pub invariants: Invariants,
    /// Scheduler cost.
    pub scheduler: SchedulerReport,
    /// Per queue.
    pub queues: BTreeMap<String, QueueReport>,
    /// Time-averaged utilization.
    pub utilization: Utilization,
    /// Fairness.
    pub fairness: Fairness,
    /// How the input was interpreted (fractional GPUs, split shapes, the fault rule).
    pub notes: Vec<String>,
    /// Trace rows skipped, by trace and reason.
    pub trace_skipped: BTreeMap<String, BTreeMap<String, u64>>,
    /// The first violations, described.
    pub violations: Vec<String>,
    /// Each fault and what the failover chain made of it.
    pub failover: FailoverReport,
    /// With `--explain JOB`: that job's history (submission, each new reason, binds,
    /// evictions, completion), one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub explain: Vec<String>,
    /// Time series behind the charts (not in report.json).
    #[serde(skip)]
    pub series: Vec<Sample>,
    /// Wait times of all jobs (not in report.json).
    #[serde(skip)]
    pub wait_histogram: Hist,
    /// Wait times of each queue's jobs (not in report.json).
    #[serde(skip)]
    pub wait_by_queue: BTreeMap<String, Hist>,
    /// Where gangs started, in a fleet with HyperNodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyReport>,
    /// How well expected start times were predicted (`--eta-every`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eta: Option<crate::eta::EtaReport>,
}

/// Where gangs of two or more pods started, in clusters with HyperNodes.
#[derive(Clone, Debug, Serialize)]
pub struct TopologyReport {
    /// Gangs started (each counted once, when it first reached its minimum).
    pub gangs_started: u64,
    /// Of those, the ones whose pods all sat within one HyperNode of the lowest tier (a rack).
    pub within_one_lowest_tier: u64,
    /// Their share.
    pub share: f64,
}

/// Job counts.
#[derive(Clone, Debug, Serialize)]
pub struct Jobs {
    /// Submitted.
    pub submitted: u64,
    /// Completed.
    pub completed: u64,
    /// Failed.
    pub failed: u64,
    /// Waiting at the end.
    pub pending_at_end: u64,
    /// Running at the end.
    pub running_at_end: u64,
    /// Submitted but neither finished, running nor pending. Must be 0.
    pub lost: u64,
    /// Why the jobs still waiting at the end wait: each distinct last reason the scheduler
    /// gave, most common first, with how many jobs and up to 5 of them.
    pub pending_reasons: Vec<PendingReason>,
}

/// One reason jobs wait, with how many and which.
#[derive(Clone, Debug, Serialize)]
pub struct PendingReason {
    /// The scheduler's reason and message, without the per-job task count.
    pub reason: String,
    /// Jobs waiting for it.
    pub count: u64,
    /// Up to 5 of them.
    pub jobs: Vec<String>,
}

/// Groups waiting jobs by their last reason (`None`: none given yet), most common first.
pub fn pending_reasons<'a>(
    waiting: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> Vec<PendingReason> {
    let mut by: BTreeMap<String, (u64, Vec<String>)> = BTreeMap::new();
    for (job, why) in waiting {
        let key = match why {
            Some(w) => strip_task_count(w),
            None => "no reason given yet (not looked at by a session)".to_string(),
        };
        let e = by.entry(key).or_default();
        e.0 += 1;
        if e.1.len() < 5 {
            e.1.push(job.to_string());
        }
    }
    let mut out: Vec<PendingReason> = by
        .into_iter()
        .map(|(reason, (count, mut jobs))| {
            jobs.sort();
            PendingReason {
                reason,
                count,
                jobs,
            }
        })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
    out
}

/// `NotEnoughResources: 3/4 tasks in gang unschedulable: ...` without the `3/4 tasks in gang
/// unschedulable: ` part, which differs between jobs of one cause.
fn strip_task_count(why: &str) -> String {
    const MARK: &str = " tasks in gang unschedulable: ";
    match why.find(MARK) {
        Some(i) => {
            let head = &why[..i];
            let reason = head.rsplit_once(": ").map_or("", |(r, _)| r);
            let rest = &why[i + MARK.len()..];
            if reason.is_empty() {
                rest.to_string()
            } else {
                format!("{reason}: {rest}")
            }
        }
        None => why.to_string(),
    }
}

/// Pod counts.
#[derive(Clone, Debug, Serialize)]
pub struct Pods {
    /// Binds.
    pub bound: u64,
    /// Evictions, all causes.
    pub evicted: u64,
    /// Evicted by preemption (within a queue, for higher priority).
    pub preempted: u64,
    /// Evicted by reclaim (across queues, back to deserved shares).
    pub reclaimed: u64,
    /// Evicted because their node failed (the gang restarts).
    pub lost_to_faults: u64,
    /// Set aside because failover moved their gang to another cluster.
    pub moved_by_failover: u64,
}

/// Scheduler cost.
#[derive(Clone, Debug, Serialize)]
pub struct SchedulerReport {
    /// Sessions run.
    pub sessions: u64,
    /// Wall time per session.
    pub session_ms: Quantiles,
    /// Pods bound per wall second of the whole run.
    pub pods_bound_per_wall_s: f64,
}

/// Quantiles.
#[derive(Clone, Debug, Serialize)]
pub struct Quantiles {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

/// Per queue.
#[derive(Clone, Debug, Serialize)]
pub struct QueueReport {
    /// Wait from submission until the gang's minimum had started.
    pub wait_s: Wait,
    /// GPU-hours consumed.
    pub gpu_hours: f64,
    /// Deserved share of GPU time (by weight among the queues that asked for GPUs).
    pub deserved_share: f64,
    /// Actual share of GPU time.
    pub actual_share: f64,
    /// Jobs submitted.
    pub jobs_submitted: u64,
    /// Jobs completed.
    pub jobs_completed: u64,
}

/// Wait times.
#[derive(Clone, Debug, Serialize)]
pub struct Wait {
    /// Mean.
    pub mean: f64,
    /// 95th percentile.
    pub p95: f64,
}

/// Utilization.
#[derive(Clone, Debug, Serialize)]
pub struct Utilization {
    /// GPU, time-averaged over the run.
    pub gpu: f64,
    /// CPU, time-averaged over the run.
    pub cpu: f64,
    /// Per cluster.
    pub by_cluster: BTreeMap<String, ClusterUtil>,
}

/// One cluster's utilization.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterUtil {
    /// GPU.
    pub gpu: f64,
    /// CPU.
    pub cpu: f64,
    /// The GPUs it has (0: a CPU-only cluster, whose GPU figures do not apply).
    pub gpus: i64,
}

/// Fairness.
#[derive(Clone, Debug, Serialize)]
pub struct Fairness {
    /// Jain's index over queues of actual/deserved GPU share (1 is perfectly fair).
    pub jain_gpu_share: f64,
}
