//! The failover controllers' adapter: Karmada's taint manager and application failover, which
//! read the same objects. It watches ResourceBindings, Clusters, PodGroups and
//! PropagationPolicies on the control plane and, for a binding whenever it, a cluster it runs
//! in, or its policy changes (and when a toleration runs out), runs
//! [`tephra_controllers::taint_manager::decide`] (a cluster whose NoExecute taint the job does
//! not tolerate) and [`tephra_controllers::application_failover::decide`] (a cluster where the
//! job stayed unhealthy, when its policy asks for `failover.application`). Such a cluster is
//! taken out of the binding's `spec.clusters`, a graceful-eviction task records that the old
//! pods are there, and an Event on the PodGroup says why. Only the leader writes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{self, Action as ControllerAction, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tephra_api::policy::PurgeMode;
use tephra_api::{Cluster, PodGroup, PropagationPolicy, ResourceBinding};
use tephra_controllers::application_failover::{self, UnhealthySince};
use tephra_controllers::propagation;
use tephra_controllers::taint_manager::{self, EvictionDefaults};
use tokio::task::JoinHandle;

use crate::events::{EventFor, record};
use crate::leader::Leadership;
use crate::reconciler;

/// How the failover controllers run.
#[derive(Clone, Debug)]
pub struct FailoverOptions {
    /// This replica's name, on the Events it records.
    pub identity: String,
    /// How often every binding is looked at even if nothing changed.
    pub resync: Duration,
    /// Whether NoExecute taints evict (the taint manager).
    pub taints: bool,
    /// Whether a job unhealthy in a cluster moves (application failover).
    pub application: bool,
    /// Failed passes, by reason (`tephra_controller_errors_total`).
    pub errors: reconciler::ErrorCounter,
}

impl Default for FailoverOptions {
    fn default() -> Self {
        Self {
            identity: "tephra-controller-manager".into(),
            resync: Duration::from_secs(30),
            taints: true,
            application: true,
            errors: reconciler::ErrorCounter::default(),
        }
    }
}

type Key = (String, String);

fn rb_key(rb: &ResourceBinding) -> Option<Key> {
    Some((rb.namespace()?, rb.name_any()))
}

/// Starts the failover controllers on the control plane `client`. They write only while
/// `leadership` leads.
pub fn start(
    client: Client,
    options: FailoverOptions,
    leadership: Leadership,
) -> Vec<JoinHandle<()>> {
    vec![tokio::spawn(reconciler::while_leading(
        leadership,
        move |lost| run(client.clone(), options.clone(), lost),
    ))]
}

