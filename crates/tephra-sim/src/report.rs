//! `report.json`, and the statistics gathered during a run. The report's fields are stable;
//! other tools read them. New fields may be added, existing ones are not renamed.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::checker::Invariants;

/// A log-bucketed histogram: constant memory whatever the number of samples, quantiles within
/// 2% of the true value.
#[derive(Clone, Debug, Default)]
pub struct Hist {
    buckets: BTreeMap<u32, u64>,
    count: u64,
    sum: f64,
    max: f64,
}

const GROWTH: f64 = 1.02;

impl Hist {
    /// Adds a non-negative sample.
    pub fn add(&mut self, v: f64) {
        let v = v.max(0.0);
        let b = ((1.0 + v).ln() / GROWTH.ln()).floor() as u32;
        *self.buckets.entry(b).or_insert(0) += 1;
        self.count += 1;
        self.sum += v;
        self.max = self.max.max(v);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Mean (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum / self.count as f64
        }
    }

    /// Largest sample.
    pub fn max(&self) -> f64 {
        self.max
    }

    /// The `q` quantile (0..1), as the upper edge of its bucket, capped at the maximum.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let target = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, n) in &self.buckets {
            seen += n;
            if seen >= target {
                return (GROWTH.powi(*b as i32 + 1) - 1.0).min(self.max);
            }
        }
        self.max
    }

    /// Bucketed counts, for charts: (lower edge, upper edge, count).
    pub fn bins(&self) -> Vec<(f64, f64, u64)> {
        self.buckets
            .iter()
            .map(|(b, n)| {
                (
                    GROWTH.powi(*b as i32) - 1.0,
                    GROWTH.powi(*b as i32 + 1) - 1.0,
                    *n,
                )
            })
            .collect()
    }

    /// Merges another histogram in.
    pub fn merge(&mut self, o: &Hist) {
        for (b, n) in &o.buckets {
            *self.buckets.entry(*b).or_insert(0) += n;
        }
        self.count += o.count;
        self.sum += o.sum;
        self.max = self.max.max(o.max);
    }
}

#[derive(Clone, Debug, Default)]
struct QueueStats {
    weight: u32,
    submitted: u64,
    /// Whether the queue ever asked for GPUs: GPU fairness is over these queues.
    gpu_demand: bool,
    completed: u64,
    failed: u64,
    wait: Hist,
    gpu_ms: f64,
    gpu_now: i64,
}

#[derive(Clone, Debug, Default)]
struct ClusterStats {
    gpu_cap: i64,
    cpu_cap: i64,
    gpu_used: i64,
    cpu_used: i64,
    gpu_area: f64,
    cpu_area: f64,
    last: i64,
}

impl ClusterStats {
    fn advance(&mut self, t: i64) {
        let dt = (t - self.last).max(0) as f64;
        self.gpu_area += self.gpu_used as f64 * dt;
        self.cpu_area += self.cpu_used as f64 * dt;
        self.last = t;
    }
}

/// One point of the time series behind the charts.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// Virtual seconds.
    pub t: f64,
    /// Cluster → (GPU utilization, CPU utilization), 0..1.
    pub clusters: BTreeMap<String, (f64, f64)>,
    /// Queue → share of the GPUs in use, 0..1.
    pub queue_gpu_share: BTreeMap<String, f64>,
}

/// Statistics gathered during a run.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    queues: BTreeMap<String, QueueStats>,
    clusters: BTreeMap<String, ClusterStats>,
    sessions: Hist,
    bound: u64,
    evicted: u64,
    evicted_by: BTreeMap<&'static str, u64>,
    samples: Vec<Sample>,
    sample_every: i64,
    last_sample: Option<i64>,
}

impl Stats {
    /// Declares a queue and its weight.
    pub fn queue(&mut self, name: &str, weight: u32) {
        self.queues.entry(name.to_string()).or_default().weight = weight.max(1);
    }

    /// Declares a cluster.
    pub fn cluster(&mut self, name: &str) {
        self.clusters.entry(name.to_string()).or_default();
    }

    /// Adds node capacity to a cluster.
    pub fn capacity(&mut self, cluster: &str, gpus: i64, cpu_milli: i64) {
        let c = self.clusters.entry(cluster.to_string()).or_default();
        c.gpu_cap += gpus;
        c.cpu_cap += cpu_milli;
    }

    fn q(&mut self, queue: &str) -> &mut QueueStats {
        let q = self.queues.entry(queue.to_string()).or_default();
        q.weight = q.weight.max(1);
        q
    }

