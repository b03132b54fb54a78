//! The events on a simulation's agenda: what can fall due at an instant of the virtual clock.
//! `state.rs` keeps the agenda in time order; the event loop (`engine.rs`) hands each event to
//! the part of the simulator it concerns.

/// One event on the agenda. Events of one instant run in the order they were put on it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Ev {
    Fault(usize),
    FaultEnd(usize),
    /// The cluster status controller probes a member.
    Probe(String),
    /// The cluster controller looks at a member's taints again (a NoExecute taint or a
    /// toleration falls due).
    Taints(String),
    /// Graceful eviction looks at a job again.
    Eviction(String),
    /// An old copy's pod (job, ghost name) finished terminating.
    GhostGone(String, String),
    Released(String, u32),
    Finish(String, u32),
    Start(String, u32),
    JobWake(String),
    /// A scheduler timer falls due (an inqueue timeout, an SLA running out): a session runs, as
    /// the runtime's periodic one would.
    Timer,
    Arrival,
    Tick,
}
