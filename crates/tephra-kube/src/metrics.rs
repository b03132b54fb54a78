//! The scheduler's Prometheus metrics: Volcano's names, labels and buckets (so that existing
//! dashboards keep working), and `tephra_*` metrics for what Volcano has no name for: member
//! clusters, session phases, the executor, API errors, leadership and the configuration.

use std::time::Duration;

use prometheus::{
    Encoder, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder, exponential_buckets,
};

/// A registry that remembers the name of every metric registered in it.
#[derive(Default)]
struct Names {
    registry: Registry,
    names: std::cell::RefCell<Vec<String>>,
}

impl Names {
    fn register(&self, c: Box<dyn prometheus::core::Collector>) -> Result<(), prometheus::Error> {
        self.names
            .borrow_mut()
            .extend(c.desc().iter().map(|d| d.fq_name.clone()));
        self.registry.register(c)
    }
}

/// Every metric the scheduler exports, in one registry.
pub struct Metrics {
    registry: Registry,
    /// The name of every metric registered.
    names: Vec<String>,
    /// Deleted clusters: a watcher of one that fails between its series' removal and its
    /// task's end (aborting a task takes effect at its next await) counts nothing.
    forgotten: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// `volcano_e2e_scheduling_latency_milliseconds`.
    pub e2e: Histogram,
    /// `volcano_e2e_job_scheduling_latency_milliseconds`.
    pub e2e_job: Histogram,
    /// `volcano_e2e_job_scheduling_duration{job_name,queue,job_namespace}`.
    pub e2e_job_duration: GaugeVec,
    /// `volcano_action_scheduling_latency_milliseconds{action}`.
    pub action: HistogramVec,
    /// `volcano_plugin_scheduling_latency_milliseconds{plugin,OnSession}`.
    pub plugin: HistogramVec,
    /// `volcano_task_scheduling_latency_milliseconds`.
    pub task: Histogram,
    /// `volcano_schedule_attempts_total{result}`.
    pub attempts: IntCounterVec,
    /// `volcano_pod_preemption_victims`.
    pub victims: IntGauge,
    /// `volcano_total_preemption_attempts`.
    pub preemption_attempts: IntCounter,
    /// `volcano_unschedule_task_count{job_id}`.
    pub unschedule_tasks: IntGaugeVec,
    /// `volcano_unschedule_job_count`.
    pub unschedule_jobs: IntGauge,
    /// `volcano_queue_*` gauges by queue (and resource for scalars).
    pub queue: QueueMetrics,
    /// `tephra_cluster_ready{cluster}`.
    pub cluster_ready: IntGaugeVec,
    /// `tephra_cluster_nodes{cluster}`.
    pub cluster_nodes: IntGaugeVec,
    /// `tephra_cluster_allocatable{cluster,resource}`.
    pub cluster_allocatable: GaugeVec,
    /// `tephra_cluster_allocated{cluster,resource}`.
    pub cluster_allocated: GaugeVec,
    /// Volcano's `volcano_vgpu_device_*` gauges: each shared GPU's use.
    pub vgpu: VgpuMetrics,
    /// `tephra_session_phase_duration_milliseconds{phase}`.
    pub phase: HistogramVec,
    /// `tephra_executor_queue_depth`.
    pub executor_depth: IntGauge,
    /// `tephra_events_dropped_total`: Events not sent because their queue was full.
    pub events_dropped: IntCounter,
    /// `tephra_executor_write_latency_milliseconds{verb}`.
    pub write_latency: HistogramVec,
    /// `tephra_api_errors_total{cluster,verb,code}`.
    pub api_errors: IntCounterVec,
    /// `tephra_controller_errors_total{controller,reason}`: failed controller passes (the
    /// controller-manager's registry only).
    pub controller_errors: IntCounterVec,
    /// `tephra_leader`.
    pub leader: IntGauge,
    /// `tephra_config_inert_plugins{plugin}`.
    pub inert_plugins: IntGaugeVec,
    /// `tephra_config_reload_errors_total`.
    pub reload_errors: IntCounter,
    /// `tephra_config_last_reload_successful`.
    pub reload_ok: IntGauge,
    /// `tephra_cache_refused_objects`.
    pub refused: IntGauge,
    /// `tephra_eta_round_duration_seconds`: how long each expected-start round took.
    pub eta_round: Histogram,
    /// `tephra_eta_predicted_jobs`: waiting jobs the last round gave an expected start.
    pub eta_predicted: IntGauge,
    /// `tephra_eta_unresolved_jobs`: waiting jobs the last round's budget did not reach.
    pub eta_unresolved: IntGauge,
}

