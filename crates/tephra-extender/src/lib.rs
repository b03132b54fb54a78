//! `tephra extender`: where a member keeps its own kube-scheduler, tephra plans each gang and
//! the member's kube-scheduler carries the plan out through this extender
//! (`bindingMode: Extender` on the Cluster).
//!
//! | module | owns |
//! | --- | --- |
//! | `wire` | kube-scheduler's extender v1 types, with their wire names |
//! | `index` | the member's pods and PodGroups as the verbs need them (pure) |
//! | `verbs` | `filter`, `prioritize`, `preempt` (pure) |
//! | `barrier` | `bind`'s gang barrier: all of a gang or nothing, within a timeout (pure) |
//! | `server` | the HTTP server, binds through the member's API |
//! | `watch` | the member's pods and PodGroups into the index |
//! | `metrics` | `/metrics` |

pub mod barrier;
pub mod index;
pub mod metrics;
pub mod server;
pub mod verbs;
pub mod watch;
pub mod wire;

pub use server::{Extender, Options, serve};
