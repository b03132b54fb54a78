//! `report.json`, and the statistics gathered during a run. The report's fields are stable;
//! other tools read them. New fields may be added, existing ones are not renamed.
//!
//! | file | what it owns |
//! | --- | --- |
//! | `fields.rs` | the report and its sections, as `report.json` has them |
//! | `stats.rs` | the statistics gathered during a run, and the report built from them |
//! | `hist.rs` | the log-bucketed histogram behind wait times and session costs |

mod fields;
mod hist;
pub(crate) mod stats;

pub use fields::{
    ClusterUtil, Fairness, Jobs, PendingReason, Pods, Quantiles, QueueReport, Report, SHARE_FLOOR,
    Sample, SchedulerReport, TopologyReport, Utilization, Wait, pending_reasons,
};
pub use hist::Hist;
pub use stats::Stats;
