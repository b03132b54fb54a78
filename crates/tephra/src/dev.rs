//! `tephra dev`: a control plane and simulated member clusters on this machine, for `kubectl`
//! with no cluster at all. Serves the API and the simulated kubelets, and runs the scheduler
//! and the job controller against the control plane (members from its Cluster objects).
//!
//! Its kubeconfig is its own: a kubeconfig whose API server still answers (another `tephra
//! dev`) is never overwritten, and the file is removed when it stops (Ctrl-C or SIGTERM). Its
//! log goes to a file beside the kubeconfig, so that the terminal stays the user's.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use std::sync::Arc;

use tephra_devcluster::{DevCluster, Options, faults, fleet};

/// The fleet used when no scenario is given.
const DEFAULT_FLEET: &str = include_str!("../../../examples/dev/fleet.yaml");

/// What `tephra dev` was asked for.
pub struct Settings<'a> {
    /// A simulator scenario whose fleet to serve.
    pub scenario: Option<&'a Path>,
    /// Where to write the kubeconfig.
    pub kubeconfig: Option<&'a Path>,
    /// Where to write the log (`-`: stderr).
    pub log: Option<&'a Path>,
    /// The control plane's port.
    pub port: Option<u16>,
    /// Simulated time's speed.
    pub speed: f64,
    /// Whether the scheduler and controllers run inside.
    pub scheduler: bool,
}

/// Starts the devcluster and serves until Ctrl-C or SIGTERM.
pub fn run(s: &Settings<'_>) -> anyhow::Result<()> {
    let (port, speed, scheduler) = (s.port, s.speed, s.scheduler);
    let fleet = match s.scenario {
        Some(path) => fleet::load(path)?,
        None => fleet::parse(DEFAULT_FLEET, "examples/dev/fleet.yaml (built in)")?,
    };
    let path: PathBuf = match s.kubeconfig {
        Some(p) => p.to_path_buf(),
        None => std::env::temp_dir().join("tephra-dev").join("kubeconfig"),
    };
    refuse_live(&path)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let log = log_to(s.log, &path)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let mut options = Options::fleet(fleet);
        options.base_port = port;
        if let Some(k) = options.kubelet.as_mut() {
            k.speed = speed;
        }
        let nodes: usize = options.members.iter().map(|m| m.nodes.len()).sum();
        let handle = Arc::new(DevCluster::start(options).await?);
        let fault_watch = faults::watch_annotations(handle.clone());
        let written = handle.kubeconfig_yaml();
        write_private(&path, &written)?;
        let running = if scheduler {
            let client = handle.client(tephra_devcluster::cluster::CONTROL_PLANE).await?;
            let options = tephra_kube::Options {
                members: tephra_kube::MemberSource::Clusters,
                listen: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
                identity: "tephra-dev".into(),
                // `kubectl logs` on a declared pod: the control plane asks this node's
                // kubelet endpoint, which reads the log from the member.
                virtual_node: Some(tephra_kube::virtual_node::VirtualNodeOptions {
                    name: "tephra".into(),
                    address: "127.0.0.1".into(),
                    listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
                    client_ca: vec![handle.ca_der().to_vec()],
                    client_names: vec![
                        tephra_kube::virtual_node::VirtualNodeOptions::KUBEADM_CLIENT.into(),
                    ],
                    serving: None,
                }),
                ..tephra_kube::Options::default()
            };
            let jobs = crate::controller_manager::start_all(
                &client,
                &crate::controller_manager::Settings {
                    identity: "tephra-dev".into(),
                    resync: std::time::Duration::from_secs(30),
                    scheduler_names: vec![tephra_api::well_known::VOLCANO_SCHEDULER_NAME.into()],
                    inherit_owner_annotations: true,
                    // Faster than a real fleet's defaults, so a fault shows in seconds.
                    clusters: tephra_kube::cluster_status::ClusterStatusOptions {
                        period: std::time::Duration::from_secs(2),
                        thresholds: tephra_kube::cluster_status::Thresholds {
                            failure_ms: 6_000,
                            success_ms: 6_000,
                        },
                        no_execute_after: Some(std::time::Duration::from_secs(60)),
                    },
                    errors: tephra_kube::reconciler::ErrorCounter::default(),
                    clock: tephra_kube::clock::Clock::system(),
                },
                &crate::controller_manager::Which::ALL,
                &tephra_kube::leader::Leadership::always(),
            );
            Some((tephra_kube::start(client, options).await?, jobs))
        } else {
            None
        };
        println!(
            "tephra dev: {} API servers, {nodes} simulated nodes (TLS on loopback, bearer tokens)",
            handle.servers().count()
        );
        for s in handle.servers() {
            println!("  {:<16} {}", s.api.name, s.url());
        }
        println!();
        println!("The CRDs and queues are on the control plane; each member is a context:");
        println!("  kubectl get queues");
        println!(
            "  kubectl --context {} get nodes",
            handle
                .members()
                .next()
                .map(|s| s.api.name.clone())
                .unwrap_or_default()
        );
        println!();
        println!(
            "Faults: annotate a Cluster with {0}=unreachable (or a 5xx code such as 503), a \
             member's Node with {0}=not-ready, or delete a Node; remove the annotation to restore.",
            faults::FAULT_ANNOTATION
        );
        println!();
        match running.as_ref().and_then(|r| r.0.metrics_addr) {
            Some(addr) => {
                println!(
                    "The scheduler runs inside (metrics: http://{addr}/metrics): pods declared on the"
                );
                println!("control plane with schedulerName: volcano are gang-placed in a member:");
                println!("  kubectl apply -f examples/podgroup-with-pods.yaml");
                println!("  kubectl get podgroups -A; kubectl get resourcebindings -A");
            }
            None => println!("The scheduler does not run (--no-scheduler)."),
        }
        if running.is_some() {
            println!("The Volcano job controller runs inside too:");
            println!("  kubectl apply -f examples/dev/hello-job.yaml; kubectl get vcjob hello -w");
        }
        match &log {
            Some(file) => println!("Its log: {} (--log - for stderr).", file.display()),
            None => println!("Its log goes to stderr."),
        }
        println!("Ctrl-C stops it (and removes its kubeconfig).");
        println!();
        if let Some(addr) = running.as_ref().and_then(|r| r.0.metrics_addr) {
            println!("UI: http://{addr}/ui/");
        }
        println!("export KUBECONFIG={}", path.display());
        stopped().await?;
        if let Some((r, jobs)) = running {
            for t in jobs {
                t.abort();
            }
            r.stop().await;
        }
        fault_watch.abort();
        handle.shutdown();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Only if it is still the one written here.
        if std::fs::read_to_string(&path).is_ok_and(|t| t == written) {
            let _ = std::fs::remove_file(&path);
        }
        Ok(())
    })
}