/// One term as leader: a kube-runtime `Controller` over ResourceBindings, triggered by the
/// bindings, their PodGroups, the Clusters they run in and the PropagationPolicies of their
/// namespace, one pass at a time, until `lost`.
async fn run(client: Client, options: FailoverOptions, lost: reconciler::Lost) {
    let (clusters, clusters_w) = reflector::store::<Cluster>();
    let (pgs, pgs_w) = reflector::store::<PodGroup>();
    let (policies, policies_w) = reflector::store::<PropagationPolicy>();
    let all = watcher::Config::default;
    let pgs_s = reconciler::watched(&client, pgs_w, all());
    let clusters_s = reconciler::watched(&client, clusters_w, all());
    let policies_s = reconciler::watched(&client, policies_w, all());
    let controller = Controller::new(Api::<ResourceBinding>::all(client.clone()), all())
        .trigger_backoff(reconciler::TriggerBackoff)
        .with_config(controller::Config::default().concurrency(1));
    let rbs = controller.store();
    let (in_cluster, in_namespace) = (rbs.clone(), rbs.clone());
    let ctx = Arc::new(FailoverPasses {
        client,
        options,
        rbs,
        clusters,
        pgs,
        policies,
        unhealthy: Mutex::new(HashMap::new()),
        failures: reconciler::Failures::default(),
    });
    controller
        .watches_stream(pgs_s, |pg: PodGroup| {
            Some(ObjectRef::new(&pg.name_any()).within(&pg.namespace()?))
        })
        // A cluster concerns every binding that places a job in it.
        .watches_stream(clusters_s, move |c: Cluster| {
            let name = c.name_any();
            in_cluster
                .state()
                .into_iter()
                .filter(|rb| rb.spec.clusters.iter().any(|t| t.name == name))
                .map(|rb| ObjectRef::from_obj(&*rb))
                .collect::<Vec<_>>()
        })
        // A policy concerns every binding of its namespace.
        .watches_stream(policies_s, move |pp: PropagationPolicy| {
            let ns = pp.namespace();
            in_namespace
                .state()
                .into_iter()
                .filter(|rb| rb.namespace() == ns)
                .map(|rb| ObjectRef::from_obj(&*rb))
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(lost)
        .run(pass, failed, ctx)
        .for_each(|_| async {})
        .await;
}

/// One pass over a binding; it is looked at again when a toleration runs out, else after the
/// resync period.
async fn pass(
    rb: Arc<ResourceBinding>,
    w: Arc<FailoverPasses>,
) -> Result<ControllerAction, PassError> {
    let Some(key) = rb_key(&rb) else {
        return Ok(ControllerAction::await_change());
    };
    let wake = w.pass(&key).await?;
    w.failures.succeeded(&key);
    let resync = w.options.resync;
    let next = wake.map_or(resync, |at| {
        // A moment past the due time, so that the pass sees it passed.
        Duration::from_millis(u64::try_from(at - now_ms()).unwrap_or(0) + 50).min(resync)
    });
    Ok(ControllerAction::requeue(next))
}

/// A pass failed: counted by reason, and tried again after the backoff its failures earn.
fn failed(rb: Arc<ResourceBinding>, e: &PassError, w: Arc<FailoverPasses>) -> ControllerAction {
    let key = rb_key(&rb).unwrap_or_default();
    w.options
        .errors
        .inc(NAME, reconciler::api_reason(&e.source));
    let wait = w.failures.failed(key.clone());
    tracing::warn!(controller = NAME, namespace = %key.0, binding = %key.1, error = %e,
        retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        "pass failed; retrying");
    ControllerAction::requeue(wait)
}

/// The controllers' name, in logs and `tephra_controller_errors_total`.
const NAME: &str = "failover";

/// What the bindings, clusters, PodGroups and policies look like to the passes.
struct FailoverPasses {
    client: Client,
    options: FailoverOptions,
    rbs: Store<ResourceBinding>,
    clusters: Store<Cluster>,
    pgs: Store<PodGroup>,
    policies: Store<PropagationPolicy>,
    /// Since when each binding's clusters have been Unhealthy.
    unhealthy: Mutex<HashMap<Key, UnhealthySince>>,
    /// Each binding's failed passes in a row.
    failures: reconciler::Failures<Key>,
}

/// Why a pass stopped.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {}", crate::brief::kube(.source))]
pub struct PassError {
    what: String,
    source: kube::Error,
}

fn now_ms() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_millisecond()
}

impl FailoverPasses {
    /// One pass over the binding `key`: its evictions written, and when a toleration runs
    /// out (ms since the epoch), if one does.
    async fn pass(&self, key: &Key) -> Result<Option<i64>, PassError> {
        let (ns, name) = key;
        if let Ok(mut u) = self.unhealthy.lock() {
            u.retain(|(n, b), _| self.rbs.get(&ObjectRef::new(b).within(n)).is_some());
        }
        let Some(rb) = self.rbs.get(&ObjectRef::new(name).within(ns)) else {
            return Ok(None);
        };
        let group = rb.spec.resource.name.clone();
        let pg = self.pgs.get(&ObjectRef::new(&group).within(ns));
        let policies = self.policies.state();
        let policy = pg
            .as_deref()
            .and_then(|g| propagation::pick(policies.iter().map(|p| &**p), g));
        let tolerations = policy
            .map(|p| p.spec.placement.cluster_tolerations.clone())
            .unwrap_or_default();
        let defaults = EvictionDefaults {
            purge_mode: policy
                .and_then(|p| p.spec.failover.as_ref())
                .and_then(|f| f.cluster.as_ref())
                .and_then(|c| c.purge_mode)
                .unwrap_or(PurgeMode::Gracefully),
            grace_period_seconds: None,
        };
        let clusters = self.clusters.state();
        let now = now_ms();
        let mut binding = (*rb).clone();
        let mut evicted: Vec<(String, &str)> = Vec::new();
        let mut wake: Option<i64> = None;
        if self.options.taints {
            let d = taint_manager::decide(
                &binding,
                |c| {
                    clusters
                        .iter()
                        .find(|x| x.name_any() == c)
                        .map(|x| x.spec.taints.as_slice())
                },
                &tolerations,
                now,
                defaults,
            );
            wake = d.wake_ms;
            if let Some(next) = d.binding {
                binding = next;
                evicted.extend(d.evicted.into_iter().map(|c| (c, "TaintEviction")));
            }
        }
        let app = policy
            .and_then(|p| p.spec.failover.as_ref())
            .and_then(|f| f.application.clone());
        match app {
            Some(app) if self.options.application => {
                let mut unhealthy = self.unhealthy.lock().unwrap_or_else(|e| e.into_inner());
                let since = unhealthy.entry(key.clone()).or_default();
                let d = application_failover::decide(&binding, &app, since, now);
                drop(unhealthy);
                wake = match (wake, d.wake_ms) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                if let Some(next) = d.binding {
                    binding = next;
                    evicted.extend(d.evicted.into_iter().map(|c| (c, "ApplicationFailover")));
                }
            }
            _ => {
                if let Ok(mut u) = self.unhealthy.lock() {
                    u.remove(key);
                }
            }
        }
        if evicted.is_empty() {
            return Ok(wake);
        }
        let next = binding;

        let api: Api<ResourceBinding> = Api::namespaced(self.client.clone(), ns);
        let patch = serde_json::json!({"spec": {
            "clusters": next.spec.clusters,
            "gracefulEvictionTasks": next.spec.graceful_eviction_tasks,
        }});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|source| PassError {
                what: format!("evicting {ns}/{name} from {evicted:?}"),
                source,
            })?;
        tracing::info!(namespace = %ns, binding = %name, clusters = ?evicted,
            "failover: clusters taken from the binding");
        if let Some(pg) = pg {
            let on = EventFor {
                namespace: ns,
                api_version: "scheduling.volcano.sh/v1beta1",
                kind: "PodGroup",
                name: &group,
                uid: pg.metadata.uid.clone(),
            };
            for (cluster, reason) in &evicted {
                let message = match *reason {
                    "TaintEviction" => format!(
                        "evicted from cluster {cluster} by a NoExecute taint the job does not tolerate; the gang is placed again"
                    ),
                    _ => format!(
                        "evicted from cluster {cluster}, where it stayed unhealthy past failover.application's toleration; the gang is placed again"
                    ),
                };
                record(
                    &self.client,
                    &on,
                    reason,
                    &message,
                    true,
                    &self.options.identity,
                )
                .await;
            }
        }
        Ok(wake)
    }
}
