//! `tephra cluster list|get|taint|untaint`, in karmadactl's words: member Clusters with their
//! version, sync mode and readiness; taints as kubectl writes them (`key[=value]:Effect`, and
//! `key:Effect-` or `key-` to remove).

use clap::{Args, Subcommand};
use k8s_openapi::api::core::v1::Taint;
use kube::api::{Api, Patch, PatchParams};
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
    /// Join a member (karmadactl's `join`, Push mode): its API endpoint and CA from its
    /// kubeconfig, its token into a Secret, and a Cluster object naming both.
    Join {
        /// The member's name on the control plane.
        name: String,
        /// The member's kubeconfig.
        #[arg(long)]
        cluster_kubeconfig: std::path::PathBuf,
        /// The context in it (default: its current context).
        #[arg(long)]
        cluster_context: Option<String>,
        /// Where the member's Secret goes on the control plane.
        #[arg(long, default_value = "tephra-cluster")]
        cluster_namespace: String,
        /// Cloud provider.
        #[arg(long)]
        cluster_provider: Option<String>,
        /// Region.
        #[arg(long)]
        cluster_region: Option<String>,
        /// Zones, comma separated.
        #[arg(long, value_delimiter = ',')]
        cluster_zones: Vec<String>,
        /// `Direct` (tephra binds) or `Extender` (the member's kube-scheduler binds through
        /// `tephra extender`).
        #[arg(long, default_value = "Direct")]
        binding_mode: String,
    },
    /// A rebuilt member, or new credentials for one: write the token and CA of its kubeconfig
    /// into the Secret its Cluster names (and its server into `spec.apiEndpoint`). The
    /// scheduler and the controller-manager use them at once.
    Rotate {
        /// The member's name on the control plane.
        name: String,
        /// The member's kubeconfig.
        #[arg(long)]
        cluster_kubeconfig: std::path::PathBuf,
        /// The context in it (default: its current context).
        #[arg(long)]
        cluster_context: Option<String>,
    },
    /// Remove a member: its Cluster object and the Secret it names.
    Unjoin {
        /// The member's name.
        name: String,
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

/// What joining needs from a member's kubeconfig.
struct Member {
    server: String,
    ca: Option<Vec<u8>>,
    insecure: bool,
    token: String,
}

impl Member {
    fn read(path: &std::path::Path, context: Option<&str>) -> Result<Self, CliError> {
        let at = path.display();
        let kc = kube::config::Kubeconfig::read_from(path)
            .map_err(|e| CliError::Other(format!("--cluster-kubeconfig {at}: {e}")))?;
        let ctx_name = context
            .map(str::to_string)
            .or(kc.current_context.clone())
            .ok_or_else(|| {
                CliError::Other(format!("{at}: no current context; pass --cluster-context"))
            })?;
        let ctx = kc
            .contexts
            .iter()
            .find(|c| c.name == ctx_name)
            .and_then(|c| c.context.clone())
            .ok_or_else(|| CliError::Other(format!("{at}: no context {ctx_name:?}")))?;
        let cluster = kc
            .clusters
            .iter()
            .find(|c| c.name == ctx.cluster)
            .and_then(|c| c.cluster.clone())
            .ok_or_else(|| CliError::Other(format!("{at}: no cluster {:?}", ctx.cluster)))?;
        let user = ctx
            .user
            .as_ref()
            .and_then(|u| kc.auth_infos.iter().find(|a| &a.name == u))
            .and_then(|a| a.auth_info.clone())
            .unwrap_or_default();
        // The token, as the kubeconfig has it (kube keeps it secret in memory).
        let written = serde_json::to_value(&user).unwrap_or_default();
        let token = match (written["token"].as_str(), &user.token_file) {
            (Some(t), _) => t.to_string(),
            (None, Some(file)) => std::fs::read_to_string(file)
                .map_err(|e| CliError::Other(format!("{at}: token file {file}: {e}")))?
                .trim()
                .to_string(),
            (None, None) => {
                return Err(CliError::Other(format!(
                    "{at}: context {ctx_name:?} authenticates without a bearer token; tephra reaches \
                     members with a token (give the member a ServiceAccount token)"
                )));
            }
        };
        let ca =
            match (
                &cluster.certificate_authority_data,
                &cluster.certificate_authority,
            ) {
                (Some(d), _) => Some(b64_decode(d).map_err(|e| {
                    CliError::Other(format!("{at}: certificate-authority-data: {e}"))
                })?),
                (None, Some(file)) => Some(std::fs::read(file).map_err(|e| {
                    CliError::Other(format!("{at}: certificate-authority {file}: {e}"))
                })?),
                (None, None) => None,
            };
        Ok(Self {
            server: cluster.server.ok_or_else(|| {
                CliError::Other(format!("{at}: cluster {:?} has no server", ctx.cluster))
            })?,
            ca,
            insecure: cluster.insecure_skip_tls_verify.unwrap_or(false),
            token,
        })
    }
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn b64_decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text.trim())
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
                super::show(&api, None, ("clusters", "cluster"), f.scope.output, listing).await?;
            }
            Verb::Get { name } => {
                let labels = ("clusters", "cluster");
                super::show(&api, Some(&name), labels, f.scope.output, listing).await?;
            }
            Verb::Join {
                name,
                cluster_kubeconfig,
                cluster_context,
                cluster_namespace,
                cluster_provider,
                cluster_region,
                cluster_zones,
                binding_mode,
            } => {
                let member = Member::read(&cluster_kubeconfig, cluster_context.as_deref())?;
                if !["Direct", "Extender"].contains(&binding_mode.as_str()) {
                    return Err(CliError::Other(format!(
                        "--binding-mode {binding_mode:?}: Direct or Extender"
                    ))
                    .into());
                }
                let what = format!("cluster {name}");
                if api
                    .get_opt(&name)
                    .await
                    .map_err(|e| CliError::api(&what, e))?
                    .is_some()
                {
                    return Err(CliError::Conflict(format!("{what} has already joined")).into());
                }
                let client = api.clone().into_client();
                let namespaces: Api<k8s_openapi::api::core::v1::Namespace> =
                    Api::all(client.clone());
                let ns: k8s_openapi::api::core::v1::Namespace =
                    serde_json::from_value(json!({"metadata": {"name": cluster_namespace}}))?;
                match namespaces.create(&Default::default(), &ns).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => {
                        return Err(
                            CliError::api(&format!("namespace {cluster_namespace}"), e).into()
                        );
                    }
                }
                let mut data = serde_json::Map::new();
                data.insert("token".into(), json!(b64(member.token.as_bytes())));
                if let Some(ca) = &member.ca {
                    data.insert("caBundle".into(), json!(b64(ca)));
                }
                let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
                    "metadata": {"name": name, "namespace": cluster_namespace},
                    "type": "Opaque", "data": data
                }))?;
                let secrets: Api<k8s_openapi::api::core::v1::Secret> =
                    Api::namespaced(client, &cluster_namespace);
                match secrets.create(&Default::default(), &secret).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {
                        secrets
                            .replace(&name, &Default::default(), &secret)
                            .await
                            .map_err(|e| {
                                CliError::api(&format!("secret {cluster_namespace}/{name}"), e)
                            })?;
                    }
                    Err(e) => {
                        return Err(CliError::api(
                            &format!("secret {cluster_namespace}/{name}"),
                            e,
                        )
                        .into());
                    }
                }
                let mut spec = json!({
                    "syncMode": "Push", "apiEndpoint": member.server,
                    "secretRef": {"namespace": cluster_namespace, "name": name},
                    "bindingMode": binding_mode,
                });
                if member.insecure {
                    spec["insecureSkipTLSVerification"] = json!(true);
                }
                if let Some(p) = cluster_provider {
                    spec["provider"] = json!(p);
                }
                if let Some(r) = cluster_region {
                    spec["region"] = json!(r);
                }
                if !cluster_zones.is_empty() {
                    spec["zones"] = json!(cluster_zones);
                }
                let cluster: Cluster = serde_json::from_value(json!({
                    "apiVersion": "cluster.tephra.io/v1alpha1", "kind": "Cluster",
                    "metadata": {"name": name}, "spec": spec
                }))?;
                api.create(&Default::default(), &cluster)
                    .await
                    .map_err(|e| CliError::api(&what, e))?;
                println!(
                    "cluster.cluster.tephra.io/{name} joined ({})",
                    member.server
                );
            }
            Verb::Rotate {
                name,
                cluster_kubeconfig,
                cluster_context,
            } => {
                let member = Member::read(&cluster_kubeconfig, cluster_context.as_deref())?;
                let what = format!("cluster {name}");
                let c = api.get(&name).await.map_err(|e| CliError::api(&what, e))?;
                let Some(r) = c.spec.secret_ref.clone() else {
                    return Err(CliError::Other(format!(
                        "{what}: spec.secretRef: none to rotate (a Pull-mode member)"
                    ))
                    .into());
                };
                let mut data = serde_json::Map::new();
                data.insert("token".into(), json!(b64(member.token.as_bytes())));
                data.insert(
                    "caBundle".into(),
                    member
                        .ca
                        .as_ref()
                        .map_or(serde_json::Value::Null, |ca| json!(b64(ca))),
                );
                let secrets: Api<k8s_openapi::api::core::v1::Secret> =
                    Api::namespaced(api.clone().into_client(), &r.namespace);
                let secret_what = format!("secret {}/{}", r.namespace, r.name);
                secrets
                    .patch(
                        &r.name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"data": data})),
                    )
                    .await
                    .map_err(|e| CliError::api(&secret_what, e))?;
                if c.spec.api_endpoint.as_deref() != Some(member.server.as_str()) {
                    api.patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"apiEndpoint": member.server}})),
                    )
                    .await
                    .map_err(|e| CliError::api(&what, e))?;
                }
                println!(
                    "cluster.cluster.tephra.io/{name} credentials rotated ({})",
                    member.server
                );
            }
            Verb::Unjoin { name } => {
                let what = format!("cluster {name}");
                let c = api.get(&name).await.map_err(|e| CliError::api(&what, e))?;
                api.delete(&name, &Default::default())
                    .await
                    .map_err(|e| CliError::api(&what, e))?;
                if let Some(r) = &c.spec.secret_ref {
                    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
                        Api::namespaced(api.clone().into_client(), &r.namespace);
                    match secrets.delete(&r.name, &Default::default()).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(e) => {
                            return Err(CliError::api(
                                &format!("secret {}/{}", r.namespace, r.name),
                                e,
                            )
                            .into());
                        }
                    }
                }
                println!("cluster.cluster.tephra.io/{name} unjoined");
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
