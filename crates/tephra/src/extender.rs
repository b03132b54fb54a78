//! `tephra extender`: serves kube-scheduler's extender verbs for one member (normally a
//! sidecar of each kube-scheduler replica, on localhost), learning tephra's plans from a watch
//! of the member's pods and PodGroups; runs until Ctrl-C or SIGTERM.

use anyhow::Context;
use clap::Args;

use crate::runtime;

/// The flags of `tephra extender`.
#[derive(Args, Debug)]
pub struct Flags {
    /// The member's API server (the extender binds there and watches its pods).
    #[command(flatten)]
    connection: runtime::Connection,
    /// Where kube-scheduler reaches the extender (its `urlPrefix`).
    #[arg(long, default_value = "127.0.0.1:8888")]
    listen_address: String,
    /// How long a gang's binds wait at the barrier for the rest of the gang before every one
    /// is refused; keep it below kube-scheduler's extender `httpTimeout` (30 s by default).
    #[arg(long, default_value = "20s")]
    bind_timeout: String,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: runtime::LogFormat,
}

/// Runs `tephra extender`.
pub fn run(f: Flags) -> anyhow::Result<()> {
    runtime::init_logging(f.log_format);
    let listen = runtime::address("--listen-address", &f.listen_address)?;
    let bind_timeout = runtime::positive_duration("--bind-timeout", &f.bind_timeout)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let member = f.connection.client().await?;
        let ext = tephra_extender::Extender::new(
            member.clone(),
            &tephra_extender::Options { bind_timeout },
        )
        .context("registering the extender's metrics")?;
        let watches = tephra_extender::watch::start(ext.clone(), member);
        let (addr, server) = tephra_extender::serve(ext, listen)
            .await
            .with_context(|| format!("--listen-address {listen}"))?;
        tracing::info!(%addr, "tephra extender serving filter, prioritize, bind and preempt");
        runtime::shutdown().await;
        server.abort();
        for w in watches {
            w.abort();
        }
        anyhow::Ok(())
    })
}
