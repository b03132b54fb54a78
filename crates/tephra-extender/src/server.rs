//! The extender over HTTP, as kube-scheduler calls it: `POST /filter`, `/prioritize`, `/bind`
//! and `/preempt` with its JSON, `GET /healthz` and `/metrics`. The answers come from
//! [`crate::verbs`] and [`crate::barrier`]; binds released by the barrier go to the member's
//! API (`pods/binding`). A held bind's request waits for its release; a restart loses only
//! held binds, which kube-scheduler retries.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use dashmap::DashMap;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use tokio::sync::oneshot;

use crate::barrier::{Arrival, Barrier, Release, Ticket};
use crate::index::Index;
use crate::metrics::Metrics;
use crate::verbs;
use crate::wire::{
    ExtenderArgs, ExtenderBindingArgs, ExtenderBindingResult, ExtenderPreemptionArgs,
    ExtenderPreemptionResult, HostPriorityList,
};

/// How the extender runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long a gang's barrier waits for the rest of the gang (keep it below
    /// kube-scheduler's `httpTimeout`, 30 s by default).
    pub bind_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            bind_timeout: Duration::from_secs(20),
        }
    }
}

/// The extender's shared state. The barrier, the parked bind requests and the ticket counter
/// are shared without one lock (a `DashMap` per gang, an atomic): concurrent binds of
/// different gangs do not wait for each other (README, "Shared state").
pub struct Extender {
    index: Mutex<Index>,
    barrier: Barrier,
    waiting: DashMap<Ticket, oneshot::Sender<Result<(), String>>>,
    next_ticket: AtomicU64,
    member: kube::Client,
    started: Instant,
    /// Metrics served on `/metrics`.
    pub metrics: Metrics,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Extender {
    /// An extender binding through `member`.
    pub fn new(member: kube::Client, opts: &Options) -> Result<Arc<Self>, prometheus::Error> {
        let timeout = i64::try_from(opts.bind_timeout.as_millis()).unwrap_or(i64::MAX);
        Ok(Arc::new(Self {
            index: Mutex::new(Index::default()),
            barrier: Barrier::new(timeout),
            waiting: DashMap::new(),
            next_ticket: AtomicU64::new(0),
            member,
            started: Instant::now(),
            metrics: Metrics::new()?,
        }))
    }

    fn now_ms(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// The index, for the watch to feed.
    pub fn index(&self) -> MutexGuard<'_, Index> {
        lock(&self.index)
    }

    /// A pod changed in the member: a held bind whose plan moved is released with an error.
    pub fn pod_changed(self: &Arc<Self>, p: &Pod) {
        let key = crate::index::key_of(p);
        let moved = self.index().upsert_pod(p);
        if moved {
            self.release_gang_of(
                &key,
                "its plan changed while the gang waited at the barrier",
            );
        }
    }

    /// A pod is gone from the member.
    pub fn pod_gone(self: &Arc<Self>, key: &str) {
        self.index().remove_pod(key);
        self.release_gang_of(
            key,
            "a pod of the gang was deleted while it waited at the barrier",
        );
    }

    fn release_gang_of(self: &Arc<Self>, pod: &str, why: &str) {
        let out = match self.barrier.gang_of(pod) {
            Some(g) => self.barrier.release(&g, why),
            None => Vec::new(),
        };
        self.carry_out(out);
    }

    fn filter(&self, args: &ExtenderArgs<'_>) -> Result<Vec<u8>, serde_json::Error> {
        if let Some(p) = &args.pod {
            self.index().upsert_pod(p);
        }
        serde_json::to_vec(&verbs::filter(args, &self.index()))
    }

    /// Takes one bind to the barrier; resolves when it is bound or refused.
    async fn bind(self: &Arc<Self>, args: ExtenderBindingArgs) -> Result<(), String> {
        let key = format!("{}/{}", args.pod_namespace, args.pod_name);
        let (gang, role, needs, bound) = {
            let index = self.index();
            let info = index.pod(&key).cloned();
            match info.as_ref().and_then(|i| i.gang.clone()) {
                Some(g) => {
                    let needs = index.needs(&g);
                    let bound: Vec<Option<String>> = index
                        .bound(&g)
                        .into_iter()
                        .filter(|(k, _)| *k != key)
                        .map(|(_, r)| r.map(str::to_string))
                        .collect();
                    (Some(g), info.and_then(|i| i.role), needs, bound)
                }
                None => (None, None, Default::default(), Vec::new()),
            }
        };
        let Some(gang) = gang else {
            // Not part of a gang: bound at once, as kube-scheduler's own binder would.
            return self
                .bind_now(&args.pod_namespace, &args.pod_name, &args.node)
                .await;
        };
        let (tx, rx) = oneshot::channel();
        let ticket = self.next_ticket.fetch_add(1, Ordering::Relaxed) + 1;
        self.waiting.insert(ticket, tx);
        let arrival = Arrival {
            ticket,
            pod: key,
            role,
            node: args.node.clone(),
        };
        let bound: Vec<Option<&str>> = bound.iter().map(Option::as_deref).collect();
        let now = self.now_ms();
        let out = self.barrier.arrive(&gang, arrival, &needs, &bound, now);
        self.metrics.held.set(self.barrier.held() as i64);
        self.carry_out(out);
        let waited = Instant::now();
        let answer = rx
            .await
            .unwrap_or_else(|_| Err("the extender dropped the bind".into()));
        self.metrics
            .barrier_wait
            .observe(waited.elapsed().as_secs_f64());
        answer
    }

    /// Carries out released binds (each through the member's API) and refusals.
    fn carry_out(self: &Arc<Self>, out: Vec<Release>) {
        for r in out {
            match r {
                Release::Fail(ticket, why) => {
                    if let Some((_, tx)) = self.waiting.remove(&ticket) {
                        let _ = tx.send(Err(why));
                    }
                }
                Release::Bind(a) => {
                    let me = Arc::clone(self);
                    tokio::spawn(async move {
                        let (ns, name) = a.pod.split_once('/').unwrap_or(("default", &a.pod));
                        let result = me.bind_now(ns, name, &a.node).await;
                        if let Some((_, tx)) = me.waiting.remove(&a.ticket) {
                            let _ = tx.send(result);
                        }
                    });
                }
            }
        }
    }

    async fn bind_now(&self, ns: &str, name: &str, node: &str) -> Result<(), String> {
        let pods: Api<Pod> = Api::namespaced(self.member.clone(), ns);
        let body = tephra_api::binding::pod_binding(ns, name, node);
        pods.create_subresource::<_, serde_json::Value>(
            "binding",
            name,
            &PostParams::default(),
            &body,
        )
        .await
        .map(|_| ())
        .map_err(|e| format!("binding {ns}/{name} to {node}: {e}"))
    }

    /// Fails the binds of gangs past their timeout; runs until the process ends.
    pub async fn expire_loop(self: Arc<Self>) {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let out = self.barrier.expire(self.now_ms());
            if !out.is_empty() {
                self.metrics.timeouts.inc_by(out.len() as u64);
                tracing::info!(
                    binds = out.len(),
                    "gang barrier timed out; nothing of the gang was bound"
                );
            }
            self.metrics.held.set(self.barrier.held() as i64);
            self.carry_out(out);
        }
    }
}