    /// A job was submitted; `gpus` tells whether it asks for GPUs.
    pub fn submitted(&mut self, queue: &str, gpus: bool) {
        let q = self.q(queue);
        q.submitted += 1;
        q.gpu_demand |= gpus;
    }

    /// A job completed.
    pub fn completed(&mut self, queue: &str) {
        self.q(queue).completed += 1;
    }

    /// A job ended without completing (a Volcano Job Failed, Aborted or Terminated).
    pub fn failed(&mut self, queue: &str) {
        self.q(queue).failed += 1;
    }

    /// A job's gang started after waiting `secs`.
    pub fn waited(&mut self, queue: &str, secs: f64) {
        self.q(queue).wait.add(secs);
    }

    /// GPU time consumed by a pod of `queue`.
    pub fn gpu_time(&mut self, queue: &str, gpus: i64, ms: i64) {
        self.q(queue).gpu_ms += (gpus * ms.max(0)) as f64;
    }

    /// A session took `ms` of wall time.
    pub fn session(&mut self, ms: f64) {
        self.sessions.add(ms);
    }

    /// A pod now holds resources in a cluster.
    pub fn bound(&mut self, cluster: &str, queue: &str, gpus: i64, cpu: i64, t: i64) {
        self.bound += 1;
        self.q(queue).gpu_now += gpus;
        let c = self.clusters.entry(cluster.to_string()).or_default();
        c.advance(t);
        c.gpu_used += gpus;
        c.cpu_used += cpu;
        self.sample(t);
    }

    /// A pod no longer holds resources.
    pub fn released(&mut self, cluster: &str, queue: &str, gpus: i64, cpu: i64, t: i64) {
        self.q(queue).gpu_now -= gpus;
        let c = self.clusters.entry(cluster.to_string()).or_default();
        c.advance(t);
        c.gpu_used -= gpus;
        c.cpu_used -= cpu;
        self.sample(t);
    }

    /// A pod was evicted: by a node fault (`fault`), `failover`, `preempt` or `reclaim`.
    pub fn evicted(&mut self, kind: &'static str) {
        self.evicted += 1;
        *self.evicted_by.entry(kind).or_insert(0) += 1;
    }

    fn sample(&mut self, t: i64) {
        if self.sample_every == 0 {
            self.sample_every = 60_000;
        }
        if self.last_sample.is_some_and(|l| t - l < self.sample_every) {
            return;
        }
        self.last_sample = Some(t);
        let total_gpu: i64 = self.queues.values().map(|q| q.gpu_now.max(0)).sum();
        self.samples.push(Sample {
            t: t as f64 / 1000.0,
            clusters: self
                .clusters
                .iter()
                .map(|(n, c)| {
                    let f = |u: i64, cap: i64| if cap > 0 { u as f64 / cap as f64 } else { 0.0 };
                    (
                        n.clone(),
                        (f(c.gpu_used, c.gpu_cap), f(c.cpu_used, c.cpu_cap)),
                    )
                })
                .collect(),
            queue_gpu_share: self
                .queues
                .iter()
                .map(|(n, q)| {
                    let share = if total_gpu > 0 {
                        q.gpu_now.max(0) as f64 / total_gpu as f64
                    } else {
                        0.0
                    };
                    (n.clone(), share)
                })
                .collect(),
        });
        if self.samples.len() > 1000 {
            // Keep memory flat: halve the series and sample half as often.
            let kept: Vec<Sample> = self.samples.iter().step_by(2).cloned().collect();
            self.samples = kept;
            self.sample_every *= 2;
        }
    }

    /// Jobs submitted so far.
    pub fn total_submitted(&self) -> u64 {
        self.queues.values().map(|q| q.submitted).sum()
    }

    /// Jobs completed so far.
    pub fn total_completed(&self) -> u64 {
        self.queues.values().map(|q| q.completed).sum()
    }

    /// Pods bound so far.
    pub fn total_bound(&self) -> u64 {
        self.bound
    }

