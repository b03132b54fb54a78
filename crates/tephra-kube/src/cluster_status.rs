//! The cluster status and taint controllers' adapter (Karmada's `clusterStatus` and `cluster`
//! controllers): every period it probes each Push-mode member's `/readyz`, reads its version,
//! nodes and pods, and writes the Cluster's `status` (the `Ready` condition through
//! [`tephra_controllers::cluster_health`], `kubernetesVersion`, `nodeSummary`,
//! `resourceSummary`) and its `spec.taints` through [`tephra_controllers::cluster_taints`].
//! A Cluster in Pull mode is not Ready, with a condition saying that tephra does not run
//! agents. Only the leader probes and writes. Listing a member's pods (for `allocated`) costs
//! far more than a probe, so it is done every [`PODS_EVERY`] probes.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tephra_api::Cluster;
use tephra_api::cluster::ClusterSyncMode;
pub use tephra_controllers::cluster_health::Thresholds;
use tephra_controllers::cluster_health::{Probe, Seen, next_ready};
use tephra_controllers::cluster_taints::taints;
use tokio::task::JoinHandle;

use crate::clients::Endpoint;
use crate::leader::Leadership;
use crate::members::{Credentials, client_for, credentials};
use crate::slim::Watched;

/// How the cluster status controller runs.
#[derive(Clone, Debug)]
pub struct ClusterStatusOptions {
    /// How often each member is probed (Karmada's `--cluster-status-update-frequency`).
    pub period: Duration,
    /// How long a new observation must hold before the `Ready` condition follows it.
    pub thresholds: Thresholds,
    /// How long after a member turned not ready or unreachable its NoExecute taint follows
    /// (None: never; the NoSchedule taint comes at once).
    pub no_execute_after: Option<Duration>,
}

impl Default for ClusterStatusOptions {
    fn default() -> Self {
        Self {
            period: Duration::from_secs(10),
            thresholds: Thresholds::default(),
            no_execute_after: Some(Duration::from_secs(300)),
        }
    }
}

/// Every how many probes a member's pods are listed for `resourceSummary.allocated` (once a
/// minute at the default period).
pub const PODS_EVERY: u64 = 6;

/// What one probe of a member found.
struct Found {
    probe: Probe,
    version: Option<String>,
    nodes: Option<(i32, i32)>,
    allocatable: BTreeMap<String, Quantity>,
    /// None when the pods were not listed this time.
    allocated: Option<BTreeMap<String, Quantity>>,
}

fn now_ms() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_millisecond()
}

/// Starts the controller on the control plane `client`.
pub fn start(
    client: Client,
    options: ClusterStatusOptions,
    leadership: Leadership,
) -> Vec<JoinHandle<()>> {
    let (store, writer) = reflector::store::<Cluster>();
    let api: Api<Cluster> = Api::all(client.clone());
    let watch = tokio::spawn(async move {
        let stream = reflector::reflector(
            writer,
            watcher::watcher(api, watcher::Config::default()).backoff(crate::retry::watch()),
        )
        .applied_objects();
        futures::pin_mut!(stream);
        while let Some(ev) = futures::StreamExt::next(&mut stream).await {
            if let Err(e) = ev {
                tracing::warn!(error = %crate::brief::watch(&e), "cluster watch error");
            }
        }
    });
    let worker = tokio::spawn(run(client, options, leadership, store));
    vec![watch, worker]
}

