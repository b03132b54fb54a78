//! Why a simulation cannot run.

use crate::scenario::ScenarioError;

/// Errors running a simulation.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scenario is invalid.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The world could not be built (a bad quantity, too many resource names, ...).
    #[error("{source_name}: {message}")]
    Build {
        /// Scenario file.
        source_name: String,
        /// What failed.
        message: String,
    },
}

/// A closure that turns any error into [`SimError::Build`] for the scenario file `source`.
pub(crate) fn build_err<E: std::fmt::Display>(source: &str) -> impl Fn(E) -> SimError + '_ {
    move |e| SimError::Build {
        source_name: source.to_string(),
        message: e.to_string(),
    }
}
