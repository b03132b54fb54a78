//! `tephra controller-manager`: the controllers Volcano's `vc-controller-manager` runs (the
//! job, PodGroup, queue, CronJob, JobFlow and JobTemplate controllers, chosen with `--controllers` in Volcano's words) and, for
//! a fleet, Karmada's cluster status and taint controllers, with leader election on a Lease;
//! runs until Ctrl-C or SIGTERM.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use clap::Args;
use tephra_kube::bare_pods::BarePodOptions;
use tephra_kube::cluster_status::ClusterStatusOptions;
use tephra_kube::cluster_status::Thresholds;
use tephra_kube::jobs::JobControllerOptions;
use tephra_kube::leader::{self, LeaderOptions, Leadership};
use tephra_kube::metrics::Metrics;
use tephra_kube::queues::QueueControllerOptions;

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
    /// How often every Job, pod and Queue is looked at even if nothing changed.
    #[arg(long, default_value = "30s")]
    resync_period: String,
    /// Pods with this `schedulerName` get a PodGroup when they come without one (repeatable).
    #[arg(long = "scheduler-name", default_value = "volcano")]
    scheduler_names: Vec<String>,
    /// Whether a pod's PodGroup inherits its owner's `volcano.sh/` annotations and
    /// `scheduling.volcano.sh/group-min-member`.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    inherit_owner_annotations: bool,
    /// The controllers to run, comma separated: `*` for all, a name to add one, `-name` to
    /// leave one out (job-controller, pg-controller, queue-controller, cronjob-controller,
    /// jobflow-controller, jobtemplate-controller, cluster-controller, taint-manager,
    /// application-failover).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    controllers: Vec<String>,
    /// How often each member cluster is probed (Karmada's flag).
    #[arg(long, default_value = "10s")]
    cluster_status_update_frequency: String,
    /// How long a member must fail its probes before its Cluster is not Ready.
    #[arg(long, default_value = "30s")]
    cluster_failure_threshold: String,
    /// How long a member must pass its probes before its Cluster is Ready again.
    #[arg(long, default_value = "30s")]
    cluster_success_threshold: String,
    /// How long a member stays not ready or unreachable before its NoExecute taint is added
    /// (the jobs that do not tolerate it then move); `0` turns NoExecute taints off.
    #[arg(long, default_value = "5m")]
    no_execute_taint_grace: String,
    /// Serve /metrics, /healthz and /readyz here (`:8081`); none by default.
    #[arg(long)]
    listen_address: Option<String>,
    /// Log line format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: runtime::LogFormat,
}

/// Runs the controllers until interrupted.
pub fn run(f: Flags) -> anyhow::Result<()> {
    runtime::init_logging(f.log_format);
    let resync = runtime::positive_duration("--resync-period", &f.resync_period)?;
    let clusters = cluster_options(&f)?;
    let listen = f
        .listen_address
        .as_deref()
        .map(|a| runtime::address("--listen-address", a))
        .transpose()?;
    let identity = runtime::identity("tephra-controller-manager");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let client = f.connection.client().await?;
        let mut tasks = Vec::new();
        let metrics = Arc::new(Metrics::controller_manager().context("registering metrics")?);
        let errors = metrics.controller_errors.clone();
        if let Some(addr) = listen {
            let health = tephra_kube::serve::Health {
                ready: Arc::new(AtomicBool::new(true)),
                metrics: metrics.clone(),
                ui: None,
            };
            let (bound, task) = tephra_kube::serve::start(addr, health)
                .await
                .with_context(|| format!("--listen-address {addr}"))?;
            tracing::info!(address = %bound, "serving /metrics, /healthz and /readyz");
            tasks.push(task);
        }
        let leadership = if f.leader_elect {
            let l = Leadership::candidate();
            tasks.push(leader::spawn(
                client.clone(),
                LeaderOptions::new(&f.lock_object_namespace, &f.lock_object_name, &identity),
                l.clone(),
                metrics,
            ));
            l
        } else {
            // Always writing: the gauge says so, as the scheduler's does.
            metrics.leader.set(1);
            Leadership::always()
        };
        let which = Which::parse(&f.controllers)?;
        let settings = Settings {
            identity,
            resync,
            scheduler_names: f.scheduler_names,
            inherit_owner_annotations: f.inherit_owner_annotations,
            clusters,
            errors: tephra_kube::reconciler::ErrorCounter::new(errors),
            clock: tephra_kube::clock::Clock::system(),
        };
        tasks.extend(start_all(&client, &settings, &which, &leadership));
        tracing::info!("tephra controller-manager started");
        runtime::shutdown().await;
        tracing::info!("stopping");
        for t in tasks {
            t.abort();
        }
        anyhow::Ok(())
    })
}

