//! `tephra job|cronjob|jobflow|queue|pg|cluster`: vcctl's commands and flags where vcctl has them (karmadactl's
//! words for the fleet), with kubectl's habits: `KUBECONFIG`, `--kubeconfig`, `--context`,
//! `-n/--namespace`, `-A`, `-o wide|yaml|json|name`, aligned tables, and exit codes a script
//! can test ([`CliError`]).
//!
//! | file | owns |
//! | --- | --- |
//! | `print.rs` | tables, `-o` formats, errors and exit codes |
//! | `queue.rs` | `tephra queue` |
//! | `job.rs` | `tephra job` |
//! | `cronjob.rs` | `tephra cronjob` |
//! | `jobflow.rs` | `tephra jobflow` |
//! | `pg.rs` | `tephra pg` |
//! | `cluster.rs` | `tephra cluster` |

pub mod cluster;
pub mod cronjob;
pub mod job;
pub mod jobflow;
pub mod pg;
pub mod print;
pub mod queue;

use clap::Args;

pub use print::{CliError, Output};

use crate::runtime;

/// Where a command looks: the API server, the namespace, and how to print.
#[derive(Args, Debug)]
pub struct Scope {
    #[command(flatten)]
    pub connection: runtime::Connection,
    /// Namespace (default: `default`).
    #[arg(short = 'n', long, default_value = "default", global = true)]
    pub namespace: String,
    /// Every namespace.
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
    /// Output format: a table (default), `wide`, `yaml`, `json` or `name`.
    #[arg(short = 'o', long, value_enum, global = true)]
    pub output: Option<Output>,
}

/// Where cluster-scoped commands look, and how they print.
#[derive(Args, Debug)]
pub struct ClusterScope {
    #[command(flatten)]
    pub connection: runtime::Connection,
    /// Output format: a table (default), `wide`, `yaml`, `json` or `name`.
    #[arg(short = 'o', long, value_enum, global = true)]
    pub output: Option<Output>,
}

/// Asks a controller to act on an object through the Command CRD, as vcctl does: `action` for
/// the object `kind` (`api_version`) named `name` with `uid`, in namespace `ns`.
pub async fn bus_command(
    client: &kube::Client,
    ns: &str,
    target: (&str, &str, &str, String),
    action: &str,
) -> anyhow::Result<()> {
    let (api_version, kind, name, uid) = target;
    let mut c = tephra_api::Command::default();
    c.metadata.generate_name = Some(format!("{name}-{}-", action.to_lowercase()));
    c.metadata.namespace = Some(ns.into());
    c.fields.action = Some(action.into());
    c.fields.target = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid,
            controller: Some(true),
            block_owner_deletion: None,
        },
    );
    kube::Api::<tephra_api::Command>::namespaced(client.clone(), ns)
        .create(&kube::api::PostParams::default(), &c)
        .await
        .map_err(|e| {
            CliError::api(
                &format!("command {action} for {} {name}", kind.to_lowercase()),
                e,
            )
        })?;
    Ok(())
}

/// Prints the objects of one kind: every one (`name` None, a failure naming `plural`) or the
/// one named (a failure naming `singular`), through the kind's listing.
pub async fn show<K>(
    api: &kube::Api<K>,
    name: Option<&str>,
    (plural, singular): (&str, &str),
    output: Option<Output>,
    listing: impl for<'a> Fn(&'a [K], bool) -> print::Listing<'a, K>,
) -> anyhow::Result<()>
where
    K: Clone + std::fmt::Debug + serde::de::DeserializeOwned + serde::Serialize,
{
    let items = match name {
        None => {
            api.list(&kube::api::ListParams::default())
                .await
                .map_err(|e| CliError::api(plural, e))?
                .items
        }
        Some(n) => vec![
            api.get(n)
                .await
                .map_err(|e| CliError::api(&format!("{singular} {n}"), e))?,
        ],
    };
    print!("{}", listing(&items, name.is_some()).render(output)?);
    Ok(())
}

/// Runs an async command on a small runtime.
pub fn block_on<F: std::future::Future<Output = anyhow::Result<()>>>(f: F) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)?
        .block_on(f)
}