/// Volcano's per-queue gauges.
pub struct QueueMetrics {
    /// `volcano_queue_allocated_milli_cpu`, `_memory_bytes`, `_scalar_resources`.
    pub allocated: ResourceGauges,
    /// `volcano_queue_request_*`.
    pub request: ResourceGauges,
    /// `volcano_queue_deserved_*`.
    pub deserved: ResourceGauges,
    /// `volcano_queue_capacity_*`.
    pub capacity: ResourceGauges,
    /// `tephra_queue_admissible_request_*`: what the queue's waiting jobs that could be placed
    /// once room is made ask for (the starvation alert's demand).
    pub admissible: ResourceGauges,
    /// `volcano_queue_share`.
    pub share: GaugeVec,
    /// `volcano_queue_weight`.
    pub weight: GaugeVec,
    /// `volcano_queue_overused`.
    pub overused: GaugeVec,
    /// `volcano_queue_pod_group_{inqueue,pending,running,unknown,completed}_count`.
    pub groups: [GaugeVec; 5],
}

/// The three gauges Volcano splits a resource list into.
pub struct ResourceGauges {
    /// `..._milli_cpu{queue_name}`.
    pub milli_cpu: GaugeVec,
    /// `..._memory_bytes{queue_name}`.
    pub memory: GaugeVec,
    /// `..._scalar_resources{queue_name,resource}`.
    pub scalar: GaugeVec,
}

impl ResourceGauges {
    fn new(r: &Names, what: &str) -> Result<Self, prometheus::Error> {
        Self::named(r, "volcano_queue", what)
    }

    fn named(r: &Names, prefix: &str, what: &str) -> Result<Self, prometheus::Error> {
        Ok(Self {
            milli_cpu: gauge_vec(
                r,
                &format!("{prefix}_{what}_milli_cpu"),
                &format!("{} CPU in millicores for one queue", what.replace('_', " ")),
                &["queue_name"],
            )?,
            memory: gauge_vec(
                r,
                &format!("{prefix}_{what}_memory_bytes"),
                &format!("{} memory in bytes for one queue", what.replace('_', " ")),
                &["queue_name"],
            )?,
            scalar: gauge_vec(
                r,
                &format!("{prefix}_{what}_scalar_resources"),
                &format!("{} scalar resources for one queue", what.replace('_', " ")),
                &["queue_name", "resource"],
            )?,
        })
    }

    /// Sets a queue's resource list (`name → amount in the API's units scaled as Volcano
    /// does: cpu in millicores, memory in bytes, others as counts × 1000`).
    pub fn set(&self, queue: &str, list: &[(String, f64)]) {
        for (name, v) in list {
            match name.as_str() {
                "cpu" => self.milli_cpu.with_label_values(&[queue]).set(*v),
                "memory" => self.memory.with_label_values(&[queue]).set(*v),
                "pods" => {}
                other => self.scalar.with_label_values(&[queue, other]).set(*v),
            }
        }
    }

    fn remove(&self, queue: &str) {
        let _ = self.milli_cpu.remove_label_values(&[queue]);
        let _ = self.memory.remove_label_values(&[queue]);
    }
}

/// Volcano's vGPU gauges, by GPU (`devID`, its UUID) and node (`NodeName`), and by pod
/// (`podName`) for what one pod holds of a GPU; refilled from the cache after each session.
#[derive(Clone)]
pub struct VgpuMetrics {
    /// `volcano_vgpu_device_shared_number`: pods sharing the GPU.
    pub shared_number: GaugeVec,
    /// `volcano_vgpu_device_allocated_memory`: MiB given out.
    pub allocated_memory: GaugeVec,
    /// `volcano_vgpu_device_allocated_cores`: percent of its cores given out.
    pub allocated_cores: GaugeVec,
    /// `volcano_vgpu_device_memory_limit`: its MiB.
    pub memory_limit: GaugeVec,
    /// `volcano_vgpu_device_memory_allocation_for_a_certain_pod`.
    pub pod_memory: GaugeVec,
    /// `volcano_vgpu_device_core_allocation_for_a_certain_pod`.
    pub pod_cores: GaugeVec,
}

