//! `tephra jobflow list|get|describe|delete`, as vcctl's `jobflow` commands (`-N/--name`,
//! `-n/--namespace`, `--all-namespaces` as `-A`): the flows with their phase, and `describe`
//! with each flow step's Job and what it waits for.

use clap::{Args, Subcommand};
use kube::api::{Api, DeleteParams, ListParams};
use tephra_api::Job;
use tephra_api::flow::{CREATED_BY_FLOW, JobFlow, job_name};

use super::print::{CliError, Listing, age, table};
use super::{Scope, block_on};

/// The jobflow command's flags.
#[derive(Args, Debug)]
pub struct Flags {
    #[command(subcommand)]
    command: Verb,
    #[command(flatten)]
    scope: Scope,
}

#[derive(Subcommand, Debug)]
enum Verb {
    /// List JobFlows.
    List,
    /// Show one JobFlow.
    Get {
        /// The JobFlow's name.
        #[arg(short = 'N', long)]
        name: String,
    },
    /// Show one JobFlow's steps: each Job, its phase, and the steps it waits for.
    Describe {
        /// The JobFlow's name.
        #[arg(short = 'N', long)]
        name: String,
    },
    /// Delete a JobFlow and the Jobs it made.
    Delete {
        /// The JobFlow's name.
        #[arg(short = 'N', long)]
        name: String,
    },
}

fn phase(f: &JobFlow) -> String {
    f.status
        .as_ref()
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.phase)
        .map_or_else(|| "Pending".into(), |p| format!("{p:?}"))
}

/// The table of `flows`: name, phase, the Jobs by phase, age.
pub fn listing(flows: &[JobFlow], all: bool, single: bool, now: i64) -> Listing<'_, JobFlow> {
    let rows = flows
        .iter()
        .map(|f| {
            let s = f.status.clone().unwrap_or_default();
            let mut row = Vec::new();
            if all {
                row.push(f.metadata.namespace.clone().unwrap_or_default());
            }
            row.extend([
                f.metadata.name.clone().unwrap_or_default(),
                phase(f),
                format!("{}/{}", s.completed_jobs.len(), f.spec.flows.len()),
                f.metadata
                    .creation_timestamp
                    .as_ref()
                    .map_or_else(|| "<unknown>".into(), |t| age(t.0.as_second(), now)),
                s.running_jobs.len().to_string(),
                s.failed_jobs.len().to_string(),
            ]);
            row
        })
        .collect();
    let mut headers = Vec::new();
    if all {
        headers.push("NAMESPACE");
    }
    headers.extend(["NAME", "PHASE", "COMPLETED", "AGE", "RUNNING", "FAILED"]);
    Listing {
        kind: "jobflow.flow.volcano.sh",
        items: flows,
        names: flows
            .iter()
            .filter_map(|f| f.metadata.name.clone())
            .collect(),
        headers,
        rows,
        wide: 2,
        single,
    }
}

/// Each step of `flow`: the step, its Job, the Job's phase (or what it waits for), and its
/// targets.
pub fn steps(flow: &JobFlow, jobs: &[Job]) -> String {
    let name = flow.metadata.name.clone().unwrap_or_default();
    let rows: Vec<Vec<String>> = flow
        .spec
        .flows
        .iter()
        .map(|step| {
            let job = job_name(&name, &step.name);
            let made = jobs
                .iter()
                .find(|j| j.metadata.name.as_deref() == Some(job.as_str()));
            let targets = step
                .depends_on
                .as_ref()
                .map(|d| d.targets.join(","))
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| "<none>".into());
            let state = match made {
                Some(j) => j
                    .status
                    .as_ref()
                    .and_then(|s| s.state.phase)
                    .map_or_else(|| "Pending".into(), |p| format!("{p:?}")),
                None => "NotCreated".into(),
            };
            vec![step.name.clone(), job, state, targets]
        })
        .collect();
    table(&["STEP", "JOB", "JOB PHASE", "DEPENDS ON"], &rows)
}

/// Runs `tephra jobflow`.
pub fn run(f: Flags) -> anyhow::Result<()> {
    block_on(async move {
        let scope = f.scope;
        let client = scope.connection.client().await?;
        let ns = scope.namespace.clone();
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        let api: Api<JobFlow> = Api::namespaced(client.clone(), &ns);
        let what = |name: &str| format!("jobflow {ns}/{name}");
        match f.command {
            Verb::List => {
                let all: Api<JobFlow> = if scope.all_namespaces {
                    Api::all(client.clone())
                } else {
                    api.clone()
                };
                let list = all
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| CliError::api("jobflows", e))?
                    .items;
                print!(
                    "{}",
                    listing(&list, scope.all_namespaces, false, now).render(scope.output)?
                );
            }
            Verb::Get { name } => {
                let flow = api
                    .get(&name)
                    .await
                    .map_err(|e| CliError::api(&what(&name), e))?;
                let one = [flow];
                print!("{}", listing(&one, false, true, now).render(scope.output)?);
            }
            Verb::Describe { name } => {
                let flow = api
                    .get(&name)
                    .await
                    .map_err(|e| CliError::api(&what(&name), e))?;
                let jobs = Api::<Job>::namespaced(client.clone(), &ns)
                    .list(
                        &ListParams::default().labels(&format!("{}={ns}.{name}", CREATED_BY_FLOW)),
                    )
                    .await
                    .map_err(|e| CliError::api("jobs", e))?
                    .items;
                let one = [flow];
                print!(
                    "{}",
                    listing(&one, false, true, now).render(Some(super::Output::Wide))?
                );
                println!();
                print!("{}", steps(&one[0], &jobs));
            }
            Verb::Delete { name } => {
                api.delete(&name, &DeleteParams::background())
                    .await
                    .map_err(|e| CliError::api(&what(&name), e))?;
                println!("jobflow.flow.volcano.sh/{name} deleted");
            }
        }
        Ok(())
    })
}