async fn run(
    client: Client,
    options: ClusterStatusOptions,
    leadership: Leadership,
    store: Store<Cluster>,
) {
    let mut seen: HashMap<String, Seen> = HashMap::new();
    let mut members: HashMap<String, (Endpoint, Credentials, Client)> = HashMap::new();
    let mut rounds: u64 = 0;
    loop {
        tokio::time::sleep(options.period).await;
        if !leadership.is_leader() {
            continue;
        }
        let with_pods = rounds.is_multiple_of(PODS_EVERY);
        rounds += 1;
        let clusters = store.state();
        seen.retain(|k, _| clusters.iter().any(|c| c.name_any() == *k));
        members.retain(|k, _| clusters.iter().any(|c| c.name_any() == *k));
        let mut probes = Vec::new();
        for c in &clusters {
            let name = c.name_any();
            // The Secret is read every round, so a rotated token or CA is used at once.
            let member = match Endpoint::of(c) {
                Some(e) if c.spec.sync_mode != ClusterSyncMode::Pull => {
                    match credentials(&client, &e).await {
                        Ok(now) => match members.get(&name) {
                            Some((have, was, m)) if *have == e && *was == now => Some(m.clone()),
                            _ => match client_for(&e, &now) {
                                Ok(m) => {
                                    members.insert(name.clone(), (e, now, m.clone()));
                                    Some(m)
                                }
                                Err(err) => {
                                    tracing::warn!(cluster = %name, error = %err, "cannot build the member's client");
                                    None
                                }
                            },
                        },
                        Err(err) => {
                            tracing::warn!(cluster = %name, error = %err, "cannot read the member's credentials");
                            members.remove(&name);
                            None
                        }
                    }
                }
                _ => None,
            };
            let timeout = options.period.min(Duration::from_secs(5));
            probes.push(async move { (name, probe(c, member, timeout, with_pods).await) });
        }
        let found = futures::future::join_all(probes).await;
        for (name, f) in found {
            let Some(c) = clusters.iter().find(|c| c.name_any() == name) else {
                continue;
            };
            let s = seen.entry(name.clone()).or_default();
            if let Err(e) = write(&client, c, f, s, &options).await {
                tracing::warn!(cluster = %name, error = %crate::brief::kube(&e), "writing cluster status failed");
            }
        }
    }
}

/// Probes one member (`member` is None when it cannot be reached at all: Pull mode, no
/// endpoint, or no client).
async fn probe(c: &Cluster, member: Option<Client>, timeout: Duration, with_pods: bool) -> Found {
    let unreachable = |m: String| Found {
        probe: Probe::Unreachable(m),
        version: None,
        nodes: None,
        allocatable: BTreeMap::new(),
        allocated: None,
    };
    if c.spec.sync_mode == ClusterSyncMode::Pull {
        return Found {
            probe: Probe::NotReady(
                "syncMode Pull is not supported: tephra reaches members in Push mode only \
                 (spec.apiEndpoint and spec.secretRef)"
                    .into(),
            ),
            ..unreachable(String::new())
        };
    }
    let Some(m) = member else {
        return unreachable(
            "no client: spec.apiEndpoint or spec.secretRef is missing or unreadable".into(),
        );
    };
    let ready = tokio::time::timeout(timeout, readyz(&m)).await;
    let probe = match ready {
        Err(_) => return unreachable(format!("/readyz did not answer within {timeout:?}")),
        Ok(Err(e)) => return unreachable(e.to_string()),
        Ok(Ok(body)) if body.trim() == "ok" => Probe::Ready,
        Ok(Ok(body)) => Probe::NotReady(body.trim().chars().take(200).collect()),
    };
    let version = m.apiserver_version().await.ok().map(|v| v.git_version);
    let nodes: Api<Node> = Api::all(m.clone());
    // Listed without managedFields (crate::slim): nothing here reads them.
    let pods: Api<Watched<Pod>> = Api::all(m);
    let (mut total, mut ready_n) = (0, 0);
    let mut alloc: BTreeMap<String, i128> = BTreeMap::new();
    let mut used: BTreeMap<String, i128> = BTreeMap::new();
    let mut summary = None;
    if let Ok(list) = nodes.list(&ListParams::default()).await {
        for n in &list.items {
            total += 1;
            let st = n.status.as_ref();
            let is_ready = st
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if is_ready {
                ready_n += 1;
            }
            for (k, q) in st
                .and_then(|s| s.allocatable.as_ref())
                .into_iter()
                .flatten()
            {
                *alloc.entry(k.clone()).or_default() += milli(q);
            }
        }
        summary = Some((total, ready_n));
    }
    let listed = if with_pods {
        pods.list(&ListParams::default()).await.ok()
    } else {
        None
    };
    if let Some(list) = &listed {
        for Watched(p) in &list.items {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            let placed = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
            if !placed || matches!(phase, Some("Succeeded" | "Failed")) {
                continue;
            }
            if let Some(spec) = p.spec.as_ref()
                && let Ok(req) = tephra_controllers::pod::requests(spec, "")
            {
                for (k, q) in req {
                    *used.entry(k).or_default() += milli(&q);
                }
            }
            *used.entry("pods".into()).or_default() += 1000;
        }
    }
    Found {
        probe,
        version,
        nodes: summary,
        allocatable: quantities(&alloc),
        allocated: listed.map(|_| quantities(&used)),
    }
}

