//! The statistics gathered during a run ([`Stats`]): jobs and waits per queue, resources in use
//! per cluster over time, sessions, binds and evictions; and, once the run ends, the report
//! built from them ([`Stats::finish`]).

use std::collections::BTreeMap;

use super::fields::{
    ClusterUtil, Fairness, Jobs, Pods, Quantiles, QueueReport, Report, SHARE_FLOOR, Sample,
    SchedulerReport, Utilization, Wait,
};
use super::hist::Hist;
use tephra_scheduler::cache::World;

use super::fields::TopologyReport;
use crate::checker::Invariants;
use crate::failover::report::FailoverReport;

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
    cpu_now: i64,
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
    /// Gangs of two or more pods started in a cluster with HyperNodes, and how many of them
    /// within one HyperNode of its lowest tier.
    topology_gangs: (u64, u64),
}

/// Whether the nodes a gang started on lie within one HyperNode of the lowest tier of their
/// cluster (`None` for a gang of one pod, or in a cluster with no HyperNodes; a gang over several
/// clusters is in none).
pub fn in_one_domain(world: &World, nodes: &[(String, String)]) -> Option<bool> {
    let (cluster, _) = nodes.first()?;
    if nodes.len() < 2 {
        return None;
    }
    let topology = world.topology(world.cluster_id(cluster)?)?;
    let lowest = topology.domains.iter().map(|d| d.tier).min()?;
    if nodes.iter().any(|(c, _)| c != cluster) {
        return Some(false);
    }
    let ids: Vec<_> = nodes
        .iter()
        .filter_map(|(c, n)| world.node_id(c, n))
        .collect();
    Some(
        topology
            .domains
            .iter()
            .any(|d| d.tier == lowest && ids.iter().all(|n| d.nodes.binary_search(n).is_ok())),
    )
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

    /// A gang started within one lowest-tier HyperNode, or not ([`in_one_domain`]).
    pub fn gang_domain(&mut self, within_one: Option<bool>) {
        if let Some(one) = within_one {
            self.topology_gangs.0 += 1;
            self.topology_gangs.1 += u64::from(one);
        }
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
        self.q(queue).cpu_now += cpu;
        let c = self.clusters.entry(cluster.to_string()).or_default();
        c.advance(t);
        c.gpu_used += gpus;
        c.cpu_used += cpu;
        self.sample(t);
    }

    /// A pod no longer holds resources.
    pub fn released(&mut self, cluster: &str, queue: &str, gpus: i64, cpu: i64, t: i64) {
        self.q(queue).gpu_now -= gpus;
        self.q(queue).cpu_now -= cpu;
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
        let total_cpu: i64 = self.queues.values().map(|q| q.cpu_now.max(0)).sum();
        let gpu_cap: i64 = self.clusters.values().map(|c| c.gpu_cap).sum();
        let cpu_cap: i64 = self.clusters.values().map(|c| c.cpu_cap).sum();
        // Each queue's share of what is in use, while queues contend for it (two or more of
        // those that ask for it have jobs not finished) and enough of the fleet is in use for
        // a share to mean something. A queue alone holds all that is in use, and says nothing
        // of fairness.
        let open = |q: &&QueueStats| q.submitted > q.completed + q.failed;
        let gpu_contended = self
            .queues
            .values()
            .filter(|q| q.gpu_demand)
            .filter(open)
            .count()
            >= 2;
        let cpu_contended = self.queues.values().filter(open).count() >= 2;
        let share = |now: i64, total: i64, cap: i64, contended: bool| {
            if contended && total > 0 && total as f64 >= SHARE_FLOOR * cap as f64 {
                now.max(0) as f64 / total as f64
            } else {
                f64::NAN
            }
        };
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
                    (
                        n.clone(),
                        share(q.gpu_now, total_gpu, gpu_cap, gpu_contended),
                    )
                })
                .collect(),
            queue_cpu_share: self
                .queues
                .iter()
                .map(|(n, q)| {
                    (
                        n.clone(),
                        share(q.cpu_now, total_cpu, cpu_cap, cpu_contended),
                    )
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
            failover: FailoverReport::default(),
            explain: Vec::new(),
            series: self.samples,
            wait_histogram: wait_all,
            wait_by_queue: self
                .queues
                .iter()
                .map(|(n, q)| (n.clone(), q.wait.clone()))
                .collect(),
            topology: (self.topology_gangs.0 > 0).then(|| TopologyReport {
                gangs_started: self.topology_gangs.0,
                within_one_lowest_tier: self.topology_gangs.1,
                share: self.topology_gangs.1 as f64 / self.topology_gangs.0 as f64,
            }),
            eta: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two GPU queues on a fleet of 16 GPUs; `a` holds 8 and `b` 4 of them.
    fn two_queues() -> Stats {
        let mut s = Stats::default();
        for q in ["a", "b"] {
            s.queue(q, 1);
            s.submitted(q, true);
        }
        s.cluster("c");
        s.capacity("c", 16, 64_000);
        s.bound("c", "a", 8, 8_000, 0);
        s.bound("c", "b", 4, 4_000, 60_000);
        s
    }

    #[test]
    fn a_queues_share_is_drawn_only_while_queues_contend_for_the_resource() {
        let mut s = two_queues();
        let last = s.samples.last().unwrap().clone();
        assert_eq!(last.queue_gpu_share["a"], 8.0 / 12.0);
        assert_eq!(last.queue_gpu_share["b"], 4.0 / 12.0);
        // `b` finishes: `a` alone holds all the GPUs in use, which says nothing of fairness.
        s.released("c", "b", 4, 4_000, 120_000);
        s.completed("b");
        s.bound("c", "a", 1, 1_000, 180_000);
        let last = s.samples.last().unwrap();
        assert!(last.queue_gpu_share["a"].is_nan(), "{last:?}");
        assert!(last.queue_cpu_share["a"].is_nan(), "{last:?}");
    }

    #[test]
    fn no_share_is_drawn_while_almost_nothing_is_in_use() {
        let mut s = two_queues();
        // Down to 0 of 16 GPUs for `a` and 0 for `b`, one CPU left in use: below the floor.
        s.released("c", "a", 8, 8_000, 120_000);
        s.released("c", "b", 4, 3_000, 180_000);
        let last = s.samples.last().unwrap();
        assert!(last.queue_gpu_share["a"].is_nan() && last.queue_cpu_share["b"].is_nan());
    }
}