/// The cluster controller's settings from the flags.
fn cluster_options(f: &Flags) -> anyhow::Result<ClusterStatusOptions> {
    let ms = |flag: &str, v: &str| -> anyhow::Result<i64> {
        Ok(runtime::positive_duration(flag, v)?.as_millis() as i64)
    };
    let grace = match f.no_execute_taint_grace.trim() {
        "0" | "0s" => None,
        v => Some(runtime::positive_duration("--no-execute-taint-grace", v)?),
    };
    Ok(ClusterStatusOptions {
        period: runtime::positive_duration(
            "--cluster-status-update-frequency",
            &f.cluster_status_update_frequency,
        )?,
        thresholds: Thresholds {
            failure_ms: ms("--cluster-failure-threshold", &f.cluster_failure_threshold)?,
            success_ms: ms("--cluster-success-threshold", &f.cluster_success_threshold)?,
        },
        no_execute_after: grace,
    })
}

/// The controllers one can name in `--controllers`.
pub const KNOWN: [&str; 9] = [
    "job-controller",
    "pg-controller",
    "queue-controller",
    "cronjob-controller",
    "jobflow-controller",
    "jobtemplate-controller",
    "cluster-controller",
    "taint-manager",
    "application-failover",
];

/// Which controllers run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Which {
    /// The Job controller.
    pub job: bool,
    /// The PodGroup controller.
    pub pg: bool,
    /// The queue controller.
    pub queue: bool,
    /// The CronJob controller.
    pub cronjob: bool,
    /// The JobFlow controller.
    pub jobflow: bool,
    /// The JobTemplates' status (kept by the JobFlow controller's passes).
    pub jobtemplate: bool,
    /// The cluster status and taint controllers (members of a fleet).
    pub cluster: bool,
    /// The taint manager.
    pub taint_manager: bool,
    /// Application failover.
    pub application_failover: bool,
}

impl Which {
    /// All of them.
    pub const ALL: Which = Which {
        job: true,
        pg: true,
        queue: true,
        cronjob: true,
        jobflow: true,
        jobtemplate: true,
        cluster: true,
        taint_manager: true,
        application_failover: true,
    };

    /// Reads `--controllers` as Volcano does: `*` turns all on, `name` one, `-name` one off.
    pub fn parse(list: &[String]) -> anyhow::Result<Self> {
        let star = list.iter().any(|c| c.trim() == "*");
        for c in list {
            let name = c.trim().trim_start_matches('-');
            if name != "*" && !name.is_empty() && !KNOWN.contains(&name) {
                anyhow::bail!(
                    "--controllers: unknown controller {name:?} (known: {})",
                    KNOWN.join(", ")
                );
            }
        }
        let on = |name: &str| {
            if list.iter().any(|c| c.trim() == format!("-{name}")) {
                false
            } else {
                star || list.iter().any(|c| c.trim() == name)
            }
        };
        Ok(Self {
            job: on("job-controller"),
            pg: on("pg-controller"),
            queue: on("queue-controller"),
            cronjob: on("cronjob-controller"),
            jobflow: on("jobflow-controller"),
            jobtemplate: on("jobtemplate-controller"),
            cluster: on("cluster-controller"),
            taint_manager: on("taint-manager"),
            application_failover: on("application-failover"),
        })
    }
}

