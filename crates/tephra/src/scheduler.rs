//! `tephra scheduler`: the flags a `vc-scheduler` user knows, turned into the runtime's
//! options; runs until Ctrl-C or SIGTERM.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use tephra_kube::leader::LeaderOptions;

use crate::runtime;

/// Where member clusters come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Members {
    /// The cluster the scheduler runs in, as member `local`.
    Local,
    /// Every `Cluster` object of the control plane.
    Clusters,
    /// Both.
    Both,
}

/// Whose fleet objects the scheduler serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Fleet {
    /// tephra's own: Volcano's objects, and tephra's Clusters and ResourceBindings (the default).
    Tephra,
    /// Karmada's: the API server is Karmada's; tephra schedules the ResourceBindings whose
    /// `spec.schedulerName` is one of `--scheduler-name`, onto Karmada's Clusters, and leaves
    /// propagation, failover and eviction to Karmada's controllers.
    Karmada,
}

/// The flags of `tephra scheduler`.
#[derive(Args, Debug)]
pub struct Flags {
    #[command(flatten)]
    connection: runtime::Connection,
    /// The volcano-scheduler.conf file (reloaded when it changes; a bad file keeps the last
    /// good configuration). Default: tephra's built-in configuration.
    #[arg(long)]
    scheduler_conf: Option<PathBuf>,
    /// Refuse Volcano plugins tephra does not implement instead of loading them inert.
    #[arg(long)]
    strict_config: bool,
    /// Time between scheduling sessions (Go duration: 1s, 500ms).
    #[arg(long, default_value = "1s")]
    schedule_period: String,
    /// Pods with this schedulerName are placed (repeatable).
    #[arg(long = "scheduler-name", default_value = "volcano")]
    scheduler_names: Vec<String>,
    /// The queue of PodGroups that name none.
    #[arg(long, default_value = "default")]
    default_queue: String,
    /// Run only while holding the leader Lease.
    #[arg(long)]
    leader_elect: bool,
    /// Namespace of the leader Lease.
    #[arg(long, default_value = "volcano-system")]
    lock_object_namespace: String,
    /// Name of the leader Lease.
    #[arg(long, default_value = "vc-scheduler")]
    lock_object_name: String,
    /// Where /metrics (and /healthz, /readyz unless --healthz-address) are served.
    #[arg(long, default_value = ":8080")]
    listen_address: String,
    /// Where /healthz and /readyz are served.
    #[arg(long)]
    healthz_address: Option<String>,
    /// Fewest feasible nodes to find and score for a pod before choosing.
    #[arg(long, default_value_t = 100)]
    minimum_feasible_nodes: u32,
    /// Least percentage of a cluster's nodes to find and score, when adaptive.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=100))]
    minimum_percentage_nodes_to_find: u32,
    /// Percentage of a cluster's nodes to find and score; 0 adapts it to the cluster's size
    /// (50% less 1% per 125 nodes), 100 scores every feasible node.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100))]
    percentage_nodes_to_find: u32,
    /// Client-side write rate limit in requests a second; 0 sets none, leaving the API server's
    /// priority and fairness and `--write-concurrency` to bound the load.
    #[arg(long, default_value_t = 0.0)]
    kube_api_qps: f64,
    /// Burst of the write rate limit (0: one second's worth).
    #[arg(long, default_value_t = 0)]
    kube_api_burst: u32,
    /// Writes in flight at most.
    #[arg(long, default_value_t = 64)]
    write_concurrency: usize,
    /// Where member clusters come from.
    #[arg(long, value_enum, default_value = "local")]
    members: Members,
    /// Whose fleet objects to serve: tephra's own, or a Karmada control plane's (the client's
    /// API server is then Karmada's).
    #[arg(long, value_enum, default_value = "tephra")]
    fleet: Fleet,
    /// How long a gang may stay below minMember after failed binds before it is evicted whole
    /// and placed again (Go duration).
    #[arg(long, default_value = "30s")]
    gang_bind_timeout: String,
    /// How long the old copy of a gang moved by failover is kept at most while its new
    /// placement does not run yet (Karmada's flag; a task's gracePeriodSeconds wins).
    #[arg(long, default_value = "10m")]
    graceful_eviction_timeout: String,
    /// How long a gang's volume claims may take to be bound (a static volume taken, or one
    /// provisioned on the chosen node) before its binds fail and it is placed again
    /// (kube-scheduler's VolumeBinding bindTimeoutSeconds; Go duration).
    #[arg(long, default_value = "10m")]
    volume_bind_timeout: String,
    /// Discover HyperNodes from these node labels too, as Volcano's label discovery does: the
    /// first names tier 1 (a rack's switch), the next tier 2, and so on; each value of a label
    /// is one domain of its tier (comma-separated, or repeat the flag).
    #[arg(long = "topology-labels", value_delimiter = ',')]
    topology_labels: Vec<String>,
    /// Network-topology tiers above the member clusters, lowest first: `region`, `zone` or
    /// `provider` (the Cluster's fields) or a cluster label key; each value is one domain of its
    /// tier. A gang held hard to one may be split over clusters of one domain only.
    #[arg(long = "fleet-tiers", value_delimiter = ',')]
    fleet_tiers: Vec<String>,
    /// Answer the web UI (`/ui/` on the listen address) from anywhere that reaches the port,
    /// not only from the loopback interface (where `kubectl port-forward` arrives). The UI is
    /// read-only and shows no secret.
    #[arg(long = "ui-open")]
    ui_open: bool,
    /// Recompute waiting jobs' expected starts (the UI, `tephra job view` and the PodGroups'
    /// `tephra.io/expected-start`) at most this often, when something changed (Go duration;
    /// 0 turns them off).
    #[arg(long, default_value = "10s")]
    eta_every: String,
    /// What a pod is expected to run when neither it, its PodGroup (`tephra.io/expected-duration`),
    /// its `activeDeadlineSeconds` nor completed pods of its queue and request say.
    #[arg(long, default_value = "1h")]
    eta_default_duration: String,
    /// The fleet's virtual node.
    #[command(flatten)]
    virtual_node: VirtualNodeFlags,
    /// Log line format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: runtime::LogFormat,
}

