//! `tephra controller-manager`: the controllers Volcano's `vc-controller-manager` runs (today
//! the job controller), with leader election on a Lease; runs until Ctrl-C or SIGTERM.

use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use tephra_kube::jobs::JobControllerOptions;
use tephra_kube::leader::{self, LeaderOptions, Leadership};
use tephra_kube::metrics::Metrics;

use crate::runtime;

/// The flags of `tephra controller-manager`.
#[derive(Args, Debug)]
pub struct Flags {
    #[command(flatten)]
    connection: runtime::Connection,
    /// Run only while holding the Lease, so that replicas can stand by.
    #[arg(long)]
    leader_elect: bool,
    /// Namespace of the Lease.
    #[arg(long, default_value = "volcano-system")]
    lock_object_namespace: String,
    /// Name of the Lease.
    #[arg(long, default_value = "vc-controller-manager")]
    lock_object_name: String,
    /// How often every Job is looked at even if nothing changed.
    #[arg(long, default_value = "30s")]
    resync_period: String,
    /// Log line format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: runtime::LogFormat,
}

/// Runs the controllers until interrupted.
pub fn run(f: Flags) -> anyhow::Result<()> {
    runtime::init_logging(f.log_format);
    let resync = runtime::positive_duration("--resync-period", &f.resync_period)?;
    let identity = runtime::identity("tephra-controller-manager");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let client = f.connection.client().await?;
        let mut tasks = Vec::new();
        let leadership = if f.leader_elect {
            let l = Leadership::candidate();
            let metrics = Arc::new(Metrics::new().context("registering metrics")?);
            tasks.push(leader::spawn(
                client.clone(),
                LeaderOptions::new(&f.lock_object_namespace, &f.lock_object_name, &identity),
                l.clone(),
                metrics,
            ));
            l
        } else {
            Leadership::always()
        };
        let options = JobControllerOptions { identity, resync };
        tasks.extend(tephra_kube::jobs::start(client, options, leadership));
        tracing::info!("tephra controller-manager started");
        runtime::shutdown().await;
        tracing::info!("stopping");
        for t in tasks {
            t.abort();
        }
        anyhow::Ok(())
    })
}