    /// Closes the books and builds the report.
    #[allow(clippy::too_many_arguments)]
    pub fn finish(
        mut self,
        scenario: &str,
        seed: u64,
        now_ms: i64,
        wall_s: f64,
        pending: u64,
        running: u64,
        invariants: Invariants,
    ) -> Report {
        for c in self.clusters.values_mut() {
            c.advance(now_ms);
        }
        let span = now_ms.max(1) as f64;
        let (mut gpu_area, mut gpu_cap, mut cpu_area, mut cpu_cap) = (0.0, 0.0, 0.0, 0.0);
        let mut by_cluster = BTreeMap::new();
        for (name, c) in &self.clusters {
            gpu_area += c.gpu_area;
            cpu_area += c.cpu_area;
            gpu_cap += c.gpu_cap as f64 * span;
            cpu_cap += c.cpu_cap as f64 * span;
            let f = |a: f64, cap: i64| {
                if cap > 0 {
                    a / (cap as f64 * span)
                } else {
                    0.0
                }
            };
            by_cluster.insert(
                name.clone(),
                ClusterUtil {
                    gpu: f(c.gpu_area, c.gpu_cap),
                    cpu: f(c.cpu_area, c.cpu_cap),
                    gpus: c.gpu_cap,
                },
            );
        }
        let active: Vec<(&String, &QueueStats)> = self
            .queues
            .iter()
            .filter(|(_, q)| q.submitted > 0)
            .collect();
        let weights: f64 = active
            .iter()
            .filter(|(_, q)| q.gpu_demand)
            .map(|(_, q)| f64::from(q.weight))
            .sum();
        let gpu_total: f64 = active.iter().map(|(_, q)| q.gpu_ms).sum();
        let mut queues = BTreeMap::new();
        let mut ratios = Vec::new();
        for (name, q) in &active {
            let deserved = if weights > 0.0 && q.gpu_demand {
                f64::from(q.weight) / weights
            } else {
                0.0
            };
            let actual = if gpu_total > 0.0 {
                q.gpu_ms / gpu_total
            } else {
                0.0
            };
            if deserved > 0.0 {
                ratios.push(actual / deserved);
            }
            queues.insert(
                (*name).clone(),
                QueueReport {
                    wait_s: Wait {
                        mean: q.wait.mean(),
                        p95: q.wait.quantile(0.95),
                    },
                    gpu_hours: q.gpu_ms / 3_600_000.0,
                    deserved_share: deserved,
                    actual_share: actual,
                    jobs_submitted: q.submitted,
                    jobs_completed: q.completed,
                },
            );
        }
        let sum: f64 = ratios.iter().sum();
        let sq: f64 = ratios.iter().map(|x| x * x).sum();
        let jain = if sq > 0.0 {
            sum * sum / (ratios.len() as f64 * sq)
        } else {
            1.0
        };
        let submitted = self.total_submitted();
        let completed = self.total_completed();
        let failed: u64 = self.queues.values().map(|q| q.failed).sum();
        let mut wait_all = Hist::default();
        for q in self.queues.values() {
            wait_all.merge(&q.wait);
        }
        Report {
            scenario: scenario.to_string(),
            seed,
            simulated_s: now_ms as f64 / 1000.0,
            wall_s,
            jobs: Jobs {
                submitted,
                completed,
                failed,
                pending_at_end: pending,
                pending_reasons: Vec::new(),
                running_at_end: running,
                lost: submitted.saturating_sub(completed + failed + pending + running),
            },
            pods: Pods {
                bound: self.bound,
                evicted: self.evicted,
                preempted: self.evicted_by.get("preempt").copied().unwrap_or(0),
                reclaimed: self.evicted_by.get("reclaim").copied().unwrap_or(0),
                lost_to_faults: self.evicted_by.get("fault").copied().unwrap_or(0),
                moved_by_failover: self.evicted_by.get("failover").copied().unwrap_or(0),
            },
            invariants,
            scheduler: SchedulerReport {
                sessions: self.sessions.count(),
                session_ms: Quantiles {
                    p50: self.sessions.quantile(0.5),
                    p99: self.sessions.quantile(0.99),
                    max: self.sessions.max(),
                },
                pods_bound_per_wall_s: if wall_s > 0.0 {
                    self.bound as f64 / wall_s
                } else {
                    0.0
                },
            },
            queues,
            utilization: Utilization {
                gpu: if gpu_cap > 0.0 {
                    gpu_area / gpu_cap
                } else {
                    0.0
                },
                cpu: if cpu_cap > 0.0 {
                    cpu_area / cpu_cap
                } else {
                    0.0
                },
                by_cluster,
            },
            fairness: Fairness {
                jain_gpu_share: jain,
            },
            notes: Vec::new(),
            trace_skipped: BTreeMap::new(),
            violations: Vec::new(),
            failover: crate::failover::FailoverReport::default(),
            explain: Vec::new(),
            series: self.samples,
            wait_histogram: wait_all,
        }
    }
}

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
    pub failover: crate::failover::FailoverReport,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_within_two_percent() {
        let mut h = Hist::default();
        for i in 1..=1000 {
            h.add(f64::from(i));
        }
        let p95 = h.quantile(0.95);
        assert!((p95 - 950.0).abs() / 950.0 < 0.02, "{p95}");
        assert_eq!(h.max(), 1000.0);
        assert!((h.mean() - 500.5).abs() < 1e-9);
    }
}