/// The fleet's virtual node (`--members clusters` only).
#[derive(Args, Debug, Clone)]
pub struct VirtualNodeFlags {
    /// With `--members clusters`: the fleet's virtual node, that declared pods are bound to once
    /// a member runs them, so that `kubectl logs` on them is served from their member ("" turns
    /// it off).
    #[arg(long, default_value = "tephra")]
    virtual_node: String,
    /// The address the control plane's API server reaches this replica on, for the virtual
    /// node's kubelet endpoint (default: $POD_IP; without either, the virtual node is off).
    #[arg(long)]
    virtual_node_address: Option<String>,
    /// The virtual node's kubelet endpoint port.
    #[arg(long, default_value_t = 10250)]
    virtual_node_port: u16,
    /// CA bundle (PEM) the API server's kubelet client certificate must chain to (default: the
    /// control plane's CA from the kubeconfig).
    #[arg(long)]
    virtual_node_client_ca_file: Option<PathBuf>,
    /// Common names of the kubelet client certificates the virtual node answers.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "kube-apiserver-kubelet-client"
    )]
    virtual_node_client_names: Vec<String>,
    /// Serving certificate (PEM) of the virtual node's endpoint (default: a self-signed one).
    #[arg(long, requires = "virtual_node_tls_key_file")]
    virtual_node_tls_cert_file: Option<PathBuf>,
    /// Key (PEM) of `--virtual-node-tls-cert-file`.
    #[arg(long, requires = "virtual_node_tls_cert_file")]
    virtual_node_tls_key_file: Option<PathBuf>,
}

/// The virtual node's options from the flags: `None` when off (another `--members`, no name,
/// or no address).
fn virtual_node(
    f: &VirtualNodeFlags,
    members: Members,
    config: &kube::Config,
) -> anyhow::Result<Option<tephra_kube::virtual_node::VirtualNodeOptions>> {
    if members != Members::Clusters || f.virtual_node.is_empty() {
        return Ok(None);
    }
    let Some(address) = f
        .virtual_node_address
        .clone()
        .or_else(|| std::env::var("POD_IP").ok())
        .filter(|a| !a.is_empty())
    else {
        tracing::info!(
            "virtual node off: no --virtual-node-address and no $POD_IP; `kubectl logs` on declared pods answers that they have no host"
        );
        return Ok(None);
    };
    let read = |flag: &str, p: &PathBuf| {
        std::fs::read(p).with_context(|| format!("{flag} {}", p.display()))
    };
    let client_ca = match &f.virtual_node_client_ca_file {
        Some(p) => {
            let pem = read("--virtual-node-client-ca-file", p)?;
            rustls_pki_types_pem(&pem)
                .with_context(|| format!("--virtual-node-client-ca-file {}", p.display()))?
        }
        None => config.root_cert.clone().unwrap_or_default(),
    };
    let serving = match (&f.virtual_node_tls_cert_file, &f.virtual_node_tls_key_file) {
        (Some(c), Some(k)) => Some((
            read("--virtual-node-tls-cert-file", c)?,
            read("--virtual-node-tls-key-file", k)?,
        )),
        _ => None,
    };
    Ok(Some(tephra_kube::virtual_node::VirtualNodeOptions {
        name: f.virtual_node.clone(),
        address,
        listen: std::net::SocketAddr::from(([0, 0, 0, 0], f.virtual_node_port)),
        client_ca,
        client_names: f.virtual_node_client_names.clone(),
        serving,
    }))
}

/// The certificates (DER) of a PEM bundle.
fn rustls_pki_types_pem(pem: &[u8]) -> anyhow::Result<Vec<Vec<u8>>> {
    let certs = tephra_kube::virtual_node::tls::certificates(pem)?;
    if certs.is_empty() {
        bail!("no CERTIFICATE block");
    }
    Ok(certs)
}

