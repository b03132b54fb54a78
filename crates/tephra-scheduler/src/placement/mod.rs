//! Placement: where a gang goes, two-level and node-aware. It builds on the framework and is
//! what the actions call; it knows no plugin by name (it asks the hooks).
//!
//! | file | what it holds |
//! | --- | --- |
//! | `search.rs` | [`SearchArgs`]: how many feasible nodes and clusters to look at |
//! | `capacity.rs` | what each cluster could ever hold, so that admission refuses gangs that never fit |
//! | `classes.rs` | [`Placer`]: the node classes of each cluster (by extended resources) and their scan positions |
//! | `scan.rs` | the resumable scan: feasible nodes into a scored heap, one role's replicas placed from it |
//! | `gang.rs` | gang fitting in one cluster: pending groups, role minimums first, what a gang still needs, aggregate fit |
//! | `scope.rs` | where a `networkTopology` lets a gang go in a cluster, and what each domain has free |
//! | `domains.rs` | network topology: a gang kept within one HyperNode of its allowed tier, lowest tier and tightest domain first |
//! | `subgroups.rs` | a job's sub-groups (`subGroupPolicy`), each placed whole within its own tier |
//! | `drain.rs` | nodes held for a gang past its SLA until what runs there finishes |
//! | `job.rs` | a job two-level: candidate clusters, simulate on each, split, reserve, commit and note |
//! | `victims.rs` | running jobs as victims, and the tasks each may lose without breaking its gang |
//! | `room.rs` | making room by evicting (preempt and reclaim), where fit failures say eviction can help |
//!
//! Replicas of one role share a shape, so their candidate nodes are found and scored once: the
//! scan keeps a max-heap of (score, node); the best node takes a replica, is re-scored and goes
//! back on the heap if another replica still fits. As in kube-scheduler, the scan stops once
//! enough feasible nodes are found (adaptively 5–50% of the cluster, at least 100) and starts
//! where the last scan ended.

pub mod capacity;
pub mod classes;
pub mod domains;
pub mod drain;
pub mod gang;
pub mod job;
pub mod room;
pub mod scan;
pub mod scope;
pub mod search;
pub mod subgroups;
pub mod victims;

pub use classes::{Placer, Within};
pub use job::{Outcome, allocate_job, candidate_clusters, place_job};
pub use search::SearchArgs;
