//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's elector does it: the
//! holder renews the lease every retry period; a candidate takes it over once the record it
//! last observed has not changed for a whole lease duration (measured on its own monotonic
//! clock, so clock skew between replicas does not matter). A leader that cannot renew within
//! the renew deadline stops leading before anyone else may start.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use crate::metrics::Metrics;

/// How to elect.
#[derive(Clone, Debug)]
pub struct LeaderOptions {
    /// Namespace of the Lease (`--lock-object-namespace`).
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica's identity.
    pub identity: String,
    /// How long a lease holds without renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops leading.
    pub renew_deadline: Duration,
    /// How often to try.
    pub retry_period: Duration,
}

impl LeaderOptions {
    /// Kubernetes' defaults (15 s lease, 10 s renew deadline, 2 s retry).
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: identity.to_string(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Whether this replica leads now. Without an elector it always leads.
#[derive(Clone, Debug)]
pub struct Leadership(Arc<AtomicBool>);

impl Leadership {
    /// Leads from the start (no election).
    pub fn always() -> Self {
        Self(Arc::new(AtomicBool::new(true)))
    }

    /// Does not lead until elected.
    pub fn candidate() -> Self {
        Self(Arc::new(AtomicBool::new(false)))
    }

    /// Whether this replica may write now.
    pub fn is_leader(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    pub(crate) fn set(&self, v: bool) {
        self.0.store(v, Ordering::SeqCst);
    }
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// What a candidate last saw of the lease and when it saw it change.
struct Observed {
    holder: Option<String>,
    renew: Option<MicroTime>,
    at: Instant,
}

/// One attempt: take or renew the lease. Returns whether this replica holds it now.
async fn attempt(
    api: &Api<Lease>,
    o: &LeaderOptions,
    seen: &mut Option<Observed>,
) -> Result<bool, kube::Error> {
    let duration = i32::try_from(o.lease_duration.as_secs()).unwrap_or(i32::MAX);
    let current = match api.get_opt(&o.name).await? {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(o.name.clone()),
                    namespace: Some(o.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(o.identity.clone()),
                    lease_duration_seconds: Some(duration),
                    acquire_time: Some(now()),
                    renew_time: Some(now()),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            api.create(&PostParams::default(), &lease).await?;
            return Ok(true);
        }
        Some(l) => l,
    };
    let spec = current.spec.clone().unwrap_or_default();
    let changed = match seen {
        Some(s) => s.holder != spec.holder_identity || s.renew != spec.renew_time,
        None => true,
    };
    if changed {
        *seen = Some(Observed {
            holder: spec.holder_identity.clone(),
            renew: spec.renew_time.clone(),
            at: Instant::now(),
        });
    }
    let mine = spec.holder_identity.as_deref() == Some(o.identity.as_str());
    let held_for = Duration::from_secs(
        u64::try_from(spec.lease_duration_seconds.unwrap_or(duration).max(1)).unwrap_or(15),
    );
    let expired = spec.holder_identity.as_deref().is_none_or(str::is_empty)
        || seen.as_ref().is_some_and(|s| s.at.elapsed() > held_for);
    if !mine && !expired {
        return Ok(false);
    }
    let mut next = current.clone();
    let mut s = spec;
    if !mine {
        s.holder_identity = Some(o.identity.clone());
        s.acquire_time = Some(now());
        s.lease_transitions = Some(s.lease_transitions.unwrap_or(0) + 1);
    }
    s.lease_duration_seconds = Some(duration);
    s.renew_time = Some(now());
    next.spec = Some(s);
    // The replace carries the resourceVersion read above: two candidates racing for an expired
    // lease cannot both win (the loser gets a 409).
    api.replace(&o.name, &PostParams::default(), &next).await?;
    Ok(true)
}

/// Runs the elector until the task is dropped, keeping `leadership` up to date.
pub fn spawn(
    client: Client,
    o: LeaderOptions,
    leadership: Leadership,
    metrics: Arc<Metrics>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let api: Api<Lease> = Api::namespaced(client, &o.namespace);
        let mut seen = None;
        let mut last_renew: Option<Instant> = None;
        loop {
            match attempt(&api, &o, &mut seen).await {
                Ok(true) => {
                    if !leadership.is_leader() {
                        tracing::info!(identity = %o.identity, lease = %o.name, "became leader");
                    }
                    last_renew = Some(Instant::now());
                    leadership.set(true);
                }
                Ok(false) => {
                    if leadership.is_leader() {
                        tracing::warn!(identity = %o.identity, "lost the lease to another replica");
                    }
                    leadership.set(false);
                }
                Err(e) => {
                    let code = match &e {
                        kube::Error::Api(s) => s.code,
                        _ => 0,
                    };
                    metrics.api_error("control-plane", "lease", code);
                    tracing::warn!(identity = %o.identity, error = %crate::brief::kube(&e), "lease update failed");
                    if last_renew.is_none_or(|t| t.elapsed() > o.renew_deadline)
                        && leadership.is_leader()
                    {
                        tracing::warn!(identity = %o.identity, "renew deadline passed; stopped leading");
                        leadership.set(false);
                    }
                }
            }
            metrics.leader.set(i64::from(leadership.is_leader()));
            tokio::time::sleep(o.retry_period).await;
        }
    })
}

/// With `options`, a candidate and its elector task; without, a replica that always leads
/// (and says so in `metrics`).
pub fn elect(
    client: &Client,
    options: Option<&LeaderOptions>,
    metrics: &Arc<Metrics>,
) -> (Leadership, Option<tokio::task::JoinHandle<()>>) {
    match options {
        Some(o) => {
            let l = Leadership::candidate();
            let task = spawn(client.clone(), o.clone(), l.clone(), Arc::clone(metrics));
            (l, Some(task))
        }
        None => {
            metrics.leader.set(1);
            (Leadership::always(), None)
        }
    }
}