impl VgpuMetrics {
    fn new(r: &Names) -> Result<Self, prometheus::Error> {
        let device = ["devID", "NodeName"];
        let pod = ["devID", "NodeName", "podName"];
        Ok(Self {
            shared_number: gauge_vec(
                r,
                "volcano_vgpu_device_shared_number",
                "The number of pods sharing this shared GPU",
                &device,
            )?,
            allocated_memory: gauge_vec(
                r,
                "volcano_vgpu_device_allocated_memory",
                "The memory (MiB) given out on this shared GPU",
                &device,
            )?,
            allocated_cores: gauge_vec(
                r,
                "volcano_vgpu_device_allocated_cores",
                "The percentage of this shared GPU's cores given out",
                &device,
            )?,
            memory_limit: gauge_vec(
                r,
                "volcano_vgpu_device_memory_limit",
                "The memory (MiB) of this shared GPU",
                &device,
            )?,
            pod_memory: gauge_vec(
                r,
                "volcano_vgpu_device_memory_allocation_for_a_certain_pod",
                "The memory (MiB) one pod holds of this shared GPU",
                &pod,
            )?,
            pod_cores: gauge_vec(
                r,
                "volcano_vgpu_device_core_allocation_for_a_certain_pod",
                "The percentage of this shared GPU's cores one pod holds",
                &pod,
            )?,
        })
    }

    /// Drops every series (before they are set again).
    pub fn reset(&self) {
        for g in [
            &self.shared_number,
            &self.allocated_memory,
            &self.allocated_cores,
            &self.memory_limit,
            &self.pod_memory,
            &self.pod_cores,
        ] {
            g.reset();
        }
    }
}

fn gauge_vec(
    r: &Names,
    name: &str,
    help: &str,
    labels: &[&str],
) -> Result<GaugeVec, prometheus::Error> {
    let g = GaugeVec::new(Opts::new(name, help), labels)?;
    r.register(Box::new(g.clone()))?;
    Ok(g)
}

fn int_gauge_vec(
    r: &Names,
    name: &str,
    help: &str,
    labels: &[&str],
) -> Result<IntGaugeVec, prometheus::Error> {
    let g = IntGaugeVec::new(Opts::new(name, help), labels)?;
    r.register(Box::new(g.clone()))?;
    Ok(g)
}

fn int_gauge(r: &Names, name: &str, help: &str) -> Result<IntGauge, prometheus::Error> {
    let g = IntGauge::new(name, help)?;
    r.register(Box::new(g.clone()))?;
    Ok(g)
}

fn histogram(
    r: &Names,
    name: &str,
    help: &str,
    start: f64,
    count: usize,
) -> Result<Histogram, prometheus::Error> {
    let h = Histogram::with_opts(
        HistogramOpts::new(name, help).buckets(exponential_buckets(start, 2.0, count)?),
    )?;
    r.register(Box::new(h.clone()))?;
    Ok(h)
}

fn histogram_vec(
    r: &Names,
    name: &str,
    help: &str,
    labels: &[&str],
    start: f64,
    count: usize,
) -> Result<HistogramVec, prometheus::Error> {
    let h = HistogramVec::new(
        HistogramOpts::new(name, help).buckets(exponential_buckets(start, 2.0, count)?),
        labels,
    )?;
    r.register(Box::new(h.clone()))?;
    Ok(h)
}

fn counter_vec(
    r: &Names,
    name: &str,
    help: &str,
    labels: &[&str],
) -> Result<IntCounterVec, prometheus::Error> {
    let c = IntCounterVec::new(Opts::new(name, help), labels)?;
    r.register(Box::new(c.clone()))?;
    Ok(c)
}

fn counter(r: &Names, name: &str, help: &str) -> Result<IntCounter, prometheus::Error> {
    let c = IntCounter::new(name, help)?;
    r.register(Box::new(c.clone()))?;
    Ok(c)
}

