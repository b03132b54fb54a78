//! The `failover` section of `report.json`, as types: each fault's measures ([`FaultReport`])
//! and their totals ([`FailoverReport`]), filled in by `measure.rs`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

/// One fault, measured.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct FaultReport {
    /// The member.
    pub cluster: String,
    /// `unreachable`, `notready`, `node-down` or `recover`.
    pub kind: String,
    /// When it began, in simulated seconds.
    pub at_s: f64,
    /// When it ended, if it did.
    pub ended_s: Option<f64>,
    /// From the fault to the Ready condition leaving True (cluster faults), in seconds; 0 when
    /// it had already left True for another fault, absent when the fault ended first.
    pub detection_delay_s: Option<f64>,
    /// Gangs moved to another member (cluster faults), or restarted by the member's node
    /// lifecycle (node-down).
    pub jobs_moved: u64,
    /// From the fault until every moved gang ran whole again, in seconds (absent: some
    /// never did before the run ended, or none moved).
    pub all_running_again_s: Option<f64>,
    /// The moved gang that ran whole again last, which `all_running_again_s` waited for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_running_again: Option<String>,
    /// Seconds two copies of a gang ran at once while the old member answered.
    pub duplicate_gang_s: f64,
    /// Of those, seconds beyond the pods' termination grace period. Must be 0.
    pub duplicate_beyond_grace_s: f64,
    /// Seconds two copies ran while the old member was cut off (its copy cannot be stopped
    /// until it answers).
    pub cut_off_overlap_s: f64,
    /// Moved jobs that ended neither finished, nor running, nor waiting. Must be 0.
    pub lost_jobs: u64,
    #[serde(skip)]
    pub(super) moved: BTreeSet<String>,
    #[serde(skip)]
    pub(super) at_ms: i64,
}

/// The `failover` section of `report.json`.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct FailoverReport {
    /// The chain's settings: probe period, thresholds, NoExecute grace, eviction timeout (s).
    pub settings: BTreeMap<String, f64>,
    /// Each fault, in time order.
    pub faults: Vec<FaultReport>,
    /// Jobs moved, over all faults.
    pub jobs_moved: u64,
    /// The longest detection delay, in seconds.
    pub max_detection_delay_s: Option<f64>,
    /// The longest time until every moved gang ran again, in seconds.
    pub max_all_running_again_s: Option<f64>,
    /// Duplicate-gang seconds while both members answered, and beyond the grace (must be 0).
    pub duplicate_gang_s: f64,
    /// See [`FaultReport::duplicate_beyond_grace_s`].
    pub duplicate_beyond_grace_s: f64,
    /// Jobs lost, over all faults (must be 0).
    pub lost_jobs: u64,
}
