//! Actions, one file each, with Volcano's semantics. A session runs them in the configured
//! order (the crate root does, from its registry).
//!
//! Actions are thin: each decides which jobs to visit and in which order, and hands them to
//! placement. Every action has the same two entry points: `check` reads its arguments when the
//! configuration is loaded, `execute` runs it on a session. Actions know the framework and
//! placement, never each other.

pub mod allocate;
pub mod backfill;
pub mod enqueue;
pub mod gang;
pub mod preempt;
pub mod reclaim;
