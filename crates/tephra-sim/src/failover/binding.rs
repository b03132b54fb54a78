//! A job's binding as failover sees it: the graceful-eviction tasks the taint manager gave it,
//! the old copies' pods (ghosts) set aside while they last, the clusters excluded from its
//! PodGroup meanwhile, and what `measure.rs` needs to time its move. Data only: the taint
//! manager and graceful eviction over it are `failover/mod.rs`'s.

use std::collections::BTreeSet;

use tephra_api::work::GracefulEvictionTask;

/// An old copy's pod, set aside.
#[derive(Clone, Debug)]
pub(crate) struct Ghost {
    /// The cache's name for it (`<pod>~<cluster>`).
    pub(super) name: String,
    pub(super) namespace: String,
    pub(super) cluster: String,
    pub(super) node: (String, String),
    pub(super) gpus: i64,
    pub(super) cpu_milli: i64,
    pub(super) started_ms: i64,
    /// It was running when set aside (it runs on until it is deleted).
    pub(super) running: bool,
    /// It holds its node (it had not finished when set aside).
    pub(super) holds: bool,
    /// Its deletion has reached the member: it is terminating.
    pub(super) terminating: bool,
}

/// A job's binding as failover sees it: its graceful-eviction tasks and old copies.
#[derive(Clone, Debug, Default)]
pub(crate) struct Binding {
    pub(super) tasks: Vec<GracefulEvictionTask>,
    pub(super) ghosts: Vec<Ghost>,
    /// Clusters failover excludes from the job's PodGroup while their tasks last.
    pub(super) excluded: BTreeSet<String>,
    /// The fault that moved it (index into the records), and when its new copy ran whole.
    pub(super) fault: Option<usize>,
    pub(super) back_at: Option<i64>,
    /// Since when two copies run at once, and whether the old one's member answered then.
    pub(super) both_since: Option<(i64, bool)>,
}