fn timed(ext: &Extender, verb: &str, started: Instant) {
    ext.metrics
        .latency
        .with_label_values(&[verb])
        .observe(started.elapsed().as_secs_f64());
}

/// A request's JSON, decoded in place (node names borrow from `body`); a body that is not the
/// verb's JSON is answered 400 with serde's account of what is wrong and where.
fn decode<'a, T: serde::Deserialize<'a>>(body: &'a [u8]) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("the request is not the verb's JSON: {e}"))
}

fn bad_request(why: String) -> Response {
    (StatusCode::BAD_REQUEST, why).into_response()
}

async fn filter(State(ext): State<Arc<Extender>>, body: Bytes) -> Response {
    let started = Instant::now();
    let args: ExtenderArgs<'_> = match decode(&body) {
        Ok(a) => a,
        Err(why) => return bad_request(why),
    };
    let out = ext.filter(&args);
    timed(&ext, "filter", started);
    match out {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn prioritize(State(ext): State<Arc<Extender>>, body: Bytes) -> Response {
    let started = Instant::now();
    let args: ExtenderArgs<'_> = match decode(&body) {
        Ok(a) => a,
        Err(why) => return bad_request(why),
    };
    let out: HostPriorityList = verbs::prioritize(&args, &ext.index());
    timed(&ext, "prioritize", started);
    Json(out).into_response()
}

async fn preempt(
    State(ext): State<Arc<Extender>>,
    Json(args): Json<ExtenderPreemptionArgs>,
) -> Json<ExtenderPreemptionResult> {
    let started = Instant::now();
    let out = verbs::preempt(&args, &ext.index());
    timed(&ext, "preempt", started);
    Json(out)
}

async fn bind(
    State(ext): State<Arc<Extender>>,
    Json(args): Json<ExtenderBindingArgs>,
) -> Json<ExtenderBindingResult> {
    let started = Instant::now();
    let error = ext.bind(args).await.err().unwrap_or_default();
    timed(&ext, "bind", started);
    Json(ExtenderBindingResult { error })
}

async fn metrics(State(ext): State<Arc<Extender>>) -> Response {
    match ext.metrics.render() {
        Ok(text) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// The extender's routes.
pub fn router(ext: Arc<Extender>) -> Router {
    Router::new()
        .route("/filter", post(filter))
        .route("/prioritize", post(prioritize))
        .route("/bind", post(bind))
        .route("/preempt", post(preempt))
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(metrics))
        .with_state(ext)
}

/// Serves `ext` on `addr` until the task is dropped; returns the address bound (port 0 picks
/// one).
pub async fn serve(
    ext: Arc<Extender>,
    addr: SocketAddr,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(Arc::clone(&ext).expire_loop());
    let app = router(ext);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "extender server stopped");
        }
    });
    Ok((bound, task))
}
