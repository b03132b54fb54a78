//! `tephra cronjob list|get|suspend|resume|delete`: Volcano's CronJobs, listed with kubectl's
//! CronJob columns; suspend and resume set `spec.suspend` (vcctl has no CronJob command, and
//! kubectl suspends a CronJob the same way).

use clap::{Args, Subcommand};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use tephra_api::cronjob::CronJob;

use super::print::{CliError, Listing, age};
use super::{Scope, block_on};

/// The cronjob command's flags.
#[derive(Args, Debug)]
pub struct Flags {
    #[command(subcommand)]
    command: Verb,
    #[command(flatten)]
    scope: Scope,
}

#[derive(Subcommand, Debug)]
enum Verb {
    /// List CronJobs.
    List,
    /// Show one CronJob.
    Get {
        /// The CronJob's name.
        #[arg(short = 'N', long)]
        name: String,
    },
    /// Stop a CronJob making Jobs (`spec.suspend: true`); those running go on.
    Suspend {
        /// The CronJob's name.
        #[arg(short = 'N', long)]
        name: String,
    },
    /// Let a suspended CronJob make Jobs again.
    Resume {
        /// The CronJob's name.
        #[arg(short = 'N', long)]
        name: String,
    },
    /// Delete a CronJob and the Jobs it made.
    Delete {
        /// The CronJob's name.
        #[arg(short = 'N', long)]
        name: String,
    },
}

/// The table of `crons`, as kubectl prints CronJobs (`-o wide` adds the Jobs' tasks).
pub fn listing(crons: &[CronJob], all: bool, single: bool, now: i64) -> Listing<'_, CronJob> {
    let rows = crons
        .iter()
        .map(|c| {
            let s = c.status.clone().unwrap_or_default();
            let mut row = Vec::new();
            if all {
                row.push(c.metadata.namespace.clone().unwrap_or_default());
            }
            let tasks = c
                .spec
                .job_template
                .spec
                .as_ref()
                .map(|j| {
                    j.tasks
                        .iter()
                        .map(|t| t.name.clone().unwrap_or_default())
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            row.extend([
                c.metadata.name.clone().unwrap_or_default(),
                c.spec.schedule.clone(),
                c.spec.time_zone.clone().unwrap_or_else(|| "<none>".into()),
                if c.spec.suspend { "True" } else { "False" }.to_string(),
                s.active.len().to_string(),
                s.last_schedule_time
                    .as_ref()
                    .map_or_else(|| "<none>".into(), |t| age(t.0.as_second(), now)),
                c.metadata
                    .creation_timestamp
                    .as_ref()
                    .map_or_else(|| "<unknown>".into(), |t| age(t.0.as_second(), now)),
                tasks,
            ]);
            row
        })
        .collect();
    let mut headers = Vec::new();
    if all {
        headers.push("NAMESPACE");
    }
    headers.extend([
        "NAME",
        "SCHEDULE",
        "TIMEZONE",
        "SUSPEND",
        "ACTIVE",
        "LAST SCHEDULE",
        "AGE",
        "TASKS",
    ]);
    Listing {
        kind: "cronjob.batch.volcano.sh",
        items: crons,
        names: crons
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect(),
        headers,
        rows,
        wide: 1,
        single,
    }
}

/// Runs `tephra cronjob`.
pub fn run(f: Flags) -> anyhow::Result<()> {
    block_on(async move {
        let scope = f.scope;
        let client = scope.connection.client().await?;
        let ns = scope.namespace.clone();
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        let api: Api<CronJob> = Api::namespaced(client.clone(), &ns);
        let what = |name: &str| format!("cronjob {ns}/{name}");
        match f.command {
            Verb::List => {
                let all: Api<CronJob> = if scope.all_namespaces {
                    Api::all(client.clone())
                } else {
                    api.clone()
                };
                let list = all
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| CliError::api("cronjobs", e))?
                    .items;
                print!(
                    "{}",
                    listing(&list, scope.all_namespaces, false, now).render(scope.output)?
                );
            }
            Verb::Get { name } => {
                let c = api
                    .get(&name)
                    .await
                    .map_err(|e| CliError::api(&what(&name), e))?;
                let one = [c];
                print!("{}", listing(&one, false, true, now).render(scope.output)?);
            }
            Verb::Suspend { name } => suspend(&api, &name, true, &what(&name)).await?,
            Verb::Resume { name } => suspend(&api, &name, false, &what(&name)).await?,
            Verb::Delete { name } => {
                api.delete(&name, &DeleteParams::background())
                    .await
                    .map_err(|e| CliError::api(&what(&name), e))?;
                println!("cronjob.batch.volcano.sh/{name} deleted");
            }
        }
        Ok(())
    })
}

/// Sets `spec.suspend` of CronJob `name`.
async fn suspend(api: &Api<CronJob>, name: &str, suspend: bool, what: &str) -> anyhow::Result<()> {
    let patch = serde_json::json!({"spec": {"suspend": suspend}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| CliError::api(what, e))?;
    let done = if suspend { "suspended" } else { "resumed" };
    println!("cronjob.batch.volcano.sh/{name} {done}");
    Ok(())
}
