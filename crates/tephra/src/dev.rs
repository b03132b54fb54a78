//! `tephra dev`: a control plane and simulated member clusters on this machine, for `kubectl`
//! with no cluster at all. Serves the API and the simulated kubelets, and runs the scheduler
//! and the job controller against the control plane (members from its Cluster objects).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use std::sync::Arc;

use tephra_devcluster::{DevCluster, Options, faults, fleet};

/// The fleet used when no scenario is given.
const DEFAULT_FLEET: &str = include_str!("../../../examples/dev/fleet.yaml");

/// Starts the devcluster and serves until Ctrl-C.
pub fn run(
    scenario: Option<&Path>,
    kubeconfig: Option<&Path>,
    port: Option<u16>,
    speed: f64,
    scheduler: bool,
) -> anyhow::Result<()> {
    let fleet = match scenario {
        Some(path) => fleet::load(path)?,
        None => fleet::parse(DEFAULT_FLEET, "examples/dev/fleet.yaml (built in)")?,
    };
    let path: PathBuf = match kubeconfig {
        Some(p) => p.to_path_buf(),
        None => std::env::temp_dir().join("tephra-dev").join("kubeconfig"),
    };
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
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        write_private(&path, &handle.kubeconfig_yaml())?;
        let running = if scheduler {
            let client = handle.client(tephra_devcluster::cluster::CONTROL_PLANE).await?;
            let options = tephra_kube::Options {
                members: tephra_kube::MemberSource::Clusters,
                listen: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
                identity: "tephra-dev".into(),
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
        println!("Ctrl-C stops it.");
        println!();
        println!("export KUBECONFIG={}", path.display());
        tokio::signal::ctrl_c()
            .await
            .context("waiting for Ctrl-C")?;
        if let Some((r, jobs)) = running {
            for t in jobs {
                t.abort();
            }
            r.stop().await;
        }
        fault_watch.abort();
        handle.shutdown();
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(())
    })
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
