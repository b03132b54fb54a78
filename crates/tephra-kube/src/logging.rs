//! The log a person reads: the default filter of tephra's long-running commands.

/// `info`, without the kube client's own lines: tephra logs each failure of the client once,
/// naming the cluster, with a brief error (`brief.rs`), where the client would repeat it with
/// debug dumps. `RUST_LOG=info,kube_client=debug` shows them.
pub const DEFAULT_FILTER: &str = "info,kube_client=off";
