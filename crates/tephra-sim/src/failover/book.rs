//! What failover keeps over a run: each moved job's binding (its eviction tasks, ghosts and
//! excluded clusters), each fault's measures, and the fault open on each cluster. Its methods are the taint manager and
//! graceful eviction (`failover/mod.rs`) and the measures (`failover/measure.rs`), each given
//! the other parts it acts on ([`Parts`](crate::state::Parts)).

use std::collections::BTreeMap;

use crate::Map;

use super::binding::Binding;
use super::report::FaultReport;

/// Failover's state over a run.
#[derive(Default)]
pub(crate) struct Book {
    /// The binding of each job that moved, by job key.
    pub(crate) bindings: Map<String, Binding>,
    /// Each fault's measures, in the order the faults began.
    pub(crate) records: Vec<FaultReport>,
    /// The fault open on each cluster: its index in `records`.
    pub(crate) open: BTreeMap<String, usize>,
}