/// Milliseconds of a duration, as Volcano reports latencies.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Result<Self, prometheus::Error> {
        let r = Names::default();
        let groups = ["inqueue", "pending", "running", "unknown", "completed"].map(|p| {
            gauge_vec(
                &r,
                &format!("volcano_queue_pod_group_{p}_count"),
                &format!("The number of {p} PodGroups in this queue"),
                &["queue_name"],
            )
        });
        let [g0, g1, g2, g3, g4] = groups;
        let queue = QueueMetrics {
            allocated: ResourceGauges::new(&r, "allocated")?,
            request: ResourceGauges::new(&r, "request")?,
            deserved: ResourceGauges::new(&r, "deserved")?,
            capacity: ResourceGauges::new(&r, "capacity")?,
            admissible: ResourceGauges::named(&r, "tephra_queue", "admissible_request")?,
            share: gauge_vec(
                &r,
                "volcano_queue_share",
                "Share for one queue",
                &["queue_name"],
            )?,
            weight: gauge_vec(
                &r,
                "volcano_queue_weight",
                "Weight for one queue",
                &["queue_name"],
            )?,
            overused: gauge_vec(
                &r,
                "volcano_queue_overused",
                "Whether one queue is overused",
                &["queue_name"],
            )?,
            groups: [g0?, g1?, g2?, g3?, g4?],
        };
        let m = Self {
            e2e: histogram(
                &r,
                "volcano_e2e_scheduling_latency_milliseconds",
                "E2e scheduling latency in milliseconds (scheduling algorithm + binding)",
                5.0,
                15,
            )?,
            e2e_job: histogram(
                &r,
                "volcano_e2e_job_scheduling_latency_milliseconds",
                "E2e job scheduling latency in milliseconds",
                32.0,
                10,
            )?,
            e2e_job_duration: gauge_vec(
                &r,
                "volcano_e2e_job_scheduling_duration",
                "E2E job scheduling duration",
                &["job_name", "queue", "job_namespace"],
            )?,
            action: histogram_vec(
                &r,
                "volcano_action_scheduling_latency_milliseconds",
                "Action scheduling latency in milliseconds",
                &["action"],
                5.0,
                15,
            )?,
            plugin: histogram_vec(
                &r,
                "volcano_plugin_scheduling_latency_milliseconds",
                "Plugin scheduling latency in milliseconds",
                &["plugin", "OnSession"],
                5.0,
                15,
            )?,
            task: histogram(
                &r,
                "volcano_task_scheduling_latency_milliseconds",
                "Task scheduling latency in milliseconds (task create to task bound to a node)",
                5.0,
                15,
            )?,
            attempts: counter_vec(
                &r,
                "volcano_schedule_attempts_total",
                "Number of attempts to schedule pods, by the result",
                &["result"],
            )?,
            victims: int_gauge(
                &r,
                "volcano_pod_preemption_victims",
                "Number of selected preemption victims",
            )?,
            preemption_attempts: counter(
                &r,
                "volcano_total_preemption_attempts",
                "Total preemption attempts in the cluster till now",
            )?,
            unschedule_tasks: int_gauge_vec(
                &r,
                "volcano_unschedule_task_count",
                "Number of tasks could not be scheduled",
                &["job_id"],
            )?,
            unschedule_jobs: int_gauge(
                &r,
                "volcano_unschedule_job_count",
                "Number of jobs could not be scheduled",
            )?,
            queue,
            cluster_ready: int_gauge_vec(
                &r,
                "tephra_cluster_ready",
                "Whether a member cluster is ready",
                &["cluster"],
            )?,
            cluster_nodes: int_gauge_vec(
                &r,
                "tephra_cluster_nodes",
                "Nodes of a member cluster",
                &["cluster"],
            )?,
            cluster_allocatable: gauge_vec(
                &r,
                "tephra_cluster_allocatable",
                "Allocatable of a member cluster (cpu in millicores, memory in bytes)",
                &["cluster", "resource"],
            )?,
            cluster_allocated: gauge_vec(
                &r,
                "tephra_cluster_allocated",
                "Requests held on a member cluster (cpu in millicores, memory in bytes)",
                &["cluster", "resource"],
            )?,
            vgpu: VgpuMetrics::new(&r)?,
            phase: histogram_vec(
                &r,
                "tephra_session_phase_duration_milliseconds",
                "Duration of each phase of a session: open, each action, close",
                &["phase"],
                0.25,
                16,
            )?,
            executor_depth: int_gauge(
                &r,
                "tephra_executor_queue_depth",
                "Writes queued or in flight",
            )?,
            events_dropped: counter(
                &r,
                "tephra_events_dropped_total",
                "Events on pods not sent because their queue was full (binds never wait for Events)",
            )?,
            write_latency: histogram_vec(
                &r,
                "tephra_executor_write_latency_milliseconds",
                "Latency of the executor's writes, by verb",
                &["verb"],
                1.0,
                14,
            )?,
            api_errors: counter_vec(
                &r,
                "tephra_api_errors_total",
                "Failed API requests, by cluster, verb and HTTP code (0: no response)",
                &["cluster", "verb", "code"],
            )?,
            controller_errors: IntCounterVec::new(
                Opts::new(
                    "tephra_controller_errors_total",
                    "Failed controller passes, by controller and reason (each retried with backoff)",
                ),
                &["controller", "reason"],
            )?,
            leader: int_gauge(
                &r,
                "tephra_leader",
                "1 while this replica leads and may write",
            )?,
            inert_plugins: int_gauge_vec(
                &r,
                "tephra_config_inert_plugins",
                "Volcano plugins the configuration names that tephra loads with no effect",
                &["plugin"],
            )?,
            reload_errors: counter(
                &r,
                "tephra_config_reload_errors_total",
                "Scheduler configuration reloads refused (the last good configuration stays)",
            )?,
            reload_ok: int_gauge(
                &r,
                "tephra_config_last_reload_successful",
                "1 when the configuration file in force is the one on disk",
            )?,
            refused: int_gauge(
                &r,
                "tephra_cache_refused_objects",
                "Watched objects the scheduler cannot read (see the logs for each one)",
            )?,
            eta_round: histogram(
                &r,
                "tephra_eta_round_duration_seconds",
                "Wall time of each round of waiting jobs' expected starts (off the session's path)",
                0.005,
                12,
            )?,
            eta_predicted: int_gauge(
                &r,
                "tephra_eta_predicted_jobs",
                "Waiting jobs the last expected-start round gave a start (or not within its horizon)",
            )?,
            eta_unresolved: int_gauge(
                &r,
                "tephra_eta_unresolved_jobs",
                "Waiting jobs the last expected-start round's budget of sessions did not reach",
            )?,
            names: r.names.into_inner(),
            registry: r.registry,
            forgotten: std::sync::Mutex::default(),
        };
        m.counters_at_zero();
        Ok(m)
    }

    /// The controller-manager's metrics: its leadership, named
    /// `tephra_controller_manager_leader` so that `max(tephra_leader)` is about schedulers
    /// only, and `tephra_api_errors_total`; none of the scheduler's other series.
    pub fn controller_manager() -> Result<Self, prometheus::Error> {
        let mut m = Self::new()?;
        let r = Names::default();
        m.leader = int_gauge(
            &r,
            "tephra_controller_manager_leader",
            "1 while this controller-manager replica leads and may write",
        )?;
        // Its Lease renewals count failed requests here.
        r.register(Box::new(m.api_errors.clone()))?;
        r.register(Box::new(m.controller_errors.clone()))?;
        m.names = r.names.into_inner();
        m.registry = r.registry;
        Ok(m)
    }

    /// Creates, at 0, the counters a dashboard panel or an alert reads, so that they have a
    /// series before the first increment (and `rate()` sees that increment).
    fn counters_at_zero(&self) {
        for result in ["scheduled", "unschedulable"] {
            self.attempts.with_label_values(&[result]);
        }
    }

    /// Creates a member's API error counters for the verbs the bind-error alert reads, at 0
    /// with code 0 (no response), so that the member has a series from the start.
    pub fn member_seen(&self, cluster: &str) {
        for verb in ["bind", "place"] {
            self.api_errors.with_label_values(&[cluster, verb, "0"]);
        }
    }

    /// Counts a failed API request.
    pub fn api_error(&self, cluster: &str, verb: &str, code: u16) {
        if self.forgotten.lock().is_ok_and(|f| f.contains(cluster)) {
            return;
        }
        self.api_errors
            .with_label_values(&[cluster, verb, &code.to_string()])
            .inc();
    }

    /// Sets the inert plugins of the configuration in force.
    pub fn set_inert(&self, plugins: &[String]) {
        self.inert_plugins.reset();
        for p in plugins {
            self.inert_plugins.with_label_values(&[p]).set(1);
        }
    }

    /// A cluster (again) in the fleet: its errors count.
    pub fn cluster_started(&self, cluster: &str) {
        if let Ok(mut f) = self.forgotten.lock() {
            f.remove(cluster);
        }
    }

    /// Drops a deleted Cluster's series (the per-resource ones are emptied and refilled for the
    /// clusters that remain by the next session's report).
    pub fn forget_cluster(&self, cluster: &str) {
        use prometheus::core::Collector;
        if let Ok(mut f) = self.forgotten.lock() {
            f.insert(cluster.to_string());
        }
        // Its API error counters, whatever verbs and codes they count.
        for family in self.api_errors.collect() {
            for m in family.get_metric() {
                let labels: Vec<&str> = m.get_label().iter().map(|l| l.value()).collect();
                let names: Vec<&str> = m.get_label().iter().map(|l| l.name()).collect();
                if names == ["cluster", "code", "verb"] && labels[0] == cluster {
                    let _ = self
                        .api_errors
                        .remove_label_values(&[labels[0], labels[2], labels[1]]);
                }
            }
        }
        let _ = self.cluster_ready.remove_label_values(&[cluster]);
        let _ = self.cluster_nodes.remove_label_values(&[cluster]);
        self.cluster_allocatable.reset();
        self.cluster_allocated.reset();
    }

    /// Drops a deleted queue's series.
    pub fn forget_queue(&self, queue: &str) {
        let q = &self.queue;
        for g in [
            &q.allocated,
            &q.request,
            &q.deserved,
            &q.capacity,
            &q.admissible,
        ] {
            g.remove(queue);
        }
        for g in [&q.share, &q.weight, &q.overused] {
            let _ = g.remove_label_values(&[queue]);
        }
        for g in &q.groups {
            let _ = g.remove_label_values(&[queue]);
        }
    }

    /// The name of every metric registered (dashboards and alerts are checked against it).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        // Encoding into a Vec cannot fail for text.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_forgotten_cluster_leaves_no_series_behind_and_the_others_keep_theirs() {
        let m = Metrics::new().unwrap();
        m.member_seen("north");
        m.member_seen("south");
        m.api_error("north", "watch", 401);
        m.cluster_ready.with_label_values(&["north"]).set(1);
        m.forget_cluster("north");
        // A watcher of north not stopped yet fails once more: that counts nothing.
        m.api_error("north", "watch", 0);
        let text = m.render();
        assert!(!text.contains("cluster=\"north\""), "{text}");
        assert!(
            text.contains("tephra_api_errors_total{cluster=\"south\",code=\"0\",verb=\"bind\"} 0"),
            "{text}"
        );
        // A cluster of that name joining again counts again.
        m.cluster_started("north");
        m.api_error("north", "watch", 0);
        assert!(m.render().contains("cluster=\"north\""));
    }

    #[test]
    fn the_controller_manager_exports_its_leadership_and_none_of_the_schedulers_series() {
        let m = Metrics::controller_manager().unwrap();
        m.leader.set(1);
        let text = m.render();
        assert!(
            text.contains("tephra_controller_manager_leader 1"),
            "{text}"
        );
        assert!(
            !text.contains("volcano_") && !text.contains("tephra_leader "),
            "{text}"
        );
        assert_eq!(
            m.names(),
            [
                "tephra_controller_manager_leader",
                "tephra_api_errors_total",
                "tephra_controller_errors_total"
            ]
        );
        // The scheduler's own registry is untouched.
        assert!(
            Metrics::new()
                .unwrap()
                .names()
                .contains(&"tephra_leader".to_string())
        );
    }
}