/// What every controller is told.
#[derive(Clone, Debug)]
pub struct Settings {
    /// This replica's name, on Events.
    pub identity: String,
    /// How often everything is looked at again.
    pub resync: std::time::Duration,
    /// The scheduler names whose pods get a PodGroup.
    pub scheduler_names: Vec<String>,
    /// Whether a PodGroup inherits its pod's owner's annotations.
    pub inherit_owner_annotations: bool,
    /// How members are probed and tainted.
    pub clusters: ClusterStatusOptions,
    /// Where the controllers count failed passes.
    pub errors: tephra_kube::reconciler::ErrorCounter,
    /// The time schedules are read against (the system's, unless a test drives it).
    pub clock: tephra_kube::clock::Clock,
}

/// Starts the chosen controllers on `client`; they write only while `leadership` leads.
pub fn start_all(
    client: &kube::Client,
    s: &Settings,
    which: &Which,
    leadership: &Leadership,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    if which.job {
        let options = JobControllerOptions {
            identity: s.identity.clone(),
            resync: s.resync,
            errors: s.errors.clone(),
        };
        tasks.extend(tephra_kube::jobs::start(
            client.clone(),
            options,
            leadership.clone(),
        ));
    }
    if which.pg {
        let options = BarePodOptions {
            identity: s.identity.clone(),
            scheduler_names: s.scheduler_names.clone(),
            inherit_owner_annotations: s.inherit_owner_annotations,
            resync: s.resync,
            errors: s.errors.clone(),
        };
        tasks.extend(tephra_kube::bare_pods::start(
            client.clone(),
            options,
            leadership.clone(),
        ));
    }
    if which.queue {
        let options = QueueControllerOptions {
            identity: s.identity.clone(),
            resync: s.resync,
            errors: s.errors.clone(),
        };
        tasks.extend(tephra_kube::queues::start(
            client.clone(),
            options,
            leadership.clone(),
        ));
    }
    if which.cronjob {
        let options = tephra_kube::cronjobs::CronJobControllerOptions {
            identity: s.identity.clone(),
            resync: s.resync,
            errors: s.errors.clone(),
            clock: s.clock.clone(),
        };
        tasks.extend(tephra_kube::cronjobs::start(
            client.clone(),
            options,
            leadership.clone(),
        ));
    }
    if which.jobflow {
        let options = tephra_kube::jobflows::JobFlowControllerOptions {
            identity: s.identity.clone(),
            resync: s.resync,
            errors: s.errors.clone(),
            clock: s.clock.clone(),
            template_status: which.jobtemplate,
        };
        tasks.extend(tephra_kube::jobflows::start(
            client.clone(),
            options,
            leadership.clone(),
        ));
    } else if which.jobtemplate {
        tracing::warn!(
            "--controllers: jobtemplate-controller runs within jobflow-controller, which is off: \
             JobTemplates' status is not kept"
        );
    }
    if which.cluster {
        tasks.extend(tephra_kube::cluster_status::start(
            client.clone(),
            s.clusters.clone(),
            leadership.clone(),
        ));
    }
    if which.taint_manager || which.application_failover {
        let options = tephra_kube::failover::FailoverOptions {
            identity: s.identity.clone(),
            resync: s.resync,
            taints: which.taint_manager,
            application: which.application_failover,
            errors: s.errors.clone(),
        };
        tasks.extend(tephra_kube::failover::start(
            client.clone(),
            options,
            leadership.clone(),
        ));
    }
    tasks
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn list(s: &str) -> Vec<String> {
        s.split(',').map(String::from).collect()
    }

    #[test]
    fn controllers_are_chosen_in_volcanos_words() {
        assert_eq!(Which::parse(&list("*")).unwrap(), Which::ALL);
        let w = Which::parse(&list("*,-pg-controller")).unwrap();
        assert!(w.job && !w.pg && w.queue);
        assert!(
            !Which::parse(&list("*,-taint-manager"))
                .unwrap()
                .taint_manager
        );
        let w = Which::parse(&list("job-controller")).unwrap();
        assert!(w.job && !w.pg && !w.queue && !w.cluster);
        let e = Which::parse(&list("*,-gc-controllr")).unwrap_err();
        assert!(e.to_string().contains("gc-controllr"), "{e}");
    }
}
