//! The failover controllers' adapter: Karmada's taint manager and application failover, which
//! read the same objects. It watches ResourceBindings, Clusters, PodGroups and
//! PropagationPolicies on the control plane and, for a binding whenever it, a cluster it runs
//! in, or its policy changes (and when a toleration runs out), runs
//! [`tephra_controllers::taint_manager::decide`] (a cluster whose NoExecute taint the job does
//! not tolerate) and [`tephra_controllers::application_failover::decide`] (a cluster where the
//! job stayed unhealthy, when its policy asks for `failover.application`). Such a cluster is
//! taken out of the binding's `spec.clusters`, a graceful-eviction task records that the old
//! pods are there, and an Event on the PodGroup says why. Only the leader writes.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
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
use crate::reconciler::{self, Reconciler, Wakes, WorkQueue, resync, watch};

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

/// Starts the failover controllers on the control plane `client`.
pub fn start(
    client: Client,
    options: FailoverOptions,
    leadership: Leadership,
) -> Vec<JoinHandle<()>> {
    let errors = options.errors.clone();
    let (queue, rx) = WorkQueue::new();
    let (rbs, rbs_w) = reflector::store::<ResourceBinding>();
    let (clusters, clusters_w) = reflector::store::<Cluster>();
    let (pgs, pgs_w) = reflector::store::<PodGroup>();
    let (policies, policies_w) = reflector::store::<PropagationPolicy>();
    let all = watcher::Config::default;
    // A cluster or policy change concerns many bindings: the resync queue below takes them;
    // the watches on them queue the bindings they name right away.
    let by_cluster = rbs.clone();
    let by_policy = rbs.clone();
    let mut tasks = vec![
        watch(&client, all(), rbs_w, &queue, rb_key),
        watch(&client, all(), pgs_w, &queue, |pg: &PodGroup| {
            Some((pg.namespace()?, pg.name_any()))
        }),
    ];
    {
        let q = queue.clone();
        tasks.push(watch(
            &client,
            all(),
            clusters_w,
            &queue,
            move |c: &Cluster| {
                let name = c.name_any();
                for rb in by_cluster.state() {
                    if rb.spec.clusters.iter().any(|t| t.name == name)
                        && let Some(k) = rb_key(&rb)
                    {
                        q.push(k);
                    }
                }
                None
            },
        ));
    }
    {
        let q = queue.clone();
        tasks.push(watch(
            &client,
            all(),
            policies_w,
            &queue,
            move |pp: &PropagationPolicy| {
                let ns = pp.namespace();
                for rb in by_policy.state() {
                    if rb.namespace() == ns
                        && let Some(k) = rb_key(&rb)
                    {
                        q.push(k);
                    }
                }
                None
            },
        ));
    }
    {
        let rbs = rbs.clone();
        tasks.push(resync(&queue, options.resync, move || {
            rbs.state().iter().filter_map(|rb| rb_key(rb)).collect()
        }));
    }
    let worker = Worker {
        client,
        options,
        rbs,
        clusters,
        pgs,
        policies,
        queue: queue.clone(),
        wakes: Wakes::default(),
        unhealthy: std::collections::HashMap::new(),
    };
    tasks.push(tokio::spawn(reconciler::run(
        worker, queue, rx, leadership, errors,
    )));
    tasks
}

struct Worker {
    client: Client,
    options: FailoverOptions,
    rbs: Store<ResourceBinding>,
    clusters: Store<Cluster>,
    pgs: Store<PodGroup>,
    policies: Store<PropagationPolicy>,
    queue: WorkQueue<Key>,
    wakes: Wakes<Key>,
    /// Since when each binding's clusters have been Unhealthy.
    unhealthy: std::collections::HashMap<Key, UnhealthySince>,
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

impl Reconciler for Worker {
    type Key = Key;
    type Error = PassError;
    const NAME: &'static str = "failover";

    fn keys(&self) -> Vec<Key> {
        self.rbs
            .state()
            .iter()
            .filter_map(|rb| rb_key(rb))
            .collect()
    }

    async fn pass(&mut self, key: &Key) -> Result<(), PassError> {
        let (ns, name) = key;
        let Some(rb) = self.rbs.get(&ObjectRef::new(name).within(ns)) else {
            self.wakes.forget(key);
            self.unhealthy.remove(key);
            return Ok(());
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
                let since = self.unhealthy.entry(key.clone()).or_default();
                let d = application_failover::decide(&binding, &app, since, now);
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
                self.unhealthy.remove(key);
            }
        }
        if let Some(at) = wake {
            self.wakes.arm(&self.queue, key, at, now);
        }
        if evicted.is_empty() {
            return Ok(());
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
        Ok(())
    }

    fn reason(e: &PassError) -> &str {
        reconciler::api_reason(&e.source)
    }
}
