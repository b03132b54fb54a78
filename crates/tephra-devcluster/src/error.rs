//! The devcluster's own errors (starting servers, certificates, fleets, kubeconfigs), as
//! opposed to the API errors it answers clients with ([`crate::status::ApiError`]).

/// Why a devcluster could not start or do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A socket could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Certificates could not be generated or loaded.
    #[error("TLS: {0}")]
    Tls(String),
    /// The fleet could not be read.
    #[error("fleet: {0}")]
    Fleet(String),
    /// A kubeconfig could not be built or written.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// No member or node by that name.
    #[error("no {what} named {name:?}")]
    Unknown {
        /// `member` or `node`.
        what: &'static str,
        /// The name asked for.
        name: String,
    },
    /// The API server refused a setup write (installing CRDs, queues, nodes).
    #[error("setting up {what}: {source}")]
    Setup {
        /// What was being written.
        what: String,
        /// The API server's answer.
        source: crate::status::ApiError,
    },
}
