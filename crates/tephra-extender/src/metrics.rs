//! The extender's `/metrics`: each verb's latency, how long binds waited at the gang barrier,
//! barrier timeouts, and binds held now.

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntGauge, Registry, TextEncoder,
    exponential_buckets,
};

/// The extender's metrics, in their own registry.
pub struct Metrics {
    registry: Registry,
    names: Vec<String>,
    /// Seconds per request, by verb.
    pub latency: HistogramVec,
    /// Seconds a bind waited at the barrier.
    pub barrier_wait: Histogram,
    /// Binds failed because their gang's barrier timed out.
    pub timeouts: IntCounter,
    /// Binds held at the barrier now.
    pub held: IntGauge,
}

impl Metrics {
    /// Registers them.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "tephra_extender_request_duration_seconds",
                "Time to answer one kube-scheduler request, by verb",
            )
            .buckets(exponential_buckets(0.00005, 2.0, 20)?),
            &["verb"],
        )?;
        let barrier_wait = Histogram::with_opts(
            HistogramOpts::new(
                "tephra_extender_barrier_wait_seconds",
                "Time a bind waited at its gang's barrier",
            )
            .buckets(exponential_buckets(0.001, 2.0, 16)?),
        )?;
        let timeouts = IntCounter::new(
            "tephra_extender_barrier_timeouts_total",
            "Binds refused because their gang did not reach bind in time",
        )?;
        let held = IntGauge::new(
            "tephra_extender_binds_held",
            "Binds waiting at a gang barrier",
        )?;
        let collectors: [Box<dyn prometheus::core::Collector>; 4] = [
            Box::new(latency.clone()),
            Box::new(barrier_wait.clone()),
            Box::new(timeouts.clone()),
            Box::new(held.clone()),
        ];
        let mut names = Vec::new();
        for c in collectors {
            names.extend(c.desc().iter().map(|d| d.fq_name.clone()));
            registry.register(c)?;
        }
        Ok(Self {
            registry,
            names,
            latency,
            barrier_wait,
            timeouts,
            held,
        })
    }

    /// The name of every metric registered.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The text exposition.
    pub fn render(&self) -> Result<String, prometheus::Error> {
        TextEncoder::new().encode_to_string(&self.registry.gather())
    }
}
