//! The executor: carries out planned writes against the right API server, with bounded
//! concurrency and a client-side rate limit, retrying throttling and server errors with
//! backoff. It never blocks the session loop: a batch is handed over and each result comes
//! back on a channel. Writes to one object keep their planned order (`lanes`). Before each
//! write it checks that this replica still leads.
//!
//! Binds never wait behind status: the writes that put a pod on its node (binds, a declared
//! pod's copy, a gang's claims before its binds) have a queue and workers of their own, and
//! every other write (PodGroup, Queue and pod status, nominations, evictions, Events) a
//! queue and a quarter as many workers of its own. Of those, reports (status, ResourceBindings,
//! Events, and the bound pods' best-effort `Scheduled` Events, which have workers of their
//! own) wait while binds are waiting, each at most [`REPORT_WAIT`] (the queues: `write_queues`). A write enters its
//! object's lane when it is submitted, so two writes to one pod keep their order whichever
//! queue each is in.

use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::api::{Api, EvictParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tephra_api::{PodGroup, Queue, ResourceBinding};
use tokio::sync::{Mutex, mpsc};
use tokio::time::Instant;

use crate::clients::Clients;
use crate::events::{EventFor, event};
use crate::gone::done_if_gone;
use crate::lanes::Lanes;
use crate::leader::Leadership;
use crate::metrics::{Metrics, ms};
pub use crate::write_queues::REPORT_WAIT;
use crate::write_queues::{Class, Queues, class, reports};
use crate::writes::Write;

/// How a write ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done.
    Ok,
    /// Refused or failed after retries, with the HTTP code (0: no response) and message.
    Failed {
        /// HTTP code.
        code: u16,
        /// Message.
        message: String,
    },
    /// Not attempted: this replica no longer leads.
    NotLeader,
}

/// The result of one write, sent back to the state loop.
#[derive(Clone, Debug)]
pub struct Done {
    /// The write.
    pub write: Write,
    /// How it ended.
    pub outcome: Outcome,
}

/// A token bucket: `qps` tokens a second, at most `burst` at once.
pub struct RateLimiter {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimiter {
    /// A limiter; a `qps` of 0 or less means no limit, and a `burst` of 0 one second's worth.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = if burst == 0 {
            qps.ceil().clamp(1.0, f64::from(u32::MAX))
        } else {
            f64::from(burst)
        };
        Self {
            qps,
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        if self.qps <= 0.0 {
            return;
        }
        loop {
            let wait = {
                let mut s = self.state.lock().await;
                let now = Instant::now();
                let refill = now.duration_since(s.1).as_secs_f64() * self.qps;
                s.0 = (s.0 + refill).min(self.burst);
                s.1 = now;
                if s.0 >= 1.0 {
                    s.0 -= 1.0;
                    return;
                }
                Duration::from_secs_f64((1.0 - s.0) / self.qps)
            };
            tokio::time::sleep(wait).await;
        }
    }
}

/// How the executor works: its workers, rate limit, name and waits.
pub struct Settings {
    /// Writes in flight at most.
    pub concurrency: usize,
    /// The client-side rate limit.
    pub limiter: RateLimiter,
    /// This replica's name, in Events.
    pub identity: String,
    /// How long a gang's volume claims may take to be bound.
    pub volume_bind_timeout: Duration,
    /// The fleet's virtual node: a declared pod is bound to it once its copy is placed.
    pub virtual_node: Option<String>,
}

/// The executor: two queues of writes (binds, and the rest) and a fixed pool of workers for
/// each that carry them out.
#[derive(Clone)]
pub struct Executor {
    inner: Arc<Inner>,
    /// Stops the workers once the last handle is gone.
    _open: Arc<Open>,
}

/// Held by every [`Executor`] handle: the last one dropped closes the queues, and the workers
/// stop once they are drained.
struct Open(Arc<Inner>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.queues.close();
    }
}