async fn readyz(m: &Client) -> Result<String, kube::Error> {
    let req = http::Request::get("/readyz")
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    m.request_text(req).await
}

/// A quantity in thousandths (CPU in millicores; anything unreadable counts 0).
fn milli(q: &Quantity) -> i128 {
    tephra_scheduler::quantity::parse_scaled(&q.0, 1000)
        .map(i128::from)
        .unwrap_or(0)
}

fn quantities(m: &BTreeMap<String, i128>) -> BTreeMap<String, Quantity> {
    m.iter()
        .map(|(k, v)| {
            let text = if k == "cpu" {
                if v % 1000 == 0 {
                    (v / 1000).to_string()
                } else {
                    format!("{v}m")
                }
            } else {
                (v / 1000).to_string()
            };
            (k.clone(), Quantity(text))
        })
        .collect()
}

async fn write(
    client: &Client,
    c: &Cluster,
    f: Found,
    seen: &mut Seen,
    o: &ClusterStatusOptions,
) -> Result<(), kube::Error> {
    let name = c.name_any();
    let api: Api<Cluster> = Api::all(client.clone());
    let now = now_ms();
    let status = c.status.clone().unwrap_or_default();
    let current = status.conditions.iter().find(|c| c.type_ == "Ready");
    let next = next_ready(current, seen, &f.probe, now, o.thresholds);
    let ready: Option<Condition> = next.clone().or_else(|| current.cloned());
    if let Some(n) = &next
        && current.map(|c| &c.status) != Some(&n.status)
    {
        tracing::info!(cluster = %name, status = %n.status, reason = %n.reason, message = %n.message, "cluster Ready changed");
    }
    let mut patch = serde_json::Map::new();
    if next.is_some() {
        let mut conditions: Vec<Condition> = status
            .conditions
            .iter()
            .filter(|c| c.type_ != "Ready")
            .cloned()
            .collect();
        conditions.extend(ready.clone());
        patch.insert(
            "conditions".into(),
            serde_json::to_value(conditions).unwrap_or_default(),
        );
    }
    if f.probe == Probe::Ready {
        if let Some(v) = f
            .version
            .filter(|v| status.kubernetes_version.as_ref() != Some(v))
        {
            patch.insert("kubernetesVersion".into(), v.into());
        }
        if let Some((total, ready_n)) = f.nodes {
            let summary = serde_json::json!({"totalNum": total, "readyNum": ready_n});
            if serde_json::to_value(&status.node_summary).ok() != Some(summary.clone()) {
                patch.insert("nodeSummary".into(), summary);
            }
            let old = serde_json::to_value(&status.resource_summary).unwrap_or_default();
            let allocated = match f.allocated {
                Some(a) => serde_json::to_value(a).unwrap_or_default(),
                None => old.get("allocated").cloned().unwrap_or_default(),
            };
            let resources =
                serde_json::json!({"allocatable": f.allocatable, "allocated": allocated});
            if old.get("allocatable") != resources.get("allocatable")
                || old.get("allocated") != resources.get("allocated")
            {
                patch.insert("resourceSummary".into(), resources);
            }
        }
    }
    if !patch.is_empty() {
        let body = serde_json::json!({"status": patch});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await?;
    }
    let grace = o.no_execute_after.map(|d| d.as_millis() as i64);
    let t = taints(&c.spec.taints, ready.as_ref(), now, grace);
    if let Some(list) = t.write {
        tracing::info!(cluster = %name, taints = ?list.iter().map(|t| format!("{}:{}", t.key, t.effect)).collect::<Vec<_>>(), "cluster taints");
        let body = serde_json::json!({"spec": {"taints": list}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await?;
    }
    Ok(())
}
