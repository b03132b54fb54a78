//! `tephra cluster list|get|taint|untaint`, in karmadactl's words: member Clusters with their
//! version, sync mode and readiness; taints as kubectl writes them (`key[=value]:Effect`, and
//! `key:Effect-` or `key-` to remove).

use clap::{Args, Subcommand};
use k8s_openapi::api::core::v1::Taint;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use tephra_api::Cluster;

use super::block_on;
use super::print::{CliError, Listing};

/// The cluster flags.
#[derive(Args, Debug)]
pub struct Flags {
    #[command(subcommand)]
    command: Verb,
    #[command(flatten)]
    scope: super::ClusterScope,
}

#[derive(Subcommand, Debug)]
enum Verb {
    /// List member clusters.
    List,
    /// Show one member cluster.
    Get {
        /// Its name.
        name: String,
    },
    /// Add or change taints: `key[=value]:Effect`.
    Taint {
        /// The cluster.
        name: String,
        /// Taints.
        #[arg(required = true)]
        taints: Vec<String>,
    },
    /// Remove taints: `key:Effect` or `key` (every effect).
    Untaint {
        /// The cluster.
        name: String,
        /// Taints.
        #[arg(required = true)]
        taints: Vec<String>,
    },
}

fn ready(c: &Cluster) -> String {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map_or_else(|| "Unknown".into(), |c| c.status.clone())
}

fn listing(clusters: &[Cluster], single: bool) -> Listing<'_, Cluster> {
    let rows = clusters
        .iter()
        .map(|c| {
            vec![
                c.metadata.name.clone().unwrap_or_default(),
                c.status
                    .as_ref()
                    .and_then(|s| s.kubernetes_version.clone())
                    .unwrap_or_default(),
                format!("{:?}", c.spec.sync_mode),
                ready(c),
                c.spec
                    .binding_mode
                    .map_or_else(|| "Direct".into(), |m| format!("{m:?}")),
                c.spec
                    .taints
                    .iter()
                    .map(|t| format!("{}:{}", t.key, t.effect))
                    .collect::<Vec<_>>()
                    .join(","),
            ]
        })
        .collect();
    Listing {
        kind: "cluster.cluster.tephra.io",
        items: clusters,
        names: clusters
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect(),
        headers: vec!["NAME", "VERSION", "MODE", "READY", "BINDING", "TAINTS"],
        rows,
        wide: 2,
        single,
    }
}

/// Parses `key[=value]:Effect` (or, to remove, `key[:Effect]`).
fn parse(text: &str, removing: bool) -> Result<(String, Option<String>, Option<String>), CliError> {
    let text = text.strip_suffix('-').unwrap_or(text);
    let (kv, effect) = match text.rsplit_once(':') {
        Some((kv, e)) => (kv, Some(e.to_string())),
        None if removing => (text, None),
        None => {
            return Err(CliError::Other(format!(
                "taint {text:?}: expected key[=value]:Effect"
            )));
        }
    };
    if let Some(e) = &effect
        && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&e.as_str())
    {
        return Err(CliError::Other(format!(
            "taint {text:?}: effect {e:?} is not NoSchedule, PreferNoSchedule or NoExecute"
        )));
    }
    let (key, value) = match kv.split_once('=') {
        Some((k, v)) => (k.to_string(), Some(v.to_string())),
        None => (kv.to_string(), None),
    };
    if key.is_empty() {
        return Err(CliError::Other(format!("taint {text:?}: the key is empty")));
    }
    Ok((key, value, effect))
}

/// Runs `tephra cluster`.
pub fn run(f: Flags) -> anyhow::Result<()> {
    block_on(async move {
        let client = f.scope.connection.client().await?;
        let api: Api<Cluster> = Api::all(client);
        let removing = matches!(f.command, Verb::Untaint { .. });
        match f.command {
            Verb::List => {
                let list = api
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| CliError::api("clusters", e))?;
                print!("{}", listing(&list.items, false).render(f.scope.output)?);
            }
            Verb::Get { name } => {
                let c = api
                    .get(&name)
                    .await
                    .map_err(|e| CliError::api(&format!("cluster {name}"), e))?;
                print!("{}", listing(&[c], true).render(f.scope.output)?);
            }
            Verb::Taint { name, taints } | Verb::Untaint { name, taints } => {
                let what = format!("cluster {name}");
                let c = api.get(&name).await.map_err(|e| CliError::api(&what, e))?;
                let mut list: Vec<Taint> = c.spec.taints.clone();
                for t in &taints {
                    let (key, value, effect) = parse(t, removing)?;
                    let same =
                        |x: &Taint| x.key == key && effect.as_ref().is_none_or(|e| *e == x.effect);
                    if removing {
                        if !list.iter().any(same) {
                            return Err(CliError::NotFound(format!("taint {t} on {what}")).into());
                        }
                        list.retain(|x| !same(x));
                    } else {
                        list.retain(|x| !same(x));
                        list.push(Taint {
                            key,
                            value,
                            effect: effect.unwrap_or_default(),
                            time_added: None,
                        });
                    }
                }
                api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"taints": list}})),
                )
                .await
                .map_err(|e| CliError::api(&what, e))?;
                println!(
                    "cluster.cluster.tephra.io/{name} {}",
                    if removing { "untainted" } else { "tainted" }
                );
            }
        }
        Ok(())
    })
}
