//! Member clusters from `Cluster` objects (Push mode, as Karmada's): a client built from the
//! Cluster's `apiEndpoint` and the token and CA bundle of the Secret its `secretRef` names, and
//! that member's Node and Pod watchers. Adding, changing or removing a Cluster starts, restarts
//! or stops them while the scheduler runs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use tephra_api::Cluster as ApiCluster;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

use crate::executor::Clients;
use crate::metrics::Metrics;
use crate::watch::{self, Change, Kind, Update};

/// How often a member is probed.
const PROBE_PERIOD: Duration = Duration::from_secs(1);

/// What a member's connection depends on: a change restarts its watchers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `spec.apiEndpoint`.
    pub url: String,
    /// `spec.secretRef` as `namespace/name`.
    pub secret: String,
    /// `spec.insecureSkipTLSVerification`.
    pub insecure: bool,
}

impl Endpoint {
    /// The endpoint of a Cluster, if it names one (Pull-mode clusters do not).
    pub fn of(c: &ApiCluster) -> Option<Self> {
        let r = c.spec.secret_ref.as_ref()?;
        Some(Self {
            url: c.spec.api_endpoint.clone()?,
            secret: format!("{}/{}", r.namespace, r.name),
            insecure: c.spec.insecure_skip_tls_verification,
        })
    }
}

/// Why a member cannot be reached.
#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    /// The Secret cannot be read.
    #[error("secret {secret}: {source}")]
    Secret {
        /// `namespace/name`.
        secret: String,
        /// Why.
        source: kube::Error,
    },
    /// The Secret lacks a key.
    #[error("secret {secret}: no {key:?} in data")]
    MissingKey {
        /// `namespace/name`.
        secret: String,
        /// Key.
        key: &'static str,
    },
    /// The endpoint is not a URL.
    #[error("spec.apiEndpoint {url:?}: {message}")]
    Url {
        /// The text.
        url: String,
        /// Why.
        message: String,
    },
    /// The client cannot be built.
    #[error("client: {0}")]
    Client(#[from] kube::Error),
}

/// The DER certificates of a PEM bundle.
fn pem_certs(pem: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut body = String::new();
    let mut inside = false;
    for line in pem.lines().map(str::trim) {
        if line.starts_with("-----BEGIN CERTIFICATE") {
            inside = true;
            body.clear();
        } else if line.starts_with("-----END CERTIFICATE") {
            inside = false;
            if let Ok(der) = STANDARD.decode(body.as_bytes()) {
                out.push(der);
            }
        } else if inside {
            body.push_str(line);
        }
    }
    out
}

/// A client for the member behind `e`, with the token and CA bundle from its Secret.
pub async fn connect(control: &Client, e: &Endpoint) -> Result<Client, MemberError> {
    let (ns, name) = e.secret.split_once('/').unwrap_or(("default", &e.secret));
    let secrets: Api<Secret> = Api::namespaced(control.clone(), ns);
    let secret = secrets
        .get(name)
        .await
        .map_err(|source| MemberError::Secret {
            secret: e.secret.clone(),
            source,
        })?;
    let data = secret.data.unwrap_or_default();
    let get = |key: &'static str| {
        data.get(key)
            .map(|b| String::from_utf8_lossy(&b.0).trim().to_string())
            .ok_or_else(|| MemberError::MissingKey {
                secret: e.secret.clone(),
                key,
            })
    };
    let token = get("token")?;
    let url = e
        .url
        .parse()
        .map_err(|err: http::uri::InvalidUri| MemberError::Url {
            url: e.url.clone(),
            message: err.to_string(),
        })?;
    let mut config = kube::Config::new(url);
    if let Ok(ca) = get("caBundle") {
        config.root_cert = Some(pem_certs(&ca));
    }
    config.accept_invalid_certs = e.insecure;
    config.auth_info.token = Some(token.into());
    Ok(Client::try_from(config)?)
}

/// Runs one member until aborted: connects (retrying every few seconds while it cannot),
/// registers its client for the executor and runs its Node and Pod watchers. Aborting the
/// task stops the watchers too.
pub fn spawn(
    control: Client,
    name: Arc<str>,
    endpoint: Endpoint,
    tx: mpsc::Sender<Update>,
    metrics: Arc<Metrics>,
    clients: Clients,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let client = loop {
            match connect(&control, &endpoint).await {
                Ok(c) => break c,
                Err(e) => {
                    tracing::warn!(cluster = %name, error = %e, "cannot connect to member; retrying");
                    metrics.api_error(&name, "connect", 0);
                    let failed = Update {
                        cluster: Arc::clone(&name),
                        kind: Kind::Node,
                        change: Change::Failed,
                    };
                    if tx.send(failed).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            }
        };
        if let Ok(mut m) = clients.members.write() {
            m.insert(name.to_string(), client.clone());
        }
        let mut set = JoinSet::new();
        for handle in watch::spawn_member(&client, &name, &tx, &metrics) {
            set.spawn(async move {
                let _ = handle.await;
            });
        }
        // A resumed watch says nothing when nothing changed: a probe tells that the member
        // answers again (and, between watch errors, that it still does).
        let (probe, probe_tx, probe_name) = (client.clone(), tx.clone(), Arc::clone(&name));
        set.spawn(async move {
            loop {
                tokio::time::sleep(PROBE_PERIOD).await;
                let change = match probe.apiserver_version().await {
                    Ok(_) => Change::Reachable,
                    Err(_) => Change::Failed,
                };
                let update = Update {
                    cluster: Arc::clone(&probe_name),
                    kind: Kind::Node,
                    change,
                };
                if probe_tx.send(update).await.is_err() {
                    return;
                }
            }
        });
        // The watchers run until this task is aborted; dropping the set aborts them.
        while set.join_next().await.is_some() {}
    })
}

/// The members running now, by name.
#[derive(Default)]
pub struct Running {
    members: BTreeMap<String, (Endpoint, JoinHandle<()>)>,
}

impl Running {
    /// Starts, restarts or stops members so that exactly `wanted` run. Returns the names
    /// started and the names stopped.
    pub fn reconcile(
        &mut self,
        wanted: &BTreeMap<String, Endpoint>,
        start: &mut dyn FnMut(&str, &Endpoint) -> JoinHandle<()>,
    ) -> (Vec<String>, Vec<String>) {
        let mut stopped = Vec::new();
        let mut started = Vec::new();
        self.members.retain(|name, (e, task)| {
            let keep = wanted.get(name) == Some(e);
            if !keep {
                task.abort();
                stopped.push(name.clone());
            }
            keep
        });
        for (name, e) in wanted {
            if !self.members.contains_key(name) {
                self.members
                    .insert(name.clone(), (e.clone(), start(name, e)));
                started.push(name.clone());
            }
        }
        (started, stopped)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for (_, task) in self.members.values() {
            task.abort();
        }
    }
}
