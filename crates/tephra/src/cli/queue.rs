//! `tephra queue create|list|get|operate`, with vcctl's flags (`-n/--name`, `-w/--weight`,
//! `-a/--action`); opening and closing go through the Command CRD, as vcctl does, for the queue
//! controller to carry out.

use clap::{Args, Subcommand};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tephra_api::Queue;

use super::block_on;
use super::print::{CliError, Listing};

/// The queue's flags.
#[derive(Args, Debug)]
pub struct Flags {
    #[command(subcommand)]
    command: Verb,
    #[command(flatten)]
    scope: super::ClusterScope,
}

#[derive(Subcommand, Debug)]
enum Verb {
    /// Create a queue.
    Create {
        /// The queue's name.
        #[arg(short = 'n', long)]
        name: String,
        /// Its weight.
        #[arg(short = 'w', long, default_value_t = 1)]
        weight: i32,
        /// Its parent queue (hierarchical queues).
        #[arg(short = 'p', long)]
        parent: Option<String>,
    },
    /// List queues with their PodGroup counts.
    List,
    /// Show one queue.
    Get {
        /// The queue's name.
        #[arg(short = 'n', long)]
        name: String,
    },
    /// Open, close, update the weight of, or delete a queue.
    Operate {
        /// The queue's name.
        #[arg(short = 'n', long)]
        name: String,
        /// open, close, update or delete.
        #[arg(short = 'a', long)]
        action: String,
        /// The new weight (update).
        #[arg(short = 'w', long)]
        weight: Option<i32>,
    },
}

/// The PARENT column: a queue without one hangs under `root`, as vcctl prints it, except
/// `root` itself, which has none (`-`).
fn parent_of(q: &Queue) -> String {
    match (&q.spec.parent, q.metadata.name.as_deref()) {
        (Some(p), _) if !p.is_empty() => p.clone(),
        (_, Some(tephra_api::defaults::ROOT_QUEUE)) => "-".into(),
        _ => "root".into(),
    }
}

fn listing(queues: &[Queue], single: bool) -> Listing<'_, Queue> {
    let rows = queues
        .iter()
        .map(|q| {
            let s = q.status.clone().unwrap_or_default();
            vec![
                q.metadata.name.clone().unwrap_or_default(),
                q.spec.weight.to_string(),
                s.state
                    .map(|s| format!("{s:?}"))
                    .unwrap_or_else(|| "Open".into()),
                parent_of(q),
                s.inqueue.to_string(),
                s.pending.to_string(),
                s.running.to_string(),
                s.unknown.to_string(),
                s.completed.to_string(),
                q.spec.reclaimable.unwrap_or(true).to_string(),
                q.spec.priority.unwrap_or(0).to_string(),
            ]
        })
        .collect();
    Listing {
        kind: "queue.scheduling.volcano.sh",
        items: queues,
        names: queues
            .iter()
            .filter_map(|q| q.metadata.name.clone())
            .collect(),
        headers: vec![
            "NAME",
            "WEIGHT",
            "STATE",
            "PARENT",
            "INQUEUE",
            "PENDING",
            "RUNNING",
            "UNKNOWN",
            "COMPLETED",
            "RECLAIMABLE",
            "PRIORITY",
        ],
        rows,
        wide: 2,
        single,
    }
}

/// Runs `tephra queue`.
pub fn run(f: Flags) -> anyhow::Result<()> {
    block_on(async move {
        let client = f.scope.connection.client().await?;
        let queues: Api<Queue> = Api::all(client.clone());
        match f.command {
            Verb::Create {
                name,
                weight,
                parent,
            } => {
                let mut spec = json!({"weight": weight, "reclaimable": true});
                if let Some(p) = parent {
                    spec["parent"] = json!(p);
                }
                let q: Queue = serde_json::from_value(json!({
                    "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                    "metadata": {"name": name}, "spec": spec
                }))?;
                queues
                    .create(&PostParams::default(), &q)
                    .await
                    .map_err(|e| CliError::api(&format!("queue {name}"), e))?;
                println!("queue.scheduling.volcano.sh/{name} created");
            }
            Verb::List => {
                super::show(&queues, None, ("queues", "queue"), f.scope.output, listing).await?;
            }
            Verb::Get { name } => {
                let labels = ("queues", "queue");
                super::show(&queues, Some(&name), labels, f.scope.output, listing).await?;
            }
            Verb::Operate {
                name,
                action,
                weight,
            } => operate(&client, &queues, &name, &action, weight).await?,
        }
        Ok(())
    })
}

async fn operate(
    client: &kube::Client,
    queues: &Api<Queue>,
    name: &str,
    action: &str,
    weight: Option<i32>,
) -> anyhow::Result<()> {
    let what = format!("queue {name}");
    match action {
        "open" | "close" => {
            let q = queues
                .get(name)
                .await
                .map_err(|e| CliError::api(&what, e))?;
            let verb = if action == "open" {
                "OpenQueue"
            } else {
                "CloseQueue"
            };
            let uid = q.metadata.uid.clone().unwrap_or_default();
            let target = ("scheduling.volcano.sh/v1beta1", "Queue", name, uid);
            super::bus_command(client, "default", target, verb).await?;
            println!("queue.scheduling.volcano.sh/{name} {verb} requested");
        }
        "update" => {
            let w = weight.filter(|w| *w > 0).ok_or_else(|| {
                CliError::Other(format!(
                    "update {what}: --weight must be given and greater than 0"
                ))
            })?;
            queues
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"weight": w}})),
                )
                .await
                .map_err(|e| CliError::api(&what, e))?;
            println!("queue.scheduling.volcano.sh/{name} weight set to {w}");
        }
        "delete" => {
            queues
                .delete(name, &DeleteParams::default())
                .await
                .map_err(|e| CliError::api(&what, e))?;
            println!("queue.scheduling.volcano.sh/{name} deleted");
        }
        other => {
            return Err(CliError::Other(format!(
                "--action {other:?}: valid actions are open, close, update and delete"
            ))
            .into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(name: &str, parent: Option<&str>) -> Queue {
        let mut q = Queue::new(name, Default::default());
        q.spec.parent = parent.map(str::to_string);
        q
    }

    #[test]
    fn root_has_no_parent_and_a_queue_without_one_hangs_under_root() {
        assert_eq!(parent_of(&queue("root", None)), "-");
        assert_eq!(parent_of(&queue("research", None)), "root");
        assert_eq!(parent_of(&queue("research", Some(""))), "root");
        assert_eq!(parent_of(&queue("vision", Some("research"))), "research");
    }
}