/// What the workers share.
struct Inner {
    /// The writes waiting for a worker.
    queues: Queues,
    /// How long a gang's claims may take to be bound.
    volume_bind_timeout: Duration,
    /// The fleet's virtual node, that placed declared pods are bound to.
    virtual_node: Option<String>,
    clients: Clients,
    /// The version of Kubernetes PodGroups each cluster serves.
    workload_versions: crate::workload_api::Versions,
    limiter: RateLimiter,
    leadership: Leadership,
    metrics: Arc<Metrics>,
    done: mpsc::UnboundedSender<Done>,
    identity: String,
    lanes: Lanes<Write>,
    /// Best-effort Events (a bound pod's `Scheduled`), sent by workers of their own so that
    /// a bind never waits behind them; dropped and counted when the queue is full.
    events: mpsc::Sender<Write>,
    /// The ResourceClaims a gang's PreBind reserved for each of its pods (by cluster,
    /// namespace and pod), until the pod's bind ends: a bind refused gives them back.
    reserved: dashmap::DashMap<(String, String, String), Vec<String>>,
}

const RETRIES: u32 = 4;
/// Events queued at most for the event workers.
const EVENT_QUEUE: usize = 4096;
/// Event workers.
const EVENT_WORKERS: usize = 2;
/// Workers for writes other than binds: one for every this many bind workers (at least one).
const REST_SHARE: usize = 4;

impl Executor {
    /// An executor with `settings.concurrency` workers (writes in flight at most) and
    /// `settings.limiter` as its rate limit. Must be called inside a tokio runtime: the workers start at once and stop
    /// when every handle to the executor is gone.
    pub fn new(
        clients: Clients,
        settings: Settings,
        leadership: Leadership,
        metrics: Arc<Metrics>,
        done: mpsc::UnboundedSender<Done>,
    ) -> Self {
        let Settings {
            concurrency,
            limiter,
            identity,
            volume_bind_timeout,
            virtual_node,
        } = settings;
        let (events, events_rx) = mpsc::channel::<Write>(EVENT_QUEUE);
        let inner = Arc::new(Inner {
            events,
            queues: Queues::default(),
            volume_bind_timeout,
            virtual_node,
            clients,
            workload_versions: crate::workload_api::Versions::default(),
            limiter,
            leadership,
            metrics,
            done,
            identity,
            lanes: Lanes::default(),
            reserved: dashmap::DashMap::new(),
        });
        let events_rx = Arc::new(Mutex::new(events_rx));
        for _ in 0..EVENT_WORKERS {
            let (inner, rx) = (Arc::downgrade(&inner), Arc::clone(&events_rx));
            tokio::spawn(async move {
                loop {
                    let Some(write) = rx.lock().await.recv().await else {
                        return;
                    };
                    let Some(inner) = inner.upgrade() else { return };
                    // A pod's `Scheduled` Event is a report too: it waits behind the binds.
                    inner.queues.after_binds().await;
                    inner.best_effort(&write).await;
                }
            });
        }
        let binds = concurrency.max(1);
        let rest = (binds / REST_SHARE).max(1);
        for (kind, workers) in [(Class::Bind, binds), (Class::Rest, rest)] {
            for _ in 0..workers {
                let inner = Arc::clone(&inner);
                tokio::spawn(async move {
                    while let Some(mut write) = inner.queues.next(kind).await {
                        let object = write.object();
                        loop {
                            inner.execute(write).await;
                            // The next write to the same object may run now, in its own queue
                            // (a bind planned after a pod's status goes to the binds' queue).
                            match object.as_deref().and_then(|key| inner.lanes.leave(key)) {
                                Some(next) if class(&next) == kind => write = next,
                                Some(next) => {
                                    inner.queues.push(next);
                                    break;
                                }
                                None => break,
                            }
                        }
                        if kind == Class::Bind {
                            inner.queues.bind_done();
                        }
                    }
                });
            }
        }
        Self {
            _open: Arc::new(Open(Arc::clone(&inner))),
            inner,
        }
    }

    /// Holds the reports (PodGroup and Queue status, ResourceBindings, Events) while the loop
    /// works off a backlog in growing sessions (each report 30 s at most), or lets them go.
    pub fn hold_reports(&self, hold: bool) {
        self.inner.queues.hold_reports(hold);
    }

    /// Hands a batch over, in order: the workers take binds first when the planner put them
    /// first.
    pub fn submit(&self, batch: Vec<Write>) {
        if batch.is_empty() {
            return;
        }
        if !self.inner.leadership.is_leader() {
            for write in batch {
                let _ = self.inner.done.send(Done {
                    write,
                    outcome: Outcome::NotLeader,
                });
            }
            return;
        }
        self.inner
            .metrics
            .executor_depth
            .add(i64::try_from(batch.len()).unwrap_or(i64::MAX));
        for write in batch {
            self.inner.enqueue(write);
        }
    }
}

