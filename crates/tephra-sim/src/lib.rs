//! `tephra sim`: a discrete-event simulator of a multi-cluster fleet that drives the real
//! scheduler core through the same cache event API the Kubernetes informers use, replays real
//! traces, injects faults, checks every bind independently, and reports.

/// The simulator's hash maps, keyed by pod and job names: foldhash rather than std's SipHash,
/// which was 4% of `scale-5k`'s CPU (nothing here needs protection from chosen keys).
pub(crate) type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

mod agenda;
pub mod charts;
pub mod checker;
mod ctx;
pub mod engine;
pub mod error;
pub mod eta;
pub mod executor;
pub mod failover;
pub mod faults;
pub mod human;
pub mod jobs;
pub mod kubelet;
pub mod members;
pub mod record;
pub mod report;
mod scheduled;
pub use tephra_scenario as scenario;
pub use tephra_scenario::rng;
pub mod state;
pub mod traces;
pub mod workload;
pub mod world;

pub use engine::{Progress, RunOptions};
pub use error::SimError;
pub use failover::{FailoverReport, FaultReport};
pub use record::Record;
pub use report::Report;
pub use scenario::Scenario;
pub use state::Sim;

/// Loads nothing, runs `scenario` to its end, streaming events to `out`.
pub fn run(
    scenario: &Scenario,
    opts: RunOptions,
    out: &mut dyn FnMut(&Record),
    progress: &mut dyn FnMut(&Progress),
) -> Result<Report, SimError> {
    Sim::new(scenario, opts)?.run(out, progress)
}
