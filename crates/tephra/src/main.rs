//! The tephra binary. Subcommands land as their features do; see README.md.

mod crds;
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
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