/// Until Ctrl-C (SIGINT) or SIGTERM (`kill`, a background job's end).
async fn stopped() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).context("waiting for SIGTERM")?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
            _ = term.recv() => {}
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.context("waiting for Ctrl-C")
    }
}

/// Refuses a kubeconfig that another running `tephra dev` (or any live API server) wrote: its
/// first server still accepts connections.
fn refuse_live(path: &Path) -> anyhow::Result<()> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    let Ok(config) = serde_saphyr::from_str::<serde_json::Value>(&text) else {
        return Ok(());
    };
    let Some(server) = config
        .pointer("/clusters/0/cluster/server")
        .and_then(serde_json::Value::as_str)
    else {
        return Ok(());
    };
    let host = server
        .split("://")
        .nth(1)
        .unwrap_or(server)
        .split('/')
        .next()
        .unwrap_or_default();
    let live = std::net::ToSocketAddrs::to_socket_addrs(host)
        .into_iter()
        .flatten()
        .any(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_millis(500)).is_ok());
    if live {
        anyhow::bail!(
            "{} is the kubeconfig of a tephra dev that is running (its API server {server} \
             answers): stop that one, or give this one its own with --kubeconfig",
            path.display()
        );
    }
    Ok(())
}

/// Sends the log to `log` (`-`: stderr), by default `tephra-dev.log` beside the kubeconfig;
/// returns the file, if one.
fn log_to(log: Option<&Path>, kubeconfig: &Path) -> anyhow::Result<Option<PathBuf>> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(tephra_kube::logging::DEFAULT_FILTER)
    });
    let file = match log {
        Some(p) if p == Path::new("-") => None,
        Some(p) => Some(p.to_path_buf()),
        None => Some(kubeconfig.with_file_name("tephra-dev.log")),
    };
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match &file {
        Some(p) => {
            let f =
                std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?;
            let _ = builder
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(f))
                .try_init();
        }
        None => {
            let _ = builder.with_writer(std::io::stderr).try_init();
        }
    }
    Ok(file)
}

fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}
