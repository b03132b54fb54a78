//! tephra's scheduler core. Pure: no IO, no async runtime, no clock; time comes in as a value.
//!
//! Feed a [`cache::Cache`] with [`cache::Event`]s, take a [`cache::Snapshot`], open a
//! [`session::Session`] with a [`config::SchedulerConfig`], run it, and close it into
//! [`decisions::Decisions`].

pub mod actions;
pub mod builder;
pub mod cache;
pub mod config;
pub mod decisions;
pub mod framework;
pub mod model;
pub mod placement;
pub mod plugins;
pub mod quantity;
pub mod resources;
pub mod session;

use std::sync::Arc;

pub use cache::{Cache, Event, Snapshot};
pub use config::SchedulerConfig;
pub use decisions::Decisions;
pub use session::Session;

/// Opens a session on `snapshot`, runs every configured action and returns the decisions.
pub fn schedule(
    snapshot: Snapshot,
    config: Arc<SchedulerConfig>,
    now: i64,
    session_id: u64,
) -> Decisions {
    let mut ssn = Session::open(snapshot, config, now, session_id);
    ssn.run();
    ssn.close()
}