impl Inner {
    /// Queues a counted write: it enters its object's lane now, so that writes to one object
    /// keep their planned order whichever queue each waits in, and waits in its queue when its
    /// object is idle (behind the object's write in flight otherwise).
    fn enqueue(&self, write: Write) {
        if self.queues.is_closed() {
            self.metrics.executor_depth.dec();
            let _ = self.done.send(Done {
                write,
                outcome: Outcome::Failed {
                    code: 0,
                    message: "executor stopped".into(),
                },
            });
            return;
        }
        let urgent = !reports(&write);
        let entered = match write.object() {
            Some(key) => {
                let entered = self.lanes.enter(&key, write);
                if entered.is_none() && urgent {
                    self.queues.promote(&key);
                }
                entered
            }
            None => Some(write),
        };
        if let Some(w) = entered {
            self.queues.push(w);
        }
    }

    /// Carries out one write (if this replica still leads: checked before every write, so a
    /// replica that lost the lease stops writing) and reports how it ended.
    async fn execute(self: &Arc<Self>, write: Write) {
        let outcome = if self.leadership.is_leader() {
            self.run(&write).await
        } else {
            Outcome::NotLeader
        };
        self.metrics.executor_depth.dec();
        if let Write::PreBind { .. } = &write {
            self.after_prebind(&write, &outcome);
        }
        if let Write::Bind {
            cluster,
            namespace,
            name,
            ..
        } = &write
            && let Some((_, claims)) =
                self.reserved
                    .remove(&(cluster.clone(), namespace.clone(), name.clone()))
            && matches!(outcome, Outcome::Failed { .. })
        {
            self.unreserve(cluster, namespace, name, claims);
        }
        if let (
            Write::Bind {
                cluster,
                namespace,
                name,
                node,
                ..
            },
            Outcome::Ok,
        ) = (&write, &outcome)
        {
            // As kube-scheduler and Volcano record it on every pod they bind.
            self.event(Write::Event {
                cluster: cluster.clone(),
                namespace: namespace.clone(),
                kind: crate::writes::Involved::Pod,
                group: name.clone(),
                uid: None,
                reason: "Scheduled".into(),
                message: format!("Successfully assigned {namespace}/{name} to {node}"),
                warning: false,
            });
        }
        let _ = self.done.send(Done { write, outcome });
    }

    /// A gang's claims were written: once they are bound its binds go out; if they were not
    /// written or are not bound in time, every one of its binds fails with the reason, and an
    /// Event on each pod says it.
    fn after_prebind(self: &Arc<Self>, write: &Write, outcome: &Outcome) {
        let Write::PreBind {
            cluster,
            job,
            steps,
            devices,
            then,
        } = write
        else {
            return;
        };
        // What the PreBind reserved (or tried to), by pod.
        let mut reserved: std::collections::BTreeMap<(String, String), Vec<String>> =
            Default::default();
        for d in devices.iter().filter(|d| d.reserve) {
            reserved
                .entry((d.namespace.clone(), d.pod.clone()))
                .or_default()
                .push(d.claim.clone());
        }
        let me = Arc::clone(self);
        let (cluster, job, steps, then) =
            (cluster.clone(), job.clone(), steps.clone(), then.clone());
        let written = outcome.clone();
        tokio::spawn(async move {
            let client = me.clients.member(&cluster);
            let result = match (&written, client) {
                (Outcome::Ok, Some(client)) => {
                    crate::prebind::wait_bound(&client, &steps, me.volume_bind_timeout).await
                }
                (Outcome::Ok, None) => Err("no client for the cluster (it left the fleet)".into()),
                (Outcome::Failed { message, .. }, _) => Err(format!("binding volumes: {message}")),
                (Outcome::NotLeader, _) => Err("not the leader".into()),
            };
            match result {
                Ok(()) => {
                    // Each bind that ends refused gives its pod's claims back.
                    for ((namespace, pod), claims) in reserved {
                        me.reserved
                            .insert((cluster.clone(), namespace, pod), claims);
                    }
                    me.resubmit(then)
                }
                Err(message) => {
                    tracing::warn!(cluster = %cluster, job = %job, error = %message,
                        "volumes not bound; the gang is placed again next session");
                    if written != Outcome::NotLeader {
                        for ((namespace, pod), claims) in reserved {
                            me.unreserve(&cluster, &namespace, &pod, claims);
                        }
                    }
                    for w in then {
                        me.failed_prebind(&cluster, &w, &message).await;
                        let _ = me.done.send(Done {
                            write: w,
                            outcome: Outcome::Failed {
                                code: 0,
                                message: message.clone(),
                            },
                        });
                    }
                }
            }
        });
    }