/// Runs the scheduler until interrupted.
pub fn run(f: Flags) -> anyhow::Result<()> {
    runtime::init_logging(f.log_format);
    let period = runtime::positive_duration("--schedule-period", &f.schedule_period)?;
    let gang_bind_timeout = tephra_scheduler::duration::Duration::parse(&f.gang_bind_timeout)
        .with_context(|| format!("--gang-bind-timeout {:?}", f.gang_bind_timeout))?;
    if gang_bind_timeout.is_negative() {
        bail!(
            "--gang-bind-timeout {:?}: must not be negative",
            f.gang_bind_timeout
        );
    }
    let graceful_eviction_timeout =
        runtime::positive_duration("--graceful-eviction-timeout", &f.graceful_eviction_timeout)?;
    let volume_bind_timeout =
        runtime::positive_duration("--volume-bind-timeout", &f.volume_bind_timeout)?;
    let listen = runtime::address("--listen-address", &f.listen_address)?;
    let healthz = f
        .healthz_address
        .as_deref()
        .map(|h| runtime::address("--healthz-address", h))
        .transpose()?;
    let identity = runtime::identity("tephra-scheduler");
    if f.fleet == Fleet::Karmada {
        if f.healthz_address.is_some() {
            bail!(
                "--healthz-address: with --fleet karmada, /healthz is served on --listen-address"
            );
        }
        return run_karmada(f, period, identity);
    }
    let (vn_flags, members) = (f.virtual_node.clone(), f.members);
    let options = tephra_kube::Options {
        scheduler_names: f.scheduler_names,
        period,
        config_path: f.scheduler_conf,
        strict_config: f.strict_config,
        default_queue: f.default_queue,
        listen: Some(listen),
        healthz,
        leader: f
            .leader_elect
            .then(|| LeaderOptions::new(&f.lock_object_namespace, &f.lock_object_name, &identity)),
        search: tephra_scheduler::placement::SearchArgs {
            min_feasible_nodes: f.minimum_feasible_nodes as usize,
            min_percentage: f.minimum_percentage_nodes_to_find as usize,
            percentage: f.percentage_nodes_to_find as usize,
            ..Default::default()
        },
        qps: f.kube_api_qps,
        burst: f.kube_api_burst,
        concurrency: f.write_concurrency,
        identity,
        members: match f.members {
            Members::Local => tephra_kube::MemberSource::Local,
            Members::Clusters => tephra_kube::MemberSource::Clusters,
            Members::Both => tephra_kube::MemberSource::Both,
        },
        pod: std::env::var("POD_NAMESPACE")
            .ok()
            .zip(std::env::var("POD_NAME").ok()),
        gang_bind_timeout: Duration::from_secs(
            u64::try_from(gang_bind_timeout.as_secs()).unwrap_or(30),
        ),
        graceful_eviction_timeout,
        volume_bind_timeout,
        topology_labels: f.topology_labels,
        fleet_tiers: f.fleet_tiers,
        virtual_node: None,
        ui: tephra_kube::ui::UiOptions {
            open: f.ui_open,
            eta_every: match f.eta_every.trim() {
                "0" => std::time::Duration::ZERO,
                text => runtime::positive_duration("--eta-every", text)?,
            },
            default_run: runtime::positive_duration(
                "--eta-default-duration",
                &f.eta_default_duration,
            )?,
        },
    };
    let runtime = runtime::async_runtime()?;
    runtime.block_on(async move {
        let config = f.connection.config().await?;
        let mut options = options;
        options.virtual_node = virtual_node(&vn_flags, members, &config)?;
        let client = tephra_kube::connect::client(config).context("building the API client")?;
        let running = tephra_kube::start(client, options).await?;
        tracing::info!(metrics = ?running.metrics_addr, "tephra scheduler started");
        runtime::shutdown().await;
        tracing::info!("stopping");
        running.stop().await;
        anyhow::Ok(())
    })
}

/// `--fleet karmada`: schedules Karmada's bindings until interrupted.
fn run_karmada(f: Flags, period: Duration, identity: String) -> anyhow::Result<()> {
    let listen = runtime::address("--listen-address", &f.listen_address)?;
    let config = match &f.scheduler_conf {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--scheduler-conf {}", path.display()))?;
            let parsed = if f.strict_config {
                tephra_scheduler::SchedulerConfig::parse_strict(&text)
            } else {
                tephra_scheduler::SchedulerConfig::parse(&text)
            };
            parsed.with_context(|| format!("--scheduler-conf {}", path.display()))?
        }
        None => tephra_scheduler::SchedulerConfig::default_config(),
    };
    let options = tephra_kube::karmada::KarmadaOptions {
        scheduler_names: f.scheduler_names,
        period,
        config: std::sync::Arc::new(config),
        leader: f
            .leader_elect
            .then(|| LeaderOptions::new(&f.lock_object_namespace, &f.lock_object_name, &identity)),
        identity,
        listen: Some(listen),
    };
    let runtime = runtime::async_runtime()?;
    runtime.block_on(async move {
        let client = f.connection.client().await?;
        let running = tephra_kube::karmada::start(client, options).await?;
        tracing::info!(metrics = ?running.metrics_addr, "tephra scheduler started for Karmada's bindings");
        runtime::shutdown().await;
        tracing::info!("stopping");
        running.stop().await;
        anyhow::Ok(())
    })
}
