//! The tephra binary. Subcommands land as their features do; see README.md.

mod crds;
mod sim;
mod validate;

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
    },
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
        Command::Sim {
            scenario,
            out,
            seed,
            until,
            quiet,
        } => sim::run(&scenario, &out, seed, until.as_deref(), quiet),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