    /// Gives back the ResourceClaims a PreBind reserved for `pod` (kube-scheduler's
    /// Unreserve), in the background: its bind did not happen.
    fn unreserve(&self, cluster: &str, namespace: &str, pod: &str, claims: Vec<String>) {
        let Some(client) = self.clients.member(cluster) else {
            return;
        };
        if !self.leadership.is_leader() {
            return;
        }
        let (cluster, namespace, pod) =
            (cluster.to_string(), namespace.to_string(), pod.to_string());
        tokio::spawn(async move {
            match crate::prebind::unreserve(&client, &namespace, &claims, &pod).await {
                Ok(()) => tracing::info!(cluster = %cluster, pod = %format!("{namespace}/{pod}"),
                    claims = ?claims, "bind not done: the pod's ResourceClaim reservations given back"),
                Err(e) => tracing::warn!(cluster = %cluster, pod = %format!("{namespace}/{pod}"),
                    claims = ?claims, error = %e,
                    "bind not done, and the pod's ResourceClaim reservations not given back; its next placement reuses them"),
            }
        });
    }

    /// Queues a best-effort Event for the event workers, or counts it dropped.
    fn event(&self, w: Write) {
        if self.events.try_send(w).is_err() {
            self.metrics.events_dropped.inc();
        }
    }

    /// Sends an Event once, outside the rate limit and the retries of the writes that matter.
    async fn best_effort(&self, w: &Write) {
        let Some(client) = self.clients.for_write(w) else {
            return;
        };
        if let Err(e) = self.once(client, w).await {
            let code = match &e {
                kube::Error::Api(s) => s.code,
                _ => 0,
            };
            let cluster = match w {
                Write::Event { cluster, .. } => cluster.as_str(),
                _ => "",
            };
            self.metrics.api_error(cluster, w.verb(), code);
            tracing::debug!(error = %e, "best-effort Event not recorded");
        }
    }

    /// Queues writes again (a gang's binds once its claims are bound).
    fn resubmit(&self, writes: Vec<Write>) {
        for w in writes {
            self.metrics.executor_depth.inc();
            self.enqueue(w);
        }
    }

    /// Records on a pod that its volumes kept it from being bound, as kube-scheduler's
    /// FailedScheduling does.
    async fn failed_prebind(&self, cluster: &str, w: &Write, message: &str) {
        let (Write::Bind {
            namespace, name, ..
        }
        | Write::Place {
            namespace, name, ..
        }) = w
        else {
            return;
        };
        let Some(client) = self.clients.member(cluster) else {
            return;
        };
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let uid = pods
            .get_opt(name)
            .await
            .ok()
            .flatten()
            .and_then(|p| p.metadata.uid);
        let api: Api<Event> = Api::namespaced(client, namespace);
        let mut ev = event(
            &EventFor {
                namespace,
                api_version: "v1",
                kind: "Pod",
                name,
                uid,
            },
            "FailedScheduling",
            &format!("running PreBind plugin \"VolumeBinding\": {message}"),
            true,
            "volcano",
            &self.identity,
        );
        ev.action = Some("Scheduling".into());
        if let Err(e) = api.create(&PostParams::default(), &ev).await {
            tracing::debug!(pod = %name, error = %e, "could not record the FailedScheduling Event");
        }
    }

