//! `tephra pg list|get`: PodGroups with their phase, minimum, counts and queue; `-o wide` adds
//! the scheduler's last reason for a gang that waits.

use clap::{Args, Subcommand};
use kube::api::{Api, ListParams};
use tephra_api::PodGroup;
use tephra_api::scheduling::PodGroupConditionType;

use super::print::{CliError, Listing};
use super::{Scope, block_on};

/// The pg flags.
#[derive(Args, Debug)]
pub struct Flags {
    #[command(subcommand)]
    command: Verb,
    #[command(flatten)]
    scope: Scope,
}

#[derive(Subcommand, Debug)]
enum Verb {
    /// List PodGroups.
    List,
    /// Show one PodGroup.
    Get {
        /// Its name.
        name: String,
    },
}

fn listing(groups: &[PodGroup], all: bool, single: bool) -> Listing<'_, PodGroup> {
    let rows = groups
        .iter()
        .map(|g| {
            let s = g.status.clone().unwrap_or_default();
            let why = s
                .conditions
                .iter()
                .rev()
                .find(|c| c.type_ == PodGroupConditionType::Unschedulable && c.status == "True")
                .map(|c| c.message.clone().unwrap_or_default())
                .unwrap_or_default();
            let mut row = Vec::new();
            if all {
                row.push(g.metadata.namespace.clone().unwrap_or_default());
            }
            row.extend([
                g.metadata.name.clone().unwrap_or_default(),
                s.phase
                    .map_or_else(|| "Pending".into(), |p| format!("{p:?}")),
                g.spec.min_member.unwrap_or(1).to_string(),
                s.running.to_string(),
                s.succeeded.to_string(),
                s.failed.to_string(),
                g.spec.queue.clone(),
                why,
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
        "STATUS",
        "MINMEMBER",
        "RUNNING",
        "SUCCEEDED",
        "FAILED",
        "QUEUE",
        "REASON",
    ]);
    Listing {
        kind: "podgroup.scheduling.volcano.sh",
        items: groups,
        names: groups
            .iter()
            .filter_map(|g| g.metadata.name.clone())
            .collect(),
        headers,
        rows,
        wide: 1,
        single,
    }
}

/// Runs `tephra pg`.
pub fn run(f: Flags) -> anyhow::Result<()> {
    block_on(async move {
        let scope = f.scope;
        let client = scope.connection.client().await?;
        let ns = scope.namespace.clone();
        match f.command {
            Verb::List => {
                let api: Api<PodGroup> = if scope.all_namespaces {
                    Api::all(client)
                } else {
                    Api::namespaced(client, &ns)
                };
                let list = api
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| CliError::api("podgroups", e))?;
                print!(
                    "{}",
                    listing(&list.items, scope.all_namespaces, false).render(scope.output)?
                );
            }
            Verb::Get { name } => {
                let g = Api::<PodGroup>::namespaced(client, &ns)
                    .get(&name)
                    .await
                    .map_err(|e| CliError::api(&format!("podgroup {ns}/{name}"), e))?;
                print!("{}", listing(&[g], false, true).render(scope.output)?);
            }
        }
        Ok(())
    })
}
