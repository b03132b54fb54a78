//! The tephra binary. Subcommands land as their features do; see README.md.

mod cli;
mod controller_manager;
mod crds;
mod dev;
mod extender;
mod runtime;
mod scheduler;
mod sim;
mod validate;

/// mimalloc rather than glibc's allocator: the scheduler allocates and frees a pod's worth of
/// small objects for every watch event, and glibc's malloc, free and page clearing were a fifth
/// to a third of its CPU in the end-to-end bench.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "tephra",
    version,
    about = "A Volcano-style multi-cluster batch scheduler"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print every CRD tephra serves as YAML, or write one file per CRD into a directory.
    Crds {
        /// Write `<group>_<plural>.yaml` files into this directory instead of printing.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Simulate a multi-cluster fleet running a workload, with the real scheduler: prints a
    /// summary and writes report.json, events.jsonl and charts.
    Sim {
        /// The scenario file (see README, "Simulator").
        scenario: PathBuf,
        /// Where to write report.json, events.jsonl and the charts.
        #[arg(long, default_value = "sim-out")]
        out: PathBuf,
        /// Seed of every random choice (overrides run.seed).
        #[arg(long)]
        seed: Option<u64>,
        /// Stop at this simulated time, e.g. 6h (overrides run.until).
        #[arg(long)]
        until: Option<String>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
        /// Refuse a scheduler config that names Volcano plugins tephra does not implement,
        /// instead of loading them with a warning and no effect.
        #[arg(long)]
        strict_config: bool,
        /// Print the history of one job (`namespace/name`): submission, every new reason it
        /// waited for, binds, evictions and completion.
        #[arg(long, value_name = "JOB")]
        explain: Option<String>,
        /// Measure expected start times: at most once per this much simulated time (e.g.
        /// `10m`), forecast every waiting job with the scheduler core run forward, and report
        /// the error against when each really started (`report.json`'s `eta`).
        #[arg(long, value_name = "DURATION")]
        eta_every: Option<String>,
        /// With --eta-every: give the forecast each pod's run time off by up to this share,
        /// either way (0.5: ±50 %), fixed per pod.
        #[arg(long, default_value_t = 0.0)]
        eta_noise: f64,
    },
    /// Start a Kubernetes API server per member cluster of a fleet, with simulated kubelets, and
    /// a control plane with tephra's CRDs and queues; write a kubeconfig and serve until Ctrl-C.
    Dev {
        /// A simulator scenario whose fleet, queues and podStartDelay to use (default: a
        /// built-in fleet of three members with GPU and CPU pools).
        scenario: Option<PathBuf>,
        /// Where to write the kubeconfig (default: tephra-dev/kubeconfig in the temp directory).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Serve the control plane on this port and the members on the next ones (default:
        /// free ports).
        #[arg(long)]
        port: Option<u16>,
        /// Run simulated time this many times faster than the wall clock.
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
        /// Serve the API only: do not run the scheduler inside.
        #[arg(long)]
        no_scheduler: bool,
        /// Where to write the log (default: tephra-dev.log beside the kubeconfig; `-` for
        /// stderr), so that the terminal stays the user's kubectl's.
        #[arg(long)]
        log: Option<PathBuf>,
    },
    /// Run the scheduler against a Kubernetes cluster: watch PodGroups, Queues, Nodes and
    /// Pods, gang-schedule every period and bind (a drop-in for vc-scheduler).
    Scheduler(Box<scheduler::Flags>),
    /// Run the controllers (the Volcano job lifecycle) against a cluster.
    ControllerManager(controller_manager::Flags),
    /// Serve kube-scheduler's extender verbs for a member that keeps its own kube-scheduler:
    /// tephra's planned nodes, and gangs bound all or nothing.
    Extender(extender::Flags),
    /// Volcano Jobs: run, list, view (why a job waits), suspend, resume, delete.
    Job(cli::job::Flags),
    /// Volcano CronJobs: list, get, suspend, resume, delete.
    Cronjob(cli::cronjob::Flags),
    /// Volcano JobFlows: list, get, describe (each step's Job), delete.
    Jobflow(cli::jobflow::Flags),
    /// Queues: create, list, get, operate (open, close, update, delete).
    Queue(cli::queue::Flags),
    /// PodGroups: list, get.
    Pg(cli::pg::Flags),
    /// Member clusters: list, get, taint, untaint, join, rotate, unjoin.
    Cluster(cli::cluster::Flags),
    /// Check manifests offline, as a kube-apiserver with tephra's CRDs would at admission:
    /// schema, defaults and CEL rules. Kinds tephra does not serve are skipped.
    Validate {
        /// YAML files, each with one or more documents.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crds { out } => crds::run(out.as_deref()),
        Command::Validate { files } => validate::run(&files),
        Command::Scheduler(flags) => scheduler::run(*flags),
        Command::ControllerManager(flags) => controller_manager::run(flags),
        Command::Extender(flags) => extender::run(flags),
        Command::Job(flags) => cli::job::run(flags),
        Command::Cronjob(flags) => cli::cronjob::run(flags),
        Command::Jobflow(flags) => cli::jobflow::run(flags),
        Command::Queue(flags) => cli::queue::run(flags),
        Command::Pg(flags) => cli::pg::run(flags),
        Command::Cluster(flags) => cli::cluster::run(flags),
        Command::Dev {
            scenario,
            kubeconfig,
            port,
            speed,
            no_scheduler,
            log,
        } => dev::run(&dev::Settings {
            scenario: scenario.as_deref(),
            kubeconfig: kubeconfig.as_deref(),
            log: log.as_deref(),
            port,
            speed,
            scheduler: !no_scheduler,
        }),
        Command::Sim {
            scenario,
            out,
            seed,
            until,
            quiet,
            strict_config,
            explain,
            eta_every,
            eta_noise,
        } => sim::run(
            &scenario,
            &out,
            sim::Flags {
                seed,
                until: until.as_deref(),
                quiet,
                strict_config,
                explain: explain.as_deref(),
                eta_every: eta_every.as_deref(),
                eta_noise,
            },
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            match err.downcast_ref::<cli::CliError>() {
                Some(e) => ExitCode::from(e.code()),
                None => ExitCode::FAILURE,
            }
        }
    }
}