    async fn run(&self, w: &Write) -> Outcome {
        let Some(client) = self.clients.for_write(w) else {
            return Outcome::Failed {
                code: 0,
                message: "no client for the cluster (it left the fleet)".into(),
            };
        };
        let cluster = match w {
            Write::Bind { cluster, .. }
            | Write::Place { cluster, .. }
            | Write::Evict { cluster, .. }
            | Write::Purge { cluster, .. }
            | Write::Nominate { cluster, .. }
            | Write::PodCondition { cluster, .. }
            | Write::PreBind { cluster, .. }
            | Write::GroupStatus { cluster, .. }
            | Write::KubeGroupConditions { cluster, .. }
            | Write::GroupAnnotation { cluster, .. }
            | Write::HyperNodeStatus { cluster, .. }
            | Write::Deallocate { cluster, .. }
            | Write::Event { cluster, .. } => cluster.as_str(),
            Write::QueueStatus { .. }
            | Write::Binding { .. }
            | Write::DeclaredStatus { .. }
            | Write::DeclaredMember { .. }
            | Write::EvictionTasks { .. }
            | Write::BindingStatus { .. } => "control-plane",
        };
        // The client's own log lines (a connection refused) name the cluster through this span,
        // at the error level so that it is there whatever level the log shows.
        let span = tracing::error_span!("write", cluster);
        // A vGPU pod's node lock is taken before its bind, and let go if the bind fails.
        let lock = match w {
            Write::Bind {
                node,
                gpu_lock: true,
                ..
            }
            | Write::Place {
                node,
                gpu_lock: true,
                ..
            } => Some(node.as_str()),
            _ => None,
        };
        if let Some(node) = lock
            && let Err(e) = crate::gpu_lock::take(client.clone(), node)
                .instrument(span.clone())
                .await
        {
            let (code, message) = match &e {
                kube::Error::Api(s) => (s.code, s.message.clone()),
                other => (0, other.to_string()),
            };
            self.metrics.api_error(cluster, "lock", code);
            return Outcome::Failed { code, message };
        }
        let outcome = self
            .attempts(client.clone(), w, cluster)
            .instrument(span)
            .await;
        if let (Some(node), Outcome::Failed { .. }) = (lock, &outcome) {
            crate::gpu_lock::release(client, node).await;
        }
        outcome
    }

    /// Writes `w` to `cluster` with `client`, retrying what may succeed later: with the
    /// cluster's client of the moment, so that a write refused during a credential rotation
    /// (401) succeeds once the member reconnected with the new token.
    async fn attempts(&self, mut client: Client, w: &Write, cluster: &str) -> Outcome {
        let mut delay = Duration::from_millis(50);
        for attempt in 0..=RETRIES {
            if attempt > 0
                && let Some(now) = self.clients.for_write(w)
            {
                client = now;
            }
            self.limiter.acquire().await;
            let started = Instant::now();
            let result = self.once(client.clone(), w).await;
            self.metrics
                .write_latency
                .with_label_values(&[w.verb()])
                .observe(ms(started.elapsed()));
            let e = match result {
                Ok(()) => return Outcome::Ok,
                Err(e) => e,
            };
            let (code, message) = match &e {
                kube::Error::Api(s) => (s.code, s.message.clone()),
                other => (0, other.to_string()),
            };
            self.metrics.api_error(cluster, w.verb(), code);
            // A bind that conflicts means the pod is bound already (or gone): retrying cannot
            // help. Throttling, server errors, lost connections and a token being rotated are
            // retried.
            let retry = matches!(code, 0 | 401 | 429 | 500..=599)
                || (code == 409 && !matches!(w, Write::Bind { .. }));
            if !retry || attempt == RETRIES {
                tracing::warn!(cluster, verb = w.verb(), code, error = %message, "write failed");
                return Outcome::Failed { code, message };
            }
            tokio::time::sleep(delay).await;
            delay *= 2;
        }
        Outcome::Failed {
            code: 0,
            message: "retries exhausted".into(),
        }
    }

