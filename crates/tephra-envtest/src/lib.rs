//! tephra-envtest: the real Kubernetes for tests, as envtest serves controller-runtime users.
//!
//! etcd, kube-apiserver, kube-controller-manager and kube-scheduler, built from their Go
//! modules by `.ci/real-components` into a cache outside the clone ([`components`]), run on
//! free loopback ports with fresh certificates ([`pki`]) as a real cluster runs them: client
//! certificates, the Node and RBAC authorizers, service-account tokens, admission plugins with
//! `OwnerReferencesPermissionEnforcement`, an audit log ([`audit`]). One environment ([`Env`])
//! holds one etcd and any number of clusters ([`Cluster`]: a control plane and members each
//! under an etcd prefix of its own). Nodes are Node objects whose pods simulated kubelets run
//! through the API ([`kubelet`]). Every process dies with the test ([`process`]), on a panic
//! or a kill too, and the environment's directory is removed.
//!
//! [`karmada`] runs a real Karmada control plane (its API server, aggregated API server,
//! webhook, controller manager and scheduler) with member clusters joined in Push mode.
//!
//! Tests call [`components::require`] first: without the binaries they skip with the build
//! command, except under `CI`, where they fail.

pub mod audit;
pub mod cluster;
pub mod components;
pub mod env;
pub mod karmada;
pub mod kubelet;
pub mod objects;
pub mod pki;
pub mod process;
pub mod tier;

pub use cluster::{Cluster, ClusterOptions, User};
pub use components::{Binaries, Components, Release, require, skip};
pub use env::Env;
pub use karmada::{KarmadaFleet, KarmadaOptions, karmada_fleet};

/// What can go wrong starting or driving a test environment.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A component is not built.
    #[error(
        "{what} is missing: build the real components with `{}`",
        components::BUILD_COMMAND
    )]
    Missing {
        /// What was looked for.
        what: String,
    },
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// Making certificates failed.
    #[error("certificates: {0}")]
    Pki(String),
    /// A component exited early.
    #[error("{name} exited ({status}); its log ends:\n{log}")]
    Exited {
        /// The component.
        name: String,
        /// Its exit status.
        status: String,
        /// The end of its log.
        log: String,
    },
    /// A component did not become ready in time.
    #[error("timed out waiting for {what}; the log ends:\n{log}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// The end of the component's log.
        log: String,
    },
    /// A request to the cluster failed.
    #[error("client: {0}")]
    Client(String),
}
