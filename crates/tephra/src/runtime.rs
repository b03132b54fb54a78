//! What the long-running commands (`scheduler`, `controller-manager`, `extender`) share: the API client
//! from a kubeconfig, logging, this replica's identity, listen addresses, and waiting for
//! Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;
use clap::ValueEnum;

/// Log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object a line.
    Json,
}

/// Which API server to talk to.
#[derive(clap::Args, Debug)]
pub struct Connection {
    /// Kubeconfig (default: in-cluster, else $KUBECONFIG or ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
}

impl Connection {
    /// The API client these flags name.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        client(self.kubeconfig.as_deref(), self.context.clone()).await
    }

    /// The client configuration these flags name.
    pub async fn config(&self) -> anyhow::Result<kube::Config> {
        config(self.kubeconfig.as_deref(), self.context.clone()).await
    }
}

/// `:8080` and `0.0.0.0:8080` both listen on every interface.
pub fn address(flag: &str, text: &str) -> anyhow::Result<SocketAddr> {
    let full = if text.starts_with(':') {
        format!("0.0.0.0{text}")
    } else {
        text.to_string()
    };
    full.parse()
        .with_context(|| format!("{flag} {text:?}: not a host:port address"))
}

/// A positive Go duration given to `flag` (`1s`, `500ms`, `30s`).
pub fn positive_duration(flag: &str, text: &str) -> anyhow::Result<std::time::Duration> {
    let d = tephra_scheduler::duration::Duration::parse(text)
        .with_context(|| format!("{flag} {text:?}"))?;
    u64::try_from(d.as_millis())
        .ok()
        .filter(|ms| *ms > 0)
        .map(std::time::Duration::from_millis)
        .with_context(|| format!("{flag} {text:?}: must be positive"))
}

/// Logs to stderr at `info` without the kube client's own lines (or `RUST_LOG`), as text or
/// JSON.
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(tephra_kube::logging::DEFAULT_FILTER)
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// This replica's name: the pod's (`POD_NAME`, else `HOSTNAME`), else `<component>-<pid>`.
pub fn identity(component: &str) -> String {
    std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| format!("{component}-{}", std::process::id()))
}

/// The API client: from `kubeconfig` (and `context`) if given, else in-cluster, `$KUBECONFIG`
/// or `~/.kube/config`.
pub async fn client(
    kubeconfig: Option<&Path>,
    context: Option<String>,
) -> anyhow::Result<kube::Client> {
    let config = config(kubeconfig, context).await?;
    // HTTP/2 where the API server offers it: binds and watches share one connection.
    tephra_kube::connect::client(config).context("building the API client")
}

/// The client configuration the kubeconfig flags name.
pub async fn config(
    kubeconfig: Option<&Path>,
    context: Option<String>,
) -> anyhow::Result<kube::Config> {
    Ok(match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("--kubeconfig {}", path.display()))?;
            let o = kube::config::KubeConfigOptions {
                context,
                ..Default::default()
            };
            kube::Config::from_custom_kubeconfig(kc, &o)
                .await
                .with_context(|| format!("--kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig: pass --kubeconfig, set KUBECONFIG or run in a cluster")?,
    })
}

/// Waits for Ctrl-C or SIGTERM.
pub async fn shutdown() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The multi-threaded async runtime a long-running command runs on.
pub fn async_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}