    async fn once(&self, client: Client, w: &Write) -> Result<(), kube::Error> {
        match w {
            Write::Bind {
                namespace,
                name,
                node,
                annotations,
                ..
            } => {
                let pods: Api<Pod> = Api::namespaced(client, namespace);
                // The API server sets the binding's annotations on the pod as it binds it.
                let mut body = tephra_api::binding::pod_binding(namespace, name, node);
                if !annotations.is_empty() {
                    body.metadata.annotations = Some(annotations.clone());
                }
                pods.create_subresource::<_, serde_json::Value>(
                    "binding",
                    name,
                    &PostParams::default(),
                    &body,
                )
                .await?;
                Ok(())
            }
            Write::Place {
                cluster,
                namespace,
                node,
                pod,
                extender,
                annotations,
                ..
            } => {
                let pod = pod.pod().map_err(kube::Error::SerdeError)?;
                let name = pod.metadata.name.clone().unwrap_or_default();
                let mut pod = crate::writes::member_pod(pod, cluster, node, extender.as_ref());
                if !annotations.is_empty() {
                    pod.metadata
                        .annotations
                        .get_or_insert_with(Default::default)
                        .extend(annotations.clone());
                }
                crate::place::copy(&self.clients.control, &client, namespace, pod).await?;
                match &self.virtual_node {
                    Some(vn) => {
                        crate::virtual_node::bind(&self.clients.control, namespace, &name, vn).await
                    }
                    None => Ok(()),
                }
            }
            Write::DeclaredStatus {
                namespace,
                name,
                status,
            } => {
                let pods: Api<Pod> = Api::namespaced(client, namespace);
                let patch = json!({"status": status});
                match pods
                    .patch_status(name, &PatchParams::default(), &Patch::Strategic(patch))
                    .await
                {
                    Ok(_) => Ok(()),
                    // The declared pod is gone: nothing to report on.
                    Err(e) if crate::gone::is_gone(&e) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Write::DeclaredMember {
                namespace,
                name,
                member,
            } => {
                let pods: Api<Pod> = Api::namespaced(client, namespace);
                let patch = json!({"metadata": {"labels": {
                    tephra_api::well_known::MEMBER: member
                }}});
                done_if_gone(
                    pods.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await,
                )
            }
            Write::Binding {
                namespace,
                name,
                object,
                replaces,
            } => {
                // A Kubernetes PodGroup is named at the version the control plane serves.
                let kube = format!("{}/{}", crate::workload_api::GROUP, "v1beta1");
                let mut rb = None;
                if object.spec.resource.api_version == kube {
                    let version = self.workload_versions.of("control-plane", &client).await;
                    if version != "v1beta1" {
                        let mut o = (**object).clone();
                        let at = format!("{}/{version}", crate::workload_api::GROUP);
                        o.spec.resource.api_version.clone_from(&at);
                        for r in o.metadata.owner_references.iter_mut().flatten() {
                            if r.api_version == kube {
                                r.api_version.clone_from(&at);
                            }
                        }
                        rb = Some(o);
                    }
                }
                let api: Api<ResourceBinding> = Api::namespaced(client, namespace);
                if *replaces {
                    done_if_gone(api.delete(name, &Default::default()).await)?;
                }
                let params = PatchParams::apply("tephra-scheduler").force();
                let body = rb.as_ref().unwrap_or(&**object);
                api.patch(name, &params, &Patch::Apply(body)).await?;
                Ok(())
            }
            Write::Purge {
                namespace, name, ..
            } => {
                let pods: Api<Pod> = Api::namespaced(client, namespace);
                done_if_gone(pods.delete(name, &Default::default()).await)
            }
            Write::Nominate {
                namespace,
                name,
                node,
                ..
            } => {
                let pods: Api<Pod> = Api::namespaced(client, namespace);
                let patch = json!({"status": {"nominatedNodeName": node}});
                let params = PatchParams::default();
                done_if_gone(
                    pods.patch_status(name, &params, &Patch::Merge(&patch))
                        .await,
                )
            }
            Write::PodCondition {
                namespace,
                name,
                reason,
                message,
                ..
            } => {
                let pods: Api<Pod> = Api::namespaced(client, namespace);
                // Strategic merge: conditions merge by type, the others stay.
                let patch = json!({"status": {"conditions": [{"type": "PodScheduled",
                    "status": "False", "reason": reason, "message": message,
                    "lastProbeTime": null,
                    "lastTransitionTime": k8s_openapi::jiff::Timestamp::now()
                        .round(k8s_openapi::jiff::Unit::Second)
                        .map(|t| t.to_string())
                        .unwrap_or_default()}]}});
                let params = PatchParams::default();
                done_if_gone(
                    pods.patch_status(name, &params, &Patch::Strategic(&patch))
                        .await,
                )
            }
            Write::BindingStatus {
                namespace,
                name,
                status,
            } => {
                let api: Api<ResourceBinding> = Api::namespaced(client, namespace);
                let patch = json!({ "status": status });
                let params = PatchParams::default();
                done_if_gone(api.patch_status(name, &params, &Patch::Merge(&patch)).await)
            }
            Write::EvictionTasks {
                namespace,
                name,
                tasks,
            } => {
                let api: Api<ResourceBinding> = Api::namespaced(client, namespace);
                let patch = json!({"spec": {"gracefulEvictionTasks": tasks}});
                let params = PatchParams::default();
                done_if_gone(api.patch(name, &params, &Patch::Merge(&patch)).await)
            }
            Write::Evict {
                namespace,
                name,
                reason,
                ..
            } => {
                let pods: Api<Pod> = Api::namespaced(client, namespace);
                let condition = json!({"status": {"conditions": [{
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "PreemptionByScheduler",
                    "message": reason,
                    "lastTransitionTime": Time(k8s_openapi::jiff::Timestamp::now()),
                }]}});
                // The condition is best effort; the eviction is what matters.
                if let Err(e) = pods
                    .patch_status(name, &PatchParams::default(), &Patch::Strategic(condition))
                    .await
                {
                    tracing::debug!(pod = %name, error = %e, "could not mark the pod DisruptionTarget");
                }
                match pods.evict(name, &EvictParams::default()).await {
                    Ok(_) => Ok(()),
                    // Gone already: evicted.
                    Err(e) if crate::gone::is_gone(&e) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Write::GroupStatus {
                namespace,
                name,
                status,
                ..
            } => {
                let api: Api<PodGroup> = Api::namespaced(client, namespace);
                let patch = json!({"status": status});
                // Volcano's PodGroup CRD has no status subresource: the status is part of the
                // object, as Volcano's scheduler writes it.
                api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                    .await?;
                Ok(())
            }
            Write::KubeGroupConditions {
                cluster,
                namespace,
                name,
                conditions,
            } => {
                let version = self.workload_versions.of(cluster, &client).await;
                let resource = kube::discovery::ApiResource::from_gvk_with_plural(
                    &kube::api::GroupVersionKind::gvk(
                        crate::workload_api::GROUP,
                        version,
                        "PodGroup",
                    ),
                    "podgroups",
                );
                let api: Api<kube::api::DynamicObject> =
                    Api::namespaced_with(client, namespace, &resource);
                // The list is written whole: a merge patch replaces a list, and it holds the
                // conditions observed besides tephra's own.
                let patch = json!({"status": {"conditions": conditions}});
                match api
                    .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(e) if crate::gone::is_gone(&e) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Write::GroupAnnotation {
                namespace,
                name,
                set,
                ..
            } => {
                let api: Api<PodGroup> = Api::namespaced(client, namespace);
                let annotations: serde_json::Map<String, serde_json::Value> =
                    set.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
                let patch = json!({"metadata": {"annotations": annotations}});
                match api
                    .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(e) if crate::gone::is_gone(&e) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Write::QueueStatus { name, status } => {
                let api: Api<Queue> = Api::all(client);
                match api
                    .patch_status(
                        name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": status})),
                    )
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(e) if crate::gone::is_gone(&e) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Write::HyperNodeStatus {
                name, node_count, ..
            } => {
                let api: Api<tephra_api::HyperNode> = Api::all(client);
                let patch = Patch::Merge(json!({"status": {"nodeCount": node_count}}));
                match api
                    .patch_status(name, &PatchParams::default(), &patch)
                    .await
                {
                    Ok(_) => Ok(()),
                    Err(e) if crate::gone::is_gone(&e) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Write::PreBind { steps, devices, .. } => {
                let control = &self.clients.control;
                crate::prebind::write_claims(&client, control, steps).await?;
                crate::prebind::write_devices(&client, control, devices).await
            }
            Write::Deallocate {
                cluster,
                namespace,
                claim,
                pod,
                resource_version,
            } => {
                let done =
                    crate::prebind::deallocate(&client, namespace, claim, pod, resource_version)
                        .await?;
                if done {
                    tracing::info!(cluster = %cluster, claim = %format!("{namespace}/{claim}"), pod = %pod,
                        "ResourceClaim deallocated: its devices kept the pod off the nodes that could take it");
                }
                Ok(())
            }
            Write::Event {
                namespace,
                kind,
                group,
                uid,
                reason,
                message,
                warning,
                ..
            } => {
                let (api_version, kind) = kind.type_meta();
                let api: Api<Event> = Api::namespaced(client, namespace);
                let mut event = event(
                    &EventFor {
                        namespace,
                        api_version,
                        kind,
                        name: group,
                        uid: uid.clone(),
                    },
                    reason,
                    message,
                    *warning,
                    "volcano",
                    &self.identity,
                );
                event.action = Some("Scheduling".into());
                api.create(&PostParams::default(), &event).await?;
                Ok(())
            }
        }
    }
}
