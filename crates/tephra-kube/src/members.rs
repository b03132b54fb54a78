//! Member clusters from `Cluster` objects (Push mode, as Karmada's): a client built from the
//! Cluster's `apiEndpoint` and the token and CA bundle of the Secret its `secretRef` names, and
//! that member's Node and Pod watchers. Adding, changing or removing a Cluster starts, restarts
//! or stops them while the scheduler runs. The Secret is watched (by name) and read again when
//! it changes, when the member answers 401, and every [`CREDENTIALS_EVERY`] probes should the
//! watch be refused, so a rotated token or CA is used at once; a member restarted or stopped
//! has all its watchers and its probe stopped.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::clients::{Clients, Endpoint};
use crate::metrics::Metrics;
use crate::watch::{self, Change, Kind, Update};

/// How often a member is probed.
const PROBE_PERIOD: Duration = Duration::from_secs(1);
/// How many probes apart the credentials Secret is read again besides its watch (and after any
/// 401): only a watch that is refused leaves a rotation to this.
pub const CREDENTIALS_EVERY: u32 = 60;

/// Why a member cannot be reached.
#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    /// The Secret cannot be read.
    #[error("secret {secret}: {}", crate::brief::kube(.source))]
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
    #[error("client: {}", crate::brief::kube(.0))]
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

/// What a member's client is built from: the token and CA bundle of its Secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    token: String,
    ca: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials(..)")
    }
}

/// A client for the member behind `e`, with the token and CA bundle from its Secret.
pub async fn connect(control: &Client, e: &Endpoint) -> Result<Client, MemberError> {
    client_for(e, &credentials(control, e).await?)
}

/// The credentials `e`'s Secret holds now.
pub async fn credentials(control: &Client, e: &Endpoint) -> Result<Credentials, MemberError> {
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
    Ok(Credentials {
        token: get("token")?,
        ca: get("caBundle").ok(),
    })
}

/// A client for the member behind `e` with `c`.
pub fn client_for(e: &Endpoint, c: &Credentials) -> Result<Client, MemberError> {
    let url = e
        .url
        .parse()
        .map_err(|err: http::uri::InvalidUri| MemberError::Url {
            url: e.url.clone(),
            message: err.to_string(),
        })?;
    let mut config = kube::Config::new(url);
    if let Some(ca) = &c.ca {
        config.root_cert = Some(pem_certs(ca));
    }
    config.accept_invalid_certs = e.insecure;
    config.auth_info.token = Some(c.token.clone().into());
    Ok(crate::connect::client(config)?)
}

/// Aborts the tasks it holds when dropped: a member's watchers stop with the task that runs
/// them, whether it ends, restarts or is aborted (dropping a `JoinHandle` alone detaches it).
struct AbortOnDrop(Vec<JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Runs one member until aborted: connects (retrying every few seconds while it cannot),
/// registers its client for the executor and runs its watchers and its probe; when the
/// credentials in its Secret change, all of them stop and it connects again with the new ones.
/// Aborting the task stops them too.
pub fn spawn(
    control: Client,
    name: Arc<str>,
    endpoint: Endpoint,
    tx: mpsc::Sender<Update>,
    metrics: Arc<Metrics>,
    clients: Clients,
) -> JoinHandle<()> {
    // The client's own log lines (a connection refused) name the member through this span,
    // at the error level so that it is there whatever level the log shows.
    let span = tracing::error_span!("member", cluster = %name);
    let task = async move {
        loop {
            let (client, creds) = loop {
                let attempt = match credentials(&control, &endpoint).await {
                    Ok(c) => client_for(&endpoint, &c).map(|client| (client, c)),
                    Err(e) => Err(e),
                };
                match attempt {
                    Ok(ok) => break ok,
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
            let watchers = AbortOnDrop(watch::spawn_member(&client, &name, &tx, &metrics));
            let rotated = probe(&control, &endpoint, &name, &client, &creds, &tx, &metrics).await;
            drop(watchers);
            if !rotated {
                return;
            }
            tracing::info!(cluster = %name, "member credentials changed; reconnecting");
        }
    };
    tokio::spawn(task.instrument(span))
}

/// Each time the member's Secret changes (its watch, by name).
fn secret_changes(
    control: &Client,
    endpoint: &Endpoint,
) -> impl futures::Stream<Item = ()> + Send + 'static {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let (ns, name) = endpoint
        .secret
        .split_once('/')
        .unwrap_or(("default", &endpoint.secret));
    let api: Api<Secret> = Api::namespaced(control.clone(), ns);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    watcher(api, config)
        .backoff(crate::retry::watch())
        .filter_map(|e| async move {
            let changed = matches!(
                e,
                Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone)
            );
            changed.then_some(())
        })
}

/// Probes the member every [`PROBE_PERIOD`] (a resumed watch says nothing when nothing
/// changed: a probe tells that the member answers again, and between watch errors that it
/// still does), reading its Secret again when its watch says it changed, after a 401, and
/// every [`CREDENTIALS_EVERY`] probes. Returns true when the credentials changed, false when
/// the state loop is gone.
async fn probe(
    control: &Client,
    endpoint: &Endpoint,
    name: &Arc<str>,
    client: &Client,
    creds: &Credentials,
    tx: &mpsc::Sender<Update>,
    metrics: &Metrics,
) -> bool {
    use futures::StreamExt;
    let mut probes: u32 = 0;
    let mut refusal_said = false;
    let mut changes = Box::pin(secret_changes(control, endpoint));
    loop {
        let changed = tokio::select! {
            () = tokio::time::sleep(PROBE_PERIOD) => false,
            Some(()) = changes.next() => true,
        };
        if changed {
            match credentials(control, endpoint).await {
                Ok(now) if now != *creds => return true,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(cluster = %name, error = %e, "cannot read the member's credentials")
                }
            }
            continue;
        }
        probes = probes.wrapping_add(1);
        let answer = client.apiserver_version().await;
        let unauthorized = matches!(&answer, Err(kube::Error::Api(s)) if s.code == 401);
        // A refused probe is counted as any refused request is: a revoked token shows here
        // first on a real API server, which keeps streaming the watches it authenticated before.
        if let Err(e) = &answer {
            let code = match e {
                kube::Error::Api(s) => s.code,
                _ => 0,
            };
            metrics.api_error(name, "probe", code);
        }
        let change = if answer.is_ok() {
            Change::Reachable
        } else {
            Change::Failed
        };
        let update = Update {
            cluster: Arc::clone(name),
            kind: Kind::Node,
            change,
        };
        if tx.send(update).await.is_err() {
            return false;
        }
        if !unauthorized {
            refusal_said = false;
        }
        if unauthorized || probes.is_multiple_of(CREDENTIALS_EVERY) {
            match credentials(control, endpoint).await {
                Ok(now) if now != *creds => return true,
                Ok(_) if unauthorized && !refusal_said => {
                    refusal_said = true;
                    tracing::warn!(cluster = %name, secret = %endpoint.secret,
                        "member refuses its credentials (401); write the new token into the Secret");
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(cluster = %name, error = %e, "cannot read the member's credentials")
                }
            }
        }
    }
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
